/* tracegate-relay end to end: a real tracegated, the real relay binary in
 * front of it, and remote clients over mutual TLS (or a pipe pair for
 * --stdio) with certificates made at test time. Producers write their SMB
 * by hand (tests/support). Every step waits on an event with a bound;
 * outcomes are read from replies, the relay's log and its audit trail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_wait.h"
#include "tracegate/pb_wire.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "relay/audit.h"
#include "relay_harness.h"
#include "test_service.h"
#include "tracegate/error.h"
#include "pb/tracegate/relay.pb-c.h"

/* The producer and the loop take turns: the producer's socket is waited on
 * (bounded) while the loop's I/O is served between the waits. */
static bool pump_started(raw_producer_t *p) {
  int64_t deadline = tg_test_now_ms() + STEP_MS;
  while (!p->started && tg_test_now_ms() < deadline) {
    uv_run(g_loop, UV_RUN_NOWAIT);
    if (raw_producer_poll(p, 20) < 0) return false;
  }
  return p->started;
}

static uint64_t pump_flush(raw_producer_t *p, uint64_t after) {
  int64_t deadline = tg_test_now_ms() + STEP_MS;
  while (p->last_flush_id <= after && tg_test_now_ms() < deadline) {
    uv_run(g_loop, UV_RUN_NOWAIT);
    if (raw_producer_poll(p, 20) < 0) return 0;
  }
  return p->last_flush_id > after ? p->last_flush_id : 0;
}

/* The relay's log has a line with notice |n| holding |data| (or any). */
static void expect_log(relay_fx_t *f, tg_notice_t n, const char *data) {
  if (!tg_test_wait_notice(f->rp.log, n, data, STEP_MS)) {
    relay_dump(&f->rp);
    fail_msg("the relay log has no %s line%s%s", tg_notice_tag(n),
             data ? " with " : "", data ? data : "");
  }
}

static void start_enable(rc_t *rc, simple_cfg_t *sc, call_t *enable) {
  simple_cfg_init(sc, 1024, 1, "test.ds");
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc->cfg;
  call_init(enable);
  assert_int_equal(rc_start(rc, rc->cp, "EnableTracing", &en.base, enable), 0);
}

static int simple_call(rc_t *rc, const char *method) {
  return rc_call(rc, rc->cp, method, NULL, NULL, NULL);
}

/* ReadBuffers to the end; returns the number of test packets. */
static size_t read_values(rc_t *rc, uint32_t *values, size_t max) {
  call_t rd;
  call_init(&rd);
  assert_int_equal(rc_start(rc, rc->cp, "ReadBuffers", NULL, &rd), 0);
  assert_true(run_until(call_done, &rd, STEP_MS));
  assert_int_equal(rd.status, 0);
  size_t n = rd.n_values < max ? rd.n_values : max;
  memcpy(values, rd.values, n * sizeof(*values));
  call_free(&rd);
  return n;
}

/* --- (1) recording through the relay ------------------------------------------ */

static void relay_records_a_trace_over_tls(void **state) {
  relay_fx_t *f = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &f->ts, "relay.producer",
                                        "test.ds", 4, 64, false), 0);
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "alice", &cfg);
  simple_cfg_t sc;
  call_t enable;
  start_enable(&rc, &sc, &enable);
  assert_true(pump_started(&p));
  assert_int_equal(raw_producer_write_packets(&p, 0, 0, 1, 0, "relay", 1, 5), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);

  Perfetto__Protos__FlushRequest fl = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fl.has_timeout_ms = 1;
  fl.timeout_ms = 5000;
  call_t flush;
  call_init(&flush);
  assert_int_equal(rc_start(&rc, rc.cp, "Flush", &fl.base, &flush), 0);
  uint64_t fid = pump_flush(&p, 0);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit(&p, NULL, NULL, 0, fid), 0);
  assert_true(run_until(call_done, &flush, STEP_MS));
  assert_int_equal(flush.status, 0);
  call_free(&flush);

  uint32_t values[16];
  assert_int_equal(read_values(&rc, values, 16), 5);
  for (uint32_t i = 0; i < 5; i++) assert_int_equal(values[i], 1 + i);

  assert_int_equal(simple_call(&rc, "DisableTracing"), 0);
  assert_true(run_until(call_done, &enable, STEP_MS));
  assert_int_equal(enable.status, 0);
  Perfetto__Protos__EnableTracingResponse *er =
      perfetto__protos__enable_tracing_response__unpack(
          NULL, tg_buf_size(&enable.last), tg_buf_begin(&enable.last));
  assert_non_null(er);
  assert_true(!er->error || !er->error[0]);
  perfetto__protos__enable_tracing_response__free_unpacked(er, NULL);
  call_free(&enable);
  assert_int_equal(simple_call(&rc, "FreeBuffers"), 0);
  relay_fx_disconnect(&rc, cfg);
  raw_producer_close(&p);

  expect_audit(f, "alice", "connect", "allow", TG_N_RELAY_CONNECTED, "record");
  expect_audit(f, "alice", "EnableTracing", "allow", TG_N_RELAY_SESSION_SCOPED);
  expect_audit(f, "alice", "DisableTracing", "allow", TG_N_RELAY_CALL_ALLOWED);
  expect_audit(f, "alice", "disconnect", "end", TG_N_RELAY_CLIENT_CLOSED);
  /* Reads are too chatty for the audit trail. */
  assert_int_equal(audit_count(f->rp.audit, AUDIT(NULL, "ReadBuffers")), 0);
}

/* --- (2) an observer -------------------------------------------------------------- */

