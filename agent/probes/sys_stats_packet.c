/* SysStats TracePackets; see probes_packets.h. */
#include "agent/probes/probes_packets.h"

#include "pb/config/sys_stats/sys_stats_config.pb-c.h"

/* TracePacket (proto/trace/trace_packet.proto). */
enum { PACKET_TIMESTAMP = 8, PACKET_SYS_STATS = 7 };
/* SysStats (proto/trace/sys_stats/sys_stats.proto). */
enum {
  SYS_MEMINFO = 1,
  SYS_CPU_STAT = 3,
  SYS_NUM_FORKS = 4,
  SYS_NUM_IRQ_TOTAL = 5,
  SYS_NUM_IRQ = 6,
  SYS_NUM_SOFTIRQ_TOTAL = 7,
  SYS_NUM_SOFTIRQ = 8,
  SYS_COLLECTION_END = 9,
};
enum { MEMINFO_KEY = 1, MEMINFO_VALUE = 2 };
enum {
  CPU_ID = 1,
  CPU_USER_NS = 2,
  CPU_USER_NICE_NS = 3,
  CPU_SYSTEM_MODE_NS = 4,
  CPU_IDLE_NS = 5,
  CPU_IO_WAIT_NS = 6,
  CPU_IRQ_NS = 7,
  CPU_SOFTIRQ_NS = 8,
  CPU_STEAL_NS = 9,
};
enum { IRQ_NUMBER = 1, IRQ_COUNT = 2 };

static void write_meminfo(tg_pbw_t *w, const tg_meminfo_t *m, uint64_t mask) {
  for (unsigned id = 1; id < TG_MEMINFO_COUNTERS; id++) {
    uint64_t bit = UINT64_C(1) << id;
    if (!(m->present & mask & bit)) continue;
    tg_pbw_begin_nested(w, SYS_MEMINFO);
    tg_pbw_append_varint(w, MEMINFO_KEY, id);
    tg_pbw_append_varint(w, MEMINFO_VALUE, m->value_kb[id]);
    tg_pbw_end_nested(w);
  }
}

static void write_cpu(tg_pbw_t *w, const tg_cpu_times_t *c, uint64_t k) {
  tg_pbw_begin_nested(w, SYS_CPU_STAT);
  tg_pbw_append_varint(w, CPU_ID, c->cpu_id);
  tg_pbw_append_varint(w, CPU_USER_NS, c->user * k);
  tg_pbw_append_varint(w, CPU_USER_NICE_NS, c->nice * k);
  tg_pbw_append_varint(w, CPU_SYSTEM_MODE_NS, c->system * k);
  tg_pbw_append_varint(w, CPU_IDLE_NS, c->idle * k);
  tg_pbw_append_varint(w, CPU_IO_WAIT_NS, c->iowait * k);
  tg_pbw_append_varint(w, CPU_IRQ_NS, c->irq * k);
  tg_pbw_append_varint(w, CPU_SOFTIRQ_NS, c->softirq * k);
  tg_pbw_append_varint(w, CPU_STEAL_NS, c->steal * k);
  tg_pbw_end_nested(w);
}

static void write_counts(tg_pbw_t *w, uint32_t field, const uint64_t *v,
                         size_t n, bool skip_zero) {
  for (size_t i = 0; i < n; i++) {
    if (skip_zero && v[i] == 0) continue;
    tg_pbw_begin_nested(w, field);
    tg_pbw_append_int(w, IRQ_NUMBER, (int64_t)i);
    tg_pbw_append_varint(w, IRQ_COUNT, v[i]);
    tg_pbw_end_nested(w);
  }
}

static void write_stat(tg_pbw_t *w, const tg_proc_stat_t *st, uint32_t mask,
                       uint64_t ns_per_tick) {
  if (mask &
      TG_STAT_BIT(PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_CPU_TIMES))
    for (size_t i = 0; i < st->n_cpus; i++)
      write_cpu(w, &st->cpus[i], ns_per_tick);
  if ((st->present & TG_PROC_STAT_HAS_IRQ) &&
      (mask &
       TG_STAT_BIT(PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_IRQ_COUNTS))) {
    tg_pbw_append_varint(w, SYS_NUM_IRQ_TOTAL, st->irq_total);
    write_counts(w, SYS_NUM_IRQ, st->irqs, st->n_irqs, true);
  }
  if ((st->present & TG_PROC_STAT_HAS_SOFTIRQ) &&
      (mask &
       TG_STAT_BIT(PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_SOFTIRQ_COUNTS))) {
    tg_pbw_append_varint(w, SYS_NUM_SOFTIRQ_TOTAL, st->softirq_total);
    write_counts(w, SYS_NUM_SOFTIRQ, st->softirqs, st->n_softirqs, false);
  }
  if ((st->present & TG_PROC_STAT_HAS_FORKS) &&
      (mask &
       TG_STAT_BIT(PERFETTO__PROTOS__SYS_STATS_CONFIG__STAT_COUNTERS__STAT_FORK_COUNT)))
    tg_pbw_append_varint(w, SYS_NUM_FORKS, st->forks);
}

void tg_probes_write_sys_stats(tg_pbw_t *w, const tg_sys_stats_sample_t *s) {
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, s->ts_ns);
  tg_pbw_begin_nested(w, PACKET_SYS_STATS);
  if (s->meminfo) write_meminfo(w, s->meminfo, s->meminfo_mask);
  if (s->stat) write_stat(w, s->stat, s->stat_mask, s->ns_per_tick);
  tg_pbw_append_varint(w, SYS_COLLECTION_END, s->end_ts_ns);
  tg_pbw_end_nested(w);
}
