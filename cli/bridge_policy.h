/* The verdict of `tracegate bridge` on a WebSocket upgrade: which paths
 * and origins open what. Pure (no I/O, no lws), apart from the bridge so
 * that its unit test and fuzz target link it alone.
 */
#ifndef TRACEGATE_CLI_BRIDGE_POLICY_H
#define TRACEGATE_CLI_BRIDGE_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "client/target.h"
#include "tls/session.h"

#define BRIDGE_MAX_ORIGINS 32
#define BRIDGE_PATH "/traced"

/* What the command was told; read-only once the server runs. */
typedef struct bridge_cfg {
  const char *consumer_socket;
  const char *origins[BRIDGE_MAX_ORIGINS]; /* --allow-origin, in order */
  size_t n_origins;
  tg_target_t *hosts; /* --hosts FILE; NULL: any host:port */
  size_t n_hosts;
  tg_tls_config_t *tls;    /* NULL: no --ca, /traced/HOST is refused */
  const char *server_name; /* --tls-server-name */
} bridge_cfg_t;

typedef enum bridge_verdict {
  BRIDGE_LOCAL,  /* /traced: the local consumer socket */
  BRIDGE_REMOTE, /* /traced/HOST: |target| over TLS */
  BRIDGE_REFUSE, /* |status| and |why| say so */
} bridge_verdict_t;

typedef struct bridge_decision {
  bridge_verdict_t verdict;
  unsigned status; /* HTTP status of a refusal */
  char why[160];
  tg_target_t target; /* BRIDGE_REMOTE */
} bridge_decision_t;

/* Decides on a WebSocket upgrade of |path_untrusted| from
 * |origin_untrusted| (NULL: no Origin header). Pure. */
void bridge_decide(const bridge_cfg_t *cfg, const char *path_untrusted,
                   const char *origin_untrusted, bridge_decision_t *out);

#endif /* TRACEGATE_CLI_BRIDGE_POLICY_H */
