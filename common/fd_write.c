/* See fd_write.h. */
#include "common/fd_write.h"

#include <errno.h>
#include <unistd.h>

int tg_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    if (w == 0) return -EIO; /* write(2) promises progress for n > 0 */
    c += w;
    n -= (size_t)w;
  }
  return 0;
}
