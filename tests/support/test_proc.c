/* Children, clocks, temporary directories, certificates (test_proc.h). */
#include "test_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TG_CERTS_TOOL
#error "TG_CERTS_TOOL must name deploy/certs/tg-certs"
#endif

/* What tg_test_mkdtemp names its directories: the only ones the other user
 * is let into (tg_test_other_user_dir). */
#define MKDTEMP_PREFIX "/tmp/tg-test-"

int64_t tg_test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child: puts |fd| (or /dev/null) at |target|. */
static void place_fd(int fd, int target) {
  if (fd == TG_TEST_FD_INHERIT) return;
  if (fd == TG_TEST_FD_DEVNULL) {
    fd = open("/dev/null", O_RDWR);
    if (fd < 0) _exit(127);
  }
  if (fd != target && dup2(fd, target) < 0) _exit(127);
  if (fd == target) fcntl(fd, F_SETFD, 0);
}

/* The children tg_test_spawn() started that tg_test_reap() has not reaped
 * yet, each with a pidfd opened at the fork: a pidfd names that process
 * and no other, so tg_test_children_teardown() never signals a pid that
 * was reaped elsewhere and reused. Used from the test's thread only. */
typedef struct live_child {
  pid_t pid;
  int pidfd; /* -1: pidfd_open() failed; the pid is still tracked */
} live_child_t;

static live_child_t g_live[256];
static size_t g_n_live;

static void live_add(pid_t pid) {
  if (g_n_live == sizeof(g_live) / sizeof(g_live[0])) {
    fprintf(stderr, "test_proc: more than %zu children at once; pid %d is "
            "not tracked for the teardown\n", g_n_live, (int)pid);
    return;
  }
  g_live[g_n_live].pid = pid;
  g_live[g_n_live].pidfd = pidfd_open(pid, 0);
  g_n_live++;
}

/* Forgets |pid|; returns its pidfd (the caller's to close), or -1. */
static int live_take(pid_t pid) {
  for (size_t i = 0; i < g_n_live; i++) {
    if (g_live[i].pid != pid) continue;
    int fd = g_live[i].pidfd;
    g_live[i] = g_live[--g_n_live];
    return fd;
  }
  return -1;
}

pid_t tg_test_spawn(const tg_test_spawn_t *s) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -errno;
  if (pid > 0) {
    live_add(pid);
    return pid;
  }
  /* A test that crashes must not leave its children behind. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  place_fd(s->stdin_fd, STDIN_FILENO);
  place_fd(s->stdout_fd, STDOUT_FILENO);
  place_fd(s->stderr_fd, STDERR_FILENO);
  /* Nothing else of the test's goes along: a socket another thread of
   * the test holds (a proxy's) would stay open in the child after the
   * test closed it, and its peer would never see the close. */
  close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
  if (s->keep_fd >= 0) fcntl(s->keep_fd, F_SETFD, 0);
  if (s->default_sigint) signal(SIGINT, SIG_DFL);
  execv(s->path, (char *const *)s->argv);
  _exit(127);
}

pid_t tg_test_spawn_cli(const char *path, const char *const *args, int out_fd,
                        int err_fd) {
  const char *argv[48] = {"tracegate"};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    if (n >= 47) return -E2BIG;
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = path;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = out_fd;
  s.stderr_fd = err_fd;
  s.default_sigint = true;
  return tg_test_spawn(&s);
}

int tg_test_reap(pid_t pid, int timeout_ms) {
  int pidfd = live_take(pid);
  if (pidfd < 0) pidfd = pidfd_open(pid, 0);
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  bool killed = false;
  if (pidfd < 0) {
    kill(pid, SIGKILL);
    killed = true;
  } else {
    int64_t deadline = tg_test_now_ms() + timeout_ms;
    int rv;
    do {
      int64_t left = deadline - tg_test_now_ms();
      rv = poll(&p, 1, left > 0 ? (int)left : 0);
    } while (rv < 0 && errno == EINTR);
    if (rv != 1) {
      kill(pid, SIGKILL);
      killed = true;
    }
    close(pidfd);
  }
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return killed ? -1 : status;
}

int tg_test_stop(pid_t pid, int sig, int timeout_ms) {
  kill(pid, sig);
  return tg_test_reap(pid, timeout_ms);
}

int tg_test_children_teardown(void **state) {
  (void)state;
  size_t left = g_n_live;
  while (g_n_live > 0) {
    live_child_t c = g_live[--g_n_live];
    if (c.pidfd < 0) {
      /* Untracked by fd: only a child of ours still unreaped is touched. */
      siginfo_t si = {0};
      if (waitid(P_PID, (id_t)c.pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        continue;
      kill(c.pid, SIGKILL);
      while (waitpid(c.pid, NULL, 0) < 0 && errno == EINTR) {
      }
      continue;
    }
    pidfd_send_signal(c.pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    while (waitid(P_PIDFD, (id_t)c.pidfd, &si, WEXITED) < 0 && errno == EINTR) {
    }
    close(c.pidfd);
  }
  if (left == 0) return 0;
  fprintf(stderr, "test_proc: the test left %zu children running: killed and "
          "reaped\n", left);
  return -1;
}

int tg_test_exit_code(int status) {
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int tg_test_mkdtemp(char *out, size_t cap, const char *tag) {
  int n = snprintf(out, cap, MKDTEMP_PREFIX "%s-XXXXXX", tag);
  if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
  return mkdtemp(out) ? 0 : -errno;
}

static int rm_rf_err;

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  if (remove(path) != 0 && rm_rf_err == 0) rm_rf_err = -errno;
  return 0;
}

int tg_test_rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -errno;
  rm_rf_err = 0;
  /* Depth first, not following symlinks: children before their dir. */
  if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) return -errno;
  return rm_rf_err;
}

int tg_test_certs(const char *dir, const char *args) {
  char words[512];
  int n = snprintf(words, sizeof(words), "%s", args);
  if (n < 0 || (size_t)n >= sizeof(words)) return -1;
  const char *argv[32] = {"sh", TG_CERTS_TOOL};
  size_t argc = 2;
  for (char *save, *w = strtok_r(words, " ", &save); w;
       w = strtok_r(NULL, " ", &save)) {
    if (argc == 31) return -1;
    argv[argc++] = w;
  }
  argv[argc] = NULL;
  /* The tool works in the current directory: run it from |dir| through a
   * shell-free chdir in the child (fork, chdir, exec). */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent || chdir(dir) != 0) _exit(127);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    execv("/bin/sh", (char *const *)argv);
    _exit(127);
  }
  int status = tg_test_reap(pid, 60000);
  if (status != 0) {
    fprintf(stderr, "tg-certs %s: status %#x\n", args, (unsigned)status);
    return -1;
  }
  return 0;
}

