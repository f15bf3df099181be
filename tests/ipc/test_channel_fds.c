/* The channel's cap on received file descriptors (ipc/channel.h): a peer
 * cannot make us hold more than TG_IPC_MAX_FDS_IN_FLIGHT, whatever it
 * sends, and nothing it sent leaks.
 *
 * Leaks are seen through pipes: the fds a peer sends are copies of a pipe's
 * write end, so the read end reports EOF exactly when every copy, ours and
 * the channel's, is closed.
 *
 * And how the channel names its peer going away: a reset is a reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/channel.h"
#include "test_wait.h"
#include "tracegate/error.h"

#define WAIT_MS 5000

typedef struct fixture {
  uv_loop_t loop;
  tg_ipc_chan_t ch;
  int peer;          /* the other end of the socket pair: the test writes */
  unsigned frames;   /* frames delivered to on_frame */
  int taken[TG_IPC_MAX_FDS_IN_FLIGHT + 2];
  unsigned n_taken;  /* fds on_frame got from tg_ipc_chan_take_fd */
  unsigned take;     /* how many on_frame tries to take */
  bool closed;
  int close_status;
} fixture_t;

static int on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  (void)p;
  (void)n;
  fixture_t *f = ch->data;
  f->frames++;
  for (unsigned i = 0; i < f->take; i++) {
    int fd = tg_ipc_chan_take_fd(ch);
    if (fd < 0) break;
    f->taken[f->n_taken++] = fd;
  }
  return 0;
}

static void on_close(tg_ipc_chan_t *ch, int status) {
  fixture_t *f = ch->data;
  f->closed = true;
  f->close_status = status;
}

static const tg_ipc_chan_cbs_t cbs = {.on_frame = on_frame,
                                      .on_close = on_close};

static int setup(void **state) {
  static fixture_t f;
  memset(&f, 0, sizeof(f));
  if (uv_loop_init(&f.loop) != 0) return -1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  f.peer = sv[1];
  if (tg_ipc_chan_open(&f.loop, &f.ch, sv[0], &cbs, &f) != 0) return -1;
  *state = &f;
  return 0;
}

static bool is_closed(void *arg) { return ((fixture_t *)arg)->closed; }

static int teardown(void **state) {
  fixture_t *f = *state;
  tg_ipc_chan_close(&f->ch, 0);
  bool closed = tg_test_run_loop_until(&f->loop, is_closed, f, WAIT_MS);
  if (f->peer >= 0) close(f->peer);
  for (unsigned i = 0; i < f->n_taken; i++) close(f->taken[i]);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&f->loop);
  return closed && rv == 0 ? 0 : -1;
}

/* A pipe whose read end is non-blocking (to ask "EOF yet?"). */
static void make_pipe(int p[2]) {
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
}

/* True when every copy of the pipe's write end is closed. */
static bool pipe_at_eof(int rd) {
  char c;
  return read(rd, &c, 1) == 0;
}

/* Sends |n| bytes with |nfds| copies of |fd| attached, in one sendmsg. */
static void send_with_fds(int sock, const void *bytes, size_t n, int fd,
                          unsigned nfds) {
  int fds[16];
  assert_true(nfds <= 16);
  for (unsigned i = 0; i < nfds; i++) fds[i] = fd;
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(fds))];
  } cbuf;
  memset(&cbuf, 0, sizeof(cbuf));
  struct iovec iov = {.iov_base = (void *)bytes, .iov_len = n};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds) {
    msg.msg_control = cbuf.buf;
    msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  }
  assert_int_equal(sendmsg(sock, &msg, 0), (ssize_t)n);
}

/* A frame: [u32 LE length][payload]; the channel does not look inside. */
static const uint8_t frame[] = {4, 0, 0, 0, 'a', 'b', 'c', 'd'};

static bool got_frame(void *arg) { return ((fixture_t *)arg)->frames > 0; }

static void more_fds_in_one_message_than_allowed_close_the_channel(
    void **state) {
  fixture_t *f = *state;
  int p[2];
  make_pipe(p);
  send_with_fds(f->peer, frame, sizeof(frame), p[1],
                TG_IPC_MAX_FDS_IN_FLIGHT + 2);
  close(p[1]);
  /* The kernel hands over as many as fit and flags the rest truncated:
   * the channel treats that as a hostile peer. */
  assert_true(tg_test_run_loop_until(&f->loop, is_closed, f, WAIT_MS));
  assert_int_equal(f->close_status, -EBADMSG);
  assert_int_equal(f->frames, 0);
  assert_true(pipe_at_eof(p[0]));
  close(p[0]);
}

