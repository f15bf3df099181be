/* On-demand process dumps end to end: tracegate-probes' linux.ftrace and
 * linux.process_stats in one session of a real tracegated, resolving a
 * process this test starts while recording.
 *
 * Needs root and tracefs (probes_e2e.h: skipped without them, unless
 * TG_REQUIRE_FTRACE is set).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "probes_e2e.h"
#include "probes_fixtures.h"
#include "test_proc.h"

#define OD_THREAD "tg-od-thread"

typedef struct od_found {
  bool thread, process;
  size_t thread_entries, process_entries;
  const char *thread_name;
} od_found_t;

static void od_find(const e2e_packets_t *p, const kid_t *k, od_found_t *f) {
  memset(f, 0, sizeof(*f));
  for (size_t i = 0; i < p->n; i++) {
    if (p->pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE)
      continue;
    const Perfetto__Protos__ProcessTree *t = p->pk[i]->process_tree;
    for (size_t j = 0; j < t->n_threads; j++) {
      if (t->threads[j]->tid != k->tid) continue;
      f->thread_entries++;
      f->thread = t->threads[j]->tgid == k->pid;
      f->thread_name = t->threads[j]->name;
    }
    for (size_t j = 0; j < t->n_processes; j++)
      if (t->processes[j]->pid == k->pid) {
        f->process_entries++;
        f->process = true;
      }
  }
}

/* linux.ftrace and linux.process_stats (no scan at start, no polling) in
 * one session: a process started while recording gets its ProcessTree
 * entries because its thread showed up in sched_switch. */
static void ftrace_pids_are_resolved_by_process_stats(void **state) {
  e2e_require_ftrace();
  test_service_t *ts = *state;
  char err_path[160];
  pid_t probes = e2e_start_probes(ts, err_path, sizeof(err_path),
                                  "probes.err", false, 3);

  char *events[] = {"sched/sched_switch"};
  e2e_session_t s;
  e2e_session_config(&s, events, 1, true);
  Perfetto__Protos__DataSourceConfig dsc2;
  Perfetto__Protos__ProcessStatsConfig psc;
  perfetto__protos__data_source_config__init(&dsc2);
  perfetto__protos__process_stats_config__init(&psc);
  psc.has_record_thread_names = true;
  psc.record_thread_names = true;
  dsc2.name = "linux.process_stats";
  dsc2.process_stats_config = &psc;
  e2e_session_add_source(&s, &dsc2);
  e2e_session_enable(&s, ts);
  e2e_wait_started(&s);

  kid_t k;
  kid_start(&k, OD_THREAD);
  /* The entries come once the ftrace pages naming the thread are read and
   * the pids resolved; the kid lives until then. */
  od_found_t f;
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  do {
    e2e_sleep_ms(20);
    e2e_read_more(&s.c, &s.got);
    od_find(&s.got, &k, &f);
  } while (!(f.thread && f.process) && tg_test_now_ms() < end);
  kid_stop(&k);
  e2e_flush(&s.c);
  assert_int_equal(raw_consumer_disable(&s.c, E2E_WAIT_MS), 0);
  e2e_read_more(&s.c, &s.got);
  od_find(&s.got, &k, &f);
  assert_true(f.thread);
  assert_true(f.process);
  /* Seen in page after page, written once. */
  assert_int_equal(f.thread_entries, 1);
  assert_int_equal(f.process_entries, 1);
  assert_non_null(f.thread_name);
  assert_string_equal(f.thread_name, OD_THREAD);

  assert_true(e2e_wait_instances(probes, 0));
  e2e_session_close(&s);
  e2e_stop_probes(probes, err_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          ftrace_pids_are_resolved_by_process_stats, test_service_setup,
          test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
