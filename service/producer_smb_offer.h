/* A shared memory buffer the producer brings itself
 * (InitializeConnectionRequest.producer_provided_shmem, the fd riding on
 * that request), as Perfetto's service adopts one.
 *
 * Owns: the decision whether such a file is safe to map, and the adoption
 * into the producer's SMB fields (which producer_smb.c otherwise fills).
 * Must never: map a file the producer could still shrink (a read past its
 * new end would SIGBUS the service), or keep an fd it refused.
 */
#ifndef TRACEGATE_SERVICE_PRODUCER_SMB_OFFER_H
#define TRACEGATE_SERVICE_PRODUCER_SMB_OFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/service.h"

/* What the kernel says about the offered fd, and what the producer said
 * about it. Gathered by tg__producer_smb_adopt; a plain struct so the
 * decision can be tested without files. */
typedef struct tg_smb_offer {
  int access_mode;   /* F_GETFL & O_ACCMODE, -1 if fcntl failed */
  int seals;         /* F_GET_SEALS, -1 if the file has none (not a memfd) */
  bool regular;      /* fstat: S_ISREG */
  bool on_shmem;     /* fstatfs: tmpfs (memfd's own mount), not hugetlbfs */
  int64_t size;      /* fstat: st_size, read after the seals */
  uint64_t size_hint; /* shared_memory_size_hint_bytes, 0 if absent */
  uint64_t page_hint; /* shared_memory_page_size_hint_bytes, 0 if absent */
} tg_smb_offer_t;

/* Why |o| cannot be adopted, or NULL when it can. Pure. Stricter than
 * Perfetto's service where the producer controls the file: seals are
 * required (shrink, grow and seal), the page size must be announced, and a
 * size hint, when given, must be the file's size. */
const char *tg__smb_offer_refusal(const tg_smb_offer_t *o);

/* Adopts |fd_untrusted| (always consumed: kept as the SMB, or closed) as
 * |p|'s SMB with the given hints. Returns 0, or a negative error with the
 * reason logged once; then the producer gets a service SMB later, as in
 * Perfetto's fallback. */
int tg__producer_smb_adopt(tg_producer_t *p, int fd_untrusted,
                           uint64_t size_hint, uint64_t page_hint);

#endif /* TRACEGATE_SERVICE_PRODUCER_SMB_OFFER_H */
