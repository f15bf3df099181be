/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp's HTTP side: POST /v1/traces as OTLP/HTTP defines it,
 * GET /metrics, served by GNU libmicrohttpd on one internal thread (every
 * request, and so every write into the agent, runs there, one at a time).
 * libmicrohttpd parses the HTTP, bodies framed by Content-Length or by
 * chunks alike (OTel's JavaScript exporters stream theirs: the
 * collector's libwebsockets layer refuses chunked bodies, which is why
 * this program does not use it), and bounds connections, per-address
 * connections, header memory and idle time. Decoded spans go to the data
 * source "tracegate.otlp" through the agent (otlp_write.h).
 *
 * Answers (OTLP specification, "OTLP/HTTP"):
 *   200  ExportTraceServiceResponse (protobuf or JSON, as asked), with
 *        partial_success { rejected_spans, error_message } when spans
 *        were refused (invalid ids);
 *   400  a body that does not decode; 413 past --max-body or its gzip
 *        past OTLP_MAX_INFLATED; 415 another Content-Type or
 *        Content-Encoding; 404 / 405 another path or method. The body of
 *        each is a google.rpc.Status whose message says why;
 *   503  + Retry-After when the spans cannot be kept now: the agent is not
 *        connected to tracegated, or its shared memory is more than half
 *        full (the service is behind). The request's spans are counted as
 *        refused under their service, and the sender retries.
 * A request with no session recording the data source is answered 200:
 * nothing asked for the spans (the flight recorder is off); they are
 * counted as unrecorded, never silently.
 */
#ifndef TRACEGATE_AGENT_OTLP_RECEIVER_H
#define TRACEGATE_AGENT_OTLP_RECEIVER_H

#include <pthread.h>
#include <stdint.h>

#include "agent/otlp/otlp_write.h"
#include "common/buf.h"
#include "tracegate/agent.h"

#define OTLP_MAX_SERVICES 256 /* counted by name; the rest as "(other)" */

typedef struct otlp_service_stats {
  char name[128];
  int64_t pid; /* its resource's process.pid when last seen, or 0 */
  uint64_t accepted;   /* written to the trace */
  uint64_t refused;    /* answered 503 (the sender may retry) */
  uint64_t unrecorded; /* taken while no session recorded them */
  uint64_t invalid;    /* rejected for their ids (partial success) */
} otlp_service_stats_t;

typedef struct otlp_receiver_config {
  const char *host; /* bind address; NULL: 127.0.0.1 */
  uint16_t port;    /* 0: any free port (tests) */
  size_t max_body;  /* 0: 4 MiB */
  /* Triggers (TraceConfig.trigger_config) to activate: on a span with
   * status ERROR, and on one that lasted |latency_ns| or more (0: no such
   * trigger). NULL: none. At most one activation of each per second. */
  const char *trigger_on_error;
  const char *trigger_on_latency;
  uint64_t latency_ns;
} otlp_receiver_config_t;

typedef struct otlp_receiver {
  otlp_receiver_config_t cfg;
  tg_ds_t *ds;
  struct MHD_Daemon *mhd;
  uint16_t port;
  size_t max_body;
  otlp_writer_t writer;
  /* The counters' writer, used in on_flush on the agent's thread for the
   * one instance it flushes (flush_inst). */
  otlp_writer_t flush_writer;
  unsigned flush_inst;
  /* Guards services[] and n_services: the requests (libmicrohttpd's
   * thread) count, a flush (the agent's thread) reads. */
  pthread_mutex_t mu;
  tg_buf_t inflated;
  otlp_service_stats_t services[OTLP_MAX_SERVICES + 1]; /* last: other */
  size_t n_services;
  otlp_service_stats_t *cur; /* the resource being decoded */
  /* |cur|'s counts of this resource so far, added to it under |mu| when
   * the resource ends (count_done): no lock per span. */
  uint64_t pend_accepted, pend_refused, pend_unrecorded, pend_invalid;
  /* What this request's counting sink does with spans (see receiver.c). */
  int mode;
  bool error_seen, slow_seen;
  uint64_t last_error_trigger_ns, last_latency_trigger_ns;
  uint64_t requests, bad_requests;
  /* Requests answered 503 at their headers for want of a body slot, and
   * the bodies being received: libmicrohttpd's thread alone. */
  uint64_t busy_requests;
  unsigned bodies_open;
} otlp_receiver_t;

/* Registers the data source (before tg_agent_init). 0 or its error. */
int otlp_receiver_register(otlp_receiver_t *r);
/* Listens and serves on libmicrohttpd's thread. 0, -EINVAL (|cfg->host|
 * not a numeric address), or -EIO (libmicrohttpd could not start, e.g.
 * the port is taken; logged). */
int otlp_receiver_start(otlp_receiver_t *r, const otlp_receiver_config_t *cfg);
uint16_t otlp_receiver_port(const otlp_receiver_t *r);
/* Stops serving (joins the thread) and frees what |r| holds. */
void otlp_receiver_stop(otlp_receiver_t *r);

#endif /* TRACEGATE_AGENT_OTLP_RECEIVER_H */
