/* tg_tls_chan: libuv TCP + tls/session.h sessions + the IPC frame codec.
 * The client's way to a connected socket is in tls/dial.c. */
#include "tls/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/ipc_frame.h"
#include "common/log.h"
#include "ipc/net_addr.h"
#include "ipc/net_addr_dial.h"
#include "tls/transport_internal.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

#define DEFAULT_HANDSHAKE_TIMEOUT_MS 10000u
#define DEFAULT_HIGH_WATER (4u * 1024 * 1024)
/* Ciphertext read from the socket per read call. */
#define READ_CHUNK (128u * 1024)
/* Plaintext decrypted per decoder feed; bounds what a pause lets through. */
#define PLAIN_CAP (256u * 1024)
/* Records encrypted per write: big writes, few syscalls and wakeups,
 * while control frames still wait behind at most this much. */
#define WRITE_BATCH (256u * 1024)
/* Ciphertext the session may buffer unread (we stop reading while paused,
 * so this is one read chunk plus a record, with room to spare). */
#define TLS_IN_MAX (1024u * 1024)

static const tg_transport_ops_t chan_ops;

static void chan_close(tg_tls_chan_t *ch, int status);
static void pump_output(tg_tls_chan_t *ch);
static int encrypt_queued(tg_tls_chan_t *ch, size_t limit);

static const char *role(const tg_tls_chan_t *ch) {
  return ch->server ? "client" : "server";
}

void tg__tls_chan_set_why(tg_tls_chan_t *ch, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ch->why, sizeof(ch->why), fmt, ap);
  va_end(ap);
}

static size_t queued_out(const tg_tls_chan_t *ch) {
  size_t n = tg_buf_size(&ch->ctl) + tg_buf_size(&ch->bulk);
  if (ch->tls) n += tg_buf_size(tg_tls_out(ch->tls));
  if (ch->writing) n += tg_buf_size(&ch->wbuf);
  return n;
}

/* --- closing ------------------------------------------------------------- */

void tg__tls_chan_finish(tg_tls_chan_t *ch) {
  if (ch->handles_open > 0 || ch->dial) return;
  ch->state = ST_CLOSED;
  tg_frame_decoder_free(&ch->dec);
  free(ch->plain);
  ch->plain = NULL;
  tg_buf_free(&ch->ctl);
  tg_buf_free(&ch->bulk);
  tg_buf_free(&ch->wbuf);
  tg_tls_session_free(ch->tls);
  ch->tls = NULL;
  if (ch->silent) {
    free(ch);
    return;
  }
  ch->base.cbs->on_close(&ch->base, ch->close_status); /* may free ch */
}

static void on_handle_closed(uv_handle_t *h) {
  tg_tls_chan_t *ch = h->data;
  ch->handles_open--;
  tg__tls_chan_finish(ch);
}

static void chan_close(tg_tls_chan_t *ch, int status) {
  if (ch->state >= ST_CLOSING) return;
  if (ch->state == ST_OPEN || ch->state == ST_HANDSHAKE) {
    /* Best effort, never waiting: a close_notify for an orderly close,
     * ours (0, or -ECANCELED: the owner is done with the channel) or the
     * peer's (which must be answered with one, RFC 5246 7.2.1: OpenSSL
     * peers report a truncation otherwise), and whatever ciphertext (an
     * alert) is still unsent. A close on a failure sends none. */
    /* Frames sent just before the close leave with it (they wait for the
     * loop's flush otherwise); not behind a write still in flight. */
    if (ch->state == ST_OPEN && !ch->writing)
      (void)encrypt_queued(ch, SIZE_MAX);
    if (ch->state == ST_OPEN &&
        (status == 0 || status == -ECANCELED || status == TG_EPEER_CLOSED))
      tg_tls_close_notify(ch->tls);
    /* A handshake step on the thread pool owns the session. */
    tg_buf_t *out = ch->hs_working ? NULL : tg_tls_out(ch->tls);
    if (out && !ch->writing && tg_buf_size(out) > 0) {
      uv_buf_t b = uv_buf_init((char *)tg_buf_begin(out),
                               (unsigned)tg_buf_size(out));
      (void)uv_try_write((uv_stream_t *)&ch->tcp, &b, 1);
    }
  }
  ch->state = ST_CLOSING;
  ch->close_status = status;
  /* A dial still running reports to tls/dial.c, which then finishes. */
  if (ch->dial) tg_net_dial_cancel(ch->dial);
  uv_close((uv_handle_t *)&ch->tcp, on_handle_closed);
  uv_close((uv_handle_t *)&ch->timer, on_handle_closed);
  uv_close((uv_handle_t *)&ch->kick, on_handle_closed);
  uv_close((uv_handle_t *)&ch->flush, on_handle_closed);
}

