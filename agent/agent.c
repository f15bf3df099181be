/* The public API of the agent and its thread's lifecycle.
 *
 * One process-wide agent, like Perfetto's SDK: apps link one library and
 * talk to one service. Everything runs on the agent's own libuv loop
 * except the public entry points, which only touch atomics, the mutex of
 * the wait helpers, and uv_async_send. The connection (connection.c), the
 * service's commands (commands.c) and commits (commit.c) run on that loop.
 * This file is their top: it calls them and wires what they tell each
 * other (the connection's events, the registry's wake hook); none of
 * them calls into it (agent_internal.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/agent_internal.h"
#include "agent/agent_log.h"
#include "agent/clock.h"
#include "agent/data_source.h"
#include "agent/process_name.h"
#include "common/log.h"
#include "ipc/unix_transport.h"
#include "tracegate/error.h"

#define CLOCK_FIRST_MS 50
#define CLOCK_PERIOD_MS 1000

/* Serialises tg_agent_init and tg_agent_shutdown. */
static pthread_mutex_t g_life_mu = PTHREAD_MUTEX_INITIALIZER;

/* --- logging ------------------------------------------------------------- */

/* Lines from shared modules (ipc/, abi/) go to the app's sink, never to
 * stderr: a library does not print. */
static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  const tg_agent_options_t *o = &tg__agent.cfg.opts;
  tg_agent_log_fn fn = o->log;
  if (fn && (int)level <= (int)o->log_level)
    fn(o->log_ctx, (tg_log_level_t)level, line);
}

/* --- wiring ------------------------------------------------------------- */

/* The periodic commit will send what a thread flushed: no wake needed. */
static bool commit_will_come(void *ctx) {
  (void)ctx;
  return tg__agent_commit_timer_active();
}

/* Installed in the data-source registry while the agent runs. */
static const tg__ds_wake_hook_t registry_wake_hook = {
    .wake = tg__agent_wake, .commit_will_come = commit_will_come};

/* Shutdown closes the connection: what the writers queued goes first. */
static void commit_before_close(void) { tg__commit_all(0); }

/* What the connection tells the files above it (connection.c calls none
 * of them itself). */
static const tg__conn_events_t conn_events = {
    .open_commands = tg__commands_open,
    .connected = tg__triggers_send_pending,
    .lost = tg__commands_on_disconnect,
    .closing = commit_before_close,
};

/* --- the loop ------------------------------------------------------------ */

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void begin_stop(void) {
  tg__agent_thread_t *th = &tg__agent.th;
  if (th->stopping) return;
  th->stopping = true;
  tg__commit_timer_stop();
  uv_timer_stop(&th->clock_timer);
  atomic_store_explicit(&th->clock_active, false, memory_order_release);
  tg__connection_stop();
  /* The connection's close callback runs first (it was queued first);
   * then every handle, ours included, closes and uv_run returns. */
  uv_walk(&th->loop, close_walk, NULL);
}

static void on_clock_timer(uv_timer_t *t) {
  (void)t;
  tg__clock_calibrate();
}

/* Starts calibrating the TSC, once a reader asked for it (clock.h): a
 * process that never reads the clock never wakes for it. The mirror flag
 * is for tests; release pairs with the acquire in
 * tg__agent_clock_timer_active. */
static void clock_start(void) {
  tg__agent_thread_t *th = &tg__agent.th;
  if (!th->tsc_usable || uv_is_active((uv_handle_t *)&th->clock_timer))
    return;
  tg__clock_calibrate(); /* first sample; the line starts 50 ms later */
  uv_timer_start(&th->clock_timer, on_clock_timer, CLOCK_FIRST_MS,
                 CLOCK_PERIOD_MS);
  atomic_store_explicit(&th->clock_active, true, memory_order_release);
}

bool tg__agent_clock_timer_active(void) {
  return atomic_load_explicit(&tg__agent.th.clock_active,
                              memory_order_acquire);
}

static void on_async(uv_async_t *a) {
  (void)a;
  if (atomic_load(&tg__agent.th.stop_requested)) {
    begin_stop();
    return;
  }
  /* Acquire pairs with the release in tg__clock_ask. */
  if (atomic_load_explicit(&tg__clock.asked, memory_order_acquire))
    clock_start();
  if (tg__connection_ready()) {
    tg__connection_register_data_sources();
    tg__connection_send_start_acks();
    tg__commit_all(0);
    tg__commit_kick();
    tg__triggers_send_pending();
  }
}

