/* PerfEventConfig: see perf_config.h. */
#include "agent/perf/perf_config.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pb/config/data_source_config.pb-c.h"
#include "common/flag_rules.h"
#include "tracegate/error.h"

/* perf_event_attr.type */
#define ATTR_HARDWARE 0
#define ATTR_SOFTWARE 1
#define ATTR_TRACEPOINT 2
#define ATTR_HW_CACHE 3
#define ATTR_RAW 4
#define RAW_TYPE_REFUSED(where)                                              \
  where ".raw_event.type: only 0 (hardware), 1 (software), 3 (hardware "     \
        "cache) or 4 (raw); a tracepoint is named in " where ".tracepoint"
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

/* One part of a tracepoint name: non-empty, of the characters tracefs
 * names groups and events with, and not a path step ("." or ".."), so
 * that it cannot leave events/ when it becomes a path. */
static bool tp_part_ok(const char *p, size_t n) {
  if (!n || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
    return false;
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
      return false;
  }
  return true;
}

/* "group:name" or "group/name" (traced_perf takes both). */
static bool tracepoint_name_ok(const char *s) {
  size_t n = strnlen(s, 256);
  const char *sep = strpbrk(s, ":/");
  if (n > 255 || !sep) return false;
  return tp_part_ok(s, (size_t)(sep - s)) &&
         tp_part_ok(sep + 1, n - (size_t)(sep + 1 - s));
}

static int set_tracepoint(tg_perf_event_t *ev,
                          const Perfetto__Protos__PerfEvents__Tracepoint *tp,
                          tg_perf_cfg_t *out, const char *what) {
  ev->kind = TG_PERF_EVENT_TRACEPOINT;
  ev->attr_type = ATTR_TRACEPOINT;
  const char *name = tp && tp->name ? tp->name : "";
  if (!tracepoint_name_ok(name)) {
    out->refused = what;
    return 0;
  }
  if (!(ev->tp_name = strdup(name))) return -ENOMEM;
  if (tp->filter && tp->filter[0] && !(ev->tp_filter = strdup(tp->filter)))
    return -ENOMEM;
  return 0;
}

/* The perf_event_attr types a raw event may name (docs/perf.md): the
 * generic hardware, software, cache and CPU-PMU-raw counters. Not
 * PERF_TYPE_TRACEPOINT, which would open a tracepoint by id past the
 * tracefs lookup by name that decides which tracepoints this producer may
 * see; not breakpoints (5), nor the dynamic PMUs (6 and up: kprobes,
 * uprobes, msr, ...), whose numbers differ from host to host. */
static bool raw_type_ok(uint32_t type) {
  return type == ATTR_HARDWARE || type == ATTR_SOFTWARE ||
         type == ATTR_HW_CACHE || type == ATTR_RAW;
}

/* Returns false (|ev| half filled) when the type is not one of
 * raw_type_ok's. */
static bool set_raw(tg_perf_event_t *ev,
                    const Perfetto__Protos__PerfEvents__RawEvent *raw) {
  ev->kind = TG_PERF_EVENT_RAW;
  if (!raw) return true;
  if (!raw_type_ok(raw->type)) return false;
  ev->attr_type = raw->type;
  ev->attr_config = raw->config;
  ev->attr_config1 = raw->config1;
  ev->attr_config2 = raw->config2;
  ev->exclude_user = raw->has_exclude_user && raw->exclude_user;
  ev->exclude_kernel = raw->has_exclude_kernel && raw->exclude_kernel;
  ev->exclude_hv = raw->has_exclude_hv && raw->exclude_hv;
  ev->hardware = raw->type == ATTR_HARDWARE || raw->type == ATTR_HW_CACHE ||
                 raw->type == ATTR_RAW;
  return true;
}

static bool set_counter(tg_perf_event_t *ev, uint32_t counter) {
  ev->kind = TG_PERF_EVENT_COUNTER;
  ev->counter = counter;
  if (!counter_attr(counter, &ev->attr_type, &ev->attr_config)) return false;
  ev->hardware = ev->attr_type == ATTR_HARDWARE;
  return true;
}

