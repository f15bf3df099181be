/* W3C traceparent parsing and formatting, and the flow id derived from a
 * context (see tracegate/trace_context.h). Everything here is pure except
 * random_ids(), the one getrandom() call behind making a context. */
#include "tracegate/trace_context.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>

#include "agent/siphash.h"
#include "tracegate/error.h"

/* --- SipHash-2-4 ---------------------------------------------------------- */

static inline uint64_t rotl64(uint64_t x, unsigned b) {
  return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static inline void sip_round(uint64_t v[4]) {
  v[0] += v[1];
  v[1] = rotl64(v[1], 13) ^ v[0];
  v[0] = rotl64(v[0], 32);
  v[2] += v[3];
  v[3] = rotl64(v[3], 16) ^ v[2];
  v[0] += v[3];
  v[3] = rotl64(v[3], 21) ^ v[0];
  v[2] += v[1];
  v[1] = rotl64(v[1], 17) ^ v[2];
  v[2] = rotl64(v[2], 32);
}

static inline void sip_absorb(uint64_t v[4], uint64_t word) {
  v[3] ^= word;
  sip_round(v);
  sip_round(v);
  v[0] ^= word;
}

uint64_t tg__siphash24(const uint8_t key[16], const uint8_t *m, size_t n) {
  uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
  uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                   k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
  size_t whole = n & ~(size_t)7;
  for (size_t i = 0; i < whole; i += 8) sip_absorb(v, load_le64(m + i));
  /* The last word: the tail bytes, and the length's low byte on top. */
  uint64_t last = (uint64_t)(n & 0xff) << 56;
  for (size_t i = whole; i < n; i++)
    last |= (uint64_t)m[i] << (8 * (i - whole));
  sip_absorb(v, last);
  v[2] ^= 0xff;
  for (int i = 0; i < 4; i++) sip_round(v);
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* --- flow ids ------------------------------------------------------------- */

/* Published in trace_context.h: changing it breaks every peer. */
static const uint8_t k_flow_key[16] = {'t', 'r', 'a', 'c', 'e', 'g', 'a', 't',
                                       'e', '-', 'f', 'l', 'o', 'w', '-', '1'};

uint64_t tg_flow_id_from_context(const uint8_t trace_id[16],
                                 const uint8_t span_id[8]) {
  uint8_t m[24];
  memcpy(m, trace_id, 16);
  memcpy(m + 16, span_id, 8);
  uint64_t h = tg__siphash24(k_flow_key, m, sizeof(m));
  return h ? h : 1;
}

/* --- traceparent ---------------------------------------------------------- */

/* The value of a lowercase hex digit, or -1 (uppercase included: the
 * spec's HEXDIGLC). */
static inline int hex_lc(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Reads |n| bytes of lowercase hex at |s| into |out|; false on any other
 * character. */
static bool read_hex(const char *s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int hi = hex_lc(s[2 * i]), lo = hex_lc(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

static bool all_zero(const uint8_t *p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; i++) acc |= p[i];
  return acc == 0;
}

/* Offsets in "vv-tttt...(32)-pppp...(16)-ff". */
enum { AT_TRACE = 3, AT_PARENT = 36, AT_FLAGS = 53 };

int tg_traceparent_parse(const char *s, size_t len, tg_trace_context_t *out) {
  if (len < TG_TRACEPARENT_LEN) return TG_EPARSE;
  if (s[2] != '-' || s[AT_PARENT - 1] != '-' || s[AT_FLAGS - 1] != '-')
    return TG_EPARSE;
  tg_trace_context_t c;
  if (!read_hex(s, &c.version, 1) || !read_hex(s + AT_TRACE, c.trace_id, 16) ||
      !read_hex(s + AT_PARENT, c.parent_id, 8) ||
      !read_hex(s + AT_FLAGS, &c.flags, 1))
    return TG_EPARSE;
  /* Version 00 ends at the flags; a later one may go on after a '-'. */
  if (len > TG_TRACEPARENT_LEN &&
      (c.version == 0 || s[TG_TRACEPARENT_LEN] != '-'))
    return TG_EPARSE;
  if (c.version == 0xff || all_zero(c.trace_id, 16) ||
      all_zero(c.parent_id, 8))
    return -EINVAL;
  *out = c;
  return 0;
}

static char *put_hex(char *p, const uint8_t *b, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    *p++ = digits[b[i] >> 4];
    *p++ = digits[b[i] & 15];
  }
  return p;
}

void tg_traceparent_format(const tg_trace_context_t *ctx,
                           char out[TG_TRACEPARENT_BUF]) {
  char *p = out;
  *p++ = '0';
  *p++ = '0';
  *p++ = '-';
  p = put_hex(p, ctx->trace_id, 16);
  *p++ = '-';
  p = put_hex(p, ctx->parent_id, 8);
  *p++ = '-';
  p = put_hex(p, &ctx->flags, 1);
  *p = 0;
}

/* --- fresh contexts ------------------------------------------------------- */

/* Fills |n| bytes at |p| from getrandom(), retried on EINTR. Blocks only
 * before the kernel's pool is first seeded (early boot). */
static int random_bytes(uint8_t *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    got += (size_t)r;
  }
  return 0;
}

/* A random non-zero id of |n| bytes: all zero means "invalid" on the wire,
 * so a draw of zeros (2^-64 at worst) is drawn again. */
static int random_id(uint8_t *p, size_t n) {
  do {
    int rv = random_bytes(p, n);
    if (rv < 0) return rv;
  } while (all_zero(p, n));
  return 0;
}

int tg_trace_context_new(tg_trace_context_t *out) {
  tg_trace_context_t c = {0};
  int rv = random_id(c.trace_id, sizeof(c.trace_id));
  if (rv == 0) rv = random_id(c.parent_id, sizeof(c.parent_id));
  if (rv == 0) *out = c;
  return rv;
}

int tg_trace_context_child(const tg_trace_context_t *parent,
                           tg_trace_context_t *out) {
  tg_trace_context_t c = *parent;
  c.version = 0;
  int rv = random_id(c.parent_id, sizeof(c.parent_id));
  if (rv == 0) *out = c;
  return rv;
}
