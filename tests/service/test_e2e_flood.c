/* Clients that ask and never read. Any local user may connect to the
 * producer socket; one that sends requests without reading the replies
 * must not make tracegated grow: the service stops reading a client whose
 * unread replies pass a mark (ipc/host.h), reads it again once it has
 * drained them, and disconnects one whose backlog passes a hard cap.
 *
 * The end-to-end case runs a real tracegated, floods it from 100 sockets
 * at once and reads its VmRSS; the hard cap runs an in-process host whose
 * one method answers with 120 KiB. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "abi/ipc_frame.h"
#include "ipc/host.h"
#include "test_service.h"

#define FLOOD_CLIENTS 100
/* BindService bytes each flooding client tries to send: ~5700 requests,
 * ~1.8 MiB of replies each if the service answered them all. */
#define FLOOD_BYTES (128 * 1024)
/* What tracegated may grow by while flooded (docs/security.md states it):
 * 100 clients x (64 KiB hold + one 4 KiB read's replies), buffers rounded
 * up, plus the per-connection read buffers, with room for the allocator
 * (main() keeps a sanitizer's quarantine small). Answering every
 * request would take ~180 MiB. */
#define RSS_GROWTH_BOUND_KB (64 * 1024)
/* No flooding client became writable for this long: the service has
 * stopped reading all of them. */
#define STALL_MS 1000

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long vm_rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long kb = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

/* |n| BindService(|service|) frames, request ids 1..n. */
static void build_binds(tg_buf_t *out, const char *service, size_t n) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = (char *)service;
  for (size_t i = 0; i < n; i++) {
    tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
    f.has_request_id = 1;
    f.request_id = i + 1;
    f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
    f.msg_bind_service = &b;
    assert_int_equal(tg_ipc_frame_append(&f, out), 0);
  }
}

typedef struct flooder {
  int fd;
  size_t sent;
} flooder_t;

static int connect_nonblocking(const char *path) {
  int fd = tg_ipc_connect_unix(path);
  assert_true(fd >= 0);
  assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
  return fd;
}

/* Writes what each socket takes until every one has sent |len| bytes or
 * none has been writable for STALL_MS. Returns the bytes sent in all. */
static size_t flood(flooder_t *fl, size_t n, const uint8_t *bytes,
                    size_t len) {
  struct pollfd pfd[FLOOD_CLIENTS];
  for (;;) {
    size_t open = 0;
    for (size_t i = 0; i < n; i++) {
      if (fl[i].sent == len) continue;
      pfd[open].fd = fl[i].fd;
      pfd[open].events = POLLOUT;
      open++;
    }
    if (open == 0) break;
    int r = poll(pfd, open, STALL_MS);
    assert_true(r >= 0 || errno == EINTR);
    if (r == 0) break; /* the service reads none of them */
    for (size_t i = 0; i < n; i++) {
      while (fl[i].sent < len) {
        ssize_t w = send(fl[i].fd, bytes + fl[i].sent, len - fl[i].sent,
                         MSG_NOSIGNAL);
        if (w <= 0) break;
        fl[i].sent += (size_t)w;
      }
    }
  }
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += fl[i].sent;
  return total;
}

/* A whole session by the book: a producer commits packets 0..9, a
 * consumer reads them back in order. */
static void record_one_session(const test_service_t *ts) {
  raw_producer_t p;
  raw_consumer_t c;
  simple_cfg_t sc;
  assert_int_equal(raw_producer_connect(&p, ts, "legit", "flood.ds", 4, 64,
                                        false), 0);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 1, "flood.ds");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_int_equal(raw_producer_register_writer(&p, 1), 0);
  assert_int_equal(raw_producer_write_packets(&p, 0, 0, 1, 0, "legit", 0, 10),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  Perfetto__Protos__TracePacket *tp[16];
  size_t k = test_packets(pk, n, tp, 16);
  assert_int_equal(k, 10);
  for (size_t i = 0; i < k; i++)
    assert_int_equal(tp[i]->for_testing->seq_value, i);
  free_packets(pk, n);
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static int count_bind_reply(void *ctx, const uint8_t *p, size_t n) {
  size_t *count = ctx;
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p, n);
  if (!f) return -1;
  bool ok = f->msg_case ==
                PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY &&
            f->msg_bind_service_reply->success;
  tg_ipc_frame_free(f);
  if (!ok) return -1;
  (*count)++;
  return 0;
}

