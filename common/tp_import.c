/* One import into trace processor under limits: see tp_import.h. */
#include "common/tp_import.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/printable.h"
#include "common/sandbox.h"

/* What is kept of trace processor's standard error: its error comes after
 * the progress lines, and a longer output is a crash's dump. */
#define STDERR_KEEP (64u << 10)
#define LINE_MAX_ 400
/* The child's own word that exec failed, on its standard error. */
#define EXEC_FAILED "tracegate: exec of the trace processor failed\n"
#define SANDBOX_FAILED "tracegate: the trace processor's sandbox failed\n"

const char *tg_tp_failure_name(tg_tp_failure_t f) {
  switch (f) {
    case TG_TP_OK: return "ok";
    case TG_TP_ERROR: return "error";
    case TG_TP_CRASH: return "crash";
    case TG_TP_TIMEOUT: return "timeout";
    case TG_TP_MEMORY: return "memory";
    case TG_TP_NOT_RUN: return "not_run";
  }
  return "?";
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The refusal ("Could not read trace file (path: P): WHY": WHY alone), a
 * failed check or an uncaught exception, else the last line that is not
 * progress. */
void tg_tp_why_of(const char *err, size_t n, char *why, size_t cap) {
  const char *best = NULL, *last = NULL;
  size_t best_n = 0, last_n = 0;
  int best_rank = 0;
  for (size_t at = 0; at < n;) {
    size_t end = at;
    while (end < n && err[end] != '\n' && err[end] != '\r') end++;
    const char *l = err + at;
    size_t ln = end - at;
    at = end + 1;
    while (ln > 0 && (l[ln - 1] == ' ' || l[ln - 1] == '\t')) ln--;
    if (!ln) continue;
    static const char loading[] = "Loading trace";
    /* Progress ("Loading trace: 1.00 MB") may share a line with the
     * error that follows it: what comes after the figure is kept. */
    if (ln >= sizeof(loading) - 1 && !memcmp(l, loading, sizeof(loading) - 1)) {
      const char *mb = memmem(l, ln, " MB", 3);
      if (!mb) continue;
      size_t skip = (size_t)(mb + 3 - l);
      l += skip;
      ln -= skip;
      if (!ln) continue;
    }
    last = l;
    last_n = ln;
    int rank = 0;
    static const char refused[] = "Could not read trace file";
    const char *r = memmem(l, ln, refused, sizeof(refused) - 1);
    if (r) {
      rank = 3;
      const char *colon = memmem(r, ln - (size_t)(r - l), "): ", 3);
      if (colon) {
        ln -= (size_t)(colon + 3 - l);
        l = colon + 3;
      }
    } else if (memmem(l, ln, "Check failed", 12) ||
               memmem(l, ln, "terminate called", 16) ||
               memmem(l, ln, "stack smashing", 14) ||
               memmem(l, ln, "FATAL", 5)) {
      rank = 2;
    }
    if (rank > best_rank) {
      best = l;
      best_n = ln;
      best_rank = rank;
    }
  }
  if (!best) {
    best = last;
    best_n = last_n;
  }
  char raw[LINE_MAX_];
  if (best_n >= sizeof(raw)) best_n = sizeof(raw) - 1;
  if (best) memcpy(raw, best, best_n);
  raw[best ? best_n : 0] = 0;
  tg_printable(why, cap, raw[0] ? raw : "no reason given");
}

static bool said_out_of_memory(const char *err, size_t n) {
  return memmem(err, n, "bad_alloc", 9) ||
         memmem(err, n, "Cannot allocate memory", 22) ||
         memmem(err, n, "out of memory", 13);
}

/* The trace as trace processor opens it: the read end of a pipe the
 * feeder fills, at this descriptor. */
#define TRACE_FD 3
#define TRACE_PATH "/proc/self/fd/3"
/* All the child's environment: no secret the caller holds (S3 keys come
 * from the environment) reaches it. */
static char *const child_env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", NULL};

static void child_fail(void) {
  ssize_t w = write(STDERR_FILENO, SANDBOX_FAILED, sizeof(SANDBOX_FAILED) - 1);
  (void)w;
  _exit(127);
}

/* In the child: async-signal-safe calls only, then exec. |parent| is the
 * caller, whose death kills the child (after a uid switch nothing else
 * could). */
static void exec_tp(const char *tp, char *const argv[], const tg_tp_limits_t *lim,
                    bool drop_uid, const tg_sandbox_t *sb, int err_fd,
                    int null_fd, int trace_fd, pid_t parent) {
  setpgid(0, 0);
  /* What a caller ignores (the collector's check runner) is the
   * program's default again; an exec keeps SIG_IGN. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, NULL);
  sigaction(SIGTERM, &dfl, NULL);
  sigaction(SIGHUP, &dfl, NULL);
  struct rlimit core = {0, 0};
  setrlimit(RLIMIT_CORE, &core);
  if (lim->memory) {
    struct rlimit as = {(rlim_t)lim->memory, (rlim_t)lim->memory};
    setrlimit(RLIMIT_AS, &as);
  }
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
  }
  dup2(err_fd, STDERR_FILENO);
  /* dup2 leaves the copy without FD_CLOEXEC: it crosses the exec. */
  if (dup2(trace_fd, TRACE_FD) != TRACE_FD) _exit(127);
  /* Raw calls: this thread is the process's only one, and libc's set*id
   * wrappers are not async-signal-safe. */
  if (drop_uid &&
      (syscall(SYS_setgroups, 0, NULL) != 0 ||
       syscall(SYS_setresgid, TG_TP_NOBODY, TG_TP_NOBODY, TG_TP_NOBODY) != 0 ||
       syscall(SYS_setresuid, TG_TP_NOBODY, TG_TP_NOBODY, TG_TP_NOBODY) != 0))
    child_fail();
  /* Set after the uid switch, which clears it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
    child_fail();
  /* No capability crosses the exec: a switch between two uids that are
   * not 0 keeps the permitted set, and ambient ones survive an exec
   * (EINVAL: a kernel without ambient capabilities has none to clear). */
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
      errno != EINVAL)
    child_fail();
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct none[2];
  memset(none, 0, sizeof(none));
  if (syscall(SYS_capset, &hdr, none) != 0) child_fail();
  if (tg_sandbox_enter(sb, NULL) != 0) child_fail();
  execve(tp, argv, child_env);
  ssize_t w = write(STDERR_FILENO, EXEC_FAILED, sizeof(EXEC_FAILED) - 1);
  (void)w;
  _exit(127);
}

