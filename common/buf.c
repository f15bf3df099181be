/* tg_buf: growth policy and compaction. */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tg_buf_init(tg_buf_t *b, size_t max) {
  memset(b, 0, sizeof(*b));
  b->max = max ? max : SIZE_MAX;
}

void tg_buf_free(tg_buf_t *b) {
  free(b->data);
  b->data = NULL;
  b->off = b->len = b->cap = 0;
}

uint8_t *tg_buf_reserve(tg_buf_t *b, size_t n) {
  if (b->cap - b->len >= n) return b->data + b->len;
  size_t used = b->len - b->off;
  if (n > b->max || used > b->max - n) return NULL;
  /* Compaction is enough when the consumed prefix makes the room. */
  if (b->off && b->cap - used >= n) {
    memmove(b->data, b->data + b->off, used);
    b->off = 0;
    b->len = used;
    return b->data + b->len;
  }
  size_t want = used + n;
  size_t ncap = b->cap ? b->cap : 256;
  while (ncap < want) ncap = ncap > SIZE_MAX / 2 ? want : ncap * 2;
  if (ncap > b->max) ncap = b->max;
  uint8_t *nd = malloc(ncap);
  if (!nd) return NULL;
  if (used) memcpy(nd, b->data + b->off, used);
  free(b->data);
  b->data = nd;
  b->cap = ncap;
  b->off = 0;
  b->len = used;
  return b->data + b->len;
}

int tg_buf_append(tg_buf_t *b, const void *p, size_t n) {
  if (n == 0) return 0;
  uint8_t *dst = tg_buf_reserve(b, n);
  if (!dst) return (n > b->max || tg_buf_size(b) > b->max - n) ? -ENOBUFS
                                                                : -ENOMEM;
  memcpy(dst, p, n);
  b->len += n;
  return 0;
}

void tg_buf_consume(tg_buf_t *b, size_t n) {
  if (n > b->len - b->off) n = b->len - b->off;
  b->off += n;
  if (b->off == b->len) b->off = b->len = 0;
}

int tg_buf_read_fd(tg_buf_t *b, int fd) {
  for (;;) {
    size_t room = b->max - (b->len - b->off);
    size_t want = room < 64 * 1024 ? room : 64 * 1024;
    uint8_t one;
    /* At the cap: only the end of the file may come. */
    uint8_t *p = want ? tg_buf_reserve(b, want) : &one;
    if (!p) return -ENOMEM;
    ssize_t n = read(fd, p, want ? want : 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return 0;
    if (!want) return -EFBIG;
    tg_buf_commit(b, (size_t)n);
  }
}
