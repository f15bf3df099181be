/* The walkers of bridge_screen_walk.h: a request head's end, and the
 * MASK bit of every client frame header. Pure: no I/O, no logging, no
 * allocation; bytes are looked at once, and only the current frame
 * header (14 bytes at most) is kept across calls.
 */
#include <errno.h>
#include <string.h>

#include "cli/bridge_screen_walk.h"

void bridge_head_init(bridge_head_t *h) { memset(h, 0, sizeof(*h)); }

int bridge_head_feed(bridge_head_t *h, const uint8_t *p_untrusted, size_t n,
                     size_t max, size_t *used) {
  *used = 0;
  if (h->state == BRIDGE_HEAD_OVER) return -EMSGSIZE;
  if (h->state == BRIDGE_HEAD_ENDED) return 0;
  for (size_t i = 0; i < n; i++) {
    if (h->seen >= max) {
      h->state = BRIDGE_HEAD_OVER;
      return -EMSGSIZE;
    }
    h->seen++;
    uint8_t c = p_untrusted[i];
    if (c == '\r') continue;
    if (c != '\n') {
      h->line++;
      continue;
    }
    /* Empty lines before the request line are skipped, as RFC 9112 §2.2
     * allows a server to; the first one after it ends the head. */
    if (h->line == 0 && h->lines > 0) {
      h->state = BRIDGE_HEAD_ENDED;
      *used = i + 1;
      return 0;
    }
    if (h->line) h->lines++;
    h->line = 0;
  }
  *used = n;
  return 0;
}

void bridge_walk_init(bridge_walk_t *w) {
  memset(w, 0, sizeof(*w));
  w->state = BRIDGE_WALK_HEADER;
  w->need = 2;
}

/* The header in hdr[] is whole: its payload is skipped next. */
static void header_done(bridge_walk_t *w) {
  uint64_t len = w->hdr[1] & 0x7f;
  if (len == 126) {
    len = (uint64_t)w->hdr[2] << 8 | w->hdr[3];
  } else if (len == 127) {
    len = 0;
    for (unsigned i = 0; i < 8; i++) len = len << 8 | w->hdr[2 + i];
  }
  w->frames++;
  w->have = 0;
  w->need = 2;
  w->left = len;
  w->state = len ? BRIDGE_WALK_PAYLOAD : BRIDGE_WALK_HEADER;
}

int bridge_walk_feed(bridge_walk_t *w, const uint8_t *p_untrusted, size_t n) {
  size_t i = 0;
  while (i < n) {
    switch (w->state) {
      case BRIDGE_WALK_UNMASKED:
        return -EPROTO;
      case BRIDGE_WALK_PAYLOAD: {
        size_t skip = n - i;
        if ((uint64_t)skip > w->left) skip = (size_t)w->left;
        i += skip;
        w->pos += skip;
        w->left -= skip;
        if (!w->left) w->state = BRIDGE_WALK_HEADER;
        break;
      }
      case BRIDGE_WALK_HEADER:
        w->hdr[w->have++] = p_untrusted[i];
        if (w->have == 2) {
          if (!(w->hdr[1] & 0x80)) {
            w->state = BRIDGE_WALK_UNMASKED;
            return -EPROTO; /* pos: this byte's offset */
          }
          unsigned len7 = w->hdr[1] & 0x7f;
          w->need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
        }
        i++;
        w->pos++;
        if (w->have == w->need) header_done(w);
        break;
    }
  }
  return w->state == BRIDGE_WALK_UNMASKED ? -EPROTO : 0;
}
