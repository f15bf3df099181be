/* The local recording, driven by the loop: the session itself is the
 * recording engine's (consumer/recording.h); this file gives it the
 * output file, shows progress on a terminal, handles Ctrl-C and says how
 * it ended. Nothing here blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/record.h"
#include "cli/summary_json.h"
#include "tracegate/error.h"

#define TICK_MS 250

static void on_closed(uv_handle_t *h) { (void)h; }

/* Erases the progress line, if one is shown, before other output. */
static void clear_progress(record_t *r) {
  if (!r->progress_shown) return;
  r->progress_shown = false;
  cli_progress_clear(stderr);
}

static const struct {
  const char *token, *text;
} kEnds[] = {
    [RECORD_END_UNKNOWN] = {NULL, NULL},
    [RECORD_END_DURATION] = {"duration", "its duration elapsed"},
    [RECORD_END_SIZE] = {"size", "the trace reached --size"},
    [RECORD_END_MAX_FILE_SIZE] = {"max_file_size",
                                  "max_file_size_bytes reached"},
    [RECORD_END_SIZE_OR_TRIGGER] = {"max_file_size_or_stop_trigger",
                                    "max_file_size_bytes reached or a stop "
                                    "trigger fired"},
    [RECORD_END_STOP_TRIGGER] = {"stop_trigger", "a stop trigger fired"},
    [RECORD_END_SERVICE] = {"service", "the service ended it"},
    [RECORD_END_SERVICE_GONE] = {"service_gone", "the service went away"},
    [RECORD_END_SIGINT] = {"sigint", "stopped by Ctrl-C"},
    [RECORD_END_SIGTERM] = {"sigterm", "stopped by SIGTERM"},
    [RECORD_END_STOP] = {"stop", "stopped by --stop"},
};

/* The failure's kind for --summary-json (the fleet's tokens). */
static const char *failure_kind(const record_t *r) {
  if (r->early_failure) return r->early_failure;
  if (!r->conn.established) return "connect";
  if (r->write_failed) return "write";
  if (r->deadline_failed) return "deadline";
  if (r->conn_lost) return "link_lost";
  return "session";
}

void record_write_summary(record_t *r) {
  bool ok = r->exit_code == CLI_EXIT_OK || r->exit_code == CLI_EXIT_DATA_SOURCE;
  const char *why = kEnds[r->end].text;
  if (!ok && r->fail_why[0]) why = r->fail_why;
  else if (!ok && !r->conn.established && r->conn.close_msg[0])
    why = r->conn.close_msg;
  else if (!ok && r->early_failure)
    why = !strcmp(r->early_failure, "config") ? "the trace config is not valid"
          : !strcmp(r->early_failure, "write") ? "the output cannot be opened"
                                               : "out of resources";
  cli_summary_host_t h = {
      .host = "local",
      .ok = ok,
      .reason = why,
      .failure = ok ? NULL : failure_kind(r),
      .end = kEnds[r->end].token,
      .bytes = r->out.bytes,
      .packets = r->out.packets,
      .loss = r->no_final_stats || !r->began ? NULL : &r->loss,
      .path = ok && r->o.out && strcmp(r->o.out, "-") && !r->nothing_saved
                  ? r->o.out : NULL,
      .problems = &r->problems,
  };
  cli_summary_t s = {.exit_code = r->exit_code,
                     .elapsed_ms = r->t0 ? cli_now_ms() - r->t0 : 0,
                     .output = h.path,
                     .hosts = &h,
                     .n_hosts = 1};
  (void)cli_summary_json_write(r->o.summary_json, &s); /* says why */
}

/* Ends the recording: signal closed, engine freed, connection closed. The
 * loop then runs dry and cli_record_main() takes over. */
