/* On-demand process dumps: linux.ftrace collects the pids its records name
 * (the encoder, on synthetic pages), hands them over per tracing session
 * (the pid feed), and linux.process_stats resolves them in this machine's
 * /proc into ProcessTree entries (an instance driven with a plain sink,
 * fed the pids of this test's own threads).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_page.h"
#include "agent/probes/pid_feed.h"
#include "agent/probes/pid_set.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/process_stats.h"
#include "ftrace_fixtures.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "probes_fixtures.h"

/* --- the encoder's pids -------------------------------------------------- */

static const char fork_format[] =
    "name: sched_process_fork\nID: 314\n" COMMON_FIELDS
    "\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:char child_comm[16];\toffset:28;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t child_pid;\toffset:44;\tsize:4;\tsigned:1;\n";

static const char exec_format[] =
    "name: sched_process_exec\nID: 310\n" COMMON_FIELDS
    "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n"
    "\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;\n";

static size_t switch_rec(uint8_t *out, int32_t common_pid, int32_t prev_pid,
                         int32_t next_pid) {
  uint8_t b[56] = {0};
  strncpy((char *)b, "prev", 16);
  memcpy(b + 16, &prev_pid, 4);
  strncpy((char *)b + 32, "next", 16);
  memcpy(b + 48, &next_pid, 4);
  return event(out, 372, common_pid, b, sizeof(b));
}

static size_t waking_rec(uint8_t *out, int32_t common_pid, int32_t pid) {
  uint8_t b[28] = {0};
  strncpy((char *)b, "wakee", 16);
  memcpy(b + 16, &pid, 4);
  return event(out, 373, common_pid, b, sizeof(b));
}

static size_t fork_rec(uint8_t *out, int32_t common_pid, int32_t child) {
  uint8_t b[40] = {0};
  strncpy((char *)b, "parent", 16);
  memcpy(b + 16, &common_pid, 4);
  strncpy((char *)b + 20, "child", 16);
  memcpy(b + 36, &child, 4);
  return event(out, 314, common_pid, b, sizeof(b));
}

/* An exec by thread 701 of process 700 (it becomes 700), filename "/x". */
static size_t exec_rec(uint8_t *out) {
  uint8_t b[16] = {0};
  uint32_t loc = 3u << 16 | 20u; /* after the 8-byte common header */
  memcpy(b, &loc, 4);
  int32_t pid = 700, old_pid = 701;
  memcpy(b + 4, &pid, 4);
  memcpy(b + 8, &old_pid, 4);
  memcpy(b + 12, "/x", 3);
  return event(out, 310, 700, b, sizeof(b));
}

/* sched_switch 100 (prev_pid 111) -> 200; sched_waking by 200 of 300;
 * the idle task (0) switching to 400; a fork by 100 of 500; sys_enter
 * of 600; an exec by 701 that makes it 700; and repeats of all of them. */
