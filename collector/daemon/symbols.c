/* Each stored snapshot's symbols: see symbols.h.
 *
 * A job: the loop asks the store for the snapshot's trace and host index
 * (tg_coll_store_files_new) and creates the symbols' two files under tmp/
 * (store.h); a pool thread gets the trace and index (a bucket's are
 * downloaded there, not on the loop), walks the trace once
 * (consumer/symbolize: every frame's rel_pc filed under its module, per
 * machine), finds each module's debug file by build id, resolves its
 * addresses with libdw, and writes the ModuleSymbols packets grouped by host
 * (machine k + 1 is the host index's host k) with their own host index; the
 * loop then renames them in beside the trace, or reports why not. */
#include "collector/daemon/symbols.h"
#include "collector/daemon/work.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/daemon/import_check.h"
#include "collector/daemon/shares.h"
#include "collector/store/snap_index.h"
#include "collector/store/store.h"
#include "common/fsm.h"
#include "common/json.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"
#include "common/fd_write.h"
#include "consumer/symbolize/symbolize.h"

/* A kept entry's state: a slot is NONE (free), then WAITING in the queue,
 * RUNNING on the pool, DONE or FAILED; queued again from DONE or FAILED,
 * freed (NONE) when its snapshot is deleted under it or when a newer
 * entry takes its slot (only a finished one's: COLL_SYMBOLS_KEPT is more
 * than can wait and run at once). Written only by entry_move, against
 * kSymNext under common/fsm.h's policy. */
typedef enum sym_state {
  SYM_NONE,
  SYM_WAITING,
  SYM_RUNNING,
  SYM_DONE,
  SYM_FAILED,
  SYM_STATE_COUNT
} sym_state_t;

#define Y(x) TG_FSM_BIT(SYM_##x)
static const uint32_t kSymNext[] = {
    [SYM_NONE] = Y(WAITING) | Y(FAILED),
    [SYM_WAITING] = Y(RUNNING) | Y(FAILED) | Y(NONE),
    [SYM_RUNNING] = Y(DONE) | Y(FAILED) | Y(NONE),
    [SYM_DONE] = Y(WAITING) | Y(FAILED) | Y(NONE),
    [SYM_FAILED] = Y(WAITING) | Y(NONE),
};
#undef Y
static const char *const STATE_NAMES[] = {
    [SYM_NONE] = "none",       [SYM_WAITING] = "waiting",
    [SYM_RUNNING] = "running", [SYM_DONE] = "done",
    [SYM_FAILED] = "failed"};
_Static_assert(TG_FSM_COUNT(kSymNext) == SYM_STATE_COUNT,
               "an arrow set per state");
_Static_assert(TG_FSM_COUNT(STATE_NAMES) == SYM_STATE_COUNT,
               "a name per state");
_Static_assert(COLL_SYMBOLS_KEPT > COLL_SYMBOLS_QUEUE + 1,
               "a finished entry's slot is always there to take");
static const tg_fsm_def_t kSymDef = {.what = "symbolize entry",
                                     .n_states = SYM_STATE_COUNT,
                                     .next = kSymNext,
                                     .names = STATE_NAMES};

/* What a run refused and asked of debuginfod (tg_sym_stats_t, kept apart
 * from it for a build without the symbolizer): the snapshot's symbols
 * state in the API, and summed for the metrics. */
typedef struct sym_guard {
  uint64_t refused_dotdot, refused_kernel_fs, refused_not_regular,
      refused_split_dwarf;
  uint64_t dbgf_lookups, dbgf_found, dbgf_cut, dbgf_refused, dbgf_bytes,
      dbgf_ns;
} sym_guard_t;

/* What the API says of a snapshot symbolized (or waiting) lately. */
typedef struct sym_entry {
  uint64_t id; /* 0: a free slot (NONE) */
  sym_state_t state; /* written only by entry_move */
  char why[256];
  uint64_t bytes;
  size_t modules, modules_found, frames, frames_named, frames_with_line;
  size_t frames_plt; /* of frames_named: PLT entries, named NAME@plt */
  sym_guard_t guard; /* done or failed */
} sym_entry_t;

typedef struct sym_job sym_job_t;

struct coll_symbols {
  uint64_t queue[COLL_SYMBOLS_QUEUE];
  size_t head, n;
  sym_job_t *running;
  _Atomic bool stop;
  sym_entry_t kept[COLL_SYMBOLS_KEPT];
  size_t next_kept; /* the slot the next new entry takes */
  uint64_t stored, failed;
  sym_guard_t total; /* every run since the start */
  uint64_t bad_transitions; /* refused by kSymNext (a bug: logged) */
};