static void relay_observer_may_query_but_not_record(void **state) {
  relay_fx_t *f = *state;
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "bob", &cfg);
  assert_int_equal(simple_call(&rc, "QueryServiceState"), 0);
  assert_int_equal(simple_call(&rc, "QueryCapabilities"), 0);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 1024, 1, "test.ds");
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  assert_int_equal(rc_call(&rc, rc.cp, "EnableTracing", &en.base, NULL, NULL),
                   TG_EREMOTE_FAILED);
  assert_int_equal(simple_call(&rc, "SaveTraceForBugreport"),
                   TG_EREMOTE_FAILED);
  /* The connection is still good after a denial. */
  assert_int_equal(simple_call(&rc, "QueryServiceState"), 0);
  relay_fx_disconnect(&rc, cfg);
  expect_audit(f, "bob", "EnableTracing", "deny", TG_N_RELAY_ROLE_DENIES,
               "observe");
  expect_audit(f, "bob", "SaveTraceForBugreport", "deny",
               TG_N_RELAY_ROLE_DENIES);
  expect_audit(f, "bob", "QueryCapabilities", "allow", TG_N_RELAY_CALL_ALLOWED);
  expect_log(f, TG_N_RELAY_CONNECTED, "bob@127.0.0.1:");
  expect_log(f, TG_N_RELAY_CALL_DENIED, "EnableTracing");
}

/* --- (3) refusals -------------------------------------------------------------------- */

static int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

/* Reads until the peer closes (true) or |ms| pass. */
static bool wait_eof(int fd, int ms) {
  int64_t deadline = tg_test_now_ms() + ms;
  for (;;) {
    int64_t left = deadline - tg_test_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) != 1) return false;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

static void expect_tls_refused(relay_fx_t *f, const char *dir, const char *name,
                               const char *why) {
  tg_tls_config_t *cfg = client_cfg(dir, name, "pki");
  rc_t rc;
  int hs = rc_connect(&rc, f->rp.port, cfg);
  assert_int_not_equal(hs, 0);
  rc_close(&rc);
  tg_tls_config_free(cfg);
  expect_audit(f, "-", "connect", "deny", TG_N_RELAY_TLS_HANDSHAKE_FAILED, why);
  expect_log(f, TG_N_RELAY_TLS_HANDSHAKE_FAILED, why);
}

static void expect_raw_refused(relay_fx_t *f, const void *bytes, size_t len,
                               const char *why) {
  int fd = tcp_connect(f->rp.port);
  assert_int_equal(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len);
  assert_true(wait_eof(fd, STEP_MS));
  close(fd);
  expect_audit(f, "-", "connect", "deny", TG_N_RELAY_TLS_HANDSHAKE_FAILED, why);
  expect_log(f, TG_N_RELAY_TLS_HANDSHAKE_FAILED, why);
}

static void relay_refuses_and_logs_every_bad_client(void **state) {
  relay_fx_t *f = *state;
  expect_tls_refused(f, "pki", NULL, "missing");
  expect_tls_refused(f, "other", "eve", "not correctly signed");
  expect_tls_refused(f, "pki", "old", "expired");
  expect_tls_refused(f, "pki", "rev", "revoked");
  static const uint8_t ipc[] = {0x0a, 0, 0, 0, 0x10, 0x01, 0x1a, 0x06,
                                'c',  'o', 'n', 's', 'u', 'm'};
  expect_raw_refused(f, ipc, sizeof(ipc), "plain IPC frame");
  static const char http[] = "GET / HTTP/1.1\r\nHost: relay\r\n\r\n";
  expect_raw_refused(f, http, sizeof(http) - 1, "47 45 54 20");

  /* dave's certificate is good, but he is not in the authorization file. */
  tg_tls_config_t *cfg = client_cfg("pki", "dave", "pki");
  rc_t rc;
  int hs = rc_connect(&rc, f->rp.port, cfg);
  if (hs == 0) assert_true(rc_wait_closed(&rc, STEP_MS));
  assert_int_equal(rc_bind(&rc, "ConsumerPort") < 0, 1);
  rc_close(&rc);
  tg_tls_config_free(cfg);
  expect_audit(f, "dave", "connect", "deny", TG_N_RELAY_NOT_AUTHORIZED,
               "'dave'");
  expect_log(f, TG_N_RELAY_REFUSED, "dave@127.0.0.1:");
  assert_int_equal(audit_count(f->rp.audit, AUDIT(NULL, "connect", "deny")), 7);
  assert_int_equal(audit_count(f->rp.audit, AUDIT(NULL, "connect", "allow")), 0);
}

/* --- (4) oversized frames ------------------------------------------------------------ */

static void tls_flush(int fd, tg_tls_session_t *s) {
  tg_buf_t *out = tg_tls_out(s);
  while (tg_buf_size(out) > 0) {
    ssize_t n = send(fd, tg_buf_begin(out), tg_buf_size(out), MSG_NOSIGNAL);
    assert_true(n > 0);
    tg_buf_consume(out, (size_t)n);
  }
}

