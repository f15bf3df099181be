/* A producer-provided SMB: deciding whether to map it, and mapping it.
 *
 * The file is the producer's, and the producer keeps its own fd: whatever
 * it can still do to the file after we map it, it will. Two things could
 * crash the service through the mapping, and both are ruled out before
 * mmap():
 * - shrinking (ftruncate): a later access past the new end is SIGBUS. The
 *   file must carry F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL, as
 *   Perfetto's AttachToFd requires; seals cannot be removed, and with
 *   F_SEAL_SEAL none can be added (so neither F_SEAL_WRITE nor
 *   F_SEAL_FUTURE_WRITE can take the mapping's writability away). Only a
 *   memfd made with MFD_ALLOW_SEALING can carry them: a /dev/shm or disk
 *   file is refused by this check alone.
 * - a fault that cannot be served: hole punching (FALLOC_FL_PUNCH_HOLE is
 *   not stopped by the seals) just makes pages read back as zeros, and a
 *   fault allocates them again on the kernel's internal shmem mount, which
 *   has no size limit. A hugetlbfs memfd is refused: there a fault on a
 *   punched page SIGBUSes once the huge page pool is empty.
 * The size is read after the seals are checked, so it cannot change later.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "abi/smb.h"
#include "common/log.h"
#include "service/producer_port.h"
#include "service/producer_smb_offer.h"
#include "tracegate/error.h"

#define REQUIRED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

const char *tg__smb_offer_refusal(const tg_smb_offer_t *o) {
  if (o->access_mode != O_RDWR) return "the fd is not open read-write";
  if (!o->regular) return "not a regular file";
  if (o->seals < 0 || (o->seals & REQUIRED_SEALS) != REQUIRED_SEALS)
    return "not a memfd sealed against shrink, grow and new seals";
  if (!o->on_shmem) return "not on shmem (a hugetlbfs memfd can SIGBUS)";
  if (o->size <= 0 || (uint64_t)o->size > TG_SMB_MAX_SIZE)
    return "size outside 1 B..32 MiB";
  if (o->page_hint == 0 || o->page_hint > TG_SMB_MAX_PAGE_SIZE)
    return "page size not announced, or above 32 KiB";
  if (!tg_smb_geometry_valid((size_t)o->size, (size_t)o->page_hint))
    return "page size not 4, 8, 16 or 32 KiB, or size not a multiple of it";
  if (o->size_hint && o->size_hint != (uint64_t)o->size)
    return "size differs from the announced size";
  return NULL;
}

/* Fills |o| from the kernel's view of |fd|. Seals first: once they are
 * known to hold, the size read after them is final. */
static void offer_inspect(int fd, tg_smb_offer_t *o) {
  int fl = fcntl(fd, F_GETFL);
  o->access_mode = fl < 0 ? -1 : (fl & O_ACCMODE);
  o->seals = fcntl(fd, F_GET_SEALS);
  struct stat st;
  if (fstat(fd, &st) == 0) {
    o->regular = S_ISREG(st.st_mode);
    o->size = (int64_t)st.st_size;
  }
  struct statfs fs;
  o->on_shmem = fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

/* Logs why |p|'s SMB was refused (once: InitializeConnection is). */
static void log_refusal(const tg_producer_t *p, const tg_smb_offer_t *o,
                        const char *why) {
  TG_WARN("producer %u ('%s', pid %d): its own SMB refused, a service SMB "
          "will be used: %s (size %lld, announced %llu, page %llu, seals %#x)",
          p->ident.producer_id, p->name ? p->name : "", (int)p->ident.pid, why,
          (long long)o->size, (unsigned long long)o->size_hint,
          (unsigned long long)o->page_hint, (unsigned)o->seals);
}

int tg__producer_smb_adopt(tg_producer_t *p, int fd_untrusted,
                           uint64_t size_hint, uint64_t page_hint) {
  tg_smb_offer_t o = {.size_hint = size_hint, .page_hint = page_hint};
  offer_inspect(fd_untrusted, &o);
  const char *why = tg__smb_offer_refusal(&o);
  if (why) {
    log_refusal(p, &o, why);
    close(fd_untrusted);
    return -EINVAL;
  }
  void *map = mmap(NULL, (size_t)o.size, PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd_untrusted, 0);
  if (map == MAP_FAILED) {
    int err = -errno;
    log_refusal(p, &o, tg_strerror(err));
    close(fd_untrusted);
    return err;
  }
  tg_smb_init(&p->smb, map, (size_t)o.size, (size_t)page_hint);
  p->smb_map = map;
  p->smb_fd = fd_untrusted;
  p->smb_from_producer = true;
  TG_INFO("producer %u ('%s', pid %d): adopted its own SMB, %lld KiB, pages "
          "of %llu KiB",
          p->ident.producer_id, p->name ? p->name : "", (int)p->ident.pid,
          (long long)o.size / 1024, (unsigned long long)page_hint / 1024);
  return 0;
}
