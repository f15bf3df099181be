/* tracegate-emit: flags, signals and the agent around the writer threads
 * of worker.c, or the rpc thread of rpc_server.c or rpc_client.c. Prints
 * a one-line summary to stderr at exit. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/emit/emit.h"
#include "agent/emit/rpc.h"
#include "agent/tool_setup.h"
#include "ipc/channel.h"
#include "tracegate/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "tracegate/track_event.h"

#define PROG "tracegate-emit"
#define MAX_THREADS 4096
/* Writer threads need little stack; 4096 of the default 8 MiB would ask
 * for 32 GiB of address space. */
#define THREAD_STACK (256u * 1024u)
/* Per-thread counts in the summary only up to this many threads. */
#define SUMMARY_THREADS 64

static void on_start(void *ctx, unsigned inst, const uint8_t *cfg,
                     size_t len) {
  (void)inst;
  (void)cfg;
  (void)len;
  emit_shared_t *sh = ctx;
  atomic_fetch_add(&sh->starts, 1);
  pthread_mutex_lock(&sh->mu);
  pthread_cond_broadcast(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
}

static void on_stop(void *ctx, unsigned inst) {
  (void)inst;
  emit_shared_t *sh = ctx;
  atomic_fetch_add(&sh->stops, 1);
}

/* Whether the process is done, checked every few ms by main(). */
static bool finished(const emit_shared_t *sh, uint64_t duration_s,
                     bool exit_when_stopped) {
  uint64_t first = atomic_load(&sh->first_start_ns);
  if (duration_s && first &&
      emit_now_ns() - first >= duration_s * UINT64_C(1000000000))
    return true;
  if (!exit_when_stopped || emit_active(sh)) return false;
  if (sh->opts->track_events || sh->opts->rpc != EMIT_RPC_NONE)
    return first != 0;
  unsigned starts = atomic_load(&sh->starts);
  return starts > 0 && atomic_load(&sh->stops) >= starts;
}

/* "PROG: <what>; agent: written=..." on stderr. */
static void print_summary(const char *what) {
  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  fprintf(stderr,
          PROG ": %s; agent: written=%llu dropped=%llu stalls=%llu "
          "drop_markers=%llu chunks_reclaimed=%llu\n",
          what, (unsigned long long)st.packets_written,
          (unsigned long long)st.packets_dropped, (unsigned long long)st.stalls,
          (unsigned long long)st.drop_markers,
          (unsigned long long)st.chunks_reclaimed);
}

static void print_packets(const emit_worker_t *w, size_t n) {
  char line[4096];
  size_t off = 0;
  uint64_t total = 0;
  off += (size_t)snprintf(line, sizeof(line), "packets");
  for (size_t i = 0; i < n; i++) {
    total += w[i].packets;
    if (n <= SUMMARY_THREADS && off < sizeof(line))
      off += (size_t)snprintf(line + off, sizeof(line) - off, " t%zu=%llu", i,
                              (unsigned long long)w[i].packets);
  }
  if (off >= sizeof(line)) off = sizeof(line) - 1;
  snprintf(line + off, sizeof(line) - off, " total=%llu",
           (unsigned long long)total);
  print_summary(line);
}

/* Supervisors and tests wait on this instead of polling: "ready\n", or
 * "ready PORT\n" from an rpc server. */
static void write_ready(uint64_t fd, int port) {
  if (fd == 0) return;
  char msg[32];
  int n = port >= 0 ? snprintf(msg, sizeof(msg), "ready %d\n", port)
                    : snprintf(msg, sizeof(msg), "ready\n");
  ssize_t w = write((int)fd, msg, (size_t)n);
  (void)w;
  close((int)fd);
}

/* --rpc-server's PORT: 0 to 65535, decimal. */
static int parse_port(const char *s, uint16_t *out) {
  unsigned long v = 0;
  size_t i = 0;
  for (; s[i] >= '0' && s[i] <= '9' && i < 5; i++) v = v * 10 + (unsigned long)(s[i] - '0');
  if (i == 0 || s[i] || v > 65535) {
    fprintf(stderr, PROG ": --rpc-server: '%s' is not a port (0 to 65535)\n",
            s);
    return -EINVAL;
  }
  *out = (uint16_t)v;
  return 0;
}

/* The rpc mode's main(), after the flags: its thread instead of the
 * writers. Returns the exit status. */
static int run_rpc(emit_shared_t *sh, const tg_agent_options_t *ao,
                   const char *server_port, const char *bind_addr,
                   const char *target, uint64_t ready_fd,
                   const sigset_t *sigs, uint64_t duration,
                   bool exit_when_stopped) {
  static emit_rpc_server_t srv;
  static emit_rpc_client_t cli;
  bool server = sh->opts->rpc == EMIT_RPC_SERVER;
  uint16_t port = 0;
  int rv;
  if (server) {
    if (parse_port(server_port, &port) < 0) return TG_EXIT_USAGE;
    if (emit_rpc_server_open(&srv, sh, bind_addr, port) < 0)
      return TG_EXIT_FAIL;
  } else if (emit_rpc_client_init(&cli, sh, target) < 0) {
    return TG_EXIT_USAGE;
  }
  if ((rv = emit_rpc_register_category()) < 0 ||
      (rv = tg_agent_init(ao)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    if (server) emit_rpc_server_close(&srv);
    return TG_EXIT_FAIL;
  }
  rv = server ? emit_rpc_server_start(&srv) : emit_rpc_client_start(&cli);
  if (rv < 0) {
    TG_ERROR("cannot start the rpc thread: %s", tg_strerror(rv));
    tg_agent_shutdown();
    if (server) emit_rpc_server_close(&srv);
    return TG_EXIT_FAIL;
  }
  write_ready(ready_fd, server ? (int)srv.port : -1);
  while (!atomic_load(&sh->quit)) {
    struct timespec tick = {.tv_nsec = 5000000L};
    int sig = sigtimedwait(sigs, NULL, &tick);
    if (sig > 0 || finished(sh, duration, exit_when_stopped)) break;
  }
  atomic_store(&sh->quit, true);
  char counts[256];
  if (server) {
    emit_rpc_server_stop(&srv);
    emit_rpc_server_counts(&srv, counts, sizeof(counts));
  } else {
    emit_rpc_client_stop(&cli);
    emit_rpc_client_counts(&cli, counts, sizeof(counts));
  }
  tg_agent_shutdown();
  print_summary(counts);
  return TG_EXIT_OK;
}

static const char about[] =
    "A load generator. Raw packets are TracePacket.for_testing with "
    "seq_value =\nthe thread's sequence number (from 0 each session) "
    "and str = \"t<thread>:\"\npadded to --size. At exit it prints "
    "packets per thread and the agent's\nwritten/dropped counts to "
    "stderr.\n\n"
    "With --rpc-server or --rpc-client it makes or serves requests instead: "
    "each\ncall is an \"rpc.call\" slice (category \"rpc\") on the client "
    "and an \"rpc.serve\"\nslice on the server, joined by a flow derived "
    "from the request's W3C\ntraceparent (docs/agent.md). --rate and "
    "--count then count calls; the\nwriter flags do not apply. At exit: "
    "\"rpc: calls= ok= failed=\" (client) or\n\"rpc: served= malformed=\" "
    "(server).\n";

static const tg_prog_t prog = {
    .name = PROG, .synopsis = "[options]", .about = about};

int main(int argc, char **argv) {
  const char *socket_path = tg_ipc_default_socket(true);
  const char *name = PROG;
  const char *ds_name = "tracegate.emit";
  emit_opts_t o = {.size = 64, .large_size = 5u << 20};
  uint64_t threads = 1, duration = 0, smb_kb = 0;
  bool stall = false, exit_when_stopped = false;
  int log_level = TG_LOG_WARN;
  const char *rpc_server = NULL, *rpc_bind = "127.0.0.1", *rpc_client = NULL;
  uint64_t ready_fd = 0;
  const tg_flag_t flags[] = {
      {"socket", TG_FLAG_STRING, &socket_path, "PATH",
       "producer socket of the service: a path or @abstract name", 0, 0},
      {"name", TG_FLAG_STRING, &name, "NAME", "producer name", 0, 0},
      {"data-source", TG_FLAG_STRING, &ds_name, "NAME",
       "data source to register (raw packets)", 0, 0},
      {"rate", TG_FLAG_UINT, &o.rate, "N",
       "packets per second per thread (calls per second with --rpc-client), "
       "0: as fast as possible", 0, 100000000},
      {"size", TG_FLAG_BYTES, &o.size, "SIZE",
       "payload bytes of each packet (for_testing.str)", 0, 64u << 20},
      {"threads", TG_FLAG_UINT, &threads, "N", "writer threads", 1, MAX_THREADS},
      {"large-every", TG_FLAG_UINT, &o.large_every, "N",
       "every Nth packet is a large one, 0: never", 0, 0},
      {"large-size", TG_FLAG_BYTES, &o.large_size, "SIZE",
       "payload bytes of a large packet", 0, 256u << 20},
      {"count", TG_FLAG_UINT, &o.count, "N",
       "packets per thread and session (calls with --rpc-client), then "
       "wait, 0: no limit", 0, 0},
      {"duration", TG_FLAG_SECONDS, &duration, "DURATION",
       "exit this long after writing began, 0: run until stopped", 0, 0},
      {"track-events", TG_FLAG_BOOL, &o.track_events, NULL,
       "write track event slices and counters (category \"emit\") instead of "
       "raw packets", 0, 0},
      {"smb-kb", TG_FLAG_KIB, &smb_kb, "SIZE",
       "shared memory buffer size to ask for, 0: the service's choice", 0,
       1u << 20},
      {"stall", TG_FLAG_BOOL, &stall, NULL,
       "wait for room when the SMB is full instead of dropping", 0, 0},
      {"exit-when-stopped", TG_FLAG_BOOL, &exit_when_stopped, NULL,
       "exit once the session stopped after having started", 0, 0},
      {"rpc-server", TG_FLAG_STRING, &rpc_server, "PORT",
       "answer requests on TCP PORT (0: any free one, see --ready-fd), "
       "writing an \"rpc.serve\" slice around each", 0, 0},
      {"rpc-bind", TG_FLAG_STRING, &rpc_bind, "ADDR",
       "numeric IPv4 or IPv6 address --rpc-server listens on", 0, 0},
      {"rpc-client", TG_FLAG_STRING, &rpc_client, "HOST:PORT",
       "make requests to an --rpc-server, one at a time on one connection, "
       "writing an \"rpc.call\" slice around each", 0, 0},
      {"ready-fd", TG_FLAG_UINT, &ready_fd, "FD",
       "write \"ready\" (an rpc server: \"ready PORT\") to this fd once "
       "started, then close it", 0, 0},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
  };
  int rv;
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
                    NULL, 0, NULL, &rv))
    return rv;
  if (rpc_server && rpc_client) {
    fprintf(stderr, PROG ": --rpc-server and --rpc-client: give one\n");
    return TG_EXIT_USAGE;
  }
  o.rpc = rpc_server   ? EMIT_RPC_SERVER
          : rpc_client ? EMIT_RPC_CLIENT
                       : EMIT_RPC_NONE;
  sigset_t sigs;
  tg__tool_setup(PROG, log_level, &sigs);

  static emit_shared_t sh;
  sh.opts = &o;
  pthread_mutex_init(&sh.mu, NULL);
  pthread_cond_init(&sh.cv, NULL);
  tg_agent_options_t ao = {
      .socket_path = socket_path,
      .producer_name = name,
      .smb_size_hint = (size_t)smb_kb * 1024,
      .on_smb_full = stall ? TG_AGENT_FULL_STALL : TG_AGENT_FULL_DROP,
      .log = tg__tool_agent_log,
      .log_ctx = (void *)PROG,
      .log_level = (tg_log_level_t)log_level,
  };
  if (o.rpc != EMIT_RPC_NONE)
    return run_rpc(&sh, &ao, rpc_server, rpc_bind, rpc_client, ready_fd,
                   &sigs, duration, exit_when_stopped);
  if (o.track_events) {
    rv = emit_register_category();
  } else {
    tg_ds_options_t dso = {
        .name = ds_name,
        .cbs = {.on_start = on_start, .on_stop = on_stop, .ctx = &sh},
    };
    rv = tg_ds_register(&dso, &sh.ds);
  }
  if (rv < 0) {
    TG_ERROR("cannot register the data source: %s", tg_strerror(rv));
    return 1;
  }
  if ((rv = tg_agent_init(&ao)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    return 1;
  }

  emit_worker_t *w = calloc((size_t)threads, sizeof(*w));
  size_t started = 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK);
  for (; w && started < threads; started++) {
    if (emit_worker_init(&w[started], &sh, (unsigned)started) < 0) break;
    if (pthread_create(&w[started].thread, &attr, emit_worker_main,
                       &w[started]) != 0) {
      emit_worker_free(&w[started]);
      break;
    }
  }
  pthread_attr_destroy(&attr);
  if (started == threads) write_ready(ready_fd, -1);
  if (started < threads) {
    TG_ERROR("could only start %zu of %llu writer threads", started,
             (unsigned long long)threads);
    atomic_store(&sh.quit, true);
  }

  while (!atomic_load(&sh.quit)) {
    struct timespec tick = {.tv_nsec = 5000000L};
    int sig = sigtimedwait(&sigs, NULL, &tick);
    if (sig > 0 || finished(&sh, duration, exit_when_stopped)) break;
  }
  atomic_store(&sh.quit, true);
  pthread_mutex_lock(&sh.mu);
  pthread_cond_broadcast(&sh.cv);
  pthread_mutex_unlock(&sh.mu);
  for (size_t i = 0; i < started; i++) pthread_join(w[i].thread, NULL);
  tg_agent_shutdown();
  if (w) print_packets(w, started);
  for (size_t i = 0; i < started; i++) emit_worker_free(&w[i]);
  free(w);
  return started == threads ? 0 : 1;
}
