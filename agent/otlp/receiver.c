/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp's HTTP side; see receiver.h. */
#include "agent/otlp/receiver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "agent/otlp/otlp_decode.h"
#include "common/json.h"
#include "common/log.h"
#include "pb/otlp/trace_service.pb-c.h"
#include "tracegate/error.h"

#define DEFAULT_MAX_BODY (4u << 20)
/* libmicrohttpd's bounds: connections in all, idle seconds, and each
 * connection's memory for its request head. No bound per address: on
 * loopback every app is 127.0.0.1, so it would be a bound on the host,
 * and one SDK's exports in flight (OTel JS: up to 30 by default) passed
 * the 16 it was; libmicrohttpd closes a connection past a limit with no
 * answer, which an exporter does not retry. Past MAX_CONNS that still
 * happens: a limit on descriptors, far above what SDKs open. */
#define MAX_CONNS 1024
/* Bodies being received at once: the memory bound (MAX_BODIES x
 * --max-body). A request past it is answered 503 with Retry-After at its
 * headers, which exporters retry, and counted as busy. */
#define MAX_BODIES 64
#define TIMEOUT_S 30
#define HEADER_MEMORY (64u << 10)
#define RETRY_AFTER_S "1"

enum { MODE_WRITE, MODE_REFUSE };

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* --- the agent side ------------------------------------------------------ */

static unsigned ds_targets(void *ctx) {
  otlp_receiver_t *r = ctx;
  return tg_ds_enabled_mask(r->ds);
}
static tg_pbw_t *ds_begin(void *ctx, unsigned inst) {
  otlp_receiver_t *r = ctx;
  return tg_ds_packet_begin(r->ds, inst);
}
static void ds_end(void *ctx, unsigned inst) {
  otlp_receiver_t *r = ctx;
  tg_ds_packet_end(r->ds, inst);
}

static unsigned flush_targets(void *ctx) {
  otlp_receiver_t *r = ctx;
  return 1u << r->flush_inst;
}

static uint64_t boot_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_BOOTTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The service flushes instance |inst| (a clone for a snapshot, a stop):
 * the refusal counters go in first, so the trace carries them. */
static void on_flush(void *ctx, unsigned inst) {
  otlp_receiver_t *r = ctx;
  /* Copied under the lock, written after: the lock is never held while
   * a write may wait for room in the shared memory. */
  otlp_service_stats_t *copy = malloc(sizeof(r->services));
  if (!copy) {
    TG_WARN("out of memory: the refusal counters miss this flush");
    return;
  }
  size_t n = 0;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i <= OTLP_MAX_SERVICES; i++) {
    const otlp_service_stats_t *s = &r->services[i];
    if ((i >= r->n_services && i != OTLP_MAX_SERVICES) || !s->name[0] ||
        (s->refused == 0 && s->invalid == 0))
      continue;
    copy[n++] = *s;
  }
  pthread_mutex_unlock(&r->mu);
  r->flush_inst = inst;
  otlp_writer_begin(&r->flush_writer, 0);
  uint64_t now = boot_now_ns();
  for (size_t i = 0; i < n; i++) {
    otlp_counter_t c[] = {{"otlp.refused_spans", copy[i].refused},
                          {"otlp.invalid_spans", copy[i].invalid}};
    otlp_writer_counters(&r->flush_writer,
                         (otlp_str_t){copy[i].name, strlen(copy[i].name)},
                         copy[i].pid, now, c, 2);
  }
  free(copy);
  tg_ds_flush_thread(r->ds, inst);
}

int otlp_receiver_register(otlp_receiver_t *r) {
  pthread_mutex_init(&r->mu, NULL);
  tg_ds_options_t o = {.name = "tracegate.otlp",
                       .cbs = {.on_flush = on_flush, .ctx = r}};
  int rv = tg_ds_register(&o, &r->ds);
  if (rv < 0) return rv;
  otlp_out_t out = {ds_targets, ds_begin, ds_end, r};
  otlp_writer_init(&r->writer, &out);
  otlp_out_t fout = {flush_targets, ds_begin, ds_end, r};
  otlp_writer_init(&r->flush_writer, &fout);
  tg_buf_init(&r->inflated, OTLP_MAX_INFLATED);
  return 0;
}

/* The spans cannot be kept now (receiver.h, 503). */
static bool overloaded(void) {
  if (!tg_agent_connected()) return true;
  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  return st.smb_active_size && st.smb_bytes_in_use * 2 > st.smb_active_size;
}

