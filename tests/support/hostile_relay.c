/* The hostile host (hostile_relay.h): an accept thread, then per
 * connection a thread that owns both TLS sessions and both sockets
 * (non-blocking, poll(2)), the plaintext of each direction cut into IPC
 * frames by hand so that a stream can stop being parsed mid-buffer. */
#include "hostile_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "tls/session.h"
#include "tracegate/error.h"
#include "tracegate/pb_writer.h"

#define MAX_CONNS 16
#define MAX_REQS 64    /* requests remembered per connection, in a ring */
#define MAX_METHODS 64 /* method ids learnt per connection */
#define NAME_MAX_ 48
/* Forged frames are made while the client's TLS output is below this. */
#define FORGE_HIGH_WATER (256u * 1024)
/* A forged frame stops taking packets past this many bytes. */
#define FORGE_FRAME_FILL (100u * 1024)
/* SEQ_FLOOD ids start above what the merge keeps in a host's own range. */
#define FLOOD_FIRST_SEQ (1u << 20)

/* TracePacket and ReadBuffersResponse fields. */
#define PKT_TIMESTAMP 8
#define PKT_SEQ_ID 10
#define PKT_FOR_TESTING 900
#define TEST_STR 1
#define TEST_SEQ_VALUE 2
#define RB_SLICES 2
#define SLICE_DATA 1
#define SLICE_LAST 2

typedef struct req {
  uint64_t id;
  bool bind;                 /* a BindService (name: the service) */
  tg_hostile_mode_t mode;    /* the mode when it was asked */
  char name[NAME_MAX_];      /* the method or service name */
} req_t;

typedef struct method {
  uint32_t service_id, method_id;
  char name[NAME_MAX_];
} method_t;

/* One direction's plaintext, cut into frames. */
typedef struct stream {
  tg_buf_t in;
  bool opaque; /* no longer parsed (compressed, or not frames) */
} stream_t;

typedef struct conn {
  tg_hostile_relay_t *h;
  pthread_t thread;
  atomic_bool running;
  int dfd, ufd; /* the client's socket, the relay's */
  tg_tls_session_t *ds, *us;
  stream_t up, down; /* client -> relay, relay -> client */
  req_t reqs[MAX_REQS];
  size_t next_req;
  method_t methods[MAX_METHODS];
  size_t n_methods;
  uint64_t compress_req; /* SetCompression's request id, 0: none */
  bool flooding;
  uint64_t flood_id;
  tg_hostile_mode_t flood_mode;
  uint32_t next_seq, next_value;
  uint64_t next_ts;
  uint64_t inject_gen; /* the INJECT packets this connection sent */
  int64_t next_trickle_ms; /* TRICKLE: when the next frame is due */
  char pad[TG_HOSTILE_ENDLESS_PAD]; /* an ENDLESS_READ packet's string */
  uint8_t frame[TG_IPC_FRAME_BUFFER_SIZE];
} conn_t;

struct tg_hostile_relay {
  int listen_fd, port, target_port;
  /* Written once at stop and never read: every poller wakes on it. */
  int stop[2];
  pthread_t accept_thread;
  tg_tls_config_t *server_cfg, *client_cfg;
  char server_name[256];
  atomic_int mode;
  atomic_ullong accepted, endless_reads, forged_packets, forged_bytes;
  atomic_ullong injected, clock_refused;
  atomic_bool clock_sync_error;
  /* INJECT's packets, [u32 length, little endian][the packet] each. */
  pthread_mutex_t inject_mu;
  tg_buf_t inject;
  uint64_t inject_gen; /* how many times they were given */
  conn_t *conns[MAX_CONNS]; /* the accept thread's, then the stop's */
};

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* --- moving ciphertext ---------------------------------------------------- */

