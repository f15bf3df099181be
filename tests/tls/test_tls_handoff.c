/* The record layer handed from mbedtls to libcrypto (tls/handoff.h,
 * tls/record.h), session against session through memory.
 *
 * The proof that the handed-over records are TLS is that mbedtls's own
 * record layer reads what they write and writes what they read: every
 * test pairs a handed-over side with an mbedtls one, for each cipher,
 * as client and as server, after full and resumed handshakes. Two
 * handed-over sides alone would agree even on a wrong key layout.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "test_proc.h"
#include "tls_pair.h"
#include "tls/record.h"
#include "tls/session.h"
#include "tracegate/error.h"

static char g_dir[128];

static const char *const k_suites[] = {
    "TLS-ECDHE-ECDSA-WITH-CHACHA20-POLY1305-SHA256",
    "TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256",
    "TLS-ECDHE-ECDSA-WITH-AES-256-GCM-SHA384",
};

static int group_setup(void **state) {
  (void)state;
  return tg_test_pki(g_dir, sizeof(g_dir), "tlsho");
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static tg_tls_config_t *cfg(bool server, bool mbedtls_records,
                            const char *suite) {
  tg_tls_config_t *c =
      tls_pair_config(g_dir, server,
                      (tg_tls_opts_t){.mbedtls_records = mbedtls_records,
                                      .ciphersuite = suite});
  assert_non_null(c);
  return c;
}

/* |srv_mbed|/|cli_mbed|: that side keeps mbedtls's records. |saved|: a
 * client session to resume. */
static void pair_open_on(tls_pair_t *p, tg_tls_config_t *scfg,
                         tg_tls_config_t *ccfg, bool srv_mbed, bool cli_mbed,
                         const char *suite, const uint8_t *saved,
                         size_t saved_len) {
  memset(p, 0, sizeof(*p));
  p->scfg = scfg;
  p->ccfg = ccfg;
  assert_int_equal(tls_pair_open(p, saved, saved_len), 0);
  assert_int_equal(tls_pair_handshake(p), 0);
  assert_string_equal(tg_tls_ciphersuite(p->s), suite);
  assert_string_equal(tg_tls_records(p->s), srv_mbed ? "mbedtls" : "libcrypto");
  assert_string_equal(tg_tls_records(p->c), cli_mbed ? "mbedtls" : "libcrypto");
  assert_int_equal(tg_tls_session_resumed(p->c), saved != NULL);
}

/* A pair on configs of its own. */
static void pair_open(tls_pair_t *p, bool srv_mbed, bool cli_mbed,
                      const char *suite) {
  pair_open_on(p, cfg(true, srv_mbed, suite), cfg(false, cli_mbed, suite),
               srv_mbed, cli_mbed, suite, NULL, 0);
}

static void pair_close(tls_pair_t *p) {
  tls_pair_close(p, NULL, NULL);
  tg_tls_config_free(p->scfg);
  tg_tls_config_free(p->ccfg);
}

static void fill(uint8_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    b[i] = (uint8_t)(seed >> 16);
  }
}

/* Reads everything |to| can give, |cap| bytes at a time, into |got|. */
static size_t drain(tg_tls_session_t *to, uint8_t *got, size_t max,
                    size_t cap) {
  size_t total = 0;
  for (;;) {
    size_t n = 0;
    int rv =
        tg_tls_read(to, got + total, cap < max - total ? cap : max - total, &n);
    if (rv == -EAGAIN) return total;
    assert_int_equal(rv, 0);
    assert_true(n > 0);
    total += n;
    if (total == max) return total;
  }
}

/* Writes of 1 byte, of a record exactly, of several records, each way;
 * the reader takes them in pieces smaller and larger than a record. */
static void exchange(tg_tls_session_t *from, tg_tls_session_t *to,
                     uint32_t seed) {
  static const size_t sizes[] = {1, TG_REC_PLAIN_MAX, 3 * TG_REC_PLAIN_MAX + 77,
                                 5000};
  enum { TOTAL = 1 + TG_REC_PLAIN_MAX + 3 * TG_REC_PLAIN_MAX + 77 + 5000 };
  static uint8_t sent[TOTAL], got[TOTAL + 1];
  fill(sent, TOTAL, seed);
  size_t off = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    assert_int_equal(tg_tls_write(from, sent + off, sizes[i]), 0);
    off += sizes[i];
  }
  assert_int_equal(tls_pair_carry(from, to), 0);
  size_t n = drain(to, got, TOTAL, seed % 2 ? 1000 : 40000);
  assert_int_equal(n, TOTAL);
  assert_memory_equal(got, sent, TOTAL);
}

