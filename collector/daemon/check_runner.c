/* The check runner and its client: see check_runner.h. */
#include "collector/daemon/check_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"

/* The runner's socket, past the standard three: every other descriptor
 * is closed. */
#define RUNNER_FD 3
/* More descriptors than one request may carry are still received (and
 * closed), so that two are told from one. */
#define MAX_FDS 8

int coll_runner_req_decode(const void *buf_untrusted, size_t n,
                           coll_runner_req_t *req, const char **why) {
  if (n != sizeof(*req)) {
    *why = "not one request's size";
    return COLL_RUNNER_BAD_SIZE;
  }
  memcpy(req, buf_untrusted, sizeof(*req));
  if (req->magic != COLL_RUNNER_MAGIC || req->version != COLL_RUNNER_VERSION) {
    *why = "not a request of this version";
    return COLL_RUNNER_BAD_FIELD;
  }
  if (req->timeout_ms < COLL_RUNNER_TIMEOUT_MIN_MS ||
      req->timeout_ms > COLL_RUNNER_TIMEOUT_MAX_MS) {
    *why = "timeout out of range";
    return COLL_RUNNER_BAD_FIELD;
  }
  if (req->memory < COLL_RUNNER_MEMORY_MIN ||
      req->memory > COLL_RUNNER_MEMORY_MAX) {
    *why = "memory out of range";
    return COLL_RUNNER_BAD_FIELD;
  }
  size_t len = strnlen(req->tp, sizeof(req->tp));
  if (len == 0 || len == sizeof(req->tp)) {
    *why = "the program's path is empty or not terminated";
    return COLL_RUNNER_BAD_FIELD;
  }
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)req->tp[i] < 0x20 || req->tp[i] == 0x7f) {
      *why = "the program's path holds a control character";
      return COLL_RUNNER_BAD_FIELD;
    }
  *why = "";
  return COLL_RUNNER_ACCEPTED;
}

/* --- capabilities ------------------------------------------------------------ */

static int caps_get(struct __user_cap_data_struct d[2]) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  memset(d, 0, 2 * sizeof(*d));
  return syscall(SYS_capget, &hdr, d) == 0 ? 0 : -errno;
}

static int caps_set(const struct __user_cap_data_struct d[2]) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  return syscall(SYS_capset, &hdr, d) == 0 ? 0 : -errno;
}

/* Ambient capabilities cleared and, with CAP_SETPCAP (root), the bounding
 * set emptied: a program this process runs gets none back, even as root. */
static void caps_no_inheritance(const struct __user_cap_data_struct d[2]) {
  /* EINVAL: a kernel without ambient capabilities. */
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (!(d[0].effective & (1u << CAP_SETPCAP))) return;
  /* Past the kernel's last capability: EINVAL, the end. */
  for (unsigned long cap = 0; cap < 64; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL) break;
}

int coll_runner_drop_caps(void) {
  struct __user_cap_data_struct d[2];
  int err = caps_get(d);
  if (err) return err;
  caps_no_inheritance(d);
  memset(d, 0, sizeof(d));
  return caps_set(d);
}

/* The runner's own: CAP_SETUID and CAP_SETGID where it has them, nothing
 * else, none inherited. */
static void runner_caps(void) {
  struct __user_cap_data_struct d[2];
  if (caps_get(d) != 0) return;
  caps_no_inheritance(d);
  uint32_t keep = d[0].permitted & ((1u << CAP_SETUID) | (1u << CAP_SETGID));
  memset(d, 0, sizeof(d));
  d[0].permitted = d[0].effective = keep;
  if (caps_set(d) != 0) {
    /* Keeping more than asked is not an option: keep nothing. */
    memset(d, 0, sizeof(d));
    caps_set(d);
  }
}

/* --- the runner -------------------------------------------------------------- */