static void fds_past_the_cap_are_dropped_and_the_rest_closed_after_the_frame(
    void **state) {
  fixture_t *f = *state;
  int kept[2], dropped[2];
  make_pipe(kept);
  make_pipe(dropped);
  struct stat kept_st;
  assert_int_equal(fstat(kept[1], &kept_st), 0);
  /* One fd per byte of a partial frame: separate messages, so the cap is
   * hit across reads rather than inside one. The first
   * TG_IPC_MAX_FDS_IN_FLIGHT are kept-pipe copies, the two past the cap
   * dropped-pipe copies. */
  unsigned i = 0;
  for (; i < TG_IPC_MAX_FDS_IN_FLIGHT; i++)
    send_with_fds(f->peer, frame + i, 1, kept[1], 1);
  for (; i < TG_IPC_MAX_FDS_IN_FLIGHT + 2; i++)
    send_with_fds(f->peer, frame + i, 1, dropped[1], 1);
  close(kept[1]);
  close(dropped[1]);
  f->take = 2; /* the handler claims two, leaves the others */
  send_with_fds(f->peer, frame + i, sizeof(frame) - i, -1, 0);
  assert_true(tg_test_run_loop_until(&f->loop, got_frame, f, WAIT_MS));
  assert_int_equal(f->frames, 1);
  assert_true(tg_ipc_chan_is_open(&f->ch)); /* dropping is not closing */
  /* The two it took are the kept pipe's, in arrival order. */
  assert_int_equal(f->n_taken, 2);
  for (unsigned k = 0; k < f->n_taken; k++) {
    struct stat st;
    assert_int_equal(fstat(f->taken[k], &st), 0);
    assert_true(st.st_ino == kept_st.st_ino && st.st_dev == kept_st.st_dev);
  }
  /* Those past the cap were closed on arrival, the unclaimed ones once the
   * frame was done: only the two we hold keep the kept pipe open. */
  assert_true(pipe_at_eof(dropped[0]));
  assert_false(pipe_at_eof(kept[0]));
  for (unsigned k = 0; k < f->n_taken; k++) close(f->taken[k]);
  f->n_taken = 0;
  assert_true(pipe_at_eof(kept[0]));
  assert_int_equal(tg_ipc_chan_take_fd(&f->ch), -1);
  close(kept[0]);
  close(dropped[0]);
}

static void fds_pending_when_the_channel_closes_are_closed(void **state) {
  fixture_t *f = *state;
  int p[2];
  make_pipe(p);
  /* Half a frame with two fds, then the peer hangs up. */
  send_with_fds(f->peer, frame, 3, p[1], 2);
  close(p[1]);
  shutdown(f->peer, SHUT_WR);
  assert_true(tg_test_run_loop_until(&f->loop, is_closed, f, WAIT_MS));
  assert_int_equal(f->close_status, TG_EPEER_CLOSED);
  assert_int_equal(f->frames, 0);
  assert_true(pipe_at_eof(p[0]));
  close(p[0]);
}

/* A peer that closes with our bytes unread resets the connection: libuv
 * reports that (POLLERR) as UV_EBADF, the channel as what it was. */
static void a_reset_is_reported_as_a_reset(void **state) {
  fixture_t *f = *state;
  static const uint8_t bytes[] = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  assert_int_equal(tg_ipc_chan_send(&f->ch, bytes, sizeof(bytes), -1), 0);
  close(f->peer); /* unread: the kernel resets our end */
  f->peer = -1;
  assert_true(tg_test_run_loop_until(&f->loop, is_closed, f, WAIT_MS));
  assert_int_equal(f->close_status, -ECONNRESET);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          more_fds_in_one_message_than_allowed_close_the_channel, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          fds_past_the_cap_are_dropped_and_the_rest_closed_after_the_frame,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          fds_pending_when_the_channel_closes_are_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(a_reset_is_reported_as_a_reset, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