/* Ends the handshake phase with a failure: one log line, on_handshake, then
 * close with the same status. */
void tg__tls_chan_fail_handshake(tg_tls_chan_t *ch, int status) {
  if (ch->state >= ST_CLOSING) return;
  if (ch->dial) tg__tls_chan_note_addr(ch, tg_net_dial_addr(ch->dial));
  /* The owner says it (tg_tls_chan_error() carries the details): a
   * client's to its user in plain words, a server's to its operator at a
   * rate it chooses (a peer that opens connections in a loop must not
   * write a line each), so the library's raw line is for debugging. */
  TG_DEBUG("tls: %s %s refused: %s: %s", role(ch), ch->peer,
           tg_strerror(status), ch->why[0] ? ch->why : "no details");
  if (!ch->hs_reported) {
    ch->hs_reported = true;
    ch->opts.on_handshake(ch, status);
  }
  chan_close(ch, status);
}

static void fail_open(tg_tls_chan_t *ch, int status, const char *what) {
  if (ch->state >= ST_CLOSING) return;
  if (ch->why[0] == 0) tg__tls_chan_set_why(ch, "%s", what);
  TG_WARN("tls: %s %s (%s): %s: %s; closing", role(ch), ch->peer,
          ch->identity[0] ? ch->identity : "-", what, tg_strerror(status));
  chan_close(ch, status);
}

/* --- output -------------------------------------------------------------- */

static void on_written(uv_write_t *req, int status);

/* Writes the session's ciphertext: at once as far as the socket takes it
 * (no request, no poll for writability), the rest through one uv_write
 * (zero-copy swap), after which |writing| holds until on_written. */
static int start_write(tg_tls_chan_t *ch) {
  tg_buf_t *out = tg_tls_out(ch->tls);
  size_t n = tg_buf_size(out);
  if (ch->writing || n == 0) return 0;
  uv_buf_t b = uv_buf_init((char *)tg_buf_begin(out), (unsigned)n);
  int w = uv_try_write((uv_stream_t *)&ch->tcp, &b, 1);
  if (w < 0 && w != UV_EAGAIN) return w;
  if (w > 0) {
    tg_buf_consume(out, (size_t)w);
    ch->last_activity = uv_now(ch->loop);
    if ((size_t)w == n) return 0;
  }
  tg_buf_reset(&ch->wbuf);
  tg_tls_swap_out(ch->tls, &ch->wbuf);
  b = uv_buf_init((char *)tg_buf_begin(&ch->wbuf),
                  (unsigned)tg_buf_size(&ch->wbuf));
  int rv = uv_write(&ch->wreq, (uv_stream_t *)&ch->tcp, &b, 1, on_written);
  if (rv < 0) return rv;
  ch->writing = true;
  return 0;
}

/* Encrypts the control queue whole, then whole bulk frames until about
 * |limit| bytes of records are pending. */
static int encrypt_queued(tg_tls_chan_t *ch, size_t limit) {
  int rv;
  if (tg_buf_size(&ch->ctl) > 0) {
    rv = tg_tls_write(ch->tls, tg_buf_begin(&ch->ctl), tg_buf_size(&ch->ctl));
    if (rv) return rv;
    tg_buf_reset(&ch->ctl);
  }
  size_t have = tg_buf_size(tg_tls_out(ch->tls));
  size_t avail = tg_buf_size(&ch->bulk);
  if (avail == 0 || have >= limit) return 0;
  size_t budget = limit - have;
  const uint8_t *p = tg_buf_begin(&ch->bulk);
  size_t span = 0;
  /* The queue holds whole frames validated by send(), so the walk lands
   * exactly on |avail|. */
  while (span < avail && span < budget)
    span += TG_IPC_FRAME_HEADER_SIZE + tg_pb_read_le32(p + span);
  rv = tg_tls_write(ch->tls, p, span);
  if (rv) return rv;
  tg_buf_consume(&ch->bulk, span);
  return 0;
}

/* Encrypts and writes until the queues are empty or the socket is full.
 * Only from loop callbacks while handshaking (a failure then reports
 * through on_handshake); once open, never from inside send(). */
static void pump_output(tg_tls_chan_t *ch) {
  if (ch->state != ST_OPEN && ch->state != ST_HANDSHAKE) return;
  uv_idle_stop(&ch->flush);
  while (!ch->writing && (ch->state == ST_OPEN || ch->state == ST_HANDSHAKE)) {
    if (ch->state == ST_OPEN) {
      int rv = encrypt_queued(ch, WRITE_BATCH);
      if (rv) {
        tg__tls_chan_set_why(ch, "%s", tg_tls_last_error(ch->tls));
        fail_open(ch, rv, "encrypting output failed");
        return;
      }
    }
    if (tg_buf_size(tg_tls_out(ch->tls)) == 0) break;
    int rv = start_write(ch);
    if (rv == 0) continue;
    if (ch->state == ST_HANDSHAKE) {
      tg__tls_chan_set_why(ch, "write: %s", uv_strerror(rv));
      tg__tls_chan_fail_handshake(ch, rv);
    } else {
      fail_open(ch, rv, "write failed");
    }
    return;
  }
  if (ch->state != ST_OPEN) return;
  if (ch->above_high_water && queued_out(ch) <= ch->opts.high_water / 4) {
    ch->above_high_water = false;
    if (ch->base.cbs->on_drain) ch->base.cbs->on_drain(&ch->base);
  }
}