static void finish(record_t *r) {
  if (r->finished) return;
  r->finished = true;
  clear_progress(r);
  uv_close((uv_handle_t *)&r->sigint, on_closed);
  uv_close((uv_handle_t *)&r->sigterm, on_closed);
  tg_recording_free(r->rec);
  r->rec = NULL;
  if (r->conn.c) tg_consumer_close(r->conn.c);
}

__attribute__((format(printf, 3, 4)))
static void fail(record_t *r, tg_notice_t code, const char *fmt, ...) {
  if (r->finished) return;
  clear_progress(r);
  va_list ap;
  va_start(ap, fmt);
  cli_vsay(code, fmt, ap);
  va_end(ap);
  va_start(ap, fmt);
  vsnprintf(r->fail_why, sizeof(r->fail_why), fmt, ap);
  va_end(ap);
  r->exit_code = CLI_EXIT_FAIL;
  finish(r);
}

/* --- progress ------------------------------------------------------------ */

static void show_progress(record_t *r) {
  if (!r->tty || r->finished) return;
  if (r->file_mode && r->has_out) cli_output_scan(&r->out);
  r->progress_shown = true;
  if (record_trigger_progress(r)) return;
  cli_progress_print(stderr, cli_now_ms() - r->t0, r->duration_ms,
                     r->has_out ? r->out.bytes : 0,
                     r->has_out ? r->out.packets : 0, r->loss.total);
}

static void on_stats(tg_recording_t *rec, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, bool final) {
  record_t *r = tg_recording_data(rec);
  if (status == 0) {
    cli_loss_collect(st, &r->loss);
    /* The service's counters say nothing of the kernel's buffers. */
    cli_ftrace_loss_add(&r->ftrace, &r->loss);
  }
  if (!final) {
    show_progress(r);
  } else if (status) {
    clear_progress(r);
    fprintf(stderr, CLI_PROG ": %s warning: no final statistics: %s\n",
            TG_NOTE(LOSS_UNKNOWN), msg);
    r->no_final_stats = true;
  } else {
    r->no_final_stats = false;
  }
}

/* --- the end ------------------------------------------------------------- */

/* An attached write_into_file session: the file is the service's; check
 * it holds whole packets. */
static int verify_watched(record_t *r) {
  int err = cli_output_scan(&r->out);
  if (err == 0 && r->out.scan_off != r->out.bytes) err = TG_EPROTO_DECODE;
  if (err) {
    fprintf(stderr, CLI_PROG ": %s %s: the trace file is damaged (%s)\n",
            TG_NOTE(TRACE_DAMAGED), r->o.out, tg_strerror(err));
    return -1;
  }
  if (r->out.packets == 0) {
    fprintf(stderr, CLI_PROG ": %s %s: the trace is empty\n",
            TG_NOTE(TRACE_EMPTY), r->o.out);
    return -1;
  }
  return 0;
}

/* Why a session ended that we did not stop: what its config allowed,
 * checked against what happened. */
static record_end_t inferred_end(record_t *r, uint64_t elapsed) {
  const Perfetto__Protos__TraceConfig *cfg =
      r->cfg ? r->cfg : tg_recording_config(r->rec);
  if (r->size_reached) return RECORD_END_SIZE;
  uint64_t max = cfg && cfg->has_max_file_size_bytes ? cfg->max_file_size_bytes : 0;
  bool duration_up = r->duration_ms && elapsed + 250 >= r->duration_ms;
  bool stop_trigger =
      cfg && cfg->trigger_config && cfg->trigger_config->has_trigger_mode &&
      cfg->trigger_config->trigger_mode ==
          PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING;
  /* Before its duration, a session we did not stop ends for what its
   * config allows: the service writing the file stops it at the size
   * limit (the next write would pass it), or a stop trigger fired. */
  bool size_limit = max && r->file_mode && !duration_up;
  if (size_limit && stop_trigger) return RECORD_END_SIZE_OR_TRIGGER;
  if (size_limit) return RECORD_END_MAX_FILE_SIZE;
  if (stop_trigger && !duration_up) return RECORD_END_STOP_TRIGGER;
  if (duration_up || (r->o.attach && r->duration_ms)) return RECORD_END_DURATION;
  return RECORD_END_SERVICE;
}

