/* `tracegate record --clone ID -o FILE` (and --clone-by-name NAME), as
 * Perfetto's --clone: a read-only snapshot of a running session, written
 * to FILE while the session goes on. The service flushes the session,
 * copies its buffers into a session of this connection; the clone
 * read-out engine (consumer/clone_read.h) reads that, takes its
 * statistics and frees it, and this file says how each step went.
 * --save-for-bugreport is the same clone of the session the service picks
 * for a bugreport.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/record.h"
#include "cli/step.h"
#include "consumer/clone_read.h"
#include "tracegate/error.h"

/* The snapshot does not grow: a read that brings nothing new ends it. At
 * most this many reads, in case it keeps bringing something. */
#define MAX_READS 64

typedef struct clone_ctx {
  record_t *r;
  const char *which; /* "session 3": what is cloned, for messages */
  uint64_t t0;       /* when the snapshot was there to read */
  bool nothing;      /* no session for a bugreport: no file */
  bool over;         /* the engine ended */
  int code;          /* the exit code so far */
} clone_ctx_t;

/* "tracegate: [CODE] what: why" on stderr. */
static void say(tg_notice_t notice, const char *what, const char *why) {
  fprintf(stderr, CLI_PROG ": %s %s: %s\n", tg_notice_tag(notice), what, why);
}

static int on_packet(tg_clone_read_t *e, const uint8_t *p, size_t n) {
  clone_ctx_t *cl = e->data;
  tg_ftrace_loss_scan(&cl->r->ftrace, p, n);
  return cli_output_packet(&cl->r->out, p, n);
}

/* A read whole: a file that cannot be written ends the reads. */
static int on_progress(tg_clone_read_t *e, uint64_t packets) {
  (void)packets;
  return ((clone_ctx_t *)e->data)->r->out.err;
}

static void on_state(tg_clone_read_t *e, tg_clone_state_t from,
                     tg_clone_state_t to) {
  clone_ctx_t *cl = e->data;
  if (from != TG_CLONE_CLONING || to != TG_CLONE_READING) return;
  cl->t0 = cli_now_ms();
  cl->r->began = true; /* the summary JSON lists its loss from here */
}

/* The counters are the source session's at the time of the clone.
 * Without them the loss is not known: the summary JSON says null. */
static void on_stats(tg_clone_read_t *e, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st, uint64_t loss) {
  (void)loss;
  clone_ctx_t *cl = e->data;
  cl->r->no_final_stats = status != 0;
  if (status) {
    memset(&cl->r->loss, 0, sizeof(cl->r->loss));
    say(TG_N_LOSS_UNKNOWN, "warning: no statistics of the snapshot", msg);
    return;
  }
  cli_loss_collect(st, &cl->r->loss);
  /* The service's counters say nothing of the kernel's buffers. */
  cli_ftrace_loss_add(&cl->r->ftrace, &cl->r->loss);
}

static void clone_failed(clone_ctx_t *cl, int status, const char *msg) {
  record_t *r = cl->r;
  if (status == TG_EREMOTE_FAILED && r->o.bugreport) {
    /* As perfetto_cmd: no session for a bugreport is no error, and
     * leaves no file (never an empty one). */
    fprintf(stderr, CLI_PROG ": %s nothing saved for a bugreport: %s\n",
            TG_NOTE(BUGREPORT_NOTHING), msg);
    r->nothing_saved = cl->nothing = true;
    return;
  }
  char what[320];
  snprintf(what, sizeof(what), "cannot clone %s", cl->which);
  say(TG_N_CLONE_FAILED, what, msg);
  cl->code = CLI_EXIT_FAIL;
}

/* A failure after the snapshot was read is only a warning: the snapshot
 * also ends when this connection closes. */
