/* Unchecked protobuf writes for linux.ftrace's per-record loop.
 *
 * The encoder checks once per record that the writer's segment has room for
 * the record's worst case (ftrace_plan.h), then writes with these: no room
 * check, no writer state, no call. To stay branch-light they store whole
 * words, i.e. up to TG_FTRACE_PUT_SLACK bytes past what they produce; the
 * room check adds that slack. Never call them without that check.
 *
 * Also the NUL search of short kernel strings (comms), a word at a time.
 * Both assume a little-endian host, as the page parser does (the kernel's
 * byte order is ours); other hosts take the byte loops.
 */
#ifndef TRACEGATE_PROBES_FTRACE_PUT_H
#define TRACEGATE_PROBES_FTRACE_PUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tracegate/pb_wire.h"

#define TG_FTRACE_PUT_SLACK 16
/* Readable bytes the word reads of a record's fields need past its end. */
#define TG_FTRACE_WORD_PAD 8

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TG_FTRACE_PUT_WORDS 1
#else
#define TG_FTRACE_PUT_WORDS 0
#endif

static inline uint64_t tg__ftrace_ld64(const void *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline void tg__ftrace_st64(void *p, uint64_t v) { memcpy(p, &v, 8); }

/* Bytes of |v| as a varint: 1 + (significant bits - 1) / 7, without a
 * loop (bits * 9 / 64 rounds the same way for 1..64 bits). */
static inline unsigned tg__ftrace_varint_len(uint64_t v) {
  unsigned bits = 64u - (unsigned)__builtin_clzll(v | 1);
  return (bits * 9u + 64u) / 64u;
}

/* The bytes of a varint whose highest set bit is bit i (index i). */
static const uint8_t tg__ftrace_varint_len_by_msb[64] = {
    1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 4,
    4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 7,
    7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 10,
};

/* The continuation bits of a varint of n bytes (index n) written as one
 * word: all bytes but the last, and all eight when more follow. */
static const uint64_t tg__ftrace_varint_cont[11] = {
    0,
    0,
    UINT64_C(0x80),
    UINT64_C(0x8080),
    UINT64_C(0x808080),
    UINT64_C(0x80808080),
    UINT64_C(0x8080808080),
    UINT64_C(0x808080808080),
    UINT64_C(0x80808080808080),
    UINT64_C(0x8080808080808080),
    UINT64_C(0x8080808080808080),
};

/* The bits of |v| below 2^56 as varint bytes: 7-bit groups spread into
 * the bytes of a word by three shift-and-mask rounds, without the
 * continuation bits. */
static inline uint64_t tg__ftrace_spread56(uint64_t v) {
  uint64_t x = v & UINT64_C(0x00ffffffffffffff);
  x = (x & UINT64_C(0x000000000fffffff)) |
      ((x & UINT64_C(0x00fffffff0000000)) << 4);
  x = (x & UINT64_C(0x00003fff00003fff)) |
      ((x & UINT64_C(0x0fffc0000fffc000)) << 2);
  return (x & UINT64_C(0x007f007f007f007f)) |
         ((x & UINT64_C(0x3f803f803f803f80)) << 1);
}

/* The same for the bits below 2^28, in 32-bit arithmetic. */
static inline uint32_t tg__ftrace_spread28(uint32_t v) {
  uint32_t x = (v & 0x3fffu) | ((v & 0xfffc000u) << 2);
  return (x & 0x7f007fu) | ((x & 0x3f803f80u) << 1);
}

/* |v| as a varint at |p|; returns the end. Values below 2^21 (ids, fds,
 * flags, pids, small counts) take byte stores. Longer ones (timestamps,
 * pointers) are spread into a word and take the continuation bits from
 * a table by length: the same work for 4 and for 8 bytes, where a byte
 * loop would mispredict its exit on values of varying length. */
static inline uint8_t *tg__ftrace_put_varint(uint8_t *p, uint64_t v) {
  if (v < 0x80) {
    *p = (uint8_t)v;
    return p + 1;
  }
  if (v < 0x4000) {
    p[0] = (uint8_t)(v | 0x80);
    p[1] = (uint8_t)(v >> 7);
    return p + 2;
  }
#if TG_FTRACE_PUT_WORDS
  if (v < 0x200000) {
    uint32_t x = tg__ftrace_spread28((uint32_t)v) | 0x8080u;
    memcpy(p, &x, 4);
    return p + 3;
  }
  unsigned n = tg__ftrace_varint_len_by_msb[63 - __builtin_clzll(v)];
  tg__ftrace_st64(p, tg__ftrace_spread56(v) | tg__ftrace_varint_cont[n]);
  if (__builtin_expect(n > 8, 0)) {
    /* Bits 56..63: the ninth byte, and a tenth for bit 63. */
    p[8] = (uint8_t)(((v >> 56) & 0x7f) | ((v >> 63) << 7));
    p[9] = (uint8_t)(v >> 63);
  }
  return p + n;
#else
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
#endif
}

/* |v| (< 2^14) as the 4-byte redundant varint tg_pbw_begin_nested()
 * reserves for a nested size: two bytes of value, then 0x80 0x00. */
static inline void tg__ftrace_put_size2(uint8_t *p, uint32_t v) {
  uint32_t x = 0x808080u | (v & 0x7fu) | ((v & 0x3f80u) << 1);
#if TG_FTRACE_PUT_WORDS
  memcpy(p, &x, 4);
#else
  for (unsigned i = 0; i < 4; i++) p[i] = (uint8_t)(x >> (8 * i));
#endif
}

/* Timestamps of one page differ in their low bits only: the varint bytes
 * of bits 28 and up (and so the length) of the last timestamp are kept,
 * and the next one with the same high bits spreads just its low 28 bits.
 * Every event has a timestamp; this is the encoder's most common long
 * varint. */
typedef struct tg__ftrace_ts_cache {
  uint64_t hi;   /* ts >> 28 of the cached timestamp; UINT64_MAX: none */
  uint64_t word; /* its varint bytes 4..7, continuation bits included */
  unsigned n;    /* its length, 5..8 */
} tg__ftrace_ts_cache_t;

static inline void tg__ftrace_ts_cache_init(tg__ftrace_ts_cache_t *c) {
  c->hi = UINT64_MAX;
  c->word = 0;
  c->n = 0;
}

static inline uint8_t *tg__ftrace_put_ts(uint8_t *p, uint64_t ts,
                                         tg__ftrace_ts_cache_t *c) {
#if TG_FTRACE_PUT_WORDS
  if (ts >> 28 == c->hi) {
    /* Bytes 0..3 all continue: the length is at least 5. */
    tg__ftrace_st64(p, c->word |
                           (tg__ftrace_spread28((uint32_t)ts & 0xfffffffu) |
                            UINT32_C(0x80808080)));
    return p + c->n;
  }
  if (ts >= (UINT64_C(1) << 28) && ts < (UINT64_C(1) << 56)) {
    unsigned n = tg__ftrace_varint_len_by_msb[63 - __builtin_clzll(ts)];
    uint64_t word = tg__ftrace_spread56(ts) | tg__ftrace_varint_cont[n];
    c->hi = ts >> 28;
    c->word = word & ~UINT64_C(0xffffffff);
    c->n = n;
    tg__ftrace_st64(p, word);
    return p + n;
  }
#else
  (void)c;
#endif
  return tg__ftrace_put_varint(p, ts);
}

/* A field key precomputed as |len| (1..3) varint bytes in the low bytes
 * of |tag| (see tg__ftrace_tag_word). */
static inline uint8_t *tg__ftrace_put_tag(uint8_t *p, uint32_t tag,
                                          unsigned len) {
#if TG_FTRACE_PUT_WORDS
  memcpy(p, &tag, 4);
#else
  for (unsigned i = 0; i < len; i++) p[i] = (uint8_t)(tag >> (8 * i));
#endif
  return p + len;
}

/* The key of |field| with wire type |wt| as varint bytes, packed for
 * tg__ftrace_put_tag; |*len| gets their count. Field numbers below 2^18
 * (every FtraceEvent field) fit in 3 bytes. */
static inline uint32_t tg__ftrace_tag_word(uint32_t field, uint32_t wt,
                                           uint8_t *len) {
  uint32_t key = field << 3 | wt, word = 0;
  unsigned n = 0;
  while (key >= 0x80) {
    word |= ((key & 0x7f) | 0x80) << (8 * n++);
    key >>= 7;
  }
  word |= key << (8 * n++);
  *len = (uint8_t)n;
  return word;
}

/* The length of the string in s[0, max): up to its first NUL. */
static inline size_t tg__ftrace_strnlen(const uint8_t *s, size_t max) {
#if TG_FTRACE_PUT_WORDS
  size_t i = 0;
  for (; i + 8 <= max; i += 8) {
    uint64_t w = tg__ftrace_ld64(s + i);
    /* The lowest flagged byte is the first zero byte. */
    uint64_t z = (w - UINT64_C(0x0101010101010101)) & ~w &
                 UINT64_C(0x8080808080808080);
    if (z) return i + (size_t)(__builtin_ctzll(z) >> 3);
  }
  while (i < max && s[i]) i++;
  return i;
#else
  size_t i = 0;
  while (i < max && s[i]) i++;
  return i;
#endif
}

/* The same for a char[16] (a comm), all of which may be read. */
static inline size_t tg__ftrace_strnlen16(const uint8_t *s) {
#if TG_FTRACE_PUT_WORDS
  const uint64_t ones = UINT64_C(0x0101010101010101);
  const uint64_t highs = UINT64_C(0x8080808080808080);
  uint64_t w = tg__ftrace_ld64(s);
  uint64_t z = (w - ones) & ~w & highs;
  if (z) return (size_t)(__builtin_ctzll(z) >> 3);
  w = tg__ftrace_ld64(s + 8);
  z = (w - ones) & ~w & highs;
  return z ? 8 + (size_t)(__builtin_ctzll(z) >> 3) : 16;
#else
  return tg__ftrace_strnlen(s, 16);
#endif
}

#endif /* TRACEGATE_PROBES_FTRACE_PUT_H */
