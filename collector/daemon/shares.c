/* SPDX-License-Identifier: Apache-2.0 */
/* Each stored snapshot's function shares: see shares.h.
 *
 * A job: the loop asks the store for the snapshot's trace, host index and
 * symbols (tg_coll_store_files_new); a pool thread gets them (a bucket's
 * are downloaded there), feeds one profile and picks each host's rows;
 * the loop then hands the rows to the catalog. The profile, whose strings the
 * rows point into, lives until then. */
#include "collector/daemon/shares.h"
#include "collector/daemon/work.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/store/snap_index.h"
#include "collector/store/store.h"
#include "common/log.h"
#include "consumer/profile/profile.h"
#include "tracegate/error.h"

#define READ_CHUNK (1u << 20)
#define REST_NAME "[rest]"

typedef struct shares_job {
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  coll_t *c;
  uint64_t id;
  uint32_t top;
  _Atomic bool *stop;
  tg_coll_files_t *files; /* the store's, until the work took them */
  int fd, ifd, sfd;        /* -1: none (yet) */
  /* The work's results. */
  int err;
  const char *why; /* static text, with err */
  tg_coll_index_t ix;
  tg_prof_t *prof;
  tg_coll_host_shares_t *hosts;
  size_t n_hosts;
  tg_coll_share_in_t *rows; /* every host's, hosts[i].rows into it */
  uint64_t unmapped;        /* samples of machines no host of the index is */
} shares_job_t;

struct coll_shares {
  uint64_t queue[COLL_SHARES_QUEUE];
  size_t head, n;
  shares_job_t *running;
  _Atomic bool stop;
  uint64_t stored, failed, dropped;
};

/* --- the work (a pool thread: no store, no loop) -------------------------- */

static void work_fail(shares_job_t *j, int err, const char *why) {
  j->err = err ? err : -EIO;
  j->why = why;
}

/* All of |fd| into the profile, a chunk at a time. */
static int feed_fd(shares_job_t *j, int fd, uint8_t *buf) {
  for (;;) {
    if (atomic_load(j->stop)) return -ECANCELED;
    ssize_t n = read(fd, buf, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return 0;
    int err = tg_prof_feed(j->prof, buf, (size_t)n);
    if (err) return err;
  }
}

/* Caps what a count from the profile may be in the catalog. */
static uint64_t cap63(uint64_t v) {
  return v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v;
}


/* Host |h|'s rows from rows[*used] on: its top |top| functions by total
 * (tg_prof_function_shares' order) and its rest, whose self is every
 * sample whose leaf is none of them (so the rows' self sums to the
 * host's whole); the rest's total is its self (a total of several
 * functions would count a stack once per function). */
static int host_rows(shares_job_t *j, const tg_prof_host_t *h,
                     tg_coll_host_shares_t *out) {
  tg_prof_func_share_t *fs = NULL;
  size_t n = 0;
  int err = tg_prof_function_shares(h, &fs, &n);
  if (err) return err;
  size_t keep = n < j->top ? n : j->top;
  tg_coll_share_in_t *rows = &j->rows[j->n_hosts * (j->top + 1)];
  uint64_t self_ns = 0, self_samples = 0;
  for (size_t i = 0; i < keep; i++) {
    rows[i] = (tg_coll_share_in_t){.function = fs[i].name,
                                   .file = fs[i].file,
                                   .kind = fs[i].pseudo ? TG_COLL_SHARE_PSEUDO
                                            : TG_COLL_SHARE_FUNCTION,
                                   .self_ns = cap63(fs[i].self_ns),
                                   .total_ns = cap63(fs[i].total_ns),
                                   .self_samples = cap63(fs[i].self),
                                   .total_samples = cap63(fs[i].total)};
    self_ns += fs[i].self_ns;
    self_samples += fs[i].self;
  }
  free(fs);
  uint64_t rest_ns = h->cpu_ns > self_ns ? h->cpu_ns - self_ns : 0;
  uint64_t rest = h->counts.samples > self_samples
                      ? h->counts.samples - self_samples
                      : 0;
  rows[keep] = (tg_coll_share_in_t){.function = REST_NAME,
                                    .kind = TG_COLL_SHARE_REST,
                                    .self_ns = cap63(rest_ns),
                                    .total_ns = cap63(rest_ns),
                                    .self_samples = cap63(rest),
                                    .total_samples = cap63(rest)};
  out->rows = rows;
  out->n_rows = keep + 1;
  out->cpu_ns = cap63(h->cpu_ns);
  out->samples = cap63(h->counts.samples);
  /* No CPU-clock rate: cpu_ns is not time (shares.h, catalog.h). */
  out->by_samples = h->ns_per_sample_max == 0;
  return 0;
}

/* Whether profile host |h| is a host of the snapshot: machine k + 1 is
 * the index's host k. Machine 0 is the collector's own head; others past
 * the index are no host of the snapshot (their samples are counted, not
 * stored under a guess). */
static bool mapped(const shares_job_t *j, const tg_prof_host_t *h) {
  return h->counts.samples && h->machine_id >= 1 &&
         h->machine_id <= j->ix.n_hosts;
}

static void pick_rows(shares_job_t *j) {
  size_t n = tg_prof_n_hosts(j->prof), n_mapped = 0;
  /* Room for the snapshot's hosts with samples only: the trace's
   * machines (up to the profile's bound) are the hosts' to choose. */
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(j->prof, i);
    if (mapped(j, h)) n_mapped++;
    else j->unmapped += h->counts.samples;
  }
  if (!n_mapped) return;
  j->hosts = calloc(n_mapped, sizeof(*j->hosts));
  j->rows = calloc(n_mapped * ((size_t)j->top + 1), sizeof(*j->rows));
  if (!j->hosts || !j->rows) return work_fail(j, -ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    const tg_prof_host_t *h = tg_prof_host(j->prof, i);
    if (!mapped(j, h)) continue;
    tg_coll_host_shares_t *out = &j->hosts[j->n_hosts];
    out->host = j->ix.hosts[h->machine_id - 1].name;
    int err = host_rows(j, h, out);
    if (err) return work_fail(j, err, "out of memory");
    j->n_hosts++;
  }
}

