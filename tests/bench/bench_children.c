/* Children and temporary files of a bench; see bench_children.h. */
#include "bench_children.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TG_CERTS_TOOL
#error "TG_CERTS_TOOL must name deploy/certs/tg-certs"
#endif

#define MAX_CHILDREN 512
#define MAX_DIRS 200 /* bench_collector: a service directory per 8 hosts */

/* Read by the signal handler: plain stores of whole pids are enough there
 * (it only sends signals). */
static volatile pid_t g_pids[MAX_CHILDREN];
static char g_dirs[MAX_DIRS][128];
static size_t g_ndirs;
/* "rm -rf DIR...", kept ready for the signal handler (no allocation
 * there). */
static char *g_rm_argv[MAX_DIRS + 4] = {"/bin/rm", "-rf", "--"};

double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void remember(pid_t pid) {
  for (size_t i = 0; i < MAX_CHILDREN; i++)
    if (g_pids[i] == 0) {
      g_pids[i] = pid;
      return;
    }
  /* Out of slots: the parent-death signal still covers it. */
}

static void forget(pid_t pid) {
  for (size_t i = 0; i < MAX_CHILDREN; i++)
    if (g_pids[i] == pid) g_pids[i] = 0;
}

/* Only async-signal-safe calls: write, kill, fork, execv, waitpid, raise. */
static void on_fatal_signal(int sig) {
  if (sig == SIGALRM) {
    static const char msg[] = "bench: over its time budget; stopping\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)w;
  }
  for (size_t i = 0; i < MAX_CHILDREN; i++)
    if (g_pids[i] > 0) kill(g_pids[i], SIGKILL);
  if (g_ndirs > 0) {
    pid_t pid = fork();
    if (pid == 0) {
      execv(g_rm_argv[0], g_rm_argv);
      _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void at_exit(void) {
  bench_stop_all(5000);
  for (size_t i = 0; i < g_ndirs; i++) {
    char cmd[sizeof(g_dirs[0]) + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%.127s'", g_dirs[i]);
    if (system(cmd) != 0)
      fprintf(stderr, "bench: cannot remove %s\n", g_dirs[i]);
  }
  g_ndirs = 0;
  g_rm_argv[3] = NULL;
}

void bench_children_init(void) {
  atexit(at_exit);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fatal_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

void bench_deadline(unsigned seconds) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_fatal_signal;
  sigaction(SIGALRM, &sa, NULL);
  alarm(seconds);
}

pid_t bench_spawn(const char *const argv[], int keep_fd, const char *log_path) {
  int flags = O_WRONLY | O_CLOEXEC | (log_path ? O_CREAT | O_APPEND : 0);
  int out = open(log_path ? log_path : "/dev/null", flags, 0600);
  if (out < 0) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    /* A crashed bench must not leave its children behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    signal(SIGPIPE, SIG_DFL);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(out);
  if (pid > 0) remember(pid);
  return pid;
}

void bench_adopt(pid_t pid) {
  if (pid > 0) remember(pid);
}

/* Waits for |pid| until |deadline_ms| (bench_now_ms), then SIGKILLs it.
 * |cpu_s| (or NULL): its CPU time with the children it reaped. */
static int reap(pid_t pid, double deadline_ms, double *cpu_s) {
  int status = -1;
  int pidfd = pidfd_open(pid, 0);
  bool killed = false;
  double left = deadline_ms - bench_now_ms();
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  if (pidfd < 0 || left <= 0 || poll(&p, 1, (int)left) != 1) {
    kill(pid, SIGKILL);
    killed = true;
  }
  if (pidfd >= 0) close(pidfd);
  struct rusage ru;
  memset(&ru, 0, sizeof(ru));
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  if (cpu_s)
    *cpu_s = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  forget(pid);
  return killed ? -1 : status;
}

int bench_stop(pid_t pid, int timeout_ms) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  return reap(pid, bench_now_ms() + timeout_ms, NULL);
}

int bench_stop_cpu(pid_t pid, int timeout_ms, double *cpu_s) {
  *cpu_s = 0;
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  return reap(pid, bench_now_ms() + timeout_ms, cpu_s);
}

int bench_wait_cpu(pid_t pid, int timeout_ms, double *cpu_s) {
  *cpu_s = 0;
  if (pid <= 0) return -1;
  return reap(pid, bench_now_ms() + timeout_ms, cpu_s);
}

void bench_stop_all(int timeout_ms) {
  for (size_t i = 0; i < MAX_CHILDREN; i++)
    if (g_pids[i] > 0) kill(g_pids[i], SIGTERM);
  double deadline = bench_now_ms() + timeout_ms;
  for (size_t i = 0; i < MAX_CHILDREN; i++)
    if (g_pids[i] > 0) reap(g_pids[i], deadline, NULL);
}

int bench_read_ready(int fd, int timeout_ms, char *buf, size_t len) {
  size_t got = 0;
  double deadline = bench_now_ms() + timeout_ms;
  buf[0] = 0;
  while (got + 1 < len && !memchr(buf, '\n', got)) {
    double left = deadline - bench_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)left) != 1) break;
    ssize_t r = read(fd, buf + got, len - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
    buf[got] = 0;
  }
  return strncmp(buf, "ready", 5) == 0 ? 0 : -1;
}

double bench_proc_cpu_s(pid_t pid) {
  char path[64], buf[1024];
  if (pid > 0) snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  else snprintf(path, sizeof(path), "/proc/self/stat");
  FILE *f = fopen(path, "re");
  double cpu = 0;
  if (!f) return 0;
  if (fgets(buf, sizeof(buf), f)) {
    char *p = strrchr(buf, ')'); /* the name may hold spaces */
    unsigned long ut = 0, st = 0;
    if (p && sscanf(p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                    &ut, &st) == 2)
      cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
  }
  fclose(f);
  return cpu;
}

long bench_proc_status_kb(pid_t pid, const char *field) {
  char path[64], buf[256];
  if (pid > 0) snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  else snprintf(path, sizeof(path), "/proc/self/status");
  FILE *f = fopen(path, "re");
  long kb = -1;
  size_t n = strlen(field);
  while (f && fgets(buf, sizeof(buf), f))
    if (!strncmp(buf, field, n) && buf[n] == ':')
      kb = strtol(buf + n + 1, NULL, 10);
  if (f) fclose(f);
  return kb;
}

void bench_machine_ticks(uint64_t *idle, uint64_t *total) {
  unsigned long long v[8] = {0};
  *idle = *total = 0;
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return;
  /* cpu user nice system idle iowait irq softirq steal */
  if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
             &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
    *idle = v[3] + v[4];
    for (int i = 0; i < 8; i++) *total += v[i];
  }
  fclose(f);
}

void bench_remove_at_exit(const char *dir) {
  if (g_ndirs >= MAX_DIRS || dir[0] != '/' || strlen(dir) >= sizeof(g_dirs[0]))
    return;
  snprintf(g_dirs[g_ndirs], sizeof(g_dirs[0]), "%s", dir);
  g_rm_argv[3 + g_ndirs] = g_dirs[g_ndirs];
  g_ndirs++;
}

int bench_tempdir(char *dir, size_t len, const char *tag) {
  snprintf(dir, len, "/tmp/tg-bench-%s-XXXXXX", tag);
  if (!mkdtemp(dir)) return -1;
  bench_remove_at_exit(dir);
  return 0;
}

int bench_certs(const char *dir, const char *host, const char *client) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd),
           "cd '%s' && T='%s' && sh \"$T\" ca pki && "
           "sh \"$T\" host pki '%s' && "
           "sh \"$T\" client pki '%s' --role record",
           dir, TG_CERTS_TOOL, host, client);
  /* Quiet unless it fails: then run it again to show why. */
  char quiet[sizeof(cmd) + 32];
  snprintf(quiet, sizeof(quiet), "(%s) >/dev/null 2>&1", cmd);
  if (system(quiet) == 0) return 0;
  if (system(cmd) != 0) fprintf(stderr, "bench: tg-certs failed in %s\n", dir);
  return -1;
}

