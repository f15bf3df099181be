/* Growable byte buffer with a hard cap.
 *
 * Data lives in [data + off, data + len); consumed bytes at the front are
 * reclaimed lazily (by compaction when more room is needed), so consuming is
 * O(1). The cap bounds memory for buffers fed by untrusted peers.
 * The buffer owns |data|; tg_buf_free() releases it.
 */
#ifndef TRACEGATE_BUF_H
#define TRACEGATE_BUF_H

#include <stddef.h>
#include <stdint.h>


typedef struct tg_buf {
  uint8_t *data;
  size_t off; /* first unconsumed byte */
  size_t len; /* end of valid bytes */
  size_t cap; /* allocated size */
  size_t max; /* hard limit on cap; 0 = SIZE_MAX */
} tg_buf_t;

void tg_buf_init(tg_buf_t *b, size_t max);
void tg_buf_free(tg_buf_t *b);

static inline size_t tg_buf_size(const tg_buf_t *b) { return b->len - b->off; }
/* Never NULL: a buffer that never held a byte has no storage, and
 * NULL + 0 (or memcpy from NULL) is undefined, so it points at an empty
 * byte of its own; there are tg_buf_size() == 0 bytes to read there. */
static inline uint8_t *tg_buf_begin(const tg_buf_t *b) {
  static uint8_t empty;
  return b->data ? b->data + b->off : &empty;
}

/* Makes room for |n| more bytes after the valid ones and returns a pointer to
 * it, or NULL (-ENOMEM or the cap) without changing the contents. The pointer
 * is valid until the next call that may grow the buffer. */
uint8_t *tg_buf_reserve(tg_buf_t *b, size_t n);
/* Marks |n| reserved bytes as valid. */
static inline void tg_buf_commit(tg_buf_t *b, size_t n) { b->len += n; }
/* Returns 0 or -ENOBUFS (cap) / -ENOMEM. */
int tg_buf_append(tg_buf_t *b, const void *p, size_t n);
/* Drops |n| bytes from the front (n <= size). */
void tg_buf_consume(tg_buf_t *b, size_t n);
static inline void tg_buf_reset(tg_buf_t *b) { b->off = b->len = 0; }
/* Appends what |fd| holds until its end (EINTR retried). Returns 0, -EFBIG
 * when the cap is reached first, -ENOMEM or read's -errno. */
int tg_buf_read_fd(tg_buf_t *b, int fd);

#endif /* TRACEGATE_BUF_H */
