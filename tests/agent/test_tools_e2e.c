/* tracegate-probes and tracegate-emit end to end: a real tracegated in a
 * child, the tool in another child, and a raw consumer recording what the
 * tool writes into the shared memory buffer. The harness is probes_e2e.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "probes_e2e.h"
#include "test_notice.h"
#include "test_proc.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

#ifndef PROBES_PATH
#error "PROBES_PATH must name the tracegate-probes binary"
#endif
#ifndef EMIT_PATH
#error "EMIT_PATH must name the tracegate-emit binary"
#endif

/* --- children ------------------------------------------------------------ */

/* Runs |path| with |args| (NULL-terminated), stderr into |err_path|. */
static pid_t spawn_tool(const char *path, const char *const *args,
                        const char *err_path) {
  const char *argv[32] = {path};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    assert_true(n < 31);
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;
  int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(err >= 0);
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = path;
  s.argv = argv;
  s.stderr_fd = err;
  pid_t pid = tg_test_spawn(&s);
  close(err);
  assert_true(pid > 0);
  return pid;
}

/* --- recording ----------------------------------------------------------- */

/* TracePacket.data is a oneof: a member is valid only for its case. */
static const Perfetto__Protos__SysStats *sys_stats_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYS_STATS
             ? p->sys_stats
             : NULL;
}
static const Perfetto__Protos__ProcessTree *tree_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE
             ? p->process_tree
             : NULL;
}
static const Perfetto__Protos__ProcessStats *stats_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_STATS
             ? p->process_stats
             : NULL;
}
static const Perfetto__Protos__TestEvent *test_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING
             ? p->for_testing
             : NULL;
}
static const Perfetto__Protos__TrackEvent *track_event_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT
             ? p->track_event
             : NULL;
}

/* --- tracegate-probes ---------------------------------------------------- */

typedef struct session {
  raw_consumer_t c;
  Perfetto__Protos__TraceConfig cfg;
  Perfetto__Protos__TraceConfig__BufferConfig buf, *bufp;
  Perfetto__Protos__TraceConfig__DataSource ds[2], *dsp[2];
  Perfetto__Protos__DataSourceConfig dsc[2];
  Perfetto__Protos__SysStatsConfig sys;
  Perfetto__Protos__ProcessStatsConfig ps;
  e2e_packets_t got;
} session_t;

/* The config of a session with sys_stats (|stat| or meminfo only) and, if
 * |procs|, process_stats; tests may add to it before session_enable. */
static void session_config(session_t *s, bool stat, bool procs) {
  memset(s, 0, sizeof(*s));
  perfetto__protos__trace_config__init(&s->cfg);
  perfetto__protos__trace_config__buffer_config__init(&s->buf);
  s->buf.has_size_kb = true;
  s->buf.size_kb = 16 * 1024;
  s->buf.has_fill_policy = true;
  s->buf.fill_policy = PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD;
  s->bufp = &s->buf;
  s->cfg.n_buffers = 1;
  s->cfg.buffers = &s->bufp;

  perfetto__protos__sys_stats_config__init(&s->sys);
  if (stat) {
    s->sys.has_stat_period_ms = true;
    s->sys.stat_period_ms = 100;
  } else {
    s->sys.has_meminfo_period_ms = true;
    s->sys.meminfo_period_ms = 100;
  }
  perfetto__protos__process_stats_config__init(&s->ps);
  s->ps.has_proc_stats_poll_ms = true;
  s->ps.proc_stats_poll_ms = 200;
  s->ps.has_scan_all_processes_on_start = true;
  s->ps.scan_all_processes_on_start = true;
  s->ps.has_record_process_runtime = true;
  s->ps.record_process_runtime = true;
  for (int i = 0; i < 2; i++) {
    perfetto__protos__trace_config__data_source__init(&s->ds[i]);
    perfetto__protos__data_source_config__init(&s->dsc[i]);
    s->ds[i].config = &s->dsc[i];
    s->dsp[i] = &s->ds[i];
  }
  s->dsc[0].name = "linux.sys_stats";
  s->dsc[0].sys_stats_config = &s->sys;
  s->dsc[1].name = "linux.process_stats";
  s->dsc[1].process_stats_config = &s->ps;
  s->cfg.n_data_sources = procs ? 2 : 1;
  s->cfg.data_sources = s->dsp;
}

