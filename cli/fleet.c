/* `tracegate record -H ...`: the run. Sets up the outputs (one file, a
 * directory of files, or one merged trace), starts the fleet on one loop
 * (the engine admits its hosts a window at a time), draws the progress,
 * handles Ctrl-C, and ends with the summary once every host is done or failed.
 * The hosts themselves are the fleet engine's (consumer/fleet/host.h);
 * what their events do here is fleet_host.c's. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/fleet.h"
#include "cli/summary_json.h"
#include "client/session_cache.h"
#include "tracegate/error.h"
#include "common/log.h"

#define TICK_MS 250 /* progress (and tg_fleet_start, which is idempotent) */
#define ABORT_GRACE_MS 2000

static void on_closed(uv_handle_t *h) { (void)h; }

/* --- outputs ----------------------------------------------------------------- */

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p */
static int make_dir(const char *path) {
  char *p = strdup(path);
  if (!p) return -ENOMEM;
  int rv = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s) continue;
    char c = *s;
    *s = 0;
    if (mkdir(p, 0777) < 0 && errno != EEXIST) rv = -errno;
    *s = c;
    if (!c || rv) break;
  }
  if (rv == 0 && !is_dir(path)) rv = -ENOTDIR;
  free(p);
  return rv;
}

static int choose_mode(fleet_t *f) {
  const char *out = f->out;
  size_t len = strlen(out);
  bool dir_form = len && out[len - 1] == '/';
  if (f->o->merge) {
    if (dir_form || is_dir(out)) {
      fprintf(stderr, CLI_PROG ": %s cannot write %s: it is a directory "
              "(--merge writes one file)\n", TG_NOTE(OUTPUT_UNWRITABLE), out);
      return -1;
    }
    f->mode = FLEET_OUT_MERGE;
    return 0;
  }
  if (f->n == 1 && !dir_form && !is_dir(out)) {
    f->mode = FLEET_OUT_FILE;
    return 0;
  }
  struct stat st;
  if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
    fprintf(stderr, CLI_PROG ": %s %s is a file: with several hosts, -o names "
            "a directory (one trace per host), or give --merge for one trace\n",
            TG_NOTE(OUTPUT_UNWRITABLE), out);
    return -1;
  }
  f->mode = FLEET_OUT_DIR;
  bool existed = is_dir(out);
  int rv = make_dir(out);
  if (rv == 0 && !existed)
    fprintf(stderr, CLI_PROG ": created the directory %s: one trace per host "
            "(--merge writes one file)\n", out);
  if (rv < 0) {
    fprintf(stderr, CLI_PROG ": %s cannot create the directory %s: %s\n",
            TG_NOTE(OUTPUT_UNWRITABLE), out, tg_strerror(rv));
    return -1;
  }
  return 0;
}

/* The merge's sink: its packets into the merged file as they come. */
static int write_merged(void *ctx, const uint8_t *p, size_t n,
                        const uint8_t *tail, size_t tail_n) {
  return cli_output_packet_ex(ctx, p, n, tail, tail_n);
}

/* Every output is created (as a temporary file) before any session
 * exists: a path that cannot be written fails the run at once. */
static int open_outputs(fleet_t *f) {
  if (f->mode == FLEET_OUT_MERGE) {
    if (cli_output_open(&f->merged, f->out) < 0) return -1;
    f->has_merged = true;
    for (size_t i = 0; i < f->n; i++) f->hosts[i].core.out_name = f->out;
    tg_merge_self_t self;
    tg_merge_self_read(&self);
    int rv = tg_merge_head(&f->merge, &self);
    if (rv < 0) {
      fprintf(stderr, CLI_PROG ": %s cannot write %s: %s\n",
              TG_NOTE(OUTPUT_UNWRITABLE), f->out, tg_strerror(rv));
      return -1;
    }
    return 0;
  }
  for (size_t i = 0; i < f->n; i++) {
    fleet_host_t *h = &f->hosts[i];
    if (f->mode == FLEET_OUT_FILE) {
      h->path = strdup(f->out);
    } else {
      size_t len = strlen(f->out) + strlen(h->t->name) + 16;
      h->path = malloc(len);
      if (h->path)
        snprintf(h->path, len, "%s%s%s.pftrace", f->out,
                 f->out[strlen(f->out) - 1] == '/' ? "" : "/", h->t->name);
    }
    if (!h->path) {
      fprintf(stderr, CLI_PROG ": out of memory\n");
      return -1;
    }
    if (cli_output_open(&h->own, h->path) < 0) return -1;
    h->has_own = true;
    h->core.out_name = h->path;
  }
  return 0;
}