static void relay_closes_on_oversized_frame(void **state) {
  relay_fx_t *f = *state;
  tg_tls_config_t *cfg = client_cfg("pki", "alice", "pki");
  tg_tls_session_t *s;
  assert_int_equal(tg_tls_session_new(cfg, "localhost", 0, &s), 0);
  int fd = tcp_connect(f->rp.port);
  int64_t deadline = tg_test_now_ms() + STEP_MS;
  int rv;
  while ((rv = tg_tls_handshake(s)) == -EAGAIN && tg_test_now_ms() < deadline) {
    tls_flush(fd, s);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, STEP_MS), 1);
    uint8_t buf[16384];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    assert_true(n > 0);
    assert_int_equal(tg_tls_feed(s, buf, (size_t)n), 0);
  }
  assert_int_equal(rv, 0);
  tls_flush(fd, s);
  uint8_t bad[64] = {0};
  tg_pb_write_le32(bad, 1u << 20); /* a frame header claiming 1 MiB */
  assert_int_equal(tg_tls_write(s, bad, sizeof(bad)), 0);
  tls_flush(fd, s);
  assert_true(wait_eof(fd, STEP_MS));
  close(fd);
  tg_tls_session_free(s);
  tg_tls_config_free(cfg);
  expect_log(f, TG_N_RELAY_CLOSED, "alice@");
  expect_audit(f, "alice", "disconnect", "end", TG_N_RELAY_CLOSED,
               tg_strerror(TG_EFRAME_TOO_LARGE));
}

/* --- (5) write_into_file ---------------------------------------------------------------- */

static void relay_refuses_write_into_file_with_a_reason(void **state) {
  relay_fx_t *f = *state;
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "alice", &cfg);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 1024, 1, "test.ds");
  sc.cfg.has_write_into_file = 1;
  sc.cfg.write_into_file = 1;
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  ProtobufCMessage *reply;
  assert_int_equal(rc_call(&rc, rc.cp, "EnableTracing", &en.base,
                           &perfetto__protos__enable_tracing_response__descriptor,
                           &reply), TG_EREMOTE_FAILED);
  assert_non_null(reply);
  Perfetto__Protos__EnableTracingResponse *r =
      (Perfetto__Protos__EnableTracingResponse *)reply;
  assert_string_equal(r->error,
                      "write_into_file needs a file descriptor, which cannot "
                      "cross the network: stream with ReadBuffers instead");
  protobuf_c_message_free_unpacked(reply, NULL);
  /* Streaming instead works on the same connection. */
  sc.cfg.write_into_file = 0;
  call_t enable;
  call_init(&enable);
  assert_int_equal(rc_start(&rc, rc.cp, "EnableTracing", &en.base, &enable), 0);
  assert_int_equal(simple_call(&rc, "DisableTracing"), 0);
  assert_true(run_until(call_done, &enable, STEP_MS));
  assert_int_equal(enable.status, 0);
  call_free(&enable);
  relay_fx_disconnect(&rc, cfg);
  expect_audit(f, "alice", "EnableTracing", "deny",
               TG_N_RELAY_WRITE_INTO_FILE);
}

/* --- (6) detach keys per identity ---------------------------------------------------------- */

static void relay_namespaces_detach_keys_by_identity(void **state) {
  relay_fx_t *f = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &f->ts, "relay.producer",
                                        "test.ds", 4, 64, false), 0);
  rc_t a1, c, a2;
  tg_tls_config_t *acfg, *ccfg, *acfg2;
  relay_fx_connect(f, &a1, "alice", &acfg);
  simple_cfg_t sc;
  call_t enable;
  start_enable(&a1, &sc, &enable);
  assert_true(pump_started(&p));
  assert_int_equal(rc_key_call(&a1, "Detach", "k"), 0);

  /* carol has the record role too, but "k" is alice's. */
  relay_fx_connect(f, &c, "carol", &ccfg);
  assert_int_equal(rc_key_call(&c, "Attach", "k"), TG_EREMOTE_FAILED);
  assert_int_equal(rc_key_call(&c, "Attach", "alice/k"), TG_EREMOTE_FAILED);
  relay_fx_disconnect(&c, ccfg);

  relay_fx_connect(f, &a2, "alice", &acfg2);
  assert_int_equal(rc_key_call(&a2, "Attach", "k"), 0);
  assert_int_equal(simple_call(&a2, "DisableTracing"), 0);
  relay_fx_disconnect(&a2, acfg2);
  relay_fx_disconnect(&a1, acfg);
  call_free(&enable);
  raw_producer_close(&p);
  expect_audit(f, "alice", "Detach", "allow", TG_N_RELAY_KEY_SCOPED, "'alice/k'");
  expect_audit(f, "carol", "Attach", "allow", TG_N_RELAY_KEY_SCOPED, "'carol/k'");
  expect_audit(f, "carol", "Attach", "deny", TG_N_RELAY_REQUEST_MALFORMED,
               "'/'");
  expect_audit(f, "alice", "Attach", "allow", TG_N_RELAY_KEY_SCOPED, "'alice/k'");
}

/* --- (7) a dropped link with a resume key ---------------------------------------------------- */