/* --- counting, per service ----------------------------------------------- */

static otlp_service_stats_t *service(otlp_receiver_t *r, otlp_str_t name) {
  size_t n = name.n < sizeof(r->services[0].name) - 1
                 ? name.n
                 : sizeof(r->services[0].name) - 1;
  for (size_t i = 0; i < r->n_services; i++)
    if (strlen(r->services[i].name) == n &&
        memcmp(r->services[i].name, name.p, n) == 0)
      return &r->services[i];
  if (r->n_services == OTLP_MAX_SERVICES) {
    otlp_service_stats_t *o = &r->services[OTLP_MAX_SERVICES];
    if (!o->name[0]) snprintf(o->name, sizeof(o->name), "(other)");
    return o;
  }
  otlp_service_stats_t *s = &r->services[r->n_services++];
  memcpy(s->name, name.p, n);
  s->name[n] = '\0';
  return s;
}

/* The current resource's counts into its service's; the caller holds
 * |mu|. Entries of services[] never move, so r->cur stays valid. */
static void count_done_locked(otlp_receiver_t *r) {
  if (r->cur) {
    r->cur->accepted += r->pend_accepted;
    r->cur->refused += r->pend_refused;
    r->cur->unrecorded += r->pend_unrecorded;
    r->cur->invalid += r->pend_invalid;
  }
  r->pend_accepted = r->pend_refused = r->pend_unrecorded = 0;
  r->pend_invalid = 0;
}

/* The counting sink takes the lock once per resource (a flush reads the
 * counts on the agent's thread), never per span nor while the writer
 * runs. */
static int count_resource(void *ctx, const otlp_resource_t *res) {
  otlp_receiver_t *r = ctx;
  pthread_mutex_lock(&r->mu);
  count_done_locked(r);
  r->cur = service(r, res->service);
  r->cur->pid = res->pid;
  pthread_mutex_unlock(&r->mu);
  if (r->mode == MODE_REFUSE) return 0;
  otlp_sink_t w = otlp_writer_sink(&r->writer);
  return w.resource(w.ctx, res);
}

static int count_span(void *ctx, const otlp_span_t *s, bool *rejected) {
  otlp_receiver_t *r = ctx;
  *rejected = false;
  if (r->mode == MODE_REFUSE) {
    r->pend_refused++;
    return 0;
  }
  if (s->status_code == 2) r->error_seen = true;
  if (r->cfg.latency_ns && s->end_unix_ns - s->start_unix_ns >= r->cfg.latency_ns)
    r->slow_seen = true;
  /* The writer's targets are this thread's (otlp_writer_begin). */
  if (r->writer.mask == 0) {
    r->pend_unrecorded++;
    return 0;
  }
  r->pend_accepted++;
  otlp_sink_t w = otlp_writer_sink(&r->writer);
  return w.span(w.ctx, s, rejected);
}

/* A span of the current resource with ids that are not ids. */
static void count_invalid(void *ctx) {
  otlp_receiver_t *r = ctx;
  r->pend_invalid++;
}

static void fire(const char *name, uint64_t *last) {
  uint64_t now = mono_ns();
  if (!name || (*last && now - *last < 1000000000u)) return;
  *last = now;
  const char *names[] = {name};
  int rv = tg_agent_activate_triggers(names, 1);
  if (rv < 0) TG_WARN("trigger %s: %s", name, tg_strerror(rv));
}

/* --- answers ------------------------------------------------------------- */

/* A request as the handlers see it: the path and headers borrowed from
 * libmicrohttpd for the call, the body from the request's buffer. */
typedef struct req {
  const char *method, *path, *content_type, *content_encoding;
  const uint8_t *body;
  size_t len;
} req_t;

/* What to answer: the body is the reply's (malloc'd), or static. */
typedef struct reply {
  int status;
  const char *content_type;
  void *body;
  size_t len;
  bool retry_after;
} reply_t;

static void reply_copy(reply_t *out, int status, const char *ct,
                       const void *body, size_t len) {
  out->status = status;
  out->content_type = ct;
  out->body = malloc(len ? len : 1);
  out->len = out->body ? len : 0;
  if (out->body && len) memcpy(out->body, body, len);
}

static bool wants_json(const req_t *req) {
  return strncasecmp(req->content_type, "application/json", 16) == 0;
}

