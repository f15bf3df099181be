/* DataSourceConfig -> tg_ftrace_cfg_t; see ftrace_config.h. */
#include "agent/probes/ftrace_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb/config/data_source_config.pb-c.h"
#include "tracegate/error.h"

static void note(tg_ftrace_cfg_t *out, bool set, const char *name) {
  if (set && out->n_unsupported < TG_FTRACE_MAX_UNSUPPORTED)
    out->unsupported[out->n_unsupported++] = name;
}

static void collect_unsupported(const Perfetto__Protos__FtraceConfig *c,
                                tg_ftrace_cfg_t *out) {
  note(out, c->n_atrace_categories, "atrace_categories");
  note(out, c->n_atrace_apps, "atrace_apps");
  note(out, c->n_atrace_categories_prefer_sdk, "atrace_categories_prefer_sdk");
  note(out, c->has_atrace_userspace_only && c->atrace_userspace_only,
       "atrace_userspace_only");
  note(out, c->has_buffer_size_lower_bound && c->buffer_size_lower_bound,
       "buffer_size_lower_bound");
  note(out, c->has_drain_buffer_percent, "drain_buffer_percent");
  note(out, c->print_filter != NULL, "print_filter");
  note(out, c->has_denser_generic_event_encoding &&
                c->denser_generic_event_encoding,
       "denser_generic_event_encoding");
  note(out, c->n_syscall_events, "syscall_events");
  note(out, c->has_enable_function_graph && c->enable_function_graph,
       "enable_function_graph");
  note(out, c->n_function_filters, "function_filters");
  note(out, c->n_function_graph_roots, "function_graph_roots");
  note(out, c->has_function_graph_max_depth, "function_graph_max_depth");
  note(out, c->n_kprobe_events, "kprobe_events");
  note(out, c->has_preserve_ftrace_buffer && c->preserve_ftrace_buffer,
       "preserve_ftrace_buffer");
  note(out, c->has_use_monotonic_raw_clock && c->use_monotonic_raw_clock,
       "use_monotonic_raw_clock");
  note(out, c->instance_name != NULL, "instance_name");
  note(out, c->has_debug_ftrace_abi && c->debug_ftrace_abi, "debug_ftrace_abi");
  note(out, c->n_tids_to_trace, "tids_to_trace");
  note(out, c->n_tracefs_options, "tracefs_options");
  note(out, c->tracing_cpumask != NULL, "tracing_cpumask");
}

static uint32_t clamp(uint32_t v, uint32_t dflt, uint32_t lo, uint32_t hi) {
  if (!v) return dflt;
  return v < lo ? lo : v > hi ? hi : v;
}

int tg_ftrace_cfg_parse(const uint8_t *cfg, size_t len, tg_ftrace_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  out->buffer_size_kb = TG_FTRACE_DEFAULT_BUFFER_KB;
  out->drain_period_ms = TG_FTRACE_DEFAULT_DRAIN_MS;
  Perfetto__Protos__DataSourceConfig *dsc =
      perfetto__protos__data_source_config__unpack(
          NULL, len, cfg ? cfg : (const uint8_t *)"");
  if (!dsc) return TG_EBAD_CONFIG;
  int rv = 0;
  if (dsc->has_tracing_session_id)
    out->tracing_session_id = dsc->tracing_session_id;
  const Perfetto__Protos__FtraceConfig *c = dsc->ftrace_config;
  if (c) {
    out->buffer_size_kb = clamp(c->buffer_size_kb, TG_FTRACE_DEFAULT_BUFFER_KB,
                                4, TG_FTRACE_MAX_BUFFER_KB);
    out->drain_period_ms =
        clamp(c->drain_period_ms, TG_FTRACE_DEFAULT_DRAIN_MS,
              TG_FTRACE_MIN_DRAIN_MS, TG_FTRACE_MAX_DRAIN_MS);
    /* 0 means "not set", as for Perfetto's probes. */
    out->drain_period_asked = c->drain_period_ms != 0;
    /* As Perfetto's probes since v42: compact unless the config says no. */
    out->compact_sched = !(c->compact_sched && c->compact_sched->has_enabled &&
                           !c->compact_sched->enabled);
    out->disable_generic_events =
        c->has_disable_generic_events && c->disable_generic_events;
    out->symbolize_ksyms = c->has_symbolize_ksyms && c->symbolize_ksyms;
    out->throttle_rss_stat = c->has_throttle_rss_stat && c->throttle_rss_stat;
    out->ksyms_retain =
        c->has_ksyms_mem_policy &&
        c->ksyms_mem_policy ==
            PERFETTO__PROTOS__FTRACE_CONFIG__KSYMS_MEM_POLICY__KSYMS_RETAIN;
    collect_unsupported(c, out);
    size_t n = c->n_ftrace_events;
    if (n > TG_FTRACE_MAX_EVENT_SPECS) {
      n = TG_FTRACE_MAX_EVENT_SPECS;
      out->events_truncated = true;
    }
    if (n) {
      out->events = calloc(n, sizeof(*out->events));
      if (!out->events) rv = -ENOMEM;
    }
    for (size_t i = 0; !rv && i < n; i++) {
      out->events[i] = strdup(c->ftrace_events[i] ? c->ftrace_events[i] : "");
      if (!out->events[i]) rv = -ENOMEM;
      else out->n_events++;
    }
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  if (rv) tg_ftrace_cfg_free(out);
  return rv;
}

void tg_ftrace_cfg_free(tg_ftrace_cfg_t *c) {
  for (size_t i = 0; i < c->n_events; i++) free(c->events[i]);
  free(c->events);
  c->events = NULL;
  c->n_events = 0;
}