static int parse_followers(const Perfetto__Protos__PerfEventConfig *p,
                           tg_perf_cfg_t *out) {
  if (p->n_followers > TG_PERF_MAX_FOLLOWERS) {
    out->refused = "followers: more than 16";
    return 0;
  }
  for (size_t i = 0; i < p->n_followers; i++) {
    const Perfetto__Protos__FollowerEvent *f = p->followers[i];
    tg_perf_event_t *ev = &out->followers[i];
    out->n_followers = i + 1;
    if (!f) {
      out->refused = "followers: an empty follower";
      return 0;
    }
    if (f->name && !(ev->name = strdup(f->name))) return -ENOMEM;
    int rv;
    switch (f->event_case) {
      case PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_COUNTER:
        if (!set_counter(ev, (uint32_t)f->counter)) {
          out->refused = "followers.counter: unknown counter";
          return 0;
        }
        break;
      case PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_TRACEPOINT:
        if ((rv = set_tracepoint(ev, f->tracepoint, out,
                                 "followers.tracepoint.name: not "
                                 "\"group:name\" or \"group/name\"")) < 0)
          return rv;
        if (out->refused) return 0;
        break;
      case PERFETTO__PROTOS__FOLLOWER_EVENT__EVENT_RAW_EVENT:
        if (!set_raw(ev, f->raw_event)) {
          out->refused = RAW_TYPE_REFUSED("followers");
          return 0;
        }
        break;
      default:
        /* As traced_perf: an event left unset is the CPU timer. */
        set_counter(ev, PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_CLOCK);
        break;
    }
  }
  return 0;
}

/* The timebase's event: a counter, a tracepoint or a raw event. Returns
 * 0 (|refused| set when refused) or a negative error. */
static int parse_timebase_event(
    const Perfetto__Protos__PerfEvents__Timebase *tb, tg_perf_cfg_t *out) {
  tg_perf_event_t *tbe = &out->timebase;
  switch (tb->event_case) {
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_COUNTER:
      if (!set_counter(tbe, (uint32_t)tb->counter))
        out->refused = "timebase.counter: unknown counter";
      return 0;
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_TRACEPOINT:
      return set_tracepoint(tbe, tb->tracepoint, out,
                            "timebase.tracepoint.name: not "
                            "\"group:name\" or \"group/name\"");
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__EVENT_RAW_EVENT:
      if (!set_raw(tbe, tb->raw_event))
        out->refused = RAW_TYPE_REFUSED("timebase");
      return 0;
    default:
      return 0;
  }
}

/* The timebase's interval: a frequency, a period or counter-only polling
 * (clamped to the polling bounds). */
static void parse_interval(const Perfetto__Protos__PerfEvents__Timebase *tb,
                           tg_perf_cfg_t *out) {
  switch (tb->interval_case) {
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY:
      out->frequency = tb->frequency;
      break;
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_PERIOD:
      out->frequency = 0;
      out->period = tb->period;
      break;
    case PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_POLL_PERIOD_MS:
      if (!tb->poll_period_ms) {
        out->refused = "timebase.poll_period_ms: 0 reads nothing";
        break;
      }
      out->poll_period_ms =
          tb->poll_period_ms < TG_PERF_MIN_POLL_PERIOD_MS
              ? TG_PERF_MIN_POLL_PERIOD_MS
          : tb->poll_period_ms > TG_PERF_MAX_POLL_PERIOD_MS
              ? TG_PERF_MAX_POLL_PERIOD_MS
              : tb->poll_period_ms;
      break;
    default:
      break;
  }
}

/* The timebase (or the legacy sampling_frequency without one) into
 * |out|. Returns 0 (|refused| set when refused) or a negative error. */
static int parse_timebase(const Perfetto__Protos__PerfEventConfig *p,
                          tg_perf_cfg_t *out) {
  const Perfetto__Protos__PerfEvents__Timebase *tb = p->timebase;
  tg_perf_event_t *tbe = &out->timebase;
  int rv;
  set_counter(tbe, out->counter);
  if (tb) {
    if ((rv = parse_timebase_event(tb, out)) < 0 || out->refused) return rv;
    parse_interval(tb, out);
    if (out->refused) return 0;
    if (tb->name && !(out->name = strdup(tb->name))) return -ENOMEM;
    if (tb->has_timestamp_clock) out->perf_clock = (uint32_t)tb->timestamp_clock;
  } else if (p->has_sampling_frequency && p->sampling_frequency) {
    out->frequency = p->sampling_frequency;
  }
  out->counter = tbe->counter;
  out->attr_type = tbe->attr_type;
  out->attr_config = tbe->attr_config;
  out->hardware = tbe->hardware;
  return 0;
}

/* --- the rules between PerfEventConfig's fields (common/flag_rules.h) ---- */

/* The fields the rules name; one is "given" when set and not 0, as
 * traced_perf reads them. */
