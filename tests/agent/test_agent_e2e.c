/* libtracegate-agent end to end against a real tracegated: the agent in
 * this process, the service in a child, a raw consumer recording.
 *
 * The agent is a process singleton, so every test initialises it and
 * shuts it down again; data sources stay registered across tests. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_service.h"
#include "pb/common/observable_events.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"

#define DS_NAME "test.agent"
#define WAIT_MS 10000

/* --- a data source whose start/stop the test can wait for ---------------- */

static tg_ds_t *g_ds;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_starts, g_stops, g_flushes, g_clears;
static int g_start_policy = -1; /* the agent thread's, seen by on_start */

static void bump(int *counter) {
  pthread_mutex_lock(&g_mu);
  (*counter)++;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

static void on_start(void *ctx, unsigned inst, const uint8_t *c, size_t n) {
  (void)ctx, (void)inst, (void)c, (void)n;
  pthread_mutex_lock(&g_mu);
  g_start_policy = sched_getscheduler(0); /* this thread's (Linux) */
  pthread_mutex_unlock(&g_mu);
  bump(&g_starts);
}
static void on_stop(void *ctx, unsigned inst) {
  (void)ctx, (void)inst;
  bump(&g_stops);
}
static void on_flush(void *ctx, unsigned inst) {
  (void)ctx, (void)inst;
  bump(&g_flushes);
}
static void on_clear(void *ctx, unsigned inst) {
  (void)ctx, (void)inst;
  bump(&g_clears);
}

/* Waits until |*counter| >= |target|; false on timeout. */
static bool wait_count(int *counter, int target) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += WAIT_MS / 1000;
  pthread_mutex_lock(&g_mu);
  int rv = 0;
  while (*counter < target && rv == 0)
    rv = pthread_cond_timedwait(&g_cv, &g_mu, &dl);
  bool ok = *counter >= target;
  pthread_mutex_unlock(&g_mu);
  return ok;
}

static int counter_now(int *counter) {
  pthread_mutex_lock(&g_mu);
  int v = *counter;
  pthread_mutex_unlock(&g_mu);
  return v;
}

static void register_ds_once(void) {
  if (g_ds) return;
  tg_ds_options_t o = {
      .name = DS_NAME,
      .handles_incremental_state_clear = true,
      .cbs = {.on_start = on_start,
              .on_stop = on_stop,
              .on_flush = on_flush,
              .on_clear_incremental_state = on_clear},
  };
  assert_int_equal(tg_ds_register(&o, &g_ds), 0);
}

/* The agent samples its SMB's resident size with mincore(), which looks up
 * every page of the mapping: this definition, in the executable, takes
 * the agent's calls and counts them. */
static atomic_uint g_mincore_calls;
int mincore(void *addr, size_t len, unsigned char *vec) {
  atomic_fetch_add(&g_mincore_calls, 1);
  return (int)syscall(SYS_mincore, addr, len, vec);
}

/* The agent's log on stderr, shown by ctest when a test fails. */
static void test_log(void *ctx, tg_log_level_t level, const char *msg) {
  (void)ctx;
  fprintf(stderr, "agent[%d]: %s\n", (int)level, msg);
}

static tg_agent_options_t agent_options(const test_service_t *ts,
                                        tg_agent_full_policy_t pol,
                                        size_t smb_kb) {
  tg_agent_options_t o = {
      .socket_path = ts->producer_sock,
      .producer_name = "agent-e2e",
      .smb_size_hint = smb_kb * 1024,
      .on_smb_full = pol,
      .reconnect_min_ms = 20,
      .reconnect_max_ms = 200,
      .log = test_log,
      .log_level = TG_LOG_INFO,
  };
  return o;
}

static void start_agent(const test_service_t *ts, tg_agent_full_policy_t pol,
                        size_t smb_kb) {
  register_ds_once();
  tg_agent_options_t o = agent_options(ts, pol, smb_kb);
  assert_int_equal(tg_agent_init(&o), 0);
  assert_int_equal(tg_agent_wait_connected(WAIT_MS), 0);
}

/* tg_agent_init called by a thread of the app that took |policy|
 * (priority |prio|) first, so that the agent's thread inherits that policy
 * and the test's own thread never changes its: an unprivileged thread
 * cannot leave SCHED_IDLE again (sched(7), RLIMIT_NICE), and glibc's
 * thread attributes take no SCHED_IDLE. */
typedef struct policy_init {
  tg_agent_options_t o;
  int policy, prio;
  int set_rv, init_rv;
} policy_init_t;

static void *init_at_policy(void *arg) {
  policy_init_t *p = arg;
  struct sched_param sp = {.sched_priority = p->prio};
  p->set_rv = pthread_setschedparam(pthread_self(), p->policy, &sp);
  if (p->set_rv == 0) p->init_rv = tg_agent_init(&p->o);
  return NULL;
}

/* 0, or the positive error the policy's change gave (EPERM: this process
 * may not take |policy|). */
