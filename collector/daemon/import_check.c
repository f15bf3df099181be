/* Each stored snapshot imported into trace processor: see import_check.h.
 *
 * A job: the loop asks the store for the snapshot's file and index
 * (tg_coll_store_files_new: a directory's fds stay readable if retention
 * deletes the snapshot meanwhile; a bucket's are downloaded by the pool
 * thread, not the loop), a pool thread imports the whole file by its name in
 * the store and, when that fails, writes each host's part (the head and the
 * host's extents, read through the index) into a private temporary directory
 * and imports it, and the loop records the verdicts. A snapshot deleted
 * during its check (no longer live in the catalog when the verdicts come
 * back) gets no verdict: a refusal might be the deletion's. The catalog is
 * asked, not the file: a bucket's file here is a private copy no deletion
 * touches. */
#include "collector/daemon/import_check.h"
#include "collector/daemon/check_runner.h"
#include "collector/daemon/work.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "collector/store/snap_index.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store.h"
#include "common/fd_write.h"
#include "common/json.h"
#include "common/log.h"
#include "common/notice.h"
#include "common/tp_import.h"
#include "tracegate/error.h"

typedef struct icheck_job {
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  coll_t *c;
  uint64_t id;
  tg_coll_files_t *files; /* the store's, until the work took them */
  int fd, ifd; /* the trace and its index (-1: none) */
  char trace[TG_COLL_FILE_NAME_MAX]; /* its file's name, for the words */
  char tp[TG_COLL_CONFIG_PATH_MAX + 1];
  tg_tp_limits_t lim;
  /* The work's results. */
  char why[TG_TP_WHY_MAX + 64]; /* the check could not be made ("": it was) */
  tg_tp_verdict_t whole;
  tg_coll_index_t ix; /* parts_checked: the hosts, in the index's order */
  const _Atomic bool *stop; /* the daemon stops: no more imports */
  coll_runner_t *runner;    /* NULL: imports from this process */
  tg_tp_verdict_t *parts;
  bool parts_checked;
  bool uid_kept; /* some import kept the collector's uid */
} icheck_job_t;

struct coll_icheck {
  uint64_t queue[COLL_ICHECK_QUEUE];
  size_t head, n;
  icheck_job_t *running;
  _Atomic int pid; /* the import under way, for a stop to kill */
  _Atomic bool stop;
  uint64_t dropped;
};

/* --- the work (a pool thread: no store, no loop) ----------------------------- */

static void work_fail(icheck_job_t *j, const char *what, int err) {
  snprintf(j->why, sizeof(j->why), "%s: %s", what, strerror(err));
}

/* One import of |fd|, by the runner where there is one. */
static void import(icheck_job_t *j, int fd, const char *name,
                   tg_tp_verdict_t *v) {
  if (j->runner)
    coll_runner_check(j->runner, j->tp, fd, &j->lim, j->id, v);
  else
    tg_tp_import_fd(j->tp, fd, name, &j->lim, v);
  if (v->uid_kept) j->uid_kept = true;
}

/* Host |h|'s part into |path|. 0 or -errno. */
static int write_part(icheck_job_t *j, size_t h, const char *path) {
  tg_coll_extent_t *ext = NULL;
  size_t n = 0;
  uint64_t bytes = 0;
  int err = tg_coll_index_plan(&j->ix, j->ifd, &h, 1, &ext, &n, &bytes);
  if (err) return err < 0 ? err : -EIO;
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    free(ext);
    return -errno;
  }
  char buf[64 << 10];
  for (size_t k = 0; k < n && !err; k++) {
    uint64_t off = ext[k].off, left = ext[k].len;
    while (left && !err) {
      size_t want = left < sizeof(buf) ? (size_t)left : sizeof(buf);
      ssize_t got = pread(j->fd, buf, want, (off_t)off);
      if (got <= 0) {
        err = got < 0 ? -errno : -EIO;
        break;
      }
      err = tg_write_all(out, buf, (size_t)got);
      off += (uint64_t)got;
      left -= (uint64_t)got;
    }
  }
  if (close(out) != 0 && !err) err = -errno;
  free(ext);
  return err;
}

