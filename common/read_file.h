/* Reading a small file that an operator names (a config, an inventory, an
 * authorization file, a CRL) whole, from a daemon's loop thread.
 *
 * Only a regular file is read. A FIFO would block the reader for good (its
 * open() until a writer comes, its read() until the writer closes), a
 * device may never end, a directory is a mistake: each is refused with
 * -EINVAL before any byte is read. The file is opened non-blocking, so
 * that not even the open() of a FIFO waits, and checked with fstat() on
 * the descriptor that is then read (no window between a check and the
 * open). The size is bounded by the caller.
 */
#ifndef TRACEGATE_COMMON_READ_FILE_H
#define TRACEGATE_COMMON_READ_FILE_H

#include <stddef.h>

/* Reads |path| whole. On success *out is the caller's (free()), |*len|
 * bytes followed by a NUL that |*len| does not count. Returns 0, or
 * -EINVAL (not a regular file), -EFBIG (over |max| bytes), -ENOMEM, or
 * -errno of open/read; *out is NULL then. */
int tg_read_regular_file(const char *path, size_t max, char **out,
                         size_t *len);

/* What a tg_read_regular_file() failure means, for a message that already
 * names the file, into |out| (|cap| bytes): "not a regular file (a FIFO, a
 * device or a directory)", "larger than MAX bytes" (|max| as given to the
 * read), or strerror(). Returns |out|. */
const char *tg_read_file_why(char *out, size_t cap, int rv, size_t max);

#endif /* TRACEGATE_COMMON_READ_FILE_H */