static int start_agent_at_policy(const test_service_t *ts, int policy,
                                 int prio) {
  register_ds_once();
  policy_init_t p = {.o = agent_options(ts, TG_AGENT_FULL_STALL, 0),
                     .policy = policy,
                     .prio = prio,
                     .init_rv = -1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, init_at_policy, &p), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  if (p.set_rv != 0) return p.set_rv;
  assert_int_equal(p.init_rv, 0);
  assert_int_equal(tg_agent_wait_connected(WAIT_MS), 0);
  return 0;
}

/* --- writing ------------------------------------------------------------- */

static void write_test_packet(tg_pbw_t *w, const char *str, uint32_t seq) {
  tg_pbw_append_varint(w, 8 /* timestamp */, tg_track_event_now());
  tg_pbw_begin_nested(w, 900 /* for_testing */);
  tg_pbw_append_string(w, 1, str);
  tg_pbw_append_varint(w, 2, seq);
  tg_pbw_end_nested(w);
}

typedef struct writer_job {
  char tag[16];
  uint32_t count;
  size_t pad; /* extra bytes of str */
  _Atomic uint32_t done;
} writer_job_t;

static void *writer_main(void *arg) {
  writer_job_t *j = arg;
  char *str = malloc(sizeof(j->tag) + j->pad + 1);
  size_t tl = strlen(j->tag);
  memcpy(str, j->tag, tl);
  memset(str + tl, 'x', j->pad);
  str[tl + j->pad] = 0;
  str[tl] = j->pad ? ':' : 0;
  for (uint32_t i = 0; i < j->count; i++) {
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, str, i); }
    atomic_store(&j->done, i + 1);
  }
  free(str);
  return NULL;
}

/* --- recording ----------------------------------------------------------- */

typedef struct recording {
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__TracePacket **pk;
  size_t n;
} recording_t;

static void record_begin(recording_t *r, const test_service_t *ts,
                         uint32_t buf_kb) {
  memset(r, 0, sizeof(*r));
  int starts = counter_now(&g_starts);
  assert_int_equal(raw_consumer_connect(&r->c, ts), 0);
  simple_cfg_init(&r->sc, buf_kb, 2 /* DISCARD */, DS_NAME);
  assert_int_equal(raw_consumer_enable(&r->c, &r->sc.cfg, -1), 0);
  assert_true(wait_count(&g_starts, starts + 1));
}

static void record_end(recording_t *r) {
  int stops = counter_now(&g_stops);
  assert_int_equal(raw_consumer_disable(&r->c, WAIT_MS), 0);
  assert_true(wait_count(&g_stops, stops + 1));
  r->pk = raw_consumer_read(&r->c, &r->n);
  assert_non_null(r->pk);
}

static void record_free(recording_t *r) {
  free_packets(r->pk, r->n);
  raw_consumer_close(&r->c);
}

/* The agent with no SMB hint (its reserve, drop policy), recording into a
 * |buf_kb| buffer; |before| gets the agent's counters at the start. */
static void begin_with_reserve(const test_service_t *ts, recording_t *r,
                               uint32_t buf_kb, tg_agent_stats_t *before) {
  start_agent(ts, TG_AGENT_FULL_DROP, 0);
  record_begin(r, ts, buf_kb);
  tg_agent_get_stats(before);
}

static bool is_test_packet(const Perfetto__Protos__TracePacket *p) {
  return p && p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
         p->for_testing->str;
}

/* Counts the test packets whose str starts with |tag|, checking that their
 * seq_values run 0, 1, 2... in order. Returns how many; |*dropped_marks|
 * gets the packets after the first flagged previous_packet_dropped. */
static uint32_t check_sequence(const recording_t *r, const char *tag,
                               bool expect_contiguous,
                               uint32_t *dropped_marks) {
  uint32_t next = 0, n = 0, marks = 0;
  size_t tl = strlen(tag);
  for (size_t i = 0; i < r->n; i++) {
    const Perfetto__Protos__TracePacket *p = r->pk[i];
    if (!is_test_packet(p)) continue;
    const char *s = p->for_testing->str;
    if (strncmp(s, tag, tl) != 0 || (s[tl] != 0 && s[tl] != ':')) continue;
    /* The service flags a sequence's first packet, as Perfetto's does:
     * only the marks after it say something was lost. */
    if (n > 0 && p->has_previous_packet_dropped && p->previous_packet_dropped)
      marks++;
    if (expect_contiguous) {
      assert_int_equal(p->for_testing->seq_value, next);
    } else {
      assert_true(p->for_testing->seq_value >= next);
    }
    next = p->for_testing->seq_value + 1;
    n++;
  }
  if (dropped_marks) *dropped_marks = marks;
  return n;
}

/* --- tests --------------------------------------------------------------- */