static void check_parts(icheck_job_t *j, uint64_t size) {
  int err = tg_coll_index_read(j->ifd, size, &j->ix);
  if (err) {
    work_fail(j, "its host index cannot be read",
              err < 0 ? -err : EINVAL);
    return;
  }
  j->parts = calloc(j->ix.n_hosts ? j->ix.n_hosts : 1, sizeof(*j->parts));
  if (!j->parts) {
    work_fail(j, "out of memory", ENOMEM);
    return;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[128], path[160];
  snprintf(dir, sizeof(dir), "%s/tg-collector-check-XXXXXX",
           tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    work_fail(j, "cannot make a temporary directory", errno);
    return;
  }
  snprintf(path, sizeof(path), "%s/part.pftrace", dir);
  for (size_t h = 0; h < j->ix.n_hosts; h++) {
    if (atomic_load(j->stop)) {
      work_fail(j, "the collector stops", ECANCELED);
      break;
    }
    err = write_part(j, h, path);
    if (err) {
      work_fail(j, "cannot write a host's part", -err);
      break;
    }
    int pfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (pfd < 0) {
      work_fail(j, "cannot open a host's part", errno);
      unlink(path);
      break;
    }
    import(j, pfd, path, &j->parts[h]);
    close(pfd);
    unlink(path);
    if (j->parts[h].failure == TG_TP_NOT_RUN) {
      snprintf(j->why, sizeof(j->why), "%s", j->parts[h].why);
      break;
    }
  }
  rmdir(dir);
  j->parts_checked = !j->why[0];
}

static void do_work(uv_work_t *w) {
  icheck_job_t *j = w->data;
  int err = tg_coll_files_get(j->files);
  if (err) {
    snprintf(j->why, sizeof(j->why),
             "cannot get the snapshot from the store: %s", tg_strerror(err));
    return;
  }
  j->fd = tg_coll_files_take(j->files, TG_COLL_FILE_TRACE);
  j->ifd = tg_coll_files_take(j->files, TG_COLL_FILE_INDEX);
  struct stat st;
  if (fstat(j->fd, &st) != 0) {
    work_fail(j, "cannot stat the snapshot", errno);
    return;
  }
  import(j, j->fd, j->trace, &j->whole);
  if (j->whole.failure == TG_TP_NOT_RUN) {
    snprintf(j->why, sizeof(j->why), "%s", j->whole.why);
    return;
  }
  if (j->whole.failure == TG_TP_OK) return;
  if (j->ifd < 0) {
    snprintf(j->why, sizeof(j->why), "it has no host index");
    return;
  }
  check_parts(j, (uint64_t)st.st_size);
}

/* --- the verdicts (the loop) ------------------------------------------------- */

char *coll_problem_append(const char *existing, const json_t *p) {
  json_error_t je;
  int rv;
  json_t *arr = existing[0] ? tg_json_load(existing, strlen(existing), 0,
                                           1u << 20, &je, &rv)
                            : NULL;
  if (!json_is_array(arr)) {
    json_decref(arr);
    arr = json_array();
  }
  if (!arr) return NULL;
  json_array_append(arr, (json_t *)p);
  char *text = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  if (text && strlen(text) > TG_COLL_PROBLEMS_MAX) {
    free(text);
    return NULL;
  }
  return text;
}

static void record_host(coll_t *c, uint64_t id, const char *host,
                        const tg_tp_verdict_t *v, const tg_coll_host_t *rows,
                        size_t n_rows) {
  const char *existing = "";
  for (size_t i = 0; i < n_rows; i++)
    if (!strcmp(rows[i].host, host)) existing = rows[i].problems;
  char code[16], kept[16], why[TG_TP_WHY_MAX + 32];
  snprintf(code, sizeof(code), "TG-%d", (int)TG_N_COLLECTOR_PART_NO_IMPORT);
  snprintf(kept, sizeof(kept), "TG-%d", (int)TG_N_COLLECTOR_CHECK_SAME_UID);
  snprintf(why, sizeof(why), "trace processor: %s", v->why);
  char *text = NULL;
  /* The why is cut until the row's problems fit their column. */
  for (size_t cap = strlen(why); !text; cap /= 2) {
    why[cap] = 0;
    /* The uid it ran as and, when that was the collector's own, the
     * notice that says so: readable without the log. */
    json_t *p = json_pack("{s:s, s:s, s:o, s:I}", "kind", "import", "code",
                          code, "why", tg_json_text(why), "uid",
                          (json_int_t)v->uid);
    if (p && v->uid_kept)
      json_object_set_new(p, "notice", json_string(kept));
    text = p ? coll_problem_append(existing, p) : NULL;
    json_decref(p);
    if (!cap) break;
  }
  int err = text ? tg_coll_store_set_problems(c->store, id, host, text)
                 : -E2BIG;
  if (err)
    TG_WARN("snapshot %016" PRIx64 ": host %s: cannot record that its part "
            "does not import: %s", id, host, tg_strerror(err));
  free(text);
}

static void record(icheck_job_t *j) {
  coll_t *c = j->c;
  /* Deleted first: a bucket's download of it then fails too. */
  if (tg_coll_store_live(c->store, j->id) != 0) {
    TG_INFO("snapshot %016" PRIx64 ": deleted during its import check: no "
            "verdict", j->id);
    return;
  }
  if (j->why[0]) {
    TG_WARN("%s snapshot %016" PRIx64 ": the import check could not be made: "
            "%s", tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE), j->id, j->why);
    return;
  }
  if (j->uid_kept)
    TG_WARN("%s snapshot %016" PRIx64 ": trace processor ran as the "
            "collector's uid %" PRId64 ", not %d: the collector has no "
            "CAP_SETUID and CAP_SETGID (docs/collector.md, \"Checking each "
            "snapshot\")", tg_notice_tag(TG_N_COLLECTOR_CHECK_SAME_UID), j->id,
            j->whole.uid, TG_TP_NOBODY);
  if (j->whole.failure == TG_TP_OK) {
    TG_INFO("%s snapshot %016" PRIx64 ": trace processor imports it",
            tg_notice_tag(TG_N_COLLECTOR_SNAPSHOT_IMPORTS), j->id);
    return;
  }
  size_t n_rows = 0;
  tg_coll_host_t *rows = NULL;
  if (tg_coll_store_hosts(c->store, j->id, NULL, 0, &n_rows) == 0 && n_rows)
    rows = calloc(n_rows, sizeof(*rows));
  if (rows && tg_coll_store_hosts(c->store, j->id, rows, n_rows, &n_rows) != 0)
    n_rows = 0;
  size_t failing = 0;
  for (size_t h = 0; h < j->ix.n_hosts; h++) {
    const tg_tp_verdict_t *v = &j->parts[h];
    if (v->failure == TG_TP_OK) continue;
    failing++;
    TG_WARN("%s snapshot %016" PRIx64 ": host %s: its part does not import "
            "into trace processor (%s): %s",
            tg_notice_tag(TG_N_COLLECTOR_PART_NO_IMPORT), j->id,
            j->ix.hosts[h].name, tg_tp_failure_name(v->failure), v->why);
    record_host(c, j->id, j->ix.hosts[h].name, v, rows, rows ? n_rows : 0);
  }
  free(rows);
  if (!failing)
    TG_WARN("%s snapshot %016" PRIx64 ": trace processor cannot import it "
            "(%s: %s), yet every host's part imports alone",
            tg_notice_tag(TG_N_COLLECTOR_NO_PART_FAILS), j->id,
            tg_tp_failure_name(j->whole.failure), j->whole.why);
}

