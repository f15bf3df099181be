/* A client connection, its upstream, and the filter between them: the
 * frames both ways, backpressure, the replay window, closing. Opening and
 * admitting a client is bridge_open.c's. */
#include "relay/bridge.h"
#include "relay/bridge_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/consumer_port_methods.h"
#include "abi/ipc_frame.h"
#include "ipc/unix_transport.h"
#include "relay/frame_filter.h"
#include "relay/own_calls.h"
#include "tls/compress_transport.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"
#include "common/log.h"

static void audit_suppressed(tg_relay_bridge_t *b, uint64_t n);
static void close_seg(tg_relay_bridge_t *b, bool cut);

const char *tg__bridge_who(const tg_relay_bridge_t *b) {
  return b->identity[0] ? b->identity : "-";
}

size_t tg__bridge_high_water(const tg_relay_bridge_t *b) {
  return b->env->high_water ? b->env->high_water : DEFAULT_HIGH_WATER;
}

void tg_relay_env_init(tg_relay_env_t *env) {
  tg_list_init(&env->bridges);
  env->n_bridges = 0;
  env->audit_budget = TG_RELAY_AUDIT_BUDGET_DEFAULT;
}

/* --- the state ------------------------------------------------------------- */

void tg__bridge_set_state(tg_relay_bridge_t *b, enum bridge_state to,
                          const char *why) {
  char who[sizeof(b->identity) + sizeof(b->addr) + 2];
  snprintf(who, sizeof(who), "%s@%s", tg__bridge_who(b), b->addr);
  unsigned st = b->state;
  if (tg_fsm_move(&tg__bridge_fsm, &st, to, &b->env->bad_transitions, who,
                  why))
    b->state = to;
}

/* --- freeing ---------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h) {
  tg_relay_bridge_t *b = h->data;
  tg_relay_env_t *env = b->env;
  close_seg(b, false); /* the client is gone */
  if (b->win) tg_replay_release(env->replay, b->win, tg_clock_ms(env->clock));
  tg_list_remove(&b->node);
  env->n_bridges--;
  tg_tls_chan_free(b->tls);
  tg_buf_free(&b->out);
  tg_buf_free(&b->up_out);
  free(b);
  if (env->n_bridges == 0 && env->on_idle) env->on_idle(env);
}

/* Frees the bridge once both transports are closed. The timer closes last:
 * its close callback runs after every earlier close callback. */
