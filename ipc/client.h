/* IPC client: the calling side of the protocol over any framed transport.
 *
 * Binds services by name (BindService), reads their method ids from the
 * BindServiceReply (never hard-coded), invokes methods with numbered
 * requests and routes each InvokeMethodReply to the callback of its
 * request; streaming methods get one callback per reply until has_more is
 * false. Used by the agent (ProducerPort), the consumer library
 * (ConsumerPort) and the relay's client side.
 *
 * Every request's callback runs exactly once with has_more == false: with
 * the last reply, or with an error when the connection closes first. The
 * callbacks run from the loop, never inside the call that asked for them.
 *
 * Lifetime: the client owns nothing but its pending-call list; the caller
 * owns the transport and the client's memory. tg_ipc_client_close() closes
 * the transport; on_close runs after every pending callback has been
 * failed, and after it the memory may be freed.
 */
#ifndef TRACEGATE_IPC_CLIENT_H
#define TRACEGATE_IPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/transport.h"
#include "common/buf.h"
#include "common/list.h"

#define TG_IPC_CLIENT_MAX_SERVICES 4
#define TG_IPC_CLIENT_MAX_METHODS 32
#define TG_IPC_METHOD_NAME_MAX 48

typedef struct tg_ipc_client tg_ipc_client_t;

typedef struct tg_ipc_remote_service {
  uint32_t id;
  char name[TG_IPC_METHOD_NAME_MAX];
  size_t n_methods;
  struct {
    uint32_t id;
    char name[TG_IPC_METHOD_NAME_MAX];
  } methods[TG_IPC_CLIENT_MAX_METHODS];
} tg_ipc_remote_service_t;

/* |status|: 0, TG_EUNKNOWN_SERVICE (the host refused), or a connection
 * error. |svc| is valid until the client closes (NULL on error). */
typedef void (*tg_ipc_bind_cb)(tg_ipc_client_t *c, void *ctx, int status,
                               const tg_ipc_remote_service_t *svc);

/* One reply to an invoke. |status| is 0 when the host said success, or
 * TG_EREMOTE_FAILED when it said success=false (|reply| may still hold a
 * message), TG_EUNKNOWN_METHOD for a RequestError, or the connection error
 * (then |reply| is NULL). |reply| is valid during the call. A received fd
 * is available through tg_ipc_client_take_fd() during the call. */
typedef void (*tg_ipc_reply_cb)(tg_ipc_client_t *c, void *ctx, int status,
                                bool has_more, const uint8_t *reply,
                                size_t len);

typedef struct tg_ipc_client_cbs {
  /* The transport closed; all pending callbacks have run. Required. */
  void (*on_close)(tg_ipc_client_t *c, int status);
  /* The transport drained below its low-water mark. Optional. */
  void (*on_drain)(tg_ipc_client_t *c);
} tg_ipc_client_cbs_t;

struct tg_ipc_client {
  tg_transport_t *t;
  const tg_ipc_client_cbs_t *cbs;
  void *data; /* owner's */
  uint64_t next_request_id;
  tg_list_t pending;
  tg_ipc_remote_service_t services[TG_IPC_CLIENT_MAX_SERVICES];
  size_t n_services;
  bool closing;
  /* Scratch for the frame being sent, reused across requests; released
   * when the transport closes, and when a bind or invoke fails (so an
   * owner may free a client whose first bind failed). */
  tg_buf_t out;
  uint64_t frames_undecodable;
  uint64_t replies_unmatched;
  /* A RequestError addressed to no request (request_id 0): a relay's
   * reason for refusing the call whose InvokeMethodReply{success=false}
   * follows, when that method's reply has no error field of its own.
   * Printable ASCII; kept until the next InvokeMethodReply has been
   * dispatched. Perfetto's client drops such a frame (no request 0).
   * A RequestError that answers a call puts its own text here for the
   * length of that call's callback. */
  char notice[256];
};

/* Attaches the client to an open transport (it sets the transport's cbs
 * and data). |cbs| must outlive the client. */
void tg_ipc_client_init(tg_ipc_client_t *c, tg_transport_t *t,
                        const tg_ipc_client_cbs_t *cbs, void *data);

/* The notice for the reply being dispatched ("" if none): a relay's notice
 * before an InvokeMethodReply, or the text of the RequestError that
 * refused the call (TG_EUNKNOWN_METHOD, TG_EUNKNOWN_SERVICE). When the peer
 * closes, also the last notice it sent after its last reply, inside the
 * callbacks of the calls the close fails and inside on_close. Valid inside
 * its callback only. */
const char *tg_ipc_client_notice(const tg_ipc_client_t *c);

/* Sends BindService. Returns 0 (the callback will run) or a negative error
 * (it will not). */
int tg_ipc_client_bind(tg_ipc_client_t *c, const char *service,
                       tg_ipc_bind_cb cb, void *ctx);

/* The id of |method| in a bound service, or 0 if the host has no such
 * method. */
uint32_t tg_ipc_method_id(const tg_ipc_remote_service_t *svc,
                          const char *method);

/* Sends InvokeMethod{service, method, args}. |fd| >= 0 rides along
 * (ownership passes). |cb| NULL sends drop_reply=true. Returns 0 or a
 * negative error (-ENOENT unknown method name, TG_EFRAME_TOO_LARGE, -EPIPE
 * closing); on error |fd| is closed and |cb| never runs. |*request_id| (may
 * be NULL) gets the request's id. */
int tg_ipc_client_invoke(tg_ipc_client_t *c,
                         const tg_ipc_remote_service_t *svc,
                         const char *method, const uint8_t *args,
                         size_t args_len, int fd, tg_ipc_reply_cb cb,
                         void *ctx, uint64_t *request_id);

/* The same with an already resolved method id. */
int tg_ipc_client_invoke_id(tg_ipc_client_t *c, uint32_t service_id,
                            uint32_t method_id, const uint8_t *args,
                            size_t args_len, int fd, tg_ipc_reply_cb cb,
                            void *ctx, uint64_t *request_id);

/* Forgets the callback of a pending request (its replies are ignored from
 * now on). For owners that go away before the reply. */
void tg_ipc_client_cancel(tg_ipc_client_t *c, uint64_t request_id);

/* Inside a reply callback: takes the fd that came with the reply (the
 * caller owns it), or -1. */
int tg_ipc_client_take_fd(tg_ipc_client_t *c);

/* True while output is above the transport's high-water mark. */
static inline bool tg_ipc_client_congested(const tg_ipc_client_t *c) {
  return tg_transport_congested(c->t);
}

/* Closes the transport; pending callbacks then fail with |status| (or
 * TG_EPEER_CLOSED when 0) and on_close follows. Idempotent. */
void tg_ipc_client_close(tg_ipc_client_t *c, int status);

#endif /* TRACEGATE_IPC_CLIENT_H */
