/* Fuzzes the consumer's ReadBuffers slice reassembler
 * (consumer/slice_reassembler.h), which takes responses from the service or
 * a relay as they come.
 *
 * Input: a one-byte packet cap selector, then responses as [u16 LE length]
 * [bytes], each fed in turn, as a stream of replies would be. Emitted
 * packets never exceed the cap, their bytes add up to what the reassembler
 * counts, and after an error nothing more is fed.
 */
#include <stddef.h>
#include <stdint.h>

#include "consumer/slice_reassembler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
  size_t cap;
  uint64_t packets;
  uint64_t bytes;
  uint8_t sum;
} seen_t;

static int on_packet(void *ctx, const uint8_t *p, size_t len) {
  seen_t *s = ctx;
  if (len > s->cap || !p) __builtin_trap();
  for (size_t i = 0; i < len; i++) s->sum ^= p[i]; /* touch every byte */
  s->packets++;
  s->bytes += len;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const size_t caps[] = {0, 1, 16, 300, 4096, 1u << 20};
  seen_t s = {.cap = caps[data[0] % 6]};
  tg_slice_reassembler_t r;
  tg_slice_reassembler_init(&r, s.cap);
  size_t off = 1;
  int rv = 0;
  while (rv == 0 && off + 2 <= size) {
    size_t len = (size_t)data[off] | ((size_t)data[off + 1] << 8);
    off += 2;
    if (len > size - off) len = size - off;
    rv = tg_slice_reassembler_feed(&r, data + off, len, on_packet, &s);
    off += len;
  }
  if (rv == 0) (void)tg_slice_reassembler_finish(&r);
  if (r.packets != s.packets || r.bytes != s.bytes) __builtin_trap();
  tg_slice_reassembler_free(&r);
  return 0;
}