static void sched_page(page_t *p) {
  page_init(p, 1000);
  uint8_t rec[128];
  for (int round = 0; round < 2; round++) {
    rec_data(p, 1, rec, switch_rec(rec, 100, 111, 200));
    rec_data(p, 1, rec, waking_rec(rec, 200, 300));
    rec_data(p, 1, rec, switch_rec(rec, 0, 0, 400));
    rec_data(p, 1, rec, fork_rec(rec, 100, 500));
    uint8_t se[56] = {0};
    rec_data(p, 1, rec, event(rec, 443, 600, se, sizeof(se)));
    rec_data(p, 1, rec, exec_rec(rec));
  }
  page_finish(p, false);
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Encodes |p| with pids collected into |set|; returns the sorted pids. */
static size_t encode_pids(bool compact, const page_t *p, tg_pid_set_t *set,
                          int32_t *out) {
  static const group_format_t formats[] = {{"sched", switch_format},
                                           {"sched", waking_format},
                                           {"sched", fork_format},
                                           {"sched", exec_format},
                                           {"raw_syscalls", sys_enter_format}};
  page_encoder_t pe;
  page_encoder_init(&pe, formats, 5, compact);
  static uint8_t buf[65536];
  pe.enc.pids = set;
  tg_ftrace_bundle_result_t res;
  page_encoder_encode(&pe, p, buf, sizeof(buf), &res);
  assert_int_equal(res.events, 12);
  page_encoder_free(&pe);
  memcpy(out, set->pids, set->base.n * sizeof(*out));
  qsort(out, set->base.n, sizeof(*out), cmp_i32);
  return set->base.n;
}

static void encoder_collects_record_pids_once(void **state) {
  (void)state;
  page_t p;
  sched_page(&p);
  tg_pid_set_t set;
  assert_int_equal(tg_pid_set_init(&set, 64), 0);
  int32_t got[64];
  size_t n = encode_pids(false, &p, &set, got);
  /* Every common_pid and pid field, each once; prev_pid 111 is written
   * in full events; the exec's old_pid; never the idle task. */
  const int32_t want[] = {100, 111, 200, 300, 400, 500, 600, 700, 701};
  assert_int_equal(n, sizeof(want) / sizeof(want[0]));
  assert_memory_equal(got, want, sizeof(want));
  assert_int_equal(set.base.dropped, 0);
  assert_false(tg_pid_set_has(&set, 0));
  tg_pid_set_free(&set);
}

/* A drain's pids less those handed over lately (ftrace_session.c): the
 * new ones are kept in order and remembered; past the set's room they
 * are still kept (handed over again next time), never lost. */
static void handed_pids_are_left_out_until_cleared(void **state) {
  (void)state;
  tg_pid_set_t handed;
  assert_int_equal(tg_pid_set_init(&handed, 4), 0);
  int32_t first[] = {10, 0, 11, -3, 12};
  assert_int_equal(tg_pid_set_add_new(&handed, first, 5, first), 3);
  const int32_t want_first[] = {10, 11, 12};
  assert_memory_equal(first, want_first, sizeof(want_first));
  const int32_t again[] = {11, 13, 10, 14, 15};
  int32_t out[5];
  assert_int_equal(tg_pid_set_add_new(&handed, again, 5, out), 3);
  const int32_t want_again[] = {13, 14, 15};
  assert_memory_equal(out, want_again, sizeof(want_again));
  /* 15 found no room: not remembered, so it comes again. */
  assert_false(tg_pid_set_has(&handed, 15));
  assert_int_equal(handed.base.dropped, 0);
  int32_t third[] = {15, 12};
  assert_int_equal(tg_pid_set_add_new(&handed, third, 2, out), 1);
  assert_int_equal(out[0], 15);
  tg_pid_set_clear(&handed);
  int32_t after[] = {10};
  assert_int_equal(tg_pid_set_add_new(&handed, after, 1, out), 1);
  tg_pid_set_free(&handed);
}

static void encoder_collects_compact_columns_pids(void **state) {
  (void)state;
  page_t p;
  sched_page(&p);
  tg_pid_set_t set;
  assert_int_equal(tg_pid_set_init(&set, 64), 0);
  int32_t got[64];
  size_t n = encode_pids(true, &p, &set, got);
  /* Compact rows carry next_pid and the waking pid, not prev_pid. */
  const int32_t want[] = {100, 200, 300, 400, 500, 600, 700, 701};
  assert_int_equal(n, sizeof(want) / sizeof(want[0]));
  assert_memory_equal(got, want, sizeof(want));
  assert_int_equal(set.base.dropped, 0);
  tg_pid_set_free(&set);
}

static void encoder_counts_pids_past_a_full_set(void **state) {
  (void)state;
  page_t p;
  sched_page(&p);
  tg_pid_set_t set;
  assert_int_equal(tg_pid_set_init(&set, 3), 0);
  int32_t got[8];
  assert_int_equal(encode_pids(false, &p, &set, got), 3);
  /* Nine distinct pids, three kept: the other six counted at least
   * once each (their repeats count again). */
  assert_true(set.base.dropped >= 6);
  tg_pid_set_clear(&set);
  assert_int_equal(set.base.n, 0);
  assert_int_equal(set.base.dropped, 0);
  tg_pid_set_free(&set);
}

static void pid_set_clears_and_refills(void **state) {
  (void)state;
  tg_pid_set_t set;
  assert_int_equal(tg_pid_set_init(&set, 1000), 0);
  /* Colliding and consecutive pids, cleared in the sparse and the dense
   * way, leave no slot behind. */
  for (int round = 0; round < 3; round++) {
    uint32_t n = round == 1 ? 1000 : 50;
    for (uint32_t i = 1; i <= n; i++) tg_pid_set_add(&set, (int32_t)(i * 2048));
    tg_pid_set_add(&set, -5);
    tg_pid_set_add(&set, 0);
    assert_int_equal(set.base.n, n);
    for (uint32_t i = 1; i <= n; i++)
      assert_true(tg_pid_set_has(&set, (int32_t)(i * 2048)));
    tg_pid_set_clear(&set);
    for (uint32_t k = 0; k <= set.base.mask; k++)
      assert_int_equal(set.base.slots[k], 0);
  }
  tg_pid_set_free(&set);
}

/* --- the feed ------------------------------------------------------------ */

static int g_wakes;
static void count_wake(void *ctx) { (void)ctx; g_wakes++; }

static void feed_hands_pids_to_the_sessions_consumer_once(void **state) {
  (void)state;
  tg_pid_feed_t *f;
  assert_int_equal(tg_pid_feed_new(count_wake, NULL, &f), 0);
  g_wakes = 0;
  tg_pid_feed_consumer_t *c;
  assert_int_equal(tg_pid_feed_register(f, 7, &c), 0);
  const int32_t a[] = {10, 0, 11, 10, -3}, b[] = {11, 12};
  assert_int_equal(tg_pid_feed_publish(f, 7, a, 5), 1);
  assert_int_equal(tg_pid_feed_publish(f, 7, b, 2), 1);
  /* Woken when it went from nothing to something, not again. */
  assert_int_equal(g_wakes, 1);
  int32_t out[TG_PID_FEED_CAP];
  assert_int_equal(tg_pid_feed_drain(f, c, out, TG_PID_FEED_CAP), 3);
  assert_int_equal(out[0], 10);
  assert_int_equal(out[1], 11);
  assert_int_equal(out[2], 12);
  assert_int_equal(tg_pid_feed_drain(f, c, out, TG_PID_FEED_CAP), 0);
  /* A partial drain keeps the rest for the next one. */
  assert_int_equal(tg_pid_feed_publish(f, 7, a, 5), 1);
  assert_int_equal(g_wakes, 2);
  assert_int_equal(tg_pid_feed_drain(f, c, out, 1), 1);
  assert_int_equal(out[0], 10);
  assert_int_equal(tg_pid_feed_drain(f, c, out, TG_PID_FEED_CAP), 1);
  assert_int_equal(out[0], 11);
  assert_int_equal(tg_pid_feed_dropped(f, c), 0);
  tg_pid_feed_unregister(f, c);
  tg_pid_feed_free(f);
}

static void feed_keeps_nothing_for_a_session_without_consumer(void **state) {
  (void)state;
  tg_pid_feed_t *f;
  assert_int_equal(tg_pid_feed_new(count_wake, NULL, &f), 0);
  g_wakes = 0;
  tg_pid_feed_consumer_t *c;
  assert_int_equal(tg_pid_feed_register(f, 7, &c), 0);
  const int32_t a[] = {10, 11};
  assert_int_equal(tg_pid_feed_publish(f, 8, a, 2), 0);
  assert_int_equal(tg_pid_feed_publish(f, 0, a, 2), 0);
  assert_int_equal(g_wakes, 0);
  int32_t out[4];
  assert_int_equal(tg_pid_feed_drain(f, c, out, 4), 0);
  assert_int_equal(tg_pid_feed_register(f, 0, &c), -EINVAL);
  /* Unregistered: its session's pids go nowhere. */
  tg_pid_feed_unregister(f, c);
  assert_int_equal(tg_pid_feed_publish(f, 7, a, 2), 0);
  tg_pid_feed_free(f);
}

static void feed_counts_pids_past_the_cap(void **state) {
  (void)state;
  tg_pid_feed_t *f;
  assert_int_equal(tg_pid_feed_new(NULL, NULL, &f), 0);
  tg_pid_feed_consumer_t *c;
  assert_int_equal(tg_pid_feed_register(f, 9, &c), 0);
  static int32_t many[TG_PID_FEED_CAP + 100];
  for (size_t i = 0; i < TG_PID_FEED_CAP + 100; i++) many[i] = (int32_t)i + 1;
  assert_int_equal(tg_pid_feed_publish(f, 9, many, TG_PID_FEED_CAP + 100), 1);
  assert_int_equal(tg_pid_feed_dropped(f, c), 100);
  static int32_t out[TG_PID_FEED_CAP];
  assert_int_equal(tg_pid_feed_drain(f, c, out, TG_PID_FEED_CAP),
                   TG_PID_FEED_CAP);
  /* Room again after the drain. */
  assert_int_equal(tg_pid_feed_publish(f, 9, many + TG_PID_FEED_CAP, 100), 1);
  assert_int_equal(tg_pid_feed_drain(f, c, out, TG_PID_FEED_CAP), 100);
  assert_int_equal(tg_pid_feed_dropped(f, c), 100);
  /* Freed with a consumer still registered: nothing leaks (ASan). */
  tg_pid_feed_free(f);
}

/* --- process_stats resolving them ---------------------------------------- */

#define SESSION 42
#define THREAD_NAME "tg-pids-thr"

typedef struct thr {
  pthread_t t;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t tid;
  bool quit;
} thr_t;

static void *thr_main(void *arg) {
  thr_t *t = arg;
  prctl(PR_SET_NAME, THREAD_NAME);
  pthread_mutex_lock(&t->mu);
  t->tid = gettid();
  pthread_cond_broadcast(&t->cv);
  while (!t->quit) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

static void thr_start(thr_t *t) {
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  assert_int_equal(pthread_create(&t->t, NULL, thr_main, t), 0);
  pthread_mutex_lock(&t->mu);
  while (!t->tid) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

static void thr_stop(thr_t *t) {
  pthread_mutex_lock(&t->mu);
  t->quit = true;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->t, NULL);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
}

/* pthread_join returns once the kernel cleared the thread's tid, a moment
 * before /proc/self/task/<tid> goes: waits for that (bounded). */
static void thr_wait_gone(int32_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
  for (int i = 0; i < 10000 && access(path, F_OK) == 0; i++) usleep(1000);
  assert_int_equal(access(path, F_OK), -1);
}

/* A linux.process_stats instance of session SESSION on |feed|, as the
 * sampler builds it from a DataSourceConfig. */
static void *instance(tg_pid_feed_t *feed, bool disable_on_demand) {
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  Perfetto__Protos__ProcessStatsConfig ps =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__INIT;
  Perfetto__Protos__ProcessStatsConfig__Quirks q =
      PERFETTO__PROTOS__PROCESS_STATS_CONFIG__QUIRKS__DISABLE_ON_DEMAND;
  dsc.name = "linux.process_stats";
  dsc.has_tracing_session_id = true;
  dsc.tracing_session_id = SESSION;
  dsc.process_stats_config = &ps;
  ps.has_record_thread_names = true;
  ps.record_thread_names = true;
  if (disable_on_demand) {
    ps.n_quirks = 1;
    ps.quirks = &q;
  }
  _Alignas(max_align_t) unsigned char cfg[TG_PROBE_CFG_MAX];
  probe_parse_cfg(&tg_process_stats_probe, &dsc, cfg);
  const tg_process_stats_cfg_t *c = (const tg_process_stats_cfg_t *)cfg;
  assert_int_equal(c->tracing_session_id, SESSION);
  assert_int_equal(c->on_demand, !disable_on_demand);
  void *st = NULL;
  assert_int_equal(tg_process_stats_probe.create(cfg, feed, &st), 0);
  return st;
}

static int32_t pid_max(void) {
  FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
  assert_non_null(f);
  int v = 0;
  assert_int_equal(fscanf(f, "%d", &v), 1);
  fclose(f);
  return v;
}

/* A process_stats instance on a feed of its own, writing into g_sb. */
typedef struct ps_fixture {
  tg_pid_feed_t *feed;
  void *ps; /* NULL once destroyed */
  tg_probes_sink_t sink;
} ps_fixture_t;

static sink_buf_t g_sb;

static void ps_start(ps_fixture_t *x, bool disable_on_demand) {
  assert_int_equal(tg_pid_feed_new(NULL, NULL, &x->feed), 0);
  x->ps = instance(x->feed, disable_on_demand);
  memset(&g_sb, 0, sizeof(g_sb));
  x->sink = sink_buf_sink(&g_sb);
}

static void ps_stop(ps_fixture_t *x) {
  if (x->ps) tg_process_stats_probe.destroy(x->ps);
  tg_pid_feed_free(x->feed);
  sink_buf_clear(&g_sb);
}

static void process_stats_resolves_a_thread_and_its_process_once(void **state) {
  (void)state;
  thr_t t;
  thr_start(&t);
  ps_fixture_t x;
  ps_start(&x, false);

  /* A pid that cannot exist (pid_max is above every pid), the idle task,
   * and the thread. */
  int32_t me = getpid();
  const int32_t pids[] = {pid_max(), 0, t.tid};
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, pids, 3), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 2);
  assert_int_equal(g_sb.n, 1);
  const Perfetto__Protos__ProcessTree *tree = sink_buf_last(&g_sb)->process_tree;
  assert_non_null(tree);
  assert_int_equal(tree->n_processes, 1);
  assert_int_equal(tree->processes[0]->pid, me);
  assert_int_equal(tree->processes[0]->ppid, getppid());
  assert_true(tree->processes[0]->n_cmdline >= 1);
  assert_int_equal(tree->n_threads, 1);
  assert_int_equal(tree->threads[0]->tid, t.tid);
  assert_int_equal(tree->threads[0]->tgid, me);
  assert_string_equal(tree->threads[0]->name, THREAD_NAME);

  /* Fed again, with the process's own pid too: all seen, nothing
   * written. */
  const int32_t again[] = {t.tid, me};
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, again, 2), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 0);
  assert_int_equal(g_sb.n, 1);

  tg_process_stats_probe.destroy(x.ps);
  x.ps = NULL;
  /* The instance is gone: its session keeps nothing. */
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, again, 2), 0);
  ps_stop(&x);
  thr_stop(&t);
}