/* What was sent during one loop iteration leaves as one write. */
static void on_flush(uv_idle_t *h) { pump_output(h->data); }

static void on_written(uv_write_t *req, int status) {
  tg_tls_chan_t *ch = req->data;
  ch->writing = false;
  if (ch->state >= ST_CLOSING) return;
  if (status < 0) {
    fail_open(ch, status, "write failed");
    return;
  }
  tg_buf_reset(&ch->wbuf); /* keep the allocation for the next swap */
  ch->last_activity = uv_now(ch->loop);
  pump_output(ch);
}

static bool frame_ok(const uint8_t *frame, size_t len) {
  return len >= TG_IPC_FRAME_HEADER_SIZE && len <= TG_IPC_FRAME_BUFFER_SIZE &&
         tg_pb_read_le32(frame) == len - TG_IPC_FRAME_HEADER_SIZE;
}

/* Queues [|hdr| (4 bytes) if given][|data|] on |q| as one frame. */
static int queue_parts(tg_tls_chan_t *ch, tg_buf_t *q, const uint8_t *hdr,
                       const uint8_t *data, size_t len) {
  if (ch->state >= ST_CLOSING) return -EPIPE;
  size_t total = len + (hdr ? TG_IPC_FRAME_HEADER_SIZE : 0);
  size_t queued = queued_out(ch);
  if (total > ch->opts.max_queued || queued > ch->opts.max_queued - total)
    return -ENOBUFS;
  uint8_t *p = tg_buf_reserve(q, total);
  if (!p) return -ENOMEM;
  if (hdr) {
    memcpy(p, hdr, TG_IPC_FRAME_HEADER_SIZE);
    p += TG_IPC_FRAME_HEADER_SIZE;
  }
  memcpy(p, data, len);
  tg_buf_commit(q, total);
  if (queued + total > ch->opts.high_water) ch->above_high_water = true;
  /* Whatever else this loop iteration sends goes in the same write; with
   * a write in flight, its callback takes what accumulated; before the
   * handshake, handshake_done() sends the queue. */
  if (!ch->writing && ch->state == ST_OPEN) uv_idle_start(&ch->flush, on_flush);
  return 0;
}

static int queue_frame(tg_tls_chan_t *ch, tg_buf_t *q, const uint8_t *frame,
                       size_t len) {
  if (ch->state >= ST_CLOSING) return -EPIPE;
  if (!frame_ok(frame, len)) return -EINVAL;
  return queue_parts(ch, q, NULL, frame, len);
}

int tg_tls_chan_send_payload(tg_tls_chan_t *ch, const uint8_t *payload,
                             size_t len, bool priority) {
  if (len > TG_IPC_FRAME_MAX_PAYLOAD) return -EINVAL;
  uint8_t hdr[TG_IPC_FRAME_HEADER_SIZE];
  tg_pb_write_le32(hdr, (uint32_t)len);
  return queue_parts(ch, priority ? &ch->ctl : &ch->bulk, hdr, payload, len);
}

int tg_tls_chan_send_barrier(tg_tls_chan_t *ch, const uint8_t *frame,
                             size_t len) {
  if (ch->state >= ST_CLOSING) return -EPIPE;
  if (ch->state != ST_OPEN) return -ENOTCONN;
  if (!frame_ok(frame, len)) return -EINVAL;
  /* Both queues into the session's output, in the order they go out
   * anyway; the frame then leads the control queue, which goes first. */
  int rv = encrypt_queued(ch, SIZE_MAX);
  if (rv) {
    tg__tls_chan_set_why(ch, "%s", tg_tls_last_error(ch->tls));
    fail_open(ch, rv, "encrypting output failed");
    return rv;
  }
  return queue_frame(ch, &ch->ctl, frame, len);
}

static int t_send(tg_transport_t *t, const uint8_t *frame, size_t len,
                  int fd) {
  if (fd >= 0) {
    close(fd); /* fds cannot cross a network */
    return -EOPNOTSUPP;
  }
  tg_tls_chan_t *ch = (tg_tls_chan_t *)t;
  return queue_frame(ch, &ch->bulk, frame, len);
}

int tg_tls_chan_send_priority(tg_tls_chan_t *ch, const uint8_t *frame,
                              size_t len) {
  return queue_frame(ch, &ch->ctl, frame, len);
}

