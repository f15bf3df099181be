/* The agent against a scripted ProducerPort: commands a real tracegated
 * would not send, to check that the agent validates what the service says
 * before it acts on it.
 *
 * The fake service runs an IPC host on its own loop thread; the test thread
 * queues GetAsyncCommand replies for it and waits on what the agent sends
 * back (RegisterTraceWriter, CommitData, NotifyDataSourceStopped). The
 * agent's own state is read only through tg__agent_commit_timer_active()
 * and tg__agent_clock_timer_active(), internal queries for tests
 * (agent/agent_internal.h), and the calibration's seqlock (clock.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "agent/agent_internal.h"
#include "agent/clock.h"
#include "ipc/host.h"
#include "pb/common/commit_data_request.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/agent.h"

#define DS_NAME "test.commands"
#define WAIT_MS 10000
#define MAX_SEEN 16
#define MAX_CMDS 8

/* --- the fake service ----------------------------------------------------- */

typedef struct queued_cmd {
  uint8_t *bytes; /* a serialized GetAsyncCommandResponse */
  size_t len;
  int fd;
} queued_cmd_t;

typedef struct fake {
  uv_loop_t loop;
  uv_async_t wake;
  tg_ipc_host_t *host;
  pthread_t thread;
  char addr[64];

  pthread_mutex_t mu; /* guards everything below */
  pthread_cond_t cv;
  bool quit;
  bool have_call;
  tg_ipc_call_t async_call;
  queued_cmd_t cmds[MAX_CMDS];
  size_t n_cmds;
  uint32_t writer_targets[MAX_SEEN];
  size_t n_writers;
  uint64_t stopped[MAX_SEEN];
  size_t n_stopped;
  size_t n_chunks; /* chunks_to_move of every CommitData */
} fake_t;

static fake_t g_fake;

static void reply_empty(tg_ipc_call_t call) {
  tg_ipc_reply(&call, true, false, NULL, -1);
}

static void m_ok(void *ctx, tg_ipc_call_t call, const uint8_t *a, size_t n) {
  (void)ctx, (void)a, (void)n;
  reply_empty(call);
}

