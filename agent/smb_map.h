/* SetupTracing's shared memory buffer: checks the file the service sent,
 * maps it and makes the arbiter that hands its chunks to writers. Owns no
 * state; the agent keeps the arbiter. Not installed. */
#ifndef TRACEGATE_AGENT_SMB_MAP_H
#define TRACEGATE_AGENT_SMB_MAP_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/smb_arbiter.h"

/* A reserve's pages owed to its writers stop growing at this size
 * (tg_arbiter_opts_t.owed_max): what thousands of threads hold between
 * writes plus a few hundred milliseconds of their data on its way to the
 * service. The rest of TG_AGENT_SMB_RESERVE is taken only when writers
 * find these pages full, i.e. while the service falls behind. */
#define TG__SMB_OWED_MAX (8u * 1024u * 1024u)

typedef struct tg__smb_map_opts {
  uint32_t page_size_kb;  /* from SetupTracing; 0: the default page size */
  bool stall_when_full;   /* tg_agent_options_t.on_smb_full */
  bool direct_patching;   /* tg_arbiter_opts_t.direct_patching */
  /* The app gave no size hint, so the agent asked for a reserve: start
   * with an active prefix of TG_SMB_DEFAULT_SIZE and grow into the rest
   * (tg_arbiter_opts_t.active_size, owed_max TG__SMB_OWED_MAX). */
  bool reserve;
  void (*wake)(void *ctx); /* the arbiter's wake (tg_arbiter_opts_t) */
  void *wake_ctx;
} tg__smb_map_opts_t;

/* Maps the SMB in |fd_untrusted| and creates its arbiter in |*out| (one
 * reference, the caller's). Always consumes |fd_untrusted| (closed on
 * return). Refuses, with a logged reason and a negative code, a file that
 * is not sealed against shrinking or whose size and page size do not make
 * a valid SMB: -EPERM, -EINVAL, or the mmap/arbiter error; |*out| is
 * then left as it was. */
int tg__smb_map(int fd_untrusted, const tg__smb_map_opts_t *opts,
                tg_arbiter_t **out);

#endif /* TRACEGATE_AGENT_SMB_MAP_H */