static int t_take_fd(tg_transport_t *t) {
  (void)t;
  return -1;
}

static bool t_congested(const tg_transport_t *t) {
  return ((const tg_tls_chan_t *)t)->above_high_water;
}

static size_t t_pending(const tg_transport_t *t) {
  return queued_out((const tg_tls_chan_t *)t);
}

/* --- input --------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  tg_tls_chan_t *ch = h->data;
  uint8_t *p = tg_buf_reserve(tg_tls_in(ch->tls), READ_CHUNK);
  /* NULL makes libuv report UV_ENOBUFS to on_read. */
  *buf = uv_buf_init((char *)p, p ? READ_CHUNK : 0);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void update_reading(tg_tls_chan_t *ch) {
  /* While a handshake step runs on the thread pool the session is the
   * worker's: no read may land in its input. */
  bool want = (ch->state == ST_HANDSHAKE && !ch->hs_working) ||
              (ch->state == ST_OPEN && !ch->reading_paused && !ch->eof_pending);
  if (want == ch->reading) return;
  if (want) {
    int rv = uv_read_start((uv_stream_t *)&ch->tcp, on_alloc, on_read);
    if (rv) {
      fail_open(ch, rv, "cannot start reading");
      return;
    }
  } else {
    uv_read_stop((uv_stream_t *)&ch->tcp);
  }
  ch->reading = want;
}

static int on_decoded(void *ctx, const uint8_t *payload, size_t len) {
  tg_tls_chan_t *ch = ctx;
  if (ch->state != ST_OPEN) return 1;
  int rv = ch->base.cbs->on_frame(&ch->base, payload, len);
  if (ch->state != ST_OPEN) return 1;
  return rv;
}

/* Decrypts records into |plain| until it is full or, so that little of a
 * large frame is copied into the decoder, a frame begun in it still lacks a
 * record or more: its rest is then decrypted in place (read_app). |done| is
 * how much of |plain| completes the decoder's partial frame, SIZE_MAX when
 * that is unknown (its length is not in yet): then |plain| is just filled.
 * Returns the last tg_tls_read() status; *have is what |plain| holds. */
static int read_plain(tg_tls_chan_t *ch, size_t done, size_t *have) {
  size_t at = done; /* start of the first frame not known to be whole */
  int rv = 0;
  /* Room for a whole record each time: a smaller read would make the
   * session keep the rest of one (16 KiB more per connection). */
  while (PLAIN_CAP - *have >= TG_TLS_RECORD_PLAIN_MAX) {
    size_t k = 0;
    rv = tg_tls_read(ch->tls, ch->plain + *have, PLAIN_CAP - *have, &k);
    if (rv) break;
    *have += k;
    while (at != SIZE_MAX && at + TG_IPC_FRAME_HEADER_SIZE <= *have) {
      uint64_t end = (uint64_t)at + TG_IPC_FRAME_HEADER_SIZE +
                     tg_pb_read_le32(ch->plain + at); /* checked by feed */
      if (end > *have) {
        if (end - *have >= TG_TLS_RECORD_PLAIN_MAX) return rv;
        break;
      }
      at = (size_t)end;
    }
  }
  return rv;
}

/* Decrypts and dispatches until the session holds nothing complete, the
 * owner pauses, or the channel closes. */
/* The peer's stream ended (FIN) with no close_notify before it: a cut
 * (an error, a crash, or someone on the path ending it early), never the
 * end of what the peer meant to send. */
static void truncated(tg_tls_chan_t *ch) {
  tg__tls_chan_set_why(ch, "connection closed without close_notify");
  TG_DEBUG("tls: %s %s (%s): %s", role(ch), ch->peer, ch->identity, ch->why);
  chan_close(ch, TG_ETLS_TRUNCATED);
}

