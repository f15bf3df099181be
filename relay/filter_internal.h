/* The frame checker's insides, shared by the files that make it up:
 *
 *   frame_filter.c  decode, authorize, rewrite; the calls in flight, and
 *                   where a reply is matched to its request
 *   filter_frames.c the frames it builds and the verdict's words
 *   relay_calls.c   TracegateRelay calls, answered on the connection
 *   own_calls.c     the relay's own calls to the service
 *
 * Nothing outside relay/ includes this; callers use relay/frame_filter.h
 * and relay/own_calls.h. None of these files does I/O or logs.
 */
#ifndef TRACEGATE_RELAY_FILTER_INTERNAL_H
#define TRACEGATE_RELAY_FILTER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "relay/frame_filter.h"

/* --- the verdict's words (filter_frames.c) -------------------------------- */

/* Sets |v->code| and |v->reason| (truncated). */
void tg__relay_say(tg_relay_verdict_t *v, tg_notice_t code, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));
void tg__relay_set_method(tg_relay_verdict_t *v, const char *method);

/* --- frames (filter_frames.c) ----------------------------------------------
 * Each appends one whole frame to |out| and returns 0, -ENOMEM or
 * TG_EFRAME_TOO_LARGE. Pointers are read during the call only. */

/* InvokeMethodReply whose reply_proto is already serialised (|body| may be
 * NULL when |blen| is 0). */
int tg__relay_append_reply_bytes(uint64_t request_id, bool success,
                                 const uint8_t *body, size_t blen,
                                 tg_buf_t *out);
/* The same with |reply| (NULL: empty) serialised here. */
int tg__relay_append_reply(uint64_t request_id, bool success,
                           const ProtobufCMessage *reply, tg_buf_t *out);
/* BindService{|service_name|}: the only fields a bind forwards. */
int tg__relay_append_bind(uint64_t request_id, const char *service_name,
                          tg_buf_t *out);
int tg__relay_append_bind_refusal(uint64_t request_id, tg_buf_t *out);
/* The canonical call: only the fields that were checked. */
int tg__relay_append_invoke(uint64_t request_id, uint32_t service_id,
                            uint32_t method_id, const uint8_t *args,
                            size_t alen, bool drop_reply, tg_buf_t *out);

/* --- denials (filter_frames.c) ---------------------------------------------
 * Both fill |v| as a refused call answered here and count it. */

/* InvokeMethodReply{success=false} with |reply| (NULL: empty), unless the
 * client asked for no reply. */
int tg__relay_deny(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                   bool drop_reply, const ProtobufCMessage *reply,
                   tg_buf_t *out);
/* The same, with |v->reason| in the method's own response where it has a
 * field for one, else in a RequestError notice just before the refusal. */
int tg__relay_deny_call(tg_relay_filter_t *f, tg_relay_verdict_t *v,
                        bool drop_reply, const char *method, tg_buf_t *out);

/* --- calls in flight (filter_calls.c) --------------------------------------
 * One entry per call whose reply is still to come, keyed by request id,
 * unique in the table: client calls are refused while their id is in
 * flight, and the relay's own ids are reserved. Only frame_filter.c reads
 * the table to match a reply; the others add the relay's own calls. */

/* Returns 0, or -ENOSPC when the table is full. |id| must not be in
 * flight. */
int tg__relay_track(tg_relay_filter_t *f, uint64_t id,
                    tg_relay_track_kind_t kind);
/* The kind of |id| (TG_TRACK_NONE: not in flight) and its slot in |*at|. */
tg_relay_track_kind_t tg__relay_tracked(const tg_relay_filter_t *f,
                                        uint64_t id, size_t *at);
/* Removes the entry in slot |at| (the last entry takes its place). */
void tg__relay_untrack(tg_relay_filter_t *f, size_t at);

/* The id of the learned ConsumerPort method |name|, or 0. */
uint32_t tg__relay_consumer_method_id(const tg_relay_filter_t *f,
                                      const char *name);

/* --- TracegateRelay (relay_calls.c) --------------------------------------- */

/* Decides an InvokeMethod addressed to TG_RELAY_SERVICE_ID whose request
 * id is not in flight. Returns as tg_relay_filter_client(). */
int tg__relay_answer_call(tg_relay_filter_t *f, tg_authz_role_t role,
                          const Perfetto__Protos__IPCFrame__InvokeMethod *im,
                          tg_buf_t *out, tg_relay_verdict_t *v);

/* --- the relay's own calls (own_calls.c) ---------------------------------
 * Given the reply frame's parts once frame_filter.c has matched it to the
 * call; each fills |v| as a dropped frame with TG_RELAY_EFFECT_OWN_*. */

/* The BindServiceReply (serialised) to BindService "TracegateConsumer". */
void tg__relay_lease_bind_reply(tg_relay_filter_t *f, const uint8_t *bind,
                                size_t len, tg_relay_verdict_t *v);
/* The InvokeMethodReply (serialised; empty for a RequestError) to
 * SetDisconnectLease. */
void tg__relay_lease_reply(tg_relay_filter_t *f, const uint8_t *reply,
                           size_t len, bool success, tg_relay_verdict_t *v);

#endif /* TRACEGATE_RELAY_FILTER_INTERNAL_H */
