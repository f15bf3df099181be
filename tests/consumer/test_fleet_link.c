/* A host link's state machine (consumer/fleet/link.h) in simulated time:
 * silent partitions of 2 and 10 minutes, the backoff, the guard, and
 * links without heartbeats, each run in milliseconds of real time. No
 * sleep, no loop, no clock: the test plays the owner, jumping from one
 * deadline the link names to the next.
 *
 * The simulated network: outside a partition every call is answered at
 * once and every connection attempt comes up at once; inside one nothing
 * is answered, and an attempt begun inside hangs until its guard (as a
 * TLS handshake does through a silent proxy). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "consumer/fleet/link.h"

#define DEAD_LINK_MS 10000
#define RECONNECT_MS (5 * 60 * 1000)
#define T0 1000
#define PART_FROM 60000
#define MAX_STEPS 100000

typedef struct sim {
  tg_link_t l;
  uint64_t now;
  uint64_t part_from, part_to; /* the silent partition: [from, to) */
  bool refuse;                 /* attempts are refused at once */
  bool no_heartbeat;           /* a peer without TracegateRelay */
  uint64_t call_since;         /* no heartbeat: a read waits since; 0 none */
  /* What happened, and when. */
  uint64_t waits[64]; /* BACKOFF: each wait before the next attempt */
  size_t n_waits;
  tg_link_state_t states[512];
  size_t n_states;
  uint64_t dead_at, resumed_at, failed_at, down;
  int fail_rv;
  unsigned steps;
} sim_t;

static bool partitioned(const sim_t *s) {
  return s->now >= s->part_from && s->now < s->part_to;
}

static void on_state(tg_link_t *l, tg_link_state_t from, const char *why) {
  (void)why;
  sim_t *s = l->data;
  /* Every transition a scenario makes is one of link.h's. */
  assert_true(tg_link_transition_ok(from, l->state));
  if (s->n_states < sizeof(s->states) / sizeof(s->states[0]))
    s->states[s->n_states++] = l->state;
  if (l->state == TG_LINK_BACKOFF &&
      s->n_waits < sizeof(s->waits) / sizeof(s->waits[0]))
    s->waits[s->n_waits++] = l->retry_ms - s->now;
}

static void sim_init(sim_t *s, uint64_t reconnect_ms) {
  memset(s, 0, sizeof(*s));
  s->part_from = s->part_to = UINT64_MAX;
  tg_link_timing_t tm = {.dead_link_ms = DEAD_LINK_MS,
                         .reconnect_ms = reconnect_ms};
  tg_link_init(&s->l, &tm, "h1", on_state, s);
  s->now = T0;
}

/* An attempt that gets through: bound, then up or resumed. */
static void attempt(sim_t *s) {
  tg_link_attempt_begin(&s->l, s->now);
  if (s->refuse) {
    tg_link_drop(&s->l, TG_LINK_DROP_PEER, "connection refused");
    s->fail_rv = tg_link_attempt_failed(&s->l, s->now, "connection refused");
    if (s->fail_rv < 0) s->failed_at = s->now;
    return;
  }
  if (partitioned(s)) return; /* hangs until the guard */
  tg_link_bound(&s->l);
  if (s->l.state == TG_LINK_PREPARING) {
    tg_link_up(&s->l, s->now, !s->no_heartbeat);
  } else {
    s->down = tg_link_resumed(&s->l, s->now, !s->no_heartbeat);
    s->resumed_at = s->now;
    s->call_since = 0; /* the calls on the lost connection are gone */
  }
}

/* One deadline: jump to it and do what the link asks, as fleet/host.c
 * does. False when the link has nothing left to decide before |until|. */
static bool sim_step(sim_t *s, uint64_t until) {
  uint64_t at = tg_link_deadline(&s->l);
  if (at == TG_LINK_NEVER || at > until) return false;
  assert_true(at >= s->now); /* time never goes back */
  s->now = at;
  assert_true(++s->steps < MAX_STEPS);
  uint64_t waiting = s->call_since ? s->now - s->call_since : 0;
  switch (tg_link_due(&s->l, s->now, waiting)) {
    case TG_LINK_DUE_NONE:
      break;
    case TG_LINK_DUE_HEARTBEAT:
      tg_link_heartbeat_sent(&s->l);
      if (!partitioned(s)) {
        tg_link_heard(&s->l, s->now);
        tg_link_heartbeat_done(&s->l);
      }
      break;
    case TG_LINK_DUE_DEAD:
      /* The owner closes the connection; once released, the session can
       * be resumed. */
      assert_int_equal(s->l.state, TG_LINK_DROPPING);
      assert_int_equal(s->l.drop, TG_LINK_DROP_DEAD);
      if (!s->dead_at) s->dead_at = s->now;
      tg_link_lost(&s->l, s->now, "a dead link");
      break;
    case TG_LINK_DUE_GUARD:
      assert_true(tg_link_reconnecting(&s->l));
      tg_link_drop(&s->l, TG_LINK_DROP_ATTEMPT, "no answer within 20 s");
      s->fail_rv = tg_link_attempt_failed(&s->l, s->now, "no answer");
      if (s->fail_rv < 0) {
        s->failed_at = s->now;
        tg_link_outage_end(&s->l, s->now); /* as fleet/host.c's finish() */
        tg_link_set_state(&s->l, TG_LINK_FAILING, "reconnect deadline");
        tg_link_set_state(&s->l, TG_LINK_FAILED, "closed");
      }
      break;
    case TG_LINK_DUE_ATTEMPT:
      attempt(s);
      break;
  }
  return true;
}

