/* Raw AEAD speed; see bench_cipher.h. */
#include "bench_cipher.h"

#include <string.h>
#include <time.h>
#include <uv.h>

#include <mbedtls/chachapoly.h>
#include <mbedtls/gcm.h>

#include "tls/record.h"

static uint8_t rec_in[BENCH_RECORD], rec_out[BENCH_RECORD];

uint64_t bench_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double bench_mbps(uint64_t bytes, uint64_t ns) {
  return ns ? (double)bytes / 1e6 / ((double)ns / 1e9) : 0;
}

const char *bench_aead_name(bench_aead_t a) {
  switch (a) {
    case BENCH_AES128_GCM: return "AES-128-GCM";
    case BENCH_AES256_GCM: return "AES-256-GCM";
    case BENCH_CHACHAPOLY: return "CHACHA20-POLY1305";
  }
  return "?";
}

bench_aead_t bench_aead_of_suite(const char *suite) {
  if (strstr(suite, "CHACHA20")) return BENCH_CHACHAPOLY;
  if (strstr(suite, "AES-256-GCM")) return BENCH_AES256_GCM;
  return BENCH_AES128_GCM;
}

static void add(bench_span_t *acc, uint64_t n, uint64_t t0, uint64_t c0) {
  acc->bytes += n * BENCH_RECORD;
  acc->wall_ns += uv_hrtime() - t0;
  acc->cpu_ns += bench_thread_cpu_ns() - c0;
}

static int run_gcm(unsigned keybits, uint64_t n, bench_span_t *acc) {
  mbedtls_gcm_context g;
  mbedtls_gcm_init(&g);
  uint8_t key[32] = {1, 2, 3}, iv[12] = {0}, tag[16], aad[13] = {0};
  if (mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, keybits) != 0) {
    mbedtls_gcm_free(&g);
    return -1;
  }
  uint64_t t0 = uv_hrtime(), c0 = bench_thread_cpu_ns();
  for (uint64_t i = 0; i < n; i++) {
    memcpy(iv + 4, &i, 8); /* explicit nonce, as TLS 1.2 GCM does */
    mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, BENCH_RECORD, iv,
                              sizeof(iv), aad, sizeof(aad), rec_in, rec_out,
                              sizeof(tag), tag);
  }
  add(acc, n, t0, c0);
  mbedtls_gcm_free(&g);
  return 0;
}

static int run_chachapoly(uint64_t n, bench_span_t *acc) {
#if defined(MBEDTLS_CHACHAPOLY_C)
  mbedtls_chachapoly_context c;
  mbedtls_chachapoly_init(&c);
  uint8_t key[32] = {1, 2, 3}, nonce[12] = {0}, tag[16], aad[13] = {0};
  mbedtls_chachapoly_setkey(&c, key);
  uint64_t t0 = uv_hrtime(), c0 = bench_thread_cpu_ns();
  for (uint64_t i = 0; i < n; i++) {
    memcpy(nonce + 4, &i, 8);
    mbedtls_chachapoly_encrypt_and_tag(&c, BENCH_RECORD, nonce, aad,
                                       sizeof(aad), rec_in, rec_out, tag);
  }
  add(acc, n, t0, c0);
  mbedtls_chachapoly_free(&c);
  return 0;
#else
  (void)n;
  (void)acc;
  return -1;
#endif
}

/* Whole TLS records sealed by tls/record.h, header and tag included. */
static int run_records(bench_aead_t a, uint64_t n, bench_span_t *acc) {
  static uint8_t sealed[TG_REC_HEADER_SIZE + TG_REC_FRAGMENT_MAX];
  static const uint8_t key[32] = {1, 2, 3}, iv[12] = {0};
  _Static_assert(BENCH_RECORD <= TG_REC_PLAIN_MAX, "one record per slice");
  tg_rec_cipher_t c = a == BENCH_AES128_GCM   ? TG_REC_AES_128_GCM
                      : a == BENCH_AES256_GCM ? TG_REC_AES_256_GCM
                                              : TG_REC_CHACHA20_POLY1305;
  tg_rec_dir_t d;
  if (tg_rec_dir_init(&d, c, true, key, tg_rec_key_len(c), iv,
                      tg_rec_iv_len(c), 0) != 0)
    return -1;
  uint64_t t0 = uv_hrtime(), c0 = bench_thread_cpu_ns();
  int rv = 0;
  for (uint64_t i = 0; i < n && rv == 0; i++)
    rv = tg_rec_seal(&d, TG_REC_APPLICATION_DATA, rec_in, BENCH_RECORD, sealed);
  add(acc, n, t0, c0);
  tg_rec_dir_free(&d);
  return rv == 0 ? 0 : -1;
}

int bench_aead_run(bench_aead_t a, bench_lib_t lib, uint64_t bytes,
                   bench_span_t *acc) {
  uint64_t n = bytes / BENCH_RECORD;
  if (n == 0) n = 1;
  memset(rec_in, 0xa5, sizeof(rec_in));
  if (lib == BENCH_LIBCRYPTO) return run_records(a, n, acc);
  switch (a) {
    case BENCH_AES128_GCM: return run_gcm(128, n, acc);
    case BENCH_AES256_GCM: return run_gcm(256, n, acc);
    case BENCH_CHACHAPOLY: return run_chachapoly(n, acc);
  }
  return -1;
}