static void relay_keeps_a_keyed_session_when_the_link_drops(void **state) {
  relay_fx_t *f = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &f->ts, "relay.producer",
                                        "test.ds", 4, 64, false), 0);
  rc_t a1, a2;
  tg_tls_config_t *cfg1, *cfg2;
  relay_fx_connect(f, &a1, "alice", &cfg1);
  assert_int_equal(rc_bind(&a1, "TracegateRelay"), 0);
  Perfetto__Protos__SetSessionKeyRequest sk =
      PERFETTO__PROTOS__SET_SESSION_KEY_REQUEST__INIT;
  sk.key = "resume";
  assert_int_equal(rc_call(&a1, a1.relay, "SetSessionKey", &sk.base, NULL, NULL), 0);
  ProtobufCMessage *m;
  assert_int_equal(rc_call(&a1, a1.relay, "ClockSync", NULL,
                           &perfetto__protos__clock_sync_response__descriptor,
                           &m), 0);
  assert_true(((Perfetto__Protos__ClockSyncResponse *)m)->realtime_ns > 0);
  protobuf_c_message_free_unpacked(m, NULL);
  assert_int_equal(rc_call(&a1, a1.relay, "GetHostInfo", NULL,
                           &perfetto__protos__relay_host_info__descriptor, &m),
                   0);
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  assert_string_equal(((Perfetto__Protos__RelayHostInfo *)m)->hostname, host);
  assert_true(((Perfetto__Protos__RelayHostInfo *)m)->num_cpus > 0);
  protobuf_c_message_free_unpacked(m, NULL);

  simple_cfg_t sc;
  call_t enable;
  start_enable(&a1, &sc, &enable);
  assert_true(pump_started(&p));
  assert_int_equal(raw_producer_write_packets(&p, 0, 0, 1, 0, "drop", 10, 5), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);

  /* The link goes away while tracing. */
  relay_fx_disconnect(&a1, cfg1);
  call_free(&enable);
  expect_log(f, TG_N_RELAY_SESSION_DETACHED, "'alice/resume'");
  expect_audit(f, "alice", "Detach", "allow", TG_N_RELAY_SESSION_DETACHED,
               "'alice/resume'");

  /* A new connection picks the session up and reads what was written. */
  relay_fx_connect(f, &a2, "alice", &cfg2);
  assert_int_equal(rc_key_call(&a2, "Attach", "resume"), 0);
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.has_attach_notification_only = 1;
  en.attach_notification_only = 1;
  call_t notify;
  call_init(&notify);
  assert_int_equal(rc_start(&a2, a2.cp, "EnableTracing", &en.base, &notify), 0);
  uint32_t values[16];
  assert_int_equal(read_values(&a2, values, 16), 5);
  for (uint32_t i = 0; i < 5; i++) assert_int_equal(values[i], 10 + i);
  assert_int_equal(simple_call(&a2, "DisableTracing"), 0);
  assert_true(run_until(call_done, &notify, STEP_MS));
  assert_int_equal(notify.status, 0);
  call_free(&notify);
  relay_fx_disconnect(&a2, cfg2);
  raw_producer_close(&p);
}

/* --- (8) --stdio ------------------------------------------------------------------------------- */

static void relay_stdio_bridges_a_pipe_pair(void **state) {
  relay_fx_t *f = *state;
  int to, from;
  assert_int_equal(relay_start_stdio(&f->rp, f->ts.consumer_sock, &to, &from), 0);
  f->relay_up = true;
  rc_t rc;
  assert_int_equal(rc_open_pipe(&rc, from, to), 0);
  assert_int_equal(rc_bind(&rc, "ConsumerPort"), 0);
  assert_int_equal(simple_call(&rc, "QueryServiceState"), 0);
  assert_int_equal(rc_bind(&rc, "TracegateRelay"), 0);
  ProtobufCMessage *m;
  assert_int_equal(rc_call(&rc, rc.relay, "GetHostInfo", NULL,
                           &perfetto__protos__relay_host_info__descriptor, &m),
                   0);
  assert_true(((Perfetto__Protos__RelayHostInfo *)m)->kernel[0] != 0);
  protobuf_c_message_free_unpacked(m, NULL);
  /* The checker runs here too. */
  simple_cfg_t sc;
  simple_cfg_init(&sc, 1024, 1, "test.ds");
  sc.cfg.output_path = "/tmp/nope";
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  assert_int_equal(rc_call(&rc, rc.cp, "EnableTracing", &en.base, NULL, NULL),
                   TG_EREMOTE_FAILED);
  /* Hanging up ends the relay, cleanly. */
  rc_close(&rc);
  assert_int_equal(relay_wait_exit(&f->rp, STEP_MS), 0);
  expect_log(f, TG_N_RELAY_CONNECTED, "@stdio: ");
  expect_log(f, TG_N_RELAY_CONNECTED, "ssh:");
  expect_log(f, TG_N_RELAY_CALL_DENIED, "EnableTracing");
}

/* --- (9) SIGHUP ----------------------------------------------------------------------------------- */

/* EnableTracing, then (when it was let through) DisableTracing, whose
 * success shows the session exists, and FreeBuffers. */
static void enable_and_disable(rc_t *rc, int want) {
  simple_cfg_t sc;
  call_t enable;
  start_enable(rc, &sc, &enable);
  if (want == 0) {
    assert_int_equal(simple_call(rc, "DisableTracing"), 0);
    assert_true(run_until(call_done, &enable, STEP_MS));
    assert_int_equal(simple_call(rc, "FreeBuffers"), 0);
  }
  assert_true(run_until(call_done, &enable, STEP_MS));
  assert_int_equal(enable.status, want);
  call_free(&enable);
}

static void relay_reloads_roles_on_sighup_without_dropping(void **state) {
  relay_fx_t *f = *state;
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "bob", &cfg);
  enable_and_disable(&rc, TG_EREMOTE_FAILED);

  assert_int_equal(file_replace(f->rp.authz, "alice record\nbob record\n"), 0);
  kill(f->rp.pid, SIGHUP);
  expect_log(f, TG_N_RELAY_RELOADED, f->rp.authz);
  expect_log(f, TG_N_RELAY_CRL_RELOADED, NULL);
  enable_and_disable(&rc, 0); /* same connection, new role */

  assert_int_equal(file_replace(f->rp.authz, "alice record\nbob superuser\n"), 0);
  kill(f->rp.pid, SIGHUP);
  expect_log(f, TG_N_RELAY_RELOAD_FAILED, "authz:2: ");
  expect_log(f, TG_N_RELAY_RELOAD_FAILED, "'superuser'");
  enable_and_disable(&rc, 0); /* the good table stays */

  assert_false(rc.closed);
  relay_fx_disconnect(&rc, cfg);
  assert_int_equal(audit_count(f->rp.audit, AUDIT("bob", "connect", "allow")),
                   1);
  expect_audit(f, "bob", "EnableTracing", "deny", TG_N_RELAY_ROLE_DENIES,
               "observe");
  assert_int_equal(
      audit_count(f->rp.audit, AUDIT("bob", "EnableTracing", "allow")), 2);
}

