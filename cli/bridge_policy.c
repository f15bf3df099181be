/* Who may open what through `tracegate bridge`: the verdict on one
 * WebSocket upgrade, from its path and Origin. Pure: no I/O, no logging;
 * bridge_conn.c acts on the verdict and logs it.
 *
 * Any web page the user visits can ask the browser to open a WebSocket
 * to 127.0.0.1, and the browser sends that page's origin: the Origin
 * header is what stands between such a page and the tracing service, so
 * it is compared exactly (no prefix, no case folding), and a request
 * without one is refused too.
 */
#include <stdio.h>
#include <string.h>

#include "cli/bridge_policy.h"

/* Perfetto's websocket_bridge allows these, and so do we. */
static const char *const perfetto_origins[] = {
    "https://ui.perfetto.dev",
    "http://localhost:10000",
    "http://127.0.0.1:10000",
};

static bool origin_allowed(const bridge_cfg_t *cfg, const char *origin) {
  size_t n = sizeof(perfetto_origins) / sizeof(perfetto_origins[0]);
  for (size_t i = 0; i < n; i++)
    if (!strcmp(origin, perfetto_origins[i])) return true;
  for (size_t i = 0; i < cfg->n_origins; i++)
    if (!strcmp(origin, cfg->origins[i])) return true;
  return false;
}

static void refuse(bridge_decision_t *d, unsigned status, const char *why) {
  d->verdict = BRIDGE_REFUSE;
  d->status = status;
  snprintf(d->why, sizeof(d->why), "%s", why);
}

/* --hosts given: HOST must be one of them, by its spec, its host:port or
 * the name `record --hosts` gives it (tg_targets_name). */
static const tg_target_t *listed_host(const bridge_cfg_t *cfg,
                                      const char *host) {
  for (size_t i = 0; i < cfg->n_hosts; i++) {
    const tg_target_t *t = &cfg->hosts[i];
    if (!strcmp(host, t->spec) || !strcmp(host, t->hostport) ||
        !strcmp(host, t->name))
      return t;
  }
  return NULL;
}

static void decide_remote(const bridge_cfg_t *cfg, const char *host,
                          bridge_decision_t *d) {
  if (!cfg->tls) {
    refuse(d, 503, "no TLS configuration for relays (give --ca, --cert and "
                   "--key)");
    return;
  }
  if (cfg->hosts) {
    const tg_target_t *t = listed_host(cfg, host);
    if (!t) {
      refuse(d, 403, "host not in --hosts");
      return;
    }
    if (t->kind != TG_TARGET_TLS) {
      refuse(d, 403, "ssh hosts are not bridged (only host:port)");
      return;
    }
    d->target = *t;
    d->verdict = BRIDGE_REMOTE;
    return;
  }
  char err[128];
  if (tg_target_parse(host, &d->target, err, sizeof(err)) < 0) {
    refuse(d, 400, "HOST is not host[:port]");
    return;
  }
  if (d->target.kind != TG_TARGET_TLS) {
    refuse(d, 400, "ssh hosts are not bridged (only host:port)");
    return;
  }
  d->verdict = BRIDGE_REMOTE;
}

void bridge_decide(const bridge_cfg_t *cfg, const char *path_untrusted,
                   const char *origin_untrusted, bridge_decision_t *out) {
  memset(out, 0, sizeof(*out));
  size_t n = strlen(BRIDGE_PATH);
  const char *p = path_untrusted;
  if (strncmp(p, BRIDGE_PATH, n) || (p[n] && p[n] != '/')) {
    refuse(out, 404, "no such endpoint (/traced, /traced/HOST)");
    return;
  }
  if (!origin_untrusted || !origin_untrusted[0]) {
    refuse(out, 403, "no Origin header");
    return;
  }
  if (!origin_allowed(cfg, origin_untrusted)) {
    refuse(out, 403, "origin not allowed (see --allow-origin)");
    return;
  }
  if (!p[n]) {
    out->verdict = BRIDGE_LOCAL;
    return;
  }
  const char *host = p + n + 1;
  if (!host[0] || strlen(host) >= sizeof(out->target.spec)) {
    refuse(out, 400, "HOST is not host[:port]");
    return;
  }
  decide_remote(cfg, host, out);
}