/* Writes what |s| has for |fd|; false when the socket is gone. */
static bool flush_tls(tg_tls_session_t *s, int fd) {
  tg_buf_t *out = tg_tls_out(s);
  while (tg_buf_size(out)) {
    ssize_t w = send(fd, tg_buf_begin(out), tg_buf_size(out), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (w <= 0) return false;
    tg_buf_consume(out, (size_t)w);
  }
  return true;
}

/* Reads ciphertext from |fd| into |s|; false at EOF or an error. */
static bool fill_tls(tg_tls_session_t *s, int fd) {
  uint8_t buf[65536];
  ssize_t r = recv(fd, buf, sizeof(buf), 0);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return true;
  return r > 0 && tg_tls_feed(s, buf, (size_t)r) == 0;
}

/* The handshake of |s| on |fd|, bounded by the stop pipe. */
static bool handshake(conn_t *k, tg_tls_session_t *s, int fd) {
  for (;;) {
    int rv = tg_tls_handshake(s);
    if (!flush_tls(s, fd)) return false;
    if (rv == 0) return true;
    if (rv != -EAGAIN) return false;
    struct pollfd p[2] = {{fd, POLLIN | (tg_buf_size(tg_tls_out(s)) ? POLLOUT : 0), 0},
                          {k->h->stop[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return false;
    if (p[1].revents) return false;
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !fill_tls(s, fd))
      return false;
  }
}

/* --- what the client asks ------------------------------------------------- */

static const char *method_name(const conn_t *k, uint32_t service, uint32_t id) {
  for (size_t i = 0; i < k->n_methods; i++)
    if (k->methods[i].service_id == service && k->methods[i].method_id == id)
      return k->methods[i].name;
  return "";
}

static req_t *find_req(conn_t *k, uint64_t id) {
  for (size_t i = 0; i < MAX_REQS; i++)
    if (k->reqs[i].id == id && id) return &k->reqs[i];
  return NULL;
}

static void note_req(conn_t *k, uint64_t id, bool bind, const char *name) {
  req_t *r = &k->reqs[k->next_req++ % MAX_REQS];
  r->id = id;
  r->bind = bind;
  r->mode = (tg_hostile_mode_t)atomic_load(&k->h->mode);
  snprintf(r->name, sizeof(r->name), "%s", name ? name : "");
}

static void client_frame(conn_t *k, const uint8_t *p, size_t n) {
  tg_ipc_invoke_view_t v;
  if (tg_ipc_frame_read_invoke(p, n, &v) == 1) {
    const char *name = method_name(k, v.service_id, v.method_id);
    note_req(k, v.request_id, false, name);
    if (!strcmp(name, "SetCompression")) k->compress_req = v.request_id;
    return;
  }
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p, n);
  if (f && f->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE)
    note_req(k, f->request_id, true, f->msg_bind_service->service_name);
  tg_ipc_frame_free(f);
}

/* --- what the relay answers ------------------------------------------------ */

static void learn_methods(conn_t *k, const uint8_t *p, size_t n) {
  tg_ipc_frame_t *f = tg_ipc_frame_unpack(p, n);
  if (!f || f->msg_case != PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY ||
      !f->msg_bind_service_reply->success) {
    tg_ipc_frame_free(f);
    return;
  }
  const Perfetto__Protos__IPCFrame__BindServiceReply *r = f->msg_bind_service_reply;
  for (size_t i = 0; i < r->n_methods && k->n_methods < MAX_METHODS; i++) {
    method_t *m = &k->methods[k->n_methods++];
    m->service_id = r->service_id;
    m->method_id = r->methods[i]->id;
    snprintf(m->name, sizeof(m->name), "%s",
             r->methods[i]->name ? r->methods[i]->name : "");
  }
  tg_ipc_frame_free(f);
}

/* One forged packet into the reply body |w|. */
static void forge_packet(conn_t *k, tg_pbw_t *w) {
  tg_pbw_begin_nested(w, RB_SLICES);
  tg_pbw_begin_nested(w, SLICE_DATA);
  uint64_t start = tg_pbw_written(w);
  tg_pbw_append_varint(w, PKT_TIMESTAMP, k->next_ts++);
  if (k->flood_mode == TG_HOSTILE_SEQ_FLOOD) {
    tg_pbw_append_varint(w, PKT_SEQ_ID, k->next_seq++);
  } else if (k->flood_mode == TG_HOSTILE_TRICKLE) {
    tg_pbw_append_varint(w, PKT_SEQ_ID, 1);
    tg_pbw_begin_nested(w, PKT_FOR_TESTING);
    tg_pbw_append_bytes(w, TEST_STR, "trickle", 7);
    tg_pbw_append_varint(w, TEST_SEQ_VALUE, k->next_value++);
    tg_pbw_end_nested(w);
  } else {
    tg_pbw_append_varint(w, PKT_SEQ_ID, 1);
    tg_pbw_begin_nested(w, PKT_FOR_TESTING);
    tg_pbw_append_bytes(w, TEST_STR, k->pad, sizeof(k->pad));
    tg_pbw_append_varint(w, TEST_SEQ_VALUE, k->next_value++);
    tg_pbw_end_nested(w);
  }
  uint64_t len = tg_pbw_written(w) - start;
  tg_pbw_end_nested(w);
  tg_pbw_append_bool(w, SLICE_LAST, true);
  tg_pbw_end_nested(w);
  atomic_fetch_add(&k->h->forged_packets, 1);
  atomic_fetch_add(&k->h->forged_bytes, len);
}

/* One slice of a packet that never ends: never the last one, so the
 * client's reassembler only ever grows (the bytes never decode). */
static void forge_slice(conn_t *k, tg_pbw_t *w) {
  tg_pbw_begin_nested(w, RB_SLICES);
  tg_pbw_begin_nested(w, SLICE_DATA);
  tg_pbw_append_bytes(w, PKT_FOR_TESTING, k->pad, sizeof(k->pad));
  tg_pbw_end_nested(w);
  tg_pbw_end_nested(w);
  atomic_fetch_add(&k->h->forged_bytes, sizeof(k->pad));
}

/* The next frame of an endless stream, to the client: full, or of one
 * packet when trickling. */
static bool forge_frame(conn_t *k) {
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), k->flood_id, true, true);
  /* A trickle's frame holds one packet; a flood's, FORGE_FRAME_FILL. */
  bool one = k->flood_mode == TG_HOSTILE_TRICKLE;
  do {
    if (k->flood_mode == TG_HOSTILE_ENDLESS_PACKET) forge_slice(k, &rw.body);
    else forge_packet(k, &rw.body);
  } while (!one && tg_pbw_written(&rw.body) < FORGE_FRAME_FILL &&
           !tg_pbw_error(&rw.body));
  size_t len;
  return tg_ipc_reply_end(&rw, &len) == 0 &&
         tg_tls_write(k->ds, k->frame, len) == 0;
}

