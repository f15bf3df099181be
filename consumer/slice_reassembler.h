/* ReadBuffers slice reassembly, without I/O.
 *
 * A ReadBuffersResponse carries `slices = 2 {data = 1,
 * last_slice_for_packet = 2}`; the slices of one packet are concatenated
 * until one says last_slice_for_packet, and a packet may span several
 * responses. The bytes come from the service (or a relay) and are treated
 * as untrusted: a malformed response is an error, never a crash, and the
 * packet being assembled is capped.
 */
#ifndef TRACEGATE_CONSUMER_SLICE_REASSEMBLER_H
#define TRACEGATE_CONSUMER_SLICE_REASSEMBLER_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef struct tg_slice_reassembler {
  tg_buf_t cur;      /* the packet being assembled; owned */
  size_t max_packet; /* cap on one packet */
  uint64_t packets;  /* whole packets emitted */
  uint64_t bytes;    /* their bytes */
} tg_slice_reassembler_t;

/* One whole packet, valid during the call. Return 0 to go on, non-zero to
 * stop (tg_slice_reassembler_feed returns that value). */
typedef int (*tg_slice_packet_fn)(void *ctx, const uint8_t *packet, size_t len);

void tg_slice_reassembler_init(tg_slice_reassembler_t *r, size_t max_packet);
void tg_slice_reassembler_free(tg_slice_reassembler_t *r);

/* Feeds one serialised ReadBuffersResponse (|resp_untrusted|, borrowed for
 * the call). Returns 0; TG_EPROTO_DECODE if it does not parse; TG_ENO_SPACE
 * if a packet would exceed the cap (-ENOMEM if memory ran out); or the
 * non-zero value |emit| returned. After an error the reassembler must not
 * be fed again (tg_slice_reassembler_free only). */
int tg_slice_reassembler_feed(tg_slice_reassembler_t *r,
                              const uint8_t *resp_untrusted, size_t len,
                              tg_slice_packet_fn emit, void *ctx);

/* The stream ended: TG_EPROTO_DECODE if a packet was left unfinished. */
int tg_slice_reassembler_finish(const tg_slice_reassembler_t *r);

#endif /* TRACEGATE_CONSUMER_SLICE_REASSEMBLER_H */
