/* Fuzzes the consumer's inflation of compressed_packets
 * (consumer/packet_inflate.c), which the fleet merge runs on what a remote
 * host sends: the input is the wrapper's bytes. It must inflate within the
 * cap or refuse, and hand out only packets inside the inflated bytes. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "consumer/packet_inflate.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct span {
  const uint8_t *begin, *end;
} span_t;

static int inside(void *ctx, const uint8_t *pkt, size_t len) {
  span_t *s = ctx;
  if (pkt < s->begin || pkt + len > s->end) __builtin_trap();
  volatile uint8_t x = 0;
  for (size_t i = 0; i < len; i++) x ^= pkt[i];
  (void)x;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static tg_buf_t out;
  static int ready;
  if (!ready) {
    tg_buf_init(&out, 4u << 20); /* smaller than the CLI's cap: faster */
    ready = 1;
  }
  int rv = tg_packets_inflate(data, size, &out);
  if (rv == 0) {
    span_t s = {tg_buf_begin(&out), tg_buf_begin(&out) + tg_buf_size(&out)};
    rv = tg_packets_each(s.begin, tg_buf_size(&out), inside, &s);
    if (rv != 0 && rv != TG_EPARSE) __builtin_trap();
  } else if (rv != TG_EBAD_COMPRESSED && rv != -ENOBUFS) {
    __builtin_trap();
  }
  if (tg_buf_size(&out) > (4u << 20)) __builtin_trap();
  return 0;
}
