/* Bind, then listen; see ipc/net_addr_listen.h.
 *
 * The bound port is read between the two: the kernel picks port 0's at
 * bind, and a failure there leaves no listening socket behind. libuv
 * reports an address in use at listen, not at bind (uv_tcp_bind defers
 * EADDRINUSE), and getsockname returns that deferred error too. */
#include "ipc/net_addr_listen.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

int tg_net_tcp_listen(uv_tcp_t *listener, const tg_net_addr_t *at,
                      int backlog, uv_connection_cb cb, uint16_t *port_out) {
  struct sockaddr_storage ss;
  int rv = tg_net_addr_to_sockaddr(at, &ss);
  if (rv < 0) return rv;
  rv = uv_tcp_bind(listener, (const struct sockaddr *)&ss, 0);
  if (rv < 0) return rv;
  int len = sizeof(ss);
  rv = uv_tcp_getsockname(listener, (struct sockaddr *)&ss, &len);
  if (rv < 0) return rv;
  uint16_t port;
  if (ss.ss_family == AF_INET)
    port = ntohs(((const struct sockaddr_in *)&ss)->sin_port);
  else if (ss.ss_family == AF_INET6)
    port = ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
  else
    return -EAFNOSUPPORT;
  rv = uv_listen((uv_stream_t *)listener, backlog, cb);
  if (rv < 0) return rv;
  *port_out = port;
  return 0;
}