/* A reply to ReadBuffers in a hostile mode: it goes on, and after the
 * relay's last one the stream is ours. */
static bool endless(conn_t *k, const req_t *r, const tg_ipc_reply_view_t *v) {
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), v->request_id,
                     v->success, true);
  if (v->reply_proto_len)
    tg_pbw_append_raw(&rw.body, v->reply_proto, v->reply_proto_len);
  size_t len;
  if (tg_ipc_reply_end(&rw, &len) != 0 || tg_tls_write(k->ds, k->frame, len) != 0)
    return false;
  if (!v->has_more && !k->flooding) {
    k->flooding = true;
    k->flood_id = v->request_id;
    k->flood_mode = r->mode;
    atomic_fetch_add(&k->h->endless_reads, 1);
  }
  return true;
}

/* Writes the reply frame in k->frame (of |rw|) to the client. */
static bool send_reply(conn_t *k, tg_ipc_reply_writer_t *rw) {
  size_t len;
  return tg_ipc_reply_end(rw, &len) == 0 &&
         tg_tls_write(k->ds, k->frame, len) == 0;
}

/* The test's packets, each whole in one slice, in reply frames of about
 * FORGE_FRAME_FILL to request |id|, all saying more follows. */
static bool send_injected(conn_t *k, uint64_t id) {
  tg_hostile_relay_t *h = k->h;
  tg_ipc_reply_writer_t rw;
  bool ok = true, empty = true;
  uint64_t sent = 0;
  pthread_mutex_lock(&h->inject_mu);
  k->inject_gen = h->inject_gen;
  const uint8_t *at = tg_buf_begin(&h->inject);
  const uint8_t *end = at + tg_buf_size(&h->inject);
  tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), id, true, true);
  while (ok && end - at >= 4) {
    uint32_t len = (uint32_t)at[0] | (uint32_t)at[1] << 8 |
                   (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
    at += 4;
    if (!empty && tg_pbw_written(&rw.body) + len > FORGE_FRAME_FILL) {
      ok = send_reply(k, &rw);
      tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), id, true, true);
    }
    tg_pbw_begin_nested(&rw.body, RB_SLICES);
    tg_pbw_append_bytes(&rw.body, SLICE_DATA, at, len);
    tg_pbw_append_bool(&rw.body, SLICE_LAST, true);
    tg_pbw_end_nested(&rw.body);
    empty = false;
    at += len;
    sent++;
  }
  pthread_mutex_unlock(&h->inject_mu);
  if (ok && !empty) ok = send_reply(k, &rw);
  atomic_fetch_add(&h->injected, sent);
  return ok;
}