static void do_work(uv_work_t *w) {
  shares_job_t *j = w->data;
  int err = tg_coll_files_get(j->files);
  if (err) return work_fail(j, err, "cannot get its files from the store");
  j->fd = tg_coll_files_take(j->files, TG_COLL_FILE_TRACE);
  j->ifd = tg_coll_files_take(j->files, TG_COLL_FILE_INDEX);
  j->sfd = tg_coll_files_take(j->files, TG_COLL_FILE_SYMBOLS);
  struct stat st;
  if (fstat(j->fd, &st) != 0) return work_fail(j, -errno, "cannot stat it");
  /* Without an index no machine is known to be a host: nothing is
   * stored rather than a guess. */
  if (j->ifd < 0 ||
      (err = tg_coll_index_read(j->ifd, (uint64_t)st.st_size, &j->ix)))
    return work_fail(j, j->ifd < 0 ? -ENOENT : err,
                     "no host index that describes it");
  if (!(j->prof = tg_prof_new(NULL))) return work_fail(j, -ENOMEM, "out of memory");
  uint8_t *buf = malloc(READ_CHUNK);
  if (!buf) return work_fail(j, -ENOMEM, "out of memory");
  err = feed_fd(j, j->fd, buf);
  /* The symbols are a trace of ModuleSymbols packets, appended as the
   * API appends them (store.h). */
  if (!err && j->sfd >= 0) err = feed_fd(j, j->sfd, buf);
  free(buf);
  if (!err) err = tg_prof_end(j->prof);
  if (err)
    return work_fail(j, err, err == -ECANCELED ? "the collector stops"
                             : err == -ENOMEM  ? "out of memory"
                                               : "its trace does not read");
  pick_rows(j);
}

/* --- the results (the loop) ----------------------------------------------- */

static void job_free(shares_job_t *j) {
  if (j->fd >= 0) close(j->fd);
  if (j->ifd >= 0) close(j->ifd);
  if (j->sfd >= 0) close(j->sfd);
  tg_coll_files_free(j->files);
  tg_coll_index_free(&j->ix);
  tg_prof_free(j->prof);
  free(j->hosts);
  free(j->rows);
  free(j);
}

static void start_next(coll_t *c);

