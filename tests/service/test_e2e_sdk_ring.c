/* A Perfetto SDK app's track events through a ring that wrapped, end to
 * end: tracegated, Perfetto's ref_producer (an SDK app, system backend:
 * PERFETTO_BIN; skipped without it) writing slices as fast as it can into
 * a small RING_BUFFER whose session clears incremental state every
 * clear_period_ms, and the CLI's clone of that session.
 *
 * Whether a clear lands inside the ring's span depends on how fast the
 * app writes, so the test does not wait for one to happen by itself; it
 * arranges one, by pausing processes (SIGSTOP) rather than by time:
 *  1. it waits until the service's own counter (bytes_overwritten) says
 *     the ring was overwritten WRAPS times over, and at least twice past
 *     the moment (t_wrap, CLOCK_BOOTTIME) it first saw it overwritten, so
 *     that everything the ring holds was written after t_wrap;
 *  2. it stops the app, waits until a probe producer of the same
 *     session (a raw producer whose data source handles clears) has been
 *     sent two clears since, so that the service has sent the stopped
 *     app at least two; stops the service and lets the app run (its IPC
 *     thread at a real-time priority reads the clears before its writing
 *     thread writes on, and the writer then starts its next event with a
 *     SEQ_INCREMENTAL_STATE_CLEARED packet) until the writer has run
 *     APP_RUN_NS, into its shared memory only; stops the app again and
 *     lets the service read what it wrote;
 *  3. it clones the session (the CLI, --clone-by-name) with the app
 *     stopped, so that what followed the clears is still in the ring.
 * Rounds go on until the clone holds two SEQ_INCREMENTAL_STATE_CLEARED
 * packets on each of the app's sequences and no packet lost after the
 * last one (ROUNDS_MS at most).
 *
 * What is asserted on the clone:
 * - our own reading of the app's sequences: after each clear, every name,
 *   category, track and clock an event uses was defined at or after that
 *   clear, and at least one slice decodes after the last one;
 * - trace processor imports it, finds the app's slices (as many as we
 *   decoded), all after t_wrap (so they follow a clear: the app's first
 *   packets are long gone), and skips at least the packets we found
 *   needing state the ring no longer holds;
 * - the fleet merge (consumer/fleet/merge.h) of the clone as one host
 *   leaves out those same packets, counted as the ring's edge or (after a
 *   loss the app itself reported) lost, exactly as we count them, finds
 *   nothing malformed, and trace processor skips nothing of what it wrote
 *   and reads the same slices from it.
 * Every process the test started is stopped in its teardown, also when
 * it fails half-way (the stopped ones are continued first). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "test_proc.h"
#include "test_service.h"
#include "tracegate/pb_wire.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define SESSION "sdk_ring"
#define RING_KB 4096u
/* The app's shared memory: the most it can write while the service is
 * stopped (a run is far shorter); the ring holds 16 of it. */
#define SDK_SMB_KB 256u
#define CLEAR_PERIOD_MS 100u
/* A clone waits this long for the stopped app's flush. */
#define FLUSH_TIMEOUT_MS 500u
#define WRAPS 4u
/* How long rounds (step 2 once, then a clone) may go on. A round can
 * leave no clear in the ring: when the app's shared memory was full as it
 * was stopped (it writes faster than the service reads), its writer drops
 * what it writes, the clear's packets too, until it gets a chunk again,
 * and marks the next packet previous_packet_dropped. The next round's
 * clear is then written (seen: the first or the second round). */
#define ROUNDS_MS 200000
/* CPU time of the app's writing thread in a run (step 2). */
#define APP_RUN_NS 1000000ull
#define WAIT_MS 60000
#define PROBE_DS "tg.test.clear_probe"
#define SEQ_CLEARED 1u
#define SEQ_NEEDS_STATE 2u

/* A clone's packets: each one's bytes in |data| and unpacked. */
typedef struct packet {
  const uint8_t *p;
  size_t n;
  Perfetto__Protos__TracePacket *pk;
} packet_t;

typedef struct clone_trace {
  uint8_t *data;
  size_t len;
  packet_t *pk;
  size_t n;
} clone_trace_t;

typedef struct fixture {
  test_service_t ts;
  bool service_up;
  bool service_stopped; /* SIGSTOP */
  raw_consumer_t consumer;
  bool consumer_up;
  raw_producer_t probe;
  bool probe_up;
  pid_t app; /* ref_producer, 0: none */
  clone_trace_t clone; /* the last one loaded; data NULL: none */
  char ref_producer[512];
} fixture_t;

