/* `tracegate bridge` end to end: the bridge as a child, a WebSocket client
 * written here with libwebsockets' client API that speaks the consumer
 * protocol as the Perfetto UI does (BindService, EnableTracing,
 * DisableTracing, ReadBuffers), against a local tracegated (/traced) and
 * a host behind a tracegate-relay (/traced/HOST); the Origin check; and
 * hostile WebSocket peers written byte by byte over raw TCP, after each
 * of which the bridge must still serve a well-behaved client. The
 * screen's walkers (bridge_screen_walk.h) are unit-tested apart, in
 * test_bridge_screen_walk.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "fleet_harness.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "test_proc.h"
#include "ws_frame.h"

#define UI_ORIGIN "https://ui.perfetto.dev"
#define DS_NAME "bridge.ds"
#define WAIT_MS 20000
#define MAX_OUT 16

/* --- the bridge as a child ------------------------------------------------ */

typedef struct bridge {
  fleet_cli_t cli;
  int port;
} bridge_t;

/* Starts `tracegate bridge` on 127.0.0.1:0 in front of |sock| with the
 * harness's client certificate, plus |extra| (NULL-terminated, may be
 * NULL), and reads its port from the ready line. */
static void bridge_start(bridge_t *b, const char *sock,
                         const char *const *extra) {
  const char *args[40] = {"bridge", "--listen", "127.0.0.1:0",
                          "--consumer-socket", sock, FLEET_TLS_ARGS};
  size_t n = 0;
  while (args[n]) n++;
  for (size_t i = 0; extra && extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  fleet_cli_spawn(&b->cli, args);
  char line[512];
  fleet_cli_read_notice(&b->cli, TG_N_BRIDGE_LISTENING, line, sizeof(line),
                        WAIT_MS);
  const char *at = strstr(line, " ws://127.0.0.1:");
  assert_non_null(at);
  b->port = atoi(at + strlen(" ws://127.0.0.1:"));
  assert_true(b->port > 0);
}

/* SIGINT: the bridge must stop by itself, every connection closed. Its
 * connection lines are shown one by one (cmocka cuts long messages). */
static void bridge_stop(bridge_t *b) {
  kill(b->cli.pid, SIGINT);
  assert_int_equal(fleet_cli_wait(&b->cli), 0);
  for (const char *l = b->cli.err; (l = strstr(l, " bridge #")); l++) {
    const char *e = strchr(l, '\n');
    print_message("  %.*s\n", (int)(e ? e - l : (ptrdiff_t)strlen(l)), l);
  }
}

/* --- a WebSocket client, as the UI ----------------------------------------- */

typedef struct ws_client {
  struct lws_context *ctx;
  struct lws *wsi;
  bool established, closed;
  bool closing; /* ws_close(): a close frame goes out next */
  char error[256];
  tg_buf_t in; /* every byte received, in order */
  size_t in_off; /* bytes of |in| already cut into frames */
  uint8_t *out[MAX_OUT]; /* messages, each after LWS_PRE bytes */
  size_t out_len[MAX_OUT];
  size_t n_out;
  uint64_t next_request;
  uint32_t service_id;
  Perfetto__Protos__IPCFrame__BindServiceReply *methods; /* owned frame */
  tg_ipc_frame_t *bind_frame;
} ws_client_t;

static int ws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                 void *in, size_t len) {
  (void)user;
  ws_client_t *ws = lws_get_opaque_user_data(wsi);
  if (!ws) return 0;
  switch (reason) {
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
      ws->established = true;
      if (ws->n_out) lws_callback_on_writable(wsi);
      return 0;
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      snprintf(ws->error, sizeof(ws->error), "%s",
               in ? (const char *)in : "connection error");
      ws->closed = true;
      ws->wsi = NULL;
      return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
      assert_true(lws_frame_is_binary(wsi));
      assert_int_equal(tg_buf_append(&ws->in, in, len), 0);
      return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
      if (!ws->n_out && ws->closing) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
        return -1;
      }
      if (!ws->n_out) return 0;
      uint8_t *m = ws->out[0];
      size_t n = ws->out_len[0];
      int w = lws_write(wsi, m + LWS_PRE, n, LWS_WRITE_BINARY);
      free(m);
      memmove(ws->out, ws->out + 1, (ws->n_out - 1) * sizeof(ws->out[0]));
      memmove(ws->out_len, ws->out_len + 1,
              (ws->n_out - 1) * sizeof(ws->out_len[0]));
      ws->n_out--;
      if (w < (int)n) return -1;
      if (ws->n_out) lws_callback_on_writable(wsi);
      return 0;
    }
    case LWS_CALLBACK_CLIENT_CLOSED:
      ws->closed = true;
      ws->wsi = NULL;
      return 0;
    default:
      return 0;
  }
}