static void answer(int sock, const tg_tp_verdict_t *v, int refused) {
  coll_runner_verdict_t w;
  memset(&w, 0, sizeof(w));
  w.magic = COLL_RUNNER_MAGIC;
  w.failure = (int32_t)v->failure;
  w.refused = refused;
  w.uid_kept = v->uid_kept;
  w.uid = v->uid;
  snprintf(w.why, sizeof(w.why), "%s", v->why);
  while (send(sock, &w, sizeof(w), MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

static void refuse(int sock, int refused, const char *why) {
  tg_tp_verdict_t v;
  memset(&v, 0, sizeof(v));
  v.failure = TG_TP_NOT_RUN;
  v.uid = -1;
  snprintf(v.why, sizeof(v.why), "the check runner refused the request: %s",
           why);
  TG_WARN("check runner: %s", v.why);
  answer(sock, &v, refused);
}

/* One request: received, checked, run, answered. Returns false when the
 * socket closed (or failed): the runner ends. */
static bool serve_one(int sock) {
  /* One byte more than a request: a longer message shows as too long
   * rather than cut to size. */
  union {
    coll_runner_req_t req;
    char raw[sizeof(coll_runner_req_t) + 1];
  } in_untrusted;
  union {
    char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = {&in_untrusted, sizeof(in_untrusted)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof(ctl.buf)};
  ssize_t n;
  while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return false;
  int fds[MAX_FDS];
  size_t n_fds = 0;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm;
       cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
      if (n_fds < MAX_FDS)
        fds[n_fds++] = fd;
      else
        close(fd);
    }
  }
  coll_runner_req_t req;
  const char *why = "";
  int refused = (msg.msg_flags & MSG_TRUNC)
                    ? COLL_RUNNER_BAD_SIZE
                    : coll_runner_req_decode(&in_untrusted, (size_t)n, &req,
                                             &why);
  if (refused == COLL_RUNNER_BAD_SIZE) why = "not one request's size";
  struct stat st;
  if (!refused && (n_fds != 1 || (msg.msg_flags & MSG_CTRUNC))) {
    refused = COLL_RUNNER_BAD_FDS;
    why = "not exactly one descriptor";
  } else if (!refused && (fstat(fds[0], &st) != 0 || !S_ISREG(st.st_mode))) {
    refused = COLL_RUNNER_NOT_REGULAR;
    why = "the descriptor is not a regular file";
  }
  if (refused) {
    refuse(sock, refused, why);
  } else {
    tg_tp_limits_t lim = {.timeout_ms = req.timeout_ms,
                          .memory = req.memory,
                          .as_nobody = true,
                          .cancel_fd = sock};
    tg_tp_verdict_t v;
    tg_tp_import_fd(req.tp, fds[0], "the snapshot", &lim, &v);
    TG_DEBUG("check runner: snapshot %016" PRIx64 ": %s as uid %" PRId64
             "%s", req.snapshot_id, tg_tp_failure_name(v.failure), v.uid,
             v.uid_kept ? " (the collector's: no CAP_SETUID)" : "");
    answer(sock, &v, COLL_RUNNER_ACCEPTED);
  }
  for (size_t i = 0; i < n_fds; i++) close(fds[i]);
  return true;
}

/* The child: never returns. */
static void runner_main(int sock, pid_t collector) {
  /* The collector's death ends the runner (a check under way dies with
   * it: tp_import.c gives the child the same). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != collector)
    _exit(1);
  if (sock != RUNNER_FD) {
    if (dup2(sock, RUNNER_FD) != RUNNER_FD) _exit(1);
    close(sock);
  }
  /* Every descriptor the collector had open by now but the standard three
   * (its log) and the socket. */
  if (syscall(SYS_close_range, RUNNER_FD + 1, ~0u, 0) != 0)
    for (int fd = RUNNER_FD + 1; fd < 65536; fd++) close(fd);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != STDIN_FILENO) {
    dup2(null_fd, STDIN_FILENO);
    close(null_fd);
  }
  /* PATH alone: trace processor's path may be a name looked up on it. */
  const char *path = getenv("PATH");
  char keep[1024];
  snprintf(keep, sizeof(keep), "%s", path ? path : "/usr/bin:/bin");
  clearenv();
  setenv("PATH", keep, 1);
  runner_caps();
  signal(SIGPIPE, SIG_IGN);
  /* Its end is the collector's: a terminal's Ctrl-C or a service stop
   * reaches the collector, which closes the socket once it stops (a
   * check under way is then killed here, not left to its deadline). */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  while (serve_one(RUNNER_FD)) {
  }
  close(RUNNER_FD);
  exit(0);
}

int coll_runner_start(coll_runner_t *r) {
  r->pid = 0;
  r->fd = -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return -errno;
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = -errno;
    close(sv[0]);
    close(sv[1]);
    return err;
  }
  if (pid == 0) {
    close(sv[0]);
    runner_main(sv[1], self);
  }
  close(sv[1]);
  r->pid = pid;
  r->fd = sv[0];
  return 0;
}