static void on_end(tg_clone_read_t *e, int status, const char *msg) {
  clone_ctx_t *cl = e->data;
  record_t *r = cl->r;
  cl->over = true;
  if (status && tg_clone_read_failed_in(e) == TG_CLONE_CLONING) {
    clone_failed(cl, status, msg);
    return;
  }
  if (status && r->out.err) {
    fprintf(stderr, CLI_PROG ": %s cannot write %s: %s\n",
            TG_NOTE(OUTPUT_UNWRITABLE), r->o.out, tg_strerror(r->out.err));
    cl->code = CLI_EXIT_FAIL;
  } else if (status) {
    say(TG_N_CLONE_FAILED, "cannot read the snapshot", msg);
    cl->code = CLI_EXIT_FAIL;
  }
  const char *why;
  if (tg_clone_read_free_status(e, &why))
    say(TG_N_SNAPSHOT_NOT_FREED, "warning: cannot free the snapshot", why);
}

static const tg_clone_read_cbs_t clone_cbs = {.on_state = on_state,
                                              .on_packet = on_packet,
                                              .on_progress = on_progress,
                                              .on_stats = on_stats,
                                              .on_end = on_end};

/* Clones, reads and frees on the record's connection until the engine
 * ends. Returns the exit code. */
static int run_clone(clone_ctx_t *cl) {
  const record_t *r = cl->r;
  tg_clone_read_opts_t o = {.stats = true, .free_on_error = true,
                            .max_reads = MAX_READS};
  tg_clone_read_t e;
  tg_clone_read_init(&e, &tg_clock_monotonic, &o, &clone_cbs, cl->which, cl);
  tg_consumer_clone_args_t args = {.session_id = r->o.clone_id,
                                   .unique_session_name = r->o.clone_name,
                                   .for_bugreport = r->o.bugreport ||
                                                    r->o.clone_for_bugreport};
  int rv = r->conn.c ? tg_clone_read_start(&e, r->conn.c, &args)
                     : TG_ENOT_CONNECTED;
  if (rv < 0) {
    clone_failed(cl, rv, r->conn.closed ? r->conn.close_msg : tg_strerror(rv));
    return cl->code;
  }
  /* The consumer library answers every call, if only as it closes. */
  if (cli_wait(&cl->r->conn, &cl->over) < 0) {
    tg_clone_read_cancel(&e, TG_EPEER_CLOSED, cl->r->conn.close_msg);
    say(TG_N_CLONE_FAILED, "the snapshot was not read whole",
        cl->r->conn.close_msg);
    cl->code = CLI_EXIT_FAIL;
  }
  return cl->code;
}

int record_clone(record_t *r) {
  char which[300];
  if (r->o.bugreport)
    snprintf(which, sizeof(which), "the session for a bugreport");
  else if (r->o.clone_name)
    snprintf(which, sizeof(which), "the session named '%s'", r->o.clone_name);
  else
    snprintf(which, sizeof(which), "session %" PRIu64, r->o.clone_id);
  clone_ctx_t cl = {.r = r, .which = which, .code = CLI_EXIT_OK};
  if (run_clone(&cl) != CLI_EXIT_OK) return CLI_EXIT_FAIL;
  if (cl.nothing) return CLI_EXIT_OK;
  r->has_out = false;
  if (cli_output_commit(&r->out) < 0) return CLI_EXIT_FAIL;
  char by[32], el[32];
  cli_format_bytes(by, sizeof(by), r->out.bytes);
  cli_format_ms(el, sizeof(el), cli_now_ms() - cl.t0);
  fprintf(stderr, CLI_PROG ": %s wrote %s: %s, %llu packets, a snapshot of %s "
          "(it runs on), %s\n", TG_NOTE(SNAPSHOT_WRITTEN), r->o.out, by,
          (unsigned long long)r->out.packets, which, el);
  cli_loss_print(stderr, &r->loss);
  /* As a recording's end: the snapshot holds what ran. */
  r->problems = (tg_ds_problems_t){0};
  tg_ds_problems_from_ftrace(&r->problems, &r->ftrace);
  cli_ds_problems_print(stderr, NULL, "local", &r->problems);
  return cli_ds_problems_fail(&r->problems, cli_ftrace_events_asked(r->cfg),
                              r->o.strict)
             ? CLI_EXIT_DATA_SOURCE
             : CLI_EXIT_OK;
}