static void sim_run(sim_t *s, uint64_t until) {
  while (sim_step(s, until)) {
  }
}

/* A link up at T0 behind a relay, silent from PART_FROM for |len|. */
static void partition(sim_t *s, uint64_t len, uint64_t until) {
  sim_init(s, RECONNECT_MS);
  s->part_from = PART_FROM;
  s->part_to = PART_FROM + len;
  attempt(s);
  assert_int_equal(s->l.state, TG_LINK_UP);
  sim_run(s, until);
}

static void dead_link_is_found_one_timeout_after_the_last_answer(void **st) {
  (void)st;
  sim_t s;
  partition(&s, 2 * 60 * 1000, PART_FROM + 20000);
  /* Heartbeats every second from T0; the last answered one went at
   * 59000, the one at 60000 met the partition. */
  assert_int_equal(s.l.hb_period_ms, 1000);
  assert_int_equal(s.dead_at, 59000 + DEAD_LINK_MS + 1);
  /* The outage counts from the last answer, not from its discovery. */
  assert_int_equal(s.l.lost_at_ms, 59000);
  assert_int_equal(s.l.deadline_ms, s.dead_at + RECONNECT_MS);
}

static void two_minute_partition_is_survived_with_the_session(void **st) {
  (void)st;
  sim_t s;
  partition(&s, 2 * 60 * 1000, 10 * 60 * 1000);
  /* Lost at 69001; attempts at 69101, 89301, 109701, 130501, 152101 and
   * 175301 hang in the partition (until 180000) and are cut by their
   * guard 20 s later; the one at 200301 gets through. */
  const uint64_t waits[] = {100, 200, 400, 800, 1600, 3200, 5000};
  assert_int_equal(s.n_waits, 7);
  for (size_t i = 0; i < 7; i++) assert_int_equal(s.waits[i], waits[i]);
  assert_int_equal(s.resumed_at, 200301);
  assert_int_equal(s.down, 200301 - 59000);
  assert_int_equal(s.l.down_ms, s.down);
  tg_link_outage_end(&s.l, s.now); /* resumed: none open */
  assert_int_equal(s.l.down_ms, s.down);
  assert_int_equal(s.l.reconnects, 1);
  assert_int_equal(s.l.attempts, 7);
  assert_int_equal(s.l.state, TG_LINK_UP);
  assert_int_equal(s.failed_at, 0);
  /* Heartbeats go on afterwards; the link stays up to the end. */
  assert_true(s.l.heard_ms >= 10 * 60 * 1000 - 1000);
}

static void ten_minute_partition_fails_at_the_reconnect_deadline(void **st) {
  (void)st;
  sim_t s;
  partition(&s, 10 * 60 * 1000, 20 * 60 * 1000);
  /* The deadline is 369001: the attempt begun at 350301 is the last one,
   * and its guard at 370301 finds the deadline past. */
  assert_int_equal(s.l.deadline_ms, 369001);
  assert_int_equal(s.fail_rv, -ETIMEDOUT);
  assert_int_equal(s.failed_at, 370301);
  assert_true(s.failed_at >= s.l.deadline_ms);
  assert_true(s.failed_at < s.l.deadline_ms + TG_LINK_CONNECT_GUARD_MS);
  assert_int_equal(s.l.state, TG_LINK_FAILED);
  assert_int_equal(s.l.reconnects, 0);
  assert_int_equal(s.resumed_at, 0);
  /* The outage that was never survived still counts, from the last
   * answer to the end, and once. */
  assert_int_equal(s.l.down_ms, s.failed_at - 59000);
  tg_link_outage_end(&s.l, s.failed_at + 5000);
  assert_int_equal(s.l.down_ms, s.failed_at - 59000);
  /* Nothing is left to decide: the owner's timer stops. */
  assert_int_equal(tg_link_deadline(&s.l), TG_LINK_NEVER);
}