/* The feeder: copies the trace into the pipe, then ends; a reader gone
 * (SIGPIPE, EPIPE) ends it too. pread: the caller's descriptor may share
 * its offset with another process's (one passed by SCM_RIGHTS).
 * Async-signal-safe. */
static void feed(pid_t group, int in, int out) {
  setpgid(0, group);
  static char buf[64u << 10];
  for (off_t at = 0;;) {
    ssize_t got = pread(in, buf, sizeof(buf), at);
    if (got > 0) at += got;
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) _exit(got == 0 ? 0 : 1);
    for (ssize_t off = 0; off < got;) {
      ssize_t w = write(out, buf + off, (size_t)(got - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) _exit(1);
      off += w;
    }
  }
}

/* Whether this thread may change its uid and gid (CAP_SETUID and
 * CAP_SETGID effective). */
static bool may_switch_uid(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof(d));
  if (syscall(SYS_capget, &hdr, d) != 0) return false;
  uint32_t want = (1u << CAP_SETUID) | (1u << CAP_SETGID);
  return (d[0].effective & want) == want;
}

/* SIGKILL to group |pid|. With |as_child|, first as TG_TP_NOBODY (the
 * child's uid: this thread's effective uid for the kill alone, by raw
 * system calls, so that no other thread's changes), then as the caller
 * (the feeder keeps the caller's uid). */
static void kill_group(pid_t pid, bool as_child, bool leader_too) {
  uid_t self = geteuid();
  if (as_child && syscall(SYS_setresuid, -1, TG_TP_NOBODY, -1) == 0) {
    kill(-pid, SIGKILL);
    if (leader_too) kill(pid, SIGKILL);
    /* Back to a uid this thread holds as its real or saved one. */
    if (syscall(SYS_setresuid, -1, self, -1) != 0) abort();
  }
  kill(-pid, SIGKILL);
  if (leader_too) kill(pid, SIGKILL);
}

static void not_run(tg_tp_verdict_t *v, const char *what, const char *tp,
                    int err) {
  char raw[LINE_MAX_];
  snprintf(raw, sizeof(raw), "cannot run %s: %s: %s", tp, what, strerror(err));
  v->failure = TG_TP_NOT_RUN;
  tg_printable(v->why, sizeof(v->why), raw);
}

/* |tp| as an absolute path without links into |out|: a name is looked up
 * on PATH first. The child runs it by this path, so that it needs to
 * reach no directory the caller's path went through (a checkout under a
 * directory only the caller may enter) and Landlock can allow its
 * directory. Returns 0 or -errno. */
static int resolve_tp(const char *tp, char *out) {
  if (strchr(tp, '/')) return realpath(tp, out) ? 0 : -errno;
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    char cand[PATH_MAX];
    if (n > 0 && n + 1 + strlen(tp) < sizeof(cand)) {
      memcpy(cand, path, n);
      cand[n] = '/';
      strcpy(cand + n + 1, tp);
      if (access(cand, X_OK) == 0 && realpath(cand, out)) return 0;
    }
    path += n;
    if (*path == ':') path++;
  }
  return -ENOENT;
}

