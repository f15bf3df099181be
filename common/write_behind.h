/* Write-behind for a file written once, front to back (a trace file).
 *
 * Left alone, the kernel keeps every page of such a file dirty in the page
 * cache until its dirty limits or the final fsync() force the write-back,
 * then keeps it cached although nothing reads it again. Every page is a
 * fresh one for the kernel to find, and the final fsync() waits for all
 * of it. This helper keeps the write-back running behind the writer and
 * the cache from filling, so that the writer never pays for reclaim and
 * the fsync() has little left to wait for (bench_write_behind; the
 * figures are in docs/operations.md, "Writing the trace file").
 *
 * What it does, after each TG_WRITE_BEHIND_STEP bytes written:
 *  - sync_file_range(SYNC_FILE_RANGE_WRITE) starts the write-back of the
 *    new bytes now. It does not wait for the disk (only for room in the
 *    device's queue when that is full).
 *  - posix_fadvise(POSIX_FADV_DONTNEED) drops the pages more than
 *    TG_WRITE_BEHIND_LAG behind the end from the page cache. Pages not yet
 *    written back by then (a disk slower than the trace) are skipped by the
 *    kernel and stay cached, as without this helper; they are not retried.
 * Nothing here waits for the disk: bursts are still absorbed by the page
 * cache, and the caller's fsync() still reports every write-back error.
 *
 * Anything but a regular file (a pipe, a terminal, a device), or a file
 * system that refuses either call, turns the helper off for that file.
 * Not thread-safe; one per file, beside whoever writes it.
 */
#ifndef TRACEGATE_COMMON_WRITE_BEHIND_H
#define TRACEGATE_COMMON_WRITE_BEHIND_H

#include <stdint.h>
#include <stddef.h>

#define TG_WRITE_BEHIND_STEP (4u << 20)
#define TG_WRITE_BEHIND_LAG (64u << 20)

typedef struct tg_write_behind {
  int fd;           /* not owned; -1: off */
  uint64_t end;     /* file offset after the last byte written */
  uint64_t started; /* write-back started below this offset */
  uint64_t dropped; /* pages below this offset offered for dropping */
} tg_write_behind_t;

/* Starts tracking |fd| from its current offset: the bytes the caller
 * writes next land there. Off when |fd| is not a regular file. |fd| stays
 * the caller's: it must outlive the helper's use. */
void tg_write_behind_init(tg_write_behind_t *wb, int fd);

/* Says that |n| more bytes were written at the end. Never fails: a refusal
 * turns the helper off (the data is in the file either way). */
void tg_write_behind_wrote(tg_write_behind_t *wb, size_t n);

static inline int tg_write_behind_active(const tg_write_behind_t *wb) {
  return wb->fd >= 0;
}

#endif /* TRACEGATE_COMMON_WRITE_BEHIND_H */
