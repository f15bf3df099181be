/* /proc file and directory reading; see proc_read.h. */
#include "agent/sys/proc_read.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int tg_proc_read_file(const char *path, tg_buf_t *b) {
  tg_buf_reset(b);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rv = 0;
  for (;;) {
    /* /proc files report size 0: read until EOF, growing as needed. The
     * extra byte keeps room for the terminator. */
    uint8_t *dst = tg_buf_reserve(b, 4096 + 1);
    if (!dst) dst = tg_buf_reserve(b, 1 + 1);
    if (!dst) {
      rv = -ENOBUFS;
      break;
    }
    size_t room = b->cap - b->len - 1;
    ssize_t r = read(fd, dst, room);
    if (r < 0) {
      if (errno == EINTR) continue;
      rv = -errno;
      break;
    }
    if (r == 0) break;
    tg_buf_commit(b, (size_t)r);
  }
  close(fd);
  /* Every read left a byte free for this, also when the cap was hit. */
  if (b->data) b->data[b->len] = '\0';
  return rv;
}

long tg_proc_read_head(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t n = 0;
  long rv = 0;
  /* A file may come in several reads (tracefs hands out a page at a
   * time): read until EOF or the buffer is full. */
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rv = -errno;
    if (r <= 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return rv < 0 ? rv : (long)n;
}

int tg_proc_read_chunks(const char *path, size_t chunk, tg_proc_chunk_cb feed,
                        void *ctx) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char *buf = malloc(chunk);
  int rv = buf ? 0 : -ENOMEM;
  while (rv == 0) {
    ssize_t r = read(fd, buf, chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rv = -errno;
    if (r <= 0) break;
    rv = feed(ctx, buf, (size_t)r);
  }
  free(buf);
  close(fd);
  return rv;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int tg_proc_list_pids(const char *proc_root, int32_t **pids, size_t *n,
                      size_t *cap) {
  *n = 0;
  DIR *d = opendir(proc_root);
  if (!d) return -errno;
  struct dirent *e;
  int rv = 0;
  while ((e = readdir(d)) != NULL) {
    const char *s = e->d_name;
    int64_t v = 0;
    if (*s < '1' || *s > '9') continue;
    for (; *s >= '0' && *s <= '9' && v <= INT32_MAX; s++) v = v * 10 + (*s - '0');
    if (*s != '\0' || v > INT32_MAX) continue;
    if (*n == *cap) {
      size_t ncap = *cap ? *cap * 2 : 256;
      int32_t *p = realloc(*pids, ncap * sizeof(*p));
      if (!p) {
        rv = -ENOMEM;
        break;
      }
      *pids = p;
      *cap = ncap;
    }
    (*pids)[(*n)++] = (int32_t)v;
  }
  closedir(d);
  if (rv == 0 && *n > 1) qsort(*pids, *n, sizeof(**pids), cmp_i32);
  return rv;
}

const char *tg_proc_path_at(char *dst, size_t cap, const char *root,
                            const char *fmt, ...) {
  size_t n = strnlen(root, cap);
  if (n >= cap) return NULL;
  memcpy(dst, root, n);
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(dst + n, cap - n, fmt, ap);
  va_end(ap);
  return w < 0 || (size_t)w >= cap - n ? NULL : dst;
}
