/* Fuzzes the X25519 multiplication that tls/x25519.c hands to libcrypto:
 * in a full handshake the peer's public value reaches it straight off the
 * wire, and the private scalar is ours.
 *
 * The harness is differential: the same scalar and point are multiplied
 * inside a scope (libcrypto, or mbedtls when the interposed function
 * leaves the call to it) and outside (mbedtls's own). Both must return
 * the same code, and on success the same x-coordinate, z = 1.
 *
 * Input: [ctl][scalar: 32 bytes][u: 32 bytes], little-endian, short input
 * padded with zeros.
 *   ctl bit 0: u is read as mbedtls reads a peer's value from the wire
 *              (mbedtls_ecp_point_read_binary: the top bit dropped);
 *              clear: u is set whole, top bit included.
 *   ctl bit 1: the scalar is taken as it is; clear: clamped as RFC 7748
 *              and mbedtls's key generation make private keys.
 *   ctl bit 2: the point is the base point (u ignored): a key pair.
 *
 * Invariant (trap on violation): the same return code, and on success the
 * same result, both ways.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <mbedtls/ecp.h>

#include "fuzz_input.h"
#include "tls/x25519.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A deterministic "random" source for mbedtls's blinding. */
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

static mbedtls_ecp_group *curve25519(void) {
  static mbedtls_ecp_group grp;
  static bool loaded;
  if (!loaded) {
    mbedtls_ecp_group_init(&grp);
    if (mbedtls_ecp_group_load(&grp, MBEDTLS_ECP_DP_CURVE25519) != 0)
      __builtin_trap();
    /* The harness means something only if a scope reaches libcrypto: one
     * key pair through it first. */
    mbedtls_mpi d;
    mbedtls_ecp_point Q;
    mbedtls_mpi_init(&d);
    mbedtls_ecp_point_init(&Q);
    uint32_t seed = 3u;
    uint64_t before = tg_tls_x25519_counts().by_libcrypto;
    tg_tls_x25519_enter();
    int ret = mbedtls_ecp_gen_keypair(&grp, &d, &Q, fixed_rng, &seed);
    tg_tls_x25519_leave();
    if (ret != 0 || tg_tls_x25519_counts().by_libcrypto != before + 1)
      __builtin_trap();
    mbedtls_mpi_free(&d);
    mbedtls_ecp_point_free(&Q);
    loaded = true;
  }
  return &grp; /* kept for the process's life, as libFuzzer runs it */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  uint8_t ctl = take(&in);
  unsigned char k[32], u[32];
  for (size_t i = 0; i < sizeof(k); i++) k[i] = take(&in);
  for (size_t i = 0; i < sizeof(u); i++) u[i] = take(&in);
  if (!(ctl & 2u)) {
    k[0] &= 248;
    k[31] = (unsigned char)((k[31] & 127) | 64);
  }
  mbedtls_ecp_group *grp = curve25519();
  mbedtls_mpi m;
  mbedtls_ecp_point P, a, b;
  mbedtls_mpi_init(&m);
  mbedtls_ecp_point_init(&P);
  mbedtls_ecp_point_init(&a);
  mbedtls_ecp_point_init(&b);
  if (mbedtls_mpi_read_binary_le(&m, k, sizeof(k)) != 0) __builtin_trap();
  int read = 0;
  if (ctl & 4u)
    read = mbedtls_ecp_copy(&P, &grp->G);
  else if (ctl & 1u)
    read = mbedtls_ecp_point_read_binary(grp, &P, u, sizeof(u));
  else if (mbedtls_mpi_read_binary_le(&P.X, u, sizeof(u)) != 0 ||
           mbedtls_mpi_lset(&P.Z, 1) != 0)
    __builtin_trap();
  if (read == 0) {
    uint32_t seed_a = 1u, seed_b = 1u;
    tg_tls_x25519_enter();
    int ra = mbedtls_ecp_mul(grp, &a, &m, &P, fixed_rng, &seed_a);
    tg_tls_x25519_leave();
    int rb = mbedtls_ecp_mul(grp, &b, &m, &P, fixed_rng, &seed_b);
    if (ra != rb) __builtin_trap();
    if (ra == 0 && (mbedtls_mpi_cmp_mpi(&a.X, &b.X) != 0 ||
                    mbedtls_mpi_cmp_int(&a.Z, 1) != 0 ||
                    mbedtls_mpi_cmp_int(&b.Z, 1) != 0))
      __builtin_trap();
  }
  mbedtls_mpi_free(&m);
  mbedtls_ecp_point_free(&P);
  mbedtls_ecp_point_free(&a);
  mbedtls_ecp_point_free(&b);
  return 0;
}