/* --- the loop's shared handles --------------------------------------------------- */

static void close_handles(fleet_t *f) {
  if (f->closed) return;
  f->closed = true;
  uv_close((uv_handle_t *)&f->sigint, on_closed);
  uv_close((uv_handle_t *)&f->sigterm, on_closed);
  uv_close((uv_handle_t *)&f->tick, on_closed);
  uv_close((uv_handle_t *)&f->abort_timer, on_closed);
}

static void host_finished(fleet_t *f) {
  f->finished++;
  if (f->finished == f->n) close_handles(f);
  else fleet_ui_draw(f);
}

/* Above this many hosts, a line per resume key would drown the terminal. */
#define KEYS_ON_TERMINAL_MAX 20

static int open_keys(fleet_t *f) {
  size_t len = strlen(f->out) + 16;
  char *path = malloc(len);
  if (!path) return -ENOMEM;
  snprintf(path, len, "%s%s", f->out,
           f->mode == FLEET_OUT_DIR ? "/resume.keys" : ".keys");
  f->keys = fopen(path, "we");
  int rv = f->keys ? 0 : -errno;
  f->keys_path = path;
  if (rv == 0)
    fleet_say(f, TG_N_FLEET_KEYS_FILE, "resume keys of the %zu hosts go to %s, a line per host: "
              "HOST KEY (" CLI_PROG " record -H HOST --attach KEY)", f->n,
              path);
  else
    fleet_say(f, TG_N_FLEET_KEYS_UNWRITABLE,
              "warning: cannot write the resume keys to %s: %s; a lost "
              "collector cannot take its sessions back", path,
              tg_strerror(rv));
  return rv;
}

static void show_key(fleet_t *f, fleet_host_t *h) {
  if (f->n <= KEYS_ON_TERMINAL_MAX) {
    fleet_say(f, TG_N_FLEET_RESUME_KEY, "%s: resume key %s (" CLI_PROG " record -H %s --attach %s)",
              h->t->spec, h->core.key, h->t->spec, h->core.key);
    return;
  }
  if (!f->keys && !f->keys_failed && open_keys(f) < 0) f->keys_failed = true;
  if (!f->keys) return;
  /* On disk before the session exists: if we die, it can be taken back. */
  fprintf(f->keys, "%s %s\n", h->t->spec, h->core.key);
  fflush(f->keys);
}

/* With a fleet, when the last host began tracing is the figure that says
 * whether the start kept up. */
static void host_traced(fleet_t *f) {
  if (f->n > 1 && f->core.traced == f->n) {
    char el[32];
    cli_format_ms(el, sizeof(el), uv_now(f->loop) - f->t0);
    char tls[80] = "";
    if (f->tls_counts.full + f->tls_counts.resumed)
      snprintf(tls, sizeof(tls), " (TLS: %" PRIu64 " full handshakes, %" PRIu64
               " resumed)", f->tls_counts.full, f->tls_counts.resumed);
    fleet_say(f, TG_N_FLEET_ALL_TRACING, "all %zu hosts tracing, %s after the start%s", f->n, el, tls);
  }
}

static const fleet_run_events_t run_events = {
    .host_finished = host_finished,
    .show_key = show_key,
    .host_traced = host_traced,
};

static void on_tick(uv_timer_t *t) {
  fleet_t *f = t->data;
  tg_fleet_start(&f->core);
  fleet_ui_draw(f);
}

static void discard_all(fleet_t *f) {
  for (size_t i = 0; i < f->n; i++)
    if (f->hosts[i].has_own) {
      cli_output_discard(&f->hosts[i].own);
      f->hosts[i].has_own = false;
    }
  if (f->has_merged) cli_output_discard(&f->merged);
  f->has_merged = false;
}

