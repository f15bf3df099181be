/* compressed_packets (TracePacket field 50, Perfetto's DEFLATE output): a
 * zlib stream of packets framed as a Trace ([0x0A][varint len][packet]...).
 *
 * The fleet merge must rewrite every packet of a host (machine id,
 * sequence id), so it inflates these wrappers and handles the packets
 * inside. The bytes come from a remote host: the output is bounded by the
 * buffer's cap and every frame of the inflated Trace is checked. */
#ifndef TRACEGATE_CONSUMER_PACKET_INFLATE_H
#define TRACEGATE_CONSUMER_PACKET_INFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The most one wrapper may inflate to: Perfetto's batches are far smaller
 * (ours are 512 KiB), and a hostile host must not make the CLI allocate
 * without bound. */
#define TG_PACKETS_INFLATE_MAX (64u << 20)

/* Inflates |n| bytes at |z| into |out| (reset first; its cap bounds the
 * output). Returns 0, TG_EBAD_COMPRESSED (corrupt, truncated, or more
 * data after the end), or -ENOBUFS past the cap, -ENOMEM. */
int tg_packets_inflate(const uint8_t *z, size_t n, tg_buf_t *out);

/* The same inflation for any one stream: zlib's format, or with |gzip|
 * one gzip member (RFC 1952: an HTTP body with Content-Encoding: gzip).
 * Same returns; bytes after the stream's end are TG_EBAD_COMPRESSED. */
int tg_inflate_capped(const uint8_t *z, size_t n, bool gzip, tg_buf_t *out);

/* Calls |cb| for each packet of the Trace in [p, p + n), in order; stops
 * at the first non-zero return of |cb| and returns it. Returns 0, or
 * TG_EPARSE when the framing is broken or a field is not a packet (then
 * the packets before it were already handed out). */
int tg_packets_each(const uint8_t *p, size_t n,
                    int (*cb)(void *ctx, const uint8_t *pkt, size_t len),
                    void *ctx);

#endif /* TRACEGATE_CONSUMER_PACKET_INFLATE_H */
