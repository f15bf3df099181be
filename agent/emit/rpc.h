/* tracegate-emit's rpc mode: one request across two processes (or two
 * hosts) as two slices joined by a flow, what docs/agent.md's
 * client/server example does by hand.
 *
 * The client makes a fresh W3C context per call (tg_trace_context_new),
 * writes "rpc.call" (category "rpc") from just before the request is sent
 * to just after its answer is read, carrying TG_FLOW(id), id being
 * tg_flow_id_from_context(trace-id, parent-id) of the context it sent; the
 * server writes "rpc.serve" around its answer, carrying
 * TG_TERMINATING_FLOW of the same derivation from the header it parsed.
 * The protocol is rpc_wire.h's.
 *
 * Each side runs on one thread of plain blocking (client) or polled
 * (server) sockets: this is a load generator, not a service. Counts are
 * atomics, read by main.c for its summary while or after the thread runs.
 */
#ifndef TRACEGATE_AGENT_EMIT_RPC_H
#define TRACEGATE_AGENT_EMIT_RPC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "agent/emit/emit.h"
#include "tracegate/track_event.h"

/* The "rpc" category, registered by emit_rpc_register_category(). */
extern tg_category_t emit_rpc_cat;
int emit_rpc_register_category(void);

/* Connections served at once; more are accepted and closed at once. */
#define EMIT_RPC_MAX_CONNS 64

typedef struct emit_rpc_server {
  emit_shared_t *sh;
  int listen_fd;
  uint16_t port; /* bound */
  pthread_t thread;
  _Atomic uint64_t served;    /* calls answered "ok" */
  _Atomic uint64_t malformed; /* requests answered "error", or cut short */
  _Atomic uint64_t pings;
  _Atomic uint64_t conns;   /* connections accepted */
  _Atomic uint64_t refused; /* accepted past EMIT_RPC_MAX_CONNS, closed */
} emit_rpc_server_t;

/* Binds |bind_addr| (a numeric IPv4 or IPv6 address without a port) at
 * |port| (0: any free one, then in s->port) and listens. Returns 0, or
 * -EINVAL (not a numeric address) or -errno, logged. */
int emit_rpc_server_open(emit_rpc_server_t *s, emit_shared_t *sh,
                         const char *bind_addr, uint16_t port);
/* Serves on a thread of its own until sh->quit. Returns 0 or -errno. */
int emit_rpc_server_start(emit_rpc_server_t *s);
/* Joins the thread (sh->quit must be set) and closes every socket. */
void emit_rpc_server_stop(emit_rpc_server_t *s);
/* Closes the listener of a server whose thread never started. */
void emit_rpc_server_close(emit_rpc_server_t *s);
/* "rpc: served=N malformed=N pings=N connections=N refused=N" */
void emit_rpc_server_counts(const emit_rpc_server_t *s, char *out,
                            size_t cap);

typedef struct emit_rpc_client {
  emit_shared_t *sh;
  char host[256];
  char port[8];
  pthread_t thread;
  _Atomic uint64_t calls;  /* requests sent or attempted on a connection */
  _Atomic uint64_t ok;     /* answered "ok" */
  _Atomic uint64_t failed; /* calls - ok: no answer, "error", garbage */
  _Atomic uint64_t connects;         /* connections made */
  _Atomic uint64_t connect_failures; /* attempts that failed */
} emit_rpc_client_t;

/* Parses |target| ("host:port", "[v6]:port"). Returns 0 or -EINVAL. */
int emit_rpc_client_init(emit_rpc_client_t *c, emit_shared_t *sh,
                         const char *target);
/* Calls on a thread of its own while the "rpc" category is on, at
 * sh->opts->rate per second (0: back to back), sh->opts->count per
 * session (0: no bound), until sh->quit. Returns 0 or -errno. */
int emit_rpc_client_start(emit_rpc_client_t *c);
void emit_rpc_client_stop(emit_rpc_client_t *c);
/* "rpc: calls=N ok=N failed=N connects=N connect_failures=N" */
void emit_rpc_client_counts(const emit_rpc_client_t *c, char *out,
                            size_t cap);

#endif /* TRACEGATE_AGENT_EMIT_RPC_H */
