/* mbedtls's SHA-256 blocks through libcrypto (tls/sha256.h).
 *
 * The interposed block function must give mbedtls the digests its own
 * gives: every length around the block and padding boundaries, updates
 * split anywhere, HMAC (the TLS PRF's), and the standard's vectors, each
 * checked against mbedtls's own function (reached when the switch is off)
 * and against libcrypto's one-shot SHA256(). The counters show which
 * function ran, so none of this passes without the interposition; then
 * handshakes, full and resumed, hash through libcrypto.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <mbedtls/md.h>
#include <mbedtls/sha256.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "test_proc.h"
#include "tls/session.h"
#include "tls/sha256.h"
#include "tls_pair.h"

static char g_dir[128]; /* pki: the CA, relay.test, alice */

static int group_setup(void **state) {
  (void)state;
  return tg_test_pki(g_dir, sizeof(g_dir), "tlssha");
}

static int group_teardown(void **state) {
  (void)state;
  tg_tls_sha256_use_libcrypto(true);
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

/* Blocks mbedtls hashes for |len| bytes: the data, 0x80, the 8-byte
 * length, padded to 64. */
static uint64_t blocks_for(size_t len) { return (len + 9 + 63) / 64; }

/* mbedtls's digest of |len| bytes fed in pieces of |step| (0: at once),
 * by the function the switch picks; checks that exactly the blocks of
 * |len| went to that function and none to the other. */
static void mbedtls_digest(bool libcrypto, const uint8_t *p, size_t len,
                           size_t step, uint8_t out[32]) {
  tg_tls_sha256_use_libcrypto(libcrypto);
  tg_tls_sha256_counts_t before = tg_tls_sha256_counts();
  mbedtls_sha256_context c;
  mbedtls_sha256_init(&c);
  assert_int_equal(mbedtls_sha256_starts_ret(&c, 0), 0);
  size_t off = 0;
  while (off < len) {
    size_t n = step && len - off > step ? step : len - off;
    assert_int_equal(mbedtls_sha256_update_ret(&c, p + off, n), 0);
    off += n;
  }
  assert_int_equal(mbedtls_sha256_finish_ret(&c, out), 0);
  mbedtls_sha256_free(&c);
  tg_tls_sha256_counts_t after = tg_tls_sha256_counts();
  uint64_t by_lib = after.by_libcrypto - before.by_libcrypto;
  uint64_t by_mbed = after.by_mbedtls - before.by_mbedtls;
  assert_int_equal(libcrypto ? by_lib : by_mbed, blocks_for(len));
  assert_int_equal(libcrypto ? by_mbed : by_lib, 0);
  tg_tls_sha256_use_libcrypto(true);
}

static void digests_agree(const uint8_t *p, size_t len, size_t step) {
  uint8_t lib[32], own[32], ref[32];
  unsigned ref_len = 0;
  mbedtls_digest(true, p, len, step, lib);
  mbedtls_digest(false, p, len, step, own);
  assert_int_equal(EVP_Digest(p, len, ref, &ref_len, EVP_sha256(), NULL), 1);
  assert_memory_equal(lib, own, 32);
  assert_memory_equal(lib, ref, 32);
}

static void the_build_interposes(void **state) {
  (void)state;
  /* Linked as tracegated, the relay and the CLI are: this is what makes
   * every other test here meaningful. */
  assert_true(tg_tls_sha256_interposed());
}

static void every_length_and_split_matches_mbedtls(void **state) {
  (void)state;
  enum { MAX = 4 * 64 + 17 };
  uint8_t buf[MAX];
  for (size_t i = 0; i < MAX; i++) buf[i] = (uint8_t)(i * 167 + 13);
  /* Every length across four blocks: the 55/56 and 63/64 boundaries
   * where the padding takes one more block, at once and split. */
  for (size_t len = 0; len <= MAX; len++) {
    digests_agree(buf, len, 0);
    digests_agree(buf, len, 1);
    digests_agree(buf, len, 63);
  }
  /* A large random input in odd pieces. */
  size_t big = (1u << 20) + 7;
  uint8_t *r = malloc(big);
  assert_non_null(r);
  for (size_t off = 0; off < big; off += 1024) /* the DRBG's most per call */
    assert_int_equal(
        tls_pair_rng(NULL, r + off, big - off < 1024 ? big - off : 1024), 0);
  digests_agree(r, big, 0);
  digests_agree(r, big, 4099);
  free(r);
}

/* FIPS 180-2's examples. */
static void the_standards_vectors(void **state) {
  (void)state;
  static const struct {
    const char *in;
    const char *hex;
  } v[] = {
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    uint8_t out[32];
    char hex[65];
    mbedtls_digest(true, (const uint8_t *)v[i].in, strlen(v[i].in), 0, out);
    for (int j = 0; j < 32; j++) snprintf(hex + 2 * j, 3, "%02x", out[j]);
    assert_string_equal(hex, v[i].hex);
  }
  uint8_t *a = malloc(1000000);
  assert_non_null(a);
  memset(a, 'a', 1000000);
  uint8_t out[32];
  char hex[65];
  mbedtls_digest(true, a, 1000000, 0, out);
  free(a);
  for (int j = 0; j < 32; j++) snprintf(hex + 2 * j, 3, "%02x", out[j]);
  assert_string_equal(
      hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* The TLS PRF is HMAC-SHA-256: keys shorter and longer than a block. */
static void hmac_matches(void **state) {
  (void)state;
  const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
  uint8_t key[100], msg[300];
  for (size_t i = 0; i < sizeof(key); i++) key[i] = (uint8_t)(i ^ 0x5c);
  for (size_t i = 0; i < sizeof(msg); i++) msg[i] = (uint8_t)(i * 7);
  size_t key_lens[] = {0, 32, 64, 65, 100};
  for (size_t k = 0; k < sizeof(key_lens) / sizeof(key_lens[0]); k++) {
    uint8_t lib[32], own[32], ref[32];
    unsigned ref_len = 0;
    tg_tls_sha256_use_libcrypto(true);
    assert_int_equal(
        mbedtls_md_hmac(md, key, key_lens[k], msg, sizeof(msg), lib), 0);
    tg_tls_sha256_use_libcrypto(false);
    assert_int_equal(
        mbedtls_md_hmac(md, key, key_lens[k], msg, sizeof(msg), own), 0);
    tg_tls_sha256_use_libcrypto(true);
    assert_non_null(HMAC(EVP_sha256(), key, (int)key_lens[k], msg, sizeof(msg),
                         ref, &ref_len));
    assert_memory_equal(lib, own, 32);
    assert_memory_equal(lib, ref, 32);
  }
}

/* One handshake on fresh sessions; returns the client's session for a
 * resumption (the caller frees it). The transcript hash and the PRF went
 * through libcrypto: blocks by it, none by mbedtls's own. */
static uint8_t *handshake_hashes_through_libcrypto(tg_tls_config_t *s,
                                                   tg_tls_config_t *c,
                                                   const uint8_t *saved,
                                                   size_t saved_len,
                                                   size_t *out_len) {
  tls_pair_t p = {.scfg = s, .ccfg = c};
  tg_tls_sha256_counts_t before = tg_tls_sha256_counts();
  uint8_t *out = NULL;
  assert_int_equal(tls_pair_once(&p, saved, saved_len, &out, out_len), 0);
  tg_tls_sha256_counts_t after = tg_tls_sha256_counts();
  assert_true(after.by_libcrypto - before.by_libcrypto > 20);
  assert_int_equal(after.by_mbedtls - before.by_mbedtls, 0);
  return out;
}

static void handshakes_hash_through_libcrypto(void **state) {
  (void)state;
  tg_tls_config_t *s = tls_pair_config(g_dir, true, (tg_tls_opts_t){0});
  tg_tls_config_t *c = tls_pair_config(g_dir, false, (tg_tls_opts_t){0});
  assert_non_null(s);
  assert_non_null(c);
  size_t len = 0;
  uint8_t *saved = handshake_hashes_through_libcrypto(s, c, NULL, 0, &len);
  assert_non_null(saved);
  free(handshake_hashes_through_libcrypto(s, c, saved, len, &len));
  free(saved);
  tg_tls_config_free(s);
  tg_tls_config_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_build_interposes),
      cmocka_unit_test(every_length_and_split_matches_mbedtls),
      cmocka_unit_test(the_standards_vectors),
      cmocka_unit_test(hmac_matches),
      cmocka_unit_test(handshakes_hash_through_libcrypto),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
