/* The x25519 key exchange by libcrypto (tls/kex.h), at either end: each
 * meets mbedtls's own other end and its own kind, moves application data
 * both ways afterwards (so both ends derived the same keys), is left to
 * mbedtls when asked, is not taken by a resumed handshake (there is no
 * exchange), a server's refuses a ClientKeyExchange that is not one
 * x25519 value, and the self-test passes on the mbedtls it was built
 * against. The refusal on another mbedtls version is test_tls_paths's. */
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
#include "tls/kex.h"
#include "tls/kex_test.h"
#include "tls/paths.h"
#include "tls/session.h"
#include "tls_pair.h"

static char g_dir[128]; /* pki: the CA, relay.test, alice */

static int group_setup(void **state) {
  (void)state;
  return tg_test_pki(g_dir, sizeof(g_dir), "tlskex") < 0 ? -1 : 0;
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static tg_tls_config_t *config(bool server, tg_tls_opts_t o) {
  tg_tls_config_t *c = tls_pair_config(g_dir, server, o);
  assert_non_null(c);
  return c;
}

/* |msg| written by |from| arrives whole at |to|. */
static void carries(tg_tls_session_t *from, tg_tls_session_t *to,
                    const char *msg) {
  assert_int_equal(tg_tls_write(from, (const uint8_t *)msg, strlen(msg)), 0);
  assert_int_equal(tls_pair_carry(from, to), 0);
  char got[64];
  size_t n = 0;
  assert_int_equal(tg_tls_read(to, (uint8_t *)got, sizeof(got), &n), 0);
  assert_int_equal(n, strlen(msg));
  assert_memory_equal(got, msg, n);
}

/* Key exchanges libcrypto made, by the client (1) and the server (2). */
static unsigned long exchanges(unsigned long c0, unsigned long s0) {
  return (tg_tls_kex_count() - c0) + 2 * (tg_tls_kex_server_count() - s0);
}

/* One full handshake between |scfg| and |ccfg|, data both ways, and which
 * ends' key exchanges libcrypto made (exchanges()). Saves the client's
 * session into *saved when |saved| is given (free it). */
static unsigned long handshake(tg_tls_config_t *scfg, tg_tls_config_t *ccfg,
                               const uint8_t *offer, size_t offer_len,
                               uint8_t **saved, size_t *saved_len) {
  unsigned long c0 = tg_tls_kex_count(), s0 = tg_tls_kex_server_count();
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  assert_int_equal(tls_pair_open(&p, offer, offer_len), 0);
  assert_int_equal(tls_pair_handshake(&p), 0);
  carries(p.c, p.s, "from the client");
  carries(p.s, p.c, "from the server");
  assert_int_equal(tls_pair_close(&p, saved, saved_len), 0);
  return exchanges(c0, s0);
}

static void kex_self_test_passes_on_the_mbedtls_built_against(void **state) {
  (void)state;
  if (!tg_tls_kex_built()) skip();
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  assert_null(tg_tls_kex_self_test());
  clock_gettime(CLOCK_MONOTONIC, &b);
  print_message("self-test: %.2f ms\n",
                (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
  assert_true(tg_tls_paths()->kex_libcrypto);
}

/* The default ends take the exchange; each agrees on the keys with
 * mbedtls's own other end (which makes its side itself) and with its own
 * kind. */
static void kex_each_end_agrees_with_mbedtls_and_its_own(void **state) {
  (void)state;
  if (!tg_tls_paths()->kex_libcrypto) skip();
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *plain_s =
      config(true, (tg_tls_opts_t){.mbedtls_kex = true});
  tg_tls_config_t *fast = config(false, (tg_tls_opts_t){0});
  tg_tls_config_t *plain = config(false, (tg_tls_opts_t){.mbedtls_kex = true});
  assert_int_equal(handshake(plain_s, fast, NULL, 0, NULL, NULL), 1);
  assert_int_equal(handshake(s, plain, NULL, 0, NULL, NULL), 2);
  assert_int_equal(handshake(plain_s, plain, NULL, 0, NULL, NULL), 0);
  assert_int_equal(handshake(s, fast, NULL, 0, NULL, NULL), 3);
  /* Every suite offered, with records by either library. */
  static const char *const suites[] = {
      "TLS-ECDHE-ECDSA-WITH-AES-128-GCM-SHA256",
      "TLS-ECDHE-ECDSA-WITH-AES-256-GCM-SHA384",
      "TLS-ECDHE-ECDSA-WITH-CHACHA20-POLY1305-SHA256"};
  for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
    for (int mbed_records = 0; mbed_records < 2; mbed_records++) {
      tg_tls_opts_t o = {.ciphersuite = suites[i],
                         .mbedtls_records = mbed_records};
      tg_tls_config_t *ss = config(true, o);
      tg_tls_config_t *cc = config(false, o);
      assert_int_equal(handshake(ss, cc, NULL, 0, NULL, NULL), 3);
      tg_tls_config_free(ss);
      tg_tls_config_free(cc);
    }
  }
  tg_tls_config_free(s);
  tg_tls_config_free(plain_s);
  tg_tls_config_free(fast);
  tg_tls_config_free(plain);
}

/* A ClientKeyExchange whose point is not one x25519 value (its length
 * byte says 31): the server that took the exchange fails the handshake,
 * as mbedtls's own does, and makes no keys from it. */
static void kex_server_refuses_a_bad_client_value(void **state) {
  (void)state;
  if (!tg_tls_paths()->kex_libcrypto) skip();
  for (int ours = 1; ours >= 0; ours--) {
    tg_tls_config_t *s =
        config(true, (tg_tls_opts_t){.mbedtls_kex = !ours});
    tg_tls_config_t *c = config(false, (tg_tls_opts_t){0});
    tls_pair_t p = {.scfg = s, .ccfg = c};
    assert_int_equal(tls_pair_open(&p, NULL, 0), 0);
    unsigned long s0 = tg_tls_kex_server_count();
    int srv = 0;
    bool corrupted = false;
    for (int round = 0; round < 8 && srv == 0; round++) {
      int cl = tg_tls_handshake(p.c);
      assert_true(cl == 0 || cl == -EAGAIN);
      /* The client's second flight holds, after its Certificate, its
       * ClientKeyExchange record: [16 03 03 len len][10 00 00 21][20 ..]. */
      tg_buf_t *out = tg_tls_out(p.c);
      uint8_t *b = tg_buf_begin(out);
      size_t n = tg_buf_size(out);
      for (size_t at = 0; !corrupted && at + 10 <= n;
           at += 5 + ((size_t)b[at + 3] << 8 | b[at + 4])) {
        if (b[at] != 0x16 || b[at + 5] != 0x10) continue;
        assert_int_equal(b[at + 9], 32);
        b[at + 9] = 31;
        corrupted = true;
      }
      assert_int_equal(tls_pair_carry(p.c, p.s), 0);
      srv = tg_tls_handshake(p.s);
      if (srv == -EAGAIN) srv = 0;
      assert_int_equal(tls_pair_carry(p.s, p.c), 0);
    }
    assert_true(corrupted);
    assert_true(srv < 0);
    assert_int_equal(tg_tls_kex_server_count(), s0);
    tls_pair_close(&p, NULL, NULL);
    tg_tls_config_free(s);
    tg_tls_config_free(c);
  }
}

/* A resumed handshake exchanges no keys: the step is never reached. */
static void kex_is_not_taken_by_a_resumed_handshake(void **state) {
  (void)state;
  if (!tg_tls_paths()->kex_libcrypto) skip();
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = config(false, (tg_tls_opts_t){0});
  uint8_t *saved = NULL;
  size_t len = 0;
  assert_int_equal(handshake(s, c, NULL, 0, &saved, &len), 3);
  assert_non_null(saved);
  tls_pair_t p = {.scfg = s, .ccfg = c};
  unsigned long c0 = tg_tls_kex_count(), s0 = tg_tls_kex_server_count();
  assert_int_equal(tls_pair_once(&p, saved, len, NULL, NULL), 0);
  assert_int_equal(exchanges(c0, s0), 0);
  free(saved);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kex_self_test_passes_on_the_mbedtls_built_against),
      cmocka_unit_test(kex_each_end_agrees_with_mbedtls_and_its_own),
      cmocka_unit_test(kex_server_refuses_a_bad_client_value),
      cmocka_unit_test(kex_is_not_taken_by_a_resumed_handshake),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