static void read_app(tg_tls_chan_t *ch) {
  while (ch->state == ST_OPEN && !ch->reading_paused) {
    int rv = 0, frv = 0;
    /* The rest of a frame that needs a record or more is decrypted where
     * the decoder assembles it: a 128 KiB frame spans 8 records. */
    uint8_t *at = NULL;
    size_t room = tg_frame_decoder_room(&ch->dec, &at);
    if (room >= TG_TLS_RECORD_PLAIN_MAX) {
      size_t k = 0;
      rv = tg_tls_read(ch->tls, at, room, &k);
      if (rv == 0) frv = tg_frame_decoder_wrote(&ch->dec, k, on_decoded, ch);
    } else {
      size_t have = 0;
      bool len_known =
          tg_frame_decoder_pending(&ch->dec) >= TG_IPC_FRAME_HEADER_SIZE;
      rv = read_plain(ch, room && !len_known ? SIZE_MAX : room, &have);
      if (have > 0)
        frv = tg_frame_decoder_feed(&ch->dec, ch->plain, have, on_decoded, ch);
    }
    if (ch->state != ST_OPEN) return;
    if (frv == TG_EFRAME_TOO_LARGE) {
      tg__tls_chan_set_why(ch, "frame length over %u bytes",
                           TG_IPC_FRAME_MAX_PAYLOAD);
      fail_open(ch, frv, "oversized frame");
      return;
    }
    if (frv == -ENOMEM) {
      fail_open(ch, frv, "no memory for a split frame");
      return;
    }
    if (frv != 0) {
      /* The decoder dropped the rest of this input: the stream cannot
       * continue in sync. Owners return non-zero only when closing. */
      fail_open(ch, -ECONNABORTED, "frame handler stopped mid-input");
      return;
    }
    if (rv == -EAGAIN) break;
    if (rv == TG_EPEER_CLOSED) {
      TG_DEBUG("tls: %s %s (%s): close_notify", role(ch), ch->peer,
               ch->identity);
      chan_close(ch, TG_EPEER_CLOSED);
      return;
    }
    if (rv < 0) {
      tg__tls_chan_set_why(ch, "%s", tg_tls_last_error(ch->tls));
      TG_WARN("tls: %s %s (%s): %s: %s; closing", role(ch), ch->peer,
              ch->identity, tg_strerror(rv), ch->why);
      chan_close(ch, rv);
      return;
    }
  }
  if (ch->state != ST_OPEN) return;
  if (ch->eof_pending && !ch->reading_paused) {
    /* Every complete record is consumed, and none was close_notify (that
     * closes above): the stream was cut, not ended. */
    truncated(ch);
    return;
  }
  pump_output(ch); /* reading may have queued alerts */
}

static void on_kick(uv_idle_t *h) {
  tg_tls_chan_t *ch = h->data;
  uv_idle_stop(h);
  if (ch->state == ST_OPEN && !ch->reading_paused) read_app(ch);
}

static void on_timer(uv_timer_t *t);

static void handshake_done(tg_tls_chan_t *ch) {
  ch->state = ST_OPEN;
  uv_timer_stop(&ch->timer);
  const char *id = tg_tls_peer_identity(ch->tls);
  snprintf(ch->identity, sizeof(ch->identity), "%s", id ? id : "");
  snprintf(ch->suite, sizeof(ch->suite), "%s", tg_tls_ciphersuite(ch->tls));
  ch->resumed = tg_tls_session_resumed(ch->tls);
  TG_INFO("tls: %s %s: verified, identity '%s', %s (records: %s), %s",
          role(ch), ch->peer, ch->identity, ch->suite, tg_tls_records(ch->tls),
          ch->resumed ? "resumed" : "full handshake");
  ch->plain = malloc(PLAIN_CAP);
  if (!ch->plain) {
    tg__tls_chan_fail_handshake(ch, -ENOMEM);
    return;
  }
  ch->hs_reported = true;
  ch->opts.on_handshake(ch, 0);
  if (ch->state != ST_OPEN) return;
  ch->last_activity = uv_now(ch->loop);
  if (ch->opts.idle_timeout_ms)
    uv_timer_start(&ch->timer, on_timer, ch->opts.idle_timeout_ms, 0);
  update_reading(ch);
  pump_output(ch); /* frames queued before the handshake */
}

/* A server's first bytes must start a TLS handshake record (type 22,
 * version 3.x); anything else is refused with what it looked like. */
static bool sniff_tls(tg_tls_chan_t *ch) {
  tg_buf_t *in = tg_tls_in(ch->tls);
  size_t n = tg_buf_size(in);
  const uint8_t *p_untrusted = tg_buf_begin(in);
  if (n == 0) return true;
  if (p_untrusted[0] == 0x16 && (n < 2 || p_untrusted[1] == 0x03)) {
    if (n >= 2) ch->sniffed = true;
    return true;
  }
  char hex[3 * 8 + 1] = "";
  size_t k = n < 8 ? n : 8;
  for (size_t i = 0; i < k; i++)
    snprintf(hex + 3 * i, sizeof(hex) - 3 * i, "%02x ", p_untrusted[i]);
  if (k) hex[3 * k - 1] = 0;
  bool ipc_like = n >= 4 && tg_pb_read_le32(p_untrusted) <= TG_IPC_FRAME_MAX_PAYLOAD;
  tg__tls_chan_set_why(ch, "first bytes %s are not a TLS handshake record%s", hex,
          ipc_like ? " (a plain IPC frame? the client must use TLS)" : "");
  return false;
}

static void handshake_stepped(tg_tls_chan_t *ch, int rv);

/* On the thread pool: the session is this thread's until hs_after. */
static void hs_work(uv_work_t *w) {
  tg_tls_chan_t *ch = w->data;
  ch->hs_rv = tg_tls_handshake(ch->tls);
}

