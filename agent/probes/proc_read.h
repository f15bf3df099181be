/* Reading /proc: whole small files and the list of pids.
 *
 * Processes come and go while we read: -ENOENT and -ESRCH mean "it
 * vanished" and callers skip it quietly.
 */
#ifndef TRACEGATE_PROBES_PROC_READ_H
#define TRACEGATE_PROBES_PROC_READ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Reads all of |path| into |b| (reset first; its cap bounds the size) and
 * NUL-terminates it past tg_buf_size(). Returns 0, -errno, or -ENOBUFS
 * when the file is larger than the cap (then |b| holds the beginning, one
 * byte short of the cap). */
int tg_proc_read_file(const char *path, tg_buf_t *b);

/* Lists the numeric entries of |proc_root| ("/proc") in ascending order
 * into *pids (grown with realloc; *cap is its capacity). Returns 0 or
 * -errno. */
int tg_proc_list_pids(const char *proc_root, int32_t **pids, size_t *n,
                      size_t *cap);

/* True for the errors of a process that exited while we read it. */
static inline int tg_proc_vanished(int err) {
  return err == -ENOENT || err == -ESRCH;
}

#endif /* TRACEGATE_PROBES_PROC_READ_H */
