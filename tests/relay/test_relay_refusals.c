/* tracegate-relay end to end: what a refused client costs the host and
 * what it is told. Denial lines in the audit trail are rate-limited per
 * connection and the rest counted; in --stdio mode audit lines stay on the
 * host (stderr goes back to the ssh client); the tracegate CLI prints why it
 * was refused in plain words. A real tracegated, the real relay binary,
 * clients over mutual TLS or a pipe pair, and the real CLI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pb/tracegate/relay.pb-c.h"
#include "relay/audit.h"
#include "relay_harness.h"
#include "test_wait.h"
#include "test_service.h"
#include "tracegate/error.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
  relay_fx_t *f = *state;
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "bob", &cfg);
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
  audit_expect(&f->rp, AUDIT("bob", "disconnect", "end"));
  size_t written = audit_count(
      f->rp.audit, AUDIT("bob", "SaveTraceForBugreport", "deny",
                         TG_N_RELAY_ROLE_DENIES));
  uint64_t suppressed = audit_sum(
      f->rp.audit,
      AUDIT("bob", "denials", "suppressed", TG_N_RELAY_AUDIT_SUPPRESSED));
  print_message("%zu denial lines written, %" PRIu64 " suppressed in %" PRId64
                " ms\n", written, suppressed, took_ms);
  assert_int_equal(written + suppressed, DENIED_CALLS);
  assert_true(written <= (size_t)(TG_AUDIT_DENIAL_BURST +
                                  TG_AUDIT_DENIALS_PER_S *
                                      (took_ms / 1000 + 1)));
  assert_true(written >= TG_AUDIT_DENIAL_BURST);
  /* Allowed calls are not limited: the connection's own line is there. */
  assert_int_equal(audit_count(f->rp.audit, AUDIT("bob", "connect", "allow")),
                   1);
}

/* --stdio without --audit-log: the relay's stderr is what ssh sends back
 * to the client, so no audit line may appear there (they go to syslog). */
static void relay_stdio_keeps_audit_lines_off_stderr(void **state) {
  relay_fx_t *f = *state;
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
  assert_true(tg_test_wait_notice(f->rp.log, TG_N_RELAY_CONNECTED, "@stdio: ",
                                  STEP_MS));
  if (file_count(f->rp.log, "audit:") != 0) {
    relay_dump(&f->rp);
    fail_msg("audit lines on the relay's stderr in --stdio mode");
  }
  assert_int_equal(file_count(f->rp.log, TG_NOTE(RELAY_CALL_ALLOWED)), 0);
  assert_int_equal(file_count(f->rp.log, TG_NOTE(RELAY_CLIENT_CLOSED)), 0);
}

/* --- what the CLI prints --------------------------------------------------- */

/* Runs the tracegate CLI with |args| (NULL-terminated) and returns its exit
 * code; its stderr is in |err|. Bounded: killed after STEP_MS. */
