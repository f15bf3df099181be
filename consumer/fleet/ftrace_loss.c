/* What the kernel's ftrace ring buffers lost, from the packets of a trace:
 * each linux.ftrace instance writes a TracePacket.ftrace_stats pair
 * (START, END) at every flush and at its stop, with every CPU's overrun
 * (events the kernel overwrote before the probes read them): the START
 * with the counters of its session's start, the END with those of the
 * moment. Its setup errors (events refused, atrace's errors) ride in
 * the same message, in every stats packet that tracegate-probes writes
 * and in the first one of traced_probes. The packets are the service's and producers' bytes: the fields
 * are found with the checked reader and the stats decoded by protobuf-c
 * (tests/fuzz/fuzz_cli_ftrace_loss). See ftrace_loss.h. */
#include "consumer/fleet/ftrace_loss.h"

#include <stdio.h>
#include <string.h>

#include "pb/trace/ftrace/ftrace_stats.pb-c.h"
#include "tracegate/pb_wire.h"

/* TracePacket fields. */
#define PACKET_TRUSTED_SEQ_ID 10
#define PACKET_FTRACE_STATS 34
#define PACKET_SERVICE_EVENT 69
/* TracingServiceEvent.slow_starting_data_sources, DataSources.data_source,
 * DataSource.{producer_name, data_source_name}. */
#define EVENT_SLOW_STARTING 7
#define SOURCES_DATA_SOURCE 1
#define SOURCE_PRODUCER 1
#define SOURCE_NAME 2

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The table's entry of sequence |id|, added if there is room; NULL past
 * it. */
static tg_ftrace_loss_seq_t *find_seq(tg_ftrace_loss_t *l, uint32_t id) {
  for (size_t i = 0; i < l->n_seqs; i++)
    if (l->seqs[i].id == id) return &l->seqs[i];
  if (l->n_seqs == TG_FTRACE_LOSS_MAX_SEQS) return NULL;
  tg_ftrace_loss_seq_t *q = &l->seqs[l->n_seqs++];
  *q = (tg_ftrace_loss_seq_t){.id = id};
  return q;
}

static uint32_t max_u32(uint32_t a, size_t b) {
  return b > a ? (b > UINT32_MAX ? UINT32_MAX : (uint32_t)b) : a;
}

/* Keeps |name| (untrusted: any bytes, any length; NULL for none) among
 * the first distinct names, cut. */
static void keep_name(tg_ftrace_loss_t *l, const char *name) {
  if (!name || l->n_names == TG_FTRACE_SETUP_NAMES) return;
  char cut[TG_FTRACE_SETUP_NAME_MAX + 1];
  snprintf(cut, sizeof(cut), "%s", name);
  for (size_t i = 0; i < l->n_names; i++)
    if (!strcmp(l->names[i], cut)) return;
  memcpy(l->names[l->n_names++], cut, sizeof(cut));
}

static void add_setup(tg_ftrace_loss_t *l, tg_ftrace_loss_seq_t *q,
                      const Perfetto__Protos__FtraceStats *st) {
  for (size_t i = 0; i < st->n_failed_ftrace_events; i++)
    keep_name(l, st->failed_ftrace_events[i]);
  for (size_t i = 0; i < st->n_unknown_ftrace_events; i++)
    keep_name(l, st->unknown_ftrace_events[i]);
  bool atrace = st->atrace_errors && st->atrace_errors[0];
  if (atrace && !l->atrace[0])
    snprintf(l->atrace, sizeof(l->atrace), "%s", st->atrace_errors);
  if (!q) return;
  q->failed = max_u32(q->failed, st->n_failed_ftrace_events);
  q->unknown = max_u32(q->unknown, st->n_unknown_ftrace_events);
  q->has_cpu_stats |= st->n_cpu_stats > 0;
  q->atrace |= atrace;
}