/* --- (10) SIGTERM ---------------------------------------------------------------------------------- */

static void relay_exits_cleanly_on_sigterm(void **state) {
  relay_fx_t *f = *state;
  rc_t a, b;
  tg_tls_config_t *acfg, *bcfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  relay_fx_connect(f, &b, "bob", &bcfg);
  kill(f->rp.pid, SIGTERM);
  assert_true(rc_wait_closed(&a, STEP_MS));
  assert_true(rc_wait_closed(&b, STEP_MS));
  assert_int_equal(relay_wait_exit(&f->rp, STEP_MS), 0);
  relay_fx_disconnect(&a, acfg);
  relay_fx_disconnect(&b, bcfg);
  expect_log(f, TG_N_RELAY_SHUTDOWN, " 2 ");
  expect_audit(f, "alice", "disconnect", "end", TG_N_RELAY_SHUTDOWN);
  expect_audit(f, "bob", "disconnect", "end", TG_N_RELAY_SHUTDOWN);
}

/* --- --max-conns ------------------------------------------------------------------------------------ */

static void relay_refuses_connections_beyond_max_conns(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--max-conns", "1", NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  rc_t a, b;
  tg_tls_config_t *acfg, *bcfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  bcfg = client_cfg("pki", "bob", "pki");
  /* Closed unanswered, the same whether our ClientHello was read or not. */
  assert_int_equal(rc_connect(&b, f->rp.port, bcfg), TG_EPEER_CLOSED);
  relay_fx_disconnect(&b, bcfg);
  expect_log(f, TG_N_RELAY_BUSY, NULL);
  expect_audit(f, "-", "connect", "deny", TG_N_RELAY_BUSY);
  /* The first connection is unaffected. */
  assert_int_equal(simple_call(&a, "QueryServiceState"), 0);
  relay_fx_disconnect(&a, acfg);
}

/* One identity cannot take every slot: with --max-conns 4 (and so 2 per
 * identity by default), alice's third connection is refused after its
 * handshake and told why, orderly; carol still gets in, and alice again
 * once one of hers has closed. */
static void relay_caps_the_connections_of_one_identity(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--max-conns", "4", NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  rc_t a1, a2, a3, c;
  tg_tls_config_t *a1cfg, *a2cfg, *ccfg;
  relay_fx_connect(f, &a1, "alice", &a1cfg);
  relay_fx_connect(f, &a2, "alice", &a2cfg);
  tg_tls_config_t *a3cfg = client_cfg("pki", "alice", "pki");
  assert_int_equal(rc_connect(&a3, f->rp.port, a3cfg), 0);
  assert_int_equal(rc_bind(&a3, "ConsumerPort"), TG_EUNKNOWN_SERVICE);
  assert_non_null(strstr(a3.bind_said, "--max-conns-per-identity"));
  assert_true(rc_wait_closed(&a3, STEP_MS));
  assert_int_equal(a3.close_status, TG_EPEER_CLOSED);
  relay_fx_disconnect(&a3, a3cfg);
  expect_audit(f, "alice", "connect", "deny", TG_N_RELAY_IDENTITY_LIMIT);
  /* Another identity is not held back by alice's. */
  relay_fx_connect(f, &c, "carol", &ccfg);
  assert_int_equal(simple_call(&c, "QueryServiceState"), 0);
  /* One of alice's goes: she may open another. */
  relay_fx_disconnect(&a1, a1cfg);
  relay_fx_connect(f, &a1, "alice", &a1cfg);
  assert_int_equal(simple_call(&a1, "QueryServiceState"), 0);
  assert_int_equal(simple_call(&a2, "QueryServiceState"), 0);
  relay_fx_disconnect(&a1, a1cfg);
  relay_fx_disconnect(&a2, a2cfg);
  relay_fx_disconnect(&c, ccfg);
}

/* Peers without a certificate that hold connections open do not keep a
 * client out: past --max-conns, a new connection closes the oldest one
 * still unverified after --unverified-evict-ms. */
static void relay_closes_stale_unverified_connections_for_a_client(
    void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--max-conns", "4", "--unverified-evict-ms", "100",
                         NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  int idle[4];
  for (int i = 0; i < 4; i++) idle[i] = tcp_connect(f->rp.port);
  /* The scenario: they stay silent past the age that makes them stale. */
  usleep(300 * 1000);
  rc_t a;
  tg_tls_config_t *acfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  assert_int_equal(simple_call(&a, "QueryServiceState"), 0);
  /* The oldest went; the others are still open. */
  assert_true(wait_eof(idle[0], STEP_MS));
  for (int i = 1; i < 4; i++) assert_false(wait_eof(idle[i], 0));
  expect_log(f, TG_N_RELAY_STALE_CLOSED, NULL);
  expect_audit(f, "-", "connect", "deny", TG_N_RELAY_STALE_CLOSED);
  /* A verified client is never closed for room: with alice and three
   * stale unverified connections in the four slots, bob's closes one of
   * those, never alice's, the oldest. */
  for (int i = 0; i < 4; i++) close(idle[i]);
  relay_fx_disconnect(&a, acfg);
  relay_fx_connect(f, &a, "alice", &acfg);
  int fresh[3];
  for (int i = 0; i < 3; i++) fresh[i] = tcp_connect(f->rp.port);
  tg_tls_config_t *bcfg = client_cfg("pki", "bob", "pki");
  rc_t b;
  usleep(300 * 1000); /* the three go stale */
  assert_int_equal(rc_connect(&b, f->rp.port, bcfg), 0);
  for (int i = 0; i < 3; i++) close(fresh[i]);
  relay_fx_disconnect(&b, bcfg);
  assert_int_equal(simple_call(&a, "QueryServiceState"), 0);
  relay_fx_disconnect(&a, acfg);
}