enum {
  F_POLL_PERIOD,
  F_CALLSTACKS,
  F_ALL_CPUS,
  F_READ_PERIOD,
  F_INSTALLED_BY,
  F_SCOPE_ADDITIONAL_CMDLINES,
  F_ADDITIONAL_CMDLINES,
  N_PERF_FIELDS
};

#define PERF_FIELD(name) {name, TG_FLAG_BOOL, NULL, NULL, "", 0, 0}
static const tg_flag_t perf_fields[N_PERF_FIELDS] = {
    [F_POLL_PERIOD] = PERF_FIELD("timebase.poll_period_ms"),
    [F_CALLSTACKS] = PERF_FIELD("callstack_sampling"),
    [F_ALL_CPUS] = PERF_FIELD("all_cpus"),
    [F_READ_PERIOD] = PERF_FIELD("ring_buffer_read_period_ms"),
    [F_INSTALLED_BY] = PERF_FIELD("target_installed_by"),
    [F_SCOPE_ADDITIONAL_CMDLINES] =
        PERF_FIELD("callstack_sampling.scope.additional_cmdline_count"),
    [F_ADDITIONAL_CMDLINES] = PERF_FIELD("additional_cmdline_count"),
};

static const tg_flag_rule_t perf_rules[] = {
    /* traced_perf refuses these with polling: nothing samples. */
    TG_FLAG_EXCLUDES(("timebase.poll_period_ms"),
                     ("callstack_sampling", "all_cpus"),
                     "timebase.poll_period_ms: counter-only polling takes "
                     "no callstack_sampling (nor all_cpus)"),
    TG_FLAG_EXCLUDES(("timebase.poll_period_ms"),
                     ("ring_buffer_read_period_ms"),
                     "timebase.poll_period_ms: counter-only polling takes "
                     "no ring_buffer_read_period_ms"),
    TG_FLAG_REFUSED(("target_installed_by"),
                    "target_installed_by: Android only"),
    TG_FLAG_REFUSED(("callstack_sampling.scope.additional_cmdline_count"),
                    "scope.additional_cmdline_count: not supported by "
                    "tracegate-perf"),
    /* Beside callstack_sampling the top-level scope fields are not read
     * (its scope is): refused only without it. */
    TG_FLAG_REQUIRES(("additional_cmdline_count"), ("callstack_sampling"),
                     "additional_cmdline_count: not supported by "
                     "tracegate-perf"),
};

const tg_flag_t *tg_perf_cfg_fields(size_t *n) {
  *n = N_PERF_FIELDS;
  return perf_fields;
}

const tg_flag_rule_t *tg_perf_cfg_rules(size_t *n) {
  *n = sizeof(perf_rules) / sizeof(perf_rules[0]);
  return perf_rules;
}

/* Which of perf_fields |p| sets (|poll_ms|: the timebase's polling, as
 * parsed). */
static void perf_given(const Perfetto__Protos__PerfEventConfig *p,
                       uint32_t poll_ms, tg_flags_given_t *g) {
  const Perfetto__Protos__PerfEventConfig__CallstackSampling *cs =
      p->callstack_sampling;
  const bool set[N_PERF_FIELDS] = {
      [F_POLL_PERIOD] = poll_ms != 0,
      [F_CALLSTACKS] = cs != NULL,
      [F_ALL_CPUS] = p->has_all_cpus && p->all_cpus,
      [F_READ_PERIOD] =
          p->has_ring_buffer_read_period_ms && p->ring_buffer_read_period_ms,
      [F_INSTALLED_BY] = p->n_target_installed_by != 0,
      [F_SCOPE_ADDITIONAL_CMDLINES] = cs && cs->scope &&
                                      cs->scope->has_additional_cmdline_count &&
                                      cs->scope->additional_cmdline_count,
      [F_ADDITIONAL_CMDLINES] =
          p->has_additional_cmdline_count && p->additional_cmdline_count,
  };
  memset(g, 0, sizeof(*g));
  for (size_t i = 0; i < N_PERF_FIELDS; i++)
    if (set[i]) tg_flags_mark_given(g, i);
}

/* The rules over |p|: |refused| is the first broken rule's words. Returns
 * 0, or a negative error for a bug in the rules (test_perf_config lints
 * them). */
