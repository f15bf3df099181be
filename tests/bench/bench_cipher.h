/* Raw AEAD speed on this machine, of mbedtls and of the records that
 * carry TLS sessions after the handshake (tls/record.h, libcrypto): the
 * baselines the TLS benches print their figures against, measured in the
 * same run.
 *
 * Each run encrypts 16 KiB records (a TLS record's payload) with a fresh
 * explicit nonce per record and a 13-byte AAD, as TLS 1.2 does, and
 * reports the bytes, the wall time and the calling thread's CPU time, so
 * callers can add up slices taken at different moments of a run and give
 * both MB/s and MB per CPU-second (the latter does not move when other
 * processes share the cores). */
#ifndef TRACEGATE_BENCH_CIPHER_H
#define TRACEGATE_BENCH_CIPHER_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_RECORD (16 * 1024)

typedef enum bench_aead {
  BENCH_AES128_GCM,
  BENCH_AES256_GCM,
  BENCH_CHACHAPOLY,
} bench_aead_t;

typedef enum bench_lib {
  BENCH_MBEDTLS,   /* mbedtls's gcm/chachapoly, as its record layer uses */
  BENCH_LIBCRYPTO, /* tg_rec_seal (tls/record.h): what sessions use */
} bench_lib_t;

/* Work done over some stretch: bytes moved, wall and CPU nanoseconds. */
typedef struct bench_span {
  uint64_t bytes;
  uint64_t wall_ns;
  uint64_t cpu_ns;
} bench_span_t;

/* "AES-128-GCM", "AES-256-GCM", "CHACHA20-POLY1305". */
const char *bench_aead_name(bench_aead_t a);
/* The cipher of an mbedtls ciphersuite name ("TLS-ECDHE-...-WITH-..."). */
bench_aead_t bench_aead_of_suite(const char *suite);
/* Encrypts about |bytes| (whole records) with |lib| and adds the work to
 * *acc. Returns 0, or -1 when |lib| lacks the cipher. */
int bench_aead_run(bench_aead_t a, bench_lib_t lib, uint64_t bytes,
                   bench_span_t *acc);

/* CPU time of the calling thread, ns. */
uint64_t bench_thread_cpu_ns(void);
/* MB/s (10^6 bytes) over |ns|; 0 when |ns| is 0. */
double bench_mbps(uint64_t bytes, uint64_t ns);
static inline double bench_span_wall(const bench_span_t *s) {
  return bench_mbps(s->bytes, s->wall_ns);
}
static inline double bench_span_cpu(const bench_span_t *s) {
  return bench_mbps(s->bytes, s->cpu_ns);
}

#endif /* TRACEGATE_BENCH_CIPHER_H */
