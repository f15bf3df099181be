/* The recording, driven by the loop:
 *
 *   STARTING --enable/attach--> TRACING --Ctrl-C, --stop, -t--> STOPPING
 *      (flush, disable) --the EnableTracing reply--> DRAINING (final reads,
 *      unless the service wrote the file) --> STATS --> DONE
 *
 * The EnableTracing reply is the one event that says tracing ended,
 * whatever ended it (the config's duration, a stop, the service). Every
 * callback first checks for DONE: after a failure, late replies are
 * ignored. Nothing here blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "consumer/cli/record.h"
#include "tracegate/error.h"

#define TICK_MS 250
#define READ_PERIOD_MS 500
#define STOP_FLUSH_TIMEOUT_MS 5000
#define GUARD_MS 60000 /* stopping, and draining, each end within this */
#define MAX_DRAIN_READS 64

static void on_closed(uv_handle_t *h) { (void)h; }

/* Erases the progress line, if one is shown, before other output. */
static void clear_progress(record_t *r) {
  if (!r->progress_shown) return;
  r->progress_shown = false;
  cli_progress_clear(stderr);
}

/* Ends the recording: timers and signal closed, connection closed. The
 * loop then runs dry and cli_record_main() takes over. */
static void finish(record_t *r) {
  if (r->phase == PH_DONE) return;
  r->phase = PH_DONE;
  clear_progress(r);
  uv_close((uv_handle_t *)&r->sigint, on_closed);
  uv_close((uv_handle_t *)&r->tick, on_closed);
  uv_close((uv_handle_t *)&r->reader, on_closed);
  uv_close((uv_handle_t *)&r->stopper, on_closed);
  uv_close((uv_handle_t *)&r->guard, on_closed);
  if (r->conn.c) tg_consumer_close(r->conn.c);
}

__attribute__((format(printf, 2, 3)))
static void fail(record_t *r, const char *fmt, ...) {
  if (r->phase == PH_DONE) return;
  clear_progress(r);
  va_list ap;
  va_start(ap, fmt);
  cli_vsay(fmt, ap);
  va_end(ap);
  r->exit_code = CLI_EXIT_FAIL;
  finish(r);
}

static void arm_guard(record_t *r);
static void drain(record_t *r);
static void final_stats(record_t *r);

/* --- progress ------------------------------------------------------------ */

static void show_progress(record_t *r) {
  if (!r->tty || r->phase == PH_DONE) return;
  if (r->file_mode && r->has_out) cli_output_scan(&r->out);
  r->progress_shown = true;
  cli_progress_print(stderr, cli_now_ms() - r->t0, r->duration_ms,
                     r->has_out ? r->out.bytes : 0,
                     r->has_out ? r->out.packets : 0, r->loss.total);
}

static void on_tick_stats(tg_consumer_t *c, void *ctx, int status,
                          const char *msg, const Perfetto__Protos__TraceStats *st) {
  (void)c;
  (void)msg;
  record_t *r = ctx;
  r->stats_pending = false;
  if (r->phase == PH_DONE) return;
  if (r->phase == PH_STATS) { /* the end came meanwhile: ask again */
    final_stats(r);
    return;
  }
  if (status == 0) cli_loss_collect(st, &r->loss);
  show_progress(r);
}

static void on_tick(uv_timer_t *t) {
  record_t *r = t->data;
  if (r->stats_pending || !r->conn.c) return;
  if (tg_consumer_get_trace_stats(r->conn.c, on_tick_stats, r) == 0)
    r->stats_pending = true;
  else
    show_progress(r);
}

/* --- reading (the service keeps the trace in its buffers) --------------- */

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *p, size_t n) {
  (void)c;
  record_t *r = ctx;
  if (r->phase == PH_DONE) return -ECANCELED;
  return cli_output_packet(&r->out, p, n);
}

static void read_now(record_t *r);

static void on_read_done(tg_consumer_t *c, void *ctx, int status,
                         const char *msg) {
  (void)c;
  record_t *r = ctx;
  r->reading = false;
  if (r->phase == PH_DONE) return;
  if (status) {
    r->keep_partial = true;
    if (r->out.err)
      fail(r, "cannot write %s: %s", r->o.out, tg_strerror(r->out.err));
    else
      fail(r, "reading the trace failed: %s", msg);
    return;
  }
  if (r->phase != PH_DRAINING) return;
  /* After the end, read until a read comes back empty. */
  bool got = r->out.packets > r->packets_before_read;
  if (got && ++r->drain_reads < MAX_DRAIN_READS) {
    read_now(r);
    return;
  }
  drain(r);
}