static void four_threads_arrive_complete_and_in_order(void **state) {
  test_service_t *ts = *state;
  start_agent(ts, TG_AGENT_FULL_STALL, 0);
  recording_t r;
  record_begin(&r, ts, 64 * 1024); /* holds all ~37 MB */

  writer_job_t jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    memset(&jobs[i], 0, sizeof(jobs[i]));
    snprintf(jobs[i].tag, sizeof(jobs[i].tag), "t%d", i);
    jobs[i].count = 20000;
    jobs[i].pad = (size_t)i * 300; /* thread 3: packets of ~900 B */
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  record_end(&r);
  for (int i = 0; i < 4; i++)
    assert_int_equal(check_sequence(&r, jobs[i].tag, true, NULL), 20000);
  record_free(&r);

  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  assert_true(st.packets_written >= 80000);
  assert_true(st.chunks_committed > 0);
  /* tracegated takes patches written into chunks whose commit is pending:
   * the packets that went on into a next chunk had theirs so, and the
   * sequences above are whole all the same. */
  assert_true(st.patches_in_place > 0);
  tg_agent_shutdown();
}

static void large_packet_arrives_intact(void **state) {
  test_service_t *ts = *state;
  start_agent(ts, TG_AGENT_FULL_STALL, 256);
  recording_t r;
  record_begin(&r, ts, 16 * 1024);
  writer_job_t j = {.tag = "big", .count = 3, .pad = 5u << 20};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, writer_main, &j), 0);
  pthread_join(th, NULL);
  record_end(&r);
  assert_int_equal(check_sequence(&r, "big", true, NULL), 3);
  for (size_t i = 0; i < r.n; i++) {
    const Perfetto__Protos__TracePacket *p = r.pk[i];
    if (!is_test_packet(p) || strncmp(p->for_testing->str, "big", 3)) continue;
    const char *s = p->for_testing->str;
    size_t len = strlen(s);
    assert_int_equal(len, 3 + (5u << 20)); /* "big:xxx...", ':' over an x */
    for (size_t k = 4; k < len; k++)
      if (s[k] != 'x') fail_msg("byte %zu of the large packet is %#x", k, s[k]);
  }
  record_free(&r);
  tg_agent_shutdown();
}

/* A writer in two phases: |count| packets, then (after |go|) |count2|
 * more on the same thread, i.e. the same sequence. */
typedef struct phased_job {
  writer_job_t a;
  uint32_t count2;
  sem_t phase1_done, go;
} phased_job_t;

static void *phased_main(void *arg) {
  phased_job_t *j = arg;
  char str[1100];
  memset(str, 'x', sizeof(str) - 1);
  str[sizeof(str) - 1] = 0;
  memcpy(str, "ex:", 3);
  uint32_t total = j->a.count + j->count2;
  for (uint32_t i = 0; i < total; i++) {
    if (i == j->a.count) {
      sem_post(&j->phase1_done);
      sem_wait(&j->go);
    }
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, str, i); }
    atomic_store(&j->a.done, i + 1);
  }
  return NULL;
}

/* A consumer Flush: when it is answered, the service has taken every
 * commit the agent sent before it (one ordered socket). */
static void flush_roundtrip(recording_t *r) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t rid = raw_invoke(&r->c.conn, "Flush", &fr.base, -1, false);
  assert_true(rid > 0);
  raw_frame_t f;
  assert_int_equal(raw_wait(&r->c.conn, (uint64_t)rid, WAIT_MS, &f), 1);
  assert_true(f.frame->msg_invoke_method_reply->success);
  tg_ipc_frame_free(f.frame);
}

/* With the service frozen (SIGSTOP) nobody frees chunks: a writer that
 * produces more than the SMB holds must drop (drop policy) or wait (stall
 * policy). */
static void exhaustion(test_service_t *ts, tg_agent_full_policy_t pol) {
  tg_agent_stats_t before;
  tg_agent_get_stats(&before);
  start_agent(ts, pol, 64);
  recording_t r;
  record_begin(&r, ts, 32 * 1024);
  /* 4000 packets of ~1 KiB: ~4 MiB through a 64 KiB SMB, then 100 more
   * once the service is back. */
  phased_job_t j = {.a = {.count = 4000}, .count2 = 100};
  sem_init(&j.phase1_done, 0, 0);
  sem_init(&j.go, 0, 0);
  kill(ts->pid, SIGSTOP);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, phased_main, &j), 0);
  if (pol == TG_AGENT_FULL_STALL) {
    /* The writer fills the SMB and then waits: its progress stops short
     * of the end (bounded wait for it to stop moving). */
    uint32_t seen = 0;
    for (int i = 0; i < 400; i++) {
      struct timespec d = {0, 5 * 1000 * 1000};
      nanosleep(&d, NULL);
      uint32_t now = atomic_load(&j.a.done);
      if (now == seen && now > 0) break;
      seen = now;
    }
    assert_true(atomic_load(&j.a.done) < j.a.count);
    kill(ts->pid, SIGCONT);
    sem_wait(&j.phase1_done);
  } else {
    sem_wait(&j.phase1_done); /* drop mode never blocks */
    kill(ts->pid, SIGCONT);
    flush_roundtrip(&r); /* the SMB is drained again */
  }
  sem_post(&j.go);
  pthread_join(th, NULL);
  record_end(&r);

  uint32_t marks = 0;
  uint32_t got = check_sequence(&r, "ex", pol == TG_AGENT_FULL_STALL, &marks);
  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  uint64_t dropped = st.packets_dropped - before.packets_dropped;
  if (pol == TG_AGENT_FULL_STALL) {
    assert_int_equal(got, 4100);
    assert_int_equal(dropped, 0);
    assert_true(st.stalls > before.stalls);
  } else {
    assert_true(got < 4100);
    assert_true(dropped > 0);
    assert_int_equal(got + dropped, 4100);
    /* The first packet after the loss says so, and the service was told
     * (drop markers, one per run of losses). */
    assert_true(marks >= 1);
    uint64_t markers = st.drop_markers - before.drop_markers;
    assert_true(markers >= 1 && markers <= dropped);
  }
  record_free(&r);
  sem_destroy(&j.phase1_done);
  sem_destroy(&j.go);
  tg_agent_shutdown();
}