static void session_enable(session_t *s, const test_service_t *ts) {
  assert_int_equal(raw_consumer_connect(&s->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&s->c, &s->cfg, -1), 0);
}

static void session_begin(session_t *s, const test_service_t *ts, bool stat,
                          bool procs) {
  session_config(s, stat, procs);
  session_enable(s, ts);
}

static size_t count_sys_stats(const e2e_packets_t *p, size_t *with_cpu,
                              size_t *with_mem) {
  size_t n = 0;
  *with_cpu = *with_mem = 0;
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__SysStats *s = sys_stats_of(p->pk[i]);
    if (!s) continue;
    n++;
    if (s->n_cpu_stat) (*with_cpu)++;
    if (s->n_meminfo) (*with_mem)++;
  }
  return n;
}

static const Perfetto__Protos__ProcessTree__Process *find_tree(
    const e2e_packets_t *p, int32_t pid) {
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__ProcessTree *t = tree_of(p->pk[i]);
    for (size_t k = 0; t && k < t->n_processes; k++)
      if (t->processes[k]->pid == pid) return t->processes[k];
  }
  return NULL;
}

static size_t count_stats_of(const e2e_packets_t *p, int32_t pid,
                             const Perfetto__Protos__ProcessStats__Process **last) {
  size_t n = 0;
  for (size_t i = 0; i < p->n; i++) {
    const Perfetto__Protos__ProcessStats *s = stats_of(p->pk[i]);
    for (size_t k = 0; s && k < s->n_processes; k++) {
      if (s->processes[k]->pid != pid) continue;
      n++;
      if (last) *last = s->processes[k];
    }
  }
  return n;
}

/* Starts tracegate-probes on |ts| (stderr into |err_path|, |cap| bytes:
 * ts->dir/probes.err) and waits until the service lists its data sources.
 * Returns its pid. */
static pid_t start_probes(const test_service_t *ts, char *err_path,
                          size_t cap) {
  snprintf(err_path, cap, "%s/probes.err", ts->dir);
  const char *args[] = {"--socket", ts->producer_sock, "--log-level", "warn",
                        NULL};
  pid_t probes = spawn_tool(PROBES_PATH, args, err_path);
  assert_true(probes > 0);
  raw_consumer_t q;
  assert_int_equal(raw_consumer_connect(&q, ts), 0);
  /* linux.sys_stats, .process_stats, .system_info, .ftrace and
   * perfetto.metatrace. */
  assert_true(e2e_wait_data_sources(&q, 5));
  raw_consumer_close(&q);
  return probes;
}

