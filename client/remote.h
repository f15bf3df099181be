/* client/remote.h: the transports that reach remote tracing services
 * (targets: target.h), each opened with a consumer on top: TLS to a
 * tracegate-relay, or `ssh host tracegate-relay --stdio`. The CLI,
 * `tracegate bridge` and tracegate-collector dial through them.
 *
 * A tg_remote_t is one connection attempt's transport: a TLS channel, or
 * an ssh child process with a socket pair on its stdin/stdout and a pipe on
 * its stderr. It outlives the consumer that runs over it: once the
 * consumer's on_close has run, tg_remote_release() closes what is left
 * (waits for the ssh child, kills it if it lingers) and reports, from the
 * loop, the transport's own words about a failure (the TLS verification
 * error, the last line ssh wrote to stderr).
 */
#ifndef TRACEGATE_CLIENT_REMOTE_H
#define TRACEGATE_CLIENT_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "client/target.h"
#include "consumer/consumer.h"
#include "consumer/fleet/host.h"
#include "tls/compress_transport.h"
#include "tls/session.h"

/* What the TLS targets need: the client configuration (CA, certificate,
 * key) and the name the relays' certificates must carry (NULL: each
 * target's host part; a target's own server_name comes first). */
typedef struct tg_remote_env {
  uv_loop_t *loop;
  tg_tls_config_t *tls; /* NULL when only ssh targets are used */
  const char *server_name;
  /* TCP keepalive + user timeout on TLS links (seconds; 0: none). */
  uint32_t dead_link_timeout_s;
  /* Saved TLS sessions (session_cache.h; NULL: every handshake full):
   * each TLS attempt offers its target's, and a successful handshake
   * saves the session (a refused attempt forgets it). Borrowed. */
  struct tg_session_cache *sessions;
  /* Counted per successful TLS handshake when not NULL. */
  struct tg_remote_tls_counts *counts;
  /* Where the user gave the CA, as a refusal names it ("--ca" when NULL;
   * the collector's config key otherwise). Static text, borrowed. */
  const char *ca_setting;
} tg_remote_env_t;

typedef struct tg_remote_tls_counts {
  uint64_t full, resumed;
} tg_remote_tls_counts_t;

/* Loads the client TLS configuration (|ca| required; |cert| and |key|
 * both or neither, named by the CLI's flags in the messages). Returns 0,
 * or -EINVAL or tg_tls_config_new()'s error with why in |err|. */
int tg_client_tls_load(const char *cert, const char *key, const char *ca,
                       tg_tls_config_t **out, char *err, size_t errn);

typedef struct tg_remote tg_remote_t;

/* Opens a transport to |t| and a consumer over it (cbs and data as for
 * tg_consumer_open; the consumer binds ConsumerPort at once and its
 * on_ready says when the relay is reached). On success *c and *rt are set;
 * after the consumer's on_close the caller must call tg_remote_release().
 * On failure returns a negative error with a message in |err|; nothing is
 * left to the caller. */
int tg_remote_open(const tg_remote_env_t *env, const tg_target_t *t,
                   const tg_consumer_cbs_t *cbs, void *data, tg_consumer_t **c,
                   tg_remote_t **rt, char *err, size_t n);

/* Whether |rt|'s TLS handshake was resumed from a saved session (false
 * for ssh, and until the handshake succeeded). */
bool tg_remote_resumed(const tg_remote_t *rt);

/* The zstd decorator between |rt|'s transport and its consumer, for the
 * owner to switch on once the relay agreed (owned by |rt|). */
tg_zstd_transport_t *tg_remote_zstd(tg_remote_t *rt);

/* Runs once |rt| is fully closed: |detail| is the transport's account of
 * a failure ("" if it has none), valid during the call. */
typedef void (*tg_remote_gone_cb)(void *ctx, const char *detail);

/* Releases |rt| after its consumer closed: frees a TLS channel; for ssh,
 * waits for the child (SIGTERM after 3 s, SIGKILL 2 s later) and the end
 * of its stderr. |cb| (may be NULL) runs from the loop once it is all
 * gone; |rt| is freed then. */
void tg_remote_release(tg_remote_t *rt, tg_remote_gone_cb cb, void *ctx);

/* A fleet's dialer (consumer/fleet/host.h) over these transports: each
 * host's target (tg_fleet_host_t.target) is its tg_target_t, and the
 * consumer's data its tg_fleet_host_t. |env| is borrowed for as long as
 * the dialer is used. */
tg_fleet_dialer_t tg_remote_dialer(tg_remote_env_t *env);

#endif /* TRACEGATE_CLIENT_REMOTE_H */