static fixture_t fx;

static void clone_free(clone_trace_t *t);

static int setup(void **state) {
  memset(&fx, 0, sizeof(fx));
  *state = &fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  int rv = 0;
  struct sched_param sp = {.sched_priority = 0};
  sched_setscheduler(0, SCHED_OTHER, &sp);
  if (f->clone.data) clone_free(&f->clone);
  if (f->app > 0) {
    tg_test_stop(f->app, SIGKILL, WAIT_MS);
    f->app = 0;
  }
  if (f->service_stopped) kill(f->ts.pid, SIGCONT);
  if (f->probe_up) raw_producer_close(&f->probe);
  if (f->consumer_up) raw_consumer_close(&f->consumer);
  if (f->service_up) {
    int status = test_service_stop(&f->ts);
    if (status != 0) {
      fprintf(stderr, "tracegated ended with wait status %d\n", status);
      rv = -1;
    }
  }
  return rv;
}

static uint64_t boottime_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_BOOTTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void signal_proc(pid_t pid, int sig) {
  assert_int_equal(kill(pid, sig), 0);
}

static void service_pause(fixture_t *f, bool stop) {
  signal_proc(f->ts.pid, stop ? SIGSTOP : SIGCONT);
  f->service_stopped = stop;
}

/* The probe's data source: registered as handling incremental state
 * clears, so that the service sends it every clear the app gets. */
static void probe_connect(fixture_t *f) {
  assert_int_equal(raw_producer_connect(&f->probe, &f->ts, "clear.probe", NULL,
                                        4, 16, false), 0);
  f->probe_up = true;
  Perfetto__Protos__DataSourceDescriptor d =
      PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = (char *)PROBE_DS;
  d.has_handles_incremental_state_clear = 1;
  d.handles_incremental_state_clear = 1;
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  assert_int_equal(raw_call(&f->probe.conn, "RegisterDataSource", &r.base, -1,
                            NULL, NULL, 5000), 1);
}

/* The session: a RING_KB ring, track_event (category "bench") and the
 * probe, clears every CLEAR_PERIOD_MS, owned by f->consumer. */
static void session_start(fixture_t *f) {
  assert_int_equal(raw_consumer_connect(&f->consumer, &f->ts), 0);
  f->consumer_up = true;
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__BufferConfig buf =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
  Perfetto__Protos__TraceConfig__BufferConfig *bufp = &buf;
  buf.has_size_kb = 1;
  buf.size_kb = RING_KB;
  buf.has_fill_policy = 1;
  buf.fill_policy =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
  cfg.n_buffers = 1;
  cfg.buffers = &bufp;

  Perfetto__Protos__TrackEventConfig te = PERFETTO__PROTOS__TRACK_EVENT_CONFIG__INIT;
  char *cats[] = {(char *)"bench"};
  te.n_enabled_categories = 1;
  te.enabled_categories = cats;
  Perfetto__Protos__DataSourceConfig dsc[2] = {
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT,
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT};
  dsc[0].name = (char *)"track_event";
  dsc[0].track_event_config = &te;
  dsc[1].name = (char *)PROBE_DS;
  Perfetto__Protos__TraceConfig__DataSource ds[2] = {
      PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT,
      PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT};
  Perfetto__Protos__TraceConfig__DataSource *dsp[2] = {&ds[0], &ds[1]};
  for (size_t i = 0; i < 2; i++) ds[i].config = &dsc[i];
  cfg.n_data_sources = 2;
  cfg.data_sources = dsp;

  Perfetto__Protos__TraceConfig__IncrementalStateConfig ic =
      PERFETTO__PROTOS__TRACE_CONFIG__INCREMENTAL_STATE_CONFIG__INIT;
  ic.has_clear_period_ms = 1;
  ic.clear_period_ms = CLEAR_PERIOD_MS;
  cfg.incremental_state_config = &ic;
  cfg.has_flush_timeout_ms = 1;
  cfg.flush_timeout_ms = FLUSH_TIMEOUT_MS;
  cfg.unique_session_name = (char *)SESSION;
  assert_int_equal(raw_consumer_enable(&f->consumer, &cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&f->probe, WAIT_MS), 0);
}

