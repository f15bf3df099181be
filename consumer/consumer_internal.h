/* Shared by the consumer library's files: the connection and the pending
 * call record. Not installed; nothing outside the consumer/ sources includes it. */
#ifndef TRACEGATE_CONSUMER_CONSUMER_INTERNAL_H
#define TRACEGATE_CONSUMER_CONSUMER_INTERNAL_H

#include <protobuf-c/protobuf-c.h>

#include "consumer/consumer.h"
#include "consumer/slice_reassembler.h"
#include "ipc/client.h"
#include "ipc/unix_transport.h"
#include "common/buf.h"

#define TG__MSG_MAX 512

/* A connection's state: BINDING -> READY, or REFUSED (below), and any of
 * them -> CLOSING, final. Changed only by consumer.c's set_state() against
 * its table, under common/fsm.h's policy. */
enum tg__consumer_state {
  TG__CONSUMER_BINDING,
  TG__CONSUMER_READY,
  /* ConsumerPort's bind failed while calls on another service were in
   * flight: those go on (and may make more) until none is left, then the
   * connection closes (tg__consumer_close_if_refused). */
  TG__CONSUMER_REFUSED,
  TG__CONSUMER_CLOSING,
};

typedef struct tg__call tg__call_t;

/* In TG__CONSUMER_REFUSED, once no call is in flight: closes with the
 * bind's error. Called after every callback of another service's call. */
void tg__consumer_close_if_refused(tg_consumer_t *c);

/* The caller's callback of a call: one member per kind of call. */
typedef union tg__call_cb {
  tg_consumer_done_cb done;
  tg_consumer_stats_cb stats;
  tg_consumer_attach_cb attach;
  tg_consumer_state_cb state;
  tg_consumer_caps_cb caps;
  tg_consumer_events_cb events;
  tg_consumer_reply_cb reply;
  tg_consumer_stream_cb stream;
} tg__call_cb_t;

struct tg_consumer {
  tg_ipc_client_t client;
  tg_unix_transport_t own_tr; /* used by tg_consumer_connect() only */
  const tg_ipc_remote_service_t *svc;
  enum tg__consumer_state state;
  uint64_t bad_transitions; /* refused by its table (a bug: logged) */
  bool local_close;
  bool can_pass_fds;
  size_t max_packet;
  const tg_consumer_cbs_t *cbs;
  void *data;
  tg__call_t *enable_call; /* the pending EnableTracing, if any */
  int raw_status;          /* the connection error behind TG_EPEER_CLOSED */
  int bind_status;         /* why the bind failed, reported by on_close */
  char bind_msg[TG__MSG_MAX];
};

/* Handles one reply of the call's request; owns |call| and frees it (with
 * tg__call_free) on the last one. |status| is already classified:
 * 0, TG_EREMOTE_FAILED, TG_EUNKNOWN_METHOD, TG_EPEER_CLOSED or -ECANCELED. */
typedef void (*tg__reply_fn)(tg__call_t *call, int status, bool has_more,
                             const uint8_t *reply, size_t len);

struct tg__call {
  tg_consumer_t *c;
  const char *method; /* static string */
  /* The service the call goes to; NULL: ConsumerPort. */
  const tg_ipc_remote_service_t *svc;
  uint64_t request_id;
  void *ctx;
  tg__reply_fn on_reply;
  tg__call_cb_t cb;
  /* ReadBuffers (zeroed for the other calls) */
  tg_consumer_packet_cb on_packet;
  tg_slice_reassembler_t ra;
  tg_slice_reassembler_t *ext_ra; /* the caller's, instead of |ra| */
  uint64_t *frames, *bytes;       /* counted per reply; may be NULL */
  int read_err;
  /* QueryServiceState with merge (zeroed without) */
  bool merge;
  tg_buf_t merged;
};

tg__call_t *tg__call_new(tg_consumer_t *c, const char *method, void *ctx,
                         tg__reply_fn on_reply);
void tg__call_free(tg__call_t *call);

/* What the caller's callback needs once its call is over. */
typedef struct tg__call_end {
  tg_consumer_t *c;
  void *ctx;
  tg__call_cb_t cb;
} tg__call_end_t;
/* Frees |call| and returns its callback with the consumer and ctx: the
 * callback runs after the free, so it may start new calls or close the
 * consumer. */
tg__call_end_t tg__call_end(tg__call_t *call);
/* Stops routing the request's replies to the call (the call stays the
 * caller's to free). */
void tg__call_cancel(tg__call_t *call);

/* Sends |args| (|len| bytes, borrowed) for |call|. On error frees |call|,
 * closes |fd| and returns a negative error (no callback runs). */
int tg__invoke(tg__call_t *call, const uint8_t *args, size_t len, int fd);
/* Packs |msg| and sends it like tg__invoke. */
int tg__invoke_msg(tg__call_t *call, const ProtobufCMessage *msg);
/* A new call of |method| whose replies go to |on_reply| and whose caller
 * is |cb|/|ctx|, sent with |msg| as tg__invoke_msg does. */
int tg__call_msg(tg_consumer_t *c, const char *method, tg__reply_fn on_reply,
                 tg__call_cb_t cb, void *ctx, const ProtobufCMessage *msg);

/* Fills |msg| for a failed |status| of |method| and returns the status to
 * report. |remote| (may be NULL): the service's own words, sanitised. */
int tg__failure(const tg__call_t *call, int status, const char *remote,
                char *msg, size_t n);
/* The same for the calls whose refusal the service does not explain:
 * TG_EREMOTE_FAILED reads "the service refused METHOD (|why|)", |why|
 * naming the likely causes. */
int tg__failure_why(const tg__call_t *call, int status, const char *why,
                    char *msg, size_t n);

/* Classifies a raw IPC status for the caller: 0, TG_EREMOTE_FAILED and
 * TG_EUNKNOWN_METHOD pass; a connection error becomes TG_EPEER_CLOSED (or
 * -ECANCELED after a local close), the raw one kept in c->raw_status. */
int tg__classify(tg_consumer_t *c, int status);

/* Unpacks |reply| (NULL/0 means an empty message). */
ProtobufCMessage *tg__unpack(const ProtobufCMessageDescriptor *d,
                             const uint8_t *reply, size_t len);

#endif /* TRACEGATE_CONSUMER_CONSUMER_INTERNAL_H */