/* Reads |fl|'s replies while sending the rest of its requests, until one
 * BindServiceReply per request has come back. */
static void drain_one(flooder_t *fl, const uint8_t *bytes, size_t len,
                      size_t requests) {
  tg_frame_decoder_t dec;
  tg_frame_decoder_init(&dec);
  size_t replies = 0;
  uint8_t buf[65536];
  int64_t deadline = now_ms() + 30000;
  while (replies < requests && now_ms() < deadline) {
    struct pollfd pfd = {.fd = fl->fd,
                         .events = POLLIN | (fl->sent < len ? POLLOUT : 0)};
    assert_true(poll(&pfd, 1, 1000) >= 0);
    if (pfd.revents & POLLOUT) {
      ssize_t w = send(fl->fd, bytes + fl->sent, len - fl->sent, MSG_NOSIGNAL);
      if (w > 0) fl->sent += (size_t)w;
    }
    if (pfd.revents & (POLLIN | POLLHUP)) {
      ssize_t r = recv(fl->fd, buf, sizeof(buf), 0);
      assert_true(r > 0); /* held, never disconnected */
      assert_int_equal(
          tg_frame_decoder_feed(&dec, buf, (size_t)r, count_bind_reply,
                                &replies),
          0);
    }
  }
  tg_frame_decoder_free(&dec);
  assert_int_equal(replies, requests);
}

static void flooding_clients_leave_rss_bounded_and_service_usable(
    void **state) {
  test_service_t *ts = *state;
  tg_buf_t producer_binds, consumer_binds;
  tg_buf_init(&producer_binds, 0);
  tg_buf_init(&consumer_binds, 0);
  /* ~23 bytes a frame */
  build_binds(&producer_binds, "ProducerPort", FLOOD_BYTES / 23);
  build_binds(&consumer_binds, "ConsumerPort", FLOOD_BYTES / 23);

  long base_kb = vm_rss_kb(ts->pid);
  assert_true(base_kb > 0);

  /* Half on each socket: both are hosts of the same kind. */
  flooder_t prod[FLOOD_CLIENTS / 2], cons[FLOOD_CLIENTS / 2];
  for (size_t i = 0; i < FLOOD_CLIENTS / 2; i++) {
    prod[i] = (flooder_t){.fd = connect_nonblocking(ts->producer_sock)};
    cons[i] = (flooder_t){.fd = connect_nonblocking(ts->consumer_sock)};
  }
  size_t sent = flood(prod, FLOOD_CLIENTS / 2, tg_buf_begin(&producer_binds),
                      tg_buf_size(&producer_binds));
  sent += flood(cons, FLOOD_CLIENTS / 2, tg_buf_begin(&consumer_binds),
                tg_buf_size(&consumer_binds));
  print_message("flooders sent %zu KiB of BindService in all\n", sent / 1024);

  /* The flooders are still connected and unread: the service still serves
   * everyone else. */
  record_one_session(ts);

  long flooded_kb = vm_rss_kb(ts->pid);
  print_message("tracegated VmRSS %ld kB before, %ld kB flooded\n", base_kb,
                flooded_kb);
  assert_true(flooded_kb > 0);
  assert_true(flooded_kb - base_kb < RSS_GROWTH_BOUND_KB);

  /* A flooder that starts reading is served again, from where it was held,
   * and gets a reply to every request. */
  drain_one(&prod[0], tg_buf_begin(&producer_binds),
            tg_buf_size(&producer_binds), FLOOD_BYTES / 23);

  for (size_t i = 0; i < FLOOD_CLIENTS / 2; i++) {
    close(prod[i].fd);
    close(cons[i].fd);
  }
  record_one_session(ts);
  tg_buf_free(&producer_binds);
  tg_buf_free(&consumer_binds);
}