static void probes_record_two_sessions_with_their_own_configs(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  uint64_t t_before = e2e_boottime_ns();
  pid_t probes = start_probes(ts, err_path, sizeof(err_path));

  session_t a, b;
  session_begin(&a, ts, true, false); /* cpu times only */
  session_begin(&b, ts, false, true); /* meminfo + processes */

  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  size_t a_sys = 0, a_cpu = 0, a_mem = 0, b_sys = 0, b_cpu = 0, b_mem = 0;
  size_t stats_of_probes = 0;
  while (tg_test_now_ms() < end) {
    e2e_sleep_ms(100);
    e2e_read_more(&a.c, &a.got);
    e2e_read_more(&b.c, &b.got);
    a_sys = count_sys_stats(&a.got, &a_cpu, &a_mem);
    b_sys = count_sys_stats(&b.got, &b_cpu, &b_mem);
    stats_of_probes = count_stats_of(&b.got, probes, NULL);
    if (a_sys >= 4 && b_sys >= 4 && stats_of_probes >= 3 &&
        find_tree(&b.got, probes))
      break;
  }
  assert_int_equal(raw_consumer_disable(&a.c, E2E_WAIT_MS), 0);
  assert_int_equal(raw_consumer_disable(&b.c, E2E_WAIT_MS), 0);
  e2e_read_more(&a.c, &a.got);
  e2e_read_more(&b.c, &b.got);
  uint64_t t_after = e2e_boottime_ns();
  a_sys = count_sys_stats(&a.got, &a_cpu, &a_mem);
  b_sys = count_sys_stats(&b.got, &b_cpu, &b_mem);

  /* Each session got what its own config asked for. */
  assert_true(a_sys >= 4);
  assert_int_equal(a_cpu, a_sys);
  assert_int_equal(a_mem, 0);
  assert_true(b_sys >= 4);
  assert_int_equal(b_mem, b_sys);
  assert_int_equal(b_cpu, 0);
  assert_null(find_tree(&a.got, probes));

  /* Timestamps are CLOCK_BOOTTIME and ordered. */
  uint64_t prev = 0;
  for (size_t i = 0; i < a.got.n; i++) {
    const Perfetto__Protos__TracePacket *p = a.got.pk[i];
    if (!sys_stats_of(p)) continue;
    assert_true(p->has_timestamp);
    assert_true(p->timestamp >= t_before && p->timestamp <= t_after);
    assert_true(p->timestamp > prev);
    assert_true(p->sys_stats->collection_end_timestamp >= p->timestamp);
    prev = p->timestamp;
    const Perfetto__Protos__SysStats__CpuTimes *c0 = p->sys_stats->cpu_stat[0];
    assert_true(c0->has_user_ns && c0->has_idle_ns);
  }
  for (size_t i = 0; i < b.got.n; i++) {
    const Perfetto__Protos__SysStats *s = sys_stats_of(b.got.pk[i]);
    if (!s) continue;
    bool total = false;
    for (size_t k = 0; k < s->n_meminfo; k++)
      if (s->meminfo[k]->key ==
              PERFETTO__PROTOS__MEMINFO_COUNTERS__MEMINFO_MEM_TOTAL &&
          s->meminfo[k]->value > 0)
        total = true;
    assert_true(total);
  }

  /* The probes see themselves and this test. */
  const Perfetto__Protos__ProcessTree__Process *me = find_tree(&b.got, probes);
  assert_non_null(me);
  assert_int_equal(me->ppid, getpid());
  assert_true(me->n_cmdline >= 3);
  assert_non_null(strstr(me->cmdline[0], "tracegate-probes"));
  assert_string_equal(me->cmdline[1], "--socket");
  assert_non_null(find_tree(&b.got, getpid()));
  const Perfetto__Protos__ProcessStats__Process *last = NULL;
  assert_true(count_stats_of(&b.got, probes, &last) >= 3);
  assert_true(last->has_vm_rss_kb && last->vm_rss_kb > 0);
  assert_true(last->has_runtime_user_mode && last->has_runtime_kernel_mode);
  /* Each process's tree entry comes once per session. */
  size_t entries = 0;
  for (size_t i = 0; i < b.got.n; i++) {
    const Perfetto__Protos__ProcessTree *t = tree_of(b.got.pk[i]);
    for (size_t k = 0; t && k < t->n_processes; k++)
      if (t->processes[k]->pid == probes) entries++;
  }
  assert_int_equal(entries, 1);

  e2e_packets_free(&a.got);
  e2e_packets_free(&b.got);
  raw_consumer_close(&a.c);
  raw_consumer_close(&b.c);

  e2e_stop_probes(probes, err_path);
}

/* Every sys_stats group this kernel has, and the process tree's threads,
 * start times and smaps_rollup sizes: what Perfetto's config asks for
 * arrives, and a field the probes do not act on is named in a warning. */
static bool has_vmstat_free_pages(const Perfetto__Protos__SysStats *s) {
  for (size_t k = 0; k < s->n_vmstat; k++)
    if (s->vmstat[k]->key ==
        PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES)
      return s->n_vmstat == 1; /* the config listed only this counter */
  return false;
}

