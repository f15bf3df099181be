/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp's HTTP side; see receiver.h. */
#include "agent/otlp/receiver.h"

#include <errno.h>
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

int otlp_receiver_register(otlp_receiver_t *r) {
  tg_ds_options_t o = {.name = "tracegate.otlp"};
  int rv = tg_ds_register(&o, &r->ds);
  if (rv < 0) return rv;
  otlp_out_t out = {ds_targets, ds_begin, ds_end, r};
  otlp_writer_init(&r->writer, &out);
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

static int count_resource(void *ctx, const otlp_resource_t *res) {
  otlp_receiver_t *r = ctx;
  r->cur = service(r, res->service);
  if (r->mode == MODE_REFUSE) return 0;
  otlp_sink_t w = otlp_writer_sink(&r->writer);
  return w.resource(w.ctx, res);
}

static int count_span(void *ctx, const otlp_span_t *s, bool *rejected) {
  otlp_receiver_t *r = ctx;
  *rejected = false;
  if (r->mode == MODE_REFUSE) {
    r->cur->refused++;
    return 0;
  }
  if (s->status_code == 2) r->error_seen = true;
  if (r->cfg.latency_ns && s->end_unix_ns - s->start_unix_ns >= r->cfg.latency_ns)
    r->slow_seen = true;
  if (r->writer.mask == 0) {
    r->cur->unrecorded++;
    return 0;
  }
  r->cur->accepted++;
  otlp_sink_t w = otlp_writer_sink(&r->writer);
  return w.span(w.ctx, s, rejected);
}

/* Ids that do not decode are counted where the decoder found them: the
 * result says how many, the service is the last one seen. */
static void count_invalid(otlp_receiver_t *r, const otlp_result_t *res) {
  if (res->invalid_spans && r->cur) r->cur->invalid += res->invalid_spans;
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

static bool wants_json(const tg_http_request_t *req) {
  return strncasecmp(req->content_type, "application/json", 16) == 0;
}

/* A google.rpc.Status { code = 1; message = 2 } with |why|. */
static void answer_error(tg_http_exchange_t *x, const tg_http_request_t *req,
                         int status, int grpc_code, const char *why) {
  if (status == 503 || status == 429)
    tg_http_add_header(x, "Retry-After", RETRY_AFTER_S);
  if (wants_json(req)) {
    json_t *o = json_pack("{s:i, s:s}", "code", grpc_code, "message", why);
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    tg_http_respond(x, status, "application/json", t ? t : "{}",
                    t ? strlen(t) : 2);
    free(t);
    return;
  }
  uint8_t buf[512];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_varint(&w, 1, (uint64_t)grpc_code);
  tg_pbw_append_bytes(&w, 2, why, strnlen(why, 400));
  tg_http_respond(x, status, "application/x-protobuf", buf,
                  (size_t)tg_pbw_written(&w));
}

static void answer_ok(tg_http_exchange_t *x, const tg_http_request_t *req,
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
    tg_http_respond(x, 200, "application/json", t ? t : "{}",
                    t ? strlen(t) : 2);
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
  tg_http_respond(x, 200, "application/x-protobuf", buf, n);
}

/* GET /metrics: Prometheus text, one series per service and outcome. */
static void answer_metrics(otlp_receiver_t *r, tg_http_exchange_t *x) {
  static const char *const what[] = {"accepted", "refused", "unrecorded",
                                     "invalid"};
  size_t cap = 256 + (r->n_services + 1) * 4 * 256;
  char *t = malloc(cap);
  if (!t) {
    tg_http_respond(x, 500, "text/plain", "out of memory\n", 14);
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
    const uint64_t v[] = {s->accepted, s->refused, s->unrecorded, s->invalid};
    for (size_t k = 0; k < 4 && off < cap; k++) {
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
      off += (size_t)snprintf(
          t + off, cap - off,
          "tracegate_otlp_spans_total{service=\"%s\",outcome=\"%s\"} %llu\n",
          name, what[k], (unsigned long long)v[k]);
    }
  }
  if (off < cap)
    off += (size_t)snprintf(
        t + off, cap - off,
        "# TYPE tracegate_otlp_requests_total counter\n"
        "tracegate_otlp_requests_total %llu\n"
        "# TYPE tracegate_otlp_bad_requests_total counter\n"
        "tracegate_otlp_bad_requests_total %llu\n"
        "# HELP tracegate_otlp_recording Sessions recording the spans now.\n"
        "# TYPE tracegate_otlp_recording gauge\n"
        "tracegate_otlp_recording %d\n",
        (unsigned long long)r->requests, (unsigned long long)r->bad_requests,
        __builtin_popcount(tg_ds_enabled_mask(r->ds)));
  tg_http_respond(x, 200, "text/plain; version=0.0.4", t, off < cap ? off : cap);
  free(t);
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

static void handle(void *ctx, tg_http_exchange_t *x,
                   const tg_http_request_t *req) {
  otlp_receiver_t *r = ctx;
  if (strcmp(req->path, "/metrics") == 0 && strcmp(req->method, "GET") == 0) {
    answer_metrics(r, x);
    return;
  }
  if (strcmp(req->path, "/v1/traces") != 0) {
    answer_error(x, req, 404, grpc_code_of(404), "not found: POST /v1/traces");
    return;
  }
  if (strcmp(req->method, "POST") != 0) {
    answer_error(x, req, 405, grpc_code_of(405), "method not allowed: POST");
    return;
  }
  r->requests++;
  otlp_body_t body = {req->content_type, req->content_encoding, req->body,
                      req->body_len};
  otlp_sink_t sink = {count_resource, count_span, r};
  r->mode = overloaded() ? MODE_REFUSE : MODE_WRITE;
  r->cur = NULL;
  r->error_seen = r->slow_seen = false;
  if (r->mode == MODE_WRITE) otlp_writer_begin(&r->writer, otlp_boot_offset());
  otlp_result_t res;
  const char *why = NULL;
  int err = 0;
  int status = otlp_decode_body(&body, &r->inflated, &sink, &res, &why, &err);
  /* The inflated body is not kept between requests. */
  tg_buf_free(&r->inflated);
  tg_buf_init(&r->inflated, OTLP_MAX_INFLATED);
  if (status != 200) {
    r->bad_requests++;
    if (err) TG_WARN("POST /v1/traces: %s (%s)", why, tg_strerror(err));
    answer_error(x, req, status, grpc_code_of(status), why);
    return;
  }
  count_invalid(r, &res);
  if (r->mode == MODE_REFUSE) {
    answer_error(x, req, 503, grpc_code_of(503),
                 "the trace buffer is full or tracegated is not reachable: "
                 "retry later");
    return;
  }
  if (r->error_seen) fire(r->cfg.trigger_on_error, &r->last_error_trigger_ns);
  if (r->slow_seen) fire(r->cfg.trigger_on_latency, &r->last_latency_trigger_ns);
  answer_ok(x, req, &res);
}

static void on_abandon(void *ctx, tg_http_exchange_t *x) {
  (void)ctx;
  (void)x; /* every exchange is answered inside handle(): none waits */
}

int otlp_receiver_start(otlp_receiver_t *r, uv_loop_t *loop,
                        const otlp_receiver_config_t *cfg) {
  r->cfg = *cfg;
  tg_http_server_config_t hc = {
      .host = cfg->host ? cfg->host : "127.0.0.1",
      .port = cfg->port,
      .max_body = cfg->max_body ? cfg->max_body : DEFAULT_MAX_BODY,
  };
  int rv = tg_http_server_start(loop, &hc, handle, on_abandon, r, &r->http);
  if (rv < 0) TG_ERROR("cannot listen on %s:%u: %s", hc.host, hc.port,
                       tg_strerror(rv));
  return rv;
}

uint16_t otlp_receiver_port(const otlp_receiver_t *r) {
  return tg_http_server_port(r->http);
}

void otlp_receiver_stop(otlp_receiver_t *r) {
  if (r->http) tg_http_server_stop(r->http, NULL, NULL);
  r->http = NULL;
}

void otlp_receiver_free(otlp_receiver_t *r) { tg_buf_free(&r->inflated); }