static void add_stats(tg_ftrace_loss_t *l, uint32_t seq, const uint8_t *p,
                      size_t n) {
  Perfetto__Protos__FtraceStats *st =
      perfetto__protos__ftrace_stats__unpack(NULL, n, p);
  if (!st) return;
  bool start = st->has_phase &&
               st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE;
  bool end = st->has_phase &&
             st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE;
  uint64_t overrun = 0;
  for (size_t i = 0; i < st->n_cpu_stats; i++)
    if (st->cpu_stats[i]->has_overrun)
      overrun = add_sat(overrun, st->cpu_stats[i]->overrun);
  if (!start && !end) {
    perfetto__protos__ftrace_stats__free_unpacked(st, NULL);
    return;
  }
  if (start) l->starts++;
  else l->ends++;
  tg_ftrace_loss_seq_t *q = find_seq(l, seq);
  add_setup(l, q, st);
  perfetto__protos__ftrace_stats__free_unpacked(st, NULL);
  if (!q) {
    l->untracked++;
  } else if (start) {
    q->has_start = true;
    q->start = overrun;
  } else {
    /* An END with no START before it says nothing of the loss. */
    q->loss = q->has_start && overrun > q->start ? overrun - q->start : 0;
  }
}

/* |p| (|n| bytes, untrusted) as a string cut to |cap| - 1 bytes. */
static void copy_cut(char *out, size_t cap, const uint8_t *p, size_t n) {
  if (n > cap - 1) n = cap - 1;
  memcpy(out, p, n);
  out[n] = 0;
}

static void keep_not_started(tg_ftrace_loss_t *l, const uint8_t *p, size_t n) {
  tg_ds_not_started_t e = {{0}, {0}};
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.type != TG_PB_WT_LEN) continue;
    if (f.id == SOURCE_PRODUCER)
      copy_cut(e.producer, sizeof(e.producer), f.data, f.size);
    else if (f.id == SOURCE_NAME)
      copy_cut(e.data_source, sizeof(e.data_source), f.data, f.size);
  }
  for (size_t i = 0; i < l->n_not_started; i++)
    if (!strcmp(l->not_started[i].producer, e.producer) &&
        !strcmp(l->not_started[i].data_source, e.data_source))
      return;
  if (l->n_not_started == TG_FTRACE_NOT_STARTED_MAX) {
    if (l->not_started_omitted < UINT64_MAX) l->not_started_omitted++;
    return;
  }
  l->not_started[l->n_not_started++] = e;
}

/* A service event: the data sources it names as not started, if any. */
static void add_service_event(tg_ftrace_loss_t *l, const uint8_t *p, size_t n) {
  tg_pb_reader_t r, rs;
  tg_pb_field_t f, fs;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != EVENT_SLOW_STARTING || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&rs, f.data, f.size);
    while (tg_pb_reader_next(&rs, &fs) == 1)
      if (fs.id == SOURCES_DATA_SOURCE && fs.type == TG_PB_WT_LEN)
        keep_not_started(l, fs.data, fs.size);
  }
}

void tg_ftrace_loss_scan(tg_ftrace_loss_t *l, const uint8_t *packet,
                         size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  /* The service appends the sequence id after the producer's bytes: one
   * pass finds it (the last one, as protobuf reads a repeated scalar),
   * the next the stats. A packet without one is on sequence 0. */
  uint32_t seq = 0;
  bool has_stats = false;
  tg_pb_reader_init(&r, packet, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id == PACKET_TRUSTED_SEQ_ID && f.type == TG_PB_WT_VARINT)
      seq = (uint32_t)f.value;
    else if (f.id == PACKET_FTRACE_STATS && f.type == TG_PB_WT_LEN)
      has_stats = true;
    else if (f.id == PACKET_SERVICE_EVENT && f.type == TG_PB_WT_LEN)
      add_service_event(l, f.data, f.size);
  }
  if (!has_stats) return;
  tg_pb_reader_init(&r, packet, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == PACKET_FTRACE_STATS && f.type == TG_PB_WT_LEN)
      add_stats(l, seq, f.data, f.size);
}

uint64_t tg_ftrace_loss_overrun(const tg_ftrace_loss_t *l) {
  uint64_t sum = 0;
  for (size_t i = 0; i < l->n_seqs; i++) sum = add_sat(sum, l->seqs[i].loss);
  return sum;
}

void tg_ftrace_setup_summary(const tg_ftrace_loss_t *l, tg_ftrace_setup_t *out) {
  *out = (tg_ftrace_setup_t){0};
  for (size_t i = 0; i < l->n_seqs; i++) {
    const tg_ftrace_loss_seq_t *q = &l->seqs[i];
    uint64_t refused = (uint64_t)q->failed + q->unknown;
    out->atrace |= q->atrace;
    if (!refused) continue;
    if (!q->has_cpu_stats) {
      out->down++;
      out->down_events += refused;
    } else {
      out->partial++;
      out->refused += refused;
    }
  }
}