/* A handshake younger than --unverified-evict-ms is not closed for room:
 * the new connection is refused instead. */
static void relay_keeps_young_handshakes_and_refuses_the_newcomer(
    void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--max-conns", "1", "--unverified-evict-ms",
                         "600000", NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  int idle = tcp_connect(f->rp.port);
  tg_tls_config_t *acfg = client_cfg("pki", "alice", "pki");
  rc_t a;
  assert_int_not_equal(rc_connect(&a, f->rp.port, acfg), 0);
  relay_fx_disconnect(&a, acfg);
  assert_false(wait_eof(idle, 0));
  close(idle);
  expect_audit(f, "-", "connect", "deny", TG_N_RELAY_BUSY);
}

/* After |flood| refusals and one more once the budget refilled: a burst
 * of "connect deny" lines with |deny|, fewer than |flood|, and
 * "connect suppressed" lines of |budget| that count the others, each
 * refusal once. */
/* The audit budget the two tests below give the relay: small, so that a
 * flood outruns its refill on any machine (a refused handshake under
 * ASan on a loaded machine takes 150 ms; one a second refills here). */
#define TEST_AUDIT_BURST 5
#define TEST_AUDIT_PER_S 1
#define TEST_AUDIT_FLAGS \
  "--audit-burst", STR(TEST_AUDIT_BURST), "--audit-lines-per-s", \
      STR(TEST_AUDIT_PER_S)
#define STR_(x) #x
#define STR(x) STR_(x)

static void expect_budget_kept(relay_fx_t *f, const char *budget, tg_notice_t deny,
                               size_t flood) {
  audit_want_t held_lines = AUDIT(NULL, "connect", "suppressed",
                                  TG_N_RELAY_AUDIT_SUPPRESSED, budget);
  audit_expect(&f->rp, held_lines);
  size_t lines = audit_count(f->rp.audit, AUDIT(NULL, "connect", "deny", deny));
  assert_true(lines >= TEST_AUDIT_BURST);
  assert_true(lines < flood);
  uint64_t held = audit_sum(f->rp.audit, held_lines);
  assert_int_equal(lines + held, flood + 1);
}

/* Floods until the relay has held lines back (and at least 3 bursts):
 * |refuse_one| makes one refusal. Returns how many there were. */
static size_t flood_until_held(relay_fx_t *f, tg_notice_t deny,
                               void (*refuse_one)(relay_fx_t *, void *),
                               void *arg) {
  enum { MIN_FLOOD = 3 * TEST_AUDIT_BURST, MAX_FLOOD = 40 * TEST_AUDIT_BURST };
  const audit_want_t denied = AUDIT(NULL, "connect", "deny", deny);
  size_t flood = 0;
  while (flood < MAX_FLOOD) {
    refuse_one(f, arg);
    flood++;
    if (flood >= MIN_FLOOD && audit_count(f->rp.audit, denied) < flood) break;
  }
  if (audit_count(f->rp.audit, denied) >= flood)
    fail_msg("%zu refusals came slower than the bucket refills (%d a second)",
             flood, TEST_AUDIT_PER_S);
  /* The bucket refills: the next refusal's line comes after the count of
   * those held back. */
  usleep(1000 * 1000 / TEST_AUDIT_PER_S * 3 / 2);
  refuse_one(f, arg);
  return flood;
}

static void refuse_unverified(relay_fx_t *f, void *arg) {
  (void)arg;
  int fd = tcp_connect(f->rp.port);
  assert_true(wait_eof(fd, STEP_MS));
  close(fd);
}

/* Lines about peers without a certificate share one budget: a burst of
 * refused connections writes the budget's burst of them, then says how
 * many it held back. */
static void relay_rate_limits_lines_about_unverified_peers(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--max-conns", "1", "--unverified-evict-ms", "0",
                         TEST_AUDIT_FLAGS, NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  rc_t a;
  tg_tls_config_t *acfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  size_t flood = flood_until_held(f, TG_N_RELAY_BUSY, refuse_unverified, NULL);
  expect_budget_kept(f, "budget=unverified", TG_N_RELAY_BUSY, flood);
  assert_int_equal(simple_call(&a, "QueryServiceState"), 0);
  relay_fx_disconnect(&a, acfg);
}

/* Each asks at once, so that the relay answers with the refusal and
 * closes rather than waiting a while for a request. */
static void refuse_verified(relay_fx_t *f, void *arg) {
  tg_tls_config_t *dcfg = arg;
  rc_t rc;
  if (rc_connect(&rc, f->rp.port, dcfg) == 0)
    assert_true(rc_bind(&rc, "ConsumerPort") < 0);
  rc_close(&rc);
}

/* Refusals of verified clients have a budget of their own: a valid
 * certificate that is not authorized, looping connections, writes the
 * budget's burst of lines, then says how many it held back, and the
 * relay goes on serving the others. */