static int run_cli(const char *const *args, char *err, size_t cap) {
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  const char *argv[32] = {"tracegate"};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    assert_true(n < 31);
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(pe[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, STDIN_FILENO);
    dup2(devnull, STDOUT_FILENO);
    execv(TRACEGATE_CLI_PATH, (char *const *)argv);
    _exit(127);
  }
  close(pe[1]);
  size_t got = 0;
  int64_t deadline = now_ms() + STEP_MS;
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    struct pollfd p = {pe[0], POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = read(pe[0], err + got, cap - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
    if (got + 1 == cap) break;
  }
  err[got] = 0;
  close(pe[0]);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  print_message("--- tracegate %s ---\n%s", args[0], err);
  assert_null(strstr(err, "Sanitizer"));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The CLI's line with the code |why| (and |data|) says it in its own
 * terms, not mbedtls's (the TLS layer may log that too, as a warning line
 * of its own). */
static void expect_cli_says(const char *err, tg_notice_t why,
                            const char *data) {
  char said[2048];
  if (!tg_test_notice_line(err, why, data, said, sizeof(said)))
    fail_msg("the CLI did not say %s %s:\n%s", tg_notice_tag(why),
             data ? data : "", err);
  assert_null(strstr(said, "SSL - "));
  assert_null(strstr(said, "X509 - "));
  assert_null(strstr(said, "connection reset"));
}

/* `tracegate query` against the relay as |dir|/|name|, trusting
 * |ca_dir|/ca.pem; returns the exit code, stderr in |err|. */
static int cli_query_as(relay_fx_t *f, const char *dir, const char *name,
                        const char *ca_dir, char *err, size_t cap) {
  char hostport[32], cert[16], key[16];
  snprintf(hostport, sizeof(hostport), "localhost:%d", f->rp.port);
  snprintf(cert, sizeof(cert), "%s.pem", name);
  snprintf(key, sizeof(key), "%s.key", name);
  char certp[256], keyp[256], cap_[256];
  snprintf(certp, sizeof(certp), "%s", cert_path(dir, cert));
  snprintf(keyp, sizeof(keyp), "%s", cert_path(dir, key));
  snprintf(cap_, sizeof(cap_), "%s", cert_path(ca_dir, "ca.pem"));
  const char *args[] = {"query", "-H", hostport, "--cert", certp,
                        "--key", keyp, "--ca", cap_, NULL};
  return run_cli(args, err, cap);
}

static void cli_prints_why_the_relay_refused(void **state) {
  relay_fx_t *f = *state;
  static char err[16384];
  /* Allowed: the baseline. */
  assert_int_equal(cli_query_as(f, "pki", "alice", "pki", err, sizeof(err)),
                   0);
  /* An identity the CA signed but the authorization file does not list. */
  assert_int_not_equal(
      cli_query_as(f, "pki", "dave", "pki", err, sizeof(err)), 0);
  expect_cli_says(err, TG_N_RELAY_NOT_AUTHORIZED, "('dave' ");
  assert_notice(err, TG_N_REMOTE_UNREACHABLE);
  /* A certificate of another CA. */
  assert_int_not_equal(cli_query_as(f, "other", "eve", "pki", err, sizeof(err)),
                       0);
  expect_cli_says(err, TG_N_TLS_CLIENT_CERT_REFUSED, NULL);
  /* The plain sentence alone: not the TLS library's own line above it. */
  assert_null(strstr(err, "tls: server"));
  /* The relay's certificate checked against the wrong CA. */
  assert_int_not_equal(
      cli_query_as(f, "pki", "alice", "other", err, sizeof(err)), 0);
  expect_cli_says(err, TG_N_TLS_RELAY_CA_MISMATCH, " --ca");
  assert_null(strstr(err, "tls: server"));
}

/* A call the role does not allow: the CLI says which rule refused it. */
static void cli_prints_the_relays_reason_for_a_denied_call(void **state) {
  relay_fx_t *f = *state;
  static char err[16384];
  char hostport[32], out[192];
  snprintf(hostport, sizeof(hostport), "localhost:%d", f->rp.port);
  snprintf(out, sizeof(out), "%s/denied.pftrace", f->rp.dir);
  char certp[256], keyp[256], cap_[256];
  snprintf(certp, sizeof(certp), "%s", cert_path("pki", "bob.pem"));
  snprintf(keyp, sizeof(keyp), "%s", cert_path("pki", "bob.key"));
  snprintf(cap_, sizeof(cap_), "%s", cert_path("pki", "ca.pem"));
  const char *args[] = {"record", "-H", hostport, "--cert", certp, "--key",
                        keyp, "--ca", cap_, "-o", out, "-t", "0", "-b", "1mb",
                        "test.ds", NULL};
  assert_int_not_equal(run_cli(args, err, sizeof(err)), 0);
  expect_cli_says(err, TG_N_RELAY_CALL_DENIED, " EnableTracing");
  assert_notice_with(err, TG_N_FLEET_HOST_FAILED, TG_NOTE(RELAY_CALL_DENIED));
}

/* A denied call whose reply has no error field (Attach): the relay's
 * reason comes in a RequestError for no request just before the refusal,
 * and the CLI prints it with the failed call. */
static void cli_prints_the_relays_reason_for_a_call_without_error_field(
    void **state) {
  relay_fx_t *f = *state;
  static char err[16384];
  char hostport[32], out[192];
  snprintf(hostport, sizeof(hostport), "localhost:%d", f->rp.port);
  snprintf(out, sizeof(out), "%s/attach.pftrace", f->rp.dir);
  char certp[256], keyp[256], cap_[256];
  snprintf(certp, sizeof(certp), "%s", cert_path("pki", "bob.pem"));
  snprintf(keyp, sizeof(keyp), "%s", cert_path("pki", "bob.key"));
  snprintf(cap_, sizeof(cap_), "%s", cert_path("pki", "ca.pem"));
  const char *args[] = {"record", "-H", hostport, "--cert", certp, "--key",
                        keyp, "--ca", cap_, "-o", out, "--attach", "somekey",
                        NULL};
  assert_int_not_equal(run_cli(args, err, sizeof(err)), 0);
  expect_cli_says(err, TG_N_RELAY_CALL_DENIED, " Attach");
  assert_notice_with(err, TG_N_FLEET_HOST_FAILED, TG_NOTE(RELAY_CALL_DENIED));
}

/* --- when the service goes away -------------------------------------------- */

/* The client's channel ended orderly (the relay's close_notify), and the
 * relay said why before it: a notice (for no request), or the answer that
 * refused the bind. */
static void expect_told(rc_t *rc, tg_notice_t why) {
  assert_true(rc_wait_closed(rc, STEP_MS));
  assert_int_equal(rc->close_status, TG_EPEER_CLOSED);
  const char *said = rc->ipc.notice[0] ? rc->ipc.notice : rc->bind_said;
  if (!tg_test_notice_line(said, why, NULL, NULL, 0))
    fail_msg("the relay said '%s', not %s", said, tg_notice_tag(why));
}

static int setup_full_service(void **state) {
  const char *const args[] = {"--max-consumers", "1", NULL};
  relay_fx_t *f = relay_fx_start(state, args);
  if (!f || relay_start(&f->rp, f->ts.consumer_sock, NULL) < 0) return -1;
  f->relay_up = true;
  return 0;
}

/* tracegated at its --max-consumers limit takes the relay's connection and
 * closes it before answering. The client used to see its TLS stream cut
 * (no close_notify) and nothing else; now the relay says the service closed
 * before answering, naming the limit, and closes orderly. */
static void relay_tells_the_client_a_full_service_closed_on_it(void **state) {
  relay_fx_t *f = *state;
  raw_conn_t holder; /* the service's one consumer slot, bound */
  assert_int_equal(raw_connect(&holder, f->ts.consumer_sock), 0);
  assert_int_equal(raw_bind(&holder, "ConsumerPort"), 0);

  tg_tls_config_t *cfg = client_cfg("pki", "alice", "pki");
  rc_t rc = {0};
  assert_int_equal(rc_connect(&rc, f->rp.port, cfg), 0);
  assert_int_not_equal(rc_bind(&rc, "ConsumerPort"), 0);
  expect_told(&rc, TG_N_RELAY_SERVICE_CLOSED_EARLY);
  rc_close(&rc);
  tg_tls_config_free(cfg);

  /* The CLI's last word is the relay's. */
  static char err[16384];
  assert_int_not_equal(cli_query_as(f, "pki", "alice", "pki", err, sizeof(err)),
                       0);
  expect_cli_says(err, TG_N_RELAY_SERVICE_CLOSED_EARLY, NULL);
  assert_null(strstr(err, "close_notify"));
  raw_close(&holder);
}

/* The service ends in the middle of a client's connection: the client is
 * told before its connection closes, orderly. */
static void relay_tells_the_client_the_service_went_away(void **state) {
  relay_fx_t *f = *state;
  tg_tls_config_t *cfg = client_cfg("pki", "alice", "pki");
  rc_t rc = {0};
  assert_int_equal(rc_connect(&rc, f->rp.port, cfg), 0);
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), 0);
  assert_true(WIFEXITED(test_service_terminate(&f->ts)));
  expect_told(&rc, TG_N_RELAY_SERVICE_GONE);
  rc_close(&rc);
  tg_tls_config_free(cfg);
}