static int check_fields(const Perfetto__Protos__PerfEventConfig *p,
                        tg_perf_cfg_t *out) {
  tg_flags_given_t given;
  char err[256];
  size_t which = 0;
  perf_given(p, out->poll_period_ms, &given);
  int rv = tg_flag_rules_check(perf_fields, N_PERF_FIELDS, &given, perf_rules,
                               sizeof(perf_rules) / sizeof(perf_rules[0]),
                               NULL, err, sizeof(err), &which);
  if (rv == -EINVAL) {
    out->refused = perf_rules[which].why;
    return 0;
  }
  return rv;
}

/* Polling reads counters on a timer instead of sampling; without it a
 * period of 0 samples nothing. */
static void resolve_sampling(tg_perf_cfg_t *out) {
  if (out->poll_period_ms) {
    out->frequency = out->period = 0;
    out->read_period_ms = out->poll_period_ms;
  }
  if (!out->poll_period_ms && !out->frequency && !out->period)
    out->refused = "timebase: a period of 0 samples nothing";
}

/* The clock the samples are stamped with. The kernel stamps samples of
 * events outside its software PMU (tracepoints, PMU counters) only with
 * an NMI-safe clock: BOOTTIME and REALTIME are refused (EINVAL) for them,
 * and a group's followers take the leader's clock. Unset, such a group
 * gets MONOTONIC_RAW, traced_perf's default; set, the refusal is said
 * here. */
static void resolve_clock(tg_perf_cfg_t *out) {
  bool nmi_safe_only = out->timebase.attr_type != ATTR_SOFTWARE;
  for (size_t i = 0; i < out->n_followers; i++)
    if (out->followers[i].attr_type != ATTR_SOFTWARE) nmi_safe_only = true;
  if (out->poll_period_ms) nmi_safe_only = false; /* no stamps asked */
  if (nmi_safe_only &&
      (out->perf_clock ==
           PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_BOOTTIME ||
       out->perf_clock ==
           PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_REALTIME)) {
    out->refused = "timebase.timestamp_clock: the kernel stamps a "
                   "tracepoint, raw or hardware timebase or follower only "
                   "with PERF_CLOCK_MONOTONIC or PERF_CLOCK_MONOTONIC_RAW";
    return;
  }
  uint32_t clock = out->perf_clock;
  if (!clock && nmi_safe_only)
    clock = PERFETTO__PROTOS__PERF_EVENTS__PERF_CLOCK__PERF_CLOCK_MONOTONIC_RAW;
  switch (clock) {
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
      return;
  }
  if (out->poll_period_ms) {
    /* Readings are stamped here, not by the kernel: on the boot clock, as
     * traced_perf's. */
    out->clockid = CLOCK_BOOTTIME;
    out->builtin_clock = BUILTIN_BOOTTIME;
  }
}

/* callstack_sampling.user_frames: how user stacks are unwound. */
static void parse_unwind_mode(
    const Perfetto__Protos__PerfEventConfig__CallstackSampling *cs,
    tg_perf_cfg_t *out) {
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
        return;
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
}

/* Callstacks (callstack_sampling, or the legacy all_cpus) and the
 * processes in scope (callstack_sampling's scope, else the top-level
 * fields). Returns 0 (|refused| set when refused) or a negative error. */
static int parse_callstacks(const Perfetto__Protos__PerfEventConfig *p,
                            tg_perf_cfg_t *out) {
  const Perfetto__Protos__PerfEventConfig__CallstackSampling *cs =
      p->callstack_sampling;
  if (!cs) {
    if (p->has_all_cpus && p->all_cpus) {
      out->callstacks = true;
      out->kernel_frames = p->has_kernel_frames && p->kernel_frames;
      out->user_frames = TG_PERF_USER_FRAME_POINTER;
      out->user_frames_defaulted = true;
    }
    return parse_scope(out, p->target_pid, p->n_target_pid, p->target_cmdline,
                       p->n_target_cmdline, p->exclude_pid, p->n_exclude_pid,
                       p->exclude_cmdline, p->n_exclude_cmdline);
  }
  out->callstacks = true;
  out->kernel_frames = cs->has_kernel_frames && cs->kernel_frames;
  parse_unwind_mode(cs, out);
  const Perfetto__Protos__PerfEventConfig__Scope *sc = cs->scope;
  if (out->refused || !sc) return 0;
  if (sc->has_process_shard_count) out->shard_count = sc->process_shard_count;
  return parse_scope(out, sc->target_pid, sc->n_target_pid, sc->target_cmdline,
                     sc->n_target_cmdline, sc->exclude_pid, sc->n_exclude_pid,
                     sc->exclude_cmdline, sc->n_exclude_cmdline);
}