static void read_now(record_t *r) {
  if (r->reading || !r->conn.c) return;
  r->packets_before_read = r->out.packets;
  int rv = tg_consumer_read_buffers(r->conn.c, on_packet, on_read_done, r);
  if (rv < 0) {
    r->keep_partial = true;
    fail(r, "cannot read the trace: %s", tg_strerror(rv));
    return;
  }
  r->reading = true;
}

static void on_read_timer(uv_timer_t *t) {
  record_t *r = t->data;
  if (r->phase == PH_TRACING || r->phase == PH_STOPPING) read_now(r);
}

/* --- the end ------------------------------------------------------------- */

/* An attached write_into_file session: the file is the service's; check
 * it holds whole packets. */
static int verify_watched(record_t *r) {
  int err = cli_output_scan(&r->out);
  if (err == 0 && r->out.scan_off != r->out.bytes) err = TG_EPROTO_DECODE;
  if (err) {
    fprintf(stderr, CLI_PROG ": %s: the trace file is damaged (%s)\n", r->o.out,
            tg_strerror(err));
    return -1;
  }
  if (r->out.packets == 0) {
    fprintf(stderr, CLI_PROG ": %s: the trace is empty\n", r->o.out);
    return -1;
  }
  return 0;
}

static void complete(record_t *r) {
  clear_progress(r);
  uint64_t elapsed = cli_now_ms() - r->t0;
  int rv = 0;
  bool checked = r->has_out;
  if (r->watch_only) {
    rv = verify_watched(r);
    cli_output_discard(&r->out);
  } else if (r->has_out) {
    rv = cli_output_commit(&r->out);
  }
  r->has_out = false;
  if (rv == 0) {
    char by[32], el[32];
    cli_format_bytes(by, sizeof(by), r->out.bytes);
    cli_format_ms(el, sizeof(el), elapsed);
    if (checked)
      fprintf(stderr, CLI_PROG ": wrote %s: %s, %llu packets, %s\n", r->o.out,
              by, (unsigned long long)r->out.packets, el);
    else
      fprintf(stderr, CLI_PROG ": the session ended; the service wrote its "
              "trace into the file given at --detach\n");
    r->exit_code = CLI_EXIT_OK;
  }
  cli_loss_print(stderr, &r->loss);
  finish(r);
}

static void on_final_stats(tg_consumer_t *c, void *ctx, int status,
                           const char *msg, const Perfetto__Protos__TraceStats *st) {
  (void)c;
  record_t *r = ctx;
  r->stats_pending = false;
  if (r->phase != PH_STATS) return;
  if (status == 0)
    cli_loss_collect(st, &r->loss);
  else
    fprintf(stderr, CLI_PROG ": warning: no final statistics: %s\n", msg);
  complete(r);
}

static void final_stats(record_t *r) {
  if (r->stats_pending) return; /* its reply continues */
  r->phase = PH_STATS;
  int rv = tg_consumer_get_trace_stats(r->conn.c, on_final_stats, r);
  if (rv < 0) {
    fprintf(stderr, CLI_PROG ": warning: no final statistics: %s\n",
            tg_strerror(rv));
    complete(r);
    return;
  }
  r->stats_pending = true;
}

/* Tracing ended: read the rest (unless the service wrote the file), then
 * the final statistics. Re-entered when a read finishes. */
static void drain(record_t *r) {
  if (r->phase == PH_DONE || r->phase == PH_STATS) return;
  if (r->phase != PH_DRAINING) {
    r->phase = PH_DRAINING;
    uv_timer_stop(&r->tick);
    uv_timer_stop(&r->reader);
    uv_timer_stop(&r->stopper);
    arm_guard(r);
    if (!r->file_mode && r->has_out) {
      if (!r->reading) read_now(r);
      return; /* on_read_done comes back here */
    }
  } else if (r->reading) {
    return;
  }
  if (r->stats_pending) {
    /* A progress GetTraceStats is in flight: on_tick_stats asks again. */
    r->phase = PH_STATS;
    return;
  }
  final_stats(r);
}

static void on_ended(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  record_t *r = ctx;
  if (r->phase == PH_DONE || status == -ECANCELED) return;
  if (status == TG_EPEER_CLOSED) return; /* record_on_conn_lost says it */
  if (status) {
    r->keep_partial = true; /* kept only if it holds packets */
    fail(r, "%s", msg);
    return;
  }
  drain(r);
}