static void guard_add(sym_guard_t *to, const sym_guard_t *g) {
  to->refused_dotdot += g->refused_dotdot;
  to->refused_kernel_fs += g->refused_kernel_fs;
  to->refused_not_regular += g->refused_not_regular;
  to->refused_split_dwarf += g->refused_split_dwarf;
  to->dbgf_lookups += g->dbgf_lookups;
  to->dbgf_found += g->dbgf_found;
  to->dbgf_cut += g->dbgf_cut;
  to->dbgf_refused += g->dbgf_refused;
  to->dbgf_bytes += g->dbgf_bytes;
  to->dbgf_ns += g->dbgf_ns;
}

static sym_entry_t *entry_find(struct coll_symbols *q, uint64_t id) {
  for (size_t i = 0; id && i < COLL_SYMBOLS_KEPT; i++)
    if (q->kept[i].id == id) return &q->kept[i];
  return NULL;
}

/* The one setter: |e| to |to| when kSymNext has the arrow (a move to
 * WAITING starts a new run: what the last one said goes; NONE frees the
 * slot). Returns whether |e| is in |to| now. */
static bool entry_move(struct coll_symbols *q, sym_entry_t *e, sym_state_t to) {
  if (e->state == to) return true;
  char who[24];
  snprintf(who, sizeof(who), "%016" PRIx64, e->id);
  unsigned st = e->state;
  if (!tg_fsm_move(&kSymDef, &st, to, &q->bad_transitions, who, NULL))
    return false;
  if (to == SYM_WAITING || to == SYM_NONE) {
    uint64_t id = e->id;
    memset(e, 0, sizeof(*e));
    e->id = to == SYM_NONE ? 0 : id;
  }
  e->state = to;
  return true;
}

/* |id|'s entry moved to |to|: its own, or a free slot, or the oldest
 * finished one's, freed first. NULL when the move is refused. */
static sym_entry_t *entry_to(struct coll_symbols *q, uint64_t id,
                             sym_state_t to) {
  sym_entry_t *e = entry_find(q, id);
  for (size_t i = 0; !e && i < COLL_SYMBOLS_KEPT; i++) {
    sym_entry_t *c = &q->kept[(q->next_kept + i) % COLL_SYMBOLS_KEPT];
    if (c->state == SYM_WAITING || c->state == SYM_RUNNING) continue;
    q->next_kept = (q->next_kept + i + 1) % COLL_SYMBOLS_KEPT;
    if (!entry_move(q, c, SYM_NONE)) return NULL;
    c->id = id;
    e = c;
  }
  if (!e || !entry_move(q, e, to)) return NULL;
  return e;
}

/* |id|'s snapshot is gone: its entry too. */
static void entry_drop(struct coll_symbols *q, uint64_t id) {
  sym_entry_t *e = entry_find(q, id);
  if (e) entry_move(q, e, SYM_NONE);
}

/* The failure of snapshot |id|'s symbolization: said, counted, kept for
 * the API and added to each of its hosts that delivered as a problem. */
static void record_failure(coll_t *c, uint64_t id, const char *why) {
  struct coll_symbols *q = c->symbols;
  q->failed++;
  /* The symbolization is over: the shares name what the hosts named. */
  coll_shares_queue(c, id);
  sym_entry_t *e = entry_to(q, id, SYM_FAILED);
  if (e) snprintf(e->why, sizeof(e->why), "%s", why);
  TG_WARN("%s snapshot %016" PRIx64 ": not symbolized: %s (it stays as "
          "stored, its frames unnamed)", TG_NOTE(COLLECTOR_SYMBOLIZE_FAILED),
          id, why);
  size_t n_rows = 0;
  tg_coll_host_t *rows = NULL;
  if (tg_coll_store_hosts(c->store, id, NULL, 0, &n_rows) == 0 && n_rows)
    rows = calloc(n_rows, sizeof(*rows));
  if (!rows || tg_coll_store_hosts(c->store, id, rows, n_rows, &n_rows) != 0)
    n_rows = 0;
  char code[16];
  snprintf(code, sizeof(code), "TG-%d", (int)TG_N_COLLECTOR_SYMBOLIZE_FAILED);
  for (size_t i = 0; i < n_rows; i++) {
    if (rows[i].outcome == TG_COLL_HOST_FAILED) continue;
    char w[sizeof(e->why) + 16];
    snprintf(w, sizeof(w), "not symbolized: %s", why);
    char *text = NULL;
    /* The why is cut until the row's problems fit their column. */
    for (size_t cap = strlen(w); !text; cap /= 2) {
      w[cap] = 0;
      json_t *p = json_pack("{s:s, s:s, s:o}", "kind", "symbolize", "code",
                            code, "why", tg_json_text(w));
      text = p ? coll_problem_append(rows[i].problems, p) : NULL;
      json_decref(p);
      if (!cap) break;
    }
    int err = text ? tg_coll_store_set_problems(c->store, id, rows[i].host,
                                                text)
                   : -E2BIG;
    if (err)
      TG_WARN("snapshot %016" PRIx64 ": host %s: cannot record that it is "
              "not symbolized: %s", id, rows[i].host, tg_strerror(err));
    free(text);
  }
  free(rows);
}

