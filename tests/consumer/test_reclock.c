/* A merged trace re-clocked by its requests (consumer/fleet/reclock.h):
 * built by the merge unit in its joined mode (links_fixture.h), with the
 * server host's ClockSync estimate 400 us off and its clock drifting 20
 * ppm over 30 s, so that pass 1 draws server slices before their client's
 * request (and trace processor joins none of those flows). After the pass, with Perfetto's binaries (PERFETTO_BIN), every
 * flow still joins and no server slice leaves its client's, each within
 * 10 us of its true place; the host's own data stays on its machine. Also:
 * incremental-clock and absolute packets re-timed absolute; request times
 * that contradict ClockSync rejected and counted, moving nobody; a file
 * without flows across hosts (or that does not parse) passed byte for
 * byte. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "consumer/fleet/reclock.h"
#include "test_proc.h"

#define HOSTS 2
#define MS 1000000ll
#define US 1000ll
#define SELF_BOOT (100000 * (uint64_t)MS)

#include "links_fixture.h"

/* What each host's estimate says (its clock minus the collector's). */
static const int64_t est_offset[HOSTS] = {2 * MS, 7 * MS};
/* Half the round trips the estimates came from: their bounds. */
static const uint64_t est_rtt[HOSTS] = {100 * US, 1 * MS};

/* --- the hosts' bounds --------------------------------------------------------- */

static void hosts_with_bounds(tg_reclock_host_t h[HOSTS]) {
  memset(h, 0, sizeof(tg_reclock_host_t) * HOSTS);
  for (size_t i = 0; i < HOSTS; i++) h[i].bound_ns = est_rtt[i] / 2;
}

/* Read in pieces of odd sizes: frames split anywhere. */
#define READ_STEP 4093

/* The whole pass over |in| into m->out, as the CLI runs it. */
static void run(const tg_buf_t *in, tg_reclock_mem_t *m,
                tg_reclock_host_t h[HOSTS], tg_reclock_stats_t *st) {
  tg_reclock_io_t io =
      tg_reclock_mem_io(m, tg_buf_begin(in), tg_buf_size(in), READ_STEP);
  hosts_with_bounds(h);
  assert_int_equal(tg_reclock_run(&io, h, HOSTS, st), 0);
}

/* The pass step by step over |n| bytes at |in| into m->out, the hosts
 * moved by |constant| (NULL: by the fit), the rewrite run whatever moved:
 * how many hosts moved. */
static int staged(const uint8_t *in, size_t n, const int64_t *constant,
                  tg_reclock_mem_t *m, tg_reclock_host_t h[HOSTS],
                  tg_reclock_stats_t *st) {
  tg_reclock_io_t io = tg_reclock_mem_io(m, in, n, READ_STEP);
  hosts_with_bounds(h);
  memset(st, 0, sizeof(*st));
  tg_reclock_t *rc = tg_reclock_new(HOSTS);
  assert_non_null(rc);
  assert_int_equal(tg_reclock_scan(rc, &io, st), 0);
  for (size_t k = 0; constant && k < HOSTS; k++)
    tg_reclock_set_constant(rc, k, constant[k]);
  int moved = tg_reclock_place(rc, h, st);
  assert_int_equal(tg_reclock_rewrite(rc, &io, h, st), 0);
  tg_reclock_free(rc);
  return moved;
}

/* --- the recording ---------------------------------------------------------------- */

#define REQUESTS 10000
#define T0 (150000 * MS) /* the collector's time of the first request */
#define EVERY (3 * MS)  /* 10,000 requests over 30 s */

/* Host beta's true clock minus the collector's at collector time |t|:
 * 400 us short of what its estimate says, and drifting 20 ppm from it. */
static int64_t beta_true(int64_t t) {
  return est_offset[1] - 400 * US - (t - T0) / 50000;
}

/* Beta's scheduling at collector time |at|: two switches on its CPU 0
 * (ftrace, BOOTTIME, on beta's true clock). */
static void send_sched(fixture_t *fx, int64_t at) {
  pk_t k;
  tg_pbw_t *w = pk_begin(&k);
  tg_pbw_begin_nested(w, 1); /* ftrace_events */
  tg_pbw_append_varint(w, 1, 0); /* cpu */
  for (int e = 0; e < 2; e++) {
    tg_pbw_begin_nested(w, 2); /* event */
    tg_pbw_append_varint(w, 1, (uint64_t)(at + beta_true(at)) + (uint64_t)e * 1000);
    tg_pbw_append_varint(w, 2, e ? 4242 : 0);
    tg_pbw_begin_nested(w, 4); /* sched_switch */
    tg_pbw_append_string(w, 1, e ? "daemon" : "swapper");
    tg_pbw_append_int(w, 2, e ? 4242 : 0);
    tg_pbw_append_string(w, 5, e ? "swapper" : "daemon");
    tg_pbw_append_int(w, 6, e ? 0 : 4242);
    tg_pbw_end_nested(w);
    tg_pbw_end_nested(w);
  }
  tg_pbw_end_nested(w);
  pk_send(fx, 1, &k, 4);
}