static void relay_rate_limits_lines_about_refused_clients(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {TEST_AUDIT_FLAGS, NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  tg_tls_config_t *dcfg = client_cfg("pki", "dave", "pki");
  size_t flood =
      flood_until_held(f, TG_N_RELAY_NOT_AUTHORIZED, refuse_verified, dcfg);
  tg_tls_config_free(dcfg);
  expect_budget_kept(f, "budget=verified", TG_N_RELAY_NOT_AUTHORIZED, flood);
  rc_t a;
  tg_tls_config_t *acfg;
  relay_fx_connect(f, &a, "alice", &acfg);
  assert_int_equal(simple_call(&a, "QueryServiceState"), 0);
  relay_fx_disconnect(&a, acfg);
}

/* --- backpressure ------------------------------------------------------------------------- */

#define BIG_CHUNKS 400
#define BIG_PACKET 30000

/* A client that stops reading makes the relay stop reading the service,
 * and everything arrives, in order, once it reads again. */
static void relay_backpressure_pauses_and_resumes_without_loss(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--high-water-kb", "64", "--log-level", "debug",
                         NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &f->ts, "relay.producer",
                                        "test.ds", 32, 1024, false), 0);
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "alice", &cfg);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 32768, 1, "test.ds");
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  call_t enable;
  call_init(&enable);
  assert_int_equal(rc_start(&rc, rc.cp, "EnableTracing", &en.base, &enable), 0);
  assert_true(pump_started(&p));
  assert_int_equal(p.page_size_kb, 32);

  /* 12 MB of packets, one 30 KB packet per 32 KB page. */
  char *str = malloc(BIG_PACKET + 1);
  memset(str, 'x', BIG_PACKET);
  str[BIG_PACKET] = 0;
  uint8_t *pk = malloc(BIG_PACKET + 64);
  uint32_t pages = (uint32_t)(p.smb_size / (32 * 1024));
  for (uint32_t i = 0; i < BIG_CHUNKS; i++) {
    size_t len = make_test_packet(pk, BIG_PACKET + 64, str, i);
    const uint8_t *frag = pk;
    uint32_t page = i % pages, chunk = 0;
    assert_int_equal(raw_producer_write_chunk(&p, page, 0, TG_PAGE_DIV_1, 1, i,
                                              0, &frag, &len, 1), 0);
    assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  }
  free(pk);
  free(str);

  /* Read with the client not reading: the relay's queue toward it fills
   * and it pauses the service side. */
  tg_transport_t *t = tg_tls_chan_transport(rc.ch);
  call_t rd;
  call_init(&rd);
  assert_int_equal(rc_start(&rc, rc.cp, "ReadBuffers", NULL, &rd), 0);
  uv_run(g_loop, UV_RUN_NOWAIT); /* the request goes out */
  tg_transport_pause_reading(t, true);
  expect_log(f, TG_N_RELAY_PAUSED_SERVICE, NULL);
  tg_transport_pause_reading(t, false);
  assert_true(run_until(call_done, &rd, 4 * STEP_MS));
  assert_int_equal(rd.status, 0);
  assert_int_equal(rd.n_values, BIG_CHUNKS);
  assert_false(rd.out_of_order);
  assert_int_equal(rd.values[(BIG_CHUNKS - 1) % 64], BIG_CHUNKS - 1);
  call_free(&rd);
  expect_log(f, TG_N_RELAY_RESUMED_SERVICE, NULL);

  assert_int_equal(simple_call(&rc, "DisableTracing"), 0);
  assert_true(run_until(call_done, &enable, STEP_MS));
  call_free(&enable);
  relay_fx_disconnect(&rc, cfg);
  raw_producer_close(&p);
}

/* --- idle timeout ----------------------------------------------------------------------------- */

static void relay_closes_idle_connections(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--idle-timeout-ms", "300", NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  rc_t rc;
  tg_tls_config_t *cfg;
  relay_fx_connect(f, &rc, "alice", &cfg);
  assert_true(rc_wait_closed(&rc, STEP_MS));
  relay_fx_disconnect(&rc, cfg);
  expect_audit(f, "alice", "disconnect", "end", TG_N_RELAY_IDLE_CLOSED);
}

static bool never(void *arg) {
  (void)arg;
  return false;
}

/* --dead-link-timeout shortens the idle timeout only of a client that
 * heartbeats (TracegateRelay.ClockSync): one that sits quiet, as a plain
 * Perfetto consumer waiting for its trace does, keeps its connection. */
static void relay_idle_limit_follows_the_heartbeat(void **state) {
  relay_fx_t *f = *state;
  const char *extra[] = {"--dead-link-timeout", "1", NULL};
  assert_int_equal(relay_start(&f->rp, f->ts.consumer_sock, extra), 0);
  f->relay_up = true;
  rc_t quiet, beat;
  tg_tls_config_t *cq, *cb;
  relay_fx_connect(f, &quiet, "alice", &cq);
  relay_fx_connect(f, &beat, "carol", &cb);
  assert_int_equal(rc_bind(&beat, "TracegateRelay"), 0);
  ProtobufCMessage *m;
  assert_int_equal(rc_call(&beat, beat.relay, "ClockSync", NULL,
                           &perfetto__protos__clock_sync_response__descriptor,
                           &m),
                   0);
  protobuf_c_message_free_unpacked(m, NULL);
  /* Silence: the heartbeating client is dropped after about a second... */
  assert_true(rc_wait_closed(&beat, STEP_MS));
  /* ...the quiet one, silent as long and more, still gets answers. */
  run_until(never, NULL, 1500);
  assert_int_equal(simple_call(&quiet, "QueryServiceState"), 0);
  relay_fx_disconnect(&quiet, cq);
  relay_fx_disconnect(&beat, cb);
  expect_audit(f, "carol", "disconnect", "end", TG_N_RELAY_IDLE_CLOSED);
}