static void smb_full_with_drop_counts_loss(void **state) {
  exhaustion(*state, TG_AGENT_FULL_DROP);
}

static void smb_full_with_stall_loses_nothing(void **state) {
  exhaustion(*state, TG_AGENT_FULL_STALL);
}

static void reconnects_after_service_restart(void **state) {
  test_service_t *ts = *state;
  tg_agent_stats_t before;
  tg_agent_get_stats(&before);
  start_agent(ts, TG_AGENT_FULL_DROP, 0);

  assert_int_equal(test_service_terminate(ts), 0);
  /* A thread keeps writing while the service is away: no crash. */
  writer_job_t j = {.tag = "gone", .count = 1000};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, writer_main, &j), 0);
  pthread_join(th, NULL);

  assert_int_equal(test_service_launch(ts), 0);
  assert_int_equal(tg_agent_wait_connected(WAIT_MS), 0);
  recording_t r;
  record_begin(&r, ts, 4 * 1024);
  writer_job_t j2 = {.tag = "back", .count = 500};
  assert_int_equal(pthread_create(&th, NULL, writer_main, &j2), 0);
  pthread_join(th, NULL);
  record_end(&r);
  assert_int_equal(check_sequence(&r, "back", true, NULL), 500);
  record_free(&r);

  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  assert_true(st.connects - before.connects >= 2);
  assert_true(st.disconnects - before.disconnects >= 1);
  tg_agent_shutdown();
}

static void flush_commits_partial_chunks(void **state) {
  test_service_t *ts = *state;
  start_agent(ts, TG_AGENT_FULL_DROP, 0);
  recording_t r;
  record_begin(&r, ts, 4 * 1024);
  /* This thread writes 3 small packets and stays alive holding its
   * partial chunk; a consumer Flush must still bring them in. */
  for (uint32_t i = 0; i < 3; i++)
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, "idle", i); }
  int flushes = counter_now(&g_flushes);
  flush_roundtrip(&r);
  assert_true(counter_now(&g_flushes) > flushes);
  /* Read before stopping: only the flush can have brought them. */
  r.pk = raw_consumer_read(&r.c, &r.n);
  assert_non_null(r.pk);
  assert_int_equal(check_sequence(&r, "idle", true, NULL), 3);
  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  assert_true(st.flushes_acked > 0);
  free_packets(r.pk, r.n);
  r.pk = NULL;
  assert_int_equal(raw_consumer_disable(&r.c, WAIT_MS), 0);
  raw_consumer_close(&r.c);
  tg_agent_shutdown();
}

/* A thread that wrote a few packets and went idle (alive, no flush): the
 * agent takes its chunk back after the idle time, so the SMB holds nothing
 * and the packets are in the service without any flush. */
static void idle_writer_holds_no_chunk_after_idle_time(void **state) {
  test_service_t *ts = *state;
  recording_t r;
  tg_agent_stats_t before, st;
  begin_with_reserve(ts, &r, 4 * 1024, &before);
  for (uint32_t i = 0; i < 3; i++)
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, "nap", i); }
  /* The agent publishes what it sees at each tick (the resident size at
   * most every 100 ms): wait for the chunk to have been taken back, the
   * SMB to be empty and the pages written to be seen. */
  bool back = false;
  for (int i = 0; i < WAIT_MS / 5 && !back; i++) {
    tg_agent_get_stats(&st);
    back = st.chunks_reclaimed > before.chunks_reclaimed &&
           st.smb_bytes_in_use == 0 && st.smb_resident_bytes > 0;
    if (!back) {
      struct timespec d = {0, 5 * 1000 * 1000};
      nanosleep(&d, NULL);
    }
  }
  assert_true(back);
  /* No hint: the agent's reserve, of which one writer uses the first
   * 256 KiB, and only what it touched is in memory. */
  assert_int_equal(st.smb_size, TG_AGENT_SMB_RESERVE);
  assert_int_equal(st.smb_active_size, 256 * 1024);
  assert_true(st.smb_resident_bytes > 0 &&
              st.smb_resident_bytes <= st.smb_active_size);
  assert_int_equal(st.flushes_acked, before.flushes_acked);
  r.pk = raw_consumer_read(&r.c, &r.n);
  assert_non_null(r.pk);
  assert_int_equal(check_sequence(&r, "nap", true, NULL), 3);
  free_packets(r.pk, r.n);
  r.pk = NULL;
  /* The thread writes again: a new chunk, the sequence goes on. */
  TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, "nap", 3); }
  record_end(&r);
  uint32_t marks = 1;
  /* The first read took packets 0-2 out of the buffer. */
  assert_int_equal(check_sequence(&r, "nap", false, &marks), 1);
  assert_int_equal(marks, 0);
  tg_agent_get_stats(&st);
  assert_int_equal(st.packets_dropped, before.packets_dropped);
  record_free(&r);
  tg_agent_shutdown();
}