struct sym_job {
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  coll_t *c;
  uint64_t id;
  tg_coll_files_t *files; /* the store's, until the work took them */
  bool gone; /* the store had no trace to give (deleted meanwhile?) */
  int fd, ifd;   /* the trace and its host index (-1: none) */
  int sfd, sifd; /* the symbols and their index, under tmp/ */
  tg_coll_symput_t *put; /* a bucket's store: the upload; else NULL */
  tg_sym_opts_t o;
  const char *dirs[TG_COLL_CONFIG_DEBUG_DIRS_MAX]; /* the configured ones */
  size_t n_dirs;
  /* The work's results. */
  int err;       /* 0: the files are written and synced */
  char why[400]; /* what failed, with err */
  bool with_index;
  bool already; /* the bucket held this snapshot's symbols already */
  uint64_t bytes;
  tg_sym_result_t res;
  tg_sym_stats_t stats; /* o.stats: counted even when the run fails */
  tg_sym_t s;
  tg_coll_index_t ix;
};

/* --- the work (a pool thread: no store, no loop) ----------------------------- */

static void work_fail(sym_job_t *j, int err, const char *what) {
  j->err = err ? err : -EIO;
  snprintf(j->why, sizeof(j->why), "%s", what);
}

static uint32_t machine_of(const tg_sym_module_t *m, size_t n_hosts) {
  return m->machine_id >= 1 && m->machine_id <= n_hosts ? m->machine_id
                                                        : UINT32_MAX;
}

typedef struct mod_ref {
  uint32_t machine; /* machine_of() */
  size_t i;         /* in s->mods */
} mod_ref_t;