static void probes_record_every_group_of_the_config(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  uint64_t t_before = e2e_boottime_ns();
  pid_t probes = start_probes(ts, err_path, sizeof(err_path));

  session_t b;
  session_config(&b, true, true);
  Perfetto__Protos__VmstatCounters vm[] = {
      PERFETTO__PROTOS__VMSTAT_COUNTERS__VMSTAT_NR_FREE_PAGES};
  uint32_t *periods[] = {&b.sys.vmstat_period_ms, &b.sys.cpufreq_period_ms,
                         &b.sys.buddyinfo_period_ms, &b.sys.diskstat_period_ms,
                         &b.sys.psi_period_ms, &b.sys.thermal_period_ms,
                         &b.sys.cpuidle_period_ms};
  protobuf_c_boolean *has[] = {
      &b.sys.has_vmstat_period_ms, &b.sys.has_cpufreq_period_ms,
      &b.sys.has_buddyinfo_period_ms, &b.sys.has_diskstat_period_ms,
      &b.sys.has_psi_period_ms, &b.sys.has_thermal_period_ms,
      &b.sys.has_cpuidle_period_ms};
  for (size_t i = 0; i < sizeof(periods) / sizeof(periods[0]); i++) {
    *has[i] = true;
    *periods[i] = 100;
  }
  b.sys.n_vmstat_counters = 1;
  b.sys.vmstat_counters = vm;
  b.ps.has_record_thread_names = true;
  b.ps.record_thread_names = true;
  b.ps.has_record_process_age = true;
  b.ps.record_process_age = true;
  b.ps.has_scan_smaps_rollup = true;
  b.ps.scan_smaps_rollup = true;
  b.ps.has_resolve_process_fds = true;
  b.ps.resolve_process_fds = true;
  session_enable(&b, ts);

  bool psi_kernel = access("/proc/pressure/cpu", R_OK) == 0;
  bool idle_kernel =
      access("/sys/devices/system/cpu/cpu0/cpuidle/state0/time", R_OK) == 0;
  bool buddy = false, disks = false, psi = false, vmstat = false;
  bool idle = false, thermal = false;
  const Perfetto__Protos__ProcessTree *probes_threads = NULL;
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end) {
    e2e_sleep_ms(100);
    e2e_read_more(&b.c, &b.got);
    for (size_t i = 0; i < b.got.n; i++) {
      const Perfetto__Protos__SysStats *s = sys_stats_of(b.got.pk[i]);
      if (s) {
        vmstat |= has_vmstat_free_pages(s);
        buddy |= s->n_buddy_info > 0;
        disks |= s->n_disk_stat > 0;
        psi |= s->n_psi > 0;
        idle |= s->n_cpuidle_state > 0;
        thermal |= s->n_thermal_zone > 0;
      }
      const Perfetto__Protos__ProcessTree *t = tree_of(b.got.pk[i]);
      for (size_t k = 0; t && k < t->n_threads; k++)
        if (t->threads[k]->tgid == probes) probes_threads = t;
    }
    if (vmstat && buddy && disks && (psi || !psi_kernel) &&
        (idle || !idle_kernel) && probes_threads &&
        count_stats_of(&b.got, probes, NULL) >= 2)
      break;
  }
  assert_int_equal(raw_consumer_disable(&b.c, E2E_WAIT_MS), 0);
  e2e_read_more(&b.c, &b.got);
  uint64_t t_after = e2e_boottime_ns();
  assert_true(vmstat);
  assert_true(buddy);
  assert_true(disks);
  assert_true(psi == psi_kernel);
  assert_true(idle || !idle_kernel);

  /* The probes' own threads (agent, sampler), named, under their pid. */
  assert_non_null(probes_threads);
  size_t named = 0;
  for (size_t k = 0; k < probes_threads->n_threads; k++) {
    const Perfetto__Protos__ProcessTree__Thread *th = probes_threads->threads[k];
    if (th->tgid != probes) continue;
    assert_true(th->tid != probes);
    assert_non_null(th->name);
    named++;
  }
  assert_true(named >= 1);
  /* Its start time lies between the spawn and now (ticks: 10 ms grain). */
  const Perfetto__Protos__ProcessTree__Process *me = find_tree(&b.got, probes);
  assert_non_null(me);
  assert_true(me->has_process_start_from_boot);
  assert_true(me->process_start_from_boot + 20000000 >= t_before);
  assert_true(me->process_start_from_boot <= t_after);
  const Perfetto__Protos__ProcessStats__Process *last = NULL;
  assert_true(count_stats_of(&b.got, probes, &last) >= 2);
  assert_true(last->has_smr_rss_kb && last->smr_rss_kb > 0);
  assert_true(last->has_smr_pss_kb && last->smr_pss_kb > 0);

  e2e_packets_free(&b.got);
  raw_consumer_close(&b.c);
  e2e_stop_probes(probes, err_path);
  char err[8192];
  e2e_read_text(err_path, err, sizeof(err));
  /* Nothing the config asked for is ignored without a word: all of
   * sys_stats is acted on, and a group this machine lacks is said. */
  assert_false(tg_test_notice_line(err, TG_N_PROBES_UNACTED_FIELDS,
                                   " linux.sys_stats: ", NULL, 0));
  if (!thermal)
    assert_notice_with(err, TG_N_PROBES_SOURCE_MISSING,
                       "linux.sys_stats: thermal (/sys/class/thermal)");
  char line[512];
  assert_true(tg_test_notice_line(err, TG_N_PROBES_UNACTED_FIELDS,
                                  " linux.process_stats: 1 ", line,
                                  sizeof(line)));
  assert_non_null(strstr(line, ": resolve_process_fds"));
}


