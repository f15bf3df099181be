/* The pipe transport of the relay's --stdio mode (ipc/pipe_transport.h):
 * frames queued from their payload get their length prefix, and the output
 * cap holds for frames larger than the cap itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "tracegate/pb_wire.h"
#include "ipc/pipe_transport.h"

typedef struct fx {
  uv_loop_t loop;
  tg_pipe_transport_t t;
  int peer; /* the other end of the socket pair */
  bool closed;
} fx_t;

static int on_frame(tg_transport_t *t, const uint8_t *p, size_t n) {
  (void)t, (void)p, (void)n;
  return 0;
}

static void on_close(tg_transport_t *t, int status) {
  fx_t *x = t->data;
  assert_int_equal(status, 0);
  x->closed = true;
}

static const tg_transport_cbs_t cbs = {.on_frame = on_frame,
                                       .on_close = on_close};

static void open_pair(fx_t *x, size_t high_water) {
  memset(x, 0, sizeof(*x));
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(uv_loop_init(&x->loop), 0);
  assert_int_equal(tg_pipe_transport_open(&x->loop, &x->t, sv[0], sv[0],
                                          high_water),
                   0);
  x->t.base.cbs = &cbs;
  x->t.base.data = x;
  x->peer = sv[1];
}

static void close_pair(fx_t *x) {
  tg_transport_close(&x->t.base, 0);
  uv_run(&x->loop, UV_RUN_DEFAULT);
  assert_true(x->closed);
  close(x->peer);
  assert_int_equal(uv_loop_close(&x->loop), 0);
}

static void pipe_send_payload_adds_the_length_prefix(void **state) {
  (void)state;
  fx_t x;
  open_pair(&x, 0);
  uint8_t payload[100];
  for (size_t i = 0; i < sizeof(payload); i++) payload[i] = (uint8_t)i;
  assert_int_equal(
      tg_pipe_transport_send_payload(&x.t, payload, sizeof(payload)), 0);
  assert_int_equal(tg_pipe_transport_send_payload(
                       &x.t, payload, TG_IPC_FRAME_MAX_PAYLOAD + 1),
                   -EINVAL);
  for (int i = 0; i < 1000 && tg_transport_pending(&x.t.base) > 0; i++)
    uv_run(&x.loop, UV_RUN_NOWAIT);
  assert_int_equal(tg_transport_pending(&x.t.base), 0);
  uint8_t got[TG_IPC_FRAME_HEADER_SIZE + sizeof(payload)];
  size_t have = 0;
  while (have < sizeof(got)) {
    ssize_t n = read(x.peer, got + have, sizeof(got) - have);
    assert_true(n > 0);
    have += (size_t)n;
  }
  assert_int_equal(tg_pb_read_le32(got), sizeof(payload));
  assert_memory_equal(got + TG_IPC_FRAME_HEADER_SIZE, payload,
                      sizeof(payload));
  close_pair(&x);
}

/* A frame larger than the whole cap (16 x high_water) is refused, not
 * queued past it. */
static void pipe_send_refuses_a_frame_over_the_cap(void **state) {
  (void)state;
  fx_t x;
  open_pair(&x, 1);
  uint8_t frame[TG_IPC_FRAME_HEADER_SIZE + 100] = {0};
  tg_pb_write_le32(frame, 100);
  assert_int_equal(tg_transport_send(&x.t.base, frame, sizeof(frame), -1),
                   -ENOBUFS);
  assert_int_equal(tg_pipe_transport_send_payload(
                       &x.t, frame + TG_IPC_FRAME_HEADER_SIZE, 100),
                   -ENOBUFS);
  assert_int_equal(tg_transport_pending(&x.t.base), 0);
  assert_false(tg_transport_congested(&x.t.base));
  close_pair(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pipe_send_payload_adds_the_length_prefix),
      cmocka_unit_test(pipe_send_refuses_a_frame_over_the_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