/* Host alpha's client slices (absolute BOOTTIME) each start a flow, and
 * last 50 us; host beta's server slices (the incremental clock 64, as the
 * agent writes them) end them, from 10 us to 30 us after the client's
 * began (the collector's true time). Beta's times are |skew| off what
 * its clock says (a hostile host). Each host also sends
 * a process of its own (host data, not app data). */
static void record(fixture_t *fx, int64_t skew, bool flows) {
  head(fx);
  for (size_t i = 0; i < HOSTS; i++)
    lf_preamble(fx, i, i ? "beta" : "alpha", true, est_offset[i], est_rtt[i]);
  for (size_t i = 0; i < HOSTS; i++)
    send_daemon(fx, i, 2, 4242, (uint64_t)(T0 + est_offset[i]));
  send_sched(fx, T0);
  send_process(fx, 0, 3, 0xA0, 300, "client");
  send_thread(fx, 0, 3, 0xA1, 0xA0, 300, 301);
  send_process(fx, 1, 3, 0xB0, 300, "server");
  uint64_t b_prev = (uint64_t)(T0 + beta_true(T0) + skew);
  send_clock64(fx, 1, 3, 0xB1, b_prev);
  send_thread(fx, 1, 3, 0xB1, 0xB0, 300, 302);
  for (int64_t i = 0; i < REQUESTS; i++) {
    int64_t at = T0 + i * EVERY;
    uint64_t a = (uint64_t)(at + est_offset[0]);
    int64_t flow = flows ? i + 1 : 0;
    send_event(fx, 0, 3, a, SLICE_BEGIN, 0xA1, "client", flow);
    uint64_t b = (uint64_t)(at + 10 * US + beta_true(at + 10 * US) + skew);
    send_event(fx, 1, 3, b - b_prev, SLICE_BEGIN, 0, "server", -flow);
    send_event(fx, 1, 3, 20 * US, SLICE_END, 0, NULL, 0);
    b_prev = b + 20 * US;
    send_event(fx, 0, 3, a + 50 * US, SLICE_END, 0xA1, NULL, 0);
  }
  /* Beta's scheduling again at the end: 30 s of drift later. */
  send_sched(fx, T0 + REQUESTS * EVERY);
  for (size_t i = 0; i < HOSTS; i++) assert_int_equal(fx->hosts[i].malformed, 0);
}

/* --- with trace processor ----------------------------------------------------------- */

static bool have_tp(const char *what) {
  if (getenv("PERFETTO_BIN") && *getenv("PERFETTO_BIN")) return true;
  fprintf(stderr, "[ SKIPPED  ] %s: PERFETTO_BIN (the directory of Perfetto's "
                  "binaries) is not set\n", what);
  return false;
}

static void tp(const uint8_t *p, size_t n, const char *query, char *out,
               size_t cap) {
  char path[] = "/tmp/tg-reclock-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, p, n), (ssize_t)n);
  close(fd);
  int rv = tg_test_tp_answer(path, query, out, cap);
  unlink(path);
  assert_int_equal(rv, 1);
}

/* Flows joined; of them, server slices outside their client's; of them,
 * server slices more than 10 us from their true place (10 us after the
 * client's begin); the hosts' daemons on their machines; error stats. */
#define FLOW_QUERY                                                            \
  "with f as (select c.ts as cts, c.dur as cdur, s.ts as sts, s.dur as sdur " \
  "from flow join slice c on flow.slice_out = c.id join slice s on "          \
  "flow.slice_in = s.id where c.name = 'client' and s.name = 'server') "      \
  "select (select count(*) from f) || ':' || (select count(*) from f where "  \
  "sts < cts or sts + sdur > cts + cdur) || ':' || (select count(*) from f "  \
  "where abs(sts - cts - 10000) > 10000) || ':' || (select count(*) from "    \
  "process where pid = 4242 and machine_id is not null) || ':' || (select "   \
  "ifnull(sum(value), 0) from stats where severity in ('error', "             \
  "'data_loss') and value > 0)"