/* What the child may read and run: the system's libraries and programs
 * (a stand-in or a wrapper may be a script) and trace processor's own
 * directory; nothing else (the caller's keys, its store, other hosts'
 * files). No file system write anywhere, no socket, no signal or ptrace
 * outside itself (docs/security.md, "The snapshot check"). */
static int prepare_sandbox(tg_sandbox_t *sb, const char *tp_dir) {
  const char *const read_beneath[] = {
      tp_dir, "/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
      "/dev/null", "/dev/urandom", NULL};
  static const uint32_t deny[] = {
      SYS_socket,          SYS_socketpair, SYS_ptrace, SYS_process_vm_readv,
      SYS_process_vm_writev, SYS_kcmp,
#ifdef SYS_pidfd_getfd
      SYS_pidfd_getfd,
#endif
  };
  const tg_sandbox_spec_t spec = {.landlock = true,
                                  .read_beneath = read_beneath,
                                  .scope_signals = true,
                                  .deny = deny,
                                  .n_deny = sizeof(deny) / sizeof(deny[0])};
  return tg_sandbox_prepare(sb, &spec);
}

void tg_tp_import(const char *tp_arg, const char *trace, const tg_tp_limits_t *lim,
                  tg_tp_verdict_t *v) {
  /* Opened here, as the caller: the child reads it through the feeder's
   * pipe and needs no access to the file or its directory. */
  int trace_fd = open(trace, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (trace_fd < 0) {
    memset(v, 0, sizeof(*v));
    v->uid = -1;
    not_run(v, "the trace is not a readable regular file", trace, errno);
    return;
  }
  tg_tp_import_fd(tp_arg, trace_fd, trace, lim, v);
  close(trace_fd);
}

/* Until the child ends, the deadline passes or |lim|'s cancel_fd wakes:
 * its standard error (from |p|) into |err| (|*n| bytes kept). Returns 0
 * (ended), 1 (deadline), 2 (cancelled). */
static int wait_child(pid_t pid, int p, const tg_tp_limits_t *lim, char *err,
                      size_t *n) {
  uint64_t deadline = now_ms() + lim->timeout_ms;
  bool open_ = true;
  for (;;) {
    uint64_t t = now_ms();
    if (t >= deadline) return 1;
    struct pollfd pf[2] = {{open_ ? p : -1, POLLIN, 0},
                           {lim->cancel_fd > 0 ? lim->cancel_fd : -1, POLLIN, 0}};
    uint64_t left = deadline - t;
    /* Once its standard error is closed, a short nap between looks. */
    int ready = poll(pf, 2, open_ ? (left > 200 ? 200 : (int)left)
                                  : (left > 20 ? 20 : (int)left));
    if (ready > 0 && pf[1].revents) return 2;
    if (ready > 0 && pf[0].revents) {
      char buf[4096];
      ssize_t got = read(p, buf, sizeof(buf));
      if (got > 0) {
        size_t keep = STDERR_KEEP - *n < (size_t)got ? STDERR_KEEP - *n
                                                     : (size_t)got;
        memcpy(err + *n, buf, keep);
        *n += keep;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        open_ = false;
      }
    }
    /* Exited, not reaped (WNOWAIT): the pid stays ours until the end. */
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == pid)
      break;
  }
  /* What it wrote before it ended, still in the pipe. */
  while (open_ && *n < STDERR_KEEP) {
    struct pollfd pf = {p, POLLIN, 0};
    if (poll(&pf, 1, 0) <= 0) break;
    ssize_t got = read(p, err + *n, STDERR_KEEP - *n);
    if (got <= 0) break;
    *n += (size_t)got;
  }
  return 0;
}

