/* tg_tls_chan_connect: parse, dial (ipc/net_addr_dial.h), adopt the
 * socket, start the client handshake. */
#include "tls/dial.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "ipc/net_addr.h"
#include "ipc/net_addr_dial.h"
#include "tls/transport_internal.h"

static void on_dialed(tg_net_dial_t *d, int status, int fd) {
  tg_tls_chan_t *ch = tg_net_dial_data(d);
  ch->dial = NULL;
  tg__tls_chan_note_addr(ch, tg_net_dial_addr(d));
  if (ch->state >= ST_CLOSING) {
    /* Closed while dialing (the close cancelled the dial): the channel
     * was waiting for this report to finish. */
    if (fd >= 0) close(fd);
    tg__tls_chan_finish(ch);
    return;
  }
  if (status < 0) {
    tg__tls_chan_set_why(ch, "%s", tg_net_dial_error(d));
    tg__tls_chan_fail_handshake(ch, status);
    return;
  }
  tg_net_set_dead_link_timeout(fd, ch->opts.dead_link_timeout_s);
  int rv = uv_tcp_open(&ch->tcp, fd);
  if (rv < 0) {
    close(fd);
    tg__tls_chan_set_why(ch, "uv_tcp_open: %s", uv_strerror(rv));
    tg__tls_chan_fail_handshake(ch, rv);
    return;
  }
  tg__tls_chan_connected(ch);
}

int tg_tls_chan_connect(uv_loop_t *loop, const char *hostport,
                        tg_tls_config_t *cfg, const char *expected_hostname,
                        const tg_tls_chan_opts_t *opts,
                        const tg_transport_cbs_t *cbs, void *data,
                        tg_tls_chan_t **out) {
  *out = NULL;
  if (tg_tls_config_is_server(cfg) || !hostport) return -EINVAL;
  tg_net_addr_t addr;
  int rv = tg_net_addr_parse(hostport, 0, 0, &addr);
  if (rv) return rv;
  const char *name = expected_hostname ? expected_hostname : addr.host;
  tg_tls_chan_t *ch;
  rv = tg__tls_chan_new(loop, cfg, name, opts, cbs, data, &ch);
  if (rv) return rv;
  snprintf(ch->peer, sizeof(ch->peer), "%s", hostport);
  rv = tg_net_dial_start(loop, &addr, on_dialed, ch, &ch->dial);
  if (rv) {
    tg__tls_chan_abort(ch);
    return rv;
  }
  tg__tls_chan_start_timer(ch);
  *out = ch;
  return 0;
}
