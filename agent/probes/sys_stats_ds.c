/* "linux.sys_stats": /proc/meminfo and /proc/stat on their own periods,
 * one SysStats packet per round. Runs on the sampler thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/clock.h"
#include "agent/probes/meminfo.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/probes/proc_read.h"
#include "agent/probes/proc_stat.h"
#include "tracegate/error.h"
#include "common/log.h"

_Static_assert(sizeof(tg_sys_stats_cfg_t) <= TG_PROBE_CFG_MAX,
               "config does not fit the sampler's slot");

/* /proc/stat grows with cpus and interrupts; 4 MiB is far past any real
 * machine and bounds a runaway read. */
#define READ_CAP (4u << 20)

typedef struct sys_stats {
  tg_sys_stats_cfg_t cfg;
  uint64_t ns_per_tick;
  uint64_t next_meminfo_ms, next_stat_ms; /* 0: due now */
  tg_buf_t file;
  tg_meminfo_t meminfo;
  tg_proc_stat_t stat;
  int last_meminfo_err, last_stat_err; /* log each new error once */
} sys_stats_t;

static int parse_cfg(const uint8_t *cfg, size_t len, void *out) {
  return tg_sys_stats_cfg_parse(cfg, len, out);
}

static int create(const void *cfg, void **state) {
  sys_stats_t *st = calloc(1, sizeof(*st));
  if (!st) return -ENOMEM;
  memcpy(&st->cfg, cfg, sizeof(st->cfg));
  st->ns_per_tick = tg_probes_ns_per_tick();
  tg_buf_init(&st->file, READ_CAP);
  if (st->cfg.unsupported)
    TG_INFO("linux.sys_stats: %u counter group(s) of the config are not "
            "polled by tracegate-probes (only meminfo and stat are)",
            st->cfg.unsupported);
  if (!st->cfg.meminfo_period_ms && !st->cfg.stat_period_ms)
    TG_INFO("linux.sys_stats: no meminfo_period_ms or stat_period_ms set; "
            "nothing to poll");
  *state = st;
  return 0;
}

static void destroy(void *state) {
  sys_stats_t *st = state;
  tg_buf_free(&st->file);
  tg_proc_stat_free(&st->stat);
  free(st);
}

static void note_error(const char *what, int rv, int *last) {
  if (rv != *last && rv < 0)
    TG_WARN("linux.sys_stats: %s: %s", what, tg_strerror(rv));
  *last = rv;
}

static bool read_meminfo(sys_stats_t *st) {
  int rv = tg_proc_read_file("/proc/meminfo", &st->file);
  if (rv == 0)
    rv = tg_meminfo_parse((const char *)tg_buf_begin(&st->file),
                          tg_buf_size(&st->file), &st->meminfo);
  note_error("/proc/meminfo", rv, &st->last_meminfo_err);
  return rv == 0;
}

static bool read_stat(sys_stats_t *st) {
  int rv = tg_proc_read_file("/proc/stat", &st->file);
  if (rv == 0)
    rv = tg_proc_stat_parse((const char *)tg_buf_begin(&st->file),
                            tg_buf_size(&st->file), &st->stat);
  note_error("/proc/stat", rv, &st->last_stat_err);
  return rv == 0;
}

/* Next due time after a round at |now|: keep the cadence, but never
 * schedule in the past after a stall. */
static uint64_t advance(uint64_t due, uint32_t period, uint64_t now) {
  uint64_t next = (due ? due : now) + period;
  return next <= now ? now + period : next;
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  sys_stats_t *st = state;
  const tg_sys_stats_cfg_t *c = &st->cfg;
  bool mem_due = c->meminfo_period_ms && st->next_meminfo_ms <= now;
  bool stat_due = c->stat_period_ms && st->next_stat_ms <= now;
  tg_sys_stats_sample_t s = {.ts_ns = tg__clock_boottime(),
                             .meminfo_mask = c->meminfo_mask,
                             .stat_mask = c->stat_mask,
                             .ns_per_tick = st->ns_per_tick};
  if (mem_due && read_meminfo(st)) s.meminfo = &st->meminfo;
  if (stat_due && read_stat(st)) s.stat = &st->stat;
  s.end_ts_ns = tg__clock_boottime();
  if (s.meminfo || s.stat) {
    tg_pbw_t *w = tg_ds_packet_begin(ds, inst);
    if (w) {
      tg_probes_write_sys_stats(w, &s);
      tg_ds_packet_end(ds, inst);
    }
  }
  if (mem_due)
    st->next_meminfo_ms = advance(st->next_meminfo_ms, c->meminfo_period_ms, now);
  if (stat_due)
    st->next_stat_ms = advance(st->next_stat_ms, c->stat_period_ms, now);
  uint64_t next = UINT64_MAX;
  if (c->meminfo_period_ms) next = st->next_meminfo_ms;
  if (c->stat_period_ms && st->next_stat_ms < next) next = st->next_stat_ms;
  return next;
}

const tg_probe_ops_t tg_sys_stats_probe = {
    .name = "linux.sys_stats",
    .parse_cfg = parse_cfg,
    .create = create,
    .tick = tick,
    .destroy = destroy,
};