/* A google.rpc.Status { code = 1; message = 2 } with |why|. */
static void answer_error(reply_t *out, const req_t *req, int status,
                         int grpc_code, const char *why) {
  out->retry_after = status == 503 || status == 429;
  if (wants_json(req)) {
    json_t *o = json_pack("{s:i, s:s}", "code", grpc_code, "message", why);
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    reply_copy(out, status, "application/json", t ? t : "{}",
               t ? strlen(t) : 2);
    free(t);
    return;
  }
  uint8_t buf[512];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_varint(&w, 1, (uint64_t)grpc_code);
  tg_pbw_append_bytes(&w, 2, why, strnlen(why, 400));
  reply_copy(out, status, "application/x-protobuf", buf,
             (size_t)tg_pbw_written(&w));
}

static void answer_ok(reply_t *out, const req_t *req,
                      const otlp_result_t *res) {
  const char *why = res->reason ? res->reason : "";
  if (wants_json(req)) {
    json_t *o = res->rejected_spans
                    ? json_pack("{s:{s:o, s:s}}", "partialSuccess",
                                "rejectedSpans",
                                tg_json_u64(res->rejected_spans),
                                "errorMessage", why)
                    : json_object();
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    reply_copy(out, 200, "application/json", t ? t : "{}", t ? strlen(t) : 2);
    free(t);
    return;
  }
  Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceResponse resp =
      OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_RESPONSE__INIT;
  Opentelemetry__Proto__Collector__Trace__V1__ExportTracePartialSuccess ps =
      OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_PARTIAL_SUCCESS__INIT;
  if (res->rejected_spans) {
    ps.rejected_spans = (int64_t)res->rejected_spans;
    ps.error_message = (char *)why;
    resp.partial_success = &ps;
  }
  uint8_t buf[512];
  size_t n =
      opentelemetry__proto__collector__trace__v1__export_trace_service_response__pack(
          &resp, buf);
  reply_copy(out, 200, "application/x-protobuf", buf, n);
}

/* GET /metrics: Prometheus text, one series per service and outcome. */
static void answer_metrics_locked(otlp_receiver_t *r, reply_t *out);

static void answer_metrics(otlp_receiver_t *r, reply_t *out) {
  pthread_mutex_lock(&r->mu);
  answer_metrics_locked(r, out);
  pthread_mutex_unlock(&r->mu);
}

static void answer_metrics_locked(otlp_receiver_t *r, reply_t *out) {
  static const char *const what[] = {"accepted", "refused", "unrecorded",
                                     "invalid"};
  size_t cap = 512 + (r->n_services + 1) * 4 * 256;
  char *t = malloc(cap);
  if (!t) {
    reply_copy(out, 500, "text/plain", "out of memory\n", 14);
    return;
  }
  size_t off = (size_t)snprintf(
      t, cap,
      "# HELP tracegate_otlp_spans_total Spans received, by service and "
      "outcome.\n# TYPE tracegate_otlp_spans_total counter\n");
  for (size_t i = 0; i <= OTLP_MAX_SERVICES; i++) {
    const otlp_service_stats_t *s = &r->services[i];
    if (i >= r->n_services && i != OTLP_MAX_SERVICES) continue;
    if (!s->name[0]) continue;
    /* Names are the senders': quotes, backslashes and control bytes
     * would break the line, so they are shown as '_'. */
    char name[sizeof(s->name)];
    size_t j = 0;
    for (; s->name[j]; j++)
      name[j] = (s->name[j] == '"' || s->name[j] == '\\' ||
                 (unsigned char)s->name[j] < 0x20)
                    ? '_'
                    : s->name[j];
    name[j] = '\0';
    const uint64_t v[] = {s->accepted, s->refused, s->unrecorded, s->invalid};
    for (size_t k = 0; k < 4 && off < cap; k++)
      off += (size_t)snprintf(
          t + off, cap - off,
          "tracegate_otlp_spans_total{service=\"%s\",outcome=\"%s\"} %llu\n",
          name, what[k], (unsigned long long)v[k]);
  }
  if (off < cap)
    off += (size_t)snprintf(
        t + off, cap - off,
        "# TYPE tracegate_otlp_requests_total counter\n"
        "tracegate_otlp_requests_total %llu\n"
        "# TYPE tracegate_otlp_bad_requests_total counter\n"
        "tracegate_otlp_bad_requests_total %llu\n"
        "# HELP tracegate_otlp_busy_requests_total Requests answered 503 "
        "at their headers: 64 bodies were being received.\n"
        "# TYPE tracegate_otlp_busy_requests_total counter\n"
        "tracegate_otlp_busy_requests_total %llu\n"
        "# HELP tracegate_otlp_recording Sessions recording the spans now.\n"
        "# TYPE tracegate_otlp_recording gauge\n"
        "tracegate_otlp_recording %d\n",
        (unsigned long long)r->requests, (unsigned long long)r->bad_requests,
        (unsigned long long)r->busy_requests, __builtin_popcount(tg_ds_enabled_mask(r->ds)));
  out->status = 200;
  out->content_type = "text/plain; version=0.0.4";
  out->body = t;
  out->len = off < cap ? off : cap - 1;
}