static void complete(record_t *r) {
  clear_progress(r);
  uint64_t elapsed = cli_now_ms() - r->t0;
  if (!r->end) r->end = inferred_end(r, elapsed);
  int rv = 0;
  bool checked = r->has_out;
  if (r->watch_only) {
    rv = verify_watched(r);
    cli_output_discard(&r->out);
  } else if (r->has_out) {
    rv = cli_output_commit(&r->out);
    r->write_failed = rv != 0 && r->out.err;
  }
  r->has_out = false;
  if (rv == 0) {
    char by[32], el[32];
    cli_format_bytes(by, sizeof(by), r->out.bytes);
    cli_format_ms(el, sizeof(el), elapsed);
    /* An attached session ran before we came: our clock would lie. */
    if (checked && r->o.attach)
      fprintf(stderr, CLI_PROG ": %s wrote %s: %s, %llu packets (attached "
              "for %s; the session ran since --detach)\n",
              TG_NOTE(TRACE_WRITTEN_ATTACHED), r->o.out, by,
              (unsigned long long)r->out.packets, el);
    else if (checked)
      fprintf(stderr, CLI_PROG ": %s wrote %s: %s, %llu packets, %s\n",
              TG_NOTE(TRACE_WRITTEN), r->o.out, by,
              (unsigned long long)r->out.packets, el);
    else
      fprintf(stderr, CLI_PROG ": %s the session ended; the service wrote "
              "its trace into the file given at --detach\n",
              TG_NOTE(TRACE_WRITTEN_BY_SERVICE));
    r->exit_code = CLI_EXIT_OK;
  }
  /* Written, but with nothing traced: not a success. */
  if (record_trigger_never_fired(r)) r->exit_code = CLI_EXIT_FAIL;
  fprintf(stderr, CLI_PROG ": %s the session ended: %s\n",
          TG_NOTE(SESSION_ENDED), kEnds[r->end].text);
  if (r->no_final_stats)
    fprintf(stderr, CLI_PROG ": %s data loss unknown (no final statistics)\n",
            TG_NOTE(LOSS_UNKNOWN));
  else
    cli_loss_print(stderr, &r->loss);
  /* A trace written without all it was asked for is not a success, nor
   * a failure: its own status, once the trace is safe. */
  tg_ds_problems_from_ftrace(&r->problems, &r->ftrace);
  cli_ds_problems_print(stderr, NULL, "local", &r->problems);
  if (r->exit_code == CLI_EXIT_OK &&
      cli_ds_problems_fail(&r->problems, cli_ftrace_events_asked(r->cfg),
                           r->o.strict))
    r->exit_code = CLI_EXIT_DATA_SOURCE;
  finish(r);
}

/* --detach: the session runs on in the service. */
static void detached(record_t *r) {
  if (r->has_out) {
    /* The service goes on writing into the file: give it its name now. */
    if (r->file_mode && cli_output_rename_now(&r->out) == 0)
      fprintf(stderr, CLI_PROG ": %s the service writes the trace into %s\n",
              TG_NOTE(TRACE_WRITTEN_BY_SERVICE), r->o.out);
    cli_output_discard(&r->out);
    r->has_out = false;
  }
  fprintf(stderr,
          CLI_PROG ": %s detached; the session runs on as '%s'. Take it back "
          "with: " CLI_PROG " record --attach %s [--stop] [-o FILE]\n",
          TG_NOTE(DETACHED), r->o.detach, r->o.detach);
  printf("%s\n", r->o.detach);
  fflush(stdout);
  r->exit_code = CLI_EXIT_OK;
  finish(r);
}

