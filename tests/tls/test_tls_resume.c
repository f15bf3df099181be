/* Session resumption (tls/session.h): session tickets issued by a server,
 * saved and offered by a client, and what a server checks again on a
 * resumed session. Two tg_tls sessions talk through their memory buffers
 * (no sockets): each step moves one side's ciphertext to the other, so
 * every outcome is decided by the handshake itself, never by timing.
 * Whether a handshake resumed is asserted through tg_tls_session_resumed()
 * on both sides.
 *
 * Certificates are made at test time (tg_test_certs): CA "pki" with the
 * server relay.test and clients carol, dave, erin (dave and erin are
 * revoked by the tests that need it). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_proc.h"
#include "tls/session.h"
#include "tracegate/error.h"

static char g_dir[128];

static int certs(const char *args) { return tg_test_certs(g_dir, args); }

static int group_setup(void **state) {
  (void)state;
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "tlsres") < 0) return -1;
  if (certs("ca pki") || certs("host pki relay.test") ||
      certs("client pki carol") || certs("client pki dave") ||
      certs("client pki erin") || certs("client pki zoe") ||
      certs("revoke pki zoe"))
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static char *path(const char *file) {
  static char bufs[4][256];
  static int i;
  char *b = bufs[i++ % 4];
  snprintf(b, 256, "%s/pki/%s", g_dir, file);
  return b;
}

static tg_tls_config_t *server_cfg(uint32_t ticket_lifetime_s) {
  tg_tls_opts_t o = {.server = true,
                     .cert_file = path("relay.test.pem"),
                     .key_file = path("relay.test.key"),
                     .ca_file = path("ca.pem"),
                     .crl_file = path("crl.pem"),
                     .ticket_lifetime_s = ticket_lifetime_s};
  tg_tls_config_t *cfg = NULL;
  char err[256];
  int rv = tg_tls_config_new(&o, &cfg, err, sizeof(err));
  if (rv) fail_msg("server config: %s: %s", tg_strerror(rv), err);
  return cfg;
}

static tg_tls_config_t *client_cfg(const char *name) {
  char cert[64], key[64];
  snprintf(cert, sizeof(cert), "%s.pem", name);
  snprintf(key, sizeof(key), "%s.key", name);
  tg_tls_opts_t o = {.cert_file = path(cert),
                     .key_file = path(key),
                     .ca_file = path("ca.pem")};
  tg_tls_config_t *cfg = NULL;
  char err[256];
  int rv = tg_tls_config_new(&o, &cfg, err, sizeof(err));
  if (rv) fail_msg("client config: %s: %s", tg_strerror(rv), err);
  return cfg;
}

/* Moves |from|'s pending ciphertext into |to|; whether any moved. */
static bool move(tg_tls_session_t *from, tg_tls_session_t *to) {
  tg_buf_t *out = tg_tls_out(from);
  size_t n = tg_buf_size(out);
  if (n == 0) return false;
  assert_int_equal(tg_tls_feed(to, tg_buf_begin(out), n), 0);
  tg_buf_consume(out, n);
  return true;
}

typedef struct conn {
  tg_tls_session_t *cli, *srv;
  int cli_rv, srv_rv;
} conn_t;

/* One connection: a client session (offering |saved| when not NULL) and
 * a server session, stepped until neither has anything left to say. */
static void connect_pair(conn_t *c, tg_tls_config_t *ccfg,
                         tg_tls_config_t *scfg, const uint8_t *saved,
                         size_t saved_len) {
  memset(c, 0, sizeof(*c));
  assert_int_equal(tg_tls_session_new(ccfg, "relay.test", 0, &c->cli), 0);
  assert_int_equal(tg_tls_session_new(scfg, NULL, 0, &c->srv), 0);
  if (saved) assert_int_equal(tg_tls_session_offer(c->cli, saved, saved_len), 0);
  c->cli_rv = c->srv_rv = -EAGAIN;
  for (int step = 0; step < 64; step++) {
    if (c->cli_rv == -EAGAIN) c->cli_rv = tg_tls_handshake(c->cli);
    bool moved = move(c->cli, c->srv);
    if (c->srv_rv == -EAGAIN) c->srv_rv = tg_tls_handshake(c->srv);
    moved |= move(c->srv, c->cli);
    if (!moved) return; /* settled: done, failed, or stuck (asserted) */
  }
  fail_msg("handshake did not settle");
}