/* linux.system_info: one cpu_info packet, a CPU per "processor" line of
 * /proc/cpuinfo, each named as that file names it. */
static void probes_describe_the_cpus(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path));

  /* What the test itself reads of /proc/cpuinfo. */
  char text[65536];
  e2e_read_text("/proc/cpuinfo", text, sizeof(text));
  size_t want = 0;
  for (const char *p = text; (p = strstr(p, "processor")); p++)
    if (p == text || p[-1] == '\n') want++;
  char model[128] = "";
  const char *m = strstr(text, "model name");
  if (m && (m = strchr(m, ':'))) {
    m++;
    while (*m == ' ' || *m == '\t') m++;
    size_t n = strcspn(m, "\n");
    snprintf(model, sizeof(model), "%.*s", (int)n, m);
  }

  session_t b;
  session_config(&b, true, false);
  b.dsc[0].name = "linux.system_info";
  b.dsc[0].sys_stats_config = NULL;
  session_enable(&b, ts);
  const Perfetto__Protos__CpuInfo *ci = NULL;
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (!ci && tg_test_now_ms() < end) {
    e2e_sleep_ms(50);
    e2e_read_more(&b.c, &b.got);
    for (size_t i = 0; i < b.got.n && !ci; i++)
      if (b.got.pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CPU_INFO)
        ci = b.got.pk[i]->cpu_info;
  }
  assert_non_null(ci);
  assert_int_equal(ci->n_cpus, want);
  for (size_t i = 0; i < ci->n_cpus; i++) {
    assert_non_null(ci->cpus[i]->processor);
    if (model[0]) assert_string_equal(ci->cpus[i]->processor, model);
  }
  assert_int_equal(raw_consumer_disable(&b.c, E2E_WAIT_MS), 0);
  e2e_packets_free(&b.got);
  raw_consumer_close(&b.c);
  e2e_stop_probes(probes, err_path);
}

/* The metatrace packets of |p| named |name|; |tid| gets the last one's
 * thread. */
static size_t count_metatrace(const e2e_packets_t *p, const char *name,
                              uint32_t *tid) {
  size_t n = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (p->pk[i]->data_case !=
        PERFETTO__PROTOS__TRACE_PACKET__DATA_PERFETTO_METATRACE)
      continue;
    const Perfetto__Protos__PerfettoMetatrace *m = p->pk[i]->perfetto_metatrace;
    if (m->record_type_case !=
            PERFETTO__PROTOS__PERFETTO_METATRACE__RECORD_TYPE_EVENT_NAME ||
        strcmp(m->event_name, name) != 0)
      continue;
    assert_true(p->pk[i]->has_timestamp && p->pk[i]->timestamp > 0);
    assert_true(m->has_event_duration_ns);
    n++;
    *tid = m->thread_id;
  }
  return n;
}