/* A failed test leaves the agent running: stop it before the service. */
/* --- many threads, no size hint -------------------------------------------- */

/* |n| threads running |fn(arg)| on |stack|-byte stacks; join_threads()
 * waits for them and frees the array. */
static pthread_t *spawn_threads(unsigned n, size_t stack, void *(*fn)(void *),
                                void *arg) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack);
  pthread_t *th = calloc(n, sizeof(*th));
  assert_non_null(th);
  for (unsigned i = 0; i < n; i++)
    assert_int_equal(pthread_create(&th[i], &attr, fn, arg), 0);
  pthread_attr_destroy(&attr);
  return th;
}

static void join_threads(pthread_t *th, unsigned n) {
  for (unsigned i = 0; i < n; i++) pthread_join(th[i], NULL);
  free(th);
}

#define MANY_THREADS 384u
#define MANY_ROUNDS 30u
#define MANY_PER_ROUND 10u
#define MANY_ROUND_NS 10000000L

typedef struct many_ctx {
  pthread_barrier_t go;
  /* No thread exits (releasing its writer) before all have written: the
   * reserve is owed to the writers registered at once, which on a busy
   * machine would otherwise depend on how late the last ones start. */
  pthread_barrier_t done;
  struct timespec t0; /* the first round, CLOCK_MONOTONIC */
} many_ctx_t;

/* MANY_PER_ROUND packets of ~100 B every MANY_ROUND_NS, on an absolute
 * schedule: all the threads together write ~380 KB per 10 ms, more than
 * the service's default 256 KiB SMB holds. */
static void *many_main(void *arg) {
  many_ctx_t *m = arg;
  pthread_barrier_wait(&m->go);
  char str[80];
  memset(str, 'x', sizeof(str) - 1);
  memcpy(str, "many:", 5);
  str[sizeof(str) - 1] = 0;
  uint32_t seq = 0;
  for (unsigned r = 0; r < MANY_ROUNDS; r++) {
    long ns = m->t0.tv_nsec + (long)r * MANY_ROUND_NS;
    struct timespec at = {m->t0.tv_sec + ns / 1000000000L, ns % 1000000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {
    }
    for (unsigned i = 0; i < MANY_PER_ROUND; i++)
      TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, str, seq++); }
  }
  pthread_barrier_wait(&m->done);
  return NULL;
}

/* Issue 16: an app with hundreds of threads and no smb_size_hint records
 * every packet: the agent's reserve grows past the default 256 KiB (at
 * which this load drops a large part of its packets). */
static void many_threads_with_no_hint_lose_nothing(void **state) {
  test_service_t *ts = *state;
  recording_t r;
  tg_agent_stats_t before, st;
  begin_with_reserve(ts, &r, 32 * 1024, &before);
  unsigned mincores = atomic_load(&g_mincore_calls);
  int64_t t0 = tg_test_now_ms();

  many_ctx_t m;
  pthread_barrier_init(&m.go, NULL, MANY_THREADS + 1);
  pthread_barrier_init(&m.done, NULL, MANY_THREADS);
  pthread_t *th = spawn_threads(MANY_THREADS, 256 * 1024, many_main, &m);
  clock_gettime(CLOCK_MONOTONIC, &m.t0);
  m.t0.tv_sec += 1; /* time for every thread to reach the barrier */
  pthread_barrier_wait(&m.go);
  join_threads(th, MANY_THREADS);
  pthread_barrier_destroy(&m.go);
  pthread_barrier_destroy(&m.done);
  record_end(&r);
  /* Hundreds of writers put the agent on its 1 ms tick: the resident size,
   * a statistic, is still sampled at most every 100 ms (it was sampled at
   * every tick, ~1300 page-cache walks of the whole reserve here). */
  unsigned sampled = atomic_load(&g_mincore_calls) - mincores;
  int64_t ms = tg_test_now_ms() - t0;
  assert_true(sampled >= 1);
  assert_true(sampled <= (unsigned)(ms / 100) + 3);

  /* Marks on a sequence's first packet say only that it is the first (as
   * Perfetto's service flags it); any other would be a loss. */
  size_t got = 0, marks = 0, n_seqs = 0;
  uint32_t seqs[MANY_THREADS * 4];
  for (size_t i = 0; i < r.n; i++) {
    const Perfetto__Protos__TracePacket *p = r.pk[i];
    if (!is_test_packet(p) || strncmp(p->for_testing->str, "many:", 5)) continue;
    got++;
    uint32_t seq = p->trusted_packet_sequence_id;
    bool first = true;
    for (size_t k = 0; k < n_seqs && first; k++) first = seqs[k] != seq;
    if (first) {
      assert_true(n_seqs < sizeof(seqs) / sizeof(seqs[0]));
      seqs[n_seqs++] = seq;
    }
    if (!first && p->has_previous_packet_dropped && p->previous_packet_dropped)
      marks++;
  }
  tg_agent_get_stats(&st);
  assert_int_equal(st.packets_dropped - before.packets_dropped, 0);
  assert_int_equal(marks, 0);
  assert_int_equal(got, MANY_THREADS * MANY_ROUNDS * MANY_PER_ROUND);
  /* The reserve, grown for the writers, all registered at once by the
   * end (4 KiB each: 1.5 MiB, doubled to 2 MiB of pages). */
  assert_int_equal(st.smb_size, TG_AGENT_SMB_RESERVE);
  assert_true(st.smb_active_size >= 2u * 1024 * 1024);
  assert_true(st.smb_active_size <= TG_AGENT_SMB_RESERVE);
  record_free(&r);
  tg_agent_shutdown();
}