/* --- stopping ------------------------------------------------------------ */

static void on_disabled(tg_consumer_t *c, void *ctx, int status,
                        const char *msg) {
  (void)c;
  record_t *r = ctx;
  if (r->phase != PH_STOPPING || status == 0) return;
  r->keep_partial = true;
  fail(r, "cannot stop tracing: %s", msg);
}

static void disable_now(record_t *r) {
  int rv = tg_consumer_disable_tracing(r->conn.c, on_disabled, r);
  if (rv < 0) {
    r->keep_partial = true;
    fail(r, "cannot stop tracing: %s", tg_strerror(rv));
  }
}

static void on_stop_flushed(tg_consumer_t *c, void *ctx, int status,
                            const char *msg) {
  (void)c;
  (void)status; /* a failed flush still ends with what was committed */
  (void)msg;
  record_t *r = ctx;
  if (r->phase == PH_STOPPING) disable_now(r);
}

static void request_stop(record_t *r) {
  if (r->phase == PH_STARTING) {
    r->stop_wanted = true;
    return;
  }
  if (r->phase != PH_TRACING) return;
  r->phase = PH_STOPPING;
  arm_guard(r);
  if (tg_consumer_flush(r->conn.c, STOP_FLUSH_TIMEOUT_MS, on_stop_flushed, r) < 0)
    disable_now(r);
}

static void on_stopper(uv_timer_t *t) { request_stop(t->data); }

static void on_guard(uv_timer_t *t) {
  record_t *r = t->data;
  r->keep_partial = true;
  fail(r, "the service did not answer in time (%s)",
       r->phase == PH_STOPPING ? "stopping the session" : "reading the trace");
}

/* on_guard names what was pending from the phase. */
static void arm_guard(record_t *r) {
  uv_timer_start(&r->guard, on_guard, GUARD_MS, 0);
}

static void on_sigint(uv_signal_t *s, int signum) {
  (void)signum;
  record_t *r = s->data;
  if (++r->sigints > 1) {
    clear_progress(r);
    fprintf(stderr, CLI_PROG ": aborted\n");
    if (r->has_out && !r->watch_only) cli_output_abandon(&r->out);
    fflush(stderr);
    _exit(CLI_EXIT_ABORTED);
  }
  clear_progress(r);
  fprintf(stderr, CLI_PROG ": stopping the trace (Ctrl-C again to abort)\n");
  request_stop(r);
}

/* --- starting ------------------------------------------------------------ */

static void begin_tracing(record_t *r) {
  r->phase = PH_TRACING;
  r->t0 = cli_now_ms();
  if (r->tty) uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
  if (!r->file_mode && r->has_out)
    uv_timer_start(&r->reader, on_read_timer, READ_PERIOD_MS, READ_PERIOD_MS);
  if (r->o.attach && r->o.has_duration && r->o.duration_ms)
    uv_timer_start(&r->stopper, on_stopper, r->o.duration_ms, 0);
  if (r->o.stop || r->stop_wanted) request_stop(r);
}

static void on_started(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  record_t *r = ctx;
  if (status && r->phase != PH_DONE) fail(r, "cannot start tracing: %s", msg);
}

static void on_detached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg) {
  (void)c;
  record_t *r = ctx;
  if (r->phase == PH_DONE) return;
  if (status) {
    fail(r, "cannot detach: %s", msg);
    return;
  }
  if (r->has_out) {
    /* The service goes on writing into the file: give it its name now. */
    if (r->file_mode && cli_output_rename_now(&r->out) == 0)
      fprintf(stderr, CLI_PROG ": the service writes the trace into %s\n",
              r->o.out);
    cli_output_discard(&r->out);
    r->has_out = false;
  }
  fprintf(stderr,
          CLI_PROG ": detached; the session runs on as '%s'. Take it back "
          "with: " CLI_PROG " record --attach %s [--stop] [-o FILE]\n",
          r->o.detach, r->o.detach);
  printf("%s\n", r->o.detach);
  fflush(stdout);
  r->exit_code = CLI_EXIT_OK;
  finish(r);
}