/* perfetto.metatrace beside linux.sys_stats: each sys_stats round is timed
 * on the thread that did it (a thread of tracegate-probes), the records
 * come at a flush, and the stop writes the last of them. */
static void probes_time_their_own_work(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = start_probes(ts, err_path, sizeof(err_path));

  session_t b;
  session_config(&b, true, false);
  b.dsc[1].name = "perfetto.metatrace";
  b.dsc[1].process_stats_config = NULL;
  b.cfg.n_data_sources = 2;
  session_enable(&b, ts);
  /* Rounds of sys_stats, then a flush brings their timings. */
  size_t with_cpu, with_mem, timed = 0;
  uint32_t tid = 0;
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end) {
    e2e_sleep_ms(50);
    e2e_flush(&b.c);
    e2e_read_more(&b.c, &b.got);
    timed = count_metatrace(&b.got, "linux.sys_stats round", &tid);
    if (count_sys_stats(&b.got, &with_cpu, &with_mem) >= 3 && timed >= 1)
      break;
  }
  assert_true(timed >= 1);
  /* The thread is one of the probes' own. */
  char task[96];
  snprintf(task, sizeof(task), "/proc/%d/task/%u", (int)probes, tid);
  assert_int_equal(access(task, F_OK), 0);
  /* The stop writes what came since. */
  size_t rounds_before = count_sys_stats(&b.got, &with_cpu, &with_mem);
  assert_int_equal(raw_consumer_disable(&b.c, E2E_WAIT_MS), 0);
  e2e_read_more(&b.c, &b.got);
  size_t rounds = count_sys_stats(&b.got, &with_cpu, &with_mem);
  size_t timed_end = count_metatrace(&b.got, "linux.sys_stats round", &tid);
  assert_true(timed_end >= timed);
  /* No more timings than rounds: a round is timed once, and only one
   * (the one the stop cut) may be timed without its packet. */
  assert_true(rounds >= rounds_before);
  assert_true(timed_end <= rounds + 1);
  e2e_packets_free(&b.got);
  raw_consumer_close(&b.c);
  e2e_stop_probes(probes, err_path);
}

/* --- tracegate-emit ------------------------------------------------------ */

