/* ipc/net_addr_listen.h: bind a TCP listener on libuv to a tg_net_addr_t
 * and start accepting on it, for the relay's --listen and `tracegate
 * bridge`. The listening side of ipc/net_addr_dial.h; unlike the dialer
 * it never resolves: a listener binds to an address written as numbers.
 */
#ifndef TRACEGATE_IPC_NET_ADDR_LISTEN_H
#define TRACEGATE_IPC_NET_ADDR_LISTEN_H

#include <stdint.h>
#include <uv.h>

#include "ipc/net_addr.h"

/* Binds |listener| to |at| and listens with |backlog|; |cb| then runs
 * from the loop for each connection, with |listener| as its server.
 *
 * The caller has already run uv_tcp_init() on |listener| and set
 * listener->data for |cb|; the handle stays the caller's, to uv_close()
 * whatever this returns (on failure it may be bound, never listening, so
 * |cb| never runs). |at| (a numeric host, tg_net_addr_to_sockaddr(); port
 * 0: any free port) is read during the call only.
 *
 * Returns 0 with *port_out the port bound (the one the kernel chose for
 * port 0). Otherwise a negative code and *port_out untouched: -EINVAL if
 * |at| is a name, else the UV_E* of the bind, getsockname or listen that
 * failed (libuv's codes are -errno on Linux: UV_EADDRINUSE is
 * -EADDRINUSE), for uv_strerror() or tg_strerror(). */
int tg_net_tcp_listen(uv_tcp_t *listener, const tg_net_addr_t *at,
                      int backlog, uv_connection_cb cb, uint16_t *port_out);

#endif /* TRACEGATE_IPC_NET_ADDR_LISTEN_H */