/* TracegateRelay.GetHostInfo on |rc| (bound): the caller frees it with
 * protobuf_c_message_free_unpacked. */
static Perfetto__Protos__RelayHostInfo *host_info(rc_t *rc) {
  ProtobufCMessage *m;
  assert_int_equal(rc_call(rc, rc->relay, "GetHostInfo", NULL,
                           &perfetto__protos__relay_host_info__descriptor, &m),
                   0);
  return (Perfetto__Protos__RelayHostInfo *)m;
}

/* No service listening: the relay refuses the service's bind with the
 * reason, instead of closing on it unannounced, and still answers its own
 * service: GetHostInfo says the service is down (a client whose session
 * was there learns it is gone), calls for the service fail. */
static void relay_tells_the_client_no_service_listens(void **state) {
  relay_fx_t *f = *state;
  assert_true(WIFEXITED(test_service_terminate(&f->ts)));
  tg_tls_config_t *cfg = client_cfg("pki", "alice", "pki");
  rc_t rc = {0};
  assert_int_equal(rc_connect(&rc, f->rp.port, cfg), 0);
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), TG_EUNKNOWN_SERVICE);
  if (!strstr(rc.bind_said, "is tracegated running?"))
    fail_msg("the relay said '%s'", rc.bind_said);
  assert_int_equal(rc_bind(&rc, "TracegateRelay"), 0);
  Perfetto__Protos__RelayHostInfo *hi = host_info(&rc);
  assert_true(hi->has_service_down && hi->service_down);
  assert_null(hi->service_instance);
  assert_true(hi->kernel && hi->kernel[0]);
  protobuf_c_message_free_unpacked(&hi->base, NULL);
  /* Asked again, the bind is refused again, with the reason. */
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), TG_EUNKNOWN_SERVICE);
  assert_non_null(strstr(rc.bind_said, "not running"));
  rc_close(&rc);
  tg_tls_config_free(cfg);
}