static void emit_delivers_every_packet_in_order(void **state) {
  test_service_t *ts = *state;
  enum { THREADS = 4, COUNT = 3000, SIZE = 300, LARGE_EVERY = 1000 };
  const uint32_t large = 300000;
  char err_path[160];
  snprintf(err_path, sizeof(err_path), "%s/emit.err", ts->dir);
  const char *args[] = {"--socket", ts->producer_sock, "--threads", "4",
                        "--count", "3000", "--size", "300",
                        "--large-every", "1000", "--large-size", "300000",
                        "--stall", "--exit-when-stopped", NULL};
  pid_t emit = spawn_tool(EMIT_PATH, args, err_path);
  assert_true(emit > 0);

  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_true(e2e_wait_data_sources(&c, 1));
  simple_cfg_t sc;
  simple_cfg_init(&sc, 32 * 1024,
                  PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD,
                  "tracegate.emit");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);

  e2e_packets_t got = {0};
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  size_t test_packets = 0;
  while (tg_test_now_ms() < end && test_packets < THREADS * COUNT) {
    e2e_sleep_ms(50);
    e2e_flush(&c);
    e2e_read_more(&c, &got);
    test_packets = 0;
    for (size_t i = 0; i < got.n; i++)
      if (test_of(got.pk[i])) test_packets++;
  }
  assert_int_equal(raw_consumer_disable(&c, E2E_WAIT_MS), 0);
  e2e_read_more(&c, &got);

  uint32_t next[THREADS] = {0};
  for (size_t i = 0; i < got.n; i++) {
    const Perfetto__Protos__TestEvent *t = test_of(got.pk[i]);
    if (!t) continue;
    assert_non_null(t->str);
    unsigned idx;
    assert_int_equal(sscanf(t->str, "t%u:", &idx), 1);
    assert_true(idx < THREADS);
    assert_int_equal(t->seq_value, next[idx]);
    next[idx]++;
    size_t want = (t->seq_value + 1) % LARGE_EVERY == 0 ? large : SIZE;
    assert_int_equal(strlen(t->str), want);
    assert_true(got.pk[i]->has_timestamp);
  }
  for (unsigned i = 0; i < THREADS; i++) assert_int_equal(next[i], COUNT);
  e2e_packets_free(&got);
  raw_consumer_close(&c);

  /* --exit-when-stopped: it leaves by itself, with its summary. */
  int status = tg_test_reap(emit, E2E_WAIT_MS);
  char err[4096];
  e2e_read_text(err_path, err, sizeof(err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("tracegate-emit exit status %#x; stderr:\n%s", status, err);
  assert_non_null(strstr(err, "t0=3000 t1=3000 t2=3000 t3=3000 total=12000"));
  assert_non_null(strstr(err, "dropped=0"));
}

static void emit_track_events_reach_the_session(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  snprintf(err_path, sizeof(err_path), "%s/emit-te.err", ts->dir);
  const char *args[] = {"--socket", ts->producer_sock, "--track-events",
                        "--threads", "2", "--count", "50", "--size", "20",
                        "--exit-when-stopped", NULL};
  pid_t emit = spawn_tool(EMIT_PATH, args, err_path);
  assert_true(emit > 0);

  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_true(e2e_wait_data_sources(&c, 1));
  simple_cfg_t sc;
  simple_cfg_init(&sc, 4 * 1024,
                  PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD,
                  "track_event");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);

  e2e_packets_t got = {0};
  size_t begins = 0, ends = 0, counters = 0;
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end) {
    e2e_sleep_ms(50);
    e2e_flush(&c);
    e2e_read_more(&c, &got);
    begins = ends = counters = 0;
    for (size_t i = 0; i < got.n; i++) {
      const Perfetto__Protos__TrackEvent *te = track_event_of(got.pk[i]);
      if (!te) continue;
      begins += te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
      ends += te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
      counters += te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;
    }
    if (begins == 100 && ends == 100 && counters == 100) break;
  }
  assert_int_equal(raw_consumer_disable(&c, E2E_WAIT_MS), 0);
  assert_int_equal(begins, 100);
  assert_int_equal(ends, 100);
  assert_int_equal(counters, 100);
  e2e_packets_free(&got);
  raw_consumer_close(&c);

  int status = tg_test_reap(emit, E2E_WAIT_MS);
  char err[4096];
  e2e_read_text(err_path, err, sizeof(err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("tracegate-emit exit status %#x; stderr:\n%s", status, err);
}

static void emit_exits_on_sigterm_while_writing(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  snprintf(err_path, sizeof(err_path), "%s/emit-term.err", ts->dir);
  const char *args[] = {"--socket", ts->producer_sock, "--rate", "2000",
                        "--threads", "2", NULL};
  pid_t emit = spawn_tool(EMIT_PATH, args, err_path);
  assert_true(emit > 0);
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  assert_true(e2e_wait_data_sources(&c, 1));
  simple_cfg_t sc;
  simple_cfg_init(&sc, 4 * 1024,
                  PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER,
                  "tracegate.emit");
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  /* Wait until it writes, then stop it mid-stream. */
  e2e_packets_t got = {0};
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end && got.n == 0) {
    e2e_sleep_ms(50);
    e2e_flush(&c);
    e2e_read_more(&c, &got);
  }
  assert_true(got.n > 0);
  int status = tg_test_stop(emit, SIGTERM, E2E_WAIT_MS);
  char err[4096];
  e2e_read_text(err_path, err, sizeof(err));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("tracegate-emit exit status %#x; stderr:\n%s", status, err);
  assert_non_null(strstr(err, "tracegate-emit: packets t0="));
  e2e_packets_free(&got);
  assert_int_equal(raw_consumer_disable(&c, E2E_WAIT_MS), 0);
  raw_consumer_close(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          probes_record_two_sessions_with_their_own_configs,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(probes_record_every_group_of_the_config,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(probes_time_their_own_work,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(probes_describe_the_cpus,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(emit_delivers_every_packet_in_order,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(emit_track_events_reach_the_session,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(emit_exits_on_sigterm_while_writing,
                                      test_service_setup,
                                      test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