static void on_end(tg_recording_t *rec, int status, const char *reason) {
  record_t *r = tg_recording_data(rec);
  if (r->finished) return;
  switch (tg_recording_state(rec)) {
    case TG_REC_DONE:
      complete(r);
      return;
    case TG_REC_DETACHED:
      if (r->o.detach) {
        detached(r);
        return;
      }
      /* --attach without -o: the session was given back. */
      if (status)
        fprintf(stderr, CLI_PROG ": warning: could not detach again: the "
                "session ends now\n");
      r->exit_code = CLI_EXIT_USAGE;
      finish(r);
      return;
    default:
      break;
  }
  r->keep_partial = r->began; /* kept only if it holds packets */
  r->deadline_failed = tg_recording_deadline_failed(rec);
  if (r->conn_lost) {
    r->end = RECORD_END_SERVICE_GONE;
    fprintf(stderr, CLI_PROG ": %s the session ended: %s\n",
            TG_NOTE(SESSION_ENDED), kEnds[r->end].text);
  }
  r->write_failed = r->has_out && r->out.err;
  if (r->write_failed)
    fail(r, TG_N_OUTPUT_UNWRITABLE, "cannot write %s: %s", r->o.out,
         tg_strerror(r->out.err));
  else
    fail(r, r->o.attach && !r->began ? TG_N_ATTACH_FAILED : TG_N_SESSION_FAILED,
         "%s", reason);
}

static void on_state(tg_recording_t *rec, tg_rec_state_t from,
                     tg_rec_state_t to) {
  record_t *r = tg_recording_data(rec);
  if (to == TG_REC_TRACING && from == TG_REC_STARTING) {
    r->began = true;
    r->t0 = cli_now_ms();
  }
}

static int on_packet(tg_recording_t *rec, const uint8_t *p, size_t n) {
  record_t *r = tg_recording_data(rec);
  tg_ftrace_loss_scan(&r->ftrace, p, n);
  int rv = cli_output_packet(&r->out, p, n);
  /* Streamed (the service does not write the file): --size is ours to
   * keep. The session is stopped; what it still sends (its trace_stats)
   * is written, so the file ends a little past the limit. */
  if (rv == 0 && r->o.max_file_bytes && !r->size_reached &&
      r->out.bytes >= r->o.max_file_bytes) {
    r->size_reached = true;
    tg_recording_stop(rec);
  }
  return rv;
}