static void requests_place_the_server_within_10us(void **state) {
  fixture_t *fx = *state;
  if (!have_tp("re-clocked flows")) skip();
  record(fx, 0, true);
  char out[256];
  /* Pass 1 alone: server slices drawn before their client's request. */
  tp(tg_buf_begin(&fx->out), tg_buf_size(&fx->out), FLOW_QUERY, out,
     sizeof(out));
  unsigned flows, outside, far, daemons, errors;
  assert_int_equal(sscanf(out, "\"%u:%u:%u:%u:%u", &flows, &outside, &far,
                          &daemons, &errors), 5);
  /* Trace processor joins a flow only when the slice ending it comes
   * after the one starting it: pass 1 loses the arrows. */
  assert_true(flows < REQUESTS / 2);
  tg_reclock_mem_t m;
  tg_reclock_host_t h[HOSTS];
  tg_reclock_stats_t st;
  run(&fx->out, &m, h, &st);
  assert_true(st.rewritten);
  assert_int_equal(st.pairs, REQUESTS);
  assert_int_equal(st.hosts_moved, 1);
  assert_true(h[0].anchor);
  assert_false(h[0].moved);
  assert_true(h[1].moved);
  assert_int_equal(h[1].samples_used, REQUESTS);
  assert_int_equal(h[1].samples_rejected, 0);
  /* The server moved 400 us (and the drift's half at the middle) later. */
  assert_true(h[1].offset_us > 600 && h[1].offset_us < 800);
  assert_true(h[1].drift_ppm > 19 && h[1].drift_ppm < 21);
  assert_true(h[1].margin_us >= 0);
  assert_int_equal(h[1].packets_moved, 2 * REQUESTS);
  assert_int_equal(h[1].syncs_moved, 1);
  /* Its scheduling at the end is 600 us of drift from the sync's: a sync
   * carrying the correction there is written before it. */
  assert_int_equal(h[1].syncs_added, 1);
  tp(tg_buf_begin(&m.out), tg_buf_size(&m.out), FLOW_QUERY, out, sizeof(out));
  assert_string_equal(out, "\"10000:0:0:2:0\"\n");
  /* Beta's own machine: its scheduling (ftrace on BOOTTIME, placed by
   * its RemoteClockSync) moved with its app slices, by the correction at
   * its own time: at the start (the sync's time, before the first
   * request) 400 us, at the end 400 us and the 600 us it drifted, each
   * within 10 us of its true place. */
  long long before[2], after[2];
  const char *q = "select min(ts) || ' ' || max(ts) from sched";
  tp(tg_buf_begin(&fx->out), tg_buf_size(&fx->out), q, out, sizeof(out));
  assert_int_equal(sscanf(out, "\"%lld %lld", &before[0], &before[1]), 2);
  tp(tg_buf_begin(&m.out), tg_buf_size(&m.out), q, out, sizeof(out));
  assert_int_equal(sscanf(out, "\"%lld %lld", &after[0], &after[1]), 2);
  assert_true(after[0] - before[0] > 390 * US &&
              after[0] - before[0] < 410 * US);
  assert_true(after[1] - before[1] > 990 * US &&
              after[1] - before[1] < 1010 * US);
  tg_reclock_mem_free(&m);
}

/* --- without trace processor -------------------------------------------------------- */

/* Beta's answers 30 ms before their requests: past both hosts' bounds and
 * the drift allowed, every sample is rejected and nobody moves. */
static void requests_contradicting_clock_sync_move_nobody(void **state) {
  fixture_t *fx = *state;
  record(fx, -30 * MS, true);
  tg_reclock_mem_t m;
  tg_reclock_host_t h[HOSTS];
  tg_reclock_stats_t st;
  run(&fx->out, &m, h, &st);
  assert_int_equal(st.pairs, REQUESTS);
  assert_int_equal(st.hosts_moved, 0);
  assert_false(st.rewritten);
  assert_int_equal(h[1].samples_used, 0);
  assert_int_equal(h[1].samples_rejected, REQUESTS);
  assert_false(h[0].moved || h[1].moved || h[0].anchor);
  tg_reclock_mem_free(&m);
}

/* Beta's answers an hour after their requests, past the recording the
 * collector's own packets span: not used, and they widen nothing. */
static void requests_outside_the_recording_are_not_used(void **state) {
  fixture_t *fx = *state;
  record(fx, 3600000 * MS, true);
  tg_reclock_mem_t m;
  tg_reclock_host_t h[HOSTS];
  tg_reclock_stats_t st;
  run(&fx->out, &m, h, &st);
  assert_int_equal(st.pairs, REQUESTS);
  assert_int_equal(st.pairs_outside, REQUESTS);
  assert_int_equal(st.hosts_moved, 0);
  assert_false(st.rewritten);
  tg_reclock_mem_free(&m);
}