/* Issue 62: an app of 4096 threads writing at a moderate pace records
 * every packet with the default SMB, even while the service takes
 * nothing: a thread's packets gather in the chunk it holds between its
 * writes instead of leaving one chunk each (the whole crowd's data fits
 * the reserve; one chunk per packet would not). The service is stopped
 * (SIGSTOP) while the threads write, so the outcome does not depend on
 * how fast it drains on the machine at hand. */
#define CROWD_THREADS 4096u
#define CROWD_PACKETS 12u
#define CROWD_GAP_NS 5000000L
/* The pages a reserve owes its writers stop at 8 MiB (agent/smb_map.h):
 * 4096 writers are owed all of them. */
#define CROWD_OWED_BYTES (8u * 1024u * 1024u)

typedef struct crowd_ctx {
  pthread_barrier_t go, done;
  _Atomic unsigned next_id;
} crowd_ctx_t;

static void *crowd_main(void *arg) {
  crowd_ctx_t *m = arg;
  char str[48];
  snprintf(str, sizeof(str), "crowd%u:",
           atomic_fetch_add(&m->next_id, 1));
  pthread_barrier_wait(&m->go);
  for (uint32_t i = 0; i < CROWD_PACKETS; i++) {
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, str, i); }
    struct timespec gap = {0, CROWD_GAP_NS};
    nanosleep(&gap, NULL);
  }
  pthread_barrier_wait(&m->done);
  return NULL;
}

/* Runs CROWD_THREADS threads of |fn| (a crowd_ctx_t each) with the
 * service stopped (SIGSTOP) from before they write until they are all
 * done; leaves it stopped, for the caller to SIGCONT. */
static void crowd_write_while_stopped(const test_service_t *ts,
                                      void *(*fn)(void *)) {
  crowd_ctx_t m = {0};
  pthread_barrier_init(&m.go, NULL, CROWD_THREADS + 1);
  pthread_barrier_init(&m.done, NULL, CROWD_THREADS);
  pthread_t *th = spawn_threads(CROWD_THREADS, 64 * 1024, fn, &m);
  assert_int_equal(kill(ts->pid, SIGSTOP), 0);
  pthread_barrier_wait(&m.go);
  join_threads(th, CROWD_THREADS);
  pthread_barrier_destroy(&m.go);
  pthread_barrier_destroy(&m.done);
}

/* Every one of the CROWD_THREADS threads' |packets| packets (str
 * |fmt| with the thread's number), each sequence in order, none marked
 * lost (the service marks a sequence's first packet: not a loss). */
static void check_crowd(const recording_t *r, const char *fmt,
                        uint32_t packets) {
  uint32_t *next = calloc(CROWD_THREADS, sizeof(*next));
  assert_non_null(next);
  size_t got = 0, marks = 0;
  for (size_t i = 0; i < r->n; i++) {
    const Perfetto__Protos__TracePacket *p = r->pk[i];
    unsigned id;
    if (!is_test_packet(p) || sscanf(p->for_testing->str, fmt, &id) != 1)
      continue;
    assert_true(id < CROWD_THREADS);
    assert_int_equal(p->for_testing->seq_value, next[id]);
    if (next[id] > 0 && p->has_previous_packet_dropped &&
        p->previous_packet_dropped)
      marks++;
    next[id]++;
    got++;
  }
  for (unsigned i = 0; i < CROWD_THREADS; i++)
    assert_int_equal(next[i], packets);
  free(next);
  assert_int_equal(marks, 0);
  assert_int_equal(got, (size_t)CROWD_THREADS * packets);
}

