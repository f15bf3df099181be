/* tracegate-relay children and remote consumers for the relay benches.
 *
 * Certificates come from bench_certs(dir, BENCH_HOST, BENCH_CLIENT); each
 * relay listens on 127.0.0.1:0 with them and the CA's CRL (as the deployed
 * units run it), in front of one service's consumer socket. Remote consumers
 * are the consumer library over tg_tls_chan, like `tracegate record -H`. */
#ifndef TRACEGATE_BENCH_REMOTE_H
#define TRACEGATE_BENCH_REMOTE_H

#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

#include "consumer/consumer.h"
#include "tls/session.h"
#include "tls/dial.h"
#include "tls/transport.h"

#define BENCH_HOST "relay.test"
#define BENCH_CLIENT "bench"

typedef struct bench_relay {
  pid_t pid;
  int port;
  int ready_fd; /* until bench_relay_wait() */
  char log[160];
} bench_relay_t;

/* Forks tracegate-relay (log and audit trail in |dir|, named after |idx|)
 * without waiting for it, so many can start at once. Returns 0 or -1. */
int bench_relay_spawn(bench_relay_t *r, const char *dir, unsigned idx,
                      const char *consumer_sock);
/* The same with more flags for the relay (|extra|: NULL-terminated). */
int bench_relay_spawn_with(bench_relay_t *r, const char *dir, unsigned idx,
                           const char *consumer_sock,
                           const char *const extra[]);
/* Waits (bounded) for its "ready PORT". Returns 0, or -1 after printing
 * its log. */
int bench_relay_wait(bench_relay_t *r, int timeout_ms);

/* The bench client's TLS configuration, or NULL (printed). */
tg_tls_config_t *bench_client_tls(const char *dir);

/* Connects to 127.0.0.1:|port| over TLS and opens a consumer on the
 * channel (tg_consumer_open). *ch is the caller's to tg_tls_chan_free()
 * once the consumer's on_close has run (e.g. inside it). Returns 0 or a
 * negative error (then nothing is left to free and no callback runs). */
int bench_remote_open(uv_loop_t *loop, int port, tg_tls_config_t *cfg,
                      const tg_consumer_cbs_t *cbs, void *data,
                      tg_consumer_t **c, tg_tls_chan_t **ch);

/* Runs |loop| until cond(arg) holds or |timeout_ms| pass; returns
 * cond(arg). */
bool bench_run_until(uv_loop_t *loop, bool (*cond)(void *), void *arg,
                     int timeout_ms);

#endif /* TRACEGATE_BENCH_REMOTE_H */
