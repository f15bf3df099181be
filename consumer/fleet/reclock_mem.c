/* The pass's reader and writer over memory (reclock.h, tg_reclock_mem),
 * and its read and rewind over a file descriptor. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "consumer/fleet/reclock.h"

static ssize_t mem_read(void *ctx, uint8_t *buf, size_t cap) {
  tg_reclock_mem_t *m = ctx;
  size_t take = m->n - m->at;
  if (take > cap) take = cap;
  if (m->step && take > m->step) take = m->step;
  if (take) memcpy(buf, m->in + m->at, take);
  m->at += take;
  return (ssize_t)take;
}

static int mem_rewind(void *ctx) {
  tg_reclock_mem_t *m = ctx;
  m->at = 0;
  tg_buf_reset(&m->out);
  return 0;
}

static int mem_write(void *ctx, const uint8_t *p, size_t n) {
  tg_reclock_mem_t *m = ctx;
  return tg_buf_append(&m->out, p, n);
}

tg_reclock_io_t tg_reclock_mem_io(tg_reclock_mem_t *m, const uint8_t *in,
                                  size_t n, size_t step) {
  memset(m, 0, sizeof(*m));
  m->in = in;
  m->n = n;
  m->step = step;
  tg_buf_init(&m->out, 0);
  return (tg_reclock_io_t){.read = mem_read, .rewind = mem_rewind,
                           .write = mem_write, .ctx = m};
}

void tg_reclock_mem_free(tg_reclock_mem_t *m) { tg_buf_free(&m->out); }

ssize_t tg_reclock_fd_read(int fd, uint8_t *buf, size_t cap) {
  for (;;) {
    ssize_t n = read(fd, buf, cap);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

int tg_reclock_fd_rewind(int fd) {
  return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
}
