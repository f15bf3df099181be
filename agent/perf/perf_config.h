/* DataSourceConfig.perf_event_config (Perfetto's PerfEventConfig) ->
 * what tracegate-perf opens and writes, with traced_perf's defaults: a
 * cpu-clock timebase at 10 Hz per CPU, every CPU, rings of 256 pages read
 * every 100 ms. Callstacks are sampled when callstack_sampling is set (or
 * the legacy all_cpus is), user frames by frame pointer, kernel frames
 * when asked.
 *
 * Fields that would change what is recorded and that this producer cannot
 * honour refuse the whole config (|refused| names the field): a tracepoint
 * or raw timebase, poll_period_ms, followers, UNWIND_DWARF in a build
 * without libdw, process sharding, additional_cmdline_count,
 * target_installed_by. remote_descriptor_timeout_ms (Android's descriptor
 * hand-over) has no meaning here and is listed in |ignored|. The unwinder
 * queue's tuning (max_enqueued_footprint_kb, max_daemon_memory_kb,
 * unwind_state_clear_period_ms) is kept as given; 0 means unset.
 */
#ifndef TRACEGATE_PERF_PERF_CONFIG_H
#define TRACEGATE_PERF_PERF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_PERF_DEFAULT_FREQUENCY 10
#define TG_PERF_DEFAULT_RING_PAGES 256
#define TG_PERF_MAX_RING_PAGES 8192
#define TG_PERF_DEFAULT_READ_PERIOD_MS 100
#define TG_PERF_MIN_READ_PERIOD_MS 1
#define TG_PERF_MAX_READ_PERIOD_MS 10000
#define TG_PERF_MAX_IGNORED 8
#define TG_PERF_MAX_TARGETS 64

/* User frames: none, by the kernel's frame-pointer walk, or by DWARF
 * unwinding of a copy of the user stack (builds with libdw only). */
typedef enum tg_perf_user_frames {
  TG_PERF_USER_NONE = 0,
  TG_PERF_USER_FRAME_POINTER = 1,
  TG_PERF_USER_DWARF = 2,
} tg_perf_user_frames_t;

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
  /* The unwinder's tuning (UNWIND_DWARF; 0: unset). */
  uint64_t max_enqueued_footprint_kb;
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
void tg_perf_cfg_free(tg_perf_cfg_t *c);

/* Whether a process is in the config's scope: |cmdline| is its argv[0]
 * (NULL when unknown). A pattern with a '/' is matched (fnmatch) against
 * the whole argv[0], one without against its last component. */
bool tg_perf_cfg_in_scope(const tg_perf_cfg_t *c, int32_t pid,
                          const char *cmdline);
/* Whether the scope names any process (a cmdline to read per pid). */
bool tg_perf_cfg_has_scope(const tg_perf_cfg_t *c);

#endif /* TRACEGATE_PERF_PERF_CONFIG_H */