static void exit_now(fleet_t *f) {
  fleet_ui_clear(f);
  discard_all(f);
  fprintf(stderr, CLI_PROG ": %s aborted\n", TG_NOTE(ABORTED));
  fflush(stderr);
  _exit(CLI_EXIT_ABORTED);
}

static void on_abort_timer(uv_timer_t *t) { exit_now(t->data); }

/* A second Ctrl-C: every session is ended (FreeBuffers: a session left
 * behind would be detached by its relay under our key, for nobody to take
 * back) and nothing is written. A third one, or 2 s, and we are gone. */
static void abort_all(fleet_t *f) {
  if (f->aborting) exit_now(f);
  f->aborting = true;
  tg_fleet_halt(&f->core);
  fleet_say(f, TG_N_FLEET_ABORTING, "aborting: ending the sessions (Ctrl-C again to quit at once)");
  discard_all(f);
  uv_timer_start(&f->abort_timer, on_abort_timer, ABORT_GRACE_MS, 0);
  for (size_t i = 0; i < f->n; i++) tg_fleet_host_abort(&f->hosts[i].core);
}

static void on_sigint(uv_signal_t *s, int signum) {
  (void)signum;
  fleet_t *f = s->data;
  if (++f->sigints > 1) {
    abort_all(f);
    return;
  }
  fleet_say(f, TG_N_STOPPING, "stopping the trace on every host (Ctrl-C again to abort)");
  tg_fleet_halt(&f->core); /* the hosts not started fail as stopped */
  for (size_t i = 0; i < f->n; i++) tg_fleet_host_stop(&f->hosts[i].core);
}

/* Log lines (TLS refusals, protocol warnings) must not tear the progress
 * lines apart. */
static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)level;
  fleet_t *f = ctx;
  fleet_ui_clear(f);
  fprintf(stderr, "%s\n", line);
}

/* --- --summary-json ---------------------------------------------------------- */

static const char *compression_name(tg_fleet_compression_t c) {
  switch (c) {
    case TG_FLEET_COMP_ZSTD: return "zstd";
    case TG_FLEET_COMP_NOT_ASKED: return "plain-not-asked";
    case TG_FLEET_COMP_REFUSED: return "plain-refused";
    case TG_FLEET_COMP_UNSUPPORTED: return "plain-unsupported";
    case TG_FLEET_COMP_UNKNOWN: break;
  }
  return NULL;
}

static tg_merge_host_t *merge_host_at(void *ctx, size_t i) {
  fleet_t *f = ctx;
  return i < f->n ? &f->hosts[i].merge : NULL;
}

/* What the joined mode did with a host's app tracks (merge.h). */
static void summary_links(const fleet_t *f, const tg_merge_host_t *mh,
                          cli_summary_links_t *l) {
  l->mode = tg_merge_app_tracks_name(f->merge.app_tracks);
  l->joined = mh->joined;
  l->early = mh->joined_early;
  l->unclocked = mh->joined_unclocked;
  l->shared = mh->joined_shared;
  l->refused = mh->joined_refused;
  l->clock = mh->joined_clock;
  l->pids = mh->joined_pids;
  l->uuid = mh->joined_uuid;
  l->flows_started = mh->flows_started;
  l->flows_terminated = mh->flows_terminated;
  l->flows_unmatched = mh->flows_unmatched;
  l->flows_unfollowed = mh->flows_unfollowed;
  l->flows_across = mh->flows_across;
}