int tg_test_pki(char *out, size_t cap, const char *tag) {
  if (tg_test_mkdtemp(out, cap, tag) < 0) return -1;
  if (tg_test_certs(out, "ca pki") ||
      tg_test_certs(out, "host pki relay.test") ||
      tg_test_certs(out, "client pki alice"))
    return -1;
  return 0;
}

const char *tg_test_json(const char *path, const char *key) {
  static char bufs[8][4096];
  static unsigned i;
  char *b = bufs[i++ % 8];
  return tg_test_json_get(path, key, b, sizeof(bufs[0])) == 0 ? b : NULL;
}

int tg_test_tp_answer(const char *path, const char *sql, char *out,
                      size_t cap) {
  out[0] = 0;
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "[ SKIPPED  ] trace processor's reading of %s: "
                    "PERFETTO_BIN (the directory of Perfetto's binaries) is "
                    "not set\n", path);
    return 0;
  }
  char cmd[4096], line[1024];
  snprintf(cmd, sizeof(cmd), "'%s/trace_processor_shell' -Q \"%s\" '%s' "
           "2>/dev/null", bin, sql, path);
  FILE *tp = popen(cmd, "r");
  if (!tp) {
    fprintf(stderr, "tp_answer: cannot run %s: %s\n", cmd, strerror(errno));
    return -1;
  }
  while (fgets(line, sizeof(line), tp)) snprintf(out, cap, "%s", line);
  int status = pclose(tp);
  if (status != 0) {
    fprintf(stderr, "tp_answer: %s: status %d\n", cmd, status);
    return -1;
  }
  return 1;
}

int tg_test_write_script(const char *dir, const char *name, const char *body,
                         char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
  FILE *f = fopen(out, "w");
  if (!f) return -errno;
  fprintf(f, "#!/bin/sh\n%s\n", body);
  if (fclose(f) != 0) return -errno;
  return chmod(out, 0755) == 0 ? 0 : -errno;
}

int tg_test_copy_program(const char *src, const char *dir, char *out,
                         size_t cap) {
  if (strncmp(dir, MKDTEMP_PREFIX, strlen(MKDTEMP_PREFIX)) != 0) {
    fprintf(stderr, "other user: %s is not a directory tg_test_mkdtemp "
            "made: no program is copied there\n", dir);
    return -EINVAL;
  }
  const char *base = strrchr(src, '/');
  base = base ? base + 1 : src;
  int n = snprintf(out, cap, "%s/%s", dir, base);
  if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return -errno;
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0) {
    int err = -errno;
    close(in);
    return err;
  }
  int err = 0;
  char buf[65536];
  for (;;) {
    ssize_t r = read(in, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      err = -errno;
      break;
    }
    if (r == 0) break;
    for (ssize_t off = 0; off < r;) {
      ssize_t w = write(fd, buf + off, (size_t)(r - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        err = -errno;
        break;
      }
      off += w;
    }
    if (err) break;
  }
  close(in);
  /* The umask may have taken bits from the mode open() was given. */
  if (!err && fchmod(fd, 0755) != 0) err = -errno;
  if (close(fd) != 0 && !err) err = -errno;
  if (err) unlink(out);
  return err;
}

const char *tg_test_other_user_unavailable(void) {
  static bool known;
  static const char *why;
  static char buf[160];
  if (known) return why;
  known = true;
  if (geteuid() != 0) {
    snprintf(buf, sizeof(buf), "not root (uid %u)", (unsigned)geteuid());
    return why = buf;
  }
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(buf, sizeof(buf), "fork: %s", strerror(errno));
    return why = buf;
  }
  if (pid == 0) _exit(tg_test_become_nobody() == 0 ? 0 : 1);
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    snprintf(buf, sizeof(buf), "a child could not become uid %d",
             TG_TEST_NOBODY);
    return why = buf;
  }
  return why = NULL;
}

int tg_test_other_user_dir(const char *dir, mode_t mode) {
  if (strncmp(dir, MKDTEMP_PREFIX, strlen(MKDTEMP_PREFIX)) != 0 ||
      strstr(dir, "/..") != NULL) {
    fprintf(stderr, "other user: %s is not a directory tg_test_mkdtemp "
            "made: refused\n", dir);
    return -EINVAL;
  }
  return chmod(dir, mode) == 0 ? 0 : -errno;
}

int tg_test_become_nobody(void) {
  if (setgroups(0, NULL) != 0 || setgid(TG_TEST_NOBODY) != 0 ||
      setuid(TG_TEST_NOBODY) != 0)
    return -errno;
  return 0;
}
