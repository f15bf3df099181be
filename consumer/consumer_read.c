/* ReadBuffers: the streamed replies go through the slice reassembler and
 * come out as whole packets, each handed to the caller in order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "consumer/consumer_internal.h"
#include "abi/consumer_port_methods.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "tracegate/error.h"

static int emit_packet(void *ctx, const uint8_t *p, size_t n) {
  tg__call_t *call = ctx;
  tg_consumer_t *c = call->c;
  /* Re-checked after each call into user code: it may have closed us. */
  int rv = c->local_close ? -ECANCELED : call->on_packet(c, call->ctx, p, n);
  if (rv == 0 && c->local_close) rv = -ECANCELED;
  if (rv > 0) rv = -ECANCELED;
  call->read_err = rv;
  return rv;
}

static void read_failure(tg__call_t *call, int err, char *msg, size_t n) {
  if (call->read_err == -ECANCELED && call->c->local_close)
    tg__failure(call, -ECANCELED, NULL, msg, n);
  else if (call->read_err)
    snprintf(msg, n, "reading the trace stopped: %s", tg_strerror(err));
  else if (err == TG_EPROTO_DECODE)
    snprintf(msg, n, "malformed %s reply from the service (%llu "
             "whole packets before it)", tg_cport_name(TG_CPORT_ReadBuffers),
             (unsigned long long)(call->ext_ra ? call->ext_ra : &call->ra)->packets);
  else if (err == TG_ENO_SPACE)
    snprintf(msg, n, "a trace packet exceeds the %zu-byte limit",
             (call->ext_ra ? call->ext_ra : &call->ra)->max_packet);
  else
    tg__failure(call, err, NULL, msg, n);
}

static void on_read_reply(tg__call_t *call, int status, bool has_more,
                          const uint8_t *reply, size_t len) {
  static const uint8_t empty[1];
  char msg[TG__MSG_MAX] = "";
  int err = status;
  tg_slice_reassembler_t *ra = call->ext_ra ? call->ext_ra : &call->ra;
  /* Every frame that arrived, as a relay numbers them. */
  if (status == 0 || status == TG_EREMOTE_FAILED) {
    if (call->frames) (*call->frames)++;
    if (call->bytes && status == 0) *call->bytes += reply ? len : 0;
  }
  if (status == 0) {
    err = tg_slice_reassembler_feed(ra, reply ? reply : empty,
                                    reply ? len : 0, emit_packet, call);
    if (err == 0 && !has_more) {
      err = tg_slice_reassembler_finish(ra);
      if (err) snprintf(msg, sizeof(msg),
                        "the %s stream ended inside a packet",
                        tg_cport_name(TG_CPORT_ReadBuffers));
    } else if (err) {
      read_failure(call, err, msg, sizeof(msg));
    }
  } else {
    tg__failure_why(call, status,
                    "no tracing session on this connection, or a read "
                    "already in progress", msg, sizeof(msg));
  }
  if (err == 0 && has_more) return;
  /* A stream that failed on our side: its remaining replies are ignored. */
  if (has_more) tg__call_cancel(call);
  tg__call_end_t e = tg__call_end(call);
  e.cb.done(e.c, e.ctx, err, msg);
}

int tg_consumer_read_buffers(tg_consumer_t *c, tg_consumer_packet_cb on_packet,
                             tg_consumer_done_cb on_done, void *ctx) {
  if (!on_packet || !on_done) return -EINVAL;
  tg__call_t *call = tg__call_new(c, tg_cport_name(TG_CPORT_ReadBuffers), ctx,
                                  on_read_reply);
  if (!call) return -ENOMEM;
  call->cb.done = on_done;
  call->on_packet = on_packet;
  tg_slice_reassembler_init(&call->ra, c->max_packet);
  Perfetto__Protos__ReadBuffersRequest r =
      PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  return tg__invoke_msg(call, &r.base);
}

int tg_consumer_read_buffers_into(tg_consumer_t *c, tg_slice_reassembler_t *ra,
                                  uint64_t *frames, uint64_t *bytes,
                                  tg_consumer_packet_cb on_packet,
                                  tg_consumer_done_cb on_done, void *ctx) {
  if (!on_packet || !on_done || !ra) return -EINVAL;
  tg__call_t *call = tg__call_new(c, tg_cport_name(TG_CPORT_ReadBuffers), ctx,
                                  on_read_reply);
  if (!call) return -ENOMEM;
  call->cb.done = on_done;
  call->on_packet = on_packet;
  tg_slice_reassembler_init(&call->ra, c->max_packet);
  call->ext_ra = ra;
  call->frames = frames;
  call->bytes = bytes;
  Perfetto__Protos__ReadBuffersRequest r =
      PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  return tg__invoke_msg(call, &r.base);
}
