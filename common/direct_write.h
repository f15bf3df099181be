/* Writing a large file front to back without the page cache (O_DIRECT),
 * from a thread of its own.
 *
 * A trace the CLI streams is written once and not read again by it. Even
 * with write-behind (write_behind.h), each byte costs the kernel a copy
 * into a fresh page-cache page, the page's buffer heads, its write-back
 * and its eviction: most of what the CLI spends on a recording over the
 * relay (docs/operations.md, bench_write_behind). With O_DIRECT the device
 * reads the blocks from our memory.
 *
 * The price is that a direct write returns only when the device has the
 * data, and that offsets, lengths and addresses must be aligned. So the
 * caller appends into blocks of TG_DIRECT_WRITE_BLOCK bytes (aligned, a
 * multiple of every logical block size in use), full blocks go to the
 * writer thread, and the caller fills the next one meanwhile; it waits only
 * when every block is in flight (the disk slower than the trace: the
 * back-pressure the page cache's dirty limits gave before). The last,
 * partial block is written through the page cache at the end.
 *
 * A file system that refuses O_DIRECT when it is set gets no writer (the
 * caller writes as before); one that refuses a direct write later (EINVAL)
 * gets the rest of the file through the page cache, said once in the log.
 * Either way every byte reaches the file in order, and every write error is
 * reported: by the next append, or by finish.
 *
 * At most TG_DIRECT_WRITE_MAX writers exist in a process (each holds
 * TG_DIRECT_WRITE_BUFS blocks and a thread): a fleet recording that writes
 * a file per host gives the first ones a writer, the others write as
 * before.
 *
 * One caller thread per writer; the fd stays the caller's, who must not
 * write to it between start and finish.
 */
#ifndef TRACEGATE_COMMON_DIRECT_WRITE_H
#define TRACEGATE_COMMON_DIRECT_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_DIRECT_WRITE_BLOCK (4u << 20)
#define TG_DIRECT_WRITE_BUFS 3
#define TG_DIRECT_WRITE_MAX 4

typedef struct tg_direct_writer tg_direct_writer_t;

typedef struct tg_direct_write_stats {
  uint64_t blocks_direct;   /* blocks written with O_DIRECT */
  uint64_t blocks_buffered; /* blocks written through the page cache */
  uint64_t waits;           /* appends that waited for a free block */
} tg_direct_write_stats_t;

/* Starts writing |fd| directly. |fd| must be a regular file whose offset
 * is a multiple of 4096 (a new file: 0); its offset moves as bytes are
 * written. Returns 0, -EINVAL (not a regular file, an unaligned offset, or
 * O_DIRECT refused: write it as before), -EBUSY (TG_DIRECT_WRITE_MAX
 * writers already), -ENOMEM, or -errno of the thread's start. On error
 * |fd|'s flags are as they were. */
int tg_direct_writer_start(int fd, tg_direct_writer_t **out);

/* Appends |n| bytes of |p| (copied). Returns 0, or the first error of any
 * write so far (negative errno), after which nothing more is written. */
int tg_direct_writer_append(tg_direct_writer_t *w, const void *p, size_t n);

/* Writes everything appended, waits for it, stops the thread and gives
 * |fd| its flags back (without O_DIRECT). Does not fsync: the caller's
 * fsync still stands for the file's size and metadata. Returns 0 or the
 * first error. Once only. */
int tg_direct_writer_finish(tg_direct_writer_t *w);

/* What the writer did; read after finish (the thread counts until then). */
const tg_direct_write_stats_t *tg_direct_writer_stats(
    const tg_direct_writer_t *w);

/* Frees |w|, finishing it first if it was not (what it returns is lost:
 * for paths that throw the file away). NULL is a no-op. */
void tg_direct_writer_free(tg_direct_writer_t *w);

#endif /* TRACEGATE_COMMON_DIRECT_WRITE_H */
