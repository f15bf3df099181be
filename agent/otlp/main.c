/* SPDX-License-Identifier: Apache-2.0 */
/* tracegate-otlp: an OTLP/HTTP trace receiver that writes what apps'
 * OpenTelemetry exporters send into the host's trace (receiver.h,
 * otlp_write.h, docs/otlp.md). The HTTP side runs on libmicrohttpd's
 * thread; main() waits for SIGINT or SIGTERM and then stops it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/otlp/receiver.h"
#include "agent/tool_setup.h"
#include "common/flags.h"
#include "common/log.h"
#include "ipc/channel.h"
#include "tracegate/error.h"

#define PROG "tracegate-otlp"

static otlp_receiver_t rcv;

static void write_ready(uint64_t fd, unsigned port) {
  if (fd == 0) return;
  char msg[32];
  int n = snprintf(msg, sizeof(msg), "ready %u\n", port);
  ssize_t w = write((int)fd, msg, (size_t)n);
  (void)w;
  close((int)fd);
}

static const char about[] =
    "Receives OpenTelemetry spans (OTLP/HTTP: POST /v1/traces, protobuf "
    "or JSON,\ngzip or not) and writes them into the host's trace as "
    "slices of the data\nsource \"tracegate.otlp\": a process track per "
    "service.name, flows between\nspans of other processes and hosts "
    "(docs/otlp.md). Point an app's SDK at it\nwith "
    "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318. GET /metrics "
    "counts\nspans per service: accepted, refused (503, retried by the "
    "sender),\nunrecorded (no session) and invalid.\n";

static const tg_prog_t prog = {
    .name = PROG, .synopsis = "[options]", .about = about};

int main(int argc, char **argv) {
  const char *socket_path = tg_ipc_default_socket(true);
  const char *name = PROG;
  const char *host = "127.0.0.1";
  const char *trig_err = NULL, *trig_lat = NULL;
  uint64_t port = 4318, max_body = 4u << 20, latency_ms = 0, ready_fd = 0;
  uint64_t smb_kb = 16u << 10;
  int log_level = TG_LOG_WARN;
  const tg_flag_t flags[] = {
      {"socket", TG_FLAG_STRING, &socket_path, "PATH",
       "producer socket of the service: a path or @abstract name", 0, 0},
      {"name", TG_FLAG_STRING, &name, "NAME", "producer name", 0, 0},
      {"host", TG_FLAG_STRING, &host, "ADDR",
       "numeric address to listen on (loopback by default)", 0, 0},
      {"port", TG_FLAG_UINT, &port, "PORT",
       "TCP port to listen on, 0: any free one (see --ready-fd)", 0, 65535},
      {"max-body", TG_FLAG_BYTES, &max_body, "SIZE",
       "largest request body taken (413 beyond)", 1024, 64u << 20},
      {"smb-kb", TG_FLAG_KIB, &smb_kb, "SIZE",
       "shared memory buffer to ask for; above half full, requests are "
       "answered 503", 256, 32u << 10},
      {"trigger-on-error", TG_FLAG_STRING, &trig_err, "NAME",
       "activate trigger NAME when a span has status ERROR", 0, 0},
      {"trigger-on-latency", TG_FLAG_STRING, &trig_lat, "NAME",
       "activate trigger NAME when a span lasts --latency-ms or more", 0, 0},
      {"latency-ms", TG_FLAG_UINT, &latency_ms, "MS",
       "the duration --trigger-on-latency fires at", 0, 0},
      {"ready-fd", TG_FLAG_UINT, &ready_fd, "FD",
       "write \"ready PORT\" to this fd once listening, then close it", 0, 0},
      {"log-level", TG_FLAG_LOG_LEVEL, &log_level, "LEVEL",
       "error, warn, info or debug", 0, 0},
  };
  int rv;
  if (tg_prog_flags(&prog, flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
                    NULL, 0, NULL, &rv))
    return rv;
  if (trig_lat && latency_ms == 0) {
    fprintf(stderr, PROG ": --trigger-on-latency needs --latency-ms\n");
    return TG_EXIT_USAGE;
  }
  sigset_t sigs;
  tg__tool_setup(PROG, log_level, &sigs);

  if ((rv = otlp_receiver_register(&rcv)) < 0) {
    TG_ERROR("cannot register the data source: %s", tg_strerror(rv));
    return TG_EXIT_FAIL;
  }
  /* Writes wait for room rather than drop: the receiver refuses (503)
   * before the buffer is half full, so a wait is the rare request larger
   * than the other half, and nothing it accepted is lost. */
  tg_agent_options_t ao = {
      .socket_path = socket_path,
      .producer_name = name,
      .smb_size_hint = (size_t)smb_kb * 1024,
      .on_smb_full = TG_AGENT_FULL_STALL,
      .log = tg__tool_agent_log,
      .log_ctx = (void *)PROG,
      .log_level = (tg_log_level_t)log_level,
  };
  if ((rv = tg_agent_init(&ao)) < 0) {
    TG_ERROR("cannot start the agent: %s", tg_strerror(rv));
    return TG_EXIT_FAIL;
  }
  otlp_receiver_config_t rc = {
      .host = host,
      .port = (uint16_t)port,
      .max_body = (size_t)max_body,
      .trigger_on_error = trig_err,
      .trigger_on_latency = trig_lat,
      .latency_ns = latency_ms * 1000000u,
  };
  int status = TG_EXIT_OK;
  if (otlp_receiver_start(&rcv, &rc) < 0) {
    status = TG_EXIT_FAIL;
  } else {
    write_ready(ready_fd, otlp_receiver_port(&rcv));
    int sig;
    sigwait(&sigs, &sig);
  }
  otlp_receiver_stop(&rcv);
  tg_agent_shutdown();
  return status;
}