/* A reply to ReadBuffers in an INJECT mode. The test's packets go once
 * per connection for each set given (a client reads a clone until a read
 * brings nothing, so a read that always brought them would never end):
 * INJECT_FIRST sends them before the first reply of a read, which then
 * goes as it came; INJECT after the last, which then says more follows,
 * and an empty last reply ends the read. */
static bool inject(conn_t *k, tg_hostile_mode_t mode,
                   const tg_ipc_reply_view_t *v, const uint8_t *p, size_t n) {
  tg_hostile_relay_t *h = k->h;
  bool first = mode == TG_HOSTILE_INJECT_FIRST;
  pthread_mutex_lock(&h->inject_mu);
  bool due = (first || !v->has_more) && k->inject_gen != h->inject_gen;
  pthread_mutex_unlock(&h->inject_mu);
  if (due && first && !send_injected(k, v->request_id)) return false;
  if (!due || first)
    return tg_tls_write(k->ds, p - TG_IPC_FRAME_HEADER_SIZE,
                        n + TG_IPC_FRAME_HEADER_SIZE) == 0;
  tg_ipc_reply_writer_t rw;
  tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), v->request_id,
                     v->success, true);
  if (v->reply_proto_len)
    tg_pbw_append_raw(&rw.body, v->reply_proto, v->reply_proto_len);
  if (!send_reply(k, &rw) || !send_injected(k, v->request_id)) return false;
  tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), v->request_id, true,
                     false);
  return send_reply(k, &rw);
}

/* |p|, |n|: one frame's payload, its length header just before it. */
static bool relay_frame(conn_t *k, const uint8_t *p, size_t n) {
  tg_ipc_reply_view_t v;
  if (tg_ipc_frame_read_reply(p, n, &v) == 1) {
    req_t *r = find_req(k, v.request_id);
    if (r && !r->bind &&
        (r->mode == TG_HOSTILE_INJECT || r->mode == TG_HOSTILE_INJECT_FIRST) &&
        !strcmp(r->name, "ReadBuffers"))
      return inject(k, r->mode, &v, p, n);
    if (r && !r->bind && r->mode != TG_HOSTILE_PASS &&
        !strcmp(r->name, "ReadBuffers"))
      return endless(k, r, &v);
    if (r && !r->bind && !strcmp(r->name, "ClockSync") &&
        atomic_load(&k->h->clock_sync_error)) {
      tg_ipc_reply_writer_t rw;
      tg_ipc_reply_begin(&rw, k->frame, sizeof(k->frame), v.request_id,
                         false, false);
      atomic_fetch_add(&k->h->clock_refused, 1);
      return send_reply(k, &rw);
    }
    /* The relay compresses what follows its yes (docs/protocol.md). */
    if (k->compress_req && v.request_id == k->compress_req && v.success)
      k->down.opaque = true;
  } else {
    learn_methods(k, p, n);
  }
  return tg_tls_write(k->ds, p - TG_IPC_FRAME_HEADER_SIZE,
                      n + TG_IPC_FRAME_HEADER_SIZE) == 0;
}

/* Cuts |s|'s plaintext into frames for |on_frame|; returns false when a
 * frame could not be passed on. What is opaque goes to |raw| as is. */