/* |from| closes; |to| answers with its own close_notify (RFC 5246
 * 7.2.1), once however often asked. */
static void close_notify_reaches(tg_tls_session_t *from, tg_tls_session_t *to) {
  tg_tls_close_notify(from);
  assert_int_equal(tls_pair_carry(from, to), 0);
  uint8_t b[16];
  size_t n = 1;
  assert_int_equal(tg_tls_read(to, b, sizeof(b), &n), TG_EPEER_CLOSED);
  assert_int_equal(n, 0);
  tg_tls_close_notify(to);
  size_t answer = tg_buf_size(tg_tls_out(to));
  assert_true(answer > 0);
  tg_tls_close_notify(to);
  assert_int_equal(tg_buf_size(tg_tls_out(to)), answer);
  assert_int_equal(tls_pair_carry(to, from), 0);
  assert_int_equal(tg_tls_read(from, b, sizeof(b), &n), TG_EPEER_CLOSED);
}

/* A handed-over side has let go of mbedtls's record buffers (two of
 * ~16.7 KiB); an mbedtls side holds them. */
static void records_held(const tls_pair_t *p, bool srv_mbed, bool cli_mbed) {
  size_t s = tg_tls_mbedtls_record_bytes(p->s);
  size_t c = tg_tls_mbedtls_record_bytes(p->c);
  if (srv_mbed)
    assert_true(s > 32 * 1024);
  else
    assert_int_equal(s, 0);
  if (cli_mbed)
    assert_true(c > 32 * 1024);
  else
    assert_int_equal(c, 0);
}

static void interop(bool srv_mbed, bool cli_mbed) {
  for (size_t i = 0; i < sizeof(k_suites) / sizeof(k_suites[0]); i++) {
    tls_pair_t p;
    pair_open(&p, srv_mbed, cli_mbed, k_suites[i]);
    records_held(&p, srv_mbed, cli_mbed);
    exchange(p.c, p.s, 1 + (uint32_t)i);
    exchange(p.s, p.c, 2 + (uint32_t)i);
    exchange(p.c, p.s, 3 + (uint32_t)i);
    /* A session resumed from the ticket: new keys, same layout. */
    uint8_t *saved = NULL;
    size_t saved_len = 0;
    uint64_t expires = 0;
    assert_int_equal(tg_tls_session_save(p.c, &saved, &saved_len, &expires), 0);
    close_notify_reaches(p.s, p.c);
    tls_pair_close(&p, NULL, NULL);

    /* The same server config: it holds the ticket key. */
    pair_open_on(&p, p.scfg, p.ccfg, srv_mbed, cli_mbed, k_suites[i], saved,
                 saved_len);
    free(saved);
    records_held(&p, srv_mbed, cli_mbed);
    exchange(p.s, p.c, 4 + (uint32_t)i);
    exchange(p.c, p.s, 5 + (uint32_t)i);
    close_notify_reaches(p.c, p.s);
    pair_close(&p);
  }
}

static void handed_over_server_talks_to_mbedtls_client(void **state) {
  (void)state;
  interop(false, true);
}

static void handed_over_client_talks_to_mbedtls_server(void **state) {
  (void)state;
  interop(true, false);
}

static void both_handed_over(void **state) {
  (void)state;
  interop(false, false);
}

/* The server writes |n| bytes made from |seed| (kept in |msg|); returns
 * its output, the records not yet carried. */
static tg_buf_t *server_sends(tls_pair_t *p, uint8_t *msg, size_t n,
                              uint32_t seed) {
  fill(msg, n, seed);
  assert_int_equal(tg_tls_write(p->s, msg, n), 0);
  return tg_tls_out(p->s);
}

/* One changed bit in a record: the handed-over reader refuses it, says
 * why, and tells the peer with a fatal alert that mbedtls understands. */
static void a_changed_record_is_refused_with_an_alert(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(k_suites) / sizeof(k_suites[0]); i++) {
    tls_pair_t p;
    pair_open(&p, true, false, k_suites[i]);
    uint8_t msg[300];
    tg_buf_t *out = server_sends(&p, msg, sizeof(msg), 9);
    tg_buf_begin(out)[TG_REC_HEADER_SIZE + 20] ^= 0x04;
    assert_int_equal(tls_pair_carry(p.s, p.c), 0);
    uint8_t got[400];
    size_t n = 0;
    assert_int_equal(tg_tls_read(p.c, got, sizeof(got), &n), TG_ETLS);
    assert_int_equal(n, 0);
    assert_non_null(strstr(tg_tls_last_error(p.c), "bad_record_mac"));
    /* Sticky: nothing is read or written after. */
    assert_int_equal(tg_tls_read(p.c, got, sizeof(got), &n), TG_ETLS);
    assert_int_equal(tg_tls_write(p.c, msg, 1), TG_ETLS);
    assert_int_equal(tls_pair_carry(p.c, p.s), 0);
    assert_int_equal(tg_tls_read(p.s, got, sizeof(got), &n),
                     TG_ETLS_PEER_ALERT);
    pair_close(&p);
  }
}

