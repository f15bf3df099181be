/* tracegate-relay end to end: what a refused client costs the host and
 * what it is told. Denial lines in the audit trail are rate-limited per
 * connection and the rest counted; in --stdio mode audit lines stay on the
 * host (stderr goes back to the ssh client). A real tracegated, the real
 * relay binary, clients over mutual TLS or a pipe pair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relay/audit.h"
#include "relay_harness.h"
#include "test_service.h"
#include "tracegate/error.h"

typedef struct fx {
  test_service_t ts;
  relay_proc_t rp;
  bool relay_up;
} fx_t;

static int setup_service(void **state) {
  fx_t *f = calloc(1, sizeof(*f));
  if (!f || test_service_start(&f->ts) < 0) return -1;
  loop_setup();
  *state = f;
  return 0;
}

static int setup(void **state) {
  if (setup_service(state) < 0) return -1;
  fx_t *f = *state;
  if (relay_start(&f->rp, f->ts.consumer_sock, NULL) < 0) return -1;
  f->relay_up = true;
  return 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  int rv = 0;
  if (f->relay_up && relay_stop(&f->rp) != 0) rv = -1;
  loop_teardown();
  if (test_service_stop(&f->ts) != 0) rv = -1;
  free(f);
  return rv;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void connect_as(fx_t *f, rc_t *rc, const char *name,
                       tg_tls_config_t **cfg) {
  *cfg = client_cfg("pki", name, "pki");
  int hs = rc_connect(rc, f->rp.port, *cfg);
  if (hs != 0) {
    relay_dump(&f->rp);
    fail_msg("%s: handshake %s: %s", name, tg_strerror(hs), rc->error);
  }
  assert_int_equal(rc_bind(rc, "ConsumerPort"), 0);
}

/* The sum of N over the "N more denials suppressed" lines of |path|. */
static uint64_t suppressed_in(const char *path) {
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  char line[2048];
  uint64_t sum = 0;
  while (fgets(line, sizeof(line), fp)) {
    const char *p = strstr(line, " denials suppressed ");
    if (!p) continue;
    p = strstr(line, " suppressed ");
    assert_non_null(p);
    uint64_t n = 0;
    assert_int_equal(sscanf(p, " suppressed %" SCNu64 " more denials", &n),
                     1);
    sum += n;
  }
  fclose(fp);
  return sum;
}

#define DENIED_CALLS 1000

static bool all_done(void *arg) {
  call_t *c = arg;
  for (size_t i = 0; i < DENIED_CALLS; i++)
    if (!c[i].done) return false;
  return true;
}

/* A client that sends refused calls in a loop gets a burst of denial
 * lines, then a few a second, and every one held back is counted: lines
 * written + counts reported = calls denied. */
static void relay_rate_limits_denial_lines_and_counts_the_rest(void **state) {
  fx_t *f = *state;
  rc_t rc;
  tg_tls_config_t *cfg;
  connect_as(f, &rc, "bob", &cfg);
  call_t *calls = calloc(DENIED_CALLS, sizeof(*calls));
  assert_non_null(calls);
  int64_t t0 = now_ms();
  for (size_t i = 0; i < DENIED_CALLS; i++) {
    call_init(&calls[i]);
    assert_int_equal(
        rc_start(&rc, rc.cp, "SaveTraceForBugreport", NULL, &calls[i]), 0);
  }
  assert_true(run_until(all_done, calls, 60000));
  int64_t took_ms = now_ms() - t0;
  for (size_t i = 0; i < DENIED_CALLS; i++) {
    assert_int_equal(calls[i].status, TG_EREMOTE_FAILED);
    call_free(&calls[i]);
  }
  free(calls);
  rc_close(&rc);
  tg_tls_config_free(cfg);
  /* The count line comes before the disconnect line. */
  assert_true(file_wait_for(f->rp.audit, "bob 127.0.0.1", STEP_MS));
  if (!file_wait_for(f->rp.audit, "disconnect end", STEP_MS)) {
    relay_dump(&f->rp);
    fail_msg("no disconnect line");
  }
  size_t written =
      file_lines_with(f->rp.audit, "bob", "SaveTraceForBugreport deny");
  uint64_t suppressed = suppressed_in(f->rp.audit);
  print_message("%zu denial lines written, %" PRIu64 " suppressed in %" PRId64
                " ms\n", written, suppressed, took_ms);
  assert_int_equal(written + suppressed, DENIED_CALLS);
  assert_true(written <= (size_t)(TG_AUDIT_DENIAL_BURST +
                                  TG_AUDIT_DENIALS_PER_S *
                                      (took_ms / 1000 + 1)));
  assert_true(written >= TG_AUDIT_DENIAL_BURST);
  /* Allowed calls are not limited: the connection's own line is there. */
  assert_int_equal(file_lines_with(f->rp.audit, "bob", "connect allow"), 1);
}

/* --stdio without --audit-log: the relay's stderr is what ssh sends back
 * to the client, so no audit line may appear there (they go to syslog). */
static void relay_stdio_keeps_audit_lines_off_stderr(void **state) {
  fx_t *f = *state;
  int to, from;
  assert_int_equal(relay_start_stdio(&f->rp, f->ts.consumer_sock, &to, &from),
                   0);
  f->relay_up = true;
  rc_t rc;
  assert_int_equal(rc_open_pipe(&rc, from, to), 0);
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), 0);
  assert_int_equal(rc_call(&rc, rc.cp, "QueryCapabilities", NULL, NULL, NULL),
                   0);
  assert_int_equal(
      rc_call(&rc, rc.cp, "SaveTraceForBugreport", NULL, NULL, NULL),
      TG_EREMOTE_FAILED);
  rc_close(&rc);
  assert_int_equal(relay_wait_exit(&f->rp, STEP_MS), 0);
  /* The log is there (so stderr was captured), the audit lines are not. */
  assert_true(file_wait_for(f->rp.log, "@stdio: connected with role record",
                            STEP_MS));
  if (file_count(f->rp.log, "audit:") != 0) {
    relay_dump(&f->rp);
    fail_msg("audit lines on the relay's stderr in --stdio mode");
  }
  assert_int_equal(file_count(f->rp.log, "QueryCapabilities allow"), 0);
  assert_int_equal(file_count(f->rp.log, "disconnect end"), 0);
}

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  return certs_setup();
}

static int group_teardown(void **state) {
  (void)state;
  certs_teardown();
  return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TS(fn) cmocka_unit_test_setup_teardown(fn, setup_service, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(relay_rate_limits_denial_lines_and_counts_the_rest),
      TS(relay_stdio_keeps_audit_lines_off_stderr),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
