/* The SMB the service sends with SetupTracing. The service is trusted to
 * run the session, not to keep the app alive: a file it could shrink, or
 * one that is not a valid SMB, is refused before anything writes to it. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent_log.h"
#include "agent/smb_map.h"
#include "tracegate/error.h"

int tg__smb_map(int fd_untrusted, const tg__smb_map_opts_t *opts,
                tg_arbiter_t **out) {
  int fd = fd_untrusted;
  /* A file the service can still shrink would SIGBUS the app on its next
   * write past the new end; Perfetto's producers require the same seal.
   * Checked before the size: once sealed, the size cannot go down. */
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: the SMB from the service is not sealed against "
                  "shrinking; not using it");
    close(fd);
    return -EPERM;
  }
  struct stat st;
  size_t page = opts->page_size_kb ? (size_t)opts->page_size_kb * 1024
                                   : TG_SMB_DEFAULT_PAGE_SIZE;
  if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
      !tg_smb_geometry_valid((size_t)st.st_size, page)) {
    tg__agent_log(TG_LOG_ERROR,
                  "agent: unusable SMB from the service (size %lld, page %zu)",
                  (long long)st.st_size, page);
    close(fd);
    return -EINVAL;
  }
  void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  int map_err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    tg__agent_log(TG_LOG_ERROR, "agent: mmap of the SMB failed: %s",
                  strerror(map_err));
    return -map_err;
  }
  tg_arbiter_opts_t o = {
      .smb_base = base,
      .smb_size = (size_t)st.st_size,
      .page_size = page,
      .stall_when_full = opts->stall_when_full,
      .direct_patching = opts->direct_patching,
      .active_size = opts->reserve ? TG_SMB_DEFAULT_SIZE : 0,
      .owed_max = opts->reserve ? TG__SMB_OWED_MAX : 0,
      .wake = opts->wake,
      .wake_ctx = opts->wake_ctx,
  };
  tg_arbiter_t *arb = NULL;
  int rv = tg_arbiter_new(&o, &arb);
  if (rv < 0) {
    munmap(base, (size_t)st.st_size);
    tg__agent_log(TG_LOG_ERROR, "agent: SMB arbiter: %s", tg_strerror(rv));
    return rv;
  }
  tg__agent_log(TG_LOG_DEBUG, "agent: SMB of %lld bytes, %zu-byte pages",
                (long long)st.st_size, page);
  *out = arb;
  return 0;
}
