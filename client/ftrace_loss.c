/* What the kernel's ftrace ring buffers lost, from the packets of a trace:
 * each linux.ftrace instance writes a TracePacket.ftrace_stats at its start
 * and at its end, with every CPU's overrun (events the kernel overwrote
 * before the probes read them). The difference is the loss. The packets
 * are the service's and producers' bytes: the field is found with the
 * checked reader and decoded by protobuf-c (tests/fuzz/fuzz_cli_ftrace_loss).
 * See ftrace_loss.h. */
#include "client/ftrace_loss.h"

#include "pb/trace/ftrace/ftrace_stats.pb-c.h"
#include "tracegate/pb_wire.h"

/* TracePacket.ftrace_stats */
#define PACKET_FTRACE_STATS 34

static void add_stats(tg_ftrace_loss_t *l, const uint8_t *p, size_t n) {
  Perfetto__Protos__FtraceStats *st =
      perfetto__protos__ftrace_stats__unpack(NULL, n, p);
  if (!st) return;
  uint64_t overrun = 0;
  for (size_t i = 0; i < st->n_cpu_stats; i++)
    if (st->cpu_stats[i]->has_overrun) overrun += st->cpu_stats[i]->overrun;
  if (st->has_phase &&
      st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE) {
    l->overrun_start += overrun;
    l->starts++;
  } else if (st->has_phase &&
             st->phase == PERFETTO__PROTOS__FTRACE_STATS__PHASE__END_OF_TRACE) {
    l->overrun_end += overrun;
    l->ends++;
  }
  perfetto__protos__ftrace_stats__free_unpacked(st, NULL);
}

void tg_ftrace_loss_scan(tg_ftrace_loss_t *l, const uint8_t *packet,
                         size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, packet, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == PACKET_FTRACE_STATS && f.type == TG_PB_WT_LEN)
      add_stats(l, f.data, f.size);
}

uint64_t tg_ftrace_loss_overrun(const tg_ftrace_loss_t *l) {
  if (!l->ends || l->overrun_end <= l->overrun_start) return 0;
  return l->overrun_end - l->overrun_start;
}
