/* One import of a trace file into Perfetto's trace processor
 * (trace_processor_shell), as a child under limits, and its verdict:
 * `tracegate snapshot check` (cli/snapshot_check.c) and the
 * collector's check of each stored snapshot (collector/daemon/
 * import_check.c) both ask it whether a file, or one host's part of it,
 * imports.
 *
 * The child runs `TP -Q "select 1" /proc/self/fd/3` in a process group of
 * its own, with no core files, standard input and output on /dev/null,
 * under an address-space limit (setrlimit RLIMIT_AS: a hostile file can
 * make trace processor ask for gigabytes) and a wall-clock deadline after
 * which the group is killed. Its standard error is read, bounded, for the
 * one line that says why. Between fork and exec the child calls only
 * async-signal-safe functions, so a threaded caller may use it from any
 * thread; it blocks that thread until the import ends.
 *
 * The file is hostile, so the child holds nothing worth taking
 * (docs/security.md, "The snapshot check"): the caller opens the trace,
 * and a feeder process copies it into a pipe the child reads (descriptor
 * 3), so the child needs no access to the file or the store around it; its
 * environment is PATH and LC_ALL alone (no secret the caller got from its
 * environment); common/sandbox confines it before exec: it may read and
 * run only the system's directories and trace processor's own, write
 * nothing, open no socket (no network), signal or trace nothing outside
 * itself. With |as_nobody| and a caller that may change its uid (root, or
 * the collector's check runner with CAP_SETUID and CAP_SETGID) it also
 * runs as uid and gid TG_TP_NOBODY, without groups; either way it holds no
 * capability when it execs (ambient ones cleared, the rest set to none).
 */
#ifndef TRACEGATE_COMMON_TP_IMPORT_H
#define TRACEGATE_COMMON_TP_IMPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tg_tp_failure {
  TG_TP_OK,      /* imported */
  TG_TP_ERROR,   /* trace processor refused the file (exit status not 0) */
  TG_TP_CRASH,   /* killed by a signal */
  TG_TP_TIMEOUT, /* no end by the deadline: killed */
  TG_TP_MEMORY,  /* ran out of its address space (bad_alloc) */
  TG_TP_NOT_RUN, /* could not be started: no verdict on the file */
} tg_tp_failure_t;

/* "ok", "error", "crash", "timeout", "memory", "not_run". */
const char *tg_tp_failure_name(tg_tp_failure_t f);

#define TG_TP_WHY_MAX 464

typedef struct tg_tp_verdict {
  tg_tp_failure_t failure;
  /* Printable (tg_printable), "" when it imported: trace processor's
   * error line ("Could not read trace file (path: P): WHY" gives WHY
   * alone, so a verdict does not carry the caller's temporary path), or
   * the signal and the line, or the limit that was hit. */
  char why[TG_TP_WHY_MAX];
  /* The uid trace processor ran as (-1: not started). */
  int64_t uid;
  /* |as_nobody| was asked, but the caller could not change its uid (no
   * CAP_SETUID or CAP_SETGID): the child kept the caller's, and only its
   * sandbox keeps it from the caller's files. The caller says so. */
  bool uid_kept;
} tg_tp_verdict_t;

typedef struct tg_tp_limits {
  uint64_t timeout_ms; /* > 0 */
  uint64_t memory;     /* RLIMIT_AS bytes; 0: none */
  /* NULL, or where the child's pid (its process group's id) is kept while
   * it runs: set after the fork, 0 again before the child is reaped, so
   * that another thread may kill(-pid, SIGKILL) it (a stopping daemon)
   * without hitting a reused pid. */
  _Atomic int *running_pid;
  /* Run as TG_TP_NOBODY when the caller has CAP_SETUID and CAP_SETGID
   * (root, or the collector's check runner); the program must then be
   * readable by that user, every directory above it too. A caller without
   * them keeps its uid (it cannot change it): the sandbox alone keeps the
   * child from its files, and the verdict's uid_kept says so. The caller
   * kills the child by taking that uid for the kill alone (this thread's
   * credentials, a raw system call), so it needs no CAP_KILL. */
  bool as_nobody;
  /* A descriptor above 2 (0: none) whose readability or hang-up ends the
   * import at once: the group is killed and the verdict is TG_TP_NOT_RUN
   * (the collector's check runner: its socket, when the collector stops).
   * Nothing is read from it. */
  int cancel_fd;
} tg_tp_limits_t;

#define TG_TP_NOBODY 65534

/* Imports |trace| (a regular file the caller can read) into |tp| (a path,
 * or a name looked up on PATH). Always fills *v; a trace that is not a
 * readable regular file, a program not found and a sandbox that cannot be
 * made are TG_TP_NOT_RUN. */
void tg_tp_import(const char *tp, const char *trace, const tg_tp_limits_t *lim,
                  tg_tp_verdict_t *v);
/* The same for a trace already open: |trace_fd| (borrowed; a regular
 * file, read from offset 0 with pread, its offset untouched), |name| for
 * the verdict's words only. */
void tg_tp_import_fd(const char *tp, int trace_fd, const char *name,
                     const tg_tp_limits_t *lim, tg_tp_verdict_t *v);

/* The line of trace processor's standard error (|n| bytes) that says why,
 * printable, into |why| (|cap| > 0). Exposed for its test. */
void tg_tp_why_of(const char *err, size_t n, char *why, size_t cap);

#endif /* TRACEGATE_COMMON_TP_IMPORT_H */