static void backoff_doubles_from_100_ms_to_5_s(void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, RECONNECT_MS);
  attempt(&s);
  s.refuse = true;
  tg_link_drop(&s.l, TG_LINK_DROP_PEER, "reset");
  tg_link_lost(&s.l, s.now, "reset");
  sim_run(&s, s.now + 60000);
  const uint64_t want[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000};
  assert_true(s.n_waits >= 9);
  for (size_t i = 0; i < 9; i++) assert_int_equal(s.waits[i], want[i]);
}

static void the_last_wait_is_cut_to_the_deadline(void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, 1000);
  attempt(&s);
  s.refuse = true;
  tg_link_drop(&s.l, TG_LINK_DROP_PEER, "reset");
  tg_link_lost(&s.l, s.now, "reset");
  sim_run(&s, s.now + 60000);
  /* 100, 200, 400, then what is left of the second (300), then the
   * deadline: no attempt begins after it. */
  const uint64_t want[] = {100, 200, 400, 300};
  assert_int_equal(s.n_waits, 4);
  for (size_t i = 0; i < 4; i++) assert_int_equal(s.waits[i], want[i]);
  assert_int_equal(s.fail_rv, -ETIMEDOUT);
  assert_int_equal(s.failed_at, T0 + 1000);
}

static void a_first_connection_that_hangs_is_cut_by_the_guard(void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, RECONNECT_MS);
  assert_int_equal(tg_link_deadline(&s.l), TG_LINK_NEVER); /* not started */
  s.part_from = 0;
  attempt(&s);
  assert_int_equal(tg_link_deadline(&s.l), T0 + TG_LINK_CONNECT_GUARD_MS);
  assert_int_equal(tg_link_due(&s.l, T0 + TG_LINK_CONNECT_GUARD_MS - 1, 0),
                   TG_LINK_DUE_NONE);
  assert_int_equal(tg_link_due(&s.l, T0 + TG_LINK_CONNECT_GUARD_MS, 0),
                   TG_LINK_DUE_GUARD);
  /* Said once: the owner fails the host. */
  assert_int_equal(tg_link_due(&s.l, T0 + TG_LINK_CONNECT_GUARD_MS, 0),
                   TG_LINK_DUE_NONE);
  assert_int_equal(tg_link_deadline(&s.l), TG_LINK_NEVER);
  assert_false(tg_link_reconnecting(&s.l));
}

static void without_heartbeats_silence_counts_only_while_a_call_waits(
    void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, RECONNECT_MS);
  s.no_heartbeat = true;
  attempt(&s);
  assert_int_equal(s.l.state, TG_LINK_UP);
  /* Nothing heard for 29 s, but nothing asked either: alive. */
  sim_run(&s, 30000);
  assert_int_equal(s.l.state, TG_LINK_UP);
  assert_int_equal(s.dead_at, 0);
  /* A read at 30000 never answered: dead at the first check after it has
   * waited longer than the timeout (checks every second from T0). */
  s.call_since = 30000;
  sim_run(&s, 60000);
  assert_int_equal(s.dead_at, 41000);
}

static void answers_keep_a_link_up_and_move_its_deadline(void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, RECONNECT_MS);
  attempt(&s);
  /* Heartbeats unanswered (as a partition), but packets arrive: the
   * deadline follows the last of them. */
  s.part_from = 0;
  for (uint64_t t = T0; t < T0 + 60000; t += 5000) {
    tg_link_heard(&s.l, t);
    sim_run(&s, t + 4999);
  }
  assert_int_equal(s.l.state, TG_LINK_UP);
  assert_int_equal(s.dead_at, 0);
  /* One heartbeat in flight at a time: the first is still pending. */
  assert_true(s.l.hb_pending);
}

/* The debug log names the link, both states and the reason. */
static char logged[8][TG_LOG_LINE_MAX];
static size_t n_logged;
static void sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)level;
  if (n_logged < 8) snprintf(logged[n_logged++], TG_LOG_LINE_MAX, "%s", line);
}

static void every_transition_is_logged_and_reported(void **st) {
  (void)st;
  tg_log_set_sink(sink, NULL);
  tg_log_set_level(TG_LOG_DEBUG);
  sim_t s;
  partition(&s, 2 * 60 * 1000, PART_FROM + 20000);
  tg_log_set_sink(NULL, NULL);
  tg_log_set_level(TG_LOG_WARN);
  const tg_link_state_t want[] = {TG_LINK_PREPARING, TG_LINK_UP,
                                  TG_LINK_DROPPING, TG_LINK_BACKOFF,
                                  TG_LINK_RECONNECTING};
  assert_true(s.n_states >= 5);
  for (size_t i = 0; i < 5; i++) assert_int_equal(s.states[i], want[i]);
  assert_true(n_logged >= 3);
  assert_non_null(strstr(logged[2],
                         "link h1: up -> dropping: nothing heard for 10001 ms"));
  assert_non_null(strstr(logged[0], "link h1: connecting -> preparing"));
}