static bool cut_frames(conn_t *k, stream_t *s,
                       bool (*on_frame)(conn_t *, const uint8_t *, size_t),
                       tg_tls_session_t *raw) {
  while (!s->opaque && tg_buf_size(&s->in) >= TG_IPC_FRAME_HEADER_SIZE) {
    const uint8_t *b = tg_buf_begin(&s->in);
    uint32_t len = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                   (uint32_t)b[3] << 24;
    if (len > TG_IPC_FRAME_MAX_PAYLOAD) {
      s->opaque = true; /* not frames: forwarded as they come */
      break;
    }
    if (tg_buf_size(&s->in) < TG_IPC_FRAME_HEADER_SIZE + len) return true;
    if (!on_frame(k, b + TG_IPC_FRAME_HEADER_SIZE, len)) return false;
    tg_buf_consume(&s->in, TG_IPC_FRAME_HEADER_SIZE + len);
  }
  if (s->opaque && tg_buf_size(&s->in)) {
    if (tg_tls_write(raw, tg_buf_begin(&s->in), tg_buf_size(&s->in)) != 0)
      return false;
    tg_buf_reset(&s->in);
  }
  return true;
}

/* The client's frames are only looked at: they go on as they came. */
static bool pass_client_frame(conn_t *k, const uint8_t *p, size_t n) {
  client_frame(k, p, n);
  return tg_tls_write(k->us, p - TG_IPC_FRAME_HEADER_SIZE,
                      n + TG_IPC_FRAME_HEADER_SIZE) == 0;
}

/* Decrypts what |from| holds into |s| and passes it on. */
static bool pump(conn_t *k, tg_tls_session_t *from, stream_t *s,
                 bool (*on_frame)(conn_t *, const uint8_t *, size_t),
                 tg_tls_session_t *to) {
  for (;;) {
    uint8_t *at = tg_buf_reserve(&s->in, TG_TLS_RECORD_PLAIN_MAX);
    if (!at) return false;
    size_t n = 0;
    int rv = tg_tls_read(from, at, TG_TLS_RECORD_PLAIN_MAX, &n);
    if (rv == -EAGAIN) return cut_frames(k, s, on_frame, to);
    if (rv != 0) return false;
    tg_buf_commit(&s->in, n);
    if (!cut_frames(k, s, on_frame, to)) return false;
  }
}

/* --- a connection ----------------------------------------------------------- */

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Forges what is due: a flood while the client's TLS output has room; a
 * trickle's frame when its time came. Returns false when the client is
 * gone; *wait_ms: how long poll() may sleep before the next is due (-1:
 * until a socket wakes it). */
static bool forge_due(conn_t *k, int *wait_ms) {
  *wait_ms = -1;
  if (!k->flooding) return true;
  if (k->flood_mode != TG_HOSTILE_TRICKLE) {
    while (tg_buf_size(tg_tls_out(k->ds)) < FORGE_HIGH_WATER)
      if (!forge_frame(k)) return false;
    return true;
  }
  int64_t now = mono_ms();
  if (now >= k->next_trickle_ms) {
    if (!forge_frame(k)) return false;
    k->next_trickle_ms = now + TG_HOSTILE_TRICKLE_MS;
  }
  *wait_ms = (int)(k->next_trickle_ms - now);
  return true;
}

static int dial_relay(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

static void relay_loop(conn_t *k) {
  /* What came with either side's last handshake record is already in its
   * session, where poll() cannot see it. */
  if (!pump(k, k->ds, &k->up, pass_client_frame, k->us) ||
      !pump(k, k->us, &k->down, relay_frame, k->ds))
    return;
  for (;;) {
    int wait_ms;
    if (!forge_due(k, &wait_ms)) return;
    if (!flush_tls(k->ds, k->dfd) || !flush_tls(k->us, k->ufd)) return;
    /* Flooding: woken whenever the client can take more. */
    bool flood = k->flooding && k->flood_mode != TG_HOSTILE_TRICKLE;
    bool down_full = tg_buf_size(tg_tls_out(k->ds)) > 0 || flood;
    struct pollfd p[3] = {
        {k->dfd, (short)(POLLIN | (down_full ? POLLOUT : 0)), 0},
        {k->ufd, (short)(POLLIN | (tg_buf_size(tg_tls_out(k->us)) ? POLLOUT : 0)), 0},
        {k->h->stop[0], POLLIN, 0}};
    if (poll(p, 3, wait_ms) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[2].revents) return;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!fill_tls(k->ds, k->dfd) || !pump(k, k->ds, &k->up, pass_client_frame, k->us))
        return;
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!fill_tls(k->us, k->ufd) || !pump(k, k->us, &k->down, relay_frame, k->ds))
        return;
    }
  }
}

