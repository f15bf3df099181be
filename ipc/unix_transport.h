/* The UNIX-socket transport: a tg_ipc_chan_t behind the tg_transport_t
 * interface, so the IPC client runs over it like over TLS. Carries fds.
 * As the channel's, each payload its on_frame gets follows its 4-byte
 * length in memory (ipc/channel.h). */
#ifndef TRACEGATE_IPC_UNIX_TRANSPORT_H
#define TRACEGATE_IPC_UNIX_TRANSPORT_H

#include <uv.h>

#include "ipc/channel.h"
#include "ipc/transport.h"

typedef struct tg_unix_transport {
  tg_transport_t base; /* first: a tg_transport_t * points here */
  tg_ipc_chan_t chan;
} tg_unix_transport_t;

/* Connects to |addr| (path or "@abstract") and opens the channel. |t| is
 * caller memory that must stay valid until the transport's on_close; set
 * t->base.cbs and t->base.data before returning to the loop. Returns 0 or a
 * negative error (then no callback runs). */
int tg_unix_transport_connect(uv_loop_t *loop, tg_unix_transport_t *t,
                              const char *addr);

/* The same over an fd that is already connected (a socketpair, a pipe
 * bridge); ownership of |fd| passes to the transport. */
int tg_unix_transport_open(uv_loop_t *loop, tg_unix_transport_t *t, int fd);

#endif /* TRACEGATE_IPC_UNIX_TRANSPORT_H */