static void process_stats_resolves_the_main_thread_as_a_process(void **state) {
  (void)state;
  ps_fixture_t x;
  ps_start(&x, false);
  int32_t me = getpid();
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, &me, 1), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 1);
  const Perfetto__Protos__ProcessTree *tree = sink_buf_last(&g_sb)->process_tree;
  assert_int_equal(tree->n_processes, 1);
  assert_int_equal(tree->processes[0]->pid, me);
  assert_int_equal(tree->n_threads, 0);
  /* A pid that does not exist alone: skipped, no packet. */
  int32_t gone = pid_max();
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, &gone, 1), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 0);
  assert_int_equal(g_sb.n, 1);
  ps_stop(&x);
}

static void process_stats_disable_on_demand_writes_nothing(void **state) {
  (void)state;
  thr_t t;
  thr_start(&t);
  ps_fixture_t x;
  ps_start(&x, true);
  /* Not registered: the session has no consumer, so nothing is kept. */
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, &t.tid, 1), 0);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 0);
  assert_int_equal(g_sb.n, 0);
  ps_stop(&x);
  thr_stop(&t);
}

/* Threads resolved over several drains, their tids interleaving with
 * those known already, are each known once: a later drain of all of them
 * writes nothing (the known set stays sorted across merges). */
static void process_stats_merges_threads_across_drains(void **state) {
  (void)state;
  enum { N = 6 };
  thr_t t[N];
  int32_t tids[N];
  for (int i = 0; i < N; i++) {
    thr_start(&t[i]);
    tids[i] = t[i].tid;
  }
  /* Sorted, then drained odd places first, even ones second. */
  for (int i = 1; i < N; i++)
    for (int k = i; k > 0 && tids[k - 1] > tids[k]; k--) {
      int32_t x = tids[k];
      tids[k] = tids[k - 1];
      tids[k - 1] = x;
    }
  ps_fixture_t x;
  ps_start(&x, false);
  int32_t odd[N / 2], even[N / 2];
  for (int i = 0; i < N / 2; i++) {
    odd[i] = tids[2 * i + 1];
    even[i] = tids[2 * i];
  }
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, odd, N / 2), 1);
  /* This process, and the odd threads. */
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 1 + N / 2);
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, even, N / 2), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), N / 2);
  size_t threads = 0;
  assert_int_equal(tg__process_stats_known(x.ps, &threads), 1);
  assert_int_equal(threads, N);
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, tids, N), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 0);
  assert_int_equal(tg__process_stats_known(x.ps, &threads), 1);
  assert_int_equal(threads, N);
  ps_stop(&x);
  for (int i = 0; i < N; i++) thr_stop(&t[i]);
}

