/* SipHash-2-4 (Aumasson and Bernstein), the hash under the flow ids of
 * tracegate/trace_context.h: keyed, 64-bit, and implemented alike in every
 * language, so a peer written in any of them derives the same id. */
#ifndef TRACEGATE_AGENT_SIPHASH_H
#define TRACEGATE_AGENT_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The 64-bit SipHash-2-4 of |n| bytes at |m| under |key|, as the reference
 * implementation returns it (its output bytes read little-endian). */
uint64_t tg__siphash24(const uint8_t key[16], const uint8_t *m, size_t n);

#endif /* TRACEGATE_AGENT_SIPHASH_H */