static void verdict_not_run(tg_tp_verdict_t *v, const char *why, int err) {
  memset(v, 0, sizeof(*v));
  v->failure = TG_TP_NOT_RUN;
  v->uid = -1;
  snprintf(v->why, sizeof(v->why), "%s: %s", why, strerror(err));
}

int coll_runner_check(coll_runner_t *r, const char *tp, int trace_fd,
                      const tg_tp_limits_t *lim, uint64_t snapshot_id,
                      tg_tp_verdict_t *v) {
  coll_runner_req_t req;
  memset(&req, 0, sizeof(req));
  req.magic = COLL_RUNNER_MAGIC;
  req.version = COLL_RUNNER_VERSION;
  req.snapshot_id = snapshot_id;
  req.timeout_ms = lim->timeout_ms;
  req.memory = lim->memory;
  if (strlen(tp) >= sizeof(req.tp)) {
    verdict_not_run(v, "the trace processor's path is too long", E2BIG);
    return 0;
  }
  memcpy(req.tp, tp, strlen(tp));
  if (r->fd < 0) {
    verdict_not_run(v, "no check runner", ECANCELED);
    return -ECANCELED;
  }
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct iovec iov = {&req, sizeof(req)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &trace_fd, sizeof(int));
  ssize_t n;
  while ((n = sendmsg(r->fd, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)sizeof(req)) {
    int err = n < 0 ? errno : EIO;
    /* A shut-down socket is the daemon's stop, not a failure. */
    if (err == EPIPE) err = ECANCELED;
    verdict_not_run(v, "the check runner is gone", err);
    return -err;
  }
  union {
    coll_runner_verdict_t w;
    char raw[sizeof(coll_runner_verdict_t) + 1];
  } in;
  while ((n = recv(r->fd, &in, sizeof(in), 0)) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)sizeof(in.w) || in.w.magic != COLL_RUNNER_MAGIC ||
      in.w.failure < TG_TP_OK || in.w.failure > TG_TP_NOT_RUN) {
    int err = n == 0 ? ECANCELED : n < 0 ? errno : EPROTO;
    verdict_not_run(v, "the check runner gave no verdict", err);
    return -err;
  }
  memset(v, 0, sizeof(*v));
  v->failure = (tg_tp_failure_t)in.w.failure;
  v->uid = in.w.uid;
  v->uid_kept = in.w.uid_kept != 0;
  in.w.why[sizeof(in.w.why) - 1] = 0;
  snprintf(v->why, sizeof(v->why), "%s", in.w.why);
  return 0;
}

void coll_runner_cancel(coll_runner_t *r) {
  if (r->fd >= 0) shutdown(r->fd, SHUT_RDWR);
}

void coll_runner_close(coll_runner_t *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  if (r->pid <= 0) return;
  int status = 0;
  while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    TG_WARN("the check runner (pid %d) ended with status 0x%x", (int)r->pid,
            (unsigned)status);
  r->pid = 0;
}
