/* See write_behind.h. */
#include "common/write_behind.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE_MASK_4K (~(uint64_t)4095)

void tg_write_behind_init(tg_write_behind_t *wb, int fd) {
  wb->fd = -1;
  wb->end = wb->started = wb->dropped = 0;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) return;
  off_t at = lseek(fd, 0, SEEK_CUR);
  if (at < 0) return;
  wb->fd = fd;
  wb->end = wb->started = (uint64_t)at;
  /* Pages before the first one we write are not ours to drop. */
  wb->dropped = ((uint64_t)at + 4095) & PAGE_MASK_4K;
}

void tg_write_behind_wrote(tg_write_behind_t *wb, size_t n) {
  if (wb->fd < 0) return;
  wb->end += n;
  if (wb->end - wb->started < TG_WRITE_BEHIND_STEP) return;
  if (sync_file_range(wb->fd, (off_t)wb->started,
                      (off_t)(wb->end - wb->started),
                      SYNC_FILE_RANGE_WRITE) < 0) {
    wb->fd = -1;
    return;
  }
  wb->started = wb->end;
  if (wb->end < TG_WRITE_BEHIND_LAG) return;
  uint64_t upto = (wb->end - TG_WRITE_BEHIND_LAG) & PAGE_MASK_4K;
  if (upto <= wb->dropped) return;
  if (posix_fadvise(wb->fd, (off_t)wb->dropped, (off_t)(upto - wb->dropped),
                    POSIX_FADV_DONTNEED) != 0) {
    wb->fd = -1;
    return;
  }
  wb->dropped = upto;
}
