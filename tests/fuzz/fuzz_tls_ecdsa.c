/* Fuzzes the ECDSA verification that tls/ecdsa.c hands to libcrypto: in a
 * full handshake the peer's signature bytes (and the digest of what it
 * sent) reach it before anything else has vouched for them.
 *
 * The same key, made once per curve from a fixed seed, is verified
 * through an adopted context and through mbedtls's own ECDSA, so the
 * harness is differential: libcrypto must never accept what mbedtls
 * refuses. (The converse may happen: mbedtls reads some non-minimal DER
 * integers that libcrypto refuses; real signers write minimal DER.)
 *
 * Input: [ctl][digest length byte][digest...][rest]
 *   ctl % 3:  curve: P-256, P-384, P-521
 *   ctl bit 2: the signature is mbedtls's own valid one of the digest,
 *             xored with the rest (the rest's length is the signature's:
 *             past the valid one, its bytes as they are), so the fuzzer
 *             searches near valid signatures; no rest: the valid one
 *             unchanged. With bit 2 clear the rest is the signature.
 *   digest:   1 + byte % 64 bytes.
 *
 * Invariants (trap on violation): adopted accepts => mbedtls accepts; an
 * unchanged valid signature (bit 2, nothing to xor) is accepted by both.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/ecdsa.h>
#include <mbedtls/pk.h>

#include "fuzz_input.h"
#include "tls/ecdsa.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SIG_MAX 512u

/* A deterministic "random" source: the keys are the same in every run, so
 * a saved crash input replays. */
static int fixed_rng(void *ctx, unsigned char *out, size_t len) {
  uint32_t *x = ctx;
  for (size_t i = 0; i < len; i++) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    out[i] = (unsigned char)*x;
  }
  return 0;
}

typedef struct key {
  bool made;
  mbedtls_pk_context native, adopted;
} ec_key_t;

static ec_key_t *key_for(unsigned curve) {
  static ec_key_t keys[3];
  static const mbedtls_ecp_group_id ids[3] = {MBEDTLS_ECP_DP_SECP256R1,
                                              MBEDTLS_ECP_DP_SECP384R1,
                                              MBEDTLS_ECP_DP_SECP521R1};
  ec_key_t *k = &keys[curve];
  if (k->made) return k;
  uint32_t seed = 0x2545F491u + curve;
  unsigned char der[512];
  mbedtls_pk_init(&k->native);
  mbedtls_pk_init(&k->adopted);
  if (mbedtls_pk_setup(&k->native,
                       mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY)) != 0 ||
      mbedtls_ecp_gen_key(ids[curve], mbedtls_pk_ec(k->native), fixed_rng,
                          &seed) != 0)
    __builtin_trap();
  int len = mbedtls_pk_write_key_der(&k->native, der, sizeof(der));
  if (len <= 0 ||
      mbedtls_pk_parse_key(&k->adopted, der + sizeof(der) - len, (size_t)len,
                           NULL, 0) != 0 ||
      !tg_tls_ecdsa_adopt(&k->adopted))
    __builtin_trap();
  k->made = true;
  return k; /* kept for the process's life, as libFuzzer runs it */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  uint8_t ctl = take(&in);
  ec_key_t *k = key_for(ctl % 3u);
  unsigned char digest[64];
  size_t digest_len = 1u + take(&in) % 64u;
  for (size_t i = 0; i < digest_len; i++) digest[i] = take(&in);

  unsigned char sig[SIG_MAX];
  size_t sig_len = in.left < SIG_MAX ? in.left : SIG_MAX;
  bool unchanged = false;
  if (ctl & 4u) {
    size_t valid_len = 0;
    uint32_t seed = 7u;
    /* Not mbedtls_pk_sign(): it wants the digest length of |md_alg|, which
     * here only seeds the deterministic nonce. */
    if (mbedtls_ecdsa_write_signature(mbedtls_pk_ec(k->native),
                                      MBEDTLS_MD_SHA256, digest, digest_len,
                                      sig, &valid_len, fixed_rng, &seed) != 0)
      __builtin_trap();
    if (sig_len == 0) {
      sig_len = valid_len;
      unchanged = true;
    } else {
      unchanged = sig_len == valid_len;
      for (size_t i = 0; i < sig_len; i++) {
        uint8_t x = take(&in);
        unchanged &= x == 0;
        sig[i] = i < valid_len ? sig[i] ^ x : x;
      }
    }
  } else {
    memcpy(sig, in.p, sig_len);
  }

  int by_libcrypto = mbedtls_pk_verify(&k->adopted, MBEDTLS_MD_NONE, digest,
                                       digest_len, sig, sig_len);
  int by_mbedtls = mbedtls_pk_verify(&k->native, MBEDTLS_MD_NONE, digest,
                                     digest_len, sig, sig_len);
  if (by_libcrypto == 0 && by_mbedtls != 0) __builtin_trap();
  if (unchanged && (by_libcrypto != 0 || by_mbedtls != 0)) __builtin_trap();
  return 0;
}
