/* A client's x25519 key exchange by libcrypto (tls/kex.h): it meets
 * mbedtls's own server and its own kind, moves application data both ways
 * afterwards (so both ends derived the same keys), is left to mbedtls when
 * asked, is not taken by a resumed handshake (there is no exchange), and
 * its self-test passes on the mbedtls it was built against. The refusal on
 * another mbedtls version is test_tls_paths's. */
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

/* One full handshake between |scfg| and |ccfg|, data both ways, and how
 * many key exchanges libcrypto made for it. Saves the client's session
 * into *saved when |saved| is given (free it). */
static unsigned long handshake(tg_tls_config_t *scfg, tg_tls_config_t *ccfg,
                               const uint8_t *offer, size_t offer_len,
                               uint8_t **saved, size_t *saved_len) {
  unsigned long before = tg_tls_kex_count();
  tls_pair_t p = {.scfg = scfg, .ccfg = ccfg};
  assert_int_equal(tls_pair_open(&p, offer, offer_len), 0);
  assert_int_equal(tls_pair_handshake(&p), 0);
  carries(p.c, p.s, "from the client");
  carries(p.s, p.c, "from the server");
  assert_int_equal(tls_pair_close(&p, saved, saved_len), 0);
  return tg_tls_kex_count() - before;
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

/* The default client takes the exchange; mbedtls's server (which makes
 * its own side) agrees on the keys, as does a client that leaves the
 * exchange to mbedtls. */
static void kex_client_agrees_with_mbedtls_servers(void **state) {
  (void)state;
  if (!tg_tls_paths()->kex_libcrypto) skip();
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *fast = config(false, (tg_tls_opts_t){0});
  tg_tls_config_t *plain = config(false, (tg_tls_opts_t){.mbedtls_kex = true});
  assert_int_equal(handshake(s, fast, NULL, 0, NULL, NULL), 1);
  assert_int_equal(handshake(s, plain, NULL, 0, NULL, NULL), 0);
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
      assert_int_equal(handshake(ss, cc, NULL, 0, NULL, NULL), 1);
      tg_tls_config_free(ss);
      tg_tls_config_free(cc);
    }
  }
  tg_tls_config_free(s);
  tg_tls_config_free(fast);
  tg_tls_config_free(plain);
}

/* A resumed handshake exchanges no keys: the step is never reached. */
static void kex_is_not_taken_by_a_resumed_handshake(void **state) {
  (void)state;
  if (!tg_tls_paths()->kex_libcrypto) skip();
  tg_tls_config_t *s = config(true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = config(false, (tg_tls_opts_t){0});
  uint8_t *saved = NULL;
  size_t len = 0;
  assert_int_equal(handshake(s, c, NULL, 0, &saved, &len), 1);
  assert_non_null(saved);
  tls_pair_t p = {.scfg = s, .ccfg = c};
  unsigned long before = tg_tls_kex_count();
  assert_int_equal(tls_pair_once(&p, saved, len, NULL, NULL), 0);
  assert_int_equal(tg_tls_kex_count(), before);
  free(saved);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kex_self_test_passes_on_the_mbedtls_built_against),
      cmocka_unit_test(kex_client_agrees_with_mbedtls_servers),
      cmocka_unit_test(kex_is_not_taken_by_a_resumed_handshake),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