static void hs_after(uv_work_t *w, int status) {
  tg_tls_chan_t *ch = w->data;
  ch->hs_working = false;
  ch->handles_open--;
  if (ch->state >= ST_CLOSING) {
    tg__tls_chan_finish(ch); /* the step was the last thing open */
    return;
  }
  if (status < 0) { /* cancelled: cannot happen once queued */
    tg__tls_chan_set_why(ch, "handshake step: %s", uv_strerror(status));
    tg__tls_chan_fail_handshake(ch, status);
    return;
  }
  update_reading(ch);
  if (ch->state != ST_HANDSHAKE) return;
  handshake_stepped(ch, ch->hs_rv);
  if (ch->state == ST_OPEN && !ch->reading_paused) read_app(ch);
}

static void process_handshake(tg_tls_chan_t *ch) {
  if (ch->server && !ch->sniffed && !sniff_tls(ch)) {
    tg__tls_chan_fail_handshake(ch, TG_ETLS_NOT_TLS);
    return;
  }
  if (ch->opts.threaded_handshake && tg_buf_size(tg_tls_in(ch->tls)) > 0) {
    /* The public-key work of a step is a millisecond or more: on the
     * thread pool, many handshakes at once use every core. Counted as an
     * open handle, so that the channel outlives the step. */
    ch->hs_working = true;
    update_reading(ch);
    ch->hs_req.data = ch;
    int rv = uv_queue_work(ch->loop, &ch->hs_req, hs_work, hs_after);
    if (rv == 0) {
      ch->handles_open++;
      return;
    }
    ch->hs_working = false;
    update_reading(ch);
  }
  handshake_stepped(ch, tg_tls_handshake(ch->tls));
}

/* After a handshake step returned |rv|. */
static void handshake_stepped(tg_tls_chan_t *ch, int rv) {
  pump_output(ch); /* handshake messages, or the alert that says why */
  if (ch->state != ST_HANDSHAKE) return;
  if (rv == -EAGAIN) return;
  if (rv < 0) {
    tg__tls_chan_set_why(ch, "%s", tg_tls_last_error(ch->tls));
    tg__tls_chan_fail_handshake(ch, rv);
    return;
  }
  handshake_done(ch);
}

static void process_input(tg_tls_chan_t *ch) {
  if (ch->state == ST_HANDSHAKE) process_handshake(ch);
  if (ch->state == ST_OPEN && !ch->reading_paused) read_app(ch);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  tg_tls_chan_t *ch = s->data;
  if (ch->state >= ST_CLOSING) return;
  if (nread > 0) {
    ch->answered = true;
    tg_buf_commit(tg_tls_in(ch->tls), (size_t)nread);
    ch->last_activity = uv_now(ch->loop);
    process_input(ch);
    return;
  }
  if (nread == 0) return;
  if (ch->state == ST_HANDSHAKE && !ch->server && !ch->answered &&
      (nread == UV_EOF || nread == UV_ECONNRESET)) {
    /* Taken and closed without a word (a reset when our ClientHello was
     * still unread): what a relay does at its connection limit. */
    tg__tls_chan_set_why(ch, "closed the connection before answering the "
                             "handshake (a relay at its --max-conns limit "
                             "does so; its log says why)");
    tg__tls_chan_fail_handshake(ch, TG_EPEER_CLOSED);
    return;
  }
  if (nread == UV_EOF) {
    if (ch->state == ST_HANDSHAKE) {
      tg__tls_chan_set_why(ch, "closed the connection during the handshake");
      tg__tls_chan_fail_handshake(ch, TG_EPEER_CLOSED);
      return;
    }
    if (ch->reading_paused) {
      ch->eof_pending = true; /* deliver what is buffered first */
      update_reading(ch);
      return;
    }
    truncated(ch);
    return;
  }
  if (nread == UV_ENOBUFS) tg__tls_chan_set_why(ch, "input buffer full");
  else tg__tls_chan_set_why(ch, "read: %s", uv_strerror((int)nread));
  if (ch->state == ST_HANDSHAKE)
    tg__tls_chan_fail_handshake(ch, (int)nread);
  else
    fail_open(ch, (int)nread, "read failed");
}

static void t_pause_reading(tg_transport_t *t, bool paused) {
  tg_tls_chan_t *ch = (tg_tls_chan_t *)t;
  if (ch->state >= ST_CLOSING || ch->reading_paused == paused) return;
  ch->reading_paused = paused;
  if (ch->state != ST_OPEN) return; /* the handshake reads regardless */
  update_reading(ch);
  /* Input left in the session is processed from the loop, not inside
   * this call. */
  if (!paused) uv_idle_start(&ch->kick, on_kick);
}

/* --- timers -------------------------------------------------------------- */