/* The agent's thread does batch work (commits, the service's commands)
 * that can wait a scheduler slice without harm. Under SCHED_BATCH its
 * wake-ups do not preempt the task running where it wakes (sched(7)): a
 * writer that finds the SMB full wakes it for every pass, and each
 * wake-up would switch out whatever ran there, often the tracing service
 * copying the chunks it had just been sent. It keeps its share of the
 * CPU. A policy the app chose (inherited from the
 * thread that called tg_agent_init: real-time, idle, batch) is kept. */
static void use_batch_policy(void) {
  int policy;
  struct sched_param sp;
  int rv = pthread_getschedparam(pthread_self(), &policy, &sp);
  if (rv != 0 || policy != SCHED_OTHER) {
    tg__agent_log(TG_LOG_DEBUG, "agent: thread keeps scheduling policy %d%s",
                  rv != 0 ? -1 : policy, rv != 0 ? " (unreadable)" : "");
    return;
  }
  sp.sched_priority = 0;
  rv = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  if (rv != 0)
    tg__agent_log(TG_LOG_DEBUG,
                  "agent: thread stays SCHED_OTHER: SCHED_BATCH refused: %s",
                  tg_strerror(-rv));
}

static void *agent_thread(void *arg) {
  (void)arg;
  tg__agent_thread_t *th = &tg__agent.th;
  use_batch_policy();
  th->tsc_usable = tg__clock_tsc_usable();
  if (th->tsc_usable) {
    /* A read before tg_agent_init asked already (its wake found no
     * agent); later ones wake on_async. */
    if (atomic_load_explicit(&tg__clock.asked, memory_order_acquire))
      clock_start();
  } else {
    /* Said once per process: each tg_agent_init would find the same. */
    static atomic_bool said;
    if (!atomic_exchange_explicit(&said, true, memory_order_relaxed))
      tg__agent_log(TG_LOG_INFO,
                    "agent: track events read clock_gettime(CLOCK_BOOTTIME): "
                    "the TSC is not invariant (constant_tsc, nonstop_tsc) or "
                    "not the kernel's clocksource");
  }
  tg__connection_start();
  uv_run(&th->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* --- public API ---------------------------------------------------------- */

static void default_producer_name(char *out, size_t n) {
  char comm[64];
  if (!tg__process_name(comm, sizeof(comm)))
    snprintf(comm, sizeof(comm), "app");
  snprintf(out, n, "tracegate-agent:%s", comm);
}

/* Copies |opts| into the config, strings included. */
static int set_config(const tg_agent_options_t *opts) {
  tg__agent_config_t *cfg = &tg__agent.cfg;
  tg_agent_options_t o = {0};
  if (opts) o = *opts;
  const char *path =
      o.socket_path ? o.socket_path : tg_ipc_default_socket(true);
  if (strlen(path) >= sizeof(cfg->socket_path)) return -ENAMETOOLONG;
  cfg->opts = o;
  snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s", path);
  if (o.producer_name)
    snprintf(cfg->producer_name, sizeof(cfg->producer_name), "%s",
             o.producer_name);
  else
    default_producer_name(cfg->producer_name, sizeof(cfg->producer_name));
  cfg->opts.socket_path = cfg->socket_path;
  cfg->opts.producer_name = cfg->producer_name;
  return 0;
}

int tg_agent_init(const tg_agent_options_t *opts) {
  tg__agent_thread_t *th = &tg__agent.th;
  pthread_mutex_lock(&g_life_mu);
  int rv = 0;
  if (th->running) {
    rv = -EALREADY;
    goto out;
  }
  if ((rv = set_config(opts)) < 0) goto out;
  th->stopping = false;
  atomic_store(&th->stop_requested, false);
  tg_log_set_sink(log_sink, NULL);

  if ((rv = uv_loop_init(&th->loop)) < 0) goto out;
  uv_async_init(&th->loop, &th->async, on_async);
  uv_timer_init(&th->loop, &th->clock_timer);
  tg__connection_init(&th->loop, &conn_events);
  tg__commit_init(&th->loop);
  __atomic_store_n(&th->running, true, __ATOMIC_RELEASE);
  tg__ds_registry_set_wake(&registry_wake_hook);
  rv = -pthread_create(&th->thread, NULL, agent_thread, NULL);
  if (rv < 0) {
    tg__ds_registry_set_wake(NULL);
    __atomic_store_n(&th->running, false, __ATOMIC_RELEASE);
    uv_walk(&th->loop, close_walk, NULL);
    uv_run(&th->loop, UV_RUN_DEFAULT);
    uv_loop_close(&th->loop);
    tg__commit_fini();
  }
out:
  pthread_mutex_unlock(&g_life_mu);
  return rv;
}

int tg_agent_set_commit_on_flush(bool on) {
  pthread_mutex_lock(&g_life_mu);
  int rv = tg__agent.th.running ? -EBUSY : 0;
  if (rv == 0) tg__agent.commit_on_flush = on;
  pthread_mutex_unlock(&g_life_mu);
  return rv;
}

void tg_agent_shutdown(void) {
  tg__agent_thread_t *th = &tg__agent.th;
  pthread_mutex_lock(&g_life_mu);
  if (!th->running) {
    pthread_mutex_unlock(&g_life_mu);
    return;
  }
  tg__ds_registry_set_wake(NULL);
  atomic_store(&th->stop_requested, true);
  uv_async_send(&th->async);
  pthread_join(th->thread, NULL);
  __atomic_store_n(&th->running, false, __ATOMIC_RELEASE);
  tg__triggers_drop_pending();
  uv_loop_close(&th->loop);
  tg__commit_fini();
  tg__clock_reset();
  tg__agent_set_ready(false);
  tg_log_set_sink(NULL, NULL);
  pthread_mutex_unlock(&g_life_mu);
}

bool tg_agent_connected(void) {
  tg__agent_readiness_t *r = &tg__agent.readiness;
  pthread_mutex_lock(&r->mu);
  bool ready = r->ready;
  pthread_mutex_unlock(&r->mu);
  return ready;
}

int tg_agent_wait_connected(uint32_t timeout_ms) {
  tg__agent_readiness_t *r = &tg__agent.readiness;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  int rv = 0;
  pthread_mutex_lock(&r->mu);
  while (!r->ready && rv == 0)
    if (pthread_cond_timedwait(&r->cv, &r->mu, &dl) == ETIMEDOUT)
      rv = TG_ETIMEOUT;
  if (r->ready) rv = 0;
  pthread_mutex_unlock(&r->mu);
  return rv;
}

void tg_agent_get_stats(tg_agent_stats_t *out) {
  const tg__agent_link_t *l = &tg__agent.link;
  const tg__agent_commit_t *c = &tg__agent.commit;
  memset(out, 0, sizeof(*out));
  out->connects = atomic_load(&l->connects);
  out->disconnects = atomic_load(&l->disconnects);
  out->packets_written = atomic_load(&tg__agent_packets_written);
  out->commits_sent = atomic_load(&c->commits_sent);
  out->chunks_committed =
      atomic_load(&c->chunks_past) + atomic_load(&c->chunks_now);
  out->patches_sent =
      atomic_load(&c->patches_past) + atomic_load(&c->patches_now);
  out->stalls = atomic_load(&c->stalls_past) + atomic_load(&c->stalls_now);
  out->flushes_acked = atomic_load(&c->flushes_acked);
  out->packets_dropped =
      atomic_load(&c->dropped_past) + atomic_load(&c->dropped_now);
  out->drop_markers =
      atomic_load(&c->markers_past) + atomic_load(&c->markers_now);
  out->chunks_reclaimed =
      atomic_load(&c->reclaimed_past) + atomic_load(&c->reclaimed_now);
  out->smb_size = atomic_load(&c->smb_size);
  out->smb_bytes_in_use = atomic_load(&c->smb_in_use);
  out->smb_bytes_in_use_peak = atomic_load(&c->smb_in_use_peak);
  out->smb_active_size = atomic_load(&c->smb_active);
  out->smb_resident_bytes = atomic_load(&c->smb_resident);
  out->patches_in_place =
      atomic_load(&c->in_place_past) + atomic_load(&c->in_place_now);
}