static void *conn_main(void *arg) {
  conn_t *k = arg;
  tg_hostile_relay_t *h = k->h;
  set_nonblock(k->dfd);
  if (tg_tls_session_new(h->server_cfg, NULL, 0, &k->ds) == 0 &&
      handshake(k, k->ds, k->dfd) && (k->ufd = dial_relay(h->target_port)) >= 0) {
    set_nonblock(k->ufd);
    if (tg_tls_session_new(h->client_cfg, h->server_name, 0, &k->us) == 0 &&
        handshake(k, k->us, k->ufd)) {
      atomic_fetch_add(&h->accepted, 1);
      relay_loop(k);
    }
  }
  /* A plain close both ways: the client and the relay see the link drop. */
  close(k->dfd);
  if (k->ufd >= 0) close(k->ufd);
  k->dfd = k->ufd = -1;
  atomic_store(&k->running, false);
  return NULL;
}

static void conn_free(conn_t *k) {
  tg_tls_session_free(k->ds);
  tg_tls_session_free(k->us);
  tg_buf_free(&k->up.in);
  tg_buf_free(&k->down.in);
  free(k);
}

/* A slot for a new connection: a free one, or one whose thread ended. */
static conn_t **free_slot(tg_hostile_relay_t *h) {
  for (size_t i = 0; i < MAX_CONNS; i++) {
    conn_t *k = h->conns[i];
    if (k && !atomic_load(&k->running)) {
      pthread_join(k->thread, NULL);
      conn_free(k);
      h->conns[i] = k = NULL;
    }
    if (!k) return &h->conns[i];
  }
  return NULL;
}

