/* Fuzzes tracegate-perf's PerfEventConfig reader (agent/perf/perf_config.h)
 * and what follows from a config it takes: the perf_event_attr of the
 * timebase and its followers (perf_events.h), the scope with and without
 * process sharding, and the defaults packet that describes them
 * (perf_emit.h). The config comes from whoever starts a tracing session,
 * through the service: anything.
 *
 * Input: a serialized DataSourceConfig. A config taken must keep its
 * counts within their bounds (followers, pids, patterns), its periods and
 * clock in range, and a raw event only the perf_event_attr types
 * docs/perf.md lists (never a tracepoint by id, a breakpoint or a dynamic
 * PMU); nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perf/perf_config.h"
#include "agent/perf/perf_emit.h"
#include "agent/perf/perf_events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_perf_cfg_t c;
  if (tg_perf_cfg_parse(data, size, &c) < 0) return 0;
  if (c.refused) {
    tg_perf_cfg_free(&c);
    return 0;
  }
  if (c.n_followers > TG_PERF_MAX_FOLLOWERS ||
      c.n_target_pid > TG_PERF_MAX_TARGETS ||
      c.n_target_cmdline > TG_PERF_MAX_TARGETS ||
      c.n_exclude_pid > TG_PERF_MAX_TARGETS ||
      c.n_exclude_cmdline > TG_PERF_MAX_TARGETS ||
      c.n_ignored > TG_PERF_MAX_IGNORED)
    abort();
  if (c.poll_period_ms) {
    if (c.callstacks || c.frequency || c.period ||
        c.poll_period_ms > TG_PERF_MAX_POLL_PERIOD_MS)
      abort();
  } else if (!c.frequency && !c.period) {
    abort();
  }
  if (c.read_period_ms < TG_PERF_MIN_READ_PERIOD_MS ||
      (!c.poll_period_ms && c.read_period_ms > TG_PERF_MAX_READ_PERIOD_MS))
    abort();
  /* A tracepoint name taken becomes events/<group>/<name>/id: neither
   * part may be a path step or hold another '/'. */
  for (size_t i = 0; i <= c.n_followers; i++) {
    const tg_perf_event_t *ev = i ? &c.followers[i - 1] : &c.timebase;
    if (ev->kind != TG_PERF_EVENT_TRACEPOINT) continue;
    if (!ev->tp_name) abort();
    size_t sep = strcspn(ev->tp_name, ":/");
    const char *name = ev->tp_name + sep + 1;
    if (!ev->tp_name[sep] || strchr(name, '/') || !strcmp(name, ".") ||
        !strcmp(name, "..") || (sep == 1 && ev->tp_name[0] == '.') ||
        (sep == 2 && !strncmp(ev->tp_name, "..", 2)))
      abort();
  }
  for (size_t i = 0; i <= c.n_followers; i++) {
    const tg_perf_event_t *ev = i ? &c.followers[i - 1] : &c.timebase;
    if (ev->kind == TG_PERF_EVENT_RAW &&
        !(ev->attr_type == PERF_TYPE_HARDWARE ||
          ev->attr_type == PERF_TYPE_SOFTWARE ||
          ev->attr_type == PERF_TYPE_HW_CACHE || ev->attr_type == PERF_TYPE_RAW))
      abort();
  }
  struct perf_event_attr a, fa;
  tg_perf_attr_leader(&c, 0x1b7, &a);
  for (size_t i = 0; i < c.n_followers; i++)
    tg_perf_attr_follower(&c, i, &a, &fa);
  if (c.shard_count) c.chosen_shard = (uint32_t)size % c.shard_count;
  (void)tg_perf_cfg_has_tracepoints(&c);
  for (int32_t pid = 0; pid < 4; pid++) {
    (void)tg_perf_cfg_in_scope(&c, pid, NULL);
    (void)tg_perf_cfg_in_scope(&c, pid, "/usr/bin/work");
  }
  static uint8_t buf[1 << 16];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_perf_timebase_desc_t tb = {
      .frequency = c.frequency, .period = c.period, .counter = c.counter,
      .perf_clock = c.perf_clock, .name = c.name,
      .builtin_clock = c.builtin_clock, .event = &c.timebase,
      .poll_period_ms = c.poll_period_ms, .followers = c.followers,
      .n_followers = c.n_followers, .shard_count = c.shard_count,
      .chosen_shard = c.chosen_shard};
  tg_perf_emit_defaults(&w, 1, &tb);
  tg_perf_cfg_free(&c);
  return 0;
}
