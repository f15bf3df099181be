/* A session's trace filter on the read path; see readout_filter.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "service/readout_filter.h"

/* The message the service's packets are: Trace.packet (field 1). */
static const uint32_t kPacketRoot[] = {1};

static tg_string_filter_t *string_rules(
    const Perfetto__Protos__TraceConfig__TraceFilter *tf, char *err,
    size_t errlen, int *rv) {
  tg_string_filter_t *sf = tg_string_filter_new();
  *rv = sf ? 0 : -ENOMEM;
  const Perfetto__Protos__TraceConfig__TraceFilter__StringFilterChain *ch =
      tf->string_filter_chain;
  for (size_t i = 0; sf && ch && i < ch->n_rules; i++) {
    const Perfetto__Protos__TraceConfig__TraceFilter__StringFilterRule *r =
        ch->rules[i];
    char why[256];
    *rv = tg_string_filter_add_rule(sf, r->has_policy ? (int)r->policy : 0,
                                    r->regex_pattern,
                                    r->atrace_payload_starts_with, why,
                                    sizeof(why));
    if (*rv < 0) {
      snprintf(err, errlen, "trace_filter.string_filter_chain.rules[%zu]: %s",
               i, why);
      tg_string_filter_free(sf);
      return NULL;
    }
  }
  if (!sf) snprintf(err, errlen, "out of memory");
  return sf;
}

int tg__readout_filter_new(tg_readout_filter_t **out,
                           const Perfetto__Protos__TraceConfig *c, char *err,
                           size_t errlen) {
  *out = NULL;
  const Perfetto__Protos__TraceConfig__TraceFilter *tf = c->trace_filter;
  if (!tf) return 0;
  int rv;
  tg_string_filter_t *sf = string_rules(tf, err, errlen, &rv);
  if (!sf) return rv;
  /* Perfetto takes bytecode_v2 when it is not empty. */
  bool v2 = tf->has_bytecode_v2 && tf->bytecode_v2.len > 0;
  const ProtobufCBinaryData *code = v2 ? &tf->bytecode_v2 : &tf->bytecode;
  const char *field = v2 ? "trace_filter.bytecode_v2" : "trace_filter.bytecode";
  tg_filter_bytecode_t bc;
  char why[256] = "";
  rv = tg_filter_bytecode_load(&bc, code->data, code->len, NULL, 0, why,
                               sizeof(why));
  if (rv < 0) {
    snprintf(err, errlen, "%s: refused: %s", field, why);
    tg_string_filter_free(sf);
    return rv;
  }
  tg_trace_filter_t *f;
  rv = tg_trace_filter_new(&f, &bc, sf, kPacketRoot, 1, why, sizeof(why));
  if (rv < 0) {
    snprintf(err, errlen, "%s: refused: %s", field, why);
    return rv;
  }
  tg_readout_filter_t *rf = calloc(1, sizeof(*rf));
  if (!rf) {
    tg_trace_filter_free(f);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  rf->f = f;
  rf->buffer = -1;
  *out = rf;
  return 0;
}

tg_readout_filter_t *tg__readout_filter_dup(const tg_readout_filter_t *src) {
  tg_readout_filter_t *rf = calloc(1, sizeof(*rf));
  if (!rf) return NULL;
  rf->f = tg_trace_filter_dup(src->f);
  if (!rf->f) {
    free(rf);
    return NULL;
  }
  rf->buffer = -1;
  return rf;
}

void tg__readout_filter_free(tg_readout_filter_t *rf) {
  if (!rf) return;
  tg_trace_filter_free(rf->f);
  free(rf);
}

void tg__readout_filter_begin(tg_readout_filter_t *rf,
                              tg_readout_filter_sink_fn sink, void *sink_ctx,
                              bool keep_empty) {
  rf->sink = sink;
  rf->sink_ctx = sink_ctx;
  rf->keep_empty = keep_empty;
  rf->buffer = -1;
}

/* CLOCK_MONOTONIC is read through the vDSO: no kernel entry per packet. */
static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void count_discarded(tg_readout_filter_t *rf, int buffer, uint64_t n) {
  if (buffer < 0 || buffer >= TG_SERVICE_MAX_BUFFERS_PER_SESSION) return;
  size_t b = (size_t)buffer;
  rf->discarded[b] += n;
  if (b + 1 > rf->n_buffers_seen) rf->n_buffers_seen = b + 1;
}

int tg__readout_filter_emit(void *ctx, const uint8_t *const *pieces,
                            const size_t *lens, unsigned n, unsigned n_stable,
                            size_t total) {
  (void)n_stable; /* the output is the filter's own buffer */
  tg_readout_filter_t *rf = ctx;
  rf->input_packets++;
  rf->input_bytes += total;
  const uint8_t *out;
  uint64_t t0 = mono_ns();
  long len = tg_trace_filter_run(rf->f, pieces, lens, n, &out);
  rf->time_taken_ns += mono_ns() - t0;
  int buffer = rf->buffer;
  rf->buffer = -1;
  if (len < 0) {
    rf->errors++;
    count_discarded(rf, buffer, total);
    if (len == -ENOMEM)
      TG_WARN("trace filter: no memory for a %zu-byte packet; dropped", total);
    return 0;
  }
  rf->output_bytes += (uint64_t)len;
  count_discarded(rf, buffer, total - (size_t)len);
  if (len == 0 && !rf->keep_empty) return 0;
  size_t l = (size_t)len;
  return rf->sink(rf->sink_ctx, &out, &l, 1, 0, l);
}

int tg__readout_filter_stats(const tg_readout_filter_t *rf,
                             Perfetto__Protos__TraceStats *st) {
  if (!rf) return 0;
  /* One block: the message, then its per-buffer array. */
  Perfetto__Protos__TraceStats__FilterStats *fs =
      calloc(1, sizeof(*fs) + TG_SERVICE_MAX_BUFFERS_PER_SESSION * sizeof(uint64_t));
  if (!fs) return -ENOMEM;
  perfetto__protos__trace_stats__filter_stats__init(fs);
#define SETF(f, v) \
  fs->has_##f = 1; \
  fs->f = (v);
  SETF(input_packets, rf->input_packets)
  SETF(input_bytes, rf->input_bytes)
  SETF(output_bytes, rf->output_bytes)
  SETF(errors, rf->errors)
  SETF(time_taken_ns, rf->time_taken_ns)
#undef SETF
  fs->bytes_discarded_per_buffer = (uint64_t *)(fs + 1);
  fs->n_bytes_discarded_per_buffer = rf->n_buffers_seen;
  memcpy(fs->bytes_discarded_per_buffer, rf->discarded,
         rf->n_buffers_seen * sizeof(uint64_t));
  st->filter_stats = fs;
  return 0;
}

void tg__readout_filter_stats_free(Perfetto__Protos__TraceStats *st) {
  free(st->filter_stats);
  st->filter_stats = NULL;
}