static void app_start(fixture_t *f) {
  char log[160];
  snprintf(log, sizeof(log), "%s/ref_producer.log", f->ts.dir);
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  char smb[16];
  snprintf(smb, sizeof(smb), "%u", SDK_SMB_KB);
  /* A count it cannot reach within the test on any machine: the test
   * kills it. */
  const char *argv[] = {"ref_producer", "--count", "1000000000000", "--mode",
                        "slice", "--category", "bench", "--shmem-kb", smb,
                        NULL};
  assert_int_equal(setenv("PERFETTO_PRODUCER_SOCK_NAME", f->ts.producer_sock, 1),
                   0);
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = f->ref_producer;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = fd;
  s.stderr_fd = fd;
  f->app = tg_test_spawn(&s);
  close(fd);
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  assert_true(f->app > 0);
}

/* The ring's bytes_overwritten, as the service counts it. */
static uint64_t overwritten(fixture_t *f) {
  Perfetto__Protos__GetTraceStatsResponse *r = raw_consumer_stats(&f->consumer);
  assert_non_null(r);
  assert_non_null(r->trace_stats);
  assert_true(r->trace_stats->n_buffer_stats >= 1);
  uint64_t v = r->trace_stats->buffer_stats[0]->bytes_overwritten;
  perfetto__protos__get_trace_stats_response__free_unpacked(r, NULL);
  return v;
}

/* Step 1: returns t_wrap once the ring was overwritten WRAPS times over
 * and twice past t_wrap. */
static uint64_t wait_wraps(fixture_t *f) {
  const uint64_t ring = RING_KB * 1024ull;
  int64_t end = tg_test_now_ms() + WAIT_MS;
  uint64_t t_wrap = 0, at_wrap = 0, v = 0;
  while (tg_test_now_ms() < end) {
    uint64_t now = boottime_ns();
    v = overwritten(f);
    if (!t_wrap && v > 0) {
      t_wrap = now; /* taken before the read: the ring wrapped after it */
      at_wrap = v;
    }
    if (t_wrap && v >= WRAPS * ring && v >= at_wrap + 2 * ring) {
      fprintf(stderr, "ring overwritten %" PRIu64 " bytes (%" PRIu64
              " at t_wrap)\n", v, at_wrap);
      return t_wrap;
    }
    sleep_ms(20);
  }
  fail_msg("the ring was overwritten only %" PRIu64 " bytes in %d ms", v,
           WAIT_MS);
  return 0;
}

/* Until the probe has been sent |n| clears since this call. */
static void wait_clears(fixture_t *f, unsigned n) {
  while (raw_producer_poll(&f->probe, 0) == 1) {
  }
  unsigned want = f->probe.clears + n;
  int64_t end = tg_test_now_ms() + WAIT_MS;
  while (f->probe.clears < want && tg_test_now_ms() < end)
    assert_true(raw_producer_poll(&f->probe, 1000) >= 0);
  if (f->probe.clears < want)
    fail_msg("the service sent no incremental state clear in %d ms", WAIT_MS);
}

/* The app's thread named |comm| (its first one), or 0. */
static pid_t app_thread(pid_t app, const char *comm) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)app);
  DIR *d = opendir(dir);
  assert_non_null(d);
  pid_t found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[320], name[32] = "";
    snprintf(path, sizeof(path), "%s/%.32s/comm", dir, e->d_name);
    FILE *fp = fopen(path, "r");
    if (!fp) continue;
    if (fgets(name, sizeof(name), fp)) name[strcspn(name, "\n")] = 0;
    fclose(fp);
    if (!strcmp(name, comm)) found = (pid_t)atoi(e->d_name);
  }
  closedir(d);
  return found;
}

/* The CPU time thread |tid| of |pid| has run, in ns (schedstat). */
static unsigned long long run_ns(pid_t pid, pid_t tid) {
  char path[96];
  snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  unsigned long long ns = 0;
  assert_int_equal(fscanf(fp, "%llu", &ns), 1);
  fclose(fp);
  return ns;
}

static int set_fifo(pid_t tid, int prio) {
  struct sched_param sp = {.sched_priority = prio};
  return sched_setscheduler(tid, prio ? SCHED_FIFO : SCHED_OTHER, &sp);
}

/* The app's IPC thread (the SDK's "TracingMuxer", which reads the
 * service's commands) gets a real-time priority, so that once continued
 * it reads a pending clear before the writing thread writes on: the
 * writer then starts its next event with the clear (a new
 * SEQ_INCREMENTAL_STATE_CLEARED packet) at once, whatever the two
 * threads' speeds. False (said) when the system refuses it. */
