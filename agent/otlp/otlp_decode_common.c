/* SPDX-License-Identifier: Apache-2.0 */
/* What the protobuf and the JSON decoders share: naming a resource, and
 * the last check of a span before a sink sees it. */
#include <string.h>

#include "agent/otlp/otlp_decode.h"

static bool str_is(otlp_str_t s, const char *lit) {
  size_t n = strlen(lit);
  return s.n == n && memcmp(s.p, lit, n) == 0;
}

void otlp__resource_names(otlp_resource_t *r) {
  /* OTel's SDKs all set service.name; "unknown_service" is the name the
   * specification gives a resource without one. */
  r->service = (otlp_str_t){"unknown_service", 15};
  r->pid = 0;
  for (size_t i = 0; i < r->n_attrs; i++) {
    const otlp_attr_t *a = &r->attrs[i];
    if (str_is(a->key, "service.name") && a->type == OTLP_V_STRING &&
        a->s.n > 0)
      r->service = a->s;
    else if (str_is(a->key, "process.pid") && a->type == OTLP_V_INT &&
             a->v.i > 0 && a->v.i <= INT32_MAX)
      r->pid = a->v.i;
  }
}

static bool all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

int otlp__emit_span(const otlp_sink_t *sink, otlp_span_t *s, bool ids_ok,
                    otlp_result_t *res) {
  if (!ids_ok || all_zero(s->trace_id, 16) || all_zero(s->span_id, 8)) {
    res->rejected_spans++;
    res->invalid_spans++;
    res->reason = "a span's trace_id or span_id is missing, of the wrong "
                  "size or all zero";
    if (sink->invalid) sink->invalid(sink->ctx);
    return 0;
  }
  /* An all-zero parent is no parent (what some exporters send). */
  if (s->has_parent && all_zero(s->parent_span_id, 8)) s->has_parent = false;
  if (s->end_unix_ns < s->start_unix_ns) s->end_unix_ns = s->start_unix_ns;
  bool rejected = false;
  res->spans++;
  int rv = sink->span(sink->ctx, s, &rejected);
  if (rv < 0) return rv;
  if (rejected) {
    res->rejected_spans++;
    if (!res->reason) res->reason = "the receiver's buffer is full";
  }
  return 0;
}
