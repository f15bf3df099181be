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
#include "tls/handoff.h"
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

/* A handed-over side has freed mbedtls's context (its keys and record
 * buffers with it); an mbedtls side keeps it. */
static void records_held(const tls_pair_t *p, bool srv_mbed, bool cli_mbed) {
  assert_int_equal(tg_tls_mbedtls_released(p->s), !srv_mbed);
  assert_int_equal(tg_tls_mbedtls_released(p->c), !cli_mbed);
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

/* A client asks for records of at most 512 bytes (RFC 6066): a
 * handed-over side keeps to it both ways, as writer and as reader, and
 * stays handed over. mbedtls's own record layer at the other end refuses
 * any record over the size, so the exchange proves it. */
static void max_fragment_length_is_kept_by_handed_over_records(void **state) {
  (void)state;
  static const bool sides[][2] = {{false, false}, {false, true}, {true, false}};
  for (size_t i = 0; i < sizeof(sides) / sizeof(sides[0]); i++) {
    bool srv_mbed = sides[i][0], cli_mbed = sides[i][1];
    const char *suite = k_suites[i % 2];
    tg_tls_config_t *ccfg = tls_pair_config(
        g_dir, false,
        (tg_tls_opts_t){.mbedtls_records = cli_mbed, .ciphersuite = suite,
                        .max_fragment_len = 512});
    assert_non_null(ccfg);
    tls_pair_t p;
    pair_open_on(&p, cfg(true, srv_mbed, suite), ccfg, srv_mbed, cli_mbed,
                 suite, NULL, 0);
    uint8_t msg[5000];
    tg_buf_t *out = server_sends(&p, msg, sizeof(msg), 11);
    /* Every record the server wrote carries at most 512 bytes. */
    const uint8_t *r = tg_buf_begin(out);
    size_t left = tg_buf_size(out), records = 0;
    while (left > 0) {
      size_t frag = (size_t)r[3] << 8 | r[4];
      assert_true(frag <= 512 + TG_REC_GCM_EXPLICIT_SIZE + TG_REC_TAG_SIZE);
      assert_true(TG_REC_HEADER_SIZE + frag <= left);
      r += TG_REC_HEADER_SIZE + frag;
      left -= TG_REC_HEADER_SIZE + frag;
      records++;
    }
    assert_true(records >= sizeof(msg) / 512);
    assert_int_equal(tls_pair_carry(p.s, p.c), 0);
    uint8_t got[sizeof(msg)];
    assert_int_equal(drain(p.c, got, sizeof(got), 3000), sizeof(msg));
    assert_memory_equal(got, msg, sizeof(msg));
    exchange(p.c, p.s, 12);
    pair_close(&p);
  }
  /* Sizes RFC 6066 does not have, and a server asking, are refused. */
  char err[200];
  tg_tls_config_t *c = NULL;
  char ca[200];
  snprintf(ca, sizeof(ca), "%s/pki/ca.pem", g_dir);
  assert_int_equal(
      tg_tls_config_new(&(tg_tls_opts_t){.ca_file = ca, .max_fragment_len = 600},
                        &c, err, sizeof(err)),
      TG_EBAD_CONFIG);
  assert_non_null(strstr(err, "512, 1024, 2048 or 4096"));
}

/* --- the reader's limits, on two handed-over directions with known keys -- */

typedef struct link {
  tg_tls_handoff_t reader; /* the side under test */
  tg_rec_dir_t peer_out;   /* what the peer seals with */
  tg_rec_dir_t peer_in;    /* what the peer opens the reader's alerts with */
  tg_buf_t wire, back;     /* to the reader; from it */
} link_t;

static void link_open(link_t *l, tg_rec_cipher_t c) {
  memset(l, 0, sizeof(*l));
  uint8_t k1[32], k2[32], iv1[12], iv2[12];
  fill(k1, sizeof(k1), 1);
  fill(k2, sizeof(k2), 2);
  fill(iv1, sizeof(iv1), 3);
  fill(iv2, sizeof(iv2), 4);
  size_t kl = tg_rec_key_len(c), il = tg_rec_iv_len(c);
  assert_int_equal(tg_rec_dir_init(&l->reader.in, c, false, k1, kl, iv1, il, 1), 0);
  assert_int_equal(tg_rec_dir_init(&l->peer_out, c, true, k1, kl, iv1, il, 1), 0);
  assert_int_equal(tg_rec_dir_init(&l->reader.out, c, true, k2, kl, iv2, il, 1), 0);
  assert_int_equal(tg_rec_dir_init(&l->peer_in, c, false, k2, kl, iv2, il, 1), 0);
  l->reader.started = true;
  l->reader.in_max = l->reader.out_max = TG_REC_PLAIN_MAX;
  tg_buf_init(&l->wire, 0);
  tg_buf_init(&l->back, 0);
}

static void link_close(link_t *l) {
  tg_tls_handoff_clear(&l->reader);
  tg_rec_dir_free(&l->peer_out);
  tg_rec_dir_free(&l->peer_in);
  tg_buf_free(&l->wire);
  tg_buf_free(&l->back);
}

/* The peer sends one record of |type| carrying |len| bytes. */
static void peer_sends(link_t *l, uint8_t type, const uint8_t *data,
                       size_t len) {
  size_t n = tg_rec_sealed_size(l->peer_out.cipher, len);
  uint8_t *p = tg_buf_reserve(&l->wire, n);
  assert_non_null(p);
  assert_int_equal(tg_rec_seal(&l->peer_out, type, data, len, p), 0);
  tg_buf_commit(&l->wire, n);
}

static int reader_reads(link_t *l, size_t *n, char *why, size_t whylen) {
  static uint8_t buf[TG_REC_PLAIN_MAX];
  return tg_tls_handoff_read(&l->reader, &l->wire, &l->back, buf, sizeof(buf),
                             n, why, whylen);
}

/* The fatal alert the reader sent the peer: its description. */
static int alert_sent(link_t *l) {
  size_t size = 0;
  assert_int_equal(tg_rec_peek(tg_buf_begin(&l->back), tg_buf_size(&l->back),
                               &size), 0);
  assert_int_equal(size, tg_buf_size(&l->back));
  uint8_t plain[2], type = 0;
  assert_int_equal(tg_rec_plain_len(l->peer_in.cipher, size), 2);
  assert_int_equal(tg_rec_open(&l->peer_in, tg_buf_begin(&l->back), size,
                               plain, &type), 0);
  assert_int_equal(type, TG_REC_ALERT);
  assert_int_equal(plain[0], 2);
  return plain[1];
}

/* Empty application records are legal, but nothing a reader should spin
 * on without end: three in a row pass (as mbedtls allows), the fourth is
 * refused with unexpected_message. Data in between starts the count
 * again. */
static void empty_records_in_a_row_are_bounded(void **state) {
  (void)state;
  link_t l;
  link_open(&l, TG_REC_CHACHA20_POLY1305);
  char why[128];
  size_t n = 0;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 3; i++) peer_sends(&l, TG_REC_APPLICATION_DATA, NULL, 0);
    peer_sends(&l, TG_REC_APPLICATION_DATA, (const uint8_t *)"x", 1);
    assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), 0);
    assert_int_equal(n, 1);
  }
  for (int i = 0; i < 4; i++) peer_sends(&l, TG_REC_APPLICATION_DATA, NULL, 0);
  assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), TG_ETLS);
  assert_non_null(strstr(why, "empty records"));
  assert_int_equal(alert_sent(&l), 10 /* unexpected_message */);
  link_close(&l);
}