static bool app_muxer_first(fixture_t *f) {
  pid_t muxer = 0;
  int64_t end = tg_test_now_ms() + WAIT_MS;
  while (!(muxer = app_thread(f->app, "TracingMuxer")) && tg_test_now_ms() < end)
    sleep_ms(10);
  if (!muxer) fail_msg("ref_producer (pid %d) has no TracingMuxer thread", (int)f->app);
  if (set_fifo(muxer, 1) < 0) {
    fprintf(stderr, "[ SKIPPED  ] SCHED_FIFO for the app's TracingMuxer "
                    "thread: %s\n", strerror(errno));
    return false;
  }
  return true;
}

/* Step 2, once: a clear for the stopped app, a short run of it with the
 * service stopped, the app stopped again and the service going on. The
 * app is running or stopped on entry, stopped on return. The run ends
 * once the app's writing thread ran APP_RUN_NS: long enough to write the
 * clear and some events after it on any machine, short enough not to
 * fill its shared memory (a writer that finds it full drops what it
 * writes, a clear's packets too, until the service read it); the test
 * runs at a higher real-time priority meanwhile, so that it ends the
 * run in time. */
static void clear_round(fixture_t *f) {
  signal_proc(f->app, SIGSTOP);
  wait_clears(f, 2);
  service_pause(f, true);
  unsigned long long r0 = run_ns(f->app, f->app);
  assert_int_equal(set_fifo(0, 2), 0);
  signal_proc(f->app, SIGCONT);
  int64_t end = tg_test_now_ms() + WAIT_MS;
  while (run_ns(f->app, f->app) < r0 + APP_RUN_NS && tg_test_now_ms() < end) {
    struct timespec t = {0, 100000};
    nanosleep(&t, NULL);
  }
  signal_proc(f->app, SIGSTOP);
  assert_int_equal(set_fifo(0, 0), 0);
  service_pause(f, false);
}

static void clone_session(fixture_t *f, const char *trace) {
  const char *args[] = {"record", "--socket", f->ts.consumer_sock,
                        "--clone-by-name", SESSION, "-o", trace, NULL};
  pid_t pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                                TG_TEST_FD_INHERIT);
  assert_true(pid > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(pid, WAIT_MS)), 0);
}

/* --- the clone's packets ------------------------------------------------------- */

static void clone_load(const char *path, clone_trace_t *t) {
  memset(t, 0, sizeof(*t));
  t->data = tg_test_read_file(path, &t->len);
  assert_non_null(t->data);
  size_t cap = 0;
  tg_pb_reader_t r;
  tg_pb_field_t fl;
  tg_pb_reader_init(&r, t->data, t->len);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &fl)) == 1) {
    assert_int_equal(fl.id, 1); /* Trace.packet */
    assert_int_equal(fl.type, TG_PB_WT_LEN);
    if (t->n == cap) {
      cap = cap ? 2 * cap : 4096;
      packet_t *grown = realloc(t->pk, cap * sizeof(*t->pk));
      assert_non_null(grown);
      t->pk = grown;
    }
    packet_t *p = &t->pk[t->n++];
    p->p = fl.data;
    p->n = fl.size;
    p->pk = perfetto__protos__trace_packet__unpack(NULL, fl.size, fl.data);
    assert_non_null(p->pk);
  }
  assert_int_equal(rv, 0);
}

static void clone_free(clone_trace_t *t) {
  for (size_t i = 0; i < t->n; i++)
    if (t->pk[i].pk) perfetto__protos__trace_packet__free_unpacked(t->pk[i].pk, NULL);
  free(t->pk);
  free(t->data);
  memset(t, 0, sizeof(*t));
}

/* --- our reading of the app's sequences ------------------------------------------ */

#define MAX_SEQS 8
#define MAX_IDS 256

typedef struct id_set {
  uint64_t v[MAX_IDS];
  size_t n;
} id_set_t;

static void id_add(id_set_t *s, uint64_t v) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == v) return;
  assert_true(s->n < MAX_IDS);
  s->v[s->n++] = v;
}

static bool id_has(const id_set_t *s, uint64_t v) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i] == v) return true;
  return false;
}

/* One sequence of the app, as trace processor follows it: whether its
 * incremental state is valid, and what was defined since its last clear. */