static void on_timer(uv_timer_t *t) {
  tg_tls_chan_t *ch = t->data;
  if (ch->state < ST_OPEN) {
    tg__tls_chan_set_why(ch, "no verified peer within %" PRIu32 " ms",
            ch->opts.handshake_timeout_ms);
    tg__tls_chan_fail_handshake(ch, TG_ETIMEOUT);
    return;
  }
  if (ch->state != ST_OPEN || ch->opts.idle_timeout_ms == 0) return;
  uint64_t idle = uv_now(ch->loop) - ch->last_activity;
  if (idle >= ch->opts.idle_timeout_ms) {
    tg__tls_chan_set_why(ch, "idle for %" PRIu64 " ms", idle);
    fail_open(ch, TG_ETIMEOUT, "idle timeout");
    return;
  }
  uv_timer_start(t, on_timer, ch->opts.idle_timeout_ms - idle, 0);
}

void tg_tls_chan_set_idle_timeout(tg_tls_chan_t *ch, uint32_t ms) {
  ch->opts.idle_timeout_ms = ms;
  if (ch->state != ST_OPEN) return;
  if (ms) uv_timer_start(&ch->timer, on_timer, ms, 0);
  else uv_timer_stop(&ch->timer);
}

/* --- construction -------------------------------------------------------- */

static void t_close(tg_transport_t *t, int status) {
  chan_close((tg_tls_chan_t *)t, status);
}

static int t_send_frame(tg_transport_t *t, const uint8_t *frame, size_t len,
                        tg_frame_class_t cls) {
  tg_tls_chan_t *ch = (tg_tls_chan_t *)t;
  switch (cls) {
  case TG_FRAME_CONTROL:
    return tg_tls_chan_send_priority(ch, frame, len);
  case TG_FRAME_BARRIER:
    return tg_tls_chan_send_barrier(ch, frame, len);
  case TG_FRAME_BULK:
    break;
  }
  return queue_frame(ch, &ch->bulk, frame, len);
}

static void t_set_idle_timeout(tg_transport_t *t, uint32_t ms) {
  tg_tls_chan_set_idle_timeout((tg_tls_chan_t *)t, ms);
}

static const char *t_error(const tg_transport_t *t) {
  return tg_tls_chan_error((const tg_tls_chan_t *)t);
}

static const tg_transport_ops_t chan_ops = {
    .send = t_send,
    .take_fd = t_take_fd,
    .congested = t_congested,
    .pending = t_pending,
    .pause_reading = t_pause_reading,
    .close = t_close,
    .send_frame = t_send_frame,
    .set_idle_timeout = t_set_idle_timeout,
    .error = t_error,
};

int tg__tls_chan_new(uv_loop_t *loop, tg_tls_config_t *cfg,
                     const char *hostname, const tg_tls_chan_opts_t *opts,
                     const tg_transport_cbs_t *cbs, void *data,
                     tg_tls_chan_t **out) {
  *out = NULL;
  if (!opts || !opts->on_handshake || !cbs || !cbs->on_frame ||
      !cbs->on_close)
    return -EINVAL;
  tg_tls_chan_t *ch = calloc(1, sizeof(*ch));
  if (!ch) return -ENOMEM;
  ch->base.ops = &chan_ops;
  ch->base.cbs = cbs;
  ch->base.data = data;
  ch->loop = loop;
  ch->server = tg_tls_config_is_server(cfg);
  ch->opts = *opts;
  if (!ch->opts.handshake_timeout_ms)
    ch->opts.handshake_timeout_ms = DEFAULT_HANDSHAKE_TIMEOUT_MS;
  if (!ch->opts.high_water) ch->opts.high_water = DEFAULT_HIGH_WATER;
  if (!ch->opts.max_queued)
    ch->opts.max_queued = ch->opts.high_water > SIZE_MAX / 16
                              ? SIZE_MAX
                              : 16 * ch->opts.high_water;
  tg_frame_decoder_init(&ch->dec);
  tg_buf_init(&ch->ctl, 0);
  tg_buf_init(&ch->bulk, 0);
  tg_buf_init(&ch->wbuf, 0);
  /* Borrowed for this call only: not kept past it. */
  ch->opts.resume_session = NULL;
  ch->opts.resume_session_len = 0;
  int rv = tg_tls_session_new(cfg, hostname, TLS_IN_MAX, &ch->tls);
  if (rv) {
    free(ch);
    return rv;
  }
  if (!ch->server && opts->resume_session && opts->resume_session_len) {
    rv = tg_tls_session_offer(ch->tls, opts->resume_session,
                              opts->resume_session_len);
    /* A session mbedtls cannot use costs a full handshake, nothing more. */
    if (rv == -ENOMEM) {
      tg_tls_session_free(ch->tls);
      free(ch);
      return rv;
    }
  }
  rv = uv_tcp_init(loop, &ch->tcp);
  if (rv) {
    tg_tls_session_free(ch->tls);
    free(ch);
    return rv;
  }
  uv_timer_init(loop, &ch->timer);
  uv_idle_init(loop, &ch->kick);
  uv_idle_init(loop, &ch->flush);
  ch->tcp.data = ch->timer.data = ch->kick.data = ch->flush.data = ch;
  ch->wreq.data = ch;
  ch->handles_open = 4;
  *out = ch;
  return 0;
}