/* The table link.h draws: a few arrows it has, a few it has not, and the
 * ending states. */
static void the_transition_table_is_link_h_s(void **st) {
  (void)st;
  assert_true(tg_link_transition_ok(TG_LINK_CONNECTING, TG_LINK_PREPARING));
  assert_true(tg_link_transition_ok(TG_LINK_RESUMING, TG_LINK_UP));
  assert_true(tg_link_transition_ok(TG_LINK_BACKOFF, TG_LINK_FAILING));
  assert_true(tg_link_transition_ok(TG_LINK_CLOSING, TG_LINK_FAILING));
  assert_true(tg_link_transition_ok(TG_LINK_CLOSING, TG_LINK_FAILED));
  assert_false(tg_link_transition_ok(TG_LINK_CONNECTING, TG_LINK_UP));
  assert_false(tg_link_transition_ok(TG_LINK_UP, TG_LINK_BACKOFF));
  assert_false(tg_link_transition_ok(TG_LINK_BACKOFF, TG_LINK_UP));
  assert_false(tg_link_transition_ok(TG_LINK_DROPPING, TG_LINK_UP));
  assert_false(tg_link_transition_ok(TG_LINK_FAILING, TG_LINK_CLOSING));
  assert_false(tg_link_transition_ok(TG_LINK_FAILING, TG_LINK_DONE));
  for (int to = TG_LINK_CONNECTING; to <= TG_LINK_FAILED; to++) {
    assert_false(tg_link_transition_ok(TG_LINK_DONE, (tg_link_state_t)to));
    assert_false(tg_link_transition_ok(TG_LINK_FAILED, (tg_link_state_t)to));
  }
  assert_false(tg_link_transition_ok((tg_link_state_t)99, TG_LINK_UP));
}

/* A move the table lacks is refused (common/fsm.h): the state stays, the
 * owner is not told, the refusal counts; the link goes on. */
static void a_refused_transition_is_counted_not_made(void **st) {
  (void)st;
  sim_t s;
  sim_init(&s, 60000);
  tg_link_set_state(&s.l, TG_LINK_UP, "test");
  assert_int_equal(s.l.state, TG_LINK_CONNECTING);
  assert_int_equal(s.l.bad_transitions, 1);
  assert_int_equal(s.n_states, 0);
  tg_link_set_state(&s.l, TG_LINK_CONNECTING, "test"); /* no move */
  assert_int_equal(s.l.bad_transitions, 1);
  tg_link_set_state(&s.l, TG_LINK_CLOSING, "test");
  tg_link_set_state(&s.l, TG_LINK_DONE, "test");
  assert_int_equal(s.l.state, TG_LINK_DONE);
  tg_link_set_state(&s.l, TG_LINK_FAILED, "test"); /* final */
  assert_int_equal(s.l.state, TG_LINK_DONE);
  assert_int_equal(s.l.bad_transitions, 2);
  assert_int_equal(s.n_states, 2);
  /* A resumption the table refuses counts no reconnect, no outage. */
  s.l.lost_at_ms = 1;
  assert_int_equal(tg_link_resumed(&s.l, 5000, true), 0);
  assert_int_equal(s.l.state, TG_LINK_DONE);
  assert_int_equal(s.l.reconnects, 0);
  assert_int_equal(s.l.down_ms, 0);
  assert_int_equal(s.l.bad_transitions, 3);
  assert_int_equal(s.n_states, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dead_link_is_found_one_timeout_after_the_last_answer),
      cmocka_unit_test(two_minute_partition_is_survived_with_the_session),
      cmocka_unit_test(ten_minute_partition_fails_at_the_reconnect_deadline),
      cmocka_unit_test(backoff_doubles_from_100_ms_to_5_s),
      cmocka_unit_test(the_last_wait_is_cut_to_the_deadline),
      cmocka_unit_test(a_first_connection_that_hangs_is_cut_by_the_guard),
      cmocka_unit_test(without_heartbeats_silence_counts_only_while_a_call_waits),
      cmocka_unit_test(answers_keep_a_link_up_and_move_its_deadline),
      cmocka_unit_test(every_transition_is_logged_and_reported),
      cmocka_unit_test(the_transition_table_is_link_h_s),
      cmocka_unit_test(a_refused_transition_is_counted_not_made),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
