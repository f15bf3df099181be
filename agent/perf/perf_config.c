/* PerfEventConfig: see perf_config.h. */
#include "agent/perf/perf_config.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pb/config/data_source_config.pb-c.h"
#include "tracegate/error.h"

/* perf_event_attr.type */
#define ATTR_HARDWARE 0
#define ATTR_SOFTWARE 1
/* BuiltinClock */
#define BUILTIN_REALTIME 1
#define BUILTIN_MONOTONIC 3
#define BUILTIN_MONOTONIC_RAW 4
#define BUILTIN_BOOTTIME 6

/* PerfEvents.Counter -> perf_event_attr type and config. */
static bool counter_attr(uint32_t counter, uint32_t *type, uint64_t *config) {
  static const struct {
    uint32_t counter, type;
    uint64_t config;
  } map[] = {
      {1, ATTR_SOFTWARE, 0},  /* SW_CPU_CLOCK */
      {2, ATTR_SOFTWARE, 2},  /* SW_PAGE_FAULTS */
      {3, ATTR_SOFTWARE, 1},  /* SW_TASK_CLOCK */
      {4, ATTR_SOFTWARE, 3},  /* SW_CONTEXT_SWITCHES */
      {5, ATTR_SOFTWARE, 4},  /* SW_CPU_MIGRATIONS */
      {6, ATTR_SOFTWARE, 5},  /* SW_PAGE_FAULTS_MIN */
      {7, ATTR_SOFTWARE, 6},  /* SW_PAGE_FAULTS_MAJ */
      {8, ATTR_SOFTWARE, 7},  /* SW_ALIGNMENT_FAULTS */
      {9, ATTR_SOFTWARE, 8},  /* SW_EMULATION_FAULTS */
      {20, ATTR_SOFTWARE, 9}, /* SW_DUMMY */
      {10, ATTR_HARDWARE, 0}, /* HW_CPU_CYCLES */
      {11, ATTR_HARDWARE, 1}, /* HW_INSTRUCTIONS */
      {12, ATTR_HARDWARE, 2}, /* HW_CACHE_REFERENCES */
      {13, ATTR_HARDWARE, 3}, /* HW_CACHE_MISSES */
      {14, ATTR_HARDWARE, 4}, /* HW_BRANCH_INSTRUCTIONS */
      {15, ATTR_HARDWARE, 5}, /* HW_BRANCH_MISSES */
      {16, ATTR_HARDWARE, 6}, /* HW_BUS_CYCLES */
      {17, ATTR_HARDWARE, 7}, /* HW_STALLED_CYCLES_FRONTEND */
      {18, ATTR_HARDWARE, 8}, /* HW_STALLED_CYCLES_BACKEND */
      {19, ATTR_HARDWARE, 9}, /* HW_REF_CPU_CYCLES */
  };
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (map[i].counter == counter) {
      *type = map[i].type;
      *config = map[i].config;
      return true;
    }
  return false;
}

bool tg_perf_cfg_dwarf_built(void) {
#ifdef TG_PERF_HAVE_DWARF
  return true;
#else
  return false;
#endif
}

static void ignore(tg_perf_cfg_t *c, bool set, const char *name) {
  if (set && c->n_ignored < TG_PERF_MAX_IGNORED) c->ignored[c->n_ignored++] = name;
}

static int copy_pids(int32_t *dst, size_t *n, const int32_t *src, size_t m,
                     tg_perf_cfg_t *c, const char *what) {
  if (m > TG_PERF_MAX_TARGETS) {
    c->refused = what;
    return 0;
  }
  if (m) memcpy(dst, src, m * sizeof(*src));
  *n = m;
  return 0;
}

static int copy_strs(char **dst, size_t *n, char *const *src, size_t m,
                     tg_perf_cfg_t *c, const char *what) {
  if (m > TG_PERF_MAX_TARGETS) {
    c->refused = what;
    return 0;
  }
  for (size_t i = 0; i < m; i++) {
    if (!(dst[i] = strdup(src[i] ? src[i] : ""))) return -ENOMEM;
    *n = i + 1;
  }
  return 0;
}

static int parse_scope(tg_perf_cfg_t *out, const int32_t *tp, size_t ntp,
                       char *const *tc, size_t ntc, const int32_t *ep,
                       size_t nep, char *const *ec, size_t nec) {
  const char *many = "scope: more than 64 targets or exclusions";
  int rv;
  if ((rv = copy_pids(out->target_pid, &out->n_target_pid, tp, ntp, out,
                      many)) < 0 ||
      (rv = copy_strs(out->target_cmdline, &out->n_target_cmdline, tc, ntc,
                      out, many)) < 0 ||
      (rv = copy_pids(out->exclude_pid, &out->n_exclude_pid, ep, nep, out,
                      many)) < 0 ||
      (rv = copy_strs(out->exclude_cmdline, &out->n_exclude_cmdline, ec, nec,
                      out, many)) < 0)
    return rv;
  return 0;
}

