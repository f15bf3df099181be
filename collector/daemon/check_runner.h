/* The collector's check runner: the one process of tracegate-collector
 * that may change its uid, so that trace processor, which parses a hostile
 * host's bytes, runs as uid and gid TG_TP_NOBODY (common/tp_import.h) even
 * when the collector is not root (docs/collector.md, "Checking each
 * snapshot"; docs/security.md, "The snapshot check").
 *
 *   main ── fork (before the config's secrets are read) ──> runner
 *    │  drops every capability          keeps CAP_SETUID, CAP_SETGID only,
 *    │                                  closes every other descriptor
 *    │   socketpair(AF_UNIX, SOCK_SEQPACKET)
 *    ├── request (fixed size) + the trace's fd (SCM_RIGHTS) ──>
 *    │                                  tg_tp_import_fd, as_nobody
 *    └── <── verdict (fixed size) ──────────────────────────────
 *
 * One request at a time: the collector sends one and waits for its
 * verdict (import_check.c runs one check at a time). The runner trusts
 * nothing the collector sends beyond what coll_runner_req_decode and the
 * descriptor's checks accept (exactly one, a regular file); a refused
 * request is answered, with |refused| saying why, and the runner goes on.
 * It does the deadline and the kill itself (the child's uid is not the
 * collector's, so the collector could not signal it). It ends when its
 * socket closes (a check under way is killed first) or, by
 * PR_SET_PDEATHSIG, when the collector dies.
 *
 * Both ends are the same binary on one machine: the structs are host
 * order, compared by size, magic and version.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_CHECK_RUNNER_H
#define TRACEGATE_COLLECTOR_DAEMON_CHECK_RUNNER_H

#include <stdint.h>
#include <sys/types.h>

#include "common/tp_import.h"

#define COLL_RUNNER_MAGIC 0x52434754u /* "TGCR" */
#define COLL_RUNNER_VERSION 1u
/* The trace processor's path: the config's PATH (1024 bytes) and its NUL. */
#define COLL_RUNNER_TP_MAX 1032
/* What the config allows (check_timeout 1s..1h, check_memory 64M..1T). */
#define COLL_RUNNER_TIMEOUT_MIN_MS 1000u
#define COLL_RUNNER_TIMEOUT_MAX_MS 3600000u
#define COLL_RUNNER_MEMORY_MIN (64ull << 20)
#define COLL_RUNNER_MEMORY_MAX (1ull << 40)

typedef struct coll_runner_req {
  uint32_t magic;
  uint32_t version;
  uint64_t snapshot_id; /* for the runner's log only */
  uint64_t timeout_ms;  /* COLL_RUNNER_TIMEOUT_MIN_MS..MAX_MS */
  uint64_t memory;      /* RLIMIT_AS: COLL_RUNNER_MEMORY_MIN..MAX */
  char tp[COLL_RUNNER_TP_MAX]; /* NUL-terminated, printable, not empty */
} coll_runner_req_t;
_Static_assert(sizeof(coll_runner_req_t) == 32 + COLL_RUNNER_TP_MAX,
               "no padding: the request is compared by size");

/* Why the runner refused a request (the verdict's |refused|). */
typedef enum coll_runner_refusal {
  COLL_RUNNER_ACCEPTED = 0,
  COLL_RUNNER_BAD_SIZE = 1,    /* not exactly one request's bytes */
  COLL_RUNNER_BAD_FIELD = 2,   /* magic, version, a limit or the path */
  COLL_RUNNER_BAD_FDS = 3,     /* not exactly one descriptor */
  COLL_RUNNER_NOT_REGULAR = 4, /* the descriptor is not a regular file */
} coll_runner_refusal_t;

typedef struct coll_runner_verdict {
  uint32_t magic;
  int32_t failure; /* tg_tp_failure_t; TG_TP_NOT_RUN when refused */
  int32_t refused; /* coll_runner_refusal_t */
  uint8_t uid_kept; /* tg_tp_verdict_t's */
  uint8_t pad[3];
  int64_t uid;      /* tg_tp_verdict_t's */
  char why[TG_TP_WHY_MAX]; /* NUL-terminated */
} coll_runner_verdict_t;
_Static_assert(sizeof(coll_runner_verdict_t) == 24 + TG_TP_WHY_MAX,
               "no padding: the verdict is compared by size");

/* |n| bytes received (|buf_untrusted|) as a request into |req|: 0, or
 * COLL_RUNNER_BAD_SIZE / COLL_RUNNER_BAD_FIELD with |*why| (static text)
 * saying which. Pure. */
int coll_runner_req_decode(const void *buf_untrusted, size_t n,
                           coll_runner_req_t *req, const char **why);

typedef struct coll_runner {
  pid_t pid; /* 0: none */
  int fd;    /* the collector's end, -1: none */
} coll_runner_t;

/* Forks the runner. In the caller: 0, or -errno (no runner: |r| says
 * none). The child never returns: it serves until its socket closes, then
 * exits. Call while the process has one thread. */
int coll_runner_start(coll_runner_t *r);

/* The collector gives up every capability: ambient, inheritable,
 * permitted, effective, and the bounding set where it may (CAP_SETPCAP), so
 * that no program it runs gets one back. main calls it unless root.
 * Returns 0 or -errno. */
int coll_runner_drop_caps(void);

/* One check: |trace_fd| (borrowed) imported into |tp| by the runner under
 * |lim|'s timeout and memory, as TG_TP_NOBODY where the runner may switch
 * (else v->uid_kept). Blocks its thread until the verdict. Returns 0 with
 * *v filled (a refused request is TG_TP_NOT_RUN), or -errno: the runner is
 * gone or was cancelled (-ECANCELED), *v then TG_TP_NOT_RUN too. */
int coll_runner_check(coll_runner_t *r, const char *tp, int trace_fd,
                      const tg_tp_limits_t *lim, uint64_t snapshot_id,
                      tg_tp_verdict_t *v);

/* From another thread while a check waits (the daemon stops): the runner
 * kills the check under way and exits; the waiting check returns
 * -ECANCELED, and so does every later one. */
void coll_runner_cancel(coll_runner_t *r);

/* Closes the collector's end and reaps the runner (it exits once its
 * socket closes); says so when it ended otherwise than with status 0. */
void coll_runner_close(coll_runner_t *r);

#endif /* TRACEGATE_COLLECTOR_DAEMON_CHECK_RUNNER_H */
