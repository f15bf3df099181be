/* tracegate-perf's confinement (agent/perf/perf_confine.h): a child
 * confined with it can no longer write into another process by
 * process_vm_writev, nor read another's memory or steal its descriptors;
 * it can still read what the profiler reads (another process's maps and,
 * through /proc/PID/root, its files) and connect to a UNIX socket (the
 * producer socket).
 * Each check first shows the same child could do it unconfined (as root,
 * which the test needs: else skipped, saying why), so that a pass means
 * the confinement refused it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/perf/perf_confine.h"
#include "test_proc.h"

/* What the target holds; the confined child tries to overwrite it. */
static volatile uint64_t secret = 0x1111;

/* Child exit codes: 0 all as expected; otherwise the failed step. */
enum {
  OK = 0,
  CONTROL_FAILED = 10, /* unconfined, the write did not work: no proof */
  CONFINE_FAILED,
  VM_WRITEV_ALLOWED,
  VM_READV_ALLOWED,
  READ_REFUSED,
  ROOT_REFUSED,
  CONNECT_REFUSED,
  PIDFD_GETFD_ALLOWED,
};

static int write_vm(pid_t pid, uint64_t v) {
  struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec remote = {.iov_base = (void *)&secret, .iov_len = sizeof(v)};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == sizeof(v)
             ? 0
             : -errno;
}

/* The confined child's work: |target| is a sibling process, |dir| a
 * directory it may read, |sock| a listening UNIX socket. */
static int confined_child(pid_t target, const char *dir, const char *sock) {
  /* Control: unconfined, root can. */
  if (write_vm(target, 0x2222) != 0)
    return CONTROL_FAILED;
  tg_perf_confine_t c;
  if (tg_perf_confine(&c) != 0 || !c.seccomp) return CONFINE_FAILED;
  if (write_vm(target, 0x3333) != -EPERM) return VM_WRITEV_ALLOWED;
  uint64_t v = 0;
  struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec remote = {.iov_base = (void *)&secret, .iov_len = sizeof(v)};
  if (process_vm_readv(target, &local, 1, &remote, 1, 0) >= 0 ||
      errno != EPERM)
    return VM_READV_ALLOWED;
#ifdef SYS_pidfd_getfd
  long pfd = syscall(SYS_pidfd_open, target, 0);
  if (pfd >= 0 && syscall(SYS_pidfd_getfd, (int)pfd, 0, 0) >= 0)
    return PIDFD_GETFD_ALLOWED;
#endif
  /* Reading stays: the maps, and a file through the process's root. */
  char path[512];
  snprintf(path, sizeof(path), "/proc/%d/maps", (int)target);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return READ_REFUSED;
  close(fd);
  snprintf(path, sizeof(path), "/proc/%d/root%s/sock", (int)target, dir);
  struct stat st;
  if (stat(path, &st) != 0) return ROOT_REFUSED;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(sock) >= sizeof(a.sun_path)) return CONNECT_REFUSED;
  memcpy(a.sun_path, sock, strlen(sock) + 1);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
    return CONNECT_REFUSED;
  close(s);
  return OK;
}

static void confined_profiler_cannot_reach_into_another_process(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: needs root, to show the unconfined control\n");
    skip();
  }
  char dir[128];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "confine"), 0);
  char sock[sizeof(dir) + 8];
  snprintf(sock, sizeof(sock), "%s/sock", dir);
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(l >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path, sock, strlen(sock) + 1);
  assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(l, 4), 0);

  pid_t target = fork();
  assert_true(target >= 0);
  if (target == 0)
    for (;;) pause();
  pid_t prof = fork();
  assert_true(prof >= 0);
  if (prof == 0) _exit(confined_child(target, dir, sock));
  int st = 0;
  assert_int_equal(waitpid(prof, &st, 0), prof);
  kill(target, SIGKILL);
  waitpid(target, NULL, 0);
  close(l);
  tg_test_rm_rf(dir);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(confined_profiler_cannot_reach_into_another_process),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
