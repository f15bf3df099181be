/* The "linux.ftrace" data source's view of a DataSourceConfig: which events
 * to enable, the ring buffer size, the drain period, compact_sched, and the
 * names of the FtraceConfig fields it was given but does not implement (so
 * each can be named in a warning, never ignored silently).
 */
#ifndef TRACEGATE_PROBES_FTRACE_CONFIG_H
#define TRACEGATE_PROBES_FTRACE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_FTRACE_DEFAULT_BUFFER_KB 2048
#define TG_FTRACE_MAX_BUFFER_KB (64 * 1024)
#define TG_FTRACE_DEFAULT_DRAIN_MS 100
#define TG_FTRACE_MIN_DRAIN_MS 1
#define TG_FTRACE_MAX_DRAIN_MS 10000
/* Longer event lists are cut (a warning says so). */
#define TG_FTRACE_MAX_EVENT_SPECS 512
#define TG_FTRACE_MAX_UNSUPPORTED 32

typedef struct tg_ftrace_cfg {
  char **events; /* "group/name", "group/\*" or "name"; owned */
  size_t n_events;
  uint32_t buffer_size_kb;  /* per CPU */
  uint32_t drain_period_ms;
  /* The config set drain_period_ms (non-zero): drain at that period, not
   * at the reader's own cadence (tg_ftrace_drain_wait_ms). */
  bool drain_period_asked;
  bool compact_sched;
  bool disable_generic_events;
  bool events_truncated;
  /* symbolize_ksyms: name the kernel addresses of the records (interned
   * kernel_symbols); ksyms_mem_policy KSYMS_RETAIN: keep the symbols
   * loaded after the session stops. */
  bool symbolize_ksyms;
  bool ksyms_retain;
  /* throttle_rss_stat: record kmem/rss_stat through the kernel's
   * rss_stat_throttled synthetic event where there is one. */
  bool throttle_rss_stat;
  /* DataSourceConfig.tracing_session_id: the session whose
   * linux.process_stats resolves the pids of the records; 0: not said. */
  uint64_t tracing_session_id;
  /* Field names of FtraceConfig that were set but that the probes do not
   * act on (static strings). */
  const char *unsupported[TG_FTRACE_MAX_UNSUPPORTED];
  size_t n_unsupported;
} tg_ftrace_cfg_t;

/* |cfg| is a serialized DataSourceConfig (borrowed). Without an
 * ftrace_config the result has no events. Returns 0, TG_EBAD_CONFIG or
 * -ENOMEM; on error |out| holds nothing to free. */
int tg_ftrace_cfg_parse(const uint8_t *cfg, size_t len, tg_ftrace_cfg_t *out);
void tg_ftrace_cfg_free(tg_ftrace_cfg_t *c);

#endif /* TRACEGATE_PROBES_FTRACE_CONFIG_H */