static void write_summary(fleet_t *f, int code) {
  cli_summary_host_t *hs = calloc(f->n ? f->n : 1, sizeof(*hs));
  cli_summary_links_t *ls = calloc(f->n ? f->n : 1, sizeof(*ls));
  if (!hs || !ls) {
    free(hs);
    free(ls);
    fprintf(stderr, CLI_PROG ": --summary-json: out of memory\n");
    return;
  }
  for (size_t i = 0; i < f->n; i++) {
    const fleet_host_t *h = &f->hosts[i];
    cli_summary_host_t *o = &hs[i];
    o->host = h->t->spec;
    o->name = h->t->label;
    o->ok = h->core.report.link_state == TG_LINK_DONE;
    o->reason = o->ok ? NULL
                : h->core.report.why[0] ? h->core.report.why
                : f->aborting ? "aborted (a second interrupt)"
                              : NULL;
    o->failure = tg_fleet_failure_name(h->core.report.failure);
    if (!o->ok && !o->failure && f->aborting) o->failure = "stopped";
    o->bytes = h->core.report.bytes;
    o->packets = h->core.report.packets;
    o->loss = h->has_loss ? &h->loss : NULL;
    o->reconnects = h->core.report.reconnects;
    o->link_down_ms = h->core.report.down_ms;
    o->reads_cut = h->core.report.reads_cut;
    o->reads_lost = h->core.report.reads_lost;
    o->clock_syncs = h->core.report.clock.estimates;
    if (h->core.report.clock.estimates) {
      /* As the summary prints it. */
      o->has_clock = true;
      o->clock_offset_ns =
          tg_clock_offset(&h->core.report.clock.best, &o->clock_uncertainty_ns);
    }
    o->compression = compression_name(h->core.report.compression);
    o->has_machine_id = f->mode == FLEET_OUT_MERGE;
    o->machine_id = h->merge.machine_id;
    o->path = f->mode != FLEET_OUT_MERGE && h->path && (o->ok || h->kept_partial)
                  ? h->path
                  : NULL;
    o->problems = &h->problems;
    if (f->mode == FLEET_OUT_MERGE) {
      summary_links(f, &h->merge, &ls[i]);
      o->links = &ls[i];
    }
    o->clock_from_requests = h->has_reclock ? &h->reclock : NULL;
  }
  cli_summary_t s = {.exit_code = code,
                     .elapsed_ms = uv_now(f->loop) - f->t0,
                     .output = f->mode == FLEET_OUT_MERGE &&
                                       (code == CLI_EXIT_OK ||
                                        code == CLI_EXIT_DATA_SOURCE)
                                   ? f->out
                                   : NULL,
                     .hosts = hs,
                     .n_hosts = f->n};
  (void)cli_summary_json_write(f->o->summary_json, &s); /* says why */
  free(hs);
  free(ls);
}

/* --- the end -------------------------------------------------------------------- */

static int commit_merged(fleet_t *f) {
  uint64_t packets = 0;
  size_t hosts = 0;
  for (size_t i = 0; i < f->n; i++) {
    packets += f->hosts[i].core.report.packets;
    hosts += f->hosts[i].core.report.packets > 0;
  }
  if (packets == 0) {
    fprintf(stderr, CLI_PROG ": %s no host sent any packet: nothing written "
            "to %s\n", TG_NOTE(TRACE_EMPTY), f->out);
    cli_output_discard(&f->merged);
    f->has_merged = false;
    return -1;
  }
  int rv = cli_output_commit(&f->merged);
  f->has_merged = false;
  if (rv < 0) return -1;
  char by[32];
  cli_format_bytes(by, sizeof(by), f->merged.bytes);
  fprintf(stderr, CLI_PROG ": %s wrote %s: %s, %llu packets from %zu host%s\n",
          TG_NOTE(TRACE_WRITTEN), f->out, by, (unsigned long long)f->merged.packets, hosts,
          hosts == 1 ? "" : "s");
  return 0;
}

/* The run's saved TLS sessions: in memory always, and from the file when
 * --session-cache asks for one. */