static void conn_free(conn_t *c) {
  tg_tls_session_free(c->cli);
  tg_tls_session_free(c->srv);
}

/* A first, full connection; returns its saved session. */
static uint8_t *first_connection(tg_tls_config_t *ccfg, tg_tls_config_t *scfg,
                                 size_t *len, uint64_t *expires) {
  conn_t c;
  connect_pair(&c, ccfg, scfg, NULL, 0);
  assert_int_equal(c.cli_rv, 0);
  assert_int_equal(c.srv_rv, 0);
  assert_false(tg_tls_session_resumed(c.cli));
  assert_false(tg_tls_session_resumed(c.srv));
  uint8_t *saved = NULL;
  assert_int_equal(tg_tls_session_save(c.cli, &saved, len, expires), 0);
  conn_free(&c);
  return saved;
}

/* The start every ticket test shares: a relay config with tickets, a
 * client |name|, and the session saved from a first, full connection.
 * The test owns all of it until ticket_case_end() frees it. */
typedef struct ticket_case {
  tg_tls_config_t *scfg, *ccfg;
  uint8_t *saved;
  size_t len;
  uint64_t expires;
} ticket_case_t;

static void ticket_case_start(ticket_case_t *t, const char *name) {
  t->scfg = server_cfg(TG_TLS_TICKET_LIFETIME_DEFAULT_S);
  t->ccfg = client_cfg(name);
  t->saved = first_connection(t->ccfg, t->scfg, &t->len, &t->expires);
}

static void ticket_case_end(ticket_case_t *t) {
  free(t->saved);
  tg_tls_config_free(t->ccfg);
  tg_tls_config_free(t->scfg);
}