/* --- the hard cap, on an in-process host ---------------------------------- */

/* As large as a reply frame may be. */
#define BLOB_SIZE (120 * 1024)

static void blob_get(void *ctx, tg_ipc_call_t call, const uint8_t *args,
                     size_t len) {
  (void)args;
  (void)len;
  const uint8_t *blob = ctx;
  tg_ipc_reply_bytes(&call, true, false, blob, BLOB_SIZE, -1);
}

static const tg_ipc_method_def_t blob_methods[] = {{"Get", blob_get}};

static void on_host_closed(void *arg) { *(bool *)arg = true; }

static void on_tick(uv_timer_t *t) { (void)t; }

/* Tiny requests, 120 KiB answers, never read: past the hard cap the client
 * is cut off, and the host counts it. */
static void host_disconnects_a_client_past_the_output_hard_cap(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  uint8_t *blob = calloc(1, BLOB_SIZE);
  assert_non_null(blob);
  tg_ipc_service_def_t svc = {.name = "Blob",
                              .methods = blob_methods,
                              .n_methods = 1,
                              .ctx = blob};
  char addr[64];
  snprintf(addr, sizeof(addr), "@tg-test-flood-%d", (int)getpid());
  tg_ipc_host_t *host = NULL;
  assert_int_equal(tg_ipc_host_listen(&loop, addr, 0600, &svc, 1, 8, &host),
                   0);
  int fd = tg_ipc_connect_unix(addr);
  assert_true(fd >= 0);

  tg_buf_t req;
  tg_buf_init(&req, 0);
  build_binds(&req, "Blob", 1);
  Perfetto__Protos__IPCFrame__InvokeMethod im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  im.has_service_id = im.has_method_id = 1;
  im.service_id = 1;
  im.method_id = 1;
  size_t calls = TG_IPC_HOST_OUTPUT_HARD_CAP / BLOB_SIZE + 8;
  for (size_t i = 0; i < calls; i++) {
    tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
    f.has_request_id = 1;
    f.request_id = 100 + i;
    f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
    f.msg_invoke_method = &im;
    assert_int_equal(tg_ipc_frame_append(&f, &req), 0);
  }
  assert_int_equal(send(fd, tg_buf_begin(&req), tg_buf_size(&req), 0),
                   (ssize_t)tg_buf_size(&req));
  tg_buf_free(&req);

  /* The tick bounds each wait of the loop, so the deadline is seen. */
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  uv_timer_start(&tick, on_tick, 50, 50);
  int64_t deadline = now_ms() + 10000;
  while (tg_ipc_host_stats(host)->output_cap_disconnects == 0 &&
         now_ms() < deadline)
    uv_run(&loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  assert_int_equal(tg_ipc_host_stats(host)->output_cap_disconnects, 1);

  /* What the socket held arrives, then the end: the client was cut off,
   * having got fewer replies than it asked for. */
  uint8_t buf[65536];
  size_t got = 0;
  ssize_t r;
  while ((r = recv(fd, buf, sizeof(buf), 0)) > 0) got += (size_t)r;
  assert_int_equal(r, 0);
  assert_true(got < calls * (size_t)BLOB_SIZE);
  close(fd);

  bool closed = false;
  tg_ipc_host_close(host, on_host_closed, &closed);
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(uv_loop_close(&loop), 0);
  free(blob);
}

/* Under AddressSanitizer freed memory stays mapped in a quarantine of up
 * to 256 MiB: that is the sanitizer's, not the service's, so tracegated
 * (which inherits the environment) gets a small one. */
static void limit_sanitizer_quarantine(void) {
  const char *old = getenv("ASAN_OPTIONS");
  char opts[1024];
  snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=8", old ? old : "",
           old && old[0] ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
}

int main(void) {
  limit_sanitizer_quarantine();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_disconnects_a_client_past_the_output_hard_cap),
      cmocka_unit_test_setup_teardown(
          flooding_clients_leave_rss_bounded_and_service_usable,
          test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