static int open_sessions(fleet_t *f, tg_tls_config_t *tls) {
  if (!tls) return 0;
  int on = tg_session_cache_resolve(f->o->remote.tls.session_cache,
                                    f->sessions_path,
                                    sizeof(f->sessions_path));
  if (on < 0) {
    fprintf(stderr, CLI_PROG " record: --session-cache %s: not on, off or a "
            "file path (with a '/')%s\n", f->o->remote.tls.session_cache,
            strcmp(f->o->remote.tls.session_cache, "on") ? ""
                : " (on: no $HOME or $XDG_CACHE_HOME)");
    return -1;
  }
  if (!on) f->sessions_path[0] = 0;
  uint8_t own[TG_TLS_FINGERPRINT_SIZE], ca[TG_TLS_FINGERPRINT_SIZE];
  tg_tls_config_fingerprints(tls, own, ca);
  char warn[TG_SC_WARN_MAX];
  if (tg_session_cache_new(own, ca, &f->sessions) < 0 ||
      (on && tg_session_cache_load(f->sessions, f->sessions_path,
                                   (uint64_t)time(NULL), warn,
                                   sizeof(warn)) < 0)) {
    fprintf(stderr, CLI_PROG " record: out of memory\n");
    return -1;
  }
  if (on && warn[0]) fprintf(stderr, CLI_PROG ": warning: %s\n", warn);
  f->env.sessions = f->sessions;
  return 0;
}