static int parse_perf(const Perfetto__Protos__PerfEventConfig *p,
                      tg_perf_cfg_t *out) {
  const Perfetto__Protos__PerfEvents__Timebase *tb = p->timebase;
  if (tb) {
    switch (tb->event_case) {
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_COUNTER:
        out->counter = (uint32_t)tb->counter;
        break;
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_TRACEPOINT:
        out->refused = "timebase.tracepoint: not supported by tracegate-perf";
        return 0;
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_RAW_EVENT:
        out->refused = "timebase.raw_event: not supported by tracegate-perf";
        return 0;
      default:
        break;
    }
    switch (tb->interval_case) {
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY:
        out->frequency = tb->frequency;
        break;
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD:
        out->frequency = 0;
        out->period = tb->period;
        break;
      case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_POLL_PERIOD_MS:
        out->refused =
            "timebase.poll_period_ms (counter-only polling): not supported "
            "by tracegate-perf";
        return 0;
      default:
        break;
    }
    if (tb->name && !(out->name = strdup(tb->name))) return -ENOMEM;
    if (tb->has_timestamp_clock) out->perf_clock = (uint32_t)tb->timestamp_clock;
  } else if (p->has_sampling_frequency && p->sampling_frequency) {
    out->frequency = p->sampling_frequency;
  }
  if (!out->frequency && !out->period) {
    out->refused = "timebase: a period of 0 samples nothing";
    return 0;
  }
  if (!counter_attr(out->counter, &out->attr_type, &out->attr_config)) {
    out->refused = "timebase.counter: unknown counter";
    return 0;
  }
  out->hardware = out->attr_type == ATTR_HARDWARE;
  switch (out->perf_clock) {
    case 0:
    case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_BOOTTIME:
      out->clockid = CLOCK_BOOTTIME;
      out->builtin_clock = BUILTIN_BOOTTIME;
      break;
    case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_REALTIME:
      out->clockid = CLOCK_REALTIME;
      out->builtin_clock = BUILTIN_REALTIME;
      break;
    case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC:
      out->clockid = CLOCK_MONOTONIC;
      out->builtin_clock = BUILTIN_MONOTONIC;
      break;
    case PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC_RAW:
      out->clockid = CLOCK_MONOTONIC_RAW;
      out->builtin_clock = BUILTIN_MONOTONIC_RAW;
      break;
    default:
      out->refused = "timebase.timestamp_clock: unknown clock";
      return 0;
  }
  if (p->n_followers) {
    out->refused = "followers: not supported by tracegate-perf";
    return 0;
  }
  if (p->n_target_installed_by) {
    out->refused = "target_installed_by: Android only";
    return 0;
  }
  int rv;
  const Perfetto__Protos__PerfEventConfig__CallstackSampling *cs =
      p->callstack_sampling;
  bool legacy = p->has_all_cpus && p->all_cpus;
  if (cs) {
    out->callstacks = true;
    out->kernel_frames = cs->has_kernel_frames && cs->kernel_frames;
    uint32_t mode = cs->has_user_frames ? (uint32_t)cs->user_frames : 0;
    switch (mode) {
      case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_SKIP:
        out->user_frames = TG_PERF_USER_NONE;
        break;
      case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_DWARF:
        if (!tg_perf_cfg_dwarf_built()) {
          out->refused =
              "callstack_sampling.user_frames: UNWIND_DWARF is not supported "
              "in this build (no libdw; use UNWIND_FRAME_POINTER)";
          return 0;
        }
        out->user_frames = TG_PERF_USER_DWARF;
        break;
      case PERFETTO__PROTOS__PERF_EVENT_CONFIG__UNWIND_MODE__UNWIND_FRAME_POINTER:
        out->user_frames = TG_PERF_USER_FRAME_POINTER;
        break;
      default:
        out->user_frames = TG_PERF_USER_FRAME_POINTER;
        out->user_frames_defaulted = true;
        break;
    }
    const Perfetto__Protos__PerfEventConfig__Scope *sc = cs->scope;
    if (sc) {
      if (sc->has_additional_cmdline_count && sc->additional_cmdline_count) {
        out->refused = "scope.additional_cmdline_count: not supported by "
                       "tracegate-perf";
        return 0;
      }
      if (sc->has_process_shard_count && sc->process_shard_count > 1) {
        out->refused = "scope.process_shard_count: not supported by "
                       "tracegate-perf";
        return 0;
      }
      if ((rv = parse_scope(out, sc->target_pid, sc->n_target_pid,
                            sc->target_cmdline, sc->n_target_cmdline,
                            sc->exclude_pid, sc->n_exclude_pid,
                            sc->exclude_cmdline, sc->n_exclude_cmdline)) < 0)
        return rv;
    }
  } else if (legacy) {
    out->callstacks = true;
    out->kernel_frames = p->has_kernel_frames && p->kernel_frames;
    out->user_frames = TG_PERF_USER_FRAME_POINTER;
    out->user_frames_defaulted = true;
  }
  if (!cs) {
    if (p->has_additional_cmdline_count && p->additional_cmdline_count) {
      out->refused = "additional_cmdline_count: not supported by tracegate-perf";
      return 0;
    }
    if ((rv = parse_scope(out, p->target_pid, p->n_target_pid,
                          p->target_cmdline, p->n_target_cmdline,
                          p->exclude_pid, p->n_exclude_pid,
                          p->exclude_cmdline, p->n_exclude_cmdline)) < 0)
      return rv;
  }
  if (p->n_target_cpu) {
    if (!(out->cpus = malloc(p->n_target_cpu * sizeof(*out->cpus))))
      return -ENOMEM;
    memcpy(out->cpus, p->target_cpu, p->n_target_cpu * sizeof(*out->cpus));
    out->n_cpus = p->n_target_cpu;
  }
  if (p->has_ring_buffer_pages && p->ring_buffer_pages) {
    uint32_t n = p->ring_buffer_pages;
    if (n & (n - 1) || n > TG_PERF_MAX_RING_PAGES) {
      out->refused = "ring_buffer_pages: must be a power of two, at most 8192";
      return 0;
    }
    out->ring_pages = n;
  }
  if (p->has_ring_buffer_read_period_ms && p->ring_buffer_read_period_ms) {
    uint32_t v = p->ring_buffer_read_period_ms;
    out->read_period_ms = v < TG_PERF_MIN_READ_PERIOD_MS
                              ? TG_PERF_MIN_READ_PERIOD_MS
                          : v > TG_PERF_MAX_READ_PERIOD_MS
                              ? TG_PERF_MAX_READ_PERIOD_MS
                              : v;
  }
  if (p->has_max_enqueued_footprint_kb)
    out->max_enqueued_footprint_kb = p->max_enqueued_footprint_kb;
  if (p->has_max_daemon_memory_kb)
    out->max_daemon_memory_kb = p->max_daemon_memory_kb;
  if (p->has_unwind_state_clear_period_ms)
    out->unwind_state_clear_period_ms = p->unwind_state_clear_period_ms;
  ignore(out, p->has_remote_descriptor_timeout_ms,
         "remote_descriptor_timeout_ms");
  return 0;
}

