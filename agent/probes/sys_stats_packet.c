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
  SYS_DEVFREQ = 10,
  SYS_CPUFREQ_KHZ = 11,
  SYS_BUDDY_INFO = 12,
  SYS_DISK_STAT = 13,
  SYS_PSI = 14,
  SYS_THERMAL_ZONE = 15,
  SYS_CPUIDLE_STATE = 16,
  SYS_GPUFREQ_MHZ = 17,
};
enum { VMSTAT_KEY = 1, VMSTAT_VALUE = 2, SYS_VMSTAT = 2 };
enum { BUDDY_NODE = 1, BUDDY_ZONE = 2, BUDDY_ORDER_PAGES = 3 };
enum {
  DISK_NAME = 1,
  DISK_READ_SECTORS = 2,
  DISK_READ_TIME_MS = 3,
  DISK_WRITE_SECTORS = 4,
  DISK_WRITE_TIME_MS = 5,
  DISK_DISCARD_SECTORS = 6,
  DISK_DISCARD_TIME_MS = 7,
  DISK_FLUSH_COUNT = 8,
  DISK_FLUSH_TIME_MS = 9,
};
enum { PSI_RESOURCE = 1, PSI_TOTAL_NS = 2 };
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
enum { DEVFREQ_KEY = 1, DEVFREQ_VALUE = 2 };
enum { THERMAL_NAME = 1, THERMAL_TEMP = 2, THERMAL_TYPE = 3 };
enum { CPUIDLE_CPU_ID = 1, CPUIDLE_ENTRY = 2 };
enum { IDLE_ENTRY_STATE = 1, IDLE_ENTRY_DURATION_US = 2 };

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

static void write_vmstat(tg_pbw_t *w, const tg_vmstat_t *v,
                         const uint64_t *mask) {
  for (unsigned id = 1; id < TG_VMSTAT_IDS; id++) {
    if (!tg_vmstat_has(v->present, id) || !tg_vmstat_has(mask, id)) continue;
    tg_pbw_begin_nested(w, SYS_VMSTAT);
    tg_pbw_append_varint(w, VMSTAT_KEY, id);
    tg_pbw_append_varint(w, VMSTAT_VALUE, v->value[id]);
    tg_pbw_end_nested(w);
  }
}

static void write_buddyinfo(tg_pbw_t *w, const tg_buddyinfo_t *b) {
  for (unsigned i = 0; i < b->n_zones; i++) {
    const tg_buddy_zone_t *z = &b->zones[i];
    tg_pbw_begin_nested(w, SYS_BUDDY_INFO);
    tg_pbw_append_string(w, BUDDY_NODE, z->node);
    tg_pbw_append_string(w, BUDDY_ZONE, z->zone);
    for (unsigned o = 0; o < z->n_orders; o++)
      tg_pbw_append_varint(w, BUDDY_ORDER_PAGES, z->order_pages[o]);
    tg_pbw_end_nested(w);
  }
}

static void write_diskstats(tg_pbw_t *w, const tg_diskstats_t *d) {
  for (unsigned i = 0; i < d->n_disks; i++) {
    const tg_disk_t *k = &d->disks[i];
    tg_pbw_begin_nested(w, SYS_DISK_STAT);
    tg_pbw_append_string(w, DISK_NAME, k->name);
    tg_pbw_append_varint(w, DISK_READ_SECTORS, k->read_sectors);
    tg_pbw_append_varint(w, DISK_READ_TIME_MS, k->read_time_ms);
    tg_pbw_append_varint(w, DISK_WRITE_SECTORS, k->write_sectors);
    tg_pbw_append_varint(w, DISK_WRITE_TIME_MS, k->write_time_ms);
    tg_pbw_append_varint(w, DISK_DISCARD_SECTORS, k->discard_sectors);
    tg_pbw_append_varint(w, DISK_DISCARD_TIME_MS, k->discard_time_ms);
    tg_pbw_append_varint(w, DISK_FLUSH_COUNT, k->flush_count);
    tg_pbw_append_varint(w, DISK_FLUSH_TIME_MS, k->flush_time_ms);
    tg_pbw_end_nested(w);
  }
}