/* --- flags ------------------------------------------------------------------- */

/* A --compress MODE other than allow or never: the relay does not start,
 * exits as for any bad flag, and says which flag and what it takes. */
static void relay_refuses_an_unknown_compress_mode(void **state) {
  (void)state;
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  const char *argv[] = {"tracegate-relay", "--compress", "sometimes", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stdin_fd = s.stdout_fd = TG_TEST_FD_DEVNULL;
  s.stderr_fd = pe[1];
  pid_t pid = tg_test_spawn(&s);
  close(pe[1]);
  assert_true(pid > 0);
  char line[256] = "";
  int got = tg_test_wait_line(pe[0], "--compress", STEP_MS, line, sizeof(line));
  close(pe[0]);
  int st = tg_test_reap(pid, STEP_MS);
  assert_int_equal(got, 1);
  assert_non_null(strstr(line, "'sometimes'"));
  assert_non_null(strstr(line, "allow, never"));
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
}

/* The exit status of the relay run with |argv| (stdio to /dev/null). */
static int relay_exit_status(const char *const *argv) {
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stdin_fd = s.stdout_fd = s.stderr_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  int st = tg_test_reap(pid, STEP_MS);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}

/* Durations and sizes in common/units.h's grammar, a number alone in the
 * flag's own unit: parsed before --version exits 0, refused with 2. */
static void relay_flags_take_durations_and_sizes(void **state) {
  (void)state;
  static const struct {
    const char *flag, *value;
    int status;
  } cases[] = {
      {"--handshake-timeout-ms", "10000", 0}, {"--handshake-timeout-ms", "10s", 0},
      {"--handshake-timeout-ms", "1.5s", 0},  {"--handshake-timeout-ms", "99", 2},
      {"--idle-timeout-ms", "1h", 0},         {"--idle-timeout-ms", "1d1ms", 2},
      {"--dead-link-timeout", "30", 0},       {"--dead-link-timeout", "1m", 0},
      {"--dead-link-timeout", "1500ms", 2},   {"--dead-link-timeout", "2h", 2},
      {"--high-water-kb", "4096", 0},         {"--high-water-kb", "4M", 0},
      {"--high-water-kb", "64KiB", 0},        {"--high-water-kb", "1000b", 2},
      {"--replay-window-kb", "8M", 0},        {"--replay-window-kb", "-1", 2},
      {"--session-ticket-lifetime", "1h", 0}, {"--session-lease-ms", "10m", 0},
      {"--unverified-evict-ms", "1m30", 2},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *argv[] = {"tracegate-relay", cases[i].flag, cases[i].value,
                          "--version", NULL};
    int st = relay_exit_status(argv);
    if (st != cases[i].status)
      fail_msg("%s %s: exit %d", cases[i].flag, cases[i].value, st);
  }
}

/* --version names the version and, on a line of its own, which library
 * carries each part of TLS in this build (tls/paths.h). */
static void relay_version_names_its_tls_paths(void **state) {
  (void)state;
  int po[2];
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  const char *argv[] = {"tracegate-relay", "--version", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stdin_fd = s.stderr_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = po[1];
  pid_t pid = tg_test_spawn(&s);
  close(po[1]);
  assert_true(pid > 0);
  char line[400] = "";
  int got = tg_test_wait_line(po[0], "TLS: ", STEP_MS, line, sizeof(line));
  close(po[0]);
  int st = tg_test_reap(pid, STEP_MS);
  assert_int_equal(got, 1);
  assert_non_null(strstr(line, "handshakes by mbedtls "));
  assert_non_null(strstr(line, "; records by "));
  assert_non_null(strstr(line, "; ECDSA by "));
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      RELAY_T(relay_records_a_trace_over_tls),
      RELAY_T(relay_observer_may_query_but_not_record),
      RELAY_T(relay_refuses_and_logs_every_bad_client),
      RELAY_T(relay_closes_on_oversized_frame),
      RELAY_T(relay_refuses_write_into_file_with_a_reason),
      RELAY_T(relay_namespaces_detach_keys_by_identity),
      RELAY_T(relay_keeps_a_keyed_session_when_the_link_drops),
      RELAY_TS(relay_stdio_bridges_a_pipe_pair),
      RELAY_T(relay_reloads_roles_on_sighup_without_dropping),
      RELAY_T(relay_exits_cleanly_on_sigterm),
      RELAY_TS(relay_refuses_connections_beyond_max_conns),
      RELAY_TS(relay_caps_the_connections_of_one_identity),
      RELAY_TS(relay_closes_stale_unverified_connections_for_a_client),
      RELAY_TS(relay_keeps_young_handshakes_and_refuses_the_newcomer),
      RELAY_TS(relay_rate_limits_lines_about_unverified_peers),
      RELAY_TS(relay_rate_limits_lines_about_refused_clients),
      RELAY_TS(relay_backpressure_pauses_and_resumes_without_loss),
      RELAY_TS(relay_closes_idle_connections),
      RELAY_TS(relay_idle_limit_follows_the_heartbeat),
      cmocka_unit_test(relay_refuses_an_unknown_compress_mode),
      cmocka_unit_test(relay_flags_take_durations_and_sizes),
      cmocka_unit_test(relay_version_names_its_tls_paths),
  };
  return cmocka_run_group_tests(tests, relay_fx_group_setup,
                                relay_fx_group_teardown);
}