static void enable(record_t *r) {
  tg_buf_t bytes;
  tg_buf_init(&bytes, 0);
  if (cli_config_pack(r->cfg, &bytes) < 0) {
    tg_buf_free(&bytes);
    fail(r, "out of memory");
    return;
  }
  r->duration_ms = r->cfg->has_duration_ms ? r->cfg->duration_ms : 0;
  int fd = -1;
  if (r->file_mode) {
    fd = fcntl(r->out.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      tg_buf_free(&bytes);
      fail(r, "cannot pass %s to the service: %s", r->o.out, strerror(errno));
      return;
    }
    r->out.by_service = true;
  }
  int rv = tg_consumer_enable_tracing(r->conn.c, tg_buf_begin(&bytes),
                                      tg_buf_size(&bytes), fd, on_ended, r);
  tg_buf_free(&bytes);
  if (rv < 0) {
    fail(r, "cannot enable tracing: %s", tg_strerror(rv));
    return;
  }
  /* Requests are handled in order: each of these sees the new session. */
  if (r->cfg->has_deferred_start && r->cfg->deferred_start &&
      (rv = tg_consumer_start_tracing(r->conn.c, on_started, r)) < 0) {
    fail(r, "cannot start tracing: %s", tg_strerror(rv));
    return;
  }
  if (r->o.detach) {
    rv = tg_consumer_detach(r->conn.c, r->o.detach, on_detached, r);
    if (rv < 0) fail(r, "cannot detach: %s", tg_strerror(rv));
    return;
  }
  begin_tracing(r);
}

static void on_redetached(tg_consumer_t *c, void *ctx, int status,
                          const char *msg) {
  (void)c;
  (void)msg;
  record_t *r = ctx;
  if (status)
    fprintf(stderr, CLI_PROG ": warning: could not detach again: the session "
            "ends now\n");
  r->exit_code = CLI_EXIT_USAGE;
  finish(r);
}

static void on_attached(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, const uint8_t *config, size_t len) {
  record_t *r = ctx;
  if (r->phase == PH_DONE) return;
  if (status) {
    fail(r, "cannot attach to the session '%s': %s", r->o.attach, msg);
    return;
  }
  r->cfg = perfetto__protos__trace_config__unpack(NULL, len, config);
  if (!r->cfg) {
    fail(r, "the service sent a TraceConfig that does not decode");
    return;
  }
  r->file_mode = r->cfg->has_write_into_file && r->cfg->write_into_file;
  r->duration_ms = r->cfg->has_duration_ms ? r->cfg->duration_ms : 0;
  if (!r->file_mode && !r->has_out) {
    /* Give the session back rather than end it. */
    fprintf(stderr, CLI_PROG ": the session keeps its trace in the service's "
            "buffers: give -o FILE to read it\n");
    if (tg_consumer_detach(c, r->o.attach, on_redetached, r) < 0) {
      r->exit_code = CLI_EXIT_USAGE;
      finish(r);
    }
    return;
  }
  if (r->file_mode && r->has_out) {
    /* The service writes the file named at --detach; -o names it to check
     * and to show progress. Our temporary file is not needed. */
    cli_output_discard(&r->out);
    r->has_out = false;
    int fd = open(r->o.out, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fprintf(stderr, CLI_PROG ": warning: %s: %s; the session writes into "
              "the file given at --detach\n", r->o.out, strerror(errno));
    } else {
      memset(&r->out, 0, sizeof(r->out));
      r->out.fd = fd;
      r->out.by_service = true;
      r->has_out = true;
      r->watch_only = true;
    }
  }
  int rv = tg_consumer_notify_on_end(c, on_ended, r);
  if (rv < 0) {
    fail(r, "cannot follow the session: %s", tg_strerror(rv));
    return;
  }
  begin_tracing(r);
}

void record_begin(record_t *r) {
  r->phase = PH_STARTING;
  r->t0 = cli_now_ms();
  uv_signal_init(r->loop, &r->sigint);
  uv_timer_init(r->loop, &r->tick);
  uv_timer_init(r->loop, &r->reader);
  uv_timer_init(r->loop, &r->stopper);
  uv_timer_init(r->loop, &r->guard);
  r->sigint.data = r->tick.data = r->reader.data = r->stopper.data =
      r->guard.data = r;
  uv_signal_start(&r->sigint, on_sigint, SIGINT);
  if (r->o.attach) {
    int rv = tg_consumer_attach(r->conn.c, r->o.attach, on_attached, r);
    if (rv < 0) fail(r, "cannot attach: %s", tg_strerror(rv));
    return;
  }
  enable(r);
}

void record_on_conn_lost(record_t *r, const char *msg) {
  if (r->phase == PH_DONE) return;
  r->keep_partial = r->phase != PH_STARTING;
  fail(r, "lost the connection to the tracing service: %s", msg);
}