typedef struct app_seq {
  uint32_t id;
  bool valid;
  unsigned clears;
  id_set_t names, cats, tracks, clocks;
  uint64_t default_track;
  uint32_t default_clock;
  /* Packets that need state while it is not valid: before the first
   * clear, and after a loss until the next clear. */
  uint64_t before_first, after_loss;
  uint64_t events, begins; /* decoded */
  uint64_t begins_since_last_clear;
  uint64_t lost_since_last_clear;
} app_seq_t;

typedef struct app_reading {
  app_seq_t seq[MAX_SEQS];
  size_t n;
  uint64_t edge, lost, begins;
  unsigned min_clears;
  /* Packets lost after the last clear of a sequence, summed. */
  uint64_t lost_at_end;
} app_reading_t;

static app_seq_t *seq_of(app_reading_t *a, uint32_t id) {
  for (size_t i = 0; i < a->n; i++)
    if (a->seq[i].id == id) return &a->seq[i];
  assert_true(a->n < MAX_SEQS);
  app_seq_t *s = &a->seq[a->n++];
  memset(s, 0, sizeof(*s));
  s->id = id;
  return s;
}

static void seq_clear(app_seq_t *s) {
  s->names.n = s->cats.n = s->tracks.n = s->clocks.n = 0;
  s->default_track = 0;
  s->default_clock = 0;
  s->valid = true;
  s->clears++;
  s->begins_since_last_clear = 0;
  s->lost_since_last_clear = 0;
}

/* An event on |s| with valid state: everything it refers to was defined
 * on its sequence since the last clear. */
static void check_event(app_seq_t *s, size_t i,
                        const Perfetto__Protos__TracePacket *p) {
  const Perfetto__Protos__TrackEvent *te = p->track_event;
  if (te->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID &&
      !id_has(&s->names, te->name_iid))
    fail_msg("sequence %u, packet %zu (clear %u): event name iid %" PRIu64
             " not interned since the clear", s->id, i, s->clears,
             te->name_iid);
  for (size_t k = 0; k < te->n_category_iids; k++)
    if (!id_has(&s->cats, te->category_iids[k]))
      fail_msg("sequence %u, packet %zu (clear %u): category iid %" PRIu64
               " not interned since the clear", s->id, i, s->clears,
               te->category_iids[k]);
  uint64_t track = te->has_track_uuid ? te->track_uuid : s->default_track;
  if (track && !id_has(&s->tracks, track))
    fail_msg("sequence %u, packet %zu (clear %u): track %" PRIx64
             " not described since the clear", s->id, i, s->clears, track);
  uint32_t clock = p->has_timestamp_clock_id ? p->timestamp_clock_id
                                             : s->default_clock;
  /* Clocks 64-127 are the sequence's own, defined by its snapshots. */
  if (clock >= 64 && clock <= 127 && !id_has(&s->clocks, clock))
    fail_msg("sequence %u, packet %zu (clear %u): clock %u has no snapshot "
             "since the clear", s->id, i, s->clears, clock);
  s->events++;
  if (te->has_type &&
      te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN) {
    s->begins++;
    s->begins_since_last_clear++;
  }
}

/* Reads the packets of |app| (trusted_pid) in |t| as trace processor
 * does, failing the test on an event whose state is not there. */
