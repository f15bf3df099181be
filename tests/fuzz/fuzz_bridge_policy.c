/* Fuzzes `tracegate bridge`'s verdict on a WebSocket upgrade
 * (cli/bridge_policy.c, bridge_decide): the path and the Origin
 * header come from any web page the user visits.
 *
 * Input: one byte of configuration (bit 0: TLS configured; bit 1: a
 * --hosts list; bit 2: one --allow-origin), then the path, a NUL, and the
 * origin (absent when there is no second NUL-free part: no Origin header).
 *
 * Invariants (trap on violation):
 * - a refusal has a status among 400, 403, 404, 503 and a reason;
 * - /traced is the only path that reaches the local socket, and only from
 *   an allowed origin (compared exactly);
 * - a remote verdict needs TLS, a path under /traced/, an allowed origin,
 *   a TLS (not ssh) target with a host:port, and, with --hosts, one of
 *   the listed targets;
 * - deciding again gives the same verdict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bridge_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const allowed[] = {
    "https://ui.perfetto.dev", "http://localhost:10000",
    "http://127.0.0.1:10000", "http://localhost:8080"};

static int origin_ok(const char *o, size_t n_allowed) {
  if (!o) return 0;
  for (size_t i = 0; i < n_allowed; i++)
    if (!strcmp(o, allowed[i])) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  uint8_t flags = data[0];
  /* Exact-size copies, NUL-terminated: the path and the origin. */
  const char *rest = (const char *)data + 1;
  size_t n = size - 1;
  const char *nul = memchr(rest, 0, n);
  size_t path_len = nul ? (size_t)(nul - rest) : n;
  char *path = malloc(path_len + 1);
  char *origin = NULL;
  if (!path) return 0;
  memcpy(path, rest, path_len);
  path[path_len] = 0;
  if (nul) {
    size_t ol = n - path_len - 1;
    origin = malloc(ol + 1);
    if (!origin) {
      free(path);
      return 0;
    }
    memcpy(origin, nul + 1, ol);
    origin[ol] = 0;
  }

  static tg_target_t hosts[2];
  char err[128];
  if (tg_target_parse("relay.example:7467", &hosts[0], err, sizeof(err)) ||
      tg_target_parse("ssh://jump.example", &hosts[1], err, sizeof(err)))
    __builtin_trap();
  memcpy(hosts[0].name, "relay.example", sizeof("relay.example"));
  memcpy(hosts[1].name, "jump.example", sizeof("jump.example"));
  bridge_cfg_t cfg = {.consumer_socket = "/run/x"};
  if (flags & 1) cfg.tls = (tg_tls_config_t *)&cfg; /* only its presence */
  if (flags & 2) {
    cfg.hosts = hosts;
    cfg.n_hosts = 2;
  }
  size_t n_allowed = 3;
  if (flags & 4) {
    cfg.origins[0] = allowed[3];
    cfg.n_origins = 1;
    n_allowed = 4;
  }

  bridge_decision_t d, again;
  bridge_decide(&cfg, path, origin, &d);
  bridge_decide(&cfg, path, origin, &again);
  if (d.verdict != again.verdict || d.status != again.status) __builtin_trap();
  switch (d.verdict) {
    case BRIDGE_REFUSE:
      if (d.status != 400 && d.status != 403 && d.status != 404 &&
          d.status != 503)
        __builtin_trap();
      if (!d.why[0] || !memchr(d.why, 0, sizeof(d.why))) __builtin_trap();
      break;
    case BRIDGE_LOCAL:
      if (strcmp(path, "/traced") || !origin_ok(origin, n_allowed))
        __builtin_trap();
      break;
    case BRIDGE_REMOTE:
      if (!cfg.tls || strncmp(path, "/traced/", 8) ||
          !origin_ok(origin, n_allowed))
        __builtin_trap();
      if (d.target.kind != TG_TARGET_TLS || !d.target.hostport[0] ||
          !memchr(d.target.hostport, 0, sizeof(d.target.hostport)) ||
          d.target.host[0] == '-')
        __builtin_trap();
      if (cfg.hosts && strcmp(d.target.hostport, hosts[0].hostport))
        __builtin_trap();
      break;
    default:
      __builtin_trap();
  }
  free(path);
  free(origin);
  return 0;
}