void tg__tls_chan_abort(tg_tls_chan_t *ch) {
  ch->silent = true;
  chan_close(ch, 0);
}

void tg__tls_chan_start_timer(tg_tls_chan_t *ch) {
  uv_timer_start(&ch->timer, on_timer, ch->opts.handshake_timeout_ms, 0);
}

void tg__tls_chan_note_addr(tg_tls_chan_t *ch, const char *addr) {
  if (!addr[0]) return;
  size_t base_len = strcspn(ch->peer, " ");
  snprintf(ch->peer + base_len, sizeof(ch->peer) - base_len, " (%s)", addr);
}

void tg__tls_chan_connected(tg_tls_chan_t *ch) {
  uv_tcp_nodelay(&ch->tcp, 1);
  ch->state = ST_HANDSHAKE;
  update_reading(ch);
  if (ch->state == ST_HANDSHAKE) process_handshake(ch); /* ClientHello */
}

int tg_tls_chan_accept(uv_stream_t *server, tg_tls_config_t *cfg,
                       const tg_tls_chan_opts_t *opts,
                       const tg_transport_cbs_t *cbs, void *data,
                       tg_tls_chan_t **out) {
  if (!tg_tls_config_is_server(cfg)) return -EINVAL;
  tg_tls_chan_t *ch;
  int rv = tg__tls_chan_new(server->loop, cfg, NULL, opts, cbs, data, &ch);
  if (rv) return rv;
  rv = uv_accept(server, (uv_stream_t *)&ch->tcp);
  if (rv) {
    tg__tls_chan_abort(ch);
    return rv;
  }
  struct sockaddr_storage ss;
  int sl = sizeof(ss);
  if (uv_tcp_getpeername(&ch->tcp, (struct sockaddr *)&ss, &sl) == 0)
    tg_net_sockaddr_format((struct sockaddr *)&ss, ch->peer,
                           sizeof(ch->peer));
  else
    snprintf(ch->peer, sizeof(ch->peer), "(unknown peer)");
  uv_tcp_nodelay(&ch->tcp, 1);
  uv_os_fd_t fd;
  if (ch->opts.dead_link_timeout_s &&
      uv_fileno((uv_handle_t *)&ch->tcp, &fd) == 0)
    tg_net_set_dead_link_timeout(fd, ch->opts.dead_link_timeout_s);
  ch->state = ST_HANDSHAKE;
  tg__tls_chan_start_timer(ch);
  rv = uv_read_start((uv_stream_t *)&ch->tcp, on_alloc, on_read);
  if (rv) {
    tg__tls_chan_abort(ch);
    return rv;
  }
  ch->reading = true;
  *out = ch;
  return 0;
}

/* --- accessors ----------------------------------------------------------- */

void tg_tls_chan_free(tg_tls_chan_t *ch) {
  if (!ch) return;
  /* Everything else went in finish(); only the struct is left. */
  free(ch);
}

tg_transport_t *tg_tls_chan_transport(tg_tls_chan_t *ch) { return &ch->base; }

tg_tls_chan_t *tg_tls_chan_from_transport(tg_transport_t *t) {
  return t && t->ops == &chan_ops ? (tg_tls_chan_t *)t : NULL;
}

bool tg_tls_chan_resumed(const tg_tls_chan_t *ch) { return ch->resumed; }

void *tg_tls_chan_owner(const tg_tls_chan_t *ch) { return ch->opts.owner; }

int tg_tls_chan_save_session(const tg_tls_chan_t *ch, uint8_t **out,
                             size_t *len, uint64_t *expires) {
  *out = NULL;
  *len = 0;
  *expires = 0;
  if (!ch->tls || ch->state != ST_OPEN) return -EINVAL;
  return tg_tls_session_save(ch->tls, out, len, expires);
}

const char *tg_tls_chan_peer_identity(const tg_tls_chan_t *ch) {
  return ch->identity[0] ? ch->identity : NULL;
}

const char *tg_tls_chan_peer_addr(const tg_tls_chan_t *ch) { return ch->peer; }

const char *tg_tls_chan_error(const tg_tls_chan_t *ch) { return ch->why; }

const char *tg_tls_chan_ciphersuite(const tg_tls_chan_t *ch) {
  return ch->suite[0] ? ch->suite : "none";
}