static void read_app(const clone_trace_t *t, pid_t app, app_reading_t *a) {
  memset(a, 0, sizeof(*a));
  for (size_t i = 0; i < t->n; i++) {
    const Perfetto__Protos__TracePacket *p = t->pk[i].pk;
    if (!p->has_trusted_pid || p->trusted_pid != app) continue;
    assert_int_equal(
        p->optional_trusted_packet_sequence_id_case,
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
    app_seq_t *s = seq_of(a, p->trusted_packet_sequence_id);
    uint32_t flags = p->has_sequence_flags ? p->sequence_flags : 0;
    bool cleared = (flags & SEQ_CLEARED) ||
                   (p->has_incremental_state_cleared && p->incremental_state_cleared);
    if (cleared)
      seq_clear(s);
    else if (p->has_previous_packet_dropped && p->previous_packet_dropped)
      s->valid = false;
    /* Trace processor reads a ClockSnapshot before it looks at the
     * state. */
    bool clock = p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
    if ((flags & SEQ_NEEDS_STATE) && !s->valid && !clock) {
      if (s->clears == 0)
        s->before_first++;
      else
        s->after_loss++, s->lost_since_last_clear++;
      continue;
    }
    const Perfetto__Protos__InternedData *id = p->interned_data;
    for (size_t k = 0; id && k < id->n_event_names; k++)
      id_add(&s->names, id->event_names[k]->iid);
    for (size_t k = 0; id && k < id->n_event_categories; k++)
      id_add(&s->cats, id->event_categories[k]->iid);
    const Perfetto__Protos__TracePacketDefaults *d = p->trace_packet_defaults;
    if (d && d->track_event_defaults && d->track_event_defaults->has_track_uuid)
      s->default_track = d->track_event_defaults->track_uuid;
    if (d && d->has_timestamp_clock_id) s->default_clock = d->timestamp_clock_id;
    if (clock)
      for (size_t k = 0; k < p->clock_snapshot->n_clocks; k++)
        id_add(&s->clocks, p->clock_snapshot->clocks[k]->clock_id);
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR &&
        p->track_descriptor->has_uuid)
      id_add(&s->tracks, p->track_descriptor->uuid);
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT) {
      /* An event without valid state is one trace processor skips;
       * otherwise it must resolve. */
      if (flags & SEQ_NEEDS_STATE) check_event(s, i, p);
    }
  }
  a->min_clears = a->n ? ~0u : 0;
  for (size_t k = 0; k < a->n; k++) {
    app_seq_t *s = &a->seq[k];
    /* The merge's kinds: before a first clear that comes is the ring's
     * edge; on a sequence that never clears, lost. */
    if (s->clears) {
      a->edge += s->before_first;
      a->lost += s->after_loss;
    } else {
      a->lost += s->before_first;
    }
    a->begins += s->begins;
    a->lost_at_end += s->lost_since_last_clear;
    if (s->begins && s->clears < a->min_clears) a->min_clears = s->clears;
    fprintf(stderr, "app sequence %u: %u clears, %" PRIu64 " events (%" PRIu64
            " slices) decoded, %" PRIu64 " after the last clear; %" PRIu64
            " before the first clear, %" PRIu64 " after a loss\n", s->id,
            s->clears, s->events, s->begins, s->begins_since_last_clear,
            s->before_first, s->after_loss);
  }
  if (a->min_clears == ~0u) a->min_clears = 0;
}

/* --- trace processor --------------------------------------------------------------- */

typedef struct tp_counts {
  unsigned long long slices, min_ts, skipped;
} tp_counts_t;

static const char TP_SQL[] =
    "select (select count(*) from slice) || ',' || "
    "(select ifnull(min(ts), 0) from slice) || ',' || "
    "(select ifnull(sum(value), 0) from stats where name = "
    "'tokenizer_skipped_packets')";

static tp_counts_t tp_read(const char *trace) {
  char out[256], clean[256];
  assert_int_equal(tg_test_tp_answer(trace, TP_SQL, out, sizeof(out)), 1);
  size_t k = 0;
  for (const char *s = out; *s && *s != '\n' && k + 1 < sizeof(clean); s++)
    if (*s != '"') clean[k++] = *s;
  clean[k] = 0;
  tp_counts_t c;
  if (sscanf(clean, "%llu,%llu,%llu", &c.slices, &c.min_ts, &c.skipped) != 3)
    fail_msg("trace processor on %s: '%s'", trace, clean);
  fprintf(stderr, "trace processor on %s: %llu slices from %llu, %llu "
          "packets skipped\n", trace, c.slices, c.min_ts, c.skipped);
  return c;
}

/* --- the merge -------------------------------------------------------------------- */

static int sink_write(void *ctx, const uint8_t *p, size_t n,
                      const uint8_t *tail, size_t tail_n) {
  tg_buf_t *out = ctx;
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = (uint8_t)TG_PB_TAG(1, TG_PB_WT_LEN); /* Trace.packet */
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, n + tail_n) - hdr);
  if (tg_buf_append(out, hdr, h) < 0 || tg_buf_append(out, p, n) < 0 ||
      (tail_n && tg_buf_append(out, tail, tail_n) < 0))
    return -ENOMEM;
  return 0;
}

/* The clone merged as the one host of a fleet trace into |path|; what the
 * merge counted for it stays in |mh| (the caller frees it). */
