/* DataSourceConfig.perf_event_config (Perfetto's PerfEventConfig) ->
 * what tracegate-perf opens and writes, with traced_perf's defaults: a
 * cpu-clock timebase at 10 Hz per CPU, every CPU, rings of 256 pages read
 * every 100 ms. Callstacks are sampled when callstack_sampling is set (or
 * the legacy all_cpus is), user frames by frame pointer, kernel frames
 * when asked.
 *
 * The timebase and each follower is a counter, a tracepoint (resolved to
 * its id when the session opens its events, see perf_events.h) or a raw
 * perf_event_attr type/config. Followers are read with the leader as one
 * group (PERF_FORMAT_GROUP). With timebase.poll_period_ms the counters are
 * not sampled but read every period (traced_perf's polling mode, `perf
 * stat -I`), which excludes callstack_sampling, ring_buffer_read_period_ms
 * and all_cpus, as in traced_perf. scope.process_shard_count N > 1 keeps
 * the processes whose pid % N is the shard chosen for the session.
 *
 * Fields that would change what is recorded and that this producer cannot
 * honour refuse the whole config (|refused| names the field): UNWIND_DWARF
 * in a build without libdw, additional_cmdline_count, target_installed_by,
 * a malformed tracepoint name, more than TG_PERF_MAX_FOLLOWERS followers.
 * remote_descriptor_timeout_ms (Android's descriptor hand-over) has no
 * meaning here and is listed in |ignored|. The unwinder queue's tuning
 * (max_enqueued_footprint_kb, unwind_state_clear_period_ms) is kept as
 * given; 0 means unset. The guardrails are on whether the config asks or
 * not: max_enqueued_footprint_kb and max_daemon_memory_kb unset (or 0)
 * take TG_PERF_DEFAULT_FOOTPRINT_KB and TG_PERF_DEFAULT_DAEMON_MEMORY_KB,
 * since the producer reads what every local user controls and a config
 * without them must not leave its memory unbounded.
 */
#ifndef TRACEGATE_PERF_PERF_CONFIG_H
#define TRACEGATE_PERF_PERF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/flag_rules.h"

#define TG_PERF_DEFAULT_FREQUENCY 10
#define TG_PERF_DEFAULT_RING_PAGES 256
#define TG_PERF_MAX_RING_PAGES 8192
#define TG_PERF_DEFAULT_READ_PERIOD_MS 100
#define TG_PERF_MIN_READ_PERIOD_MS 1
#define TG_PERF_MAX_READ_PERIOD_MS 10000
#define TG_PERF_MAX_IGNORED 8
#define TG_PERF_MAX_TARGETS 64
/* The unwinder queue when the config sets none: perf_queue.h's 8 MiB. */
#define TG_PERF_DEFAULT_FOOTPRINT_KB 8192
/* The memory guardrail when the config sets none: 1 GiB of RssAnon and
 * swap, the figure Perfetto's own CPU profiling example sets. What one
 * session may keep stays well below it: 256 MiB of symbol tables
 * (perf_procs.h), the queue, the unwinder's 32 processes' caches. The
 * unit's MemoryMax= sits above it with headroom, so that the guardrail
 * stops a session before the kernel kills the producer. */
#define TG_PERF_DEFAULT_DAEMON_MEMORY_KB (1024u * 1024u)
/* Followers of one timebase (the kernel reads a group in one call). */
#define TG_PERF_MAX_FOLLOWERS 16
#define TG_PERF_MIN_POLL_PERIOD_MS 1
#define TG_PERF_MAX_POLL_PERIOD_MS 60000

/* User frames: none, by the kernel's frame-pointer walk, or by DWARF
 * unwinding of a copy of the user stack (builds with libdw only). */
typedef enum tg_perf_user_frames {
  TG_PERF_USER_NONE = 0,
  TG_PERF_USER_FRAME_POINTER = 1,
  TG_PERF_USER_DWARF = 2,
} tg_perf_user_frames_t;

/* What an event (the timebase or a follower) is. */
typedef enum tg_perf_event_kind {
  TG_PERF_EVENT_COUNTER = 0,    /* PerfEvents.Counter */
  TG_PERF_EVENT_TRACEPOINT = 1, /* events/<group>/<name>/id in tracefs */
  TG_PERF_EVENT_RAW = 2,        /* PerfEvents.RawEvent */
} tg_perf_event_kind_t;

/* One event as perf_event_open(2) takes it. A tracepoint's |attr_config|
 * is its id, 0 until resolved (tg_perf_event_resolve, perf_events.h). */
typedef struct tg_perf_event {
  tg_perf_event_kind_t kind;
  uint32_t counter; /* PerfEvents.Counter (COUNTER), else 0 */
  uint32_t attr_type;
  uint64_t attr_config, attr_config1, attr_config2;
  bool exclude_user, exclude_kernel, exclude_hv; /* RawEvent's */
  bool hardware; /* a PMU counter: this machine may not have it */
  char *tp_name;   /* TRACEPOINT: "group:name" or "group/name" as given */
  char *tp_filter; /* TRACEPOINT: PERF_EVENT_IOC_SET_FILTER text; NULL */
  char *name;      /* FollowerEvent.name; NULL when unset */
} tg_perf_event_t;