/* Written again without a host moved: the same bytes. */
static void no_flows_across_hosts_pass_byte_for_byte(void **state) {
  fixture_t *fx = *state;
  record(fx, 0, false);
  tg_reclock_mem_t m;
  tg_reclock_host_t h[HOSTS];
  tg_reclock_stats_t st;
  assert_int_equal(staged(tg_buf_begin(&fx->out), tg_buf_size(&fx->out), NULL,
                          &m, h, &st),
                   0);
  assert_int_equal(st.pairs, 0);
  assert_int_equal(tg_buf_size(&m.out), tg_buf_size(&fx->out));
  assert_memory_equal(tg_buf_begin(&m.out), tg_buf_begin(&fx->out),
                      tg_buf_size(&fx->out));
  tg_reclock_mem_free(&m);
}

/* The |k|th packet of |b|. */
static tg_pb_field_t packet_at(const tg_buf_t *b, size_t k) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, tg_buf_begin(b), tg_buf_size(b));
  for (size_t i = 0; i <= k; i++) assert_int_equal(tg_pb_reader_next(&r, &f), 1);
  return f;
}

/* A constant correction: alpha's absolute packets and beta's incremental
 * ones each end with the collector's time moved and clock 6 (BOOTTIME),
 * so trace processor no longer needs beta's running clock. */
static void every_timed_app_packet_becomes_absolute(void **state) {
  fixture_t *fx = *state;
  record(fx, 0, true);
  tg_reclock_mem_t m;
  tg_reclock_host_t h[HOSTS];
  tg_reclock_stats_t st;
  static const int64_t moves[HOSTS] = {1000, -3000};
  assert_int_equal(staged(tg_buf_begin(&fx->out), tg_buf_size(&fx->out),
                          moves, &m, h, &st),
                   2);
  assert_int_equal(h[0].packets_moved, 2 * REQUESTS);
  assert_int_equal(h[1].packets_moved, 2 * REQUESTS);
  /* The packets in the order the merge wrote them: find the first client
   * and server begins by their names' order of writing. */
  size_t n_in = 0, n_out = 0;
  {
    tg_pb_reader_t r;
    tg_pb_field_t f;
    tg_pb_reader_init(&r, tg_buf_begin(&fx->out), tg_buf_size(&fx->out));
    while (tg_pb_reader_next(&r, &f) == 1) n_in++;
    tg_pb_reader_init(&r, tg_buf_begin(&m.out), tg_buf_size(&m.out));
    while (tg_pb_reader_next(&r, &f) == 1) n_out++;
  }
  assert_int_equal(n_in, n_out);
  /* The 4 packets before the last (beta's scheduling at the end): client
   * begin, server begin, server end, client end of the last request. */
  int64_t at = T0 + (REQUESTS - 1) * EVERY;
  const int64_t want[4] = {at + 1000, at + 10 * US + beta_true(at + 10 * US) -
                                          est_offset[1] - 3000,
                           at + 30 * US + beta_true(at + 10 * US) -
                               est_offset[1] - 3000,
                           at + 50 * US + 1000};
  for (size_t i = 0; i < 4; i++) {
    tg_pb_field_t p = packet_at(&m.out, n_out - 5 + i), f;
    assert_true(field(p.data, p.size, 8, &f));
    assert_int_equal((int64_t)f.value, want[i]);
    assert_true(field(p.data, p.size, 58, &f));
    assert_int_equal(f.value, 6);
  }
  tg_reclock_mem_free(&m);
}

/* Bytes that are not a trace, and a trace cut short: passed as they are. */
static void what_does_not_parse_passes_unchanged(void **state) {
  (void)state;
  static const int64_t moves[HOSTS] = {5, 0};
  static const uint8_t cases[][12] = {
      {0x0A, 0x05, 0x40, 0x01},                   /* cut short */
      {0x0A, 0x02, 0xFF, 0xFF, 0x12, 0x00},       /* a bad packet, field 2 */
      {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, /* no tag */
      {0x0A, 0x04, 0x50, 0x81, 0x80, 0x40},       /* a host's, untimed */
  };
  static const size_t lens[] = {4, 6, 7, 6};
  for (size_t c = 0; c < sizeof(lens) / sizeof(lens[0]); c++) {
    tg_reclock_mem_t m;
    tg_reclock_host_t h[HOSTS];
    tg_reclock_stats_t st;
    assert_int_equal(staged(cases[c], lens[c], moves, &m, h, &st), HOSTS);
    assert_int_equal(tg_buf_size(&m.out), lens[c]);
    assert_memory_equal(tg_buf_begin(&m.out), cases[c], lens[c]);
    tg_reclock_mem_free(&m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(requests_place_the_server_within_10us,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          requests_contradicting_clock_sync_move_nobody, setup, teardown),
      cmocka_unit_test_setup_teardown(
          requests_outside_the_recording_are_not_used, setup, teardown),
      cmocka_unit_test_setup_teardown(no_flows_across_hosts_pass_byte_for_byte,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(every_timed_app_packet_becomes_absolute,
                                      setup, teardown),
      cmocka_unit_test(what_does_not_parse_passes_unchanged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
