/* The health listener (coll.h): health_listen's plain HTTP port, which
 * answers GET /healthz and nothing else, for what probes the collector
 * without a client certificate (a load balancer, a Kubernetes probe) while
 * the API's listener asks every client for one.
 *
 * It is a second server of the same HTTP layer (collector/http/http.h: lws
 * parses, the same caps on connections, bodies and headers), on the same
 * loop, with a handler that knows one path: no route of the API, the page
 * or /metrics is reachable through it, whatever the request says, and it
 * reads nothing of the daemon's state. Its answer means what /healthz on
 * the API's listener means: the daemon's loop runs.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/api.h"
#include "collector/http/http.h"
#include "common/log.h"
#include "tracegate/error.h"

#define JSON "application/json"
/* Probes need few connections; the per-source cap is the layer's
 * quarter of these. */
#define HEALTH_MAX_CONNS 16
#define HEALTH_TIMEOUT_S 10

static void respond(tg_http_exchange_t *x, int status, const char *body) {
  if (tg_http_respond(x, status, JSON, body, strlen(body)) < 0)
    tg_http_respond(x, 500, NULL, NULL, 0);
}

static void handle(void *ctx, tg_http_exchange_t *x,
                   const tg_http_request_t *r) {
  (void)ctx;
  if (strcmp(r->path, "/healthz") != 0)
    return respond(x, 404, "{\"error\":\"this listener answers /healthz only\"}\n");
  if (strcmp(r->method, "GET") != 0)
    return respond(x, 405, "{\"error\":\"GET only\"}\n");
  respond(x, 200, "{\"status\":\"ok\"}\n");
}

/* Every answer is given within handle(): nothing is ever waiting. */
static void on_abandon(void *ctx, tg_http_exchange_t *x) {
  (void)ctx, (void)x;
}

int coll_health_start(coll_t *c) {
  const tg_coll_config_t *g = &c->cfg;
  if (!g->health_host[0]) return 0;
  tg_http_server_config_t hc = {
      /* The layer binds IP literals; the config also takes "localhost". */
      .host = strcasecmp(g->health_host, "localhost") ? g->health_host
                                                      : "127.0.0.1",
      .port = g->health_port,
      .max_body = 1024,
      .max_header = 4096,
      .max_conns = HEALTH_MAX_CONNS,
      .timeout_s = HEALTH_TIMEOUT_S,
      .clock = c->clock,
  };
  int rv = tg_http_server_start(c->loop, &hc, handle, on_abandon, c,
                                &c->health);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": health_listen: cannot listen on %s:%u: %s\n",
            g->health_host, (unsigned)g->health_port, tg_strerror(rv));
    return -1;
  }
  TG_INFO("health listener on http://%s:%u/healthz", g->health_host,
          (unsigned)tg_http_server_port(c->health));
  return 0;
}

void coll_health_stop(coll_t *c) {
  if (c->health) tg_http_server_stop(c->health, NULL, NULL);
  c->health = NULL;
}