static void job_free(icheck_job_t *j) {
  tg_coll_files_free(j->files);
  if (j->fd >= 0) close(j->fd);
  if (j->ifd >= 0) close(j->ifd);
  tg_coll_index_free(&j->ix);
  free(j->parts);
  free(j);
}

static void start_next(coll_t *c);

static void after_work(uv_work_t *w, int status) {
  icheck_job_t *j = w->data;
  coll_t *c = j->c;
  struct coll_icheck *q = c->icheck;
  q->running = NULL;
  if (status == 0 && !c->stopping) record(j);
  job_free(j);
  if (!c->stopping) start_next(c);
}

static void start_next(coll_t *c) {
  struct coll_icheck *q = c->icheck;
  while (!q->running && q->n) {
    uint64_t id = q->queue[q->head];
    q->head = (q->head + 1) % COLL_ICHECK_QUEUE;
    q->n--;
    icheck_job_t *j = calloc(1, sizeof(*j));
    if (!j) {
      TG_WARN("%s snapshot %016" PRIx64 ": the import check could not be "
              "made: out of memory",
              tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE), id);
      continue;
    }
    j->c = c;
    j->id = id;
    j->fd = j->ifd = -1;
    int err = tg_coll_store_files_new(c->store, id, TG_COLL_FILES_INDEX,
                                      &j->files);
    if (err) {
      /* Deleted (retention) before its turn: nothing to check. */
      job_free(j);
      continue;
    }
    char name[TG_COLL_FILE_NAME_MAX];
    tg_coll_id_file_name(id, 0, name);
    /* For the verdict's words: the import reads the fd. */
    snprintf(j->trace, sizeof(j->trace), "%s", name);
    snprintf(j->tp, sizeof(j->tp), "%s", c->cfg.check_trace_processor);
    j->lim.timeout_ms = (uint64_t)c->cfg.check_timeout_ms;
    j->lim.memory = c->cfg.check_memory;
    j->lim.running_pid = &q->pid;
    /* The file is a hostile host's: the check runs as nobody too, beside
     * its sandbox, where the runner may switch (tp_import.h). */
    j->lim.as_nobody = true;
    j->runner = c->runner;
    j->stop = &q->stop;
    j->work.req.data = j;
    q->running = j;
    if (coll_work_queue(c, &j->work, do_work, after_work) != 0) {
      q->running = NULL;
      TG_WARN("%s snapshot %016" PRIx64 ": the import check could not be "
              "made: no worker", tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE),
              id);
      job_free(j);
    }
  }
}

