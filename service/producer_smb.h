/* A producer's shared memory buffer: creation, commits and scraping.
 *
 * Owns: the SMB fields of tg_producer (smb_fd, smb_map, smb) and its ABI
 * violation count. Must never: read SMB bytes twice without copying them
 * first, or write into a buffer that none of the producer's own data source
 * instances targets.
 */
#ifndef TRACEGATE_SERVICE_PRODUCER_SMB_H
#define TRACEGATE_SERVICE_PRODUCER_SMB_H

#include <stdint.h>

#include "service/commit_data.h"
#include "service/service.h"

/* Creates |p|'s SMB (sealed memfd, mapped shared) sized for session |s|. */
int tg__producer_smb_create(tg_producer_t *p, tg_session_t *s);
/* The session owning |buffer_id| if one of |p|'s instances of it targets
 * or targeted that very buffer (until the session is freed), else NULL. */
tg_session_t *tg__producer_allowed_session(tg_producer_t *p, uint32_t buffer_id);
/* Counts a refused request of |p| (|what|, aimed at |buffer_id| with
 * |writer_id|, 0 if none; both 0 for a request that names neither) as an
 * ABI violation and logs the first one. */
void tg__producer_refused(tg_producer_t *p, const char *what, uint32_t buffer_id,
                          uint32_t writer_id);
/* One chunk to move and one chunk to patch of a CommitData (views into
 * the request, service/commit_data.h). */
void tg__producer_commit_move(tg_producer_t *p, const tg_commit_move_t *m);
void tg__producer_commit_patch(tg_producer_t *p, const tg_commit_patch_t *cp);
/* Copies the chunks of |p|'s SMB that are BeingWritten by writers of
 * |session| (NULL: every session) into its buffers (flush timeouts,
 * disable, disconnect). */
void tg__producer_scrape(tg_producer_t *p, tg_session_t *session);

#endif /* TRACEGATE_SERVICE_PRODUCER_SMB_H */
