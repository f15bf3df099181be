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
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/printable.h"

/* What is kept of trace processor's standard error: its error comes after
 * the progress lines, and a longer output is a crash's dump. */
#define STDERR_KEEP (64u << 10)
#define LINE_MAX_ 400
/* The child's own word that exec failed, on its standard error. */
#define EXEC_FAILED "tracegate: exec of the trace processor failed\n"

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

/* In the child: async-signal-safe calls only, then exec. */
static void exec_tp(const char *tp, char *const argv[], uint64_t memory,
                    int err_fd, int null_fd) {
  setpgid(0, 0);
  struct rlimit core = {0, 0};
  setrlimit(RLIMIT_CORE, &core);
  if (memory) {
    struct rlimit as = {(rlim_t)memory, (rlim_t)memory};
    setrlimit(RLIMIT_AS, &as);
  }
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
  }
  dup2(err_fd, STDERR_FILENO);
  if (strchr(tp, '/'))
    execv(tp, argv);
  else
    execvp(tp, argv);
  ssize_t w = write(STDERR_FILENO, EXEC_FAILED, sizeof(EXEC_FAILED) - 1);
  (void)w;
  _exit(127);
}

static void not_run(tg_tp_verdict_t *v, const char *what, const char *tp,
                    int err) {
  char raw[LINE_MAX_];
  snprintf(raw, sizeof(raw), "cannot run %s: %s: %s", tp, what, strerror(err));
  v->failure = TG_TP_NOT_RUN;
  tg_printable(v->why, sizeof(v->why), raw);
}

void tg_tp_import(const char *tp, const char *trace, const tg_tp_limits_t *lim,
                  tg_tp_verdict_t *v) {
  memset(v, 0, sizeof(*v));
  if (strchr(tp, '/') && access(tp, X_OK) != 0) {
    not_run(v, "not an executable", tp, errno);
    return;
  }
  char *err = malloc(STDERR_KEEP);
  int p[2];
  if (!err) {
    not_run(v, "out of memory", tp, ENOMEM);
    return;
  }
  if (pipe2(p, O_CLOEXEC) < 0) {
    not_run(v, "pipe", tp, errno);
    free(err);
    return;
  }
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  char *const argv[] = {(char *)tp, "-Q", "select 1", (char *)trace, NULL};
  pid_t pid = fork();
  if (pid == 0) exec_tp(tp, argv, lim->memory, p[1], null_fd);
  int fork_err = errno;
  close(p[1]);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    close(p[0]);
    not_run(v, "fork", tp, fork_err);
    free(err);
    return;
  }
  setpgid(pid, pid); /* also the child's: whichever runs first */
  if (lim->running_pid) atomic_store(lim->running_pid, (int)pid);
  size_t n = 0;
  uint64_t deadline = now_ms() + lim->timeout_ms;
  bool timed_out = false, open_ = true;
  int status = 0;
  for (;;) {
    uint64_t t = now_ms();
    if (t >= deadline) {
      timed_out = true;
      break;
    }
    if (open_) {
      struct pollfd pf = {p[0], POLLIN, 0};
      uint64_t left = deadline - t;
      int rv = poll(&pf, 1, left > 200 ? 200 : (int)left);
      if (rv > 0) {
        char buf[4096];
        ssize_t got = read(p[0], buf, sizeof(buf));
        if (got > 0) {
          size_t keep = STDERR_KEEP - n < (size_t)got ? STDERR_KEEP - n
                                                      : (size_t)got;
          memcpy(err + n, buf, keep);
          n += keep;
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          open_ = false;
        }
      }
    } else {
      struct timespec nap = {0, 20 * 1000000L};
      nanosleep(&nap, NULL);
    }
    /* Exited, not reaped (WNOWAIT): the pid stays ours until the end. */
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == pid)
      break;
  }
  /* What it wrote before it ended, still in the pipe. */
  while (!timed_out && open_ && n < STDERR_KEEP) {
    struct pollfd pf = {p[0], POLLIN, 0};
    if (poll(&pf, 1, 0) <= 0) break;
    ssize_t got = read(p[0], err + n, STDERR_KEEP - n);
    if (got <= 0) break;
    n += (size_t)got;
  }
  /* The group: whatever it started goes with it. */
  kill(-pid, SIGKILL);
  if (timed_out) kill(pid, SIGKILL);
  if (lim->running_pid) atomic_store(lim->running_pid, 0);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  close(p[0]);
  char line[LINE_MAX_], raw[TG_TP_WHY_MAX];
  if (timed_out) {
    v->failure = TG_TP_TIMEOUT;
    snprintf(v->why, sizeof(v->why), "no end within %" PRIu64 " ms: killed",
             lim->timeout_ms);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    v->failure = TG_TP_OK;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127 &&
             memmem(err, n, EXEC_FAILED, sizeof(EXEC_FAILED) - 1)) {
    not_run(v, "exec failed", tp, ENOENT);
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
}