/* With the service up, GetHostInfo does not say it is down. */
static void relay_host_info_says_a_running_service_is_up(void **state) {
  relay_fx_t *f = *state;
  tg_tls_config_t *cfg = client_cfg("pki", "alice", "pki");
  rc_t rc = {0};
  assert_int_equal(rc_connect(&rc, f->rp.port, cfg), 0);
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), 0);
  assert_int_equal(rc_bind(&rc, "TracegateRelay"), 0);
  Perfetto__Protos__RelayHostInfo *hi = host_info(&rc);
  assert_false(hi->has_service_down && hi->service_down);
  assert_non_null(hi->service_instance);
  protobuf_c_message_free_unpacked(&hi->base, NULL);
  rc_close(&rc);
  tg_tls_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      RELAY_T(relay_rate_limits_denial_lines_and_counts_the_rest),
      RELAY_TS(relay_stdio_keeps_audit_lines_off_stderr),
      RELAY_T(cli_prints_why_the_relay_refused),
      RELAY_T(cli_prints_the_relays_reason_for_a_denied_call),
      RELAY_T(cli_prints_the_relays_reason_for_a_call_without_error_field),
      cmocka_unit_test_setup_teardown(
          relay_tells_the_client_a_full_service_closed_on_it,
          setup_full_service, relay_fx_teardown),
      RELAY_T(relay_tells_the_client_the_service_went_away),
      RELAY_T(relay_tells_the_client_no_service_listens),
      RELAY_T(relay_host_info_says_a_running_service_is_up),
  };
  return cmocka_run_group_tests(tests, relay_fx_group_setup,
                                relay_fx_group_teardown);
}
