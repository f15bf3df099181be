/* The pure half of bridge_screen.c: where a client's HTTP request head
 * ends, and the RFC 6455 §5.2 header of each frame the client sends after
 * the upgrade, over bytes as they arrive (split anywhere, one byte at a
 * time included). A few bytes of state, never a frame's payload; no I/O,
 * no lws, so that its unit test and fuzz target link it alone.
 *
 * It checks one thing: that every client frame sets the MASK bit (RFC
 * 6455 §5.1: a server MUST close the connection on an unmasked client
 * frame; libwebsockets 4.1 does not). Lengths, opcodes, reserved bits,
 * fragmentation and limits are read only as far as finding the next
 * header needs; judging them stays libwebsockets' and bridge_conn.c's.
 */
#ifndef TRACEGATE_CLI_BRIDGE_SCREEN_WALK_H
#define TRACEGATE_CLI_BRIDGE_SCREEN_WALK_H

#include <stddef.h>
#include <stdint.h>

/* --- the request head ----------------------------------------------------- */

typedef enum bridge_head_state {
  BRIDGE_HEAD_IN,    /* more head to come */
  BRIDGE_HEAD_ENDED, /* its empty line was seen */
  BRIDGE_HEAD_OVER,  /* no end within the bound: the client is closed */
} bridge_head_state_t;

typedef struct bridge_head {
  bridge_head_state_t state;
  size_t seen;  /* bytes of the head so far */
  size_t line;  /* bytes of the current line other than CR */
  size_t lines; /* non-empty lines ended so far */
} bridge_head_t;

void bridge_head_init(bridge_head_t *h);

/* Feeds |n| more bytes of the request. The head ends at the LF that ends
 * its first empty line after a non-empty one; CR only counts as nothing,
 * so "\r\n\r\n", "\n\n" and mixes end it (at the latest where any HTTP
 * parser would: bytes after it are never taken for head). *used is how
 * many of the |n| bytes are head (all of them while it goes on). Returns
 * 0, or -EMSGSIZE when the head does not end within |max| bytes (state
 * BRIDGE_HEAD_OVER, sticky). */
int bridge_head_feed(bridge_head_t *h, const uint8_t *p_untrusted, size_t n,
                     size_t max, size_t *used);

/* --- frame headers -------------------------------------------------------- */

#define BRIDGE_WALK_HEADER_MAX 14 /* 2 + 8 bytes of length + 4 of mask key */

typedef enum bridge_walk_state {
  BRIDGE_WALK_HEADER,   /* in a frame header */
  BRIDGE_WALK_PAYLOAD,  /* skipping a payload */
  BRIDGE_WALK_UNMASKED, /* a header without MASK was seen (sticky) */
} bridge_walk_state_t;

typedef struct bridge_walk {
  bridge_walk_state_t state;
  uint8_t hdr[BRIDGE_WALK_HEADER_MAX]; /* the current header so far */
  unsigned have, need;                 /* its bytes seen and expected */
  uint64_t left;                       /* payload bytes to skip */
  uint64_t pos;                        /* bytes walked (up to the verdict) */
  uint64_t frames;                     /* whole headers walked */
} bridge_walk_t;

void bridge_walk_init(bridge_walk_t *w);

/* Walks |n| more bytes of the client's stream after the upgrade. Returns
 * 0 when they hold no unmasked frame header, or -EPROTO at the first one:
 * the walker stays BRIDGE_WALK_UNMASKED, hdr[0..1] holds that header's
 * first two bytes (opcode, FIN, 7-bit length), and pos is the offset of
 * its second byte (where the missing bit was seen) in the whole stream. */
int bridge_walk_feed(bridge_walk_t *w, const uint8_t *p_untrusted, size_t n);

#endif /* TRACEGATE_CLI_BRIDGE_SCREEN_WALK_H */