/* Modules by host (machine), those of no host last; stable by index. */
static int by_machine(const void *a, const void *b) {
  const mod_ref_t *x = a, *y = b;
  if (x->machine != y->machine) return x->machine < y->machine ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* The ModuleSymbols packets into j->sfd, each host's together, and their
 * host index into j->sifd when the trace has one. */
static void write_symbols(sym_job_t *j) {
  tg_sym_t *s = &j->s;
  size_t n_hosts = j->ix.n_hosts;
  mod_ref_t *order = malloc((s->n_mods ? s->n_mods : 1) * sizeof(*order));
  tg_coll_index_builder_t *b =
      n_hosts ? tg_coll_index_builder_new(n_hosts) : NULL;
  if (!order || (n_hosts && !b)) {
    work_fail(j, -ENOMEM, "out of memory");
    goto out;
  }
  for (size_t h = 0; h < n_hosts; h++)
    if (tg_coll_index_name(b, h, j->ix.hosts[h].name) < 0) {
      work_fail(j, -ENOMEM, "out of memory");
      goto out;
    }
  if (b) tg_coll_index_head(b, 0);
  for (size_t i = 0; i < s->n_mods; i++)
    order[i] = (mod_ref_t){machine_of(&s->mods[i], n_hosts), i};
  qsort(order, s->n_mods, sizeof(*order), by_machine);
  tg_buf_t buf;
  tg_buf_init(&buf, 0);
  for (size_t k = 0; k < s->n_mods && !j->err; k++) {
    const tg_sym_module_t *m = &s->mods[order[k].i];
    tg_buf_reset(&buf);
    int err = tg_sym_write_module(m, &buf);
    if (!err) err = tg_write_all(j->sfd, tg_buf_begin(&buf), tg_buf_size(&buf));
    if (err) {
      work_fail(j, err, err == -ENOMEM ? "out of memory"
                                       : "cannot write the symbols");
      break;
    }
    uint32_t mid = order[k].machine;
    if (b && mid != UINT32_MAX && tg_buf_size(&buf))
      tg_coll_index_add(b, mid - 1, j->bytes, tg_buf_size(&buf));
    j->bytes += tg_buf_size(&buf);
  }
  tg_buf_free(&buf);
  if (j->err || !b) goto out;
  /* A builder that gave up leaves the symbols without an index: served
   * with the whole trace, not with host parts. */
  if (tg_coll_index_why(b)) goto out;
  int err = tg_coll_index_write(b, j->sifd, j->bytes);
  if (err) {
    work_fail(j, err, "cannot write the symbols' host index");
    goto out;
  }
  j->with_index = true;
out:
  tg_coll_index_builder_free(b);
  free(order);
}

static void do_work(uv_work_t *w) {
  sym_job_t *j = w->data;
  char what[400] = "";
  /* A debug directory the operator named and that cannot be read would
   * leave frames unnamed without a word: it fails the symbolization. */
  for (size_t i = 0; i < j->n_dirs; i++) {
    int d = open(j->dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
      int e = errno;
      snprintf(what, sizeof(what), "symbolize_debug_dir %s cannot be read: %s",
               j->dirs[i], strerror(e));
      work_fail(j, -e, what);
      return;
    }
    close(d);
  }
  int err = tg_coll_files_get(j->files);
  if (err) {
    j->gone = err == -ENOENT;
    snprintf(what, sizeof(what), "cannot get the snapshot from the store: %s",
             tg_strerror(err));
    work_fail(j, err, what);
    return;
  }
  j->fd = tg_coll_files_take(j->files, TG_COLL_FILE_TRACE);
  j->ifd = tg_coll_files_take(j->files, TG_COLL_FILE_INDEX);
  struct stat st;
  if (fstat(j->fd, &st) != 0) {
    work_fail(j, -errno, "cannot stat the snapshot");
    return;
  }
  /* Without a usable host index the symbols are stored all the same, for
   * the whole trace (its host parts are refused anyway). */
  if (j->ifd >= 0 && tg_coll_index_read(j->ifd, (uint64_t)st.st_size, &j->ix))
    tg_coll_index_free(&j->ix);
  err = tg_sym_collect_fd(&j->s, j->fd, -1, &j->o, what, sizeof(what));
  if (!err) err = tg_sym_resolve_all(&j->s, &j->o, &j->res);
  if (err) {
    work_fail(j, err, err == -ETIMEDOUT   ? "out of time (symbolize_timeout)"
                      : err == -ECANCELED ? "the collector stops"
                      : err == -ENOMEM    ? "out of memory"
                                          : what);
    return;
  }
  write_symbols(j);
  if (j->err) return;
  if (fsync(j->sfd) != 0 || (j->with_index && fsync(j->sifd) != 0)) {
    int e = errno;
    snprintf(what, sizeof(what), "cannot write the symbols: %s", strerror(e));
    work_fail(j, -e, what);
    return;
  }
  if (!j->put) return;
  err = tg_coll_symput_run(j->put, j->sfd, j->sifd, j->with_index);
  if (err == -EEXIST) j->already = true;
  else if (err) {
    snprintf(what, sizeof(what), "cannot put the symbols in the bucket: %s",
             tg_strerror(err));
    work_fail(j, err, what);
  }
}

/* --- the results (the loop) -------------------------------------------------- */

static void job_free(sym_job_t *j) {
  tg_coll_files_free(j->files);
  if (j->fd >= 0) close(j->fd);
  if (j->ifd >= 0) close(j->ifd);
  if (j->sfd >= 0) close(j->sfd);
  if (j->sifd >= 0) close(j->sifd);
  tg_sym_free(&j->s);
  tg_coll_index_free(&j->ix);
  tg_coll_symput_free(j->put);
  free(j);
}

static void start_next(coll_t *c);

static void after_work(uv_work_t *w, int status) {
  sym_job_t *j = w->data;
  coll_t *c = j->c;
  struct coll_symbols *q = c->symbols;
  q->running = NULL;
  close(j->sfd);
  close(j->sifd);
  j->sfd = j->sifd = -1;
  if (status && !j->err) work_fail(j, status, "no worker");
  if (c->stopping) {
    tg_coll_store_symbols_abort(c->store, j->id);
    job_free(j);
    return;
  }
  int err = j->err;
  if (err) tg_coll_store_symbols_abort(c->store, j->id);
  else if ((err = tg_coll_store_symbols_commit(c->store, j->id, j->with_index)))
    snprintf(j->why, sizeof(j->why), "cannot store the symbols: %s",
             tg_strerror(err));
  const tg_sym_stats_t *st = &j->stats;
  sym_guard_t g = {st->refused[TG_SYM_REFUSED_DOTDOT],
                   st->refused[TG_SYM_REFUSED_KERNEL_FS],
                   st->refused[TG_SYM_REFUSED_NOT_REGULAR],
                   st->refused[TG_SYM_REFUSED_SPLIT_DWARF],
                   st->debuginfod_lookups, st->debuginfod_found,
                   st->debuginfod_cut, st->debuginfod_refused, st->debuginfod_bytes,
                   st->debuginfod_ns};
  guard_add(&q->total, &g);
  sym_entry_t *e;
  /* Deleted meanwhile: the commit found it gone, or (a bucket's) its
   * download did and the catalog agrees. */
  bool deleted = err == -ENOENT &&
                 (!j->err ||
                  (j->gone && tg_coll_store_live(c->store, j->id) == -ENOENT));
  if (deleted) {
    TG_INFO("snapshot %016" PRIx64 ": deleted during its symbolization",
            j->id);
    entry_drop(q, j->id);
  } else if (err) {
    record_failure(c, j->id, j->why);
    if ((e = entry_find(q, j->id))) e->guard = g;
  } else if (j->already) {
    /* Stored by an attempt this one repeats (or by another collector of
     * the catalog): what they hold is not counted again. */
    entry_to(q, j->id, SYM_DONE);
    TG_INFO("snapshot %016" PRIx64 ": its symbols were in the bucket "
            "already", j->id);
  } else {
    q->stored++;
    e = entry_to(q, j->id, SYM_DONE);
    if (e) {
      e->bytes = j->bytes;
      e->modules = j->res.modules;
      e->modules_found = j->res.modules_found;
      e->frames = j->res.frames;
      e->frames_named = j->res.frames_named;
      e->frames_with_line = j->res.frames_with_line;
      e->frames_plt = j->res.frames_plt;
      e->guard = g;
    }
    TG_INFO("%s snapshot %016" PRIx64 ": symbolized: %zu of %zu frames "
            "named (%zu with a line), %zu of %zu modules found, %" PRIu64
            " bytes of symbols%s", TG_NOTE(COLLECTOR_SYMBOLIZED), j->id,
            j->res.frames_named, j->res.frames, j->res.frames_with_line,
            j->res.modules_found, j->res.modules, j->bytes,
            j->with_index ? "" : " (no host index: with the whole trace only)");
  }
  /* Named as well as they will be: the shares follow (shares.h). A
   * failure queued them in record_failure; a deleted one has none. */
  if (!err) coll_shares_queue(c, j->id);
  job_free(j);
  start_next(c);
}

static void start_next(coll_t *c) {
  struct coll_symbols *q = c->symbols;
  while (!q->running && q->n) {
    uint64_t id = q->queue[q->head];
    q->head = (q->head + 1) % COLL_SYMBOLS_QUEUE;
    q->n--;
    sym_job_t *j = calloc(1, sizeof(*j));
    if (!j) {
      record_failure(c, id, "out of memory");
      continue;
    }
    j->c = c;
    j->id = id;
    j->fd = j->ifd = j->sfd = j->sifd = -1;
    tg_sym_init(&j->s);
    int err = tg_coll_store_files_new(c->store, id, TG_COLL_FILES_INDEX,
                                      &j->files);
    if (err == -ENOENT) {
      /* Deleted (retention) before its turn: nothing to name. */
      entry_drop(q, id);
      job_free(j);
      continue;
    }
    if (!err) err = tg_coll_store_symbols_begin(c->store, id, &j->sfd, &j->sifd);
    if (!err) {
      err = tg_coll_store_symput_new(c->store, id, &j->put);
      if (err == -EOPNOTSUPP) err = 0; /* a directory store */
      if (err) tg_coll_store_symbols_abort(c->store, id);
    }
    if (err) {
      char why[128];
      snprintf(why, sizeof(why), "cannot begin: %s", tg_strerror(err));
      record_failure(c, id, why);
      job_free(j);
      continue;
    }
    const tg_coll_config_t *cfg = &c->cfg;
    for (size_t i = 0; i < cfg->n_symbolize_debug_dirs; i++) {
      j->dirs[i] = cfg->symbolize_debug_dirs[i];
      j->o.debug_dirs[j->o.n_debug_dirs++] = cfg->symbolize_debug_dirs[i];
    }
    j->n_dirs = cfg->n_symbolize_debug_dirs;
    j->o.debug_dirs[j->o.n_debug_dirs++] = "/usr/lib/debug";
    j->o.module_files = true;
    j->o.debuginfod = cfg->symbolize == TG_COLL_SYMBOLIZE_DEBUGINFOD;
    j->o.debuginfod_max_lookups = cfg->symbolize_debuginfod_lookups;
    j->o.debuginfod_max_bytes = cfg->symbolize_debuginfod_bytes;
    j->o.debuginfod_max_ns =
        (uint64_t)cfg->symbolize_debuginfod_time_ms * 1000000u;
    j->o.stats = &j->stats;
    j->o.cancel = &q->stop;
    /* The work runs on a pool thread, which must not read the loop's
     * clock (c->clock): the daemon's clock for that (c->work_clock, the
     * monotonic one outside tests), read anew at each packet. */
    j->o.clock = c->work_clock;
    j->o.deadline_ns = tg_clock_ns(j->o.clock) +
                       (uint64_t)cfg->symbolize_timeout_ms * 1000000u;
    j->work.req.data = j;
    entry_to(q, id, SYM_RUNNING);
    q->running = j;
    if (coll_work_queue(c, &j->work, do_work, after_work) != 0) {
      q->running = NULL;
      tg_coll_store_symbols_abort(c->store, id);
      record_failure(c, id, "no worker");
      job_free(j);
    }
  }
}


_Static_assert(TG_COLL_CONFIG_DEBUG_DIRS_MAX < 16,
               "the configured debug dirs and /usr/lib/debug fit the "
               "symbolizer's TG_SYM_MAX_DEBUG_DIRS");

int coll_symbols_check(const coll_t *c) {
  if (c->cfg.symbolize == TG_COLL_SYMBOLIZE_OFF) return 0;
  const char *urls = getenv("DEBUGINFOD_URLS");
  if (c->cfg.symbolize == TG_COLL_SYMBOLIZE_DEBUGINFOD && !(urls && urls[0])) {
    fprintf(stderr, COLL_PROG ": %s symbolize = debuginfod needs the servers "
            "in DEBUGINFOD_URLS (the daemon's environment: Environment= in "
            "its unit)\n", TG_NOTE(COLLECTOR_CONFIG_INVALID));
    return -1;
  }
  return 0;
}

void coll_symbols_queue(coll_t *c, uint64_t id) {
  if (c->stopping) return;
  /* With no symbolization the shares are made at once, else after it
   * (shares.h): this is where each stored snapshot passes. */
  if (c->cfg.symbolize == TG_COLL_SYMBOLIZE_OFF) {
    coll_shares_queue(c, id);
    return;
  }
  if (!c->symbols && !(c->symbols = calloc(1, sizeof(*c->symbols)))) {
    TG_WARN("%s snapshot %016" PRIx64 ": not symbolized: out of memory",
            TG_NOTE(COLLECTOR_SYMBOLIZE_FAILED), id);
    coll_shares_queue(c, id);
    return;
  }
  struct coll_symbols *q = c->symbols;
  const sym_entry_t *was = entry_find(q, id);
  if (was && (was->state == SYM_WAITING || was->state == SYM_RUNNING))
    return; /* under way already: one run names it */
  if (q->n == COLL_SYMBOLS_QUEUE) {
    char why[96];
    snprintf(why, sizeof(why), "%d snapshots already wait for theirs",
             COLL_SYMBOLS_QUEUE);
    record_failure(c, id, why);
    return;
  }
  q->queue[(q->head + q->n) % COLL_SYMBOLS_QUEUE] = id;
  q->n++;
  entry_to(q, id, SYM_WAITING);
  start_next(c);
}

/* Whether a symbolization of snapshot |id| failed before: a host row
 * holds its problem (record_failure). A row that cannot be read says yes:
 * nothing is redone on a guess. */
static bool failed_before(coll_t *c, uint64_t id) {
  size_t n = 0;
  tg_coll_host_t *rows = NULL;
  if (tg_coll_store_hosts(c->store, id, NULL, 0, &n) != 0) return true;
  if (n && !(rows = calloc(n, sizeof(*rows)))) return true;
  size_t cap = n;
  bool failed = n && tg_coll_store_hosts(c->store, id, rows, cap, &n) != 0;
  if (n > cap) n = cap; /* rows added meanwhile: those read suffice */
  for (size_t i = 0; i < n && !failed; i++) {
    /* The catalog's text (a hand-edited one too): bounded as every
     * document read from outside is (common/json.h). */
    int rv;
    json_error_t err;
    json_t *a = rows[i].problems[0]
                    ? tg_json_load(rows[i].problems, strlen(rows[i].problems),
                                   0, 16 * (TG_COLL_PROBLEMS_MAX + 1), &err,
                                   &rv)
                    : NULL;
    size_t k;
    json_t *p;
    json_array_foreach(a, k, p) {
      const char *kind = json_string_value(json_object_get(p, "kind"));
      if (kind && !strcmp(kind, "symbolize")) failed = true;
    }
    json_decref(a);
  }
  free(rows);
  return failed;
}

void coll_symbols_resume(coll_t *c) {
  if (c->cfg.symbolize == TG_COLL_SYMBOLIZE_OFF) return;
  /* Collectors sharing a directory would write the same names under
   * tmp/; a bucket's conditional writes make a second attempt harmless. */
  if (c->shared && !tg_coll_store_symbols_shareable(c->store)) {
    TG_INFO("symbolize: symbolizations a restart cut short are not resumed "
            "with a shared catalog and a shared directory");
    return;
  }
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  f.states = TG_COLL_LIVE_STATES;
  f.limit = COLL_SYMBOLS_QUEUE;
  tg_coll_snapshot_t *rows = calloc(COLL_SYMBOLS_QUEUE, sizeof(*rows));
  size_t n = 0;
  int err = rows ? tg_coll_store_list(c->store, &f, rows, COLL_SYMBOLS_QUEUE,
                                      &n)
                 : -ENOMEM;
  if (err) {
    TG_WARN("%s symbolize: cannot list the snapshots to resume: %s",
            TG_NOTE(COLLECTOR_SYMBOLIZE_FAILED), tg_strerror(err));
    free(rows);
    return;
  }
  if (n > COLL_SYMBOLS_QUEUE) n = COLL_SYMBOLS_QUEUE;
  size_t resumed = 0;
  /* Oldest of them first, as they were stored. */
  for (size_t i = n; i-- > 0;) {
    uint64_t id = rows[i].id;
    err = tg_coll_store_has_symbols(c->store, id);
    if (err != -ENOENT) continue; /* there, or not known: left as is */
    if (failed_before(c, id)) continue;
    coll_symbols_queue(c, id);
    resumed++;
  }
  if (resumed)
    TG_INFO("symbolize: %zu snapshots without symbols queued again (of the "
            "newest %zu)", resumed, n);
  free(rows);
}

void coll_symbols_stop(coll_t *c) {
  struct coll_symbols *q = c->symbols;
  if (!q) return;
  q->n = 0;
  atomic_store(&q->stop, true);
}

/* The files a run did not open, by reason (tg_sym_refusal_name's). */
static json_t *refused_json(const sym_guard_t *g) {
  return json_pack("{s:I, s:I, s:I, s:I}", "dotdot",
                   (json_int_t)g->refused_dotdot, "kernel_fs",
                   (json_int_t)g->refused_kernel_fs, "not_regular",
                   (json_int_t)g->refused_not_regular, "split_dwarf",
                   (json_int_t)g->refused_split_dwarf);
}

static json_t *debuginfod_json(const sym_guard_t *g) {
  return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "lookups",
                   (json_int_t)g->dbgf_lookups, "found",
                   (json_int_t)g->dbgf_found, "cut", (json_int_t)g->dbgf_cut,
                   "refused",
                   (json_int_t)g->dbgf_refused, "bytes",
                   (json_int_t)g->dbgf_bytes, "ms",
                   (json_int_t)(g->dbgf_ns / 1000000u));
}

