/* SPDX-License-Identifier: Apache-2.0 */
/* What fuzz_otlp_pb and fuzz_otlp_json share: a sink that checks each
 * span as the decoders promise it (otlp_span.h) and then writes it with
 * tracegate-otlp's writer into memory, so the writer sees every decoded
 * shape too.
 *
 * Invariants (trap on violation): counts within the limits; every string
 * readable over its whole length (ASan catches an over-read); ids of a
 * span handed over never all zero; the result's counts add up (spans +
 * invalid = what the decoder met, rejected >= invalid); the writer never
 * fails on a packet that fits its buffer. */
#ifndef TRACEGATE_TESTS_FUZZ_OTLP_DECODE_H
#define TRACEGATE_TESTS_FUZZ_OTLP_DECODE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "agent/otlp/otlp_decode.h"
#include "agent/otlp/otlp_write.h"

static uint8_t fz_buf[1u << 20];
static tg_pbw_t fz_w;

static unsigned fz_targets(void *ctx) {
  (void)ctx;
  return 1;
}
static tg_pbw_t *fz_begin(void *ctx, unsigned inst) {
  (void)ctx;
  (void)inst;
  tg_pbw_init(&fz_w, fz_buf, sizeof(fz_buf), NULL, NULL);
  return &fz_w;
}
static void fz_end(void *ctx, unsigned inst) {
  (void)ctx;
  (void)inst;
  if (tg_pbw_error(&fz_w)) __builtin_trap();
}

static void fz_touch(otlp_str_t s) {
  volatile uint8_t x = 0;
  for (size_t i = 0; i < s.n; i++) x ^= (uint8_t)s.p[i];
  (void)x;
}

static void fz_attrs(const otlp_attr_t *a, size_t n, size_t max) {
  if (n > max) __builtin_trap();
  for (size_t i = 0; i < n; i++) {
    fz_touch(a[i].key);
    if (a[i].type == OTLP_V_STRING || a[i].type == OTLP_V_BYTES ||
        a[i].type == OTLP_V_ARRAY || a[i].type == OTLP_V_KVLIST)
      fz_touch(a[i].s);
  }
}

typedef struct fz_ctx {
  otlp_writer_t w;
  otlp_sink_t inner;
} fz_ctx_t;

static int fz_resource(void *ctx, const otlp_resource_t *r) {
  fz_ctx_t *c = ctx;
  fz_attrs(r->attrs, r->n_attrs, OTLP_MAX_ATTRS);
  fz_touch(r->service);
  if (r->service.n == 0) __builtin_trap();
  return c->inner.resource(c->inner.ctx, r);
}

static int fz_span(void *ctx, const otlp_span_t *s, bool *rejected) {
  fz_ctx_t *c = ctx;
  static const uint8_t zero[16];
  if (!memcmp(s->trace_id, zero, 16) || !memcmp(s->span_id, zero, 8))
    __builtin_trap();
  if (s->end_unix_ns < s->start_unix_ns) __builtin_trap();
  fz_touch(s->name);
  fz_touch(s->status_message);
  fz_attrs(s->attrs, s->n_attrs, OTLP_MAX_ATTRS);
  if (s->n_events > OTLP_MAX_EVENTS || s->n_links > OTLP_MAX_LINKS)
    __builtin_trap();
  size_t ev_attrs = 0;
  for (size_t i = 0; i < s->n_events; i++) {
    fz_touch(s->events[i].name);
    fz_attrs(s->events[i].attrs, s->events[i].n_attrs, OTLP_MAX_EVENT_ATTRS);
    ev_attrs += s->events[i].n_attrs;
  }
  if (ev_attrs > OTLP_MAX_EVENT_ATTRS) __builtin_trap();
  return c->inner.span(c->inner.ctx, s, rejected);
}

/* Runs |decode| over the input with the checking sink. */
static void fz_run(int (*decode)(const uint8_t *, size_t, const otlp_sink_t *,
                                 otlp_result_t *),
                   const uint8_t *data, size_t size) {
  static fz_ctx_t c;
  otlp_out_t out = {fz_targets, fz_begin, fz_end, NULL};
  otlp_writer_init(&c.w, &out);
  otlp_writer_begin(&c.w, 0);
  c.inner = otlp_writer_sink(&c.w);
  otlp_sink_t k = {.resource = fz_resource, .span = fz_span, .ctx = &c};
  otlp_result_t res;
  int rv = decode(data, size, &k, &res);
  if (rv == 0 && (res.rejected_spans < res.invalid_spans ||
                  c.w.spans != res.spans))
    __builtin_trap();
}

#endif /* TRACEGATE_TESTS_FUZZ_OTLP_DECODE_H */