static void merge_clone(const clone_trace_t *t, const char *path,
                        tg_merge_host_t *mh) {
  tg_buf_t out;
  tg_buf_init(&out, 0);
  tg_merge_t m;
  tg_merge_init(&m, sink_write, &out);
  tg_merge_host_init(mh, 0);
  tg_merge_self_t self;
  tg_merge_self_read(&self);
  assert_int_equal(tg_merge_head(&m, &self), 0);
  tg_fleet_host_report_t rep;
  memset(&rep, 0, sizeof(rep));
  assert_int_equal(tg_merge_host_preamble(&m, mh, &rep, "sdk-host"), 0);
  for (size_t i = 0; i < t->n; i++)
    assert_int_equal(tg_merge_packet(&m, mh, t->pk[i].p, t->pk[i].n), 0);
  tg_merge_host_end(mh);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(out.data + out.off, 1, out.len - out.off, f),
                   out.len - out.off);
  assert_int_equal(fclose(f), 0);
  tg_merge_free(&m);
  tg_buf_free(&out);
}

/* --- the test ---------------------------------------------------------------------- */

static void sdk_track_events_survive_a_wrapped_ring(void **state) {
  fixture_t *f = *state;
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "[ SKIPPED  ] ref_producer (a Perfetto SDK app) is one of "
                    "Perfetto's binaries: PERFETTO_BIN is not set\n");
    skip();
  }
  snprintf(f->ref_producer, sizeof(f->ref_producer), "%s/ref_producer", bin);
  if (access(f->ref_producer, X_OK) != 0)
    fail_msg("PERFETTO_BIN=%s: no ref_producer there", bin);

  assert_int_equal(test_service_start(&f->ts), 0);
  f->service_up = true;
  probe_connect(f);
  session_start(f);
  int64_t t_start = tg_test_now_ms();
  app_start(f);
  if (!app_muxer_first(f)) skip();
  uint64_t t_wrap = wait_wraps(f);

  char trace[160];
  clone_trace_t *t = &f->clone;
  app_reading_t a;
  int round = 0;
  int64_t rounds_end = tg_test_now_ms() + ROUNDS_MS;
  for (;;) {
    clear_round(f);
    snprintf(trace, sizeof(trace), "%s/clone%d.pftrace", f->ts.dir, round);
    clone_session(f, trace);
    clone_load(trace, t);
    read_app(t, f->app, &a);
    if (a.n && a.min_clears >= 2 && a.lost_at_end == 0) break;
    clone_free(t);
    if (++round, tg_test_now_ms() > rounds_end)
      fail_msg("%d rounds in %d ms left no clone with two clears of the "
               "app's sequences after its last loss", round, ROUNDS_MS);
  }
  fprintf(stderr, "clone after %d round(s), %" PRId64 " ms: %zu packets\n",
          round + 1, tg_test_now_ms() - t_start, t->n);

  /* Slices decode after the last clear of every sequence that has any. */
  for (size_t k = 0; k < a.n; k++)
    if (a.seq[k].begins) assert_true(a.seq[k].begins_since_last_clear > 0);

  tp_counts_t c = tp_read(trace);
  assert_true(c.slices > 0);
  assert_int_equal(c.slices, a.begins);
  /* Trace processor skips at least the packets we found without state.
   * Reading the clone alone it may skip a few more that are not the
   * app's state (3 more than 158016 were seen); the merged file, which
   * keeps every packet we read, must have none skipped (below). */
  assert_true(c.skipped >= a.edge + a.lost);
  if (c.min_ts <= t_wrap)
    fail_msg("a slice at %llu, before the ring first wrapped (%" PRIu64 ")",
             c.min_ts, t_wrap);

  tg_merge_host_t mh;
  char merged[160];
  snprintf(merged, sizeof(merged), "%s/merged.pftrace", f->ts.dir);
  merge_clone(t, merged, &mh);
  fprintf(stderr, "merge: %" PRIu64 " edge, %" PRIu64 " lost, %" PRIu64
          " malformed\n", mh.state_edge, mh.state_lost, mh.malformed);
  assert_int_equal(mh.malformed, 0);
  assert_int_equal(mh.state_edge, a.edge);
  assert_int_equal(mh.state_lost, a.lost);
  tg_merge_host_free(&mh);
  tp_counts_t cm = tp_read(merged);
  assert_int_equal(cm.skipped, 0);
  assert_int_equal(cm.slices, c.slices);
  clone_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(sdk_track_events_survive_a_wrapped_ring,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
