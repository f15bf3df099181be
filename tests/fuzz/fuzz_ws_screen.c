/* Fuzzes what `tracegate bridge` checks of a client's bytes before
 * libwebsockets sees them (cli/bridge_screen_walk.c): the end of
 * the HTTP request head, then the MASK bit of every WebSocket frame
 * header. Any local web page can make a browser send such bytes, and any
 * local process can send them raw.
 *
 * Input: [split][stream...]. The stream goes through the screen's
 * pipeline (the head, bounded by HEAD_MAX, then frames from the byte
 * after its end), once whole and once in pieces cut by |split|; both runs
 * must agree with each other and with a plain one-shot reading written
 * here: where the head ends or that it is over the bound, whether an
 * unmasked header is found, at which offset, after how many whole frame
 * headers. Every piece is its own exact-size heap copy, so ASan catches a
 * read past a piece's end.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bridge_screen_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD_MAX 512

typedef struct verdict {
  bridge_head_state_t head;
  size_t head_end; /* BRIDGE_HEAD_ENDED: bytes of head */
  bool unmasked;
  uint64_t pos;    /* unmasked: offset of the header's second byte */
  uint64_t frames; /* whole headers before the end or the verdict */
} verdict_t;

/* --- the one-shot reading ------------------------------------------------- */

static verdict_t reference(const uint8_t *p, size_t n) {
  verdict_t v = {.head = BRIDGE_HEAD_IN};
  size_t line = 0, lines = 0, i = 0;
  for (; i < n; i++) {
    if (i >= HEAD_MAX) {
      v.head = BRIDGE_HEAD_OVER;
      return v;
    }
    if (p[i] == '\r') continue;
    if (p[i] != '\n') {
      line++;
      continue;
    }
    if (!line && lines) {
      v.head = BRIDGE_HEAD_ENDED;
      v.head_end = i + 1;
      break;
    }
    if (line) lines++;
    line = 0;
  }
  if (v.head != BRIDGE_HEAD_ENDED) return v;
  const uint8_t *f = p + v.head_end;
  size_t m = n - v.head_end, at = 0;
  while (m - at >= 2) {
    if (!(f[at + 1] & 0x80)) {
      v.unmasked = true;
      v.pos = at + 1;
      return v;
    }
    unsigned len7 = f[at + 1] & 0x7f;
    size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
    if (m - at < 2 + ext + 4) break;
    uint64_t len = len7;
    if (ext) {
      len = 0;
      for (size_t k = 0; k < ext; k++) len = len << 8 | f[at + 2 + k];
    }
    v.frames++;
    at += 2 + ext + 4;
    if (len > m - at) break;
    at += (size_t)len;
  }
  return v;
}

/* --- the screen's walkers, fed in pieces ---------------------------------- */

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/* |split| 0: whole; else pieces of 1..|split| bytes, or of a random size
 * when |split| has its top bit set. */
static size_t piece(uint8_t split, uint32_t *rng, size_t left) {
  size_t k;
  if (!split) k = left;
  else if (split & 0x80) k = 1 + next_rand(rng) % 97;
  else k = split;
  return k < left ? k : left;
}

static verdict_t walk(const uint8_t *p, size_t n, uint8_t split) {
  verdict_t v = {.head = BRIDGE_HEAD_IN};
  bridge_head_t h;
  bridge_walk_t w;
  bridge_head_init(&h);
  bridge_walk_init(&w);
  uint32_t rng = 0x9e3779b9u ^ split;
  size_t off = 0;
  while (off < n) {
    size_t k = piece(split, &rng, n - off);
    uint8_t *c = malloc(k);
    if (!c) abort();
    memcpy(c, p + off, k);
    size_t i = 0;
    if (h.state != BRIDGE_HEAD_ENDED) {
      size_t used;
      int rv = bridge_head_feed(&h, c, k, HEAD_MAX, &used);
      if (rv < 0) {
        if (rv != -EMSGSIZE || h.state != BRIDGE_HEAD_OVER) __builtin_trap();
        free(c);
        v.head = BRIDGE_HEAD_OVER;
        return v;
      }
      if (used > k || (h.state == BRIDGE_HEAD_IN && used != k))
        __builtin_trap();
      i = used;
      if (h.state == BRIDGE_HEAD_ENDED) v.head_end = off + used;
    }
    if (h.state == BRIDGE_HEAD_ENDED) {
      int rv = bridge_walk_feed(&w, c + i, k - i);
      if ((rv < 0) != (w.state == BRIDGE_WALK_UNMASKED)) __builtin_trap();
      if (rv < 0) {
        free(c);
        v.head = h.state;
        v.unmasked = true;
        v.pos = w.pos;
        v.frames = w.frames;
        /* The verdict is sticky. */
        if (bridge_walk_feed(&w, p, n) != -EPROTO) __builtin_trap();
        return v;
      }
    }
    free(c);
    off += k;
  }
  v.head = h.state;
  v.frames = w.frames;
  return v;
}

static bool same(const verdict_t *a, const verdict_t *b) {
  return a->head == b->head && a->unmasked == b->unmasked &&
         (a->head != BRIDGE_HEAD_ENDED || a->head_end == b->head_end) &&
         (!a->unmasked || a->pos == b->pos) && a->frames == b->frames;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  uint8_t split = data[0];
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  verdict_t ref = reference(p, n);
  verdict_t whole = walk(p, n, 0);
  verdict_t cut = walk(p, n, split);
  if (!same(&ref, &whole) || !same(&ref, &cut)) __builtin_trap();
  return 0;
}