void coll_import_check_queue(coll_t *c, uint64_t id) {
  if (!c->cfg.check_trace_processor[0] || c->stopping) return;
  if (!c->icheck) {
    c->icheck = calloc(1, sizeof(*c->icheck));
    if (!c->icheck) {
      TG_WARN("%s snapshot %016" PRIx64 ": the import check could not be "
              "made: out of memory",
              tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE), id);
      return;
    }
  }
  struct coll_icheck *q = c->icheck;
  if (q->n == COLL_ICHECK_QUEUE) {
    q->dropped++;
    TG_WARN("%s snapshot %016" PRIx64 ": the import check could not be made: "
            "%d snapshots already wait for theirs",
            tg_notice_tag(TG_N_COLLECTOR_CHECK_NOT_MADE), id, COLL_ICHECK_QUEUE);
    return;
  }
  q->queue[(q->head + q->n) % COLL_ICHECK_QUEUE] = id;
  q->n++;
  start_next(c);
}

void coll_import_check_stop(coll_t *c) {
  struct coll_icheck *q = c->icheck;
  if (!q) return;
  q->n = 0;
  atomic_store(&q->stop, true);
  /* The runner kills its import itself (its uid is not ours to signal)
   * and ends; without one, the import is this process's child. */
  if (c->runner) coll_runner_cancel(c->runner);
  int pid = atomic_load(&q->pid);
  if (pid > 0) kill(-pid, SIGKILL);
}