/* The CPUs, the ring's size and read period, and the memory bounds.
 * Returns 0 (|refused| set when refused) or -ENOMEM. */
static int parse_limits(const Perfetto__Protos__PerfEventConfig *p,
                        tg_perf_cfg_t *out) {
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
  if (!out->poll_period_ms && p->has_ring_buffer_read_period_ms &&
      p->ring_buffer_read_period_ms) {
    uint32_t v = p->ring_buffer_read_period_ms;
    out->read_period_ms = v < TG_PERF_MIN_READ_PERIOD_MS
                              ? TG_PERF_MIN_READ_PERIOD_MS
                          : v > TG_PERF_MAX_READ_PERIOD_MS
                              ? TG_PERF_MAX_READ_PERIOD_MS
                              : v;
  }
  /* Unset or 0: the defaults tg_perf_cfg_parse set stay. */
  if (p->has_max_enqueued_footprint_kb && p->max_enqueued_footprint_kb) {
    out->max_enqueued_footprint_kb = p->max_enqueued_footprint_kb;
    out->footprint_given = true;
  }
  if (p->has_max_daemon_memory_kb && p->max_daemon_memory_kb)
    out->max_daemon_memory_kb = p->max_daemon_memory_kb;
  if (p->has_unwind_state_clear_period_ms)
    out->unwind_state_clear_period_ms = p->unwind_state_clear_period_ms;
  ignore(out, p->has_remote_descriptor_timeout_ms,
         "remote_descriptor_timeout_ms");
  return 0;
}

/* PerfEventConfig into |out|, step by step; the first refusal ends it.
 * Returns 0 (|refused| set when refused) or a negative error. */
static int parse_perf(const Perfetto__Protos__PerfEventConfig *p,
                      tg_perf_cfg_t *out) {
  int rv;
  if ((rv = parse_timebase(p, out)) < 0 || out->refused) return rv;
  if ((rv = parse_followers(p, out)) < 0 || out->refused) return rv;
  if ((rv = check_fields(p, out)) < 0 || out->refused) return rv;
  resolve_sampling(out);
  if (out->refused) return 0;
  resolve_clock(out);
  if (out->refused) return 0;
  if ((rv = parse_callstacks(p, out)) < 0 || out->refused) return rv;
  return parse_limits(p, out);
}

int tg_perf_cfg_parse(const uint8_t *cfg, size_t len, tg_perf_cfg_t *out) {
  memset(out, 0, sizeof(*out));
  out->counter = PERFETTO__PROTOS__PERF_EVENTS__COUNTER__SW_CPU_CLOCK;
  out->frequency = TG_PERF_DEFAULT_FREQUENCY;
  out->ring_pages = TG_PERF_DEFAULT_RING_PAGES;
  out->read_period_ms = TG_PERF_DEFAULT_READ_PERIOD_MS;
  out->max_enqueued_footprint_kb = TG_PERF_DEFAULT_FOOTPRINT_KB;
  out->max_daemon_memory_kb = TG_PERF_DEFAULT_DAEMON_MEMORY_KB;
  set_counter(&out->timebase, out->counter);
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

static void event_free(tg_perf_event_t *ev) {
  free(ev->tp_name);
  free(ev->tp_filter);
  free(ev->name);
}

void tg_perf_cfg_free(tg_perf_cfg_t *c) {
  event_free(&c->timebase);
  for (size_t i = 0; i < c->n_followers; i++) event_free(&c->followers[i]);
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
         c->n_exclude_cmdline || c->shard_count;
}

bool tg_perf_cfg_has_tracepoints(const tg_perf_cfg_t *c) {
  if (c->timebase.kind == TG_PERF_EVENT_TRACEPOINT) return true;
  for (size_t i = 0; i < c->n_followers; i++)
    if (c->followers[i].kind == TG_PERF_EVENT_TRACEPOINT) return true;
  return false;
}

bool tg_perf_cfg_in_scope(const tg_perf_cfg_t *c, int32_t pid,
                          const char *cmdline) {
  if (has_pid(c->exclude_pid, c->n_exclude_pid, pid) ||
      matches(c->exclude_cmdline, c->n_exclude_cmdline, cmdline))
    return false;
  if (has_pid(c->target_pid, c->n_target_pid, pid) ||
      matches(c->target_cmdline, c->n_target_cmdline, cmdline))
    return true;
  if (c->shard_count)
    return (uint32_t)pid % c->shard_count == c->chosen_shard;
  return !c->n_target_pid && !c->n_target_cmdline;
}