static void *accept_main(void *arg) {
  tg_hostile_relay_t *h = arg;
  for (;;) {
    struct pollfd p[2] = {{h->listen_fd, POLLIN, 0}, {h->stop[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents) break;
    if (!p[0].revents) continue;
    int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    conn_t **slot = free_slot(h);
    conn_t *k = slot ? calloc(1, sizeof(*k)) : NULL;
    if (k) {
      k->h = h;
      k->dfd = fd;
      k->ufd = -1;
      k->next_seq = FLOOD_FIRST_SEQ;
      k->next_ts = 1;
      memset(k->pad, 'x', sizeof(k->pad));
      memcpy(k->pad, "hostile:", 8);
      tg_buf_init(&k->up.in, 0);
      tg_buf_init(&k->down.in, 0);
      atomic_store(&k->running, true);
      if (pthread_create(&k->thread, NULL, conn_main, k) == 0) {
        *slot = k;
        k = NULL;
        fd = -1;
      } else {
        conn_free(k);
      }
    }
    if (fd >= 0) close(fd); /* no room: the client sees a close */
  }
  return NULL;
}

/* --- the API ------------------------------------------------------------------ */

static int tls_config(bool server, const char *cert, const char *key,
                      const char *ca, tg_tls_config_t **out, char *err,
                      size_t errlen) {
  tg_tls_opts_t o = {.server = server, .cert_file = cert, .key_file = key,
                     .ca_file = ca};
  return tg_tls_config_new(&o, out, err, errlen);
}

int tg_hostile_relay_start(const tg_hostile_opts_t *o, tg_hostile_relay_t **out,
                           char *err, size_t errlen) {
  tg_hostile_relay_t *h = calloc(1, sizeof(*h));
  if (!h) return -ENOMEM;
  h->listen_fd = h->stop[0] = h->stop[1] = -1;
  pthread_mutex_init(&h->inject_mu, NULL);
  tg_buf_init(&h->inject, 0);
  h->target_port = o->target_port;
  snprintf(h->server_name, sizeof(h->server_name), "%s", o->server_name);
  atomic_store(&h->mode, (int)o->mode);
  int rv = tls_config(true, o->cert_file, o->key_file, o->ca_file,
                      &h->server_cfg, err, errlen);
  if (rv == 0)
    rv = tls_config(false, o->client_cert_file, o->client_key_file, o->ca_file,
                    &h->client_cfg, err, errlen);
  if (rv < 0) goto fail;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof(a);
  h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
      listen(h->listen_fd, 16) ||
      getsockname(h->listen_fd, (struct sockaddr *)&a, &l) ||
      pipe2(h->stop, O_CLOEXEC)) {
    rv = -errno;
    snprintf(err, errlen, "listening: %s", strerror(errno));
    goto fail;
  }
  h->port = ntohs(a.sin_port);
  if ((rv = -pthread_create(&h->accept_thread, NULL, accept_main, h)) < 0) {
    snprintf(err, errlen, "pthread_create: %s", strerror(-rv));
    goto fail;
  }
  *out = h;
  return 0;
fail:
  if (h->listen_fd >= 0) close(h->listen_fd);
  if (h->stop[0] >= 0) close(h->stop[0]);
  if (h->stop[1] >= 0) close(h->stop[1]);
  tg_tls_config_free(h->client_cfg);
  tg_tls_config_free(h->server_cfg);
  tg_buf_free(&h->inject);
  pthread_mutex_destroy(&h->inject_mu);
  free(h);
  return rv;
}

void tg_hostile_relay_stop(tg_hostile_relay_t *h) {
  char b = 'q';
  while (write(h->stop[1], &b, 1) < 0 && errno == EINTR) {
  }
  pthread_join(h->accept_thread, NULL);
  for (size_t i = 0; i < MAX_CONNS; i++) {
    if (!h->conns[i]) continue;
    pthread_join(h->conns[i]->thread, NULL);
    conn_free(h->conns[i]);
  }
  close(h->listen_fd);
  close(h->stop[0]);
  close(h->stop[1]);
  tg_tls_config_free(h->client_cfg);
  tg_tls_config_free(h->server_cfg);
  tg_buf_free(&h->inject);
  pthread_mutex_destroy(&h->inject_mu);
  free(h);
}

int tg_hostile_relay_port(const tg_hostile_relay_t *h) { return h->port; }

void tg_hostile_relay_set_mode(tg_hostile_relay_t *h, tg_hostile_mode_t m) {
  atomic_store(&h->mode, (int)m);
}

void tg_hostile_relay_stats(tg_hostile_relay_t *h, tg_hostile_stats_t *st) {
  st->accepted = atomic_load(&h->accepted);
  st->endless_reads = atomic_load(&h->endless_reads);
  st->forged_packets = atomic_load(&h->forged_packets);
  st->forged_bytes = atomic_load(&h->forged_bytes);
  st->injected = atomic_load(&h->injected);
  st->clock_refused = atomic_load(&h->clock_refused);
}

int tg_hostile_relay_set_packets(tg_hostile_relay_t *h,
                                 const uint8_t *const *pkts,
                                 const size_t *lens, size_t n) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  for (size_t i = 0; i < n; i++) {
    if (lens[i] > TG_HOSTILE_INJECT_MAX) {
      tg_buf_free(&b);
      return -EMSGSIZE;
    }
    uint8_t *at = tg_buf_reserve(&b, 4 + lens[i]);
    if (!at) {
      tg_buf_free(&b);
      return -ENOMEM;
    }
    uint32_t len = (uint32_t)lens[i];
    for (int j = 0; j < 4; j++) at[j] = (uint8_t)(len >> (8 * j));
    if (len) memcpy(at + 4, pkts[i], len);
    tg_buf_commit(&b, 4 + lens[i]);
  }
  pthread_mutex_lock(&h->inject_mu);
  tg_buf_t old = h->inject;
  h->inject = b;
  h->inject_gen++;
  pthread_mutex_unlock(&h->inject_mu);
  tg_buf_free(&old);
  return 0;
}

void tg_hostile_relay_set_clock_sync_error(tg_hostile_relay_t *h, bool on) {
  atomic_store(&h->clock_sync_error, on);
}