static int grpc_code_of(int status) {
  switch (status) {
    case 404: return 5;  /* NOT_FOUND */
    case 405: return 12; /* UNIMPLEMENTED */
    case 503: return 14; /* UNAVAILABLE */
    case 500: return 13; /* INTERNAL */
    default: return 3;   /* INVALID_ARGUMENT */
  }
}

/* Where a request goes before its body is read: 0 to read it (POST
 * /v1/traces), else the status of an answer given at once. */
static int route(const req_t *req) {
  if (strcmp(req->path, "/metrics") == 0)
    return strcmp(req->method, "GET") == 0 ? 200 : 405;
  if (strcmp(req->path, "/v1/traces") != 0) return 404;
  return strcmp(req->method, "POST") == 0 ? 0 : 405;
}

/* POST /v1/traces with its whole body. */
static void handle_traces(otlp_receiver_t *r, const req_t *req,
                          reply_t *out) {
  r->requests++;
  otlp_body_t body = {req->content_type, req->content_encoding, req->body,
                      req->len};
  otlp_sink_t sink = {count_resource, count_span, r, count_invalid};
  r->mode = overloaded() ? MODE_REFUSE : MODE_WRITE;
  r->cur = NULL;
  r->error_seen = r->slow_seen = false;
  if (r->mode == MODE_WRITE) otlp_writer_begin(&r->writer, otlp_boot_offset());
  otlp_result_t res;
  const char *why = NULL;
  int err = 0;
  int status = otlp_decode_body(&body, &r->inflated, &sink, &res, &why, &err);
  pthread_mutex_lock(&r->mu);
  count_done_locked(r);
  r->cur = NULL;
  pthread_mutex_unlock(&r->mu);
  /* The inflated body is not kept between requests. */
  tg_buf_free(&r->inflated);
  tg_buf_init(&r->inflated, OTLP_MAX_INFLATED);
  if (status != 200) {
    r->bad_requests++;
    if (err) TG_WARN("POST /v1/traces: %s (%s)", why, tg_strerror(err));
    answer_error(out, req, status, grpc_code_of(status), why);
    return;
  }
  if (r->mode == MODE_REFUSE) {
    answer_error(out, req, 503, grpc_code_of(503),
                 "the trace buffer is full or tracegated is not reachable: "
                 "retry later");
    return;
  }
  if (r->error_seen) fire(r->cfg.trigger_on_error, &r->last_error_trigger_ns);
  if (r->slow_seen) fire(r->cfg.trigger_on_latency, &r->last_latency_trigger_ns);
  answer_ok(out, req, &res);
}

/* --- libmicrohttpd ------------------------------------------------------- */

/* One request's state between libmicrohttpd's calls. */
typedef struct pending {
  tg_buf_t body; /* capped at max_body */
  bool too_big;
  bool answered; /* 413 queued before the body's end */
} pending_t;

static const char *header(struct MHD_Connection *c, const char *name) {
  const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
  return v ? v : "";
}