static void tls_second_connection_resumes_from_ticket(void **state) {
  (void)state;
  ticket_case_t t;
  ticket_case_start(&t, "carol");
  /* The server's lifetime hint bounds the client's idea of expiry. */
  uint64_t now = (uint64_t)time(NULL);
  assert_true(t.expires > now);
  assert_true(t.expires <= now + TG_TLS_TICKET_LIFETIME_DEFAULT_S + 5);

  conn_t c;
  connect_pair(&c, t.ccfg, t.scfg, t.saved, t.len);
  assert_int_equal(c.cli_rv, 0);
  assert_int_equal(c.srv_rv, 0);
  assert_true(tg_tls_session_resumed(c.cli));
  assert_true(tg_tls_session_resumed(c.srv));
  /* The identity comes from the certificate kept in the ticket. */
  assert_string_equal(tg_tls_peer_identity(c.srv), "carol");
  /* Data flows over the resumed session. */
  assert_int_equal(tg_tls_write(c.cli, (const uint8_t *)"ping", 4), 0);
  move(c.cli, c.srv);
  uint8_t buf[16];
  size_t n;
  assert_int_equal(tg_tls_read(c.srv, buf, sizeof(buf), &n), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(buf, "ping", 4);
  conn_free(&c);
  ticket_case_end(&t);
}

static void tls_restarted_server_falls_back_to_full_handshake(void **state) {
  (void)state;
  ticket_case_t t;
  ticket_case_start(&t, "carol");
  /* A restart: a new config draws new ticket keys. */
  tg_tls_config_free(t.scfg);
  t.scfg = server_cfg(TG_TLS_TICKET_LIFETIME_DEFAULT_S);
  conn_t c;
  connect_pair(&c, t.ccfg, t.scfg, t.saved, t.len);
  assert_int_equal(c.cli_rv, 0);
  assert_int_equal(c.srv_rv, 0);
  assert_false(tg_tls_session_resumed(c.cli));
  assert_false(tg_tls_session_resumed(c.srv));
  assert_string_equal(tg_tls_peer_identity(c.srv), "carol");
  conn_free(&c);
  ticket_case_end(&t);
}

static void tls_revoked_after_first_connection_cannot_resume(void **state) {
  (void)state;
  ticket_case_t t;
  ticket_case_start(&t, "dave");
  assert_int_equal(certs("revoke pki dave"), 0);
  char err[256];
  assert_int_equal(tg_tls_config_reload_crl(t.scfg, NULL, err, sizeof(err)), 0);
  conn_t c;
  connect_pair(&c, t.ccfg, t.scfg, t.saved, t.len);
  assert_int_equal(c.srv_rv, TG_ETLS_CERT);
  assert_non_null(strstr(tg_tls_last_error(c.srv), "revoked"));
  /* The client had finished its side; it learns from the alert. */
  uint8_t buf[16];
  size_t n;
  assert_true(c.cli_rv < 0 ||
              tg_tls_read(c.cli, buf, sizeof(buf), &n) == TG_ETLS_PEER_ALERT);
  conn_free(&c);
  /* A full handshake is refused too, as before. */
  connect_pair(&c, t.ccfg, t.scfg, NULL, 0);
  assert_int_equal(c.srv_rv, TG_ETLS_CERT);
  conn_free(&c);
  ticket_case_end(&t);
}

static void tls_server_without_tickets_issues_none(void **state) {
  (void)state;
  tg_tls_config_t *scfg = server_cfg(0);
  tg_tls_config_t *ccfg = client_cfg("carol");
  conn_t c;
  connect_pair(&c, ccfg, scfg, NULL, 0);
  assert_int_equal(c.cli_rv, 0);
  assert_int_equal(c.srv_rv, 0);
  uint8_t *saved;
  size_t len;
  uint64_t expires;
  assert_int_equal(tg_tls_session_save(c.cli, &saved, &len, &expires), -ENOENT);
  assert_null(saved);
  conn_free(&c);
  tg_tls_config_free(ccfg);
  tg_tls_config_free(scfg);
}

static void tls_ticket_of_tickets_off_server_is_not_accepted(void **state) {
  (void)state;
  /* Saved from a relay with tickets, offered to one (same keys cannot be
   * had) with tickets off: a full handshake. */
  ticket_case_t t;
  ticket_case_start(&t, "carol");
  tg_tls_config_t *off = server_cfg(0);
  conn_t c;
  connect_pair(&c, t.ccfg, off, t.saved, t.len);
  assert_int_equal(c.cli_rv, 0);
  assert_int_equal(c.srv_rv, 0);
  assert_false(tg_tls_session_resumed(c.cli));
  assert_false(tg_tls_session_resumed(c.srv));
  conn_free(&c);
  tg_tls_config_free(off);
  ticket_case_end(&t);
}

static void tls_offer_refuses_bytes_that_are_no_session(void **state) {
  (void)state;
  ticket_case_t t;
  ticket_case_start(&t, "erin");
  tg_tls_session_t *s;
  assert_int_equal(tg_tls_session_new(t.ccfg, "relay.test", 0, &s), 0);
  uint8_t junk[64];
  memset(junk, 0xa5, sizeof(junk));
  assert_int_equal(tg_tls_session_offer(s, junk, sizeof(junk)), -EINVAL);
  /* Every truncation of a real one is refused, never read past. */
  for (size_t k = 1; k < t.len; k += 7)
    assert_int_equal(tg_tls_session_offer(s, t.saved, k), -EINVAL);
  tg_tls_session_free(s);
  ticket_case_end(&t);
}

static void tls_fingerprints_tell_identities_and_cas_apart(void **state) {
  (void)state;
  tg_tls_config_t *a = client_cfg("carol"), *b = client_cfg("dave");
  uint8_t oa[32], ca_a[32], ob[32], ca_b[32];
  tg_tls_config_fingerprints(a, oa, ca_a);
  tg_tls_config_fingerprints(b, ob, ca_b);
  assert_memory_not_equal(oa, ob, 32);
  assert_memory_equal(ca_a, ca_b, 32);
  tg_tls_config_free(a);
  tg_tls_config_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tls_second_connection_resumes_from_ticket),
      cmocka_unit_test(tls_restarted_server_falls_back_to_full_handshake),
      cmocka_unit_test(tls_revoked_after_first_connection_cannot_resume),
      cmocka_unit_test(tls_server_without_tickets_issues_none),
      cmocka_unit_test(tls_ticket_of_tickets_off_server_is_not_accepted),
      cmocka_unit_test(tls_offer_refuses_bytes_that_are_no_session),
      cmocka_unit_test(tls_fingerprints_tell_identities_and_cas_apart),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
