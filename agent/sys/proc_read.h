/* Reading /proc (and sysfs and tracefs, which read the same way): whole
 * small files, the head of one, large ones in chunks, and the list of
 * pids.
 *
 * Processes come and go while we read: -ENOENT and -ESRCH mean "it
 * vanished" and callers skip it quietly.
 */
#ifndef TRACEGATE_AGENT_SYS_PROC_READ_H
#define TRACEGATE_AGENT_SYS_PROC_READ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Reads all of |path| into |b| (reset first; its cap bounds the size) and
 * NUL-terminates it past tg_buf_size(). Returns 0, -errno, or -ENOBUFS
 * when the file is larger than the cap (then |b| holds the beginning, one
 * byte short of the cap). */
int tg_proc_read_file(const char *path, tg_buf_t *b);

/* Reads at most |cap| - 1 bytes of the beginning of |path| into |buf|
 * (|cap| > 0) and NUL-terminates them: for small files whose head is all
 * that is wanted (a tracefs event's id, a process's argv[0] in its
 * cmdline), without a buffer of its own. Returns the number of bytes read
 * (the rest of a longer file is left unread), or -errno. */
long tg_proc_read_head(const char *path, char *buf, size_t cap);

/* |root| ("" on a live machine, a fake tree's directory in tests) and then
 * |fmt| into |dst| of |cap| bytes: |dst|, or NULL when it does not fit. */
__attribute__((format(printf, 4, 5))) const char *tg_proc_path_at(
    char *dst, size_t cap, const char *root, const char *fmt, ...);

/* Takes one read of a file; a negative return stops the reading. */
typedef int (*tg_proc_chunk_cb)(void *ctx, const char *p, size_t n);

/* Reads |path| |chunk| bytes at a time into a buffer of its own and hands
 * each read to |feed|, so a large file (/proc/kallsyms) is never held
 * whole. Returns 0, -ENOMEM, read's -errno, or |feed|'s first negative
 * value. */
int tg_proc_read_chunks(const char *path, size_t chunk, tg_proc_chunk_cb feed,
                        void *ctx);

/* Lists the numeric entries of |proc_root| ("/proc") in ascending order
 * into *pids (grown with realloc; *cap is its capacity). Returns 0 or
 * -errno. */
int tg_proc_list_pids(const char *proc_root, int32_t **pids, size_t *n,
                      size_t *cap);

/* True for the errors of a process that exited while we read it. */
static inline int tg_proc_vanished(int err) {
  return err == -ENOENT || err == -ESRCH;
}

#endif /* TRACEGATE_AGENT_SYS_PROC_READ_H */