int fleet_record(const record_opts_t *o, Perfetto__Protos__TraceConfig *cfg,
                 const tg_target_t *targets, size_t n,
                 tg_tls_config_t *tls) {
  fleet_t *f = calloc(1, sizeof(*f));
  if (!f) return CLI_EXIT_FAIL;
  int code = CLI_EXIT_FAIL;
  f->o = o;
  f->out = o->out;
  f->n = n;
  tg_fleet_opts_t *fo = &f->core.o;
  fo->reconnect_ms = o->reconnect_ms;
  fo->dead_link_ms = o->dead_link_ms ? o->dead_link_ms : 10000;
  fo->clock_sync_ms = o->clock_sync_ms ? o->clock_sync_ms : 30000;
  fo->attach_key = o->attach;
  fo->compress_level = o->compress_level;
  fo->grace_ms = o->grace_ms;
  fo->stop_after_ms = o->attach && o->has_duration ? o->duration_ms : 0;
  fo->stop_at_start = o->stop;
  f->core.cbs = &fleet_host_cbs;
  f->core.n = n;
  tg_merge_init(&f->merge, write_merged, &f->merged);
  /* Checked with the flags: every name is known. */
  if (o->merge_allow) (void)tg_merge_allow_fields(&f->merge, o->merge_allow,
                                                  NULL, 0);
  tg_merge_set_app_tracks(&f->merge,
                          (tg_merge_app_tracks_t)o->app_tracks_mode);
  f->tty = isatty(STDERR_FILENO);
  tg_buf_init(&f->cfg, 0);
  uv_loop_t loop;
  bool loop_ok = false;
  if (cfg) { /* none with --attach: the session has its own */
    /* A file descriptor cannot cross the network: the trace is streamed. */
    cfg->has_write_into_file = 1;
    cfg->write_into_file = 0;
    free(cfg->output_path); /* unpacked with the default allocator */
    cfg->output_path = NULL;
    f->duration_ms = cfg->has_duration_ms ? cfg->duration_ms : 0;
    if (cli_config_pack(cfg, &f->cfg) < 0) goto out;
  }
  fo->config = tg_buf_begin(&f->cfg);
  fo->config_len = tg_buf_size(&f->cfg);
  fo->check_names = cfg && cfg->n_data_sources;
  if (choose_mode(f) < 0) goto out;
  f->hosts = calloc(n, sizeof(*f->hosts));
  if (!f->hosts || uv_loop_init(&loop) < 0) goto out;
  loop_ok = true;
  /* Before tg_fleet_init, as host.h asks: the fleet's clock reads it. */
  f->core.loop = &loop;
  if (tg_fleet_init(&f->core) < 0 || fleet_names_init(f, cfg) < 0) goto out;
  f->loop = &loop;
  f->env.loop = &loop;
  f->env.tls = tls;
  f->env.server_name = o->remote.server_name;
  f->env.dead_link_timeout_s = (uint32_t)((fo->dead_link_ms + 999) / 1000);
  f->core.dialer = tg_remote_dialer(&f->env);
  f->env.counts = &f->tls_counts;
  if (open_sessions(f, tls) < 0) goto out;
  f->run = &run_events;
  for (size_t i = 0; i < n; i++) fleet_host_init(f, &f->hosts[i], i, &targets[i]);
  if (open_outputs(f) < 0) {
    for (size_t i = 0; i < n; i++) tg_fleet_host_close(&f->hosts[i].core);
    goto out;
  }
  uv_signal_init(&loop, &f->sigint);
  uv_signal_init(&loop, &f->sigterm);
  uv_timer_init(&loop, &f->tick);
  uv_timer_init(&loop, &f->abort_timer);
  f->sigint.data = f->sigterm.data = f->tick.data = f->abort_timer.data = f;
  uv_signal_start(&f->sigint, on_sigint, SIGINT);
  /* SIGTERM stops every host cleanly, as Ctrl-C does. */
  uv_signal_start(&f->sigterm, on_sigint, SIGTERM);
  uv_timer_start(&f->tick, on_tick, TICK_MS, TICK_MS);
  /* The summary says what failed and why; the libraries' warnings (a TLS
   * refusal per reconnection attempt) would only repeat it. */
  tg_log_set_level(TG_LOG_ERROR);
  tg_log_set_sink(log_sink, f);
  f->t0 = uv_now(&loop);
  tg_fleet_start(&f->core);
  fleet_ui_draw(f);
  uv_run(&loop, UV_RUN_DEFAULT);
  tg_log_set_sink(NULL, NULL);
  tg_log_set_level(TG_LOG_WARN);
  for (size_t i = 0; i < n; i++) tg_fleet_host_close(&f->hosts[i].core);
  for (size_t i = 0; i < n; i++) fleet_host_merge_end(&f->hosts[i]);
  if (f->mode == FLEET_OUT_MERGE) tg_merge_links_end(&f->merge, n, merge_host_at, f);

  uv_update_time(&loop);
  if (f->aborting) {
    discard_all(f);
    fprintf(stderr, CLI_PROG ": %s aborted\n", TG_NOTE(ABORTED));
    code = CLI_EXIT_ABORTED;
  } else {
    char why[TG_SC_WARN_MAX];
    if (f->sessions_path[0] &&
        tg_session_cache_store(f->sessions, f->sessions_path,
                               (uint64_t)time(NULL), why, sizeof(why)) < 0)
      fprintf(stderr, CLI_PROG ": warning: %s\n", why);
    size_t with_failures = 0;
    for (size_t i = 0; i < n; i++) {
      fleet_host_t *h = &f->hosts[i];
      fleet_names_problems(f, i, &h->problems);
      tg_ds_problems_from_ftrace(&h->problems, &h->ftrace);
      with_failures += cli_ds_problems_fail(
          &h->problems, cli_ftrace_events_asked(f->pcfg), f->o->strict);
    }
    size_t failed = fleet_ui_summary(f);
    int merged_rv = f->mode == FLEET_OUT_MERGE ? commit_merged(f) : 0;
    if (f->mode == FLEET_OUT_MERGE && merged_rv == 0) fleet_reclock(f);
    code = failed || merged_rv < 0 ? CLI_EXIT_FAIL
           : with_failures        ? CLI_EXIT_DATA_SOURCE
                                  : CLI_EXIT_OK;
  }
  if (f->o->summary_json) write_summary(f, code);
out:
  if (loop_ok && !cli_loop_close(&loop)) {
    fprintf(stderr, CLI_PROG ": internal error: handles left open\n");
    code = CLI_EXIT_FAIL;
  }
  if (f->has_merged) cli_output_discard(&f->merged);
  if (f->keys) {
    fclose(f->keys);
    /* Every session ended: nothing is left to take back. */
    if (code == CLI_EXIT_OK || code == CLI_EXIT_DATA_SOURCE)
      unlink(f->keys_path);
  }
  free(f->keys_path);
  for (size_t i = 0; f->hosts && i < n; i++) fleet_host_free(&f->hosts[i]);
  free(f->hosts);
  tg_fleet_free(&f->core);
  fleet_names_free(f);
  tg_session_cache_free(f->sessions);
  tg_buf_free(&f->cfg);
  tg_merge_free(&f->merge);
  free(f);
  return code;
}