/* Warning alerts carry nothing the reader acts on: five in a row pass (as
 * OpenSSL allows), the sixth is refused. */
static void warning_alerts_in_a_row_are_bounded(void **state) {
  (void)state;
  link_t l;
  link_open(&l, TG_REC_AES_128_GCM);
  static const uint8_t warning[2] = {1, 100 /* no_renegotiation */};
  char why[128];
  size_t n = 0;
  for (int i = 0; i < 5; i++) peer_sends(&l, TG_REC_ALERT, warning, 2);
  peer_sends(&l, TG_REC_APPLICATION_DATA, (const uint8_t *)"ok", 2);
  assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), 0);
  assert_int_equal(n, 2);
  for (int i = 0; i < 6; i++) peer_sends(&l, TG_REC_ALERT, warning, 2);
  assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), TG_ETLS);
  assert_non_null(strstr(why, "warning alerts"));
  assert_int_equal(alert_sent(&l), 10 /* unexpected_message */);
  link_close(&l);
}

/* A record whose plaintext would be over the limit is refused with
 * record_overflow before it is opened: a ChaCha20 record (no explicit
 * nonce) fits 2^14 + 8 bytes in the fragment limit GCM's needs, and a
 * negotiated max_fragment_length lowers the limit. */
static void an_oversized_plaintext_is_a_record_overflow(void **state) {
  (void)state;
  static uint8_t rec[TG_REC_HEADER_SIZE + TG_REC_FRAGMENT_MAX];
  struct {
    tg_rec_cipher_t c;
    size_t in_max, plain;
  } cases[] = {
      {TG_REC_CHACHA20_POLY1305, TG_REC_PLAIN_MAX, TG_REC_PLAIN_MAX + 8},
      {TG_REC_CHACHA20_POLY1305, TG_REC_PLAIN_MAX, TG_REC_PLAIN_MAX + 1},
      {TG_REC_AES_128_GCM, 512, 513},
      {TG_REC_CHACHA20_POLY1305, 1024, 4096},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    link_t l;
    link_open(&l, cases[i].c);
    l.reader.in_max = cases[i].in_max;
    size_t frag = tg_rec_sealed_size(cases[i].c, cases[i].plain) -
                  TG_REC_HEADER_SIZE;
    memset(rec, 0xa5, sizeof(rec));
    rec[0] = TG_REC_APPLICATION_DATA;
    rec[1] = rec[2] = 3;
    rec[3] = (uint8_t)(frag >> 8);
    rec[4] = (uint8_t)frag;
    assert_int_equal(tg_buf_append(&l.wire, rec, TG_REC_HEADER_SIZE + frag), 0);
    char why[128];
    size_t n = 0;
    assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), TG_ETLS);
    assert_non_null(strstr(why, "over the limit"));
    assert_int_equal(alert_sent(&l), 22 /* record_overflow */);
    link_close(&l);
  }
  /* At the limit it is read. */
  link_t l;
  link_open(&l, TG_REC_AES_128_GCM);
  l.reader.in_max = 512;
  static uint8_t data[512];
  peer_sends(&l, TG_REC_APPLICATION_DATA, data, sizeof(data));
  char why[128];
  size_t n = 0;
  assert_int_equal(reader_reads(&l, &n, why, sizeof(why)), 0);
  assert_int_equal(n, 512);
  link_close(&l);
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
      cmocka_unit_test(max_fragment_length_is_kept_by_handed_over_records),
      cmocka_unit_test(empty_records_in_a_row_are_bounded),
      cmocka_unit_test(warning_alerts_in_a_row_are_bounded),
      cmocka_unit_test(an_oversized_plaintext_is_a_record_overflow),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