void tg_tp_import_fd(const char *tp_arg, int trace_fd, const char *name,
                     const tg_tp_limits_t *lim, tg_tp_verdict_t *v) {
  memset(v, 0, sizeof(*v));
  v->uid = -1;
  char tp[PATH_MAX];
  int rv = resolve_tp(tp_arg, tp);
  if (rv < 0) {
    not_run(v, "not found", tp_arg, -rv);
    return;
  }
  if (access(tp, X_OK) != 0) {
    not_run(v, "not an executable", tp_arg, errno);
    return;
  }
  struct stat st;
  if (fstat(trace_fd, &st) != 0) {
    not_run(v, "the trace is not a readable regular file", name, errno);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    not_run(v, "the trace is not a readable regular file", name, EINVAL);
    return;
  }
  char tp_dir[PATH_MAX];
  snprintf(tp_dir, sizeof(tp_dir), "%s", tp);
  *strrchr(tp_dir, '/') = 0;
  if (!tp_dir[0]) snprintf(tp_dir, sizeof(tp_dir), "/");
  tg_sandbox_t sb;
  if ((rv = prepare_sandbox(&sb, tp_dir)) < 0) {
    not_run(v, "sandbox", tp_arg, -rv);
    return;
  }
  char *err = malloc(STDERR_KEEP);
  int p[2], data[2] = {-1, -1};
  if (!err) {
    not_run(v, "out of memory", tp_arg, ENOMEM);
    goto out;
  }
  if (pipe2(p, O_CLOEXEC) < 0) {
    not_run(v, "pipe", tp_arg, errno);
    free(err);
    goto out;
  }
  bool drop_uid = lim->as_nobody && may_switch_uid();
  v->uid_kept = lim->as_nobody && !drop_uid;
  /* The child reopens the pipe by its /proc path: after a uid switch it
   * is no longer the pipe's owner, so others may read it. Only a process
   * that may look into this one's (or the child's) descriptors reaches it
   * that way. */
  if (pipe2(data, O_CLOEXEC) < 0 ||
      (drop_uid && fchmod(data[0], 0644) != 0)) {
    not_run(v, "pipe", tp_arg, errno);
    free(err);
    close(p[0]);
    close(p[1]);
    if (data[0] >= 0) {
      close(data[0]);
      close(data[1]);
    }
    goto out;
  }
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  char *const argv[] = {tp, "-Q", "select 1", TRACE_PATH, NULL};
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid == 0)
    exec_tp(tp, argv, lim, drop_uid, &sb, p[1], null_fd, data[0], self);
  int fork_err = errno;
  close(p[1]);
  close(data[0]);
  if (null_fd >= 0) close(null_fd);
  pid_t feeder = -1;
  if (pid > 0) {
    setpgid(pid, pid); /* before the feeder joins the group */
    feeder = fork();
    if (feeder == 0) feed(pid, trace_fd, data[1]);
  }
  close(data[1]);
  if (pid < 0) {
    close(p[0]);
    not_run(v, "fork", tp_arg, fork_err);
    free(err);
    goto out;
  }
  v->uid = drop_uid ? TG_TP_NOBODY : (int64_t)geteuid();
  if (feeder > 0) setpgid(feeder, pid);
  setpgid(pid, pid); /* also the child's: whichever runs first */
  if (lim->running_pid) atomic_store(lim->running_pid, (int)pid);
  size_t n = 0;
  int ended = wait_child(pid, p[0], lim, err, &n);
  /* The group: whatever it started goes with it. */
  kill_group(pid, drop_uid, ended != 0);
  if (lim->running_pid) atomic_store(lim->running_pid, 0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  /* The feeder ends with its reader, or was killed with the group. */
  if (feeder > 0) {
    kill(feeder, SIGKILL);
    while (waitpid(feeder, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  close(p[0]);
  char line[LINE_MAX_], raw[TG_TP_WHY_MAX];
  if (ended == 2) {
    not_run(v, "cancelled", tp_arg, ECANCELED);
  } else if (ended == 1) {
    v->failure = TG_TP_TIMEOUT;
    snprintf(v->why, sizeof(v->why), "no end within %" PRIu64 " ms: killed",
             lim->timeout_ms);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    v->failure = TG_TP_OK;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
             memmem(err, n, EXEC_FAILED, sizeof(EXEC_FAILED) - 1)) {
    not_run(v, drop_uid ? "exec failed (as uid 65534: can it read the "
                                "program and every directory above it?)"
                              : "exec failed",
            tp_arg, EACCES);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
             memmem(err, n, SANDBOX_FAILED, sizeof(SANDBOX_FAILED) - 1)) {
    not_run(v, "its sandbox could not be entered", tp_arg, EPERM);
  } else {
    tg_tp_why_of(err, n, line, sizeof(line));
    if (said_out_of_memory(err, n)) {
      v->failure = TG_TP_MEMORY;
      snprintf(raw, sizeof(raw), "out of memory (%" PRIu64 " MiB): %s",
               lim->memory >> 20, line);
    } else if (WIFSIGNALED(status)) {
      v->failure = TG_TP_CRASH;
      snprintf(raw, sizeof(raw), "killed by signal %d (%s): %s",
               WTERMSIG(status), strsignal(WTERMSIG(status)), line);
    } else {
      v->failure = TG_TP_ERROR;
      snprintf(raw, sizeof(raw), "%s", line);
    }
    tg_printable(v->why, sizeof(v->why), raw);
  }
  free(err);
out:
  tg_sandbox_release(&sb);
}