/* --- --save-all-for-bugreport --------------------------------------------- */

int record_bugreport_target_ok(const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0) {
    if (errno == ENOENT) return 0;
    int err = -errno;
    fprintf(stderr, CLI_PROG ": %s %s: %s\n", TG_NOTE(OUTPUT_UNWRITABLE), path,
            strerror(-err));
    return err;
  }
  if (S_ISREG(st.st_mode) && st.st_uid == geteuid()) return 0;
  fprintf(stderr, CLI_PROG ": %s %s exists and is not a regular file of "
          "yours (a link, a FIFO, another user's): not written\n",
          TG_NOTE(OUTPUT_UNWRITABLE), path);
  return -EEXIST;
}

/* A running session a bugreport takes, and the file it goes to. */
typedef struct br_pick {
  uint64_t id;
  int32_t score;
  char name[TG_BUGREPORT_NAME_MAX + 1]; /* before the _N of a repeat */
  char file[TG_BUGREPORT_NAME_MAX + 24]; /* the name it is saved under */
} br_pick_t;

typedef struct br_query {
  cli_sm_t *m; /* the one-step machine that asks */
  br_pick_t *picks;
  size_t n, cap;
  int err; /* -ENOMEM */
} br_query_t;

/* A name the session's config gives is a file name in the bugreport
 * directory: plain characters only, never a path or a dot file. */
static bool br_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > TG_BUGREPORT_NAME_MAX || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  return true;
}

static void on_br_state(tg_consumer_t *c, void *ctx, int status,
                        const char *msg, bool has_more,
                        const Perfetto__Protos__TracingServiceState *st) {
  br_query_t *q = ctx;
  for (size_t i = 0; status == 0 && st && i < st->n_tracing_sessions; i++) {
    const Perfetto__Protos__TracingServiceState__TracingSession *s =
        st->tracing_sessions[i];
    if (!s->is_started || s->bugreport_score <= 0) continue;
    const char *name = s->bugreport_filename && s->bugreport_filename[0]
                           ? s->bugreport_filename
                           : "systrace.pftrace";
    if (!br_name_ok(name)) {
      fprintf(stderr, CLI_PROG ": %s session %" PRIu64 ": bugreport_filename "
              "'%.64s' is not a plain file name (letters, digits, '.', '_', "
              "'-'; at most %d, no leading '.'): not saved\n",
              TG_NOTE(BUGREPORT_NAME_REFUSED), s->id, name,
              TG_BUGREPORT_NAME_MAX);
      q->err = q->err ? q->err : -EINVAL;
      continue;
    }
    if (q->n == q->cap) {
      size_t cap = q->cap ? 2 * q->cap : 8;
      br_pick_t *p = realloc(q->picks, cap * sizeof(*p));
      if (!p) {
        q->err = -ENOMEM;
        break;
      }
      q->picks = p;
      q->cap = cap;
    }
    br_pick_t *p = &q->picks[q->n++];
    p->id = s->id;
    p->score = s->bugreport_score;
    snprintf(p->name, sizeof(p->name), "%s", name);
  }
  if (status != 0 || !has_more) cli_sm_on_done(c, q->m, status, msg);
}

/* Highest score first; the older session first among equals. */
static int br_cmp(const void *a, const void *b) {
  const br_pick_t *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* |name| as the |k|th repeat: "_K" before its last dot ("custom_1.pftrace"),
 * else at its end. */
static void br_file(char *out, size_t cap, const char *name, size_t k) {
  if (!k) {
    snprintf(out, cap, "%s", name);
    return;
  }
  const char *dot = strrchr(name, '.');
  int stem = dot ? (int)(dot - name) : (int)strlen(name);
  snprintf(out, cap, "%.*s_%zu%s", stem, name, k, dot ? dot : "");
}

/* Each pick's file, in order: its name, or its next repeat not taken by
 * an earlier pick ("x.pftrace" twice and "x_1.pftrace" give x, x_2 and
 * x_1: no session replaces another's file). */
static void br_files(br_pick_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    size_t k = 0;
    for (bool taken = true; taken; k++) {
      br_file(p[i].file, sizeof(p[i].file), p[i].name, k);
      taken = false;
      for (size_t j = 0; j < i && !taken; j++)
        taken = !strcmp(p[j].file, p[i].file);
      /* Later picks' own names come first: leave them free. */
      for (size_t j = i + 1; j < n && !taken && k; j++)
        taken = !strcmp(p[j].name, p[i].file);
    }
  }
}

