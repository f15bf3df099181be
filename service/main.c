/* tracegated: the per-host tracing service. Wires flags, signals and the
 * service together; everything else lives in the other files of service/. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "ipc/channel.h"
#include "service/service.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"

static uv_signal_t sig_int, sig_term;
static tg_service_t service;
static uv_loop_t *loop;

static void on_stopped(void *arg) {
  (void)arg;
  uv_close((uv_handle_t *)&sig_int, NULL);
  uv_close((uv_handle_t *)&sig_term, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
  (void)h;
  TG_INFO("%s: ending sessions and shutting down", strsignal(signum));
  tg_service_stop(&service, on_stopped, NULL);
}

int main(int argc, char **argv) {
  const char *producer_socket = tg_ipc_default_socket(true);
  const char *consumer_socket = tg_ipc_default_socket(false);
  unsigned producer_mode = 0666, consumer_mode = 0660;
  uint64_t max_producers = 1024, max_consumers = 64;
  uint64_t session_lease_ms = TG_SERVICE_DEFAULT_SESSION_LEASE_MS;
  uint64_t ds_start_timeout_ms = TG_SERVICE_DEFAULT_START_TIMEOUT_MS;
  int log_level = TG_LOG_INFO;
  uint64_t ready_fd = 0;
  const tg_flag_t flags[] = {
      {"producer-socket", TG_FLAG_STRING, &producer_socket, "PATH",
       "producer socket: a path or @abstract name", 0, 0},
      {"consumer-socket", TG_FLAG_STRING, &consumer_socket, "PATH",
       "consumer socket: a path or @abstract name", 0, 0},
      {"producer-socket-mode", TG_FLAG_OCTAL, &producer_mode, "MODE",
       "permissions of the producer socket (producers are untrusted)", 0, 0},
      {"consumer-socket-mode", TG_FLAG_OCTAL, &consumer_mode, "MODE",
       "permissions of the consumer socket (consumers are trusted)", 0, 0},
      {"max-producers", TG_FLAG_UINT, &max_producers, "N",
       "producer connections accepted at once; at the limit, shared between "
       "local users: one holding two fewer than another takes one of that "
       "user's", 1, 65535},
      {"max-consumers", TG_FLAG_UINT, &max_consumers, "N",
       "consumer connections accepted at once", 1, 4096},
      {"session-lease-ms", TG_FLAG_MS, &session_lease_ms, "DURATION",
       "how long a session outlives a consumer connection that died without "
       "Detach, when the consumer asked for a lease (a relay does): the "
       "default and the most a consumer gets (at most 24 h)",
       1, TG_SERVICE_MAX_SESSION_LEASE_MS},
      {"ds-start-timeout-ms", TG_FLAG_MS, &ds_start_timeout_ms, "DURATION",
       "how long a data source that confirms its start may take to do so "
       "before the trace says it did not start (slow_starting_data_sources)",
       1, TG_SERVICE_MAX_START_TIMEOUT_MS},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
      {"ready-fd", TG_FLAG_UINT, &ready_fd, "FD",
       "write \"ready\\n\" to this fd once both sockets listen, then close "
       "it (0: none)", 0, 1024},
  };
  static const tg_prog_t prog = {
      .name = "tracegated",
      .synopsis = "[options]",
      .about = "The local tracing service: producers write into shared "
               "memory, consumers\nrecord sessions. Speaks Perfetto's "
               "producer and consumer protocols.\nSIGINT/SIGTERM end every "
               "session cleanly.\n",
  };
  int status;
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc,
                    argv, NULL, 0, NULL, &status))
    return status;
  tg_log_set_prefix("tracegated");
  tg_log_set_level((tg_log_level_t)log_level);
  signal(SIGPIPE, SIG_IGN);

  loop = uv_default_loop();
  tg_service_options_t opt = {
      .producer_socket = producer_socket,
      .consumer_socket = consumer_socket,
      .producer_mode = producer_mode,
      .consumer_mode = consumer_mode,
      .max_producers = max_producers,
      .max_consumers = max_consumers,
      .session_lease_ms = (uint32_t)session_lease_ms,
      .clock = &tg_clock_monotonic,
      .ds_start_timeout_ms = (uint32_t)ds_start_timeout_ms,
  };
  if (tg_service_start(&service, loop, &opt) < 0) return TG_EXIT_FAIL;
  uv_signal_init(loop, &sig_int);
  uv_signal_init(loop, &sig_term);
  uv_signal_start(&sig_int, on_signal, SIGINT);
  uv_signal_start(&sig_term, on_signal, SIGTERM);
  if (ready_fd > 0) {
    /* Supervisors and tests wait on this instead of polling the sockets. */
    ssize_t w = write((int)ready_fd, "ready\n", 6);
    (void)w;
    close((int)ready_fd);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(loop);
  if (rv != 0) TG_WARN("loop closed with handles open: %s", uv_strerror(rv));
  TG_INFO("stopped");
  return 0;
}
