/* ipc/net_addr_dial.h: resolve a tg_net_addr_t and connect a TCP socket to
 * it on libuv, trying every resolved address in turn (a name may resolve
 * to ::1 before 127.0.0.1 while the server listens on one of them only).
 *
 * The result is a connected socket descriptor, not a libuv handle: a
 * handle cannot move in memory once initialised, so the caller adopts the
 * descriptor into its own handle (uv_tcp_open). No timeout of its own: the
 * caller bounds the whole dial and cancels it.
 *
 * Callbacks follow libuv's rules: if tg_net_dial_start() fails, on_dialed
 * never runs; otherwise it runs exactly once, from the loop, never inside
 * a call made by the owner.
 */
#ifndef TRACEGATE_IPC_NET_ADDR_DIAL_H
#define TRACEGATE_IPC_NET_ADDR_DIAL_H

#include <stdbool.h>

#include <uv.h>

#include "ipc/net_addr.h"

typedef struct tg_net_dial tg_net_dial_t;

/* |status| 0: |fd| is a connected, close-on-exec TCP socket, now owned by
 * the callee. Otherwise |fd| is -1 and |status| says why: UV_ECANCELED
 * after tg_net_dial_cancel(), a UV_EAI_* from resolving, the last
 * connect's UV_E*, UV_EAI_NONAME when no IPv4/IPv6 address came back, or
 * a -errno. |d| is valid during the call only (tg_net_dial_error(),
 * tg_net_dial_addr()); it is freed afterwards. */
typedef void (*tg_net_dial_cb)(tg_net_dial_t *d, int status, int fd);

/* Starts resolving |addr| (copied) on |loop|; an address written as
 * numbers (IPv4 in any form inet_aton() reads, IPv6 without a scope) is
 * not resolved but connected to at once, still reported from the loop. |data| is the caller's,
 * returned by tg_net_dial_data(). On success *out is the dial, owned by
 * the dialer until on_dialed returns. Returns -EINVAL, -ENOMEM or a UV_E*
 * from uv_getaddrinfo; then nothing runs and nothing is left to free. */
int tg_net_dial_start(uv_loop_t *loop, const tg_net_addr_t *addr,
                      tg_net_dial_cb on_dialed, void *data,
                      tg_net_dial_t **out);

/* Stops the dial: on_dialed runs later, from the loop, with UV_ECANCELED.
 * Only before on_dialed has run (it is freed after). */
void tg_net_dial_cancel(tg_net_dial_t *d);

void *tg_net_dial_data(const tg_net_dial_t *d);

/* The address being tried, or last tried ("1.2.3.4:5678", "[::1]:5678"),
 * or "" before any. Owned by the dial. */
const char *tg_net_dial_addr(const tg_net_dial_t *d);

/* Why the dial failed, in words ("cannot resolve: ...", "cannot connect:
 * ...", "no usable address"), or "". Owned by the dial. */
const char *tg_net_dial_error(const tg_net_dial_t *d);

/* Whether the address went to the resolver (a name), or was connected to
 * as written (numbers). */
bool tg_net_dial_resolved(const tg_net_dial_t *d);

/* Makes the connected TCP socket |fd| give up on a silent peer within
 * about |timeout_s| seconds: SO_KEEPALIVE with idle + interval x count
 * adding up to it (an idle link whose peer vanished, e.g. behind a dead
 * NAT), and TCP_USER_TIMEOUT (sent data that stays unacknowledged: a link
 * that holds traffic). 0 leaves the socket as it is. Returns 0, or the
 * -errno of the first setsockopt that failed (the socket stays usable). */
int tg_net_set_dead_link_timeout(int fd, unsigned timeout_s);

#endif /* TRACEGATE_IPC_NET_ADDR_DIAL_H */