/* An attached session: where its trace goes decides what we do. */
static int on_attached(tg_recording_t *rec,
                       const Perfetto__Protos__TraceConfig *cfg) {
  record_t *r = tg_recording_data(rec);
  r->file_mode = cfg->has_write_into_file && cfg->write_into_file;
  r->duration_ms = cfg->has_duration_ms ? cfg->duration_ms : 0;
  if (!r->file_mode && !r->has_out) {
    fprintf(stderr, CLI_PROG ": %s the session keeps its trace in the "
            "service's buffers: give -o FILE to read it\n",
            TG_NOTE(ATTACH_NEEDS_OUTPUT));
    return 1; /* give the session back rather than end it */
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
  tg_recording_set_stream(rec, !r->file_mode && r->has_out);
  /* Whether it already started is not known: only snapshots are watched. */
  if (record_snapshot_mode(cfg)) record_trigger_watch(r, cfg);
  return 0;
}

static const tg_recording_cbs_t rec_cbs = {
    .on_state = on_state,
    .on_packet = on_packet,
    .on_attached = on_attached,
    .on_stats = on_stats,
    .on_end = on_end,
};

static void on_sigint(uv_signal_t *s, int signum) {
  record_t *r = s->data;
  if (!r->end) r->end = signum == SIGTERM ? RECORD_END_SIGTERM : RECORD_END_SIGINT;
  if (++r->sigints > 1) {
    clear_progress(r);
    fprintf(stderr, CLI_PROG ": %s aborted\n", TG_NOTE(ABORTED));
    if (r->has_out && !r->watch_only) cli_output_abandon(&r->out);
    fflush(stderr);
    _exit(CLI_EXIT_ABORTED);
  }
  clear_progress(r);
  fprintf(stderr, CLI_PROG ": %s stopping the trace (Ctrl-C again to abort)\n",
          TG_NOTE(STOPPING));
  tg_recording_stop(r->rec);
}

/* --- starting ------------------------------------------------------------ */

/* The engine's options; |bytes| holds the packed config when enabling. */
static int prepare(record_t *r, tg_recording_opts_t *ro, tg_buf_t *bytes) {
  memset(ro, 0, sizeof(*ro));
  ro->fd = -1;
  ro->stats_period_ms = r->tty ? TICK_MS : 0;
  ro->grace_ms = r->o.grace_ms;
  ro->detach_key = r->o.detach;
  ro->attach_key = r->o.attach;
  if (r->o.attach) {
    if (r->o.has_duration) ro->stop_after_ms = r->o.duration_ms;
    ro->stream = r->has_out; /* unless on_attached finds file mode */
    return 0;
  }
  if (cli_config_pack(r->cfg, bytes) < 0) {
    fail(r, TG_N_SESSION_FAILED, "out of memory");
    return -1;
  }
  ro->config = tg_buf_begin(bytes);
  ro->config_len = tg_buf_size(bytes);
  r->duration_ms = r->cfg->has_duration_ms ? r->cfg->duration_ms : 0;
  ro->stream = !r->file_mode && r->has_out;
  if (r->file_mode) {
    ro->fd = fcntl(r->out.fd, F_DUPFD_CLOEXEC, 0);
    if (ro->fd < 0) {
      fail(r, TG_N_OUTPUT_UNWRITABLE, "cannot pass %s to the service: %s",
           r->o.out, strerror(errno));
      return -1;
    }
    r->out.by_service = true;
  }
  return 0;
}

void record_begin(record_t *r) {
  r->t0 = cli_now_ms();
  uv_signal_init(r->loop, &r->sigint);
  r->sigint.data = r;
  uv_signal_start(&r->sigint, on_sigint, SIGINT);
  /* SIGTERM ends the trace cleanly, as Ctrl-C does (and as Perfetto's
   * CLI, in the foreground or with -d). */
  uv_signal_init(r->loop, &r->sigterm);
  r->sigterm.data = r;
  uv_signal_start(&r->sigterm, on_sigint, SIGTERM);
  r->rec = tg_recording_new(r->loop, &tg_clock_monotonic, &rec_cbs, r);
  if (!r->rec) {
    fail(r, TG_N_SESSION_FAILED, "out of memory");
    return;
  }
  tg_recording_opts_t ro;
  tg_buf_t bytes;
  tg_buf_init(&bytes, 0);
  if (prepare(r, &ro, &bytes) < 0) {
    tg_buf_free(&bytes);
    return;
  }
  /* Before EnableTracing: no trigger can slip in between the two. */
  if (!r->o.attach) record_trigger_watch(r, r->cfg);
  int rv = tg_recording_start(r->rec, r->conn.c, &ro);
  tg_buf_free(&bytes);
  if (rv < 0) {
    fail(r, r->o.attach ? TG_N_ATTACH_FAILED : TG_N_SESSION_FAILED,
         "cannot %s: %s", r->o.attach ? "attach" : "enable tracing",
         tg_strerror(rv));
    return;
  }
  if (r->o.stop) {
    r->end = RECORD_END_STOP;
    tg_recording_stop(r->rec);
  }
}

void record_on_conn_lost(record_t *r, const char *msg) {
  if (r->finished) return;
  r->conn_lost = true;
  char why[600];
  snprintf(why, sizeof(why), "lost the connection to the tracing service: %s",
           msg);
  /* The service is gone with the connection: nothing to resume. */
  tg_recording_unbind(r->rec);
  tg_recording_fail(r->rec, false, why);
}
