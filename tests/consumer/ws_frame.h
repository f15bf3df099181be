/* A WebSocket client frame as a test writes it (RFC 6455 §5.2), for the
 * bridge's tests: test_bridge_screen_walk (its screen alone) and
 * test_cli_bridge (end to end). */
#ifndef TRACEGATE_TESTS_CONSUMER_WS_FRAME_H
#define TRACEGATE_TESTS_CONSUMER_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A client frame: FIN, |opcode|, masked unless |unmasked|; |len| as the
 * header says (|n| bytes of |payload| actually follow). */
static inline size_t ws_frame(uint8_t *out, unsigned opcode, bool fin,
                              bool unmasked, uint64_t len,
                              const uint8_t *payload, size_t n) {
  size_t k = 0;
  out[k++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
  uint8_t mask_bit = unmasked ? 0 : 0x80;
  if (len < 126) {
    out[k++] = (uint8_t)(mask_bit | len);
  } else if (len < 65536) {
    out[k++] = mask_bit | 126;
    out[k++] = (uint8_t)(len >> 8);
    out[k++] = (uint8_t)len;
  } else {
    out[k++] = mask_bit | 127;
    for (int i = 7; i >= 0; i--) out[k++] = (uint8_t)(len >> (8 * i));
  }
  static const uint8_t key[4] = {0x12, 0x34, 0x56, 0x78};
  if (!unmasked) {
    memcpy(out + k, key, 4);
    k += 4;
  }
  for (size_t i = 0; i < n; i++)
    out[k++] = unmasked ? payload[i] : (uint8_t)(payload[i] ^ key[i % 4]);
  return k;
}

#endif /* TRACEGATE_TESTS_CONSUMER_WS_FRAME_H */