json_t *coll_symbols_json(coll_t *c, uint64_t id) {
  if (c->cfg.symbolize == TG_COLL_SYMBOLIZE_OFF)
    return json_pack("{s:s}", "state", "off");
  const sym_entry_t *e = c->symbols ? entry_find(c->symbols, id) : NULL;
  if (!e) {
    /* Symbolized before this start (or by another collector of the
     * bucket), or never (not live, or stored before symbolize was on). */
    int err = tg_coll_store_has_symbols(c->store, id);
    if (err && err != -ENOENT)
      return json_pack("{s:s, s:s}", "state", "unknown", "why",
                       tg_strerror(err));
    return json_pack("{s:s}", "state", err ? "none" : "done");
  }
  if (e->state == SYM_FAILED)
    return json_pack("{s:s, s:o, s:o, s:o}", "state", "failed", "why",
                     tg_json_text(e->why), "refused", refused_json(&e->guard),
                     "debuginfod", debuginfod_json(&e->guard));
  if (e->state != SYM_DONE)
    return json_pack("{s:s}", "state", STATE_NAMES[e->state]);
  return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}",
                   "state", "done", "bytes", (json_int_t)e->bytes, "modules",
                   (json_int_t)e->modules, "modules_found",
                   (json_int_t)e->modules_found, "frames",
                   (json_int_t)e->frames, "frames_named",
                   (json_int_t)e->frames_named, "frames_with_line",
                   (json_int_t)e->frames_with_line, "frames_plt",
                   (json_int_t)e->frames_plt, "refused",
                   refused_json(&e->guard), "debuginfod",
                   debuginfod_json(&e->guard));
}