static const struct lws_protocols ws_protocols[] = {
    {.name = "tg-test-ui", .callback = ws_cb, .rx_buffer_size = 65536},
    {0},
};

/* One round of lws's service. lws 4.1 ignores lws_service()'s timeout
 * and sleeps until its next timer: a 20 ms timer on the connection keeps
 * the callers' deadlines. */
static void ws_service(ws_client_t *ws) {
  if (ws->wsi) lws_set_timer_usecs(ws->wsi, 20 * 1000);
  lws_service(ws->ctx, 0);
}

static void ws_service_until(ws_client_t *ws, const bool *flag, int ms) {
  int64_t deadline = tg_test_now_ms() + ms;
  while (!*flag && !ws->closed && tg_test_now_ms() < deadline)
    ws_service(ws);
}

/* Opens ws://127.0.0.1:|port||path| from |origin| and waits for the
 * upgrade. Returns true once established. */
static bool ws_open(ws_client_t *ws, int port, const char *path,
                    const char *origin) {
  memset(ws, 0, sizeof(*ws));
  tg_buf_init(&ws->in, 64u << 20);
  lws_set_log_level(LLL_ERR, NULL);
  struct lws_context_creation_info ci;
  memset(&ci, 0, sizeof(ci));
  ci.port = CONTEXT_PORT_NO_LISTEN;
  ci.protocols = ws_protocols;
  ci.uid = ci.gid = -1;
  /* The Origin header as the browser sends it (else lws adds "http://"). */
  ci.options = LWS_SERVER_OPTION_JUST_USE_RAW_ORIGIN;
  ws->ctx = lws_create_context(&ci);
  assert_non_null(ws->ctx);
  struct lws_client_connect_info cc;
  memset(&cc, 0, sizeof(cc));
  cc.context = ws->ctx;
  cc.address = "127.0.0.1";
  cc.port = port;
  cc.path = path;
  cc.host = "127.0.0.1";
  cc.origin = origin;
  cc.local_protocol_name = ws_protocols[0].name;
  cc.opaque_user_data = ws;
  cc.pwsi = &ws->wsi;
  cc.ietf_version_or_minus_one = -1;
  if (!lws_client_connect_via_info(&cc)) ws->closed = true;
  ws_service_until(ws, &ws->established, WAIT_MS);
  if (!ws->established || ws->closed)
    print_message("WebSocket to %s failed: %s\n", path, ws->error);
  return ws->established && !ws->closed;
}

/* Closes as a browser does: a close frame, then the end. */
static void ws_close(ws_client_t *ws) {
  if (ws->wsi && !ws->closed) {
    ws->closing = true;
    lws_callback_on_writable(ws->wsi);
    ws_service_until(ws, &ws->closed, WAIT_MS);
  }
  for (size_t i = 0; i < ws->n_out; i++) free(ws->out[i]);
  if (ws->bind_frame) tg_ipc_frame_free(ws->bind_frame);
  lws_context_destroy(ws->ctx);
  tg_buf_free(&ws->in);
  memset(ws, 0, sizeof(*ws));
}

/* Queues |n| bytes as one binary message. */
static void ws_send_bytes(ws_client_t *ws, const void *p, size_t n) {
  assert_true(ws->n_out < MAX_OUT);
  uint8_t *m = malloc(LWS_PRE + n);
  assert_non_null(m);
  memcpy(m + LWS_PRE, p, n);
  ws->out[ws->n_out] = m;
  ws->out_len[ws->n_out++] = n;
  if (ws->wsi) lws_callback_on_writable(ws->wsi);
}

/* Queues |f| as one binary message ([len][IPCFrame], as the UI sends). */
static void ws_send_frame(ws_client_t *ws, const tg_ipc_frame_t *f) {
  tg_buf_t b;
  tg_buf_init(&b, TG_IPC_FRAME_BUFFER_SIZE);
  assert_int_equal(tg_ipc_frame_append(f, &b), 0);
  ws_send_bytes(ws, tg_buf_begin(&b), tg_buf_size(&b));
  tg_buf_free(&b);
}

/* The next whole frame received, or NULL (caller frees). */
static tg_ipc_frame_t *ws_next_frame(ws_client_t *ws) {
  const uint8_t *p = (const uint8_t *)tg_buf_begin(&ws->in) + ws->in_off;
  size_t have = tg_buf_size(&ws->in) - ws->in_off;
  if (have < 4) return NULL;
  uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
  assert_true(len <= TG_IPC_FRAME_MAX_PAYLOAD);
  if (have < 4 + (size_t)len) return NULL;
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p + 4, len);
  assert_non_null(f);
  ws->in_off += 4 + (size_t)len;
  return f;
}