int tg_perf_cfg_parse(const uint8_t *cfg, size_t len, tg_perf_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  out->counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_CLOCK;
  out->frequency = TG_PERF_DEFAULT_FREQUENCY;
  out->ring_pages = TG_PERF_DEFAULT_RING_PAGES;
  out->read_period_ms = TG_PERF_DEFAULT_READ_PERIOD_MS;
  Perfetto__Protos__DataSourceConfig *dsc =
      perfetto__protos__data_source_config__unpack(
          NULL, len, cfg ? cfg : (const uint8_t *)"");
  if (!dsc) return TG_EBAD_CONFIG;
  if (dsc->has_tracing_session_id)
    out->tracing_session_id = dsc->tracing_session_id;
  int rv = 0;
  if (dsc->perf_event_config) {
    rv = parse_perf(dsc->perf_event_config, out);
  } else {
    /* No PerfEventConfig: traced_perf's defaults, counter only. */
    out->clockid = CLOCK_BOOTTIME;
    out->builtin_clock = 6;
    out->attr_type = ATTR_SOFTWARE;
    out->attr_config = 0;
  }
  perfetto__protos__data_source_config__free_unpacked(dsc, NULL);
  if (rv < 0) tg_perf_cfg_free(out);
  return rv;
}

void tg_perf_cfg_free(tg_perf_cfg_t *c) {
  for (size_t i = 0; i < c->n_target_cmdline; i++) free(c->target_cmdline[i]);
  for (size_t i = 0; i < c->n_exclude_cmdline; i++) free(c->exclude_cmdline[i]);
  free(c->cpus);
  free(c->name);
  memset(c, 0, sizeof(*c));
}

static bool matches(char *const *pats, size_t n, const char *argv0) {
  if (!argv0) return false;
  const char *base = strrchr(argv0, '/');
  base = base ? base + 1 : argv0;
  for (size_t i = 0; i < n; i++) {
    const char *subject = strchr(pats[i], '/') ? argv0 : base;
    if (fnmatch(pats[i], subject, 0) == 0) return true;
  }
  return false;
}

static bool has_pid(const int32_t *v, size_t n, int32_t pid) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == pid) return true;
  return false;
}

bool tg_perf_cfg_has_scope(const tg_perf_cfg_t *c) {
  return c->n_target_pid || c->n_target_cmdline || c->n_exclude_pid ||
         c->n_exclude_cmdline;
}

bool tg_perf_cfg_in_scope(const tg_perf_cfg_t *c, int32_t pid,
                          const char *cmdline) {
  if (has_pid(c->exclude_pid, c->n_exclude_pid, pid) ||
      matches(c->exclude_cmdline, c->n_exclude_cmdline, cmdline))
    return false;
  if (!c->n_target_pid && !c->n_target_cmdline) return true;
  return has_pid(c->target_pid, c->n_target_pid, pid) ||
         matches(c->target_cmdline, c->n_target_cmdline, cmdline);
}