static void m_get_async_command(void *ctx, tg_ipc_call_t call,
                                const uint8_t *a, size_t n) {
  (void)a, (void)n;
  fake_t *f = ctx;
  pthread_mutex_lock(&f->mu);
  f->async_call = call;
  f->have_call = true;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void m_register_trace_writer(void *ctx, tg_ipc_call_t call,
                                    const uint8_t *a, size_t n) {
  fake_t *f = ctx;
  Perfetto__Protos__RegisterTraceWriterRequest *r =
      perfetto__protos__register_trace_writer_request__unpack(NULL, n, a);
  if (r) {
    pthread_mutex_lock(&f->mu);
    if (f->n_writers < MAX_SEEN)
      f->writer_targets[f->n_writers++] = r->target_buffer;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    perfetto__protos__register_trace_writer_request__free_unpacked(r, NULL);
  }
  reply_empty(call);
}

/* Adds |k| to |*count| (a field of |f|) and wakes its waiters. */
static void fake_count(fake_t *f, size_t *count, size_t k) {
  pthread_mutex_lock(&f->mu);
  *count += k;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void m_commit_data(void *ctx, tg_ipc_call_t call, const uint8_t *a,
                          size_t n) {
  fake_t *f = ctx;
  Perfetto__Protos__CommitDataRequest *r =
      perfetto__protos__commit_data_request__unpack(NULL, n, a);
  fake_count(f, &f->n_chunks, r ? r->n_chunks_to_move : 0);
  if (r) perfetto__protos__commit_data_request__free_unpacked(r, NULL);
  reply_empty(call);
}

static void m_notify_stopped(void *ctx, tg_ipc_call_t call, const uint8_t *a,
                             size_t n) {
  fake_t *f = ctx;
  Perfetto__Protos__NotifyDataSourceStoppedRequest *r =
      perfetto__protos__notify_data_source_stopped_request__unpack(NULL, n, a);
  if (r) {
    pthread_mutex_lock(&f->mu);
    if (f->n_stopped < MAX_SEEN) f->stopped[f->n_stopped++] = r->data_source_id;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    perfetto__protos__notify_data_source_stopped_request__free_unpacked(r,
                                                                        NULL);
  }
  reply_empty(call);
}

static void on_disconnect(void *ctx, tg_ipc_host_conn_t *conn) {
  fake_t *f = ctx;
  pthread_mutex_lock(&f->mu);
  if (f->have_call && f->async_call.conn == conn) f->have_call = false;
  pthread_mutex_unlock(&f->mu);
}

static const tg_ipc_method_def_t producer_methods[] = {
    {"InitializeConnection", m_ok},
    {"RegisterDataSource", m_ok},
    {"UnregisterDataSource", m_ok},
    {"CommitData", m_commit_data},
    {"GetAsyncCommand", m_get_async_command},
    {"RegisterTraceWriter", m_register_trace_writer},
    {"UnregisterTraceWriter", m_ok},
    {"NotifyDataSourceStarted", m_ok},
    {"NotifyDataSourceStopped", m_notify_stopped},
};

static tg_ipc_service_def_t producer_port = {
    .name = "ProducerPort",
    .methods = producer_methods,
    .n_methods = sizeof(producer_methods) / sizeof(producer_methods[0]),
    .ctx = &g_fake,
    .on_disconnect = on_disconnect,
};

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Loop thread: sends the queued commands, or stops everything. */
static void on_wake(uv_async_t *a) {
  fake_t *f = a->data;
  pthread_mutex_lock(&f->mu);
  bool quit = f->quit;
  size_t n = f->have_call ? f->n_cmds : 0;
  for (size_t i = 0; i < n; i++) {
    tg_ipc_reply_bytes(&f->async_call, true, true, f->cmds[i].bytes,
                       f->cmds[i].len, f->cmds[i].fd);
    free(f->cmds[i].bytes);
  }
  memmove(f->cmds, f->cmds + n, (f->n_cmds - n) * sizeof(f->cmds[0]));
  f->n_cmds -= n;
  pthread_mutex_unlock(&f->mu);
  if (quit) {
    tg_ipc_host_close(f->host, NULL, NULL);
    uv_close((uv_handle_t *)&f->wake, NULL);
  }
}

static void *fake_main(void *arg) {
  fake_t *f = arg;
  uv_run(&f->loop, UV_RUN_DEFAULT);
  uv_walk(&f->loop, close_walk, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void fake_start(fake_t *f) {
  memset(f, 0, sizeof(*f));
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  snprintf(f->addr, sizeof(f->addr), "@tg-test-agent-commands-%d",
           (int)getpid());
  assert_int_equal(uv_loop_init(&f->loop), 0);
  assert_int_equal(uv_async_init(&f->loop, &f->wake, on_wake), 0);
  f->wake.data = f;
  assert_int_equal(tg_ipc_host_listen(&f->loop, f->addr, 0666, &producer_port,
                                      1, 4, &f->host),
                   0);
  assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(fake_t *f) {
  pthread_mutex_lock(&f->mu);
  f->quit = true;
  pthread_mutex_unlock(&f->mu);
  uv_async_send(&f->wake);
  pthread_join(f->thread, NULL);
  for (size_t i = 0; i < f->n_cmds; i++) {
    free(f->cmds[i].bytes);
    if (f->cmds[i].fd >= 0) close(f->cmds[i].fd);
  }
  assert_int_equal(uv_loop_close(&f->loop), 0);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
}

/* Queues |cmd| (and |fd|, passed to the agent) for the GetAsyncCommand
 * stream. */
static void fake_send(fake_t *f,
                      const Perfetto__Protos__GetAsyncCommandResponse *cmd,
                      int fd) {
  size_t n = perfetto__protos__get_async_command_response__get_packed_size(cmd);
  uint8_t *b = malloc(n ? n : 1);
  assert_non_null(b);
  perfetto__protos__get_async_command_response__pack(cmd, b);
  pthread_mutex_lock(&f->mu);
  assert_true(f->n_cmds < MAX_CMDS);
  f->cmds[f->n_cmds++] = (queued_cmd_t){b, n, fd};
  pthread_mutex_unlock(&f->mu);
  uv_async_send(&f->wake);
}

/* SetupTracing with a memfd of |smb_size| bytes, sealed as tracegated and
 * traced seal theirs, or open to shrinking. */
static void send_setup_tracing(fake_t *f, size_t smb_size, uint32_t page_kb,
                               bool sealed) {
  int fd = memfd_create("test-smb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)smb_size), 0);
  if (sealed)
    assert_int_equal(
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  Perfetto__Protos__GetAsyncCommandResponse__SetupTracing st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__SETUP_TRACING__INIT;
  st.has_shared_buffer_page_size_kb = true;
  st.shared_buffer_page_size_kb = page_kb;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING;
  cmd.setup_tracing = &st;
  fake_send(f, &cmd, fd);
}

static void send_start(fake_t *f, uint64_t id, uint32_t target_buffer) {
  Perfetto__Protos__DataSourceConfig c =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  c.name = (char *)DS_NAME;
  c.has_target_buffer = true;
  c.target_buffer = target_buffer;
  Perfetto__Protos__GetAsyncCommandResponse__StartDataSource st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;
  st.has_new_instance_id = true;
  st.new_instance_id = id;
  st.config = &c;
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
  cmd.start_data_source = &st;
  fake_send(f, &cmd, -1);
}

static void send_stop(fake_t *f, uint64_t id) {
  Perfetto__Protos__GetAsyncCommandResponse__StopDataSource st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__STOP_DATA_SOURCE__INIT;
  st.has_instance_id = true;
  st.instance_id = id;
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE;
  cmd.stop_data_source = &st;
  fake_send(f, &cmd, -1);
}

static void deadline(struct timespec *dl) {
  clock_gettime(CLOCK_REALTIME, dl);
  dl->tv_sec += WAIT_MS / 1000;
}

/* Waits until |*count| >= |target| (under f->mu); false on timeout. */
static bool fake_wait(fake_t *f, const size_t *count, size_t target) {
  struct timespec dl;
  deadline(&dl);
  pthread_mutex_lock(&f->mu);
  int rv = 0;
  while (*count < target && rv == 0)
    rv = pthread_cond_timedwait(&f->cv, &f->mu, &dl);
  bool ok = *count >= target;
  pthread_mutex_unlock(&f->mu);
  return ok;
}

/* --- the app's data source ------------------------------------------------ */

static tg_ds_t *g_ds;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
/* The target_buffer of each config on_start saw. */
static uint32_t g_started_targets[MAX_SEEN];
static size_t g_n_started;

static void on_start(void *ctx, unsigned inst, const uint8_t *cfg,
                     size_t len) {
  (void)ctx, (void)inst;
  Perfetto__Protos__DataSourceConfig *c =
      perfetto__protos__data_source_config__unpack(NULL, len, cfg);
  pthread_mutex_lock(&g_mu);
  if (g_n_started < MAX_SEEN)
    g_started_targets[g_n_started++] = c ? c->target_buffer : UINT32_MAX;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  if (c) perfetto__protos__data_source_config__free_unpacked(c, NULL);
}

static bool started_with_target(uint32_t target) {
  struct timespec dl;
  deadline(&dl);
  pthread_mutex_lock(&g_mu);
  bool found = false;
  int rv = 0;
  while (!found && rv == 0) {
    for (size_t i = 0; i < g_n_started; i++)
      if (g_started_targets[i] == target) found = true;
    if (!found) rv = pthread_cond_timedwait(&g_cv, &g_mu, &dl);
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

static void test_log(void *ctx, tg_log_level_t level, const char *msg) {
  (void)ctx;
  fprintf(stderr, "agent[%d]: %s\n", (int)level, msg);
}

/* Waits until |query|() returns |want|; false on timeout. */
static bool wait_for(bool (*query)(void), bool want) {
  struct timespec dl, now;
  deadline(&dl);
  for (;;) {
    if (query() == want) return true;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec > dl.tv_sec) return false;
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
}

static bool clock_calibrated(void) {
  return atomic_load_explicit(&tg__clock.seq, memory_order_acquire) != 0;
}

/* Starts the fake service and the agent, connected to it. The agent is a
 * process singleton: every test starts it and shuts it down again; the
 * data source stays registered. */
static void start_agent(fake_t *f, bool commit_on_flush) {
  fake_start(f);
  if (!g_ds) {
    tg_ds_options_t o = {.name = DS_NAME, .cbs = {.on_start = on_start}};
    assert_int_equal(tg_ds_register(&o, &g_ds), 0);
  }
  pthread_mutex_lock(&g_mu);
  g_n_started = 0;
  pthread_mutex_unlock(&g_mu);
  tg_agent_options_t ao = {
      .socket_path = f->addr,
      .producer_name = "agent-commands",
      .reconnect_min_ms = 20,
      .reconnect_max_ms = 200,
      .log = test_log,
      .log_level = TG_LOG_INFO,
  };
  assert_int_equal(tg_agent_set_commit_on_flush(commit_on_flush), 0);
  assert_int_equal(tg_agent_init(&ao), 0);
  /* The choice is made before the run: the agent refuses it meanwhile. */
  assert_int_equal(tg_agent_set_commit_on_flush(!commit_on_flush), -EBUSY);
  assert_int_equal(tg_agent_wait_connected(WAIT_MS), 0);
}

static void start_both(fake_t *f) { start_agent(f, false); }

static void stop_both(fake_t *f) {
  tg_agent_shutdown();
  fake_stop(f);
}

/* --- tests ---------------------------------------------------------------- */

/* Buffer ids are 16 bits in the SMB ABI: an instance that targets buffer
 * 70000 must not start writing into buffer 70000 & 0xFFFF (4464), which may
 * be another session's. The agent ignores it, and still acknowledges its
 * stop so the service does not wait for it. */
static void agent_ignores_target_buffer_above_16_bits(void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_both(f);

  send_setup_tracing(f, 64 * 1024, 4, true);
  send_start(f, 1, 70000);
  send_start(f, 2, 7);
  /* Commands are handled in order: once 2 started, 1 was dealt with. */
  assert_true(started_with_target(7));
  pthread_mutex_lock(&g_mu);
  assert_int_equal(g_n_started, 1);
  pthread_mutex_unlock(&g_mu);

  /* Only the valid instance gets a writer. */
  TG_DS_TRACE(g_ds, inst, w) { tg_pbw_append_varint(w, 8, 1); }
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
    tg_ds_flush_thread(g_ds, k);
  assert_true(fake_wait(f, &f->n_writers, 1));
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < f->n_writers; i++)
    assert_int_equal(f->writer_targets[i], 7);
  pthread_mutex_unlock(&f->mu);

  send_stop(f, 1);
  send_stop(f, 2);
  assert_true(fake_wait(f, &f->n_stopped, 2));
  pthread_mutex_lock(&f->mu);
  assert_int_equal(f->stopped[0], 1);
  assert_int_equal(f->stopped[1], 2);
  pthread_mutex_unlock(&f->mu);

  stop_both(f);
}

/* A service that can shrink the SMB after the agent mapped it would crash
 * the app (SIGBUS) on its next write past the new end: without the shrink
 * seal the SMB is refused, and the instance's packets are dropped. */
static void agent_refuses_an_smb_that_can_shrink(void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_both(f);
  send_setup_tracing(f, 64 * 1024, 4, false);
  send_start(f, 1, 3);
  assert_true(started_with_target(3));

  int written = 0;
  TG_DS_TRACE(g_ds, inst, w) {
    tg_pbw_append_varint(w, 8, 1);
    written++;
  }
  assert_int_equal(written, 0);

  send_stop(f, 1);
  assert_true(fake_wait(f, &f->n_stopped, 1));
  stop_both(f);
}

/* The periodic commit wakes the agent's thread every 10 ms: it runs only
 * while some instance is started. Two overlapping sessions keep it running
 * until the second stops; a later session starts it again. Each check
 * follows an event the agent sends after it set the timer (on_start runs
 * after the timer starts, NotifyDataSourceStopped goes out after it
 * stops). */
static void agent_commit_timer_runs_only_while_an_instance_is_started(
    void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_both(f);
  assert_false(tg__agent_commit_timer_active());

  send_setup_tracing(f, 64 * 1024, 4, true);
  send_start(f, 1, 3);
  assert_true(started_with_target(3));
  assert_true(tg__agent_commit_timer_active());
  send_start(f, 2, 4);
  assert_true(started_with_target(4));
  assert_true(tg__agent_commit_timer_active());

  send_stop(f, 1);
  assert_true(fake_wait(f, &f->n_stopped, 1));
  assert_true(tg__agent_commit_timer_active());
  send_stop(f, 2);
  assert_true(fake_wait(f, &f->n_stopped, 2));
  assert_false(tg__agent_commit_timer_active());

  send_start(f, 3, 5);
  assert_true(started_with_target(5));
  assert_true(tg__agent_commit_timer_active());
  send_stop(f, 3);
  assert_true(fake_wait(f, &f->n_stopped, 3));
  assert_false(tg__agent_commit_timer_active());

  stop_both(f);
  assert_false(tg__agent_commit_timer_active());
}

/* A session the agent cannot set up (unknown data source) starts nothing,
 * so the timer stays off. */
static void agent_commit_timer_stays_off_for_an_unknown_data_source(
    void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_both(f);
  send_setup_tracing(f, 64 * 1024, 4, true);
  Perfetto__Protos__DataSourceConfig c =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  c.name = (char *)"test.not-registered";
  Perfetto__Protos__GetAsyncCommandResponse__StartDataSource st =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;
  st.has_new_instance_id = true;
  st.new_instance_id = 1;
  st.config = &c;
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
  cmd.start_data_source = &st;
  fake_send(f, &cmd, -1);
  /* Commands are handled in order: once 2 started, 1 was dealt with. */
  send_start(f, 2, 6);
  assert_true(started_with_target(6));
  send_stop(f, 2);
  assert_true(fake_wait(f, &f->n_stopped, 1));
  assert_false(tg__agent_commit_timer_active());
  pthread_mutex_lock(&g_mu);
  assert_int_equal(g_n_started, 1);
  pthread_mutex_unlock(&g_mu);
  stop_both(f);
}

/* Calibrating the TSC wakes the agent's thread every second: it starts
 * only once a track event reads the clock. The first read is
 * clock_gettime(CLOCK_BOOTTIME) itself; once the agent's thread has
 * calibrated, reads take the TSC path. */
static void agent_calibrates_the_clock_only_once_it_is_read(void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_both(f);
  /* Connected: the thread is past its start, and did not calibrate. */
  assert_false(tg__agent_clock_timer_active());
  assert_false(clock_calibrated());

  uint64_t before = tg__clock_boottime();
  uint64_t t = tg__clock_now();
  uint64_t after = tg__clock_boottime();
  assert_true(before <= t && t <= after);
  if (tg__clock_tsc_usable()) {
    assert_true(wait_for(tg__agent_clock_timer_active, true));
    assert_true(wait_for(clock_calibrated, true));
  } else {
    fprintf(stderr, "no invariant TSC: reads stay on clock_gettime\n");
  }

  stop_both(f);
  assert_false(tg__agent_clock_timer_active());
  assert_false(clock_calibrated());
}

/* commit_on_flush: a started session whose writers have flushed nothing
 * never runs the periodic tick; a flush wakes the agent, whose commit
 * carries the chunk to the service, and the tick stops again once it
 * finds nothing to commit. */
static void agent_commit_on_flush_ticks_only_after_flushes(void **state) {
  (void)state;
  fake_t *f = &g_fake;
  start_agent(f, true);
  send_setup_tracing(f, 64 * 1024, 4, true);
  send_start(f, 1, 3);
  assert_true(started_with_target(3));
  /* on_start runs after the agent decided about the timer. */
  assert_false(tg__agent_commit_timer_active());

  int written = 0;
  TG_DS_TRACE(g_ds, inst, w) {
    tg_pbw_append_varint(w, 8, 42);
    written++;
  }
  assert_int_equal(written, 1);
  pthread_mutex_lock(&f->mu);
  assert_int_equal(f->n_chunks, 0);
  pthread_mutex_unlock(&f->mu);
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
    tg_ds_flush_thread(g_ds, k);
  assert_true(fake_wait(f, &f->n_chunks, 1));
  assert_true(wait_for(tg__agent_commit_timer_active, false));

  send_stop(f, 1);
  assert_true(fake_wait(f, &f->n_stopped, 1));
  stop_both(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(agent_ignores_target_buffer_above_16_bits),
      cmocka_unit_test(agent_refuses_an_smb_that_can_shrink),
      cmocka_unit_test(
          agent_commit_timer_runs_only_while_an_instance_is_started),
      cmocka_unit_test(
          agent_commit_timer_stays_off_for_an_unknown_data_source),
      cmocka_unit_test(agent_calibrates_the_clock_only_once_it_is_read),
      cmocka_unit_test(agent_commit_on_flush_ticks_only_after_flushes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