/* Waits for the next frame answering |request_id| (others are dropped). */
static tg_ipc_frame_t *ws_wait_reply(ws_client_t *ws, uint64_t request_id) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  for (;;) {
    tg_ipc_frame_t *f;
    while ((f = ws_next_frame(ws))) {
      if (f->request_id == request_id) return f;
      tg_ipc_frame_free(f);
    }
    if (ws->closed) fail_msg("the bridge closed the WebSocket (%s)", ws->error);
    if (tg_test_now_ms() > deadline)
      fail_msg("no reply to request %llu", (unsigned long long)request_id);
    ws_service(ws);
  }
}

static void ws_bind_consumer(ws_client_t *ws) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = "ConsumerPort";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = true;
  f.request_id = ++ws->next_request;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  ws_send_frame(ws, &f);
  tg_ipc_frame_t *r = ws_wait_reply(ws, f.request_id);
  assert_int_equal(r->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY);
  assert_true(r->msg_bind_service_reply->success);
  ws->bind_frame = r;
  ws->methods = r->msg_bind_service_reply;
  ws->service_id = ws->methods->service_id;
}

static uint64_t ws_invoke(ws_client_t *ws, const char *method,
                          const ProtobufCMessage *args) {
  uint32_t id = 0;
  for (size_t i = 0; i < ws->methods->n_methods; i++)
    if (!strcmp(ws->methods->methods[i]->name, method))
      id = ws->methods->methods[i]->id;
  assert_true(id != 0);
  uint8_t *args_buf = malloc(protobuf_c_message_get_packed_size(args) + 1);
  assert_non_null(args_buf);
  size_t n = protobuf_c_message_pack(args, args_buf);
  tg_buf_t b;
  tg_buf_init(&b, TG_IPC_FRAME_BUFFER_SIZE);
  uint64_t request_id = ++ws->next_request;
  assert_int_equal(tg_ipc_invoke_append(&b, request_id, ws->service_id, id,
                                        args_buf, n, false),
                   0);
  ws_send_bytes(ws, tg_buf_begin(&b), tg_buf_size(&b));
  tg_buf_free(&b);
  free(args_buf);
  return request_id;
}

