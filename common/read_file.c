/* Whole small regular files (common/read_file.h). */
#include "common/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tg_read_regular_file(const char *path, size_t max, char **out,
                         size_t *len) {
  *out = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  int rv = 0;
  if (fstat(fd, &st) != 0)
    rv = -errno;
  else if (!S_ISREG(st.st_mode))
    rv = -EINVAL;
  else if ((unsigned long long)st.st_size > max)
    rv = -EFBIG;
  /* The size fstat() saw is only a hint (the file may grow meanwhile): one
   * byte more than |max| is asked for, so that a larger file is told. */
  char *buf = NULL;
  size_t n = 0, cap = 0;
  if (rv == 0) {
    cap = (size_t)st.st_size < max ? (size_t)st.st_size + 1 : max + 1;
    if (!(buf = malloc(cap + 1))) rv = -ENOMEM;
  }
  while (rv == 0) {
    if (n == cap) {
      if (cap > max) {
        rv = -EFBIG;
        break;
      }
      size_t want = cap * 2 < max + 1 ? cap * 2 : max + 1;
      char *g = realloc(buf, want + 1);
      if (!g) {
        rv = -ENOMEM;
        break;
      }
      buf = g;
      cap = want;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rv = -errno;
    if (r <= 0) break;
    n += (size_t)r;
  }
  if (rv == 0 && n > max) rv = -EFBIG;
  close(fd);
  if (rv < 0) {
    free(buf);
    return rv;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

const char *tg_read_file_why(char *out, size_t cap, int rv, size_t max) {
  if (rv == -EFBIG)
    snprintf(out, cap, "larger than %zu bytes", max);
  else
    snprintf(out, cap, "%s",
             rv == -EINVAL ? "not a regular file (a FIFO, a device or a directory)"
                           : strerror(-rv));
  return out;
}
