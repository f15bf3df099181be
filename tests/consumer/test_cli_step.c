/* cli/step.c: the CLI's request/reply state machines. The
 * "service" here is a timer on the loop answering each request as a
 * script says, a turn later (as a connection's callbacks come); a request
 * the script leaves unanswered with nothing else on the loop is a
 * connection that ended. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "cli/step.h"
#include "tracegate/error.h"

/* What the service does with a request. */
typedef enum { YES, NO, SILENT, UNSENT } answer_t;

typedef struct script {
  uv_timer_t timer;
  cli_sm_t *m;
  const answer_t *answers; /* one per request, in order */
  size_t n, next;
  int visited[16]; /* the states that sent, in order */
  size_t n_visited;
  int decided; /* decide() calls */
} script_t;

static void on_timer(uv_timer_t *t) {
  script_t *s = t->data;
  answer_t a = s->answers[s->next - 1];
  cli_sm_reply(s->m, a == YES ? 0 : -1, a == YES ? NULL : "no such key");
}

static int send_req(cli_sm_t *m) {
  script_t *s = m->ctx;
  assert_true(s->next < s->n);
  s->visited[s->n_visited++] = m->state;
  answer_t a = s->answers[s->next++];
  if (a == UNSENT) return -ENOTCONN;
  if (a != SILENT) uv_timer_start(&s->timer, on_timer, 0, 0);
  return 0;
}

/* A refusal is "no", not a failure: exit 2 and no more steps. */
static int no_means_usage(cli_sm_t *m, cli_sm_outcome_t o) {
  ((script_t *)m->ctx)->decided++;
  if (o != CLI_SM_REFUSED) return CLI_SM_TABLE;
  m->code = CLI_EXIT_USAGE;
  return CLI_SM_END;
}

enum { A, B, C };

/* A -> B -> C; B's failure is a warning that still goes to C; A's and
 * C's are failures. */
static const cli_sm_state_t states[] = {
    [A] = {"a", send_req, B, CLI_SM_END, "cannot a", CLI_EXIT_FAIL,
           no_means_usage, TG_N_NONE},
    [B] = {"b", send_req, C, C, "warning: cannot b", CLI_EXIT_OK, NULL,
           TG_N_NONE},
    [C] = {"c", send_req, CLI_SM_END, CLI_SM_END, "cannot c", CLI_EXIT_FAIL,
           NULL, TG_N_QUERY_FAILED},
};

typedef struct fixture {
  uv_loop_t loop;
  cli_conn_t cc;
  cli_sm_t m;
  script_t s;
} fixture_t;

static fixture_t f;

/* Runs the machine from A with |answers|; returns its exit code. */
static int run(const answer_t *answers, size_t n) {
  memset(&f, 0, sizeof(f));
  assert_int_equal(uv_loop_init(&f.loop), 0);
  f.cc.loop = &f.loop;
  snprintf(f.cc.close_msg, sizeof(f.cc.close_msg), "the service went away");
  f.s.answers = answers;
  f.s.n = n;
  f.s.m = &f.m;
  uv_timer_init(&f.loop, &f.s.timer);
  f.s.timer.data = &f.s;
  /* The timer is stopped between requests: only a pending answer keeps
   * the loop alive, as a connection's pending call would. */
  f.m = (cli_sm_t){.cc = &f.cc, .states = states, .ctx = &f.s};
  int code = cli_sm_run(&f.m, A);
  uv_close((uv_handle_t *)&f.s.timer, NULL);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  return code;
}

static void assert_visited(const int *want, size_t n) {
  assert_int_equal(f.s.n_visited, n);
  for (size_t i = 0; i < n; i++) assert_int_equal(f.s.visited[i], want[i]);
  assert_int_equal(f.s.next, f.s.n); /* every answer was asked for */
}

static void sm_goes_through_the_table_on_success(void **state) {
  (void)state;
  static const answer_t a[] = {YES, YES, YES};
  assert_int_equal(run(a, 3), CLI_EXIT_OK);
  static const int v[] = {A, B, C};
  assert_visited(v, 3);
  assert_int_equal(f.s.decided, 1);
  assert_int_equal(f.m.state, CLI_SM_END);
  assert_int_equal(f.m.outcome, CLI_SM_OK);
}

/* decide() sees the refusal first and ends the machine with its code. */
static void sm_decide_takes_a_refusal(void **state) {
  (void)state;
  static const answer_t a[] = {NO};
  assert_int_equal(run(a, 1), CLI_EXIT_USAGE);
  static const int v[] = {A};
  assert_visited(v, 1);
  assert_int_equal(f.m.outcome, CLI_SM_REFUSED);
  assert_int_equal(f.m.status, -1);
  assert_string_equal(cli_sm_why(&f.m), "no such key");
}

/* A warning's failure keeps the code and takes on_fail. */
static void sm_warning_goes_on_with_the_code_kept(void **state) {
  (void)state;
  static const answer_t a[] = {YES, NO, YES};
  assert_int_equal(run(a, 3), CLI_EXIT_OK);
  static const int v[] = {A, B, C};
  assert_visited(v, 3);
}

/* A failure sets the state's code; a later success does not clear it. */
static void sm_failure_sets_the_code(void **state) {
  (void)state;
  static const answer_t a[] = {YES, YES, NO};
  assert_int_equal(run(a, 3), CLI_EXIT_FAIL);
  static const int v[] = {A, B, C};
  assert_visited(v, 3);
}

/* A request that could not be sent is lost: no wait, the send error is
 * why, and decide() does not take it for a "no". */
static void sm_unsent_request_is_lost(void **state) {
  (void)state;
  static const answer_t a[] = {UNSENT};
  assert_int_equal(run(a, 1), CLI_EXIT_FAIL);
  assert_int_equal(f.m.outcome, CLI_SM_LOST);
  assert_int_equal(f.s.decided, 1); /* saw it, left it to the table */
  assert_int_equal(f.m.send_rv, -ENOTCONN);
  assert_false(f.m.done);
  assert_string_equal(cli_sm_why(&f.m), tg_strerror(-ENOTCONN));
}

/* The connection ends before the answer: lost, the close message is why,
 * and the wait does not hang. */
static void sm_connection_end_is_lost(void **state) {
  (void)state;
  static const answer_t a[] = {YES, SILENT, YES};
  assert_int_equal(run(a, 3), CLI_EXIT_OK); /* B's failure is a warning */
  static const int v[] = {A, B, C};
  assert_visited(v, 3);
  static const answer_t lost_first[] = {SILENT};
  assert_int_equal(run(lost_first, 1), CLI_EXIT_FAIL);
  assert_int_equal(f.m.outcome, CLI_SM_LOST);
  assert_false(f.m.done);
  assert_string_equal(cli_sm_why(&f.m), "the service went away");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sm_goes_through_the_table_on_success),
      cmocka_unit_test(sm_decide_takes_a_refusal),
      cmocka_unit_test(sm_warning_goes_on_with_the_code_kept),
      cmocka_unit_test(sm_failure_sets_the_code),
      cmocka_unit_test(sm_unsent_request_is_lost),
      cmocka_unit_test(sm_connection_end_is_lost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