/* The sets of what was written forget what exited: a child process and
 * its thread, and a thread of this process that ended, leave them when
 * they are pruned; live ones stay, and nothing is written twice. */
static void process_stats_forgets_what_exited(void **state) {
  (void)state;
  thr_t t, u;
  thr_start(&t);
  thr_start(&u);
  kid_t child;
  kid_start(&child, THREAD_NAME);
  ps_fixture_t x;
  ps_start(&x, false);
  const int32_t pids[] = {t.tid, u.tid, child.tid};
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, pids, 3), 1);
  /* This process, the child, and the three threads. */
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 5);
  size_t threads = 0;
  assert_int_equal(tg__process_stats_known(x.ps, &threads), 2);
  assert_int_equal(threads, 3);

  kid_kill(&child);
  int32_t u_tid = u.tid;
  thr_stop(&u);
  thr_wait_gone(u_tid);
  tg__process_stats_prune(x.ps);
  assert_int_equal(tg__process_stats_known(x.ps, &threads), 1);
  assert_int_equal(threads, 1);

  /* The live thread is still known; the gone ones are not resolved. */
  const int32_t again[] = {t.tid, u_tid, child.tid, (int32_t)child.pid};
  assert_int_equal(tg_pid_feed_publish(x.feed, SESSION, again, 4), 1);
  assert_int_equal(tg__process_stats_resolve(x.ps, &x.sink), 0);
  assert_int_equal(tg__process_stats_known(x.ps, &threads), 1);
  assert_int_equal(threads, 1);
  ps_stop(&x);
  thr_stop(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encoder_collects_record_pids_once),
      cmocka_unit_test(handed_pids_are_left_out_until_cleared),
      cmocka_unit_test(encoder_collects_compact_columns_pids),
      cmocka_unit_test(encoder_counts_pids_past_a_full_set),
      cmocka_unit_test(pid_set_clears_and_refills),
      cmocka_unit_test(feed_hands_pids_to_the_sessions_consumer_once),
      cmocka_unit_test(feed_keeps_nothing_for_a_session_without_consumer),
      cmocka_unit_test(feed_counts_pids_past_the_cap),
      cmocka_unit_test(process_stats_resolves_a_thread_and_its_process_once),
      cmocka_unit_test(process_stats_resolves_the_main_thread_as_a_process),
      cmocka_unit_test(process_stats_disable_on_demand_writes_nothing),
      cmocka_unit_test(process_stats_forgets_what_exited),
      cmocka_unit_test(process_stats_merges_threads_across_drains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