static void write_psi_sample(tg_pbw_t *w, uint32_t resource, uint64_t us) {
  tg_pbw_begin_nested(w, SYS_PSI);
  tg_pbw_append_varint(w, PSI_RESOURCE, resource);
  tg_pbw_append_varint(w, PSI_TOTAL_NS, us * 1000);
  tg_pbw_end_nested(w);
}

static void write_psi(tg_pbw_t *w, const tg_psi_t *const psi[3]) {
  /* PsiResource: 2k+1 is "some" and 2k+2 "full" of resource k. */
  for (uint32_t k = 0; k < 3; k++) {
    if (!psi[k]) continue;
    if (psi[k]->has_some) write_psi_sample(w, 2 * k + 1, psi[k]->some_total_us);
    if (psi[k]->has_full) write_psi_sample(w, 2 * k + 2, psi[k]->full_total_us);
  }
}

static void write_devfreq(tg_pbw_t *w, const tg_devfreq_t *d, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tg_pbw_begin_nested(w, SYS_DEVFREQ);
    tg_pbw_append_string(w, DEVFREQ_KEY, d[i].name);
    tg_pbw_append_varint(w, DEVFREQ_VALUE, d[i].cur_freq);
    tg_pbw_end_nested(w);
  }
}

static void write_thermal(tg_pbw_t *w, const tg_thermal_zone_t *z, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tg_pbw_begin_nested(w, SYS_THERMAL_ZONE);
    tg_pbw_append_string(w, THERMAL_NAME, z[i].name);
    tg_pbw_append_varint(w, THERMAL_TEMP, z[i].temp_c);
    tg_pbw_append_string(w, THERMAL_TYPE, z[i].type);
    tg_pbw_end_nested(w);
  }
}

static void write_cpuidle(tg_pbw_t *w, const tg_cpuidle_cpu_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    tg_pbw_begin_nested(w, SYS_CPUIDLE_STATE);
    tg_pbw_append_varint(w, CPUIDLE_CPU_ID, c[i].cpu);
    for (size_t k = 0; k < c[i].n_states; k++) {
      tg_pbw_begin_nested(w, CPUIDLE_ENTRY);
      tg_pbw_append_string(w, IDLE_ENTRY_STATE, c[i].states[k].name);
      tg_pbw_append_varint(w, IDLE_ENTRY_DURATION_US, c[i].states[k].time_us);
      tg_pbw_end_nested(w);
    }
    tg_pbw_end_nested(w);
  }
}

bool tg_sys_stats_sample_empty(const tg_sys_stats_sample_t *s) {
  return !s->meminfo && !s->vmstat && !s->stat && !s->n_cpufreq &&
         !s->buddyinfo && !s->diskstats && !s->psi[0] && !s->psi[1] &&
         !s->psi[2] && !s->n_devfreq && !s->n_thermal && !s->n_cpuidle &&
         !s->has_gpufreq;
}

void tg_probes_write_sys_stats(tg_pbw_t *w, const tg_sys_stats_sample_t *s) {
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, s->ts_ns);
  tg_pbw_begin_nested(w, PACKET_SYS_STATS);
  if (s->meminfo) write_meminfo(w, s->meminfo, s->meminfo_mask);
  if (s->vmstat) write_vmstat(w, s->vmstat, s->vmstat_mask);
  if (s->stat) write_stat(w, s->stat, s->stat_mask, s->ns_per_tick);
  write_devfreq(w, s->devfreq, s->n_devfreq);
  for (size_t i = 0; i < s->n_cpufreq; i++)
    tg_pbw_append_varint(w, SYS_CPUFREQ_KHZ, s->cpufreq_khz[i]);
  if (s->buddyinfo) write_buddyinfo(w, s->buddyinfo);
  if (s->diskstats) write_diskstats(w, s->diskstats);
  write_psi(w, s->psi);
  write_thermal(w, s->thermal, s->n_thermal);
  write_cpuidle(w, s->cpuidle, s->n_cpuidle);
  if (s->has_gpufreq) tg_pbw_append_varint(w, SYS_GPUFREQ_MHZ, s->gpufreq_mhz);
  tg_pbw_append_varint(w, SYS_COLLECTION_END, s->end_ts_ns);
  tg_pbw_end_nested(w);
}