static void crowd_of_threads_loses_nothing_with_the_default_smb(
    void **state) {
  test_service_t *ts = *state;
  recording_t r;
  tg_agent_stats_t before, st;
  begin_with_reserve(ts, &r, 32 * 1024, &before);

  crowd_write_while_stopped(ts, crowd_main);
  assert_int_equal(kill(ts->pid, SIGCONT), 0);
  tg_agent_get_stats(&st);
  record_end(&r);

  check_crowd(&r, "crowd%u:", CROWD_PACKETS);
  assert_int_equal(st.packets_dropped - before.packets_dropped, 0);
  assert_int_equal(st.smb_size, TG_AGENT_SMB_RESERVE);
  /* Their data fit the pages owed to the writers (8 MiB at most): the
   * rest of the reserve, for a service that falls behind, was never
   * touched. */
  assert_int_equal(st.smb_active_size, CROWD_OWED_BYTES);
  assert_true(st.smb_resident_bytes <= CROWD_OWED_BYTES);
  record_free(&r);
  tg_agent_shutdown();
}

/* Issue 62: the service takes nothing for as long as 4096 threads at
 * 100 packets of 64 B a second take to write STALL_PACKETS each (half a
 * second of them, ~16 MB, twice the pages owed to the writers): the
 * agent's reserve takes it all, and the recording has every packet. The
 * stall is the service stopped (SIGSTOP) while the threads write, so the
 * outcome does not depend on the machine's speed. */
#define STALL_PACKETS 50u

static void *stall_main(void *arg) {
  crowd_ctx_t *m = arg;
  char str[64];
  int n = snprintf(str, sizeof(str), "stall%u:",
                   atomic_fetch_add(&m->next_id, 1));
  memset(str + n, 'x', sizeof(str) - 1 - (size_t)n);
  str[sizeof(str) - 1] = 0;
  pthread_barrier_wait(&m->go);
  for (uint32_t i = 0; i < STALL_PACKETS; i++)
    TG_DS_TRACE(g_ds, inst, w) { write_test_packet(w, str, i); }
  pthread_barrier_wait(&m->done);
  return NULL;
}

static void crowd_loses_nothing_while_the_service_stalls(void **state) {
  test_service_t *ts = *state;
  recording_t r;
  tg_agent_stats_t before, st;
  begin_with_reserve(ts, &r, 48 * 1024, &before);

  crowd_write_while_stopped(ts, stall_main);
  /* The agent's counters are a snapshot its thread takes at each tick. */
  int64_t until = tg_test_now_ms() + WAIT_MS;
  do {
    struct timespec tick = {0, 1000000L};
    nanosleep(&tick, NULL);
    tg_agent_get_stats(&st);
  } while (st.smb_active_size <= CROWD_OWED_BYTES &&
           tg_test_now_ms() < until);
  assert_int_equal(kill(ts->pid, SIGCONT), 0);
  size_t active = st.smb_active_size;
  record_end(&r);
  tg_agent_get_stats(&st);

  check_crowd(&r, "stall%u:", STALL_PACKETS);
  assert_int_equal(st.packets_dropped - before.packets_dropped, 0);
  /* The stall took the reserve past the owed pages. */
  assert_true(active > CROWD_OWED_BYTES);
  assert_true(active <= TG_AGENT_SMB_RESERVE);
  record_free(&r);
  tg_agent_shutdown();
}

/* The agent's thread does not preempt the app or the service at each
 * wake-up (agent.c): SCHED_BATCH, unless the app chose a policy for the
 * thread that started the agent, which it inherits and keeps. */
static void agent_thread_runs_as_batch_unless_the_app_chose(void **state) {
  test_service_t *ts = *state;
  start_agent(ts, TG_AGENT_FULL_STALL, 0);
  recording_t r;
  record_begin(&r, ts, 1024);
  pthread_mutex_lock(&g_mu);
  int policy = g_start_policy;
  pthread_mutex_unlock(&g_mu);
  assert_int_equal(policy, SCHED_BATCH);
  record_end(&r);
  record_free(&r);
  tg_agent_shutdown();

  /* The app's own policy: SCHED_RR where this process may take it (root,
   * or an RLIMIT_RTPRIO), so that the agent's thread runs at once
   * however busy the machine is; else SCHED_IDLE, the one other policy
   * any process may take, whose thread runs only when a core has nothing
   * else to do (on a machine saturated even by niced work it may not
   * connect in time: it did not, once, when CI's builds ran beside the
   * tests). Either is a policy the app chose, which the agent keeps. */
  int chosen = SCHED_RR;
  int rv = start_agent_at_policy(ts, SCHED_RR, 1);
  if (rv == EPERM) {
    chosen = SCHED_IDLE;
    rv = start_agent_at_policy(ts, SCHED_IDLE, 0);
  }
  assert_int_equal(rv, 0);
  record_begin(&r, ts, 1024);
  pthread_mutex_lock(&g_mu);
  policy = g_start_policy;
  pthread_mutex_unlock(&g_mu);
  assert_int_equal(policy, chosen);
  record_end(&r);
  record_free(&r);
  tg_agent_shutdown();
}

/* --- start acks ----------------------------------------------------------- */

#define ACK_DS_NAME "test.agent.ack"
static tg_ds_t *g_ack_ds;
static int g_ack_starts;
static unsigned g_ack_inst;

