/* The channel's reads on a bulk stream (ipc/channel.c): a ReadBuffers
 * reply stream is mostly 128 KiB frames, twice the channel's read chunk.
 * Each frame must arrive whole, in order and intact, with the descriptor
 * sent with its first byte, while the decoder copies only a small part of
 * the stream: the rest of a split frame is read straight where it is
 * assembled. Reading 64 KiB at a time and feeding the decoder copied
 * nearly all of it.
 *
 * A thread writes the stream into one end of a socket pair (blocking, so
 * the socket's buffer paces it); the channel reads the other on the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "ipc/channel.h"
#include "raw_ipc.h"
#include "test_wait.h"
#include "tracegate/pb_wire.h"

#define WAIT_MS 10000
#define FRAMES 96u
#define FD_FRAME 40u /* carries a descriptor with its first byte */

typedef struct fixture {
  uv_loop_t loop;
  tg_ipc_chan_t ch;
  int peer;
  int pipe_rd, pipe_wr; /* the descriptor sent, and how to recognise it */
  uint32_t frames, next_seq;
  uint64_t bytes;
  bool order_ok, content_ok, fd_ok;
  bool closed;
} fixture_t;

/* Frame |seq|'s payload length: mostly the largest, some others between. */
static size_t frame_len(uint32_t seq) {
  return seq % 8 == 3   ? 40000 + seq * 11
         : seq % 8 == 6 ? 200 + seq
                        : TG_IPC_FRAME_MAX_PAYLOAD;
}

static uint8_t pattern(uint32_t seq, size_t i) {
  return (uint8_t)(seq * 131u + i * 7u + (i >> 9));
}

static int on_frame(tg_ipc_chan_t *ch, const uint8_t *p, size_t n) {
  fixture_t *f = ch->data;
  uint32_t seq = n >= 4 ? tg_pb_read_le32(p) : UINT32_MAX;
  if (seq != f->next_seq || n != frame_len(seq)) f->order_ok = false;
  for (size_t i = 4; i < n && f->content_ok; i++)
    if (p[i] != pattern(seq, i)) f->content_ok = false;
  /* Only its frame's handler takes it, as a method expecting one does (a
   * read may bring it with the previous frame's last bytes). */
  if (seq == FD_FRAME) {
    int fd = tg_ipc_chan_take_fd(ch);
    /* The same pipe: what is written to it comes out of our read end. */
    f->fd_ok = fd >= 0 && write(fd, "x", 1) == 1;
    char c;
    f->fd_ok = f->fd_ok && read(f->pipe_rd, &c, 1) == 1 && c == 'x';
    if (fd >= 0) close(fd);
  }
  f->next_seq = seq + 1;
  f->frames++;
  f->bytes += 4 + n;
  return 0;
}

static void on_close(tg_ipc_chan_t *ch, int status) {
  (void)status;
  ((fixture_t *)ch->data)->closed = true;
}

static const tg_ipc_chan_cbs_t cbs = {.on_frame = on_frame,
                                      .on_close = on_close};

/* Sends |n| bytes, the first of them with |fd| attached when >= 0. */
static bool send_all(int sock, const uint8_t *p, size_t n, int fd) {
  while (n > 0) {
    ssize_t k = raw_sendmsg_fd(sock, p, n, fd);
    if (k == -EINTR) continue;
    if (k <= 0) return false;
    fd = -1;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

static void *writer_main(void *arg) {
  fixture_t *f = arg;
  static uint8_t buf[TG_IPC_FRAME_BUFFER_SIZE];
  for (uint32_t seq = 0; seq < FRAMES; seq++) {
    size_t n = frame_len(seq);
    tg_pb_write_le32(buf, (uint32_t)n);
    tg_pb_write_le32(buf + 4, seq);
    for (size_t i = 4; i < n; i++) buf[4 + i] = pattern(seq, i);
    if (!send_all(f->peer, buf, 4 + n, seq == FD_FRAME ? f->pipe_wr : -1))
      break;
  }
  return NULL;
}

static bool all_in(void *arg) {
  fixture_t *f = arg;
  return f->frames >= FRAMES || f->closed;
}

static bool is_closed(void *arg) { return ((fixture_t *)arg)->closed; }

static void bulk_frames_are_read_in_place(void **state) {
  (void)state;
  static fixture_t f;
  memset(&f, 0, sizeof(f));
  f.order_ok = f.content_ok = true;
  assert_int_equal(uv_loop_init(&f.loop), 0);
  int sv[2], pp[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
  f.peer = sv[1];
  f.pipe_rd = pp[0];
  f.pipe_wr = pp[1];
  assert_int_equal(tg_ipc_chan_open(&f.loop, &f.ch, sv[0], &cbs, &f), 0);
  pthread_t w;
  assert_int_equal(pthread_create(&w, NULL, writer_main, &f), 0);
  bool done = tg_test_run_loop_until(&f.loop, all_in, &f, WAIT_MS);
  uint64_t copied = f.ch.dec.copied;
  tg_ipc_chan_close(&f.ch, 0);
  assert_true(tg_test_run_loop_until(&f.loop, is_closed, &f, WAIT_MS));
  close(f.peer); /* ends the writer if it is still blocked */
  pthread_join(w, NULL);
  close(pp[0]);
  close(pp[1]);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f.loop), 0);

  assert_true(done);
  assert_int_equal(f.frames, FRAMES);
  assert_true(f.order_ok);
  assert_true(f.content_ok);
  assert_true(f.fd_ok);
  print_message("the decoder copied %llu of %llu bytes\n",
                (unsigned long long)copied, (unsigned long long)f.bytes);
  assert_true(copied * 10 < f.bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bulk_frames_are_read_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