static int send_list(cli_sm_t *m) {
  return tg_consumer_query_service_state(m->cc->c, true, false, on_br_state,
                                         m->ctx);
}

static const cli_sm_state_t list_states[] = {
    {"list", send_list, CLI_SM_END, CLI_SM_END,
     "cannot list the tracing sessions", CLI_EXIT_FAIL, NULL,
     TG_N_QUERY_FAILED},
};

int record_save_all_for_bugreport(record_t *r, const char *dir) {
  br_query_t q = {0};
  cli_sm_t m = {.cc = &r->conn, .states = list_states, .ctx = &q};
  q.m = &m;
  if (cli_sm_run(&m, 0) != CLI_EXIT_OK) {
    free(q.picks);
    return CLI_EXIT_FAIL;
  }
  if (q.err == -ENOMEM) {
    fprintf(stderr, CLI_PROG ": out of memory\n");
    free(q.picks);
    return CLI_EXIT_FAIL;
  }
  int code = q.err ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  if (!q.n) {
    fprintf(stderr, CLI_PROG ": %s no tracing session eligible for a "
            "bugreport (started, bugreport_score > 0)\n",
            TG_NOTE(BUGREPORT_NOTHING));
    free(q.picks);
    return code;
  }
  qsort(q.picks, q.n, sizeof(*q.picks), br_cmp);
  br_files(q.picks, q.n);
  for (size_t i = 0; i < q.n; i++) {
    char path[4096 + sizeof(q.picks[i].file) + 2];
    int pn = snprintf(path, sizeof(path), "%s/%s", dir, q.picks[i].file);
    if (pn < 0 || (size_t)pn >= sizeof(path)) { /* a cut path names another file */
      fprintf(stderr, CLI_PROG ": %s session %" PRIu64 ": the bugreport "
              "directory's path is too long (TMPDIR): not saved\n",
              TG_NOTE(BUGREPORT_PATH_TOO_LONG), q.picks[i].id);
      code = CLI_EXIT_FAIL;
      continue;
    }
    fprintf(stderr, CLI_PROG ": %s session %" PRIu64 ", bugreport_score %d, "
            "into %s\n", TG_NOTE(BUGREPORT_SAVING), q.picks[i].id,
            q.picks[i].score, path);
    r->o.clone_id = q.picks[i].id;
    r->o.clone_name = NULL;
    r->o.clone_for_bugreport = true;
    r->o.out = path;
    memset(&r->loss, 0, sizeof(r->loss));
    memset(&r->ftrace, 0, sizeof(r->ftrace));
    memset(&r->out, 0, sizeof(r->out));
    if (record_bugreport_target_ok(path) < 0 ||
        cli_output_open(&r->out, path) < 0) { /* says why */
      code = CLI_EXIT_FAIL;
      continue;
    }
    r->has_out = true;
    int rc = record_clone(r);
    if (rc != CLI_EXIT_OK && rc != CLI_EXIT_DATA_SOURCE) code = CLI_EXIT_FAIL;
    else if (rc == CLI_EXIT_DATA_SOURCE && code == CLI_EXIT_OK) code = rc;
    if (r->has_out) cli_output_discard(&r->out);
    r->has_out = false;
    if (r->conn.closed) { /* the rest cannot be cloned either */
      code = CLI_EXIT_FAIL;
      break;
    }
  }
  r->o.out = NULL; /* |path| was this function's */
  free(q.picks);
  return code;
}
