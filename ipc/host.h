/* IPC host: the service side of the protocol on one listening UNIX socket.
 *
 * Accepts connections, answers BindService with the method table of the
 * services it exposes (method ids are 1-based in declaration order, like
 * Perfetto's), decodes InvokeMethod and calls the method's handler. Unknown
 * services and methods get explicit failures; frames that are not IPCFrames
 * are dropped and counted; unknown frame kinds get a RequestError.
 *
 * A handler receives a tg_ipc_call_t and answers it now or later (deferred
 * replies: EnableTracing answers when tracing ends, streams answer many
 * times). A call is only valid while its connection is: services forget
 * their pending calls in on_disconnect, which runs before the connection's
 * memory is released.
 *
 * Every connection's output is bounded (any local user may connect to the
 * producer socket): a client that sends requests without reading the
 * replies is not read any more once TG_IPC_HOST_INPUT_HOLD bytes wait for
 * it (its requests stay in its own socket buffer), and is read again when
 * it has drained them; one that lets TG_IPC_HOST_OUTPUT_HARD_CAP bytes
 * pile up (streams the service pushes: ReadBuffers, GetAsyncCommand) is
 * disconnected, logged with its pid, uid and socket.
 *
 * The connections a host accepts at once (max_conns) can be shared between
 * local users (tg_ipc_host_share_by_uid; the producer socket's are), told
 * apart by the kernel's SO_PEERCRED uid: at the limit, a
 * new connection from a user who holds at least two fewer than the user
 * holding the most closes one of that user's (one that has bound no
 * service yet, the oldest first; else its newest) and takes its place;
 * any other is refused. So a user who fills the producer socket with idle
 * connections cannot keep another user's producers out: against one other
 * user it keeps at most half of the slots, plus one. Refusals and
 * evictions are counted in the stats and logged within a budget (50
 * lines, then 10 a second, then a count).
 */
#ifndef TRACEGATE_IPC_HOST_H
#define TRACEGATE_IPC_HOST_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "ipc/channel.h"
#include "common/list.h"

typedef struct tg_ipc_host tg_ipc_host_t;
typedef struct tg_ipc_host_conn tg_ipc_host_conn_t;

typedef struct tg_ipc_call {
  tg_ipc_host_conn_t *conn;
  uint64_t request_id;
  bool drop_reply;
} tg_ipc_call_t;

typedef void (*tg_ipc_method_fn)(void *ctx, tg_ipc_call_t call,
                                 const uint8_t *args, size_t len);

typedef struct tg_ipc_method_def {
  const char *name;
  tg_ipc_method_fn fn; /* NULL: answered with an explicit "not supported" */
} tg_ipc_method_def_t;

typedef struct tg_ipc_service_def {
  const char *name;
  const tg_ipc_method_def_t *methods;
  size_t n_methods;
  void *ctx; /* passed to every handler */
  /* A connection that bound this service went away. */
  void (*on_disconnect)(void *ctx, tg_ipc_host_conn_t *conn);
  /* The connection's output queue drained below its low-water mark after
   * having been above the high-water mark. Optional. */
  void (*on_drain)(void *ctx, tg_ipc_host_conn_t *conn);
} tg_ipc_service_def_t;

struct tg_ipc_host_conn {
  tg_ipc_chan_t chan;
  tg_ipc_host_t *host;
  tg_list_t node;
  uint64_t id;
  uint32_t bound; /* bit i: service i bound */
  void *user;     /* per-connection state of the service that owns it */
  struct tg_ipc_uid_share *share; /* its user's count; NULL once evicted */
  bool evicted;   /* closed for another user's connection (fair share) */
};

/* Output queued for one client above which its requests are not read. */
#define TG_IPC_HOST_INPUT_HOLD (64u * 1024)
/* Output queued for one client above which it is disconnected: 4x the
 * high-water mark at which the service stops streaming bulk data to it. */
#define TG_IPC_HOST_OUTPUT_HARD_CAP (16u * 1024 * 1024)

typedef struct tg_ipc_host_limits {
  size_t input_hold;      /* 0: read whatever is queued */
  size_t output_hard_cap; /* 0: never disconnect for it */
} tg_ipc_host_limits_t;

typedef struct tg_ipc_host_stats {
  uint64_t output_cap_disconnects;
  uint64_t connections_accepted;
  uint64_t connections_refused;
  uint64_t connections_evicted; /* closed for another user's (fair share) */
  uint64_t frames_undecodable;
  uint64_t requests_unknown;
} tg_ipc_host_stats_t;

/* Listens on |addr| (path or "@abstract"). A path already bound by a live
 * listener is refused with -EADDRINUSE; a stale socket file is removed; a
 * path that exists and is not a socket is refused with -EEXIST. |mode|
 * applies to path sockets (e.g. 0666 producers, 0660 consumers).
 * |services| (at most 32) must outlive the host. */
int tg_ipc_host_listen(uv_loop_t *loop, const char *addr, mode_t mode,
                       const tg_ipc_service_def_t *services, size_t n,
                       size_t max_conns, tg_ipc_host_t **out);

/* Closes the listener and every connection (their on_disconnect run), then
 * frees the host from the loop; |done| (optional) runs when all is closed.
 * The socket file is removed. */
void tg_ipc_host_close(tg_ipc_host_t *host, void (*done)(void *), void *arg);

const tg_ipc_host_stats_t *tg_ipc_host_stats(const tg_ipc_host_t *host);

/* Shares the connection limit between local users as described above
 * (off by default: a host of trusted clients refuses past its limit). */
void tg_ipc_host_share_by_uid(tg_ipc_host_t *host, bool on);

/* Replies to |call|. |msg| may be NULL for an empty reply. |fd| >= 0 rides
 * along and is owned by the host from now on. Returns 0 or a negative error
 * (connection gone, encoding failure). A drop_reply call sends nothing. */
int tg_ipc_reply(const tg_ipc_call_t *call, bool success, bool has_more,
                 const ProtobufCMessage *msg, int fd);

/* The same with the reply message already serialised (|reply| is copied). */
int tg_ipc_reply_bytes(const tg_ipc_call_t *call, bool success, bool has_more,
                       const uint8_t *reply, size_t len, int fd);

/* Closes one connection (its services' on_disconnect run first). */
void tg_ipc_host_conn_close(tg_ipc_host_conn_t *conn, int status);

#endif /* TRACEGATE_IPC_HOST_H */
