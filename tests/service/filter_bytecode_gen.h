/* Test-side generator of Perfetto filter bytecode: words in, the packed
 * varints with their checksum out (the format: service/trace_filter.h).
 * Header-only so the unit tests and the fuzzer share it. */
#ifndef TRACEGATE_TESTS_FILTER_BYTECODE_GEN_H
#define TRACEGATE_TESTS_FILTER_BYTECODE_GEN_H

#include <stddef.h>
#include <stdint.h>

enum {
  FBC_EOM = 0,
  FBC_SIMPLE = 1,
  FBC_RANGE = 2,
  FBC_NESTED = 3,
  FBC_STRING = 4,
};
#define FBC_WORD(id, op) (((uint32_t)(id) << 3) | (uint32_t)(op))

/* The checksum word of |n| words: low 32 bits of FNV-1a 64 over their
 * little-endian bytes. */
static inline uint32_t fbc_checksum(const uint32_t *w, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++)
    for (int b = 0; b < 4; b++) {
      h ^= (uint8_t)(w[i] >> (8 * b));
      h *= 1099511628211ull;
    }
  return (uint32_t)h;
}

static inline size_t fbc_put_varint(uint8_t *p, uint32_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* Encodes |n| words and their checksum into |out| (at least 5 * (n + 1)
 * bytes). Returns the length. */
static inline size_t fbc_encode(const uint32_t *w, size_t n, uint8_t *out) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += fbc_put_varint(out + len, w[i]);
  len += fbc_put_varint(out + len, fbc_checksum(w, n));
  return len;
}

#endif /* TRACEGATE_TESTS_FILTER_BYTECODE_GEN_H */
