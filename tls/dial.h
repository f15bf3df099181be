/* tls/dial.h: the client side of tg_tls_chan (tls/transport.h): from a
 * "host:port" to a verified server. The address is parsed by
 * ipc/net_addr.h and dialled by ipc/net_addr_dial.h (every resolved
 * address in turn); the connected socket then runs the client handshake.
 * All of it, resolving included, is bounded by opts->handshake_timeout_ms.
 */
#ifndef TRACEGATE_TLS_DIAL_H
#define TRACEGATE_TLS_DIAL_H

#include <uv.h>

#include "ipc/transport.h"
#include "tls/session.h"
#include "tls/transport.h"

/* Connects to |hostport| ("host:port", "1.2.3.4:port" or "[v6addr]:port";
 * every resolved address is tried in turn) and runs a client handshake.
 * The server's certificate must carry |expected_hostname| as a DNS SAN (or
 * CN); NULL means the host part of |hostport|. mbedtls 2.28 does not match
 * IP SANs, so pass the certificate's DNS name when connecting by address.
 * Ownership as for tg_tls_chan_accept(); success is reported by
 * opts->on_handshake(ch, 0). Returns -EINVAL for a malformed |hostport| or
 * a server config, -ENOMEM, or a UV_E* from uv_getaddrinfo. */
int tg_tls_chan_connect(uv_loop_t *loop, const char *hostport,
                        tg_tls_config_t *cfg, const char *expected_hostname,
                        const tg_tls_chan_opts_t *opts,
                        const tg_transport_cbs_t *cbs, void *data,
                        tg_tls_chan_t **out);

#endif /* TRACEGATE_TLS_DIAL_H */