uint64_t coll_symbols_bad_transitions(const coll_t *c) {
  return c->symbols ? c->symbols->bad_transitions : 0;
}

void coll_symbols_metrics(const coll_t *c, FILE *f) {
  const struct coll_symbols *q = c->symbols;
  fprintf(f,
          "# HELP tracegate_collector_symbolized_total Snapshots whose "
          "symbols were stored (symbolize), by outcome.\n"
          "# TYPE tracegate_collector_symbolized_total counter\n"
          "tracegate_collector_symbolized_total{outcome=\"stored\"} %" PRIu64
          "\n"
          "tracegate_collector_symbolized_total{outcome=\"failed\"} %" PRIu64
          "\n",
          q ? q->stored : 0, q ? q->failed : 0);
  static const sym_guard_t none;
  const sym_guard_t *g = q ? &q->total : &none;
  fprintf(f,
          "# HELP tracegate_collector_symbolize_refused_total Files a "
          "snapshot named that symbolize did not open, by reason.\n"
          "# TYPE tracegate_collector_symbolize_refused_total counter\n"
          "tracegate_collector_symbolize_refused_total{reason=\"dotdot\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_symbolize_refused_total{reason=\"kernel_fs\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_symbolize_refused_total{reason=\"not_regular\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_symbolize_refused_total{reason=\"split_dwarf\"} "
          "%" PRIu64 "\n"
          "# HELP tracegate_collector_symbolize_debuginfod_lookups_total "
          "debuginfod lookups of symbolize, by outcome (cut: cut short and "
          "refused: not made, a per-snapshot cap reached).\n"
          "# TYPE tracegate_collector_symbolize_debuginfod_lookups_total "
          "counter\n"
          "tracegate_collector_symbolize_debuginfod_lookups_total"
          "{outcome=\"found\"} %" PRIu64 "\n"
          "tracegate_collector_symbolize_debuginfod_lookups_total"
          "{outcome=\"missed\"} %" PRIu64 "\n"
          "tracegate_collector_symbolize_debuginfod_lookups_total"
          "{outcome=\"cut\"} %" PRIu64 "\n"
          "tracegate_collector_symbolize_debuginfod_lookups_total"
          "{outcome=\"refused\"} %" PRIu64 "\n"
          "# HELP tracegate_collector_symbolize_debuginfod_bytes_total Bytes "
          "symbolize downloaded from debuginfod.\n"
          "# TYPE tracegate_collector_symbolize_debuginfod_bytes_total "
          "counter\n"
          "tracegate_collector_symbolize_debuginfod_bytes_total %" PRIu64 "\n"
          "# HELP tracegate_collector_symbolize_debuginfod_seconds_total Time "
          "symbolize spent in debuginfod lookups.\n"
          "# TYPE tracegate_collector_symbolize_debuginfod_seconds_total "
          "counter\n"
          "tracegate_collector_symbolize_debuginfod_seconds_total %.3f\n",
          g->refused_dotdot, g->refused_kernel_fs, g->refused_not_regular,
          g->refused_split_dwarf, g->dbgf_found,
          g->dbgf_lookups - g->dbgf_found - g->dbgf_cut, g->dbgf_cut,
          g->dbgf_refused, g->dbgf_bytes, (double)g->dbgf_ns / 1e9);
}