static enum MHD_Result send_reply(struct MHD_Connection *c, reply_t *rp) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      rp->len, rp->body ? rp->body : (void *)"", MHD_RESPMEM_MUST_COPY);
  free(rp->body);
  if (!resp) return MHD_NO;
  if (rp->content_type)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            rp->content_type);
  if (rp->retry_after)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  enum MHD_Result rv = MHD_queue_response(c, (unsigned)rp->status, resp);
  MHD_destroy_response(resp);
  return rv;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
  (void)version;
  otlp_receiver_t *r = cls;
  req_t req = {method, url, header(c, MHD_HTTP_HEADER_CONTENT_TYPE),
               header(c, MHD_HTTP_HEADER_CONTENT_ENCODING), NULL, 0};
  reply_t rp = {0};
  pending_t *p = *con_cls;
  if (!p) {
    /* The headers are in: answer what needs no body now. */
    int st = route(&req);
    if (st == 200) {
      answer_metrics(r, &rp);
      return send_reply(c, &rp);
    }
    if (st) {
      answer_error(&rp, &req, st, grpc_code_of(st),
                   st == 404 ? "not found: POST /v1/traces"
                             : "method not allowed");
      return send_reply(c, &rp);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > r->max_body) {
      r->bad_requests++;
      answer_error(&rp, &req, 413, grpc_code_of(413),
                   "the body is larger than --max-body");
      return send_reply(c, &rp);
    }
    if (r->bodies_open >= MAX_BODIES) {
      r->busy_requests++;
      answer_error(&rp, &req, 503, grpc_code_of(503),
                   "too many requests at once: retry later");
      return send_reply(c, &rp);
    }
    if (!(p = calloc(1, sizeof(*p)))) return MHD_NO;
    tg_buf_init(&p->body, r->max_body);
    r->bodies_open++;
    *con_cls = p;
    return MHD_YES;
  }
  if (*upload_data_size) {
    /* A piece of the body (chunks already taken off). Past the cap: 413
     * at once, and libmicrohttpd closes the connection after it, the
     * rest unread; should it refuse an answer before the body's end,
     * the rest is read into nothing and answered 413 at the end. */
    if (!p->too_big &&
        tg_buf_append(&p->body, upload_data, *upload_data_size) < 0) {
      p->too_big = true;
      tg_buf_free(&p->body);
      r->bad_requests++;
      answer_error(&rp, &req, 413, grpc_code_of(413),
                   "the body is larger than --max-body");
      *upload_data_size = 0;
      if (send_reply(c, &rp) == MHD_YES) {
        p->answered = true;
        return MHD_YES;
      }
      r->bad_requests--; /* counted again at the end */
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (p->answered) return MHD_YES;
  if (p->too_big) {
    r->bad_requests++;
    answer_error(&rp, &req, 413, grpc_code_of(413),
                 "the body is larger than --max-body");
  } else {
    req.body = tg_buf_begin(&p->body);
    req.len = tg_buf_size(&p->body);
    handle_traces(r, &req, &rp);
  }
  return send_reply(c, &rp);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
  otlp_receiver_t *r = cls;
  (void)c;
  (void)why;
  pending_t *p = *con_cls;
  if (!p) return;
  r->bodies_open--;
  tg_buf_free(&p->body);
  free(p);
  *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  TG_WARN("http: %s", msg);
}

int otlp_receiver_start(otlp_receiver_t *r,
                        const otlp_receiver_config_t *cfg) {
  r->cfg = *cfg;
  r->max_body = cfg->max_body ? cfg->max_body : DEFAULT_MAX_BODY;
  const char *host = cfg->host ? cfg->host : "127.0.0.1";
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
                            .sin6_port = htons(cfg->port)};
  struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(cfg->port)};
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG;
  const struct sockaddr *addr;
  if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
    addr = (const struct sockaddr *)&a4;
  } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
    addr = (const struct sockaddr *)&a6;
    flags |= MHD_USE_IPv6;
  } else {
    TG_ERROR("--host %s: not a numeric IPv4 or IPv6 address", host);
    return -EINVAL;
  }
  r->mhd = MHD_start_daemon(
      flags, cfg->port, NULL, NULL, on_access, r,
      /* First, so that every message of libmicrohttpd goes to our log. */
      MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, addr,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNS,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)TIMEOUT_S,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, r, MHD_OPTION_END);
  if (!r->mhd) {
    TG_ERROR("cannot listen on %s port %u (taken?)", host, cfg->port);
    return -EIO;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(r->mhd, MHD_DAEMON_INFO_BIND_PORT);
  r->port = info ? info->port : cfg->port;
  return 0;
}

uint16_t otlp_receiver_port(const otlp_receiver_t *r) { return r->port; }

void otlp_receiver_stop(otlp_receiver_t *r) {
  if (r->mhd) MHD_stop_daemon(r->mhd);
  r->mhd = NULL;
  tg_buf_free(&r->inflated);
  /* r->mu stays: the agent may still flush until tg_agent_shutdown(). */
}