static void after_work(uv_work_t *w, int status) {
  shares_job_t *j = w->data;
  coll_t *c = j->c;
  struct coll_shares *q = c->shares;
  q->running = NULL;
  /* Stopped meanwhile (coll_shares_stop): nothing is stored, and the
   * queue goes with this last job. */
  if (atomic_load(&q->stop)) {
    job_free(j);
    free(q);
    c->shares = NULL;
    return;
  }
  if (status && !j->err) work_fail(j, status, "no worker");
  int err = j->err;
  if (!err)
    err = tg_coll_store_set_shares(c->store, j->id, j->hosts, j->n_hosts);
  if (err == -ENOENT && !j->err) {
    TG_INFO("snapshot %016" PRIx64 ": deleted before its function shares "
            "were stored", j->id);
  } else if (err) {
    q->failed++;
    TG_WARN("snapshot %016" PRIx64 ": no function shares: %s: %s", j->id,
            j->err ? j->why : "the catalog refused them", tg_strerror(err));
  } else {
    q->stored++;
    TG_INFO("snapshot %016" PRIx64 ": function shares of %zu hosts stored "
            "(top %" PRIu32 ")%s", j->id, j->n_hosts, j->top,
            j->unmapped ? "; samples of machines that are no host of it "
                          "left out" : "");
  }
  job_free(j);
  start_next(c);
}

static void start_next(coll_t *c) {
  struct coll_shares *q = c->shares;
  while (!q->running && q->n) {
    uint64_t id = q->queue[q->head];
    q->head = (q->head + 1) % COLL_SHARES_QUEUE;
    q->n--;
    shares_job_t *j = calloc(1, sizeof(*j));
    if (!j) {
      q->failed++;
      TG_WARN("snapshot %016" PRIx64 ": no function shares: out of memory",
              id);
      continue;
    }
    j->c = c;
    j->id = id;
    j->top = c->cfg.function_shares_top;
    j->stop = &q->stop;
    j->fd = j->ifd = j->sfd = -1;
    int err = tg_coll_store_files_new(
        c->store, id, TG_COLL_FILES_INDEX | TG_COLL_FILES_SYMBOLS, &j->files);
    if (err) {
      /* Deleted (retention) before its turn: nothing to count. */
      if (err != -ENOENT) {
        q->failed++;
        TG_WARN("snapshot %016" PRIx64 ": no function shares: %s", id,
                tg_strerror(err));
      }
      job_free(j);
      continue;
    }
    j->work.req.data = j;
    q->running = j;
    if (coll_work_queue(c, &j->work, do_work, after_work) != 0) {
      q->running = NULL;
      q->failed++;
      TG_WARN("snapshot %016" PRIx64 ": no function shares: no worker", id);
      job_free(j);
    }
  }
}

void coll_shares_queue(coll_t *c, uint64_t id) {
  if (!c->cfg.function_shares_top || c->stopping ||
      (c->shares && atomic_load(&c->shares->stop)))
    return;
  if (!c->shares && !(c->shares = calloc(1, sizeof(*c->shares)))) {
    TG_WARN("snapshot %016" PRIx64 ": no function shares: out of memory", id);
    return;
  }
  struct coll_shares *q = c->shares;
  if (q->n == COLL_SHARES_QUEUE) {
    q->dropped++;
    TG_WARN("snapshot %016" PRIx64 ": no function shares: %d snapshots "
            "already wait for theirs", id, COLL_SHARES_QUEUE);
    return;
  }
  q->queue[(q->head + q->n) % COLL_SHARES_QUEUE] = id;
  q->n++;
  start_next(c);
}

void coll_shares_stop(coll_t *c) {
  struct coll_shares *q = c->shares;
  if (!q) return;
  q->n = 0;
  atomic_store(&q->stop, true);
  /* A job under way frees it when it comes back (after_work). */
  if (!q->running) {
    free(q);
    c->shares = NULL;
  }
}

void coll_shares_metrics(const coll_t *c, FILE *f) {
  const struct coll_shares *q = c->shares;
  fprintf(f,
          "# HELP tracegate_collector_function_shares_total Snapshots whose "
          "function shares were stored in the catalog, by outcome.\n"
          "# TYPE tracegate_collector_function_shares_total counter\n"
          "tracegate_collector_function_shares_total{outcome=\"stored\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_function_shares_total{outcome=\"failed\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_function_shares_total{outcome=\"dropped\"} "
          "%" PRIu64 "\n",
          q ? q->stored : 0, q ? q->failed : 0, q ? q->dropped : 0);
}
