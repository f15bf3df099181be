/* Writing a whole buffer to a blocking file descriptor.
 *
 * write() may take fewer bytes than asked (a pipe, a signal arriving
 * mid-way, a disk nearly full), so a caller that wants all of it written
 * has to loop; every such loop lives here.
 */
#ifndef TRACEGATE_COMMON_FD_WRITE_H
#define TRACEGATE_COMMON_FD_WRITE_H

#include <stddef.h>

/* Writes |n| bytes of |p| to |fd|, retrying short writes and EINTR.
 * Returns 0, or -errno of the write that failed (bytes before it may have
 * been written). Async-signal-safe. */
int tg_write_all(int fd, const void *p, size_t n);

#endif /* TRACEGATE_COMMON_FD_WRITE_H */