void tg__bridge_maybe_free(tg_relay_bridge_t *b) {
  /* Once only: the timer's close is the guard, whether or not the table
   * allowed the move to FREEING. */
  if (b->client_open || b->up_open || b->state == B_FREEING ||
      uv_is_closing((uv_handle_t *)&b->timer))
    return;
  tg__bridge_set_state(b, B_FREEING, "both transports closed");
  if (b->authorized) {
    const tg_relay_filter_stats_t *st = &b->filter.stats;
    uint64_t secs = (tg_clock_ms(b->env->clock) - b->opened_ms) / 1000;
    TG_INFO("%s %s@%s: closed after %" PRIu64 " s: %s (frames in %" PRIu64
            " out %" PRIu64 ", denied %" PRIu64 ", dropped %" PRIu64
            "; replay window: %" PRIu64 " replies kept compressed, %" PRIu64
            " in place, %" PRIu64 " copied)",
            TG_NOTE(RELAY_CLOSED), tg__bridge_who(b), b->addr, secs,
            b->close_why, st->client_frames,
            st->upstream_frames, st->denied,
            st->undecodable + st->refused_kinds, b->replay_compressed,
            b->replay_adopted, b->replay_copied);
    audit_suppressed(b, tg_relay_audit_limit_flush(&b->deny_limit));
    tg_relay_audit(b->env->audit, b->identity, b->addr, "disconnect", "end",
                   b->close_code, "%s", b->close_why);
  }
  uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

/* --- sending ---------------------------------------------------------------- */

static void send_failed(tg_relay_bridge_t *b, int rv) {
  char why[128];
  snprintf(why, sizeof(why), "cannot queue output for the client: %s%s",
           tg_strerror(rv), rv == -ENOBUFS ? " (the client does not read)" : "");
  tg__bridge_close(b, rv, why);
}

/* A reply made here: a control frame, ahead of queued bulk data. */
static void send_client(tg_relay_bridge_t *b, const uint8_t *frame,
                        size_t len) {
  int rv = tg_transport_send_frame(b->client, frame, len, TG_FRAME_CONTROL);
  if (rv < 0) send_failed(b, rv);
}

/* Frames made here (a denial's notice and refusal, a Resume's stream) go
 * one at a time: the priority queue takes one whole frame a call. Built
 * here, so each length is whole and in range. */
static void send_client_frames(tg_relay_bridge_t *b, const uint8_t *p,
                               size_t len) {
  while (len >= TG_IPC_FRAME_HEADER_SIZE) {
    size_t n = TG_IPC_FRAME_HEADER_SIZE + ((size_t)p[0] | (size_t)p[1] << 8 |
                                           (size_t)p[2] << 16 | (size_t)p[3] << 24);
    if (n > len) n = len;
    send_client(b, p, n);
    if (!tg__bridge_serving(b)) return; /* a failed send closed it */
    p += n;
    len -= n;
  }
}

/* The grant of SetCompression goes out behind everything sent before it
 * and ahead of everything after, replies made here included (a pipelining
 * client reads plain up to it); from the next frame on, what goes to the
 * client is compressed (control replies as plain frames beside it). */
static void start_compression(tg_relay_bridge_t *b, const uint8_t *grant,
                              size_t len, int level, int window_log) {
  int rv = tg_transport_send_frame(b->client, grant, len, TG_FRAME_BARRIER);
  if (rv < 0) {
    send_failed(b, rv);
    return;
  }
  tg_zstd_transport_init(b->env->loop, &b->z, b->client);
  b->z.base.cbs = &tg__bridge_client_cbs;
  b->z.base.data = b;
  b->client = &b->z.base;
  b->zstd = true;
  rv = tg_zstd_transport_start_compress(&b->z, level, window_log);
  if (rv < 0)
    tg__bridge_close(b, rv, "cannot start compression: the client expects it");
}

static void answer_without_service(tg_relay_bridge_t *b, const uint8_t *p,
                                   size_t n);

static void send_up(tg_relay_bridge_t *b, const uint8_t *frame, size_t len) {
  if (!b->up_open) {
    if (b->state == B_NO_SERVICE) answer_without_service(b, frame, len);
    return;
  }
  int rv = tg_transport_send(&b->up.base, frame, len, -1);
  /* The connection to the service is closing already (a write found it
   * gone): its close, coming from the loop, tells the client why and
   * remembers that the service ended it (up_on_close). */
  if (rv == -EPIPE) return;
  if (rv < 0) {
    char why[128];
    snprintf(why, sizeof(why), "cannot queue output for the service: %s",
             tg_strerror(rv));
    tg__bridge_close(b, rv, why);
  }
}

/* Reading one side stops while the other cannot take more. */
static void update_backpressure(tg_relay_bridge_t *b) {
  if (!tg__bridge_serving(b)) return;
  bool pause_up = tg_transport_congested(b->client);
  /* Bulk data stops coming once the client's queue passes its mark (plus
   * what one upstream read still delivers); beyond that margin the queue
   * holds replies made here, to a client sending requests without reading
   * the answers. */
  bool pause_client =
      (b->up_open && tg_transport_congested(&b->up.base)) ||
      tg_transport_pending(b->client) >
          tg__bridge_high_water(b) + 4 * TG_IPC_FRAME_BUFFER_SIZE;
  if (!b->up_open) pause_up = false; /* B_NO_SERVICE: nothing to pause */
  if (pause_up != b->up_paused) {
    b->up_paused = pause_up;
    tg_transport_pause_reading(&b->up.base, pause_up);
    TG_DEBUG("%s %s@%s: %s reading the service (client output %zu bytes)",
             pause_up ? TG_NOTE(RELAY_PAUSED_SERVICE)
                      : TG_NOTE(RELAY_RESUMED_SERVICE),
             tg__bridge_who(b), b->addr, pause_up ? "paused" : "resumed",
             tg_transport_pending(b->client));
  }
  if (pause_client != b->client_paused) {
    b->client_paused = pause_client;
    tg_transport_pause_reading(b->client, pause_client);
    TG_DEBUG("%s %s@%s: %s reading the client (service output %zu bytes)",
             pause_client ? TG_NOTE(RELAY_PAUSED_CLIENT)
                          : TG_NOTE(RELAY_RESUMED_CLIENT),
             tg__bridge_who(b), b->addr, pause_client ? "paused" : "resumed",
             b->up_open ? tg_transport_pending(&b->up.base) : 0);
  }
}

/* The resume key changed or a lease call was answered: tell the service
 * what comes next (relay/own_calls.h, tg_relay_filter_lease_frames). */
static void send_lease(tg_relay_bridge_t *b) {
  if (b->state != B_OPEN || !b->up_open) return; /* B_NO_SERVICE: none */
  tg_buf_reset(&b->up_out);
  int rv = tg_relay_filter_lease_frames(&b->filter, b->env->session_lease_ms,
                                        &b->up_out);
  if (rv < 0) {
    tg__bridge_close(b, rv, "cannot build a frame for the service: out of memory");
    return;
  }
  if (rv == 1) send_up(b, tg_buf_begin(&b->up_out), tg_buf_size(&b->up_out));
}

/* --- the replay window's compressed segments ------------------------------- */

/* The compressor's bytes, as it makes them, into the open segment. */
static void on_tap(void *ctx, const uint8_t *z, size_t n) {
  tg_relay_bridge_t *b = ctx;
  if (b->seg) tg_replay_seg_append(b->env->replay, b->win, b->seg, z, n);
}

/* Closes the open segment. |cut|: the stream goes on, so its zstd frame
 * ends first and the segment inflates by itself; otherwise (the client is
 * going, or ending the frame failed) whatever zstd still holds goes to it,
 * and nothing sent after this is in it. */
static void close_seg(tg_relay_bridge_t *b, bool cut) {
  if (!b->seg) return;
  if (!cut || tg_zstd_transport_end_frame(&b->z) < 0)
    tg_zstd_transport_drain_tap(&b->z);
  tg_replay_seg_close(b->win, b->seg);
  b->seg = NULL;
}

/* Numbers a ReadBuffers reply about to be compressed for the client and
 * holds it as its place in the open segment (opened here, after a cut
 * when the last one reached TG_REPLAY_SEG_RAW). False when no segment can
 * be opened (out of memory): then the caller keeps a copy. */
/* Bytes of frames in the open segment, inflated. */
static uint64_t seg_pos(const tg_relay_bridge_t *b) {
  return tg_zstd_transport_raw_pos(&b->z) - b->seg_start;
}

static bool keep_compressed(tg_relay_bridge_t *b, const uint8_t *payload,
                            size_t payload_len, const tg_relay_effect_t *e) {
  if (b->seg && (b->seg->broken || seg_pos(b) >= TG_REPLAY_SEG_RAW))
    close_seg(b, true);
  if (!b->seg) {
    /* A segment starts a zstd frame: end one that holds frames already. */
    if (tg_zstd_transport_end_frame(&b->z) < 0) return false;
    if (!(b->seg = tg_replay_seg_open())) return false;
    b->seg_start = tg_zstd_transport_raw_pos(&b->z);
    tg_zstd_transport_set_tap(&b->z, on_tap, b);
  }
  /* Inflated, the segment holds each frame as [4-byte len][payload]. */
  uint64_t at = seg_pos(b) + TG_IPC_FRAME_HEADER_SIZE;
  tg_replay_push_ref(b->env->replay, b->win, b->seg,
                     at + (uint64_t)(e->bulk.body - payload), e->bulk.body,
                     e->bulk.len, e->bulk.last);
  b->seg_frame_end = at + payload_len;
  b->replay_compressed++;
  return true;
}

/* Resume answers are built from the window at most this big per call. */
#define RESUME_MAX_BYTES (1u << 20)

/* The client set its session key: hold that key's replay window (a
 * reconnecting client finds its numbering and its unacknowledged frames
 * there). */
static void take_window(tg_relay_bridge_t *b) {
  if (!b->env->replay) return;
  uint64_t now = tg_clock_ms(b->env->clock);
  close_seg(b, true); /* the old key's segment ends with its window */
  if (b->win) tg_replay_release(b->env->replay, b->win, now);
  char ns[TG_AUTHZ_IDENTITY_MAX + TG_RELAY_SESSION_KEY_MAX + 2];
  snprintf(ns, sizeof(ns), "%s/%s", b->filter.identity,
           b->filter.session_key);
  bool fresh = false;
  b->win = tg_replay_acquire(b->env->replay, ns, now, &fresh);
  if (!b->win)
    TG_WARN("%s@%s: no replay window for key '%s' (all in use): frames "
            "lost with a link are not sent again", tg__bridge_who(b), b->addr, ns);
  else if (!fresh)
    TG_INFO("%s@%s: replay window of key '%s' found: %" PRIu64
            " frames so far, %zu bytes held", tg__bridge_who(b), b->addr, ns,
            b->win->next_seq - 1, b->win->held);
}

/* TracegateRelay.SetSessionKey's reply, once the key's window is held:
 * whether the key's last session ended with the service's connection.
 * False when the bridge closed (out of memory, or the send failed). */
static bool answer_session_key(tg_relay_bridge_t *b, uint64_t request_id) {
  tg_buf_reset(&b->out);
  if (tg_relay_filter_session_key_reply(request_id,
                                        b->win && b->win->service_ended,
                                        &b->out) < 0) {
    tg__bridge_close(b, -ENOMEM, "cannot build the SetSessionKey reply: out "
                     "of memory");
    return false;
  }
  send_client_frames(b, tg_buf_begin(&b->out), tg_buf_size(&b->out));
  return tg__bridge_serving(b);
}

/* TracegateRelay.Resume: what followed the client's last frame, again,
 * from the key's replay window. */
static void resume(tg_relay_bridge_t *b, const tg_relay_verdict_t *v) {
  tg_buf_reset(&b->out);
  int rv = tg_replay_resume(b->win, v->effect.replay.seq,
                            v->effect.replay.cum, v->request_id,
                            RESUME_MAX_BYTES, &b->out);
  if (rv < 0) {
    char why[160];
    snprintf(why, sizeof(why), "cannot build the Resume reply: %s",
             tg_strerror(rv));
    tg__bridge_close(b, rv, why);
    return;
  }
  send_client_frames(b, tg_buf_begin(&b->out), tg_buf_size(&b->out));
}

/* The service answered one of the relay's own lease calls. */
static void lease_reply(tg_relay_bridge_t *b, const tg_relay_verdict_t *v) {
  if (v->allowed)
    TG_INFO("%s@%s: %s: %s", tg__bridge_who(b), b->addr, v->method, v->reason);
  else
    TG_WARN("%s@%s: %s: %s", tg__bridge_who(b), b->addr, v->method, v->reason);
  if (v->audit)
    tg_relay_audit(b->env->audit, b->identity, b->addr, v->method,
                   v->allowed ? "allow" : "deny", v->code, "%s", v->reason);
  send_lease(b);
}

/* --- logging a verdict ------------------------------------------------------ */

static void audit_suppressed(tg_relay_bridge_t *b, uint64_t n) {
  if (n == 0) return;
  tg_relay_audit(b->env->audit, b->identity, b->addr, "denials", "suppressed",
                 TG_N_RELAY_AUDIT_SUPPRESSED,
                 "%" PRIu64 " more denials suppressed (at most %" PRIu32
                 " lines a second after %" PRIu32 ")", n,
                 b->env->audit_budget.per_s, b->env->audit_budget.burst);
}

static void report(tg_relay_bridge_t *b, const tg_relay_verdict_t *v) {
  bool call = v->frame == TG_RELAY_FRAME_CALL;
  if (call && !v->allowed) b->env->denied_calls++;
  bool noisy = v->frame == TG_RELAY_FRAME_GARBAGE || (call && !v->allowed) ||
               v->action == TG_RELAY_DROP;
  if (noisy) {
    tg_log_level_t lvl = b->loud < LOUD_LOGS ? TG_LOG_WARN : TG_LOG_DEBUG;
    b->loud++;
    const char *what = v->frame == TG_RELAY_FRAME_GARBAGE ? "dropped a frame"
                       : call                               ? "denied"
                                                            : "dropped";
    TG_LOG(lvl, "%s %s@%s: %s %s (request %" PRIu64 "): %s",
           call ? TG_NOTE(RELAY_CALL_DENIED) : TG_NOTE(RELAY_FRAME_DROPPED),
           tg__bridge_who(b), b->addr, what, v->method, v->request_id,
           v->reason);
  } else {
    TG_DEBUG("%s@%s: %s %s (request %" PRIu64 ")%s%s", tg__bridge_who(b), b->addr,
             v->action == TG_RELAY_REPLY ? "answered" : "forwarded",
             v->method, v->request_id, v->reason[0] ? ": " : "", v->reason);
  }
  if (!v->audit) return;
  if (!v->allowed) {
    uint64_t held = 0;
    if (!tg_relay_audit_limit_take(&b->deny_limit, &b->env->audit_budget,
                                   tg_clock_ms(b->env->clock), &held))
      return; /* counted, reported with the next line written */
    audit_suppressed(b, held);
  }
  tg_notice_t code = v->code           ? v->code
                     : v->allowed ? TG_N_RELAY_CALL_ALLOWED
                                  : TG_N_RELAY_CALL_DENIED;
  tg_relay_audit(b->env->audit, b->identity, b->addr, v->method,
                 v->allowed ? "allow" : "deny", code, "%s",
                 v->reason[0] ? v->reason : v->allowed ? "ok" : "denied");
}

/* --- frames from the client ------------------------------------------------- */

static tg_authz_role_t current_role(const tg_relay_bridge_t *b) {
  if (b->stdio) return TG_ROLE_RECORD;
  return tg_authz_role(b->env->authz, b->identity);
}

/* A refusal's close is the relay's own decision, said to the client (or
 * offered for REFUSAL_LINGER_MS): an orderly one, with a close_notify, so
 * that the client tells it from a stream an attacker cut. */
void tg__bridge_on_refusal_timer(uv_timer_t *t) {
  tg_relay_bridge_t *b = t->data;
  tg__bridge_close(b, 0, b->close_why);
}

/* B_REFUSING after the client was told: closes now if nothing is left to
 * send, else once it has had REFUSAL_FLUSH_MS to leave. */
static void close_when_sent(tg_relay_bridge_t *b) {
  if (!b->client_open || tg_transport_pending(b->client) == 0)
    tg__bridge_close(b, 0, b->close_why);
  else
    uv_timer_start(&b->timer, tg__bridge_on_refusal_timer, REFUSAL_FLUSH_MS, 0);
}

/* A RequestError carrying |text| to the client, for request |request_id|
 * (0: a notice, which no request of a client uses; tracegate's client
 * prints it as the reason and Perfetto's drops it as unmatched). */
static void send_request_error(tg_relay_bridge_t *b, uint64_t request_id,
                               const char *text) {
  tg_buf_reset(&b->out);
  if (tg_ipc_request_error_append(request_id, text, &b->out) == 0)
    send_client(b, tg_buf_begin(&b->out), tg_buf_size(&b->out));
}

/* B_REFUSING: the client's first request is answered with a RequestError
 * that says why (a client prints it; Perfetto's fails the request), then
 * the connection closes once that has left. */
static void tell_refusal(tg_relay_bridge_t *b, const uint8_t *payload,
                         size_t len) {
  tg_ipc_frame_t *fr = tg_ipc_frame_unpack(payload, len);
  uint64_t request_id = fr ? fr->request_id : 0;
  if (fr) tg_ipc_frame_free(fr);
  send_request_error(b, request_id, b->refusal);
  if (b->state != B_REFUSING) return; /* the send failed and closed it */
  b->refusal[0] = 0; /* told once */
  close_when_sent(b);
}

/* Sends |text| to the client as a notice, then closes once it has left,
 * or after REFUSAL_FLUSH_MS. |why| is kept for the log. */
static void tell_and_close(tg_relay_bridge_t *b, const char *why,
                           const char *text) {
  if (why != b->close_why)
    snprintf(b->close_why, sizeof(b->close_why), "%s", why);
  /* From here on the client's frames are dropped (nothing takes them) and
   * the service's transport, if still open, closes with the bridge. */
  tg__bridge_set_state(b, B_REFUSING, why);
  b->refusal[0] = 0;
  if (b->client_open) {
    send_request_error(b, 0, text);
    if (b->state != B_REFUSING) return; /* the send failed and closed it */
  }
  close_when_sent(b);
}

static int up_frame(tg_relay_bridge_t *b, const uint8_t *payload, size_t len,
                    uint8_t **orphan);

/* B_NO_SERVICE: the frames the filter meant for the service (|p|, |n|:
 * length-prefixed) are answered as a service with nothing would answer
 * them, through the filter's way back like any answer of the service (it
 * maps the request ids back and keeps its books), each after a notice
 * saying why. Only BindService gets here: the filter forwards calls only
 * on a service whose bind the service granted, and the relay's own lease
 * calls are not made (send_lease). */
static void answer_without_service(tg_relay_bridge_t *b, const uint8_t *p,
                                   size_t n) {
  /* |p| lies in b->out, which the notices below reuse: work on a copy. */
  tg_buf_t in, reply;
  tg_buf_init(&in, n);
  tg_buf_init(&reply, 64);
  if (tg_buf_append(&in, p, n) < 0) {
    tg__bridge_close(b, -ENOMEM, "cannot answer for the service: out of memory");
    goto out;
  }
  const uint8_t *cur = tg_buf_begin(&in), *end = cur + tg_buf_size(&in);
  while (b->state == B_NO_SERVICE && end - cur >= 4) {
    uint32_t len = tg_pb_read_le32(cur);
    if (len > (size_t)(end - cur) - 4) break; /* built by the filter: whole */
    tg_ipc_frame_t *fr = tg_ipc_frame_unpack(cur + 4, len);
    cur += 4 + (size_t)len;
    if (!fr) continue;
    bool bind = fr->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
    uint64_t request_id = fr->request_id;
    tg_ipc_frame_free(fr);
    if (!bind) continue;
    Perfetto__Protos__IPCFrame__BindServiceReply br =
        PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
    br.has_success = 1; /* success = 0 */
    tg_ipc_frame_t ans = PERFETTO__PROTOS__IPCFRAME__INIT;
    ans.has_request_id = 1;
    ans.request_id = request_id;
    ans.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
    ans.msg_bind_service_reply = &br;
    tg_buf_reset(&reply);
    if (tg_ipc_frame_append(&ans, &reply) < 0) {
      tg__bridge_close(b, -ENOMEM, "cannot answer for the service: out of "
                       "memory");
      break;
    }
    send_request_error(b, 0, b->refusal);
    if (b->state != B_NO_SERVICE) break; /* the send failed and closed it */
    uint8_t *orphan = NULL;
    up_frame(b, tg_buf_begin(&reply) + 4, tg_buf_size(&reply) - 4, &orphan);
    free(orphan);
  }
out:
  tg_buf_free(&in);
  tg_buf_free(&reply);
}

/* A client frame's verdict, carried out: its frames sent where the action
 * says, then its effect. */
static void carry_out(tg_relay_bridge_t *b, const tg_relay_verdict_t *v) {
  const tg_relay_effect_t *e = &v->effect;
  const uint8_t *p = tg_buf_begin(&b->out);
  size_t n = tg_buf_size(&b->out);
  if (n > 0 && v->action == TG_RELAY_FORWARD)
    send_up(b, p, n);
  else if (n > 0 && e->kind == TG_RELAY_EFFECT_START_COMPRESSION)
    start_compression(b, p, n, e->compression.level,
                      e->compression.window_log);
  else if (n > 0 && v->action == TG_RELAY_REPLY)
    send_client_frames(b, p, n);
  if (e->kind == TG_RELAY_EFFECT_SESSION_KEY_SET) {
    take_window(b);
    if (e->session_key.reply && !answer_session_key(b, v->request_id)) return;
    send_lease(b);
  } else if (!tg__bridge_serving(b)) {
    return; /* a failed send closed the bridge */
  } else if (e->kind == TG_RELAY_EFFECT_REPLAY_ACK) {
    if (b->win) tg_replay_ack(b->win, e->replay.seq);
  } else if (e->kind == TG_RELAY_EFFECT_REPLAY_RESUME) {
    resume(b, v);
  } else if (e->kind == TG_RELAY_EFFECT_HEARTBEAT && !b->heartbeats &&
             b->env->heartbeat_idle_ms) {
    /* A transport without an idle timeout (the pipes of --stdio) learns
     * of a dead link from its own end. */
    b->heartbeats = true;
    (void)tg_transport_set_idle_timeout(b->client, b->env->heartbeat_idle_ms);
  }
}

static int client_on_frame(tg_transport_t *t, const uint8_t *payload,
                           size_t len) {
  tg_relay_bridge_t *b = t->data;
  if (b->state == B_REFUSING && b->refusal[0]) {
    tell_refusal(b, payload, len);
    /* Still B_REFUSING: the answer is leaving, and what else the client
     * sends meanwhile is read and dropped (non-zero stops the transport:
     * only when closing). */
    return b->state == B_REFUSING ? 0 : 1;
  }
  if (!tg__bridge_serving(b)) return 0;
  tg_buf_reset(&b->out);
  tg_relay_verdict_t v;
  int rv = tg_relay_filter_client(&b->filter, current_role(b), payload, len,
                                  &b->out, &v);
  if (rv < 0) {
    char why[96];
    snprintf(why, sizeof(why), "cannot build a frame: %s", tg_strerror(rv));
    tg__bridge_close(b, rv, why);
    return 1;
  }
  report(b, &v);
  carry_out(b, &v);
  update_backpressure(b);
  return tg__bridge_serving(b) ? 0 : 1;
}

static void client_on_drain(tg_transport_t *t) {
  update_backpressure(t->data);
}

static void client_on_close(tg_transport_t *t, int status) {
  tg_relay_bridge_t *b = t->data;
  b->client_open = false;
  if (b->state == B_HANDSHAKE || tg__bridge_serving(b) ||
      b->state == B_REFUSING) {
    char why[300];
    const char *detail = tg_transport_error(t);
    snprintf(why, sizeof(why), "%s%s%s",
             status == TG_EPEER_CLOSED ? "the client closed the connection"
                                       : tg_strerror(status),
             detail[0] ? ": " : "", detail);
    tg__bridge_close(b, status, why);
  }
  tg__bridge_maybe_free(b);
}

const tg_transport_cbs_t tg__bridge_client_cbs = {
    .on_frame = client_on_frame,
    .on_drain = client_on_drain,
    .on_close = client_on_close,
};

/* --- frames from the service ------------------------------------------------ */

/* |why| is the outcome to report when the session was not detached. */
static void detach_done(tg_relay_bridge_t *b, bool detached,
                        const char *why) {
  if (b->state != B_DETACHING) return;
  const char *outcome = detached ? "detached" : why;
  TG_INFO("%s %s@%s: session %s under key '%s'",
          detached ? TG_NOTE(RELAY_SESSION_DETACHED)
                   : TG_NOTE(RELAY_DETACH_FAILED),
          tg__bridge_who(b), b->addr, outcome, b->detach_key);
  tg_relay_audit(b->env->audit, b->identity, b->addr,
                 tg_cport_name(TG_CPORT_Detach),
                 detached ? "allow" : "deny",
                 detached ? TG_N_RELAY_SESSION_DETACHED
                          : TG_N_RELAY_DETACH_FAILED,
                 "link dropped: session %s under key '%s'", outcome,
                 b->detach_key);
  tg__bridge_set_state(b, B_CLOSING, outcome);
  uv_timer_stop(&b->timer);
  if (b->up_open) tg_transport_close(&b->up.base, 0);
}

/* Numbers a ReadBuffers reply and keeps it until the client acknowledges
 * it. A bulk reply sits alone in the upstream decoder's frame buffer
 * (128 KiB, it spans reads): the window takes that buffer rather than a
 * copy of the reply, so a bulk byte is never copied to be kept. A reply
 * that fills less than half of it is copied, so that the window's cap still
 * holds about as many replies. Returns a buffer taken that the window
 * did not keep: the caller frees it once done with |payload|. */
static uint8_t *keep_for_replay(tg_relay_bridge_t *b, const uint8_t *payload,
                                const tg_relay_effect_t *e) {
  uint8_t *block = e->bulk.len >= TG_IPC_FRAME_BUFFER_SIZE / 2
                       ? tg_transport_adopt_frame(&b->up.base, payload)
                       : NULL;
  if (!block) {
    b->replay_copied++;
    tg_replay_push(b->env->replay, b->win, e->bulk.body, e->bulk.len,
                   e->bulk.last);
    return NULL;
  }
  if (tg_replay_push_block(b->env->replay, b->win, block,
                           TG_IPC_FRAME_BUFFER_SIZE, e->bulk.body, e->bulk.len,
                           e->bulk.last) == 0)
    return block;
  b->replay_adopted++;
  return NULL;
}

/* One frame of the service's (or of the relay's stand-in for it): its
 * |len| bytes of |payload| lie just behind their 4-byte length, as the
 * upstream channel hands every payload (ipc/channel.h) and as
 * answer_without_service() builds its own, so that it is forwarded whole. */
static int up_frame(tg_relay_bridge_t *b, const uint8_t *payload, size_t len,
                    uint8_t **orphan) {
  if (!tg__bridge_serving(b) && b->state != B_DETACHING) return 0;
  tg_relay_verdict_t v;
  tg_buf_reset(&b->up_out);
  int rv = tg_relay_filter_upstream(&b->filter, payload, len, &b->up_out, &v);
  if (rv < 0) {
    tg__bridge_close(b, rv, "cannot filter a reply of the service: out of memory");
    return 1;
  }
  /* A session under the key again: an earlier end is no longer news. */
  if (b->win && b->filter.session_active) b->win->service_ended = false;
  if (v.effect.kind == TG_RELAY_EFFECT_OWN_DETACH_REPLY) {
    detach_done(b, v.allowed, "NOT detached (the service refused)");
    return 1;
  }
  if (v.effect.kind == TG_RELAY_EFFECT_OWN_LEASE_REPLY) {
    if (tg__bridge_serving(b)) lease_reply(b, &v);
    return tg__bridge_serving(b) || b->state == B_DETACHING ? 0 : 1;
  }
  /* Numbered and kept until acknowledged, also when the client is gone
   * already (B_DETACHING): those are exactly the frames it missed. */
  bool bulk = v.effect.kind == TG_RELAY_EFFECT_BULK;
  /* Forwarded as it is into the compressed stream: the window keeps what
   * the compressor makes of it, not a copy (relay/replay_window.h). */
  bool compressed = bulk && b->win && b->zstd && tg__bridge_serving(b) &&
                    !b->z.closing && len < TG_IPC_FRAME_MAX_PAYLOAD &&
                    v.action != TG_RELAY_DROP && tg_buf_size(&b->up_out) == 0;
  if (bulk && b->win &&
      !(compressed && keep_compressed(b, payload, len, &v.effect)))
    *orphan = keep_for_replay(b, payload, &v.effect);
  if (!tg__bridge_serving(b)) return 0; /* nobody to forward to */
  if (v.action == TG_RELAY_DROP) {
    report(b, &v);
    return 0;
  }
  if (tg_buf_size(&b->up_out) > 0) {
    /* Rewritten by the filter (sessions of other identities removed). */
    send_client(b, tg_buf_begin(&b->up_out), tg_buf_size(&b->up_out));
    update_backpressure(b);
    return tg__bridge_serving(b) ? 0 : 1;
  }
  /* Straight from the service's frame into the client's queue: one copy,
   * or none into the compressor. Whole, as it came: |payload| lies just
   * behind its length (up_frame's contract). */
  rv = tg_transport_send_frame(b->client, payload - TG_IPC_FRAME_HEADER_SIZE,
                               len + TG_IPC_FRAME_HEADER_SIZE,
                               bulk ? TG_FRAME_BULK : TG_FRAME_CONTROL);
  /* A frame the compressor did not take whole is not in the segment. */
  if (compressed && b->seg && seg_pos(b) != b->seg_frame_end)
    tg_replay_seg_fail(b->win, b->seg);
  if (rv < 0) send_failed(b, rv);
  update_backpressure(b);
  return tg__bridge_serving(b) ? 0 : 1;
}

static int up_on_frame(tg_transport_t *t, const uint8_t *payload, size_t len) {
  tg_relay_bridge_t *b = t->data;
  b->up_answered = true;
  uint8_t *orphan = NULL;
  int rv = up_frame(b, payload, len, &orphan);
  free(orphan);
  return rv;
}

static void up_on_drain(tg_transport_t *t) { update_backpressure(t->data); }

static void up_on_close(tg_transport_t *t, int status) {
  tg_relay_bridge_t *b = t->data;
  b->up_open = false;
  /* The service itself ended the connection that carried the key's
   * session (it stopped, restarted or dropped it): it has dealt with the
   * session by now, so what Attach answers a reconnecting client is final
   * (SetSessionKeyResponse.ended_with_service). Not after an error on the
   * relay's side, which the service learns of on its own time. */
  bool by_service = status == TG_EPEER_CLOSED || status == -ECONNRESET ||
                    status == -EPIPE;
  if (b->win && b->filter.session_active && by_service &&
      (b->state == B_OPEN || b->state == B_DETACHING))
    b->win->service_ended = true;
  if (b->state == B_DETACHING) {
    detach_done(b, false, "NOT detached (the service went away)");
  } else if (b->state == B_OPEN) {
    /* The client is told, or it would see only its TLS connection end
     * (and guess at the relay): a service that closes before answering
     * anything refused the connection, most likely at its limit. */
    char why[200];
    snprintf(why, sizeof(why),
             "the tracing service closed the connection%s%s%s",
             b->up_answered ? "" : " before answering",
             status && status != TG_EPEER_CLOSED ? ": " : "",
             status && status != TG_EPEER_CLOSED ? tg_strerror(status) : "");
    char text[320];
    if (b->up_answered)
      snprintf(text, sizeof(text), "%s relay: %s", TG_NOTE(RELAY_SERVICE_GONE),
               why);
    else
      snprintf(text, sizeof(text), "%s relay: the tracing service closed the "
               "connection before answering (at its --max-consumers limit? "
               "tracegated's log on the relay's host says why)",
               TG_NOTE(RELAY_SERVICE_CLOSED_EARLY));
    tell_and_close(b, why, text);
  }
  tg__bridge_maybe_free(b);
}

const tg_transport_cbs_t tg__bridge_up_cbs = {
    .on_frame = up_on_frame,
    .on_drain = up_on_drain,
    .on_close = up_on_close,
};

static void on_detach_timeout(uv_timer_t *t) {
  tg_relay_bridge_t *b = t->data;
  detach_done(b, false, "NOT detached (no reply from the service in time)");
}

/* --- closing ---------------------------------------------------------------- */

/* Idempotent. Closes the client, detaches a keyed session if there is one,
 * and closes the upstream (after the detach). The Detach is built before
 * anything closes, so that the state goes straight to where it heads. */
void tg__bridge_close(tg_relay_bridge_t *b, int status, const char *why) {
  if (b->state == B_DETACHING || tg__bridge_ending(b)) return;
  bool detach = false;
  if (tg__bridge_serving(b) && b->up_open) {
    tg_buf_reset(&b->out);
    detach = tg_relay_filter_detach_on_drop(&b->filter, &b->out, b->detach_key,
                                            sizeof(b->detach_key)) == 1;
  }
  tg__bridge_set_state(b, detach ? B_DETACHING : B_CLOSING, why);
  /* The refusal timers close with the reason already kept: copying a
   * string onto itself is undefined. */
  if (why != b->close_why)
    snprintf(b->close_why, sizeof(b->close_why), "%s", why);
  if (b->close_code == TG_N_NONE)
    b->close_code = status == TG_EPEER_CLOSED ? TG_N_RELAY_CLIENT_CLOSED
                    : status == TG_ETIMEOUT   ? TG_N_RELAY_IDLE_CLOSED
                                              : TG_N_RELAY_CLOSED;
  if (b->client_open) tg_transport_close(b->client, status);
  /* After the close, whose last flush and the compressor's remains went
   * to the segment: it holds every frame sent. */
  close_seg(b, false);
  if (detach) {
    if (tg_transport_send(&b->up.base, tg_buf_begin(&b->out),
                          tg_buf_size(&b->out), -1) == 0) {
      /* Whatever the service still sends is read and dropped. */
      tg_transport_pause_reading(&b->up.base, false);
      uv_timer_start(&b->timer, on_detach_timeout, b->env->detach_timeout_ms,
                     0);
      TG_INFO("%s %s@%s: link lost with a tracing session: detaching it "
              "under key '%s'", TG_NOTE(RELAY_LINK_LOST), tg__bridge_who(b),
              b->addr, b->detach_key);
      return;
    }
    tg__bridge_set_state(b, B_CLOSING, "cannot send the Detach");
  }
  if (b->up_open) tg_transport_close(&b->up.base, 0);
}

void tg_relay_bridge_close_all(tg_relay_env_t *env, const char *why) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &env->bridges) {
    tg_relay_bridge_t *b = TG_CONTAINER_OF(it, tg_relay_bridge_t, node);
    if (b->close_code == TG_N_NONE) b->close_code = TG_N_RELAY_SHUTDOWN;
    tg__bridge_close(b, 0, why);
  }
}
