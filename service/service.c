/* tracegated's lifetime: both sockets up, everything torn down in order. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/notice.h"
#include "service/consumer_lease.h"
#include "service/consumer_port.h"
#include "service/producer_port.h"
#include "service/service.h"
#include "service/session.h"
#include "tracegate/error.h"

int tg_service_start(tg_service_t *svc, uv_loop_t *loop,
                     const tg_service_options_t *opt) {
  memset(svc, 0, sizeof(*svc));
  svc->loop = loop;
  svc->opt = *opt;
  if (!svc->opt.clock) svc->opt.clock = &tg_clock_monotonic;
  if (!svc->opt.max_producers) svc->opt.max_producers = 1024;
  if (!svc->opt.max_consumers) svc->opt.max_consumers = 64;
  if (!svc->opt.session_lease_ms ||
      svc->opt.session_lease_ms > TG_SERVICE_MAX_SESSION_LEASE_MS)
    svc->opt.session_lease_ms = TG_SERVICE_DEFAULT_SESSION_LEASE_MS;
  if (!svc->opt.ds_start_timeout_ms ||
      svc->opt.ds_start_timeout_ms > TG_SERVICE_MAX_START_TIMEOUT_MS)
    svc->opt.ds_start_timeout_ms = TG_SERVICE_DEFAULT_START_TIMEOUT_MS;
  tg_list_init(&svc->producers);
  tg_list_init(&svc->sessions);
  tg_list_init(&svc->consumers);
  tg__producer_port_bind(svc, &svc->producer_def);
  tg__consumer_port_bind(svc, &svc->consumer_defs[0]);
  tg__consumer_lease_bind(svc, &svc->consumer_defs[1]);
  int rv = tg_ipc_host_listen(loop, opt->producer_socket, opt->producer_mode,
                              &svc->producer_def, 1, svc->opt.max_producers,
                              &svc->producer_host);
  if (rv < 0) {
    TG_ERROR("%s cannot listen on producer socket %s: %s",
             rv == -EADDRINUSE ? TG_NOTE(SERVICE_SOCKET_IN_USE)
                               : TG_NOTE(SERVICE_LISTEN_FAILED),
             opt->producer_socket,
             rv == -EADDRINUSE ? "another service is running there"
                               : tg_strerror(rv));
    return rv;
  }
  /* Any local user may connect here: one must not keep the others out. */
  tg_ipc_host_share_by_uid(svc->producer_host, true);
  rv = tg_ipc_host_listen(loop, opt->consumer_socket, opt->consumer_mode,
                          svc->consumer_defs, 2, svc->opt.max_consumers,
                          &svc->consumer_host);
  if (rv < 0) {
    TG_ERROR("%s cannot listen on consumer socket %s: %s",
             rv == -EADDRINUSE ? TG_NOTE(SERVICE_SOCKET_IN_USE)
                               : TG_NOTE(SERVICE_LISTEN_FAILED),
             opt->consumer_socket,
             rv == -EADDRINUSE ? "another service is running there"
                               : tg_strerror(rv));
    tg_ipc_host_close(svc->producer_host, NULL, NULL);
    svc->producer_host = NULL;
    return rv;
  }
  svc->hosts_open = 2;
  TG_INFO("listening: producers on %s, consumers on %s", opt->producer_socket,
          opt->consumer_socket);
  return 0;
}

static void on_host_closed(void *arg) {
  tg_service_t *svc = arg;
  if (--svc->hosts_open == 0 && svc->stopped) svc->stopped(svc->stopped_arg);
}

void tg_service_stop(tg_service_t *svc, void (*done)(void *), void *arg) {
  if (svc->stopping) return;
  svc->stopping = true;
  svc->stopped = done;
  svc->stopped_arg = arg;
  /* Sessions first: their files get everything written so far. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    tg__session_free(s);
  }
  tg_ipc_host_close(svc->consumer_host, on_host_closed, svc);
  tg_ipc_host_close(svc->producer_host, on_host_closed, svc);
}