/* Whether this build unwinds DWARF (TG_PERF_HAVE_DWARF: libdw, x86-64). */
bool tg_perf_cfg_dwarf_built(void);

typedef struct tg_perf_cfg {
  uint64_t tracing_session_id;
  /* The timebase: PerfEvents.Counter, as perf_event_attr type/config. */
  uint32_t counter;
  uint32_t attr_type;
  uint64_t attr_config;
  bool hardware; /* a PMU counter: this machine may not have it */
  uint64_t frequency; /* Hz per CPU; 0: every |period| events */
  uint64_t period;
  uint32_t perf_clock;    /* PerfEvents.PerfClock as configured (0: unset) */
  int clockid;            /* the clock the kernel stamps samples with */
  uint32_t builtin_clock; /* the trace's BuiltinClock of that clock */
  char *name;             /* Timebase.name, NULL when unset */
  /* The timebase as an event: |counter|, |attr_type|, |attr_config| and
   * |hardware| above are its fields too, kept for the counter case. */
  tg_perf_event_t timebase;
  tg_perf_event_t followers[TG_PERF_MAX_FOLLOWERS];
  size_t n_followers;
  /* Counter-only polling: read every |poll_period_ms| (0: sampling). */
  uint32_t poll_period_ms;
  /* scope.process_shard_count (0 or 1: no sharding), and the shard kept:
   * chosen by the caller once per tracing session (random, as traced_perf
   * does), < shard_count. */
  uint32_t shard_count;
  uint32_t chosen_shard;
  /* Callstacks. */
  bool callstacks;
  bool kernel_frames;
  tg_perf_user_frames_t user_frames;
  bool user_frames_defaulted; /* unset in the config: frame pointer */
  /* Scope (callstack_sampling.scope or the legacy top-level fields). */
  int32_t target_pid[TG_PERF_MAX_TARGETS];
  size_t n_target_pid;
  char *target_cmdline[TG_PERF_MAX_TARGETS];
  size_t n_target_cmdline;
  int32_t exclude_pid[TG_PERF_MAX_TARGETS];
  size_t n_exclude_pid;
  char *exclude_cmdline[TG_PERF_MAX_TARGETS];
  size_t n_exclude_cmdline;
  /* CPUs: target_cpu, or every online CPU when none. */
  uint32_t *cpus;
  size_t n_cpus;
  uint32_t read_period_ms;
  uint32_t ring_pages;
  /* The unwinder's tuning (UNWIND_DWARF; 0: unset) and the memory
   * guardrail; the two bounds are never 0 (their defaults above), and
   * |footprint_given| says whether the config set the first. */
  uint64_t max_enqueued_footprint_kb;
  bool footprint_given;
  uint32_t max_daemon_memory_kb;
  uint32_t unwind_state_clear_period_ms;
  /* Why the config is refused (a field name and the reason); NULL: not. */
  const char *refused;
  const char *ignored[TG_PERF_MAX_IGNORED];
  size_t n_ignored;
} tg_perf_cfg_t;

/* Parses the serialized DataSourceConfig |cfg|. Returns 0 (check
 * |refused|), TG_EBAD_CONFIG when it does not decode, or -ENOMEM. */
int tg_perf_cfg_parse(const uint8_t *cfg, size_t len, tg_perf_cfg_t *out);

/* The PerfEventConfig fields that rules relate and the rules between them
 * (common/flag_rules.h), for their test: both static, |*n| entries. */
const tg_flag_t *tg_perf_cfg_fields(size_t *n);
const tg_flag_rule_t *tg_perf_cfg_rules(size_t *n);
void tg_perf_cfg_free(tg_perf_cfg_t *c);

/* Whether a process is in the config's scope: |cmdline| is its argv[0]
 * (NULL when unknown). A pattern with a '/' is matched (fnmatch) against
 * the whole argv[0], one without against its last component. Exclusions
 * first, then the target lists; a process neither names is in when there
 * are no target lists and no sharding, else when sharding is on and
 * pid % shard_count is |chosen_shard| (traced_perf's order). */
bool tg_perf_cfg_in_scope(const tg_perf_cfg_t *c, int32_t pid,
                          const char *cmdline);
/* Whether the scope names any process (a cmdline to read per pid) or
 * shards them. */
bool tg_perf_cfg_has_scope(const tg_perf_cfg_t *c);
/* Whether the timebase or a follower is a tracepoint. */
bool tg_perf_cfg_has_tracepoints(const tg_perf_cfg_t *c);

#endif /* TRACEGATE_PERF_PERF_CONFIG_H */