/* A record sent twice (replayed by whoever sits on the path): the second
 * copy does not authenticate under the next sequence number. */
static void a_replayed_record_is_refused(void **state) {
  (void)state;
  tls_pair_t p;
  pair_open(&p, true, false, k_suites[1]);
  uint8_t msg[100];
  tg_buf_t *out = server_sends(&p, msg, sizeof(msg), 3);
  size_t len = tg_buf_size(out);
  uint8_t copy[256];
  assert_true(len <= sizeof(copy));
  memcpy(copy, tg_buf_begin(out), len);
  assert_int_equal(tls_pair_carry(p.s, p.c), 0);
  assert_int_equal(tg_tls_feed(p.c, copy, len), 0);
  uint8_t got[200];
  size_t n = 0;
  assert_int_equal(tg_tls_read(p.c, got, sizeof(got), &n), 0);
  assert_int_equal(n, sizeof(msg));
  assert_memory_equal(got, msg, sizeof(msg));
  assert_int_equal(tg_tls_read(p.c, got, sizeof(got), &n), TG_ETLS);
  pair_close(&p);
}

/* Headers that no TLS 1.2 peer sends: another version, a length over
 * 2^14 + 24; and a record cut short waits for the rest. */
static void bad_headers_are_refused_and_partial_records_wait(void **state) {
  (void)state;
  static const uint8_t bad[][5] = {
      {23, 3, 1, 0, 40},    /* TLS 1.0 */
      {23, 3, 3, 0x40, 25}, /* 16409 > 16408 */
      {23, 3, 3, 0, 3},     /* shorter than the tag */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tls_pair_t p;
    pair_open(&p, true, false, k_suites[1]);
    uint8_t rec[64] = {0};
    memcpy(rec, bad[i], 5);
    assert_int_equal(tg_tls_feed(p.c, rec, sizeof(rec)), 0);
    uint8_t got[64];
    size_t n = 0;
    assert_int_equal(tg_tls_read(p.c, got, sizeof(got), &n), TG_ETLS);
    pair_close(&p);
  }
  tls_pair_t p;
  pair_open(&p, true, false, k_suites[0]);
  uint8_t msg[50];
  tg_buf_t *out = server_sends(&p, msg, sizeof(msg), 5);
  size_t len = tg_buf_size(out);
  uint8_t *rec = tg_buf_begin(out);
  uint8_t got[64];
  size_t n = 0;
  for (size_t k = 0; k < len; k++) {
    assert_int_equal(tg_tls_feed(p.c, rec + k, 1), 0);
    int rv = tg_tls_read(p.c, got, sizeof(got), &n);
    if (k + 1 < len) {
      assert_int_equal(rv, -EAGAIN);
    } else {
      assert_int_equal(rv, 0);
      assert_int_equal(n, sizeof(msg));
      assert_memory_equal(got, msg, sizeof(msg));
    }
  }
  pair_close(&p);
}

/* Default configs: the suite the server puts first. Handing records to
 * libcrypto on a CPU with AES instructions, AES-128-GCM (libcrypto's
 * fastest here); keeping mbedtls's records, CHACHA20-POLY1305 (mbedtls's
 * fastest). */
static void the_server_orders_suites_for_its_record_layer(void **state) {
  (void)state;
  for (int mbed = 0; mbed < 2; mbed++) {
    tls_pair_t p;
    const char *want = !mbed && tg_tls_cpu_has_aes()
                           ? "TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256"
                           : "TLS-ECDHE-ECDSA-WITH-CHACHA20-POLY1305-SHA256";
    pair_open_on(&p, cfg(true, mbed, NULL), cfg(false, mbed, NULL), mbed, mbed,
                 want, NULL, 0);
    exchange(p.c, p.s, 11);
    pair_close(&p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(handed_over_server_talks_to_mbedtls_client),
      cmocka_unit_test(handed_over_client_talks_to_mbedtls_server),
      cmocka_unit_test(both_handed_over),
      cmocka_unit_test(a_changed_record_is_refused_with_an_alert),
      cmocka_unit_test(a_replayed_record_is_refused),
      cmocka_unit_test(bad_headers_are_refused_and_partial_records_wait),
      cmocka_unit_test(the_server_orders_suites_for_its_record_layer),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