static void on_ack_start(void *ctx, unsigned inst, const uint8_t *c, size_t n) {
  (void)ctx, (void)c, (void)n;
  pthread_mutex_lock(&g_mu);
  g_ack_inst = inst;
  pthread_mutex_unlock(&g_mu);
  bump(&g_ack_starts);
}

/* The slow_starting_data_sources events of |pk|, each naming this
 * process's ACK_DS_NAME. */
static size_t slow_start_events(Perfetto__Protos__TracePacket **pk, size_t n) {
  size_t events = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT ||
        pk[i]->service_event->event_type_case !=
            PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_SLOW_STARTING_DATA_SOURCES)
      continue;
    const Perfetto__Protos__TracingServiceEvent__DataSources *d =
        pk[i]->service_event->slow_starting_data_sources;
    assert_int_equal(d->n_data_source, 1);
    assert_string_equal(d->data_source[0]->producer_name, "agent-e2e");
    assert_string_equal(d->data_source[0]->data_source_name, ACK_DS_NAME);
    events++;
  }
  return events;
}

/* Records ACK_DS_NAME; with |ack|, the app confirms the start from this
 * thread and the service sees every instance started before the stop.
 * Returns the number of slow_starting_data_sources events. */
static size_t record_ack_ds(const test_service_t *ts, bool ack) {
  raw_consumer_t c;
  simple_cfg_t sc;
  int starts = counter_now(&g_ack_starts);
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  simple_cfg_init(&sc, 256, 2 /* DISCARD */, ACK_DS_NAME);
  assert_int_equal(raw_consumer_enable(&c, &sc.cfg, -1), 0);
  assert_true(wait_count(&g_ack_starts, starts + 1));
  if (ack) {
    Perfetto__Protos__ObserveEventsRequest oreq =
        PERFETTO__PROTOS__OBSERVE_EVENTS_REQUEST__INIT;
    Perfetto__Protos__ObservableEvents__Type types[] = {
        PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED};
    oreq.n_events_to_observe = 1;
    oreq.events_to_observe = types;
    int64_t rid = raw_invoke(&c.conn, "ObserveEvents", &oreq.base, -1, false);
    assert_true(rid > 0);
    pthread_mutex_lock(&g_mu);
    unsigned inst = g_ack_inst;
    pthread_mutex_unlock(&g_mu);
    tg_ds_notify_started(g_ack_ds, inst);
    tg_ds_notify_started(g_ack_ds, inst); /* once is enough; twice is harmless */
    bool all = false;
    while (!all) {
      ProtobufCMessage *m = NULL;
      assert_int_equal(raw_wait_reply(&c.conn, (uint64_t)rid,
                                      &perfetto__protos__observe_events_response__descriptor,
                                      &m, WAIT_MS),
                       1);
      Perfetto__Protos__ObserveEventsResponse *r = (void *)m;
      all = r && r->events && r->events->all_data_sources_started;
      if (m) protobuf_c_message_free_unpacked(m, NULL);
    }
  }
  assert_int_equal(raw_consumer_disable(&c, WAIT_MS), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  size_t events = slow_start_events(pk, n);
  free_packets(pk, n);
  raw_consumer_close(&c);
  return events;
}

/* TG_DS_WILL_NOTIFY_ON_START: an instance the app confirms is started for
 * the service; one it never confirms is named in the trace as not
 * started. */
static void start_is_confirmed_by_the_app(void **state) {
  test_service_t *ts = *state;
  if (!g_ack_ds) {
    tg_ds_options_t o = {.name = ACK_DS_NAME, .cbs = {.on_start = on_ack_start}};
    assert_int_equal(tg_ds_register_flags(&o, 0x80, &g_ack_ds), -EINVAL);
    assert_int_equal(
        tg_ds_register_flags(&o, TG_DS_WILL_NOTIFY_ON_START, &g_ack_ds), 0);
  }
  start_agent(ts, TG_AGENT_FULL_DROP, 0);
  assert_int_equal(record_ack_ds(ts, true), 0);
  assert_int_equal(record_ack_ds(ts, false), 1);
  /* A data source registered without the flag: the call does nothing. */
  tg_ds_notify_started(g_ds, 0);
  tg_agent_shutdown();
}

static int teardown(void **state) {
  tg_agent_shutdown();
  return test_service_teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(four_threads_arrive_complete_and_in_order,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(large_packet_arrives_intact,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(smb_full_with_drop_counts_loss,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(smb_full_with_stall_loses_nothing,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(reconnects_after_service_restart,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(idle_writer_holds_no_chunk_after_idle_time,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(many_threads_with_no_hint_lose_nothing,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(
          crowd_of_threads_loses_nothing_with_the_default_smb,
          test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(
          crowd_loses_nothing_while_the_service_stalls, test_service_setup,
          teardown),
      cmocka_unit_test_setup_teardown(flush_commits_partial_chunks,
                                      test_service_setup, teardown),
      cmocka_unit_test_setup_teardown(
          agent_thread_runs_as_batch_unless_the_app_chose, test_service_setup,
          teardown),
      cmocka_unit_test_setup_teardown(start_is_confirmed_by_the_app,
                                      test_service_setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