static void assert_success(tg_ipc_frame_t *r) {
  assert_int_equal(r->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
  assert_true(r->msg_invoke_method_reply->success);
}

/* Occurrences of |tag| in |p|. A plain loop: ASan's memmem checks the
 * whole rest of the haystack on every call. */
static size_t count_tag(const uint8_t *p, size_t n, const char *tag) {
  size_t k = 0, tl = strlen(tag);
  for (size_t i = 0; i + tl <= n; i++) {
    if (p[i] == (uint8_t)tag[0] && !memcmp(p + i, tag, tl)) {
      k++;
      i += tl - 1;
    }
  }
  return k;
}

/* A recording as the UI makes it, over |ws|: |n| packets "|tag|" and
 * |big| chunks of 24 packets of FLEET_BIG bytes ("BIG:...": ReadBuffers
 * replies of whole 128 KiB frames) that |p| commits while the session runs
 * must come back from ReadBuffers. */
#define BIG_PER_CHUNK 24
typedef struct ui_run {
  const char *tag;
  unsigned n, big;
  uint32_t buffer_kb;
  int lag_ms; /* the UI reads nothing for this long after ReadBuffers */
} ui_run_t;

static void ui_record(ws_client_t *ws, raw_producer_t *p, const ui_run_t *u) {
  const char *tag = u->tag;
  unsigned n = u->n, big = u->big;
  ws_bind_consumer(ws);
  simple_cfg_t sc;
  simple_cfg_init(&sc, u->buffer_kb, 1, DS_NAME);
  Perfetto__Protos__EnableTracingRequest en =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  en.trace_config = &sc.cfg;
  uint64_t enable = ws_invoke(ws, "EnableTracing", &en.base);
  /* The bytes go out while the producer waits (another process). */
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (ws->n_out && !ws->closed && tg_test_now_ms() < deadline)
    ws_service(ws);
  assert_int_equal(raw_producer_wait_started(p, FLEET_WAIT_MS), 0);
  fleet_commit_packets(p, 0, tag, 1, n);
  for (unsigned k = 0; k < big; k++)
    fleet_commit_big(p, 1 + k, "BIG", k * BIG_PER_CHUNK, BIG_PER_CHUNK);

  Perfetto__Protos__DisableTracingRequest dis =
      PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  tg_ipc_frame_t *r = ws_wait_reply(ws, ws_invoke(ws, "DisableTracing", &dis.base));
  assert_success(r);
  tg_ipc_frame_free(r);
  r = ws_wait_reply(ws, enable); /* EnableTracing answers once it ended */
  assert_success(r);
  tg_ipc_frame_free(r);

  Perfetto__Protos__ReadBuffersRequest rb =
      PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  uint64_t read = ws_invoke(ws, "ReadBuffers", &rb.base);
  if (u->lag_ms) {
    bool sent = false;
    ws_service_until(ws, &sent, 200); /* the request goes out */
    struct timespec lag = {u->lag_ms / 1000, (u->lag_ms % 1000) * 1000000L};
    nanosleep(&lag, NULL);
  }
  tg_buf_t data;
  tg_buf_init(&data, 16u << 20);
  for (bool more = true; more;) {
    r = ws_wait_reply(ws, read);
    assert_success(r);
    Perfetto__Protos__IPCFrame__InvokeMethodReply *ir =
        r->msg_invoke_method_reply;
    more = ir->has_has_more && ir->has_more;
    Perfetto__Protos__ReadBuffersResponse *resp =
        perfetto__protos__read_buffers_response__unpack(
            NULL, ir->reply_proto.len, ir->reply_proto.data);
    assert_non_null(resp);
    for (size_t i = 0; i < resp->n_slices; i++)
      assert_int_equal(tg_buf_append(&data, resp->slices[i]->data.data,
                                     resp->slices[i]->data.len),
                       0);
    perfetto__protos__read_buffers_response__free_unpacked(resp, NULL);
    tg_ipc_frame_free(r);
  }
  assert_int_equal(count_tag(tg_buf_begin(&data), tg_buf_size(&data), tag), n);
  assert_int_equal(count_tag(tg_buf_begin(&data), tg_buf_size(&data), "BIG:"),
                   big * BIG_PER_CHUNK);
  tg_buf_free(&data);
}

/* --- raw TCP: upgrades and hostile peers ---------------------------------- */

static int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  struct timeval tv = {.tv_sec = WAIT_MS / 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

/* Reads the response head on |fd| (byte by byte: what follows it stays
 * unread) and returns its HTTP status. */
static int read_status(int fd) {
  char resp[2048];
  size_t have = 0;
  while (have < sizeof(resp) - 1) {
    ssize_t r = recv(fd, resp + have, 1, 0);
    assert_true(r > 0);
    have += (size_t)r;
    resp[have] = 0;
    if (have >= 4 && !memcmp(resp + have - 4, "\r\n\r\n", 4)) break;
  }
  int status = 0;
  assert_int_equal(sscanf(resp, "HTTP/1.%*d %d", &status), 1);
  return status;
}

/* Sends a WebSocket upgrade of |path| from |origin| (NULL: none), with
 * |n| more bytes in the same write (before any answer), on a new
 * connection, and returns it. */
static int send_upgrade(int port, const char *path, const char *origin,
                        const void *more, size_t n) {
  int fd = tcp_connect(port);
  char req[2048];
  int k = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n%s%s%s\r\n",
                   path, port, origin ? "Origin: " : "", origin ? origin : "",
                   origin ? "\r\n" : "");
  assert_true(k > 0 && (size_t)k + n <= sizeof(req));
  if (n) memcpy(req + k, more, n);
  assert_int_equal(send(fd, req, (size_t)k + n, MSG_NOSIGNAL),
                   (ssize_t)((size_t)k + n));
  return fd;
}

/* The same, and returns the HTTP status; the connection stays open in
 * *fd. */
static int upgrade_with(int port, const char *path, const char *origin,
                        const void *more, size_t n, int *fd) {
  *fd = send_upgrade(port, path, origin, more, n);
  return read_status(*fd);
}

static int upgrade(int port, const char *path, const char *origin, int *fd) {
  return upgrade_with(port, path, origin, NULL, 0, fd);
}

static int upgrade_status(int port, const char *path, const char *origin) {
  int fd;
  int status = upgrade(port, path, origin, &fd);
  close(fd);
  return status;
}

/* True if the bridge closes the connection within WAIT_MS: EOF, a reset,
 * or a close frame (lws then waits 5 s for ours before hanging up). */
static bool closed_by_peer(int fd) {
  uint8_t buf[4096];
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (tg_test_now_ms() < deadline) {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
    if (r > 0 && buf[0] == 0x88) return true; /* FIN + close */
    if (r < 0 && errno == EAGAIN) return false; /* SO_RCVTIMEO ran out */
  }
  return false;
}

/* Upgrades /traced, sends |n| hostile bytes, and expects the close. */
static void assert_hostile_closed(int port, const uint8_t *bytes, size_t n,
                                  const char *what) {
  int fd;
  assert_int_equal(upgrade(port, "/traced", UI_ORIGIN, &fd), 101);
  ssize_t w = send(fd, bytes, n, MSG_NOSIGNAL);
  (void)w; /* the bridge may hang up before it all went */
  if (!closed_by_peer(fd)) fail_msg("the bridge kept a peer that sent %s", what);
  close(fd);
}

/* Sends raw |bytes| on a new connection and expects the close. */
static void assert_raw_closed(int port, const void *bytes, size_t n,
                              const char *what) {
  int fd = tcp_connect(port);
  ssize_t w = send(fd, bytes, n, MSG_NOSIGNAL);
  (void)w;
  if (!closed_by_peer(fd))
    fail_msg("the bridge kept a peer that sent %s", what);
  close(fd);
}

/* True when the bridge ends the connection on |fd| without a byte more:
 * no reply (a pong, an IPC reply), no close frame. False when it stays
 * open. */
static bool cut_off(int fd, const char *what) {
  uint8_t b[256];
  for (;;) {
    ssize_t r = recv(fd, b, sizeof(b), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false; /* SO_RCVTIMEO ran out */
    fail_msg("after %s, the bridge sent %zd bytes (0x%02x...)", what, r, b[0]);
  }
}

/* cut_off(), where the response head (a 101) may still come first. */
static bool cut_off_after_head(int fd, const char *what) {
  char head[2048];
  size_t have = 0;
  for (;;) {
    ssize_t r = recv(fd, head + have, 1, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    have++;
    assert_true(have < sizeof(head));
    if (have >= 4 && !memcmp(head + have - 4, "\r\n\r\n", 4)) break;
  }
  assert_int_equal(memcmp(head, "HTTP/1.1 101 ", 13), 0);
  return cut_off(fd, what);
}

/* Waits for the pong to a masked ping of |n| bytes (< 126): the bridge
 * has taken everything sent before the ping. */
static void wait_pong(int fd, size_t n) {
  uint8_t buf[2 + 125];
  size_t have = 0;
  while (have < 2 + n) {
    ssize_t r = recv(fd, buf + have, 2 + n - have, 0);
    if (r < 0 && errno == EINTR) continue;
    assert_true(r > 0);
    have += (size_t)r;
  }
  assert_int_equal(buf[0], 0x8a);
  assert_int_equal(buf[1], n);
}

/* One BindService request: an IPC frame the service always answers. */
static size_t bind_request(uint8_t *out, size_t cap) {
  Perfetto__Protos__IPCFrame__BindService b =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  b.service_name = "ConsumerPort";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = true;
  f.request_id = 1;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &b;
  tg_buf_t buf;
  tg_buf_init(&buf, TG_IPC_FRAME_BUFFER_SIZE);
  assert_int_equal(tg_ipc_frame_append(&f, &buf), 0);
  size_t n = tg_buf_size(&buf);
  assert_true(n <= cap);
  memcpy(out, tg_buf_begin(&buf), n);
  tg_buf_free(&buf);
  return n;
}

static void send_all(int fd, const void *p, size_t n) {
  assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* --- tests ------------------------------------------------------------------ */

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("bridge");
}

/* A local tracegated with a producer of DS_NAME, a bridge in front of
 * it, and a UI connected to /traced. */
typedef struct local {
  test_service_t ts;
  raw_producer_t p;
  bridge_t b;
  ws_client_t ws;
} local_t;

static void local_start(local_t *l) {
  assert_int_equal(test_service_start(&l->ts), 0);
  assert_int_equal(raw_producer_connect(&l->p, &l->ts, "bridge.producer",
                                        DS_NAME, 32, 256, false),
                   0);
  bridge_start(&l->b, l->ts.consumer_sock, NULL);
  assert_true(ws_open(&l->ws, l->b.port, "/traced", UI_ORIGIN));
}

/* Closes the UI; |why| is the code of the bridge's account of its close,
 * whose line is copied into |line|. */
static void local_close_ui(local_t *l, tg_notice_t why, char *line,
                           size_t cap) {
  ws_close(&l->ws);
  fleet_cli_read_notice(&l->b.cli, why, line, cap, WAIT_MS);
}

static void local_stop(local_t *l) {
  bridge_stop(&l->b);
  raw_producer_close(&l->p);
  assert_int_equal(test_service_stop(&l->ts), 0);
}

/* (1) /traced: the local service, as the UI records from it. */
static void bridge_records_the_local_service_over_traced(void **state) {
  (void)state;
  local_t *l = calloc(1, sizeof(*l));
  assert_non_null(l);
  local_start(l);
  ui_record(&l->ws, &l->p, &(ui_run_t){"localpkt", 5, 30, 1024, 0});
  char line[1024];
  local_close_ui(l, TG_N_BRIDGE_UI_CLOSED, line, sizeof(line));
  local_stop(l);
  assert_notice_with(l->b.cli.err, TG_N_BRIDGE_OPENED,
                     " origin " UI_ORIGIN " /traced -> ");
  free(l);
}

/* A UI that lags behind a large read: the bridge stops reading the
 * service rather than queueing the trace (1 MiB at most), and everything
 * arrives once the UI reads again. */
static void bridge_holds_the_service_while_the_ui_lags(void **state) {
  (void)state;
  local_t *l = calloc(1, sizeof(*l));
  assert_non_null(l);
  local_start(l);
  /* 12 MiB: more than the loopback socket buffers and the high-water
   * mark together. */
  ui_record(&l->ws, &l->p, &(ui_run_t){"lagpkt", 3, 500, 16384, 3000});
  char line[1024];
  local_close_ui(l, TG_N_BRIDGE_UI_CLOSED, line, sizeof(line));
  const char *at = strstr(line, " service_waits=");
  assert_non_null(at);
  unsigned waits = 0;
  assert_int_equal(sscanf(at, " service_waits=%u)", &waits), 1);
  assert_true(waits > 0);
  local_stop(l);
  free(l);
}

/* (1) /traced/HOST: a host behind its relay, over mutual TLS, named as
 * host:port and, with --hosts, refused when not listed. */
static void bridge_records_a_host_behind_its_relay(void **state) {
  (void)state;
  fleet_host_t h;
  fleet_host_start(&h, fleet_in_dir("relay-bridge.log"), NULL);
  fleet_host_connect_producer(&h, "bridge.producer", DS_NAME, 32, 256, false);
  const char *hosts = fleet_in_dir("bridge-hosts.txt");
  FILE *f = fopen(hosts, "w");
  assert_non_null(f);
  fprintf(f, "# the bridge's hosts\n%s\n", h.spec);
  fclose(f);
  const char *extra[] = {"--hosts", hosts, NULL};
  bridge_t b;
  bridge_start(&b, h.ts.consumer_sock, extra);

  char path[128];
  snprintf(path, sizeof(path), "/traced/%s", h.spec);
  ws_client_t ws;
  assert_true(ws_open(&ws, b.port, path, UI_ORIGIN));
  ui_record(&ws, &h.p, &(ui_run_t){"relaypkt", 7, 10, 1024, 0});
  ws_close(&ws);

  /* Not in --hosts, or not a host at all: refused before the upgrade. */
  assert_int_equal(upgrade_status(b.port, "/traced/127.0.0.1:1", UI_ORIGIN),
                   403);
  assert_int_equal(upgrade_status(b.port, "/traced/bad%20host", UI_ORIGIN), 403);
  fleet_cli_read_until(&b.cli, TG_NOTE(BRIDGE_TLS), WAIT_MS);
  fleet_cli_read_until(&b.cli, " /traced/127.0.0.1:1 refused (403)", WAIT_MS);
  assert_notice_with(b.cli.err, TG_N_BRIDGE_REFUSED,
                     " /traced/127.0.0.1:1 refused (403)");
  bridge_stop(&b);
  fleet_host_stop(&h);
}

/* (2) Origins: Perfetto's and --allow-origin's, compared exactly. */
static void bridge_refuses_foreign_origins(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  const char *extra[] = {"--allow-origin", "http://localhost:8080", NULL};
  bridge_t b;
  bridge_start(&b, ts.consumer_sock, extra);
  assert_int_equal(upgrade_status(b.port, "/traced", "https://evil.example"),
                   403);
  assert_int_equal(upgrade_status(b.port, "/traced",
                                  "https://ui.perfetto.dev.evil.example"),
                   403);
  assert_int_equal(upgrade_status(b.port, "/traced", "HTTPS://UI.PERFETTO.DEV"),
                   403);
  assert_int_equal(upgrade_status(b.port, "/traced", NULL), 403);
  assert_int_equal(upgrade_status(b.port, "/elsewhere", UI_ORIGIN), 404);
  assert_int_equal(upgrade_status(b.port, "/traced", UI_ORIGIN), 101);
  assert_int_equal(upgrade_status(b.port, "/traced", "http://127.0.0.1:10000"),
                   101);
  assert_int_equal(upgrade_status(b.port, "/traced", "http://localhost:8080"),
                   101);
  /* Each refusal names the origin and the status. */
  static const char *const origins[] = {" https://evil.example /traced ",
                                        " (none) /traced "};
  for (size_t i = 0; i < 2; i++) {
    fleet_cli_read_until(&b.cli, origins[i], WAIT_MS);
    char line[512];
    assert_true(tg_test_notice_line(b.cli.err, TG_N_BRIDGE_REFUSED, origins[i],
                                    line, sizeof(line)));
    assert_non_null(strstr(line, " (403)"));
  }
  bridge_stop(&b);
  assert_int_equal(test_service_stop(&ts), 0);
}

/* (3) Hostile peers are closed, and the bridge serves the next one. */
static void bridge_closes_hostile_peers_and_goes_on(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  bridge_t b;
  bridge_start(&b, ts.consumer_sock, NULL);
  uint8_t buf[1024];
  static const uint8_t empty_frame[4] = {0, 0, 0, 0}; /* a valid IPC stream */

  static const uint8_t huge_ipc[4] = {0xff, 0xff, 0xff, 0x7f};
  size_t n = ws_frame(buf, 2, true, false, (uint64_t)1 << 40, empty_frame, 4);
  assert_hostile_closed(b.port, buf, n, "a frame announcing 1 TiB");

  n = ws_frame(buf, 2, true, false, TG_IPC_FRAME_BUFFER_SIZE + 1, empty_frame, 4);
  assert_hostile_closed(b.port, buf, n, "a message over the frame limit");

  /* A message in fragments whose sum is over the limit. */
  static uint8_t chunk[65536];
  uint8_t *big = malloc(3 * (sizeof(chunk) + 16));
  assert_non_null(big);
  size_t k = ws_frame(big, 2, false, false, sizeof(chunk), chunk, sizeof(chunk));
  k += ws_frame(big + k, 0, false, false, sizeof(chunk), chunk, sizeof(chunk));
  k += ws_frame(big + k, 0, true, false, sizeof(chunk), chunk, sizeof(chunk));
  assert_hostile_closed(b.port, big, k, "fragments over the frame limit");
  free(big);

  n = ws_frame(buf, 0, true, false, 4, empty_frame, 4);
  assert_hostile_closed(b.port, buf, n, "a continuation with nothing to continue");

  static const uint8_t text[] = "hello";
  n = ws_frame(buf, 1, true, false, 5, text, 5);
  assert_hostile_closed(b.port, buf, n, "a text message");

  static const uint8_t bad_utf8[] = {0xc3, 0x28, 0xff, 0xfe};
  n = ws_frame(buf, 1, true, false, 4, bad_utf8, 4);
  assert_hostile_closed(b.port, buf, n, "a text message of bad UTF-8");

  /* An IPC length over the limit inside a well-formed message. */
  n = ws_frame(buf, 2, true, false, 4, huge_ipc, 4);
  assert_hostile_closed(b.port, buf, n, "an IPC frame announcing 2 GiB");

  srandom(42);
  for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (uint8_t)random();
  buf[0] = 0xff; /* reserved bits and opcode */
  assert_hostile_closed(b.port, buf, sizeof(buf), "random bytes");
  buf[1] |= 0x80; /* masked: lws judges the rest */
  assert_hostile_closed(b.port, buf, sizeof(buf), "random masked bytes");

  /* Before any upgrade: a request head without an end. */
  static char head[12000];
  n = (size_t)snprintf(head, sizeof(head), "GET /traced HTTP/1.1\r\nX: ");
  memset(head + n, 'a', sizeof(head) - n);
  assert_raw_closed(b.port, head, sizeof(head), "an endless request head");

  /* Without --hosts any host:port may be named, but it must be one; one
   * whose relay does not answer ends the WebSocket, saying why. */
  assert_int_equal(upgrade_status(b.port, "/traced/bad%20host", UI_ORIGIN), 400);
  int fd;
  assert_int_equal(upgrade(b.port, "/traced/127.0.0.1:1", UI_ORIGIN, &fd), 101);
  assert_true(closed_by_peer(fd));
  close(fd);
  fleet_cli_read_until(&b.cli, TG_NOTE(BRIDGE_RELAY_FAILED), WAIT_MS);

  /* And a well-behaved client now. */
  ws_client_t ws;
  assert_true(ws_open(&ws, b.port, "/traced", UI_ORIGIN));
  ws_bind_consumer(&ws);
  ws_close(&ws);
  fleet_cli_read_until(&b.cli, TG_NOTE(BRIDGE_TEXT_MESSAGE), WAIT_MS);
  fleet_cli_read_until(&b.cli, TG_NOTE(BRIDGE_MESSAGE_TOO_BIG), WAIT_MS);
  bridge_stop(&b);
  assert_int_equal(test_service_stop(&ts), 0);
}

/* (3) RFC 6455 5.1: a client frame without the MASK bit closes the
 * connection before any of it reaches the service (an unmasked
 * BindService would be answered otherwise), wherever it comes; lws 4.1
 * alone would take it. Then the bridge serves the next client. */
static void bridge_closes_unmasked_frames_and_goes_on(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  bridge_t b;
  bridge_start(&b, ts.consumer_sock, NULL);
  uint8_t req[256], buf[1024], bad[512];
  size_t rn = bind_request(req, sizeof(req)), half = rn / 2, n;
  static const uint8_t ping[4] = {'p', 'i', 'n', 'g'};
  int fd;

  /* A whole request, unmasked. */
  n = ws_frame(buf, 2, true, true, rn, req, rn);
  assert_int_equal(upgrade(b.port, "/traced", UI_ORIGIN, &fd), 101);
  send_all(fd, buf, n);
  assert_true(cut_off(fd, "an unmasked request"));
  close(fd);

  /* After masked frames the bridge took: half the request, and a ping
   * it answered; the other half comes unmasked. */
  assert_int_equal(upgrade(b.port, "/traced", UI_ORIGIN, &fd), 101);
  n = ws_frame(buf, 2, true, false, half, req, half);
  n += ws_frame(buf + n, 9, true, false, sizeof(ping), ping, sizeof(ping));
  send_all(fd, buf, n);
  wait_pong(fd, sizeof(ping));
  n = ws_frame(buf, 2, true, true, rn - half, req + half, rn - half);
  send_all(fd, buf, n);
  assert_true(cut_off(fd, "masked frames, then an unmasked one"));
  close(fd);

  /* A control frame: an unmasked ping is not answered. */
  assert_int_equal(upgrade(b.port, "/traced", UI_ORIGIN, &fd), 101);
  n = ws_frame(buf, 9, true, true, sizeof(ping), ping, sizeof(ping));
  send_all(fd, buf, n);
  assert_true(cut_off(fd, "an unmasked ping"));
  close(fd);

  /* Its header split over two writes: the first byte behind a masked
   * ping, the rest once the pong says the bridge read up to it. */
  assert_int_equal(upgrade(b.port, "/traced", UI_ORIGIN, &fd), 101);
  size_t bn = ws_frame(bad, 2, true, true, rn, req, rn);
  n = ws_frame(buf, 9, true, false, sizeof(ping), ping, sizeof(ping));
  buf[n++] = bad[0];
  send_all(fd, buf, n);
  wait_pong(fd, sizeof(ping));
  send_all(fd, bad + 1, bn - 1);
  assert_true(cut_off(fd, "an unmasked header in two writes"));
  close(fd);

  /* Sent with the upgrade request, before the 101: held until lws
   * upgrades, then checked like any other (the 101 lws wrote may be cut
   * off too). */
  n = ws_frame(buf, 2, true, true, rn, req, rn);
  fd = send_upgrade(b.port, "/traced", UI_ORIGIN, buf, n);
  assert_true(cut_off_after_head(fd, "an unmasked request with the upgrade"));
  close(fd);
  n = ws_frame(buf, 2, true, false, rn, req, rn);
  assert_int_equal(upgrade_with(b.port, "/traced", UI_ORIGIN, buf, n, &fd),
                   101);
  uint8_t reply[2];
  assert_int_equal(recv(fd, reply, sizeof(reply), MSG_WAITALL), 2);
  assert_int_equal(reply[0], 0x82); /* the BindService reply */
  close(fd);

  /* Not an upgrade: lws's answer still reaches the client. */
  fd = tcp_connect(b.port);
  static const char get[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  send_all(fd, get, sizeof(get) - 1);
  assert_int_equal(read_status(fd), 404);
  close(fd);

  /* And a well-behaved client now. */
  ws_client_t ws;
  assert_true(ws_open(&ws, b.port, "/traced", UI_ORIGIN));
  ws_bind_consumer(&ws);
  ws_close(&ws);
  fleet_cli_read_until(&b.cli, "(opcode 0x9", WAIT_MS);
  assert_notice_with(b.cli.err, TG_N_BRIDGE_UNMASKED, "(opcode 0x9");
  fleet_cli_read_until(&b.cli, TG_NOTE(BRIDGE_UI_CLOSED), WAIT_MS);
  bridge_stop(&b);
  /* Each of the five said why, and none got a whole IPC frame upstream
   * nor a byte back. */
  assert_int_equal(tg_test_notice_count(b.cli.err, TG_N_BRIDGE_UNMASKED, NULL),
                   5);
  assert_int_equal(tg_test_notice_count(b.cli.err, TG_N_BRIDGE_UNMASKED,
                                        " ui_frames=0 service_bytes=0 "),
                   5);
  assert_int_equal(test_service_stop(&ts), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(bridge_records_the_local_service_over_traced),
      FLEET_TEST(bridge_holds_the_service_while_the_ui_lags),
      FLEET_TEST(bridge_records_a_host_behind_its_relay),
      FLEET_TEST(bridge_refuses_foreign_origins),
      FLEET_TEST(bridge_closes_hostile_peers_and_goes_on),
      FLEET_TEST(bridge_closes_unmasked_frames_and_goes_on),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
