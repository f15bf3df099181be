/* The store (store.h): opening and locking the directory, the reads,
 * pin, delete and retention. Writing is in store_writer.c, the repair at
 * open in store_recover.c; where the snapshots are is the backend's
 * (s->ops: store_dir.c, store_s3.c), chosen once at open. */
#include "collector/store/store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/catalog/catalog_sqlite.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "collector/store/store_s3.h"
#include "common/log.h"
#include "tracegate/error.h"

const char *tg_coll_step_name(tg_coll_step_t s) {
  static const char *const names[TG_COLL_STEP_COUNT] = {
      "begun",    "created", "wrote",    "synced",      "renamed", "dir_synced",
      "finished", "aborted", "removing", "row_removed", "unlinked"};
  return s < TG_COLL_STEP_COUNT ? names[s] : "?";
}

static int64_t realtime_ms(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Opens directory |name| under |at| (AT_FDCWD for the root), creating it
 * if missing; *created says whether it was. */
static int open_dir(int at, const char *name, bool *created, int *fd) {
  *created = false;
  if (mkdirat(at, name, 0750) == 0)
    *created = true;
  else if (errno != EEXIST)
    return -errno;
  /* The root is configuration and may be a symlink; below it, ours. */
  int d = openat(
      at, name,
      O_RDONLY | O_DIRECTORY | O_CLOEXEC | (at == AT_FDCWD ? 0 : O_NOFOLLOW));
  if (d < 0) return -errno;
  *fd = d;
  return 0;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* The lock file, flock()ed: the kernel drops the lock when the process
 * dies however it dies, so a killed collector never blocks its successor.
 * A store with a catalog of its own takes it exclusively: a second one on
 * the same directory is refused. Collectors sharing a catalog share the
 * lock (each is told apart by its catalog member), which still keeps a
 * store of its own off a directory they use, and them off its. */
static int lock_store(tg_coll_store_t *s, const char *dir, bool shared) {
  s->lock_fd = openat(s->root_fd, TG_COLL_LOCK_FILE,
                      O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (s->lock_fd < 0) return -errno;
  if (flock(s->lock_fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    int err = errno == EWOULDBLOCK ? -EBUSY : -errno;
    if (err == -EBUSY) TG_ERROR("store %s: in use by another collector", dir);
    return err;
  }
  return 0;
}

static int open_catalog(tg_coll_store_t *s, const tg_coll_store_config_t *cfg) {
  if (cfg->catalog) {
    /* Two stores on one catalog would be one member twice: each would
     * take the other's PENDING rows for its own interrupted ones. */
    if (cfg->catalog->attached) return -EBUSY;
    s->cat = cfg->catalog;
    return 0;
  }
  char path[4096];
  int n = snprintf(path, sizeof(path), "%s/%s", cfg->dir, TG_COLL_CATALOG_FILE);
  if (n < 0 || (size_t)n >= sizeof(path)) return -ENAMETOOLONG;
  s->owns_cat = true;
  return tg_coll_catalog_sqlite_open(path, &s->cat);
}

int tg_coll_store_open(const tg_coll_store_config_t *cfg, tg_coll_store_t **out,
                       tg_coll_recovery_t *rec) {
  if (!cfg || !cfg->dir || !*cfg->dir) return -EINVAL;
  tg_coll_store_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->lock_fd = s->root_fd = s->tmp_fd = s->snap_fd = -1;
  s->retention = cfg->retention;
  s->now_ms = cfg->now_ms ? cfg->now_ms : realtime_ms;
  s->clock_ctx = cfg->clock_ctx;
  s->on_step = cfg->on_step;
  s->step_ctx = cfg->step_ctx;
  s->ops = cfg->s3 ? &tg__coll_store_s3 : &tg__coll_store_dir;
  bool root_new, tmp_new, snap_new;
  bool shared = cfg->catalog && cfg->catalog->ops->shared;
  int err;
  if ((err = open_dir(AT_FDCWD, cfg->dir, &root_new, &s->root_fd)) ||
      (err = lock_store(s, cfg->dir, shared)) ||
      (err = open_dir(s->root_fd, TG_COLL_TMP_DIR, &tmp_new, &s->tmp_fd)) ||
      (err =
           open_dir(s->root_fd, TG_COLL_SNAPSHOT_DIR, &snap_new, &s->snap_fd)))
    goto fail;
  /* New subdirectories must be durable before a file is renamed into one. */
  if ((tmp_new || snap_new) && fsync(s->root_fd) != 0) {
    err = -errno;
    goto fail;
  }
  if ((err = open_catalog(s, cfg))) goto fail;
  s->cat->attached = true;
  if (cfg->s3 && (err = tg__coll_s3_open(s, cfg->s3))) goto fail;
  tg_coll_recovery_t local;
  if ((err = tg__coll_recover(s, rec ? rec : &local))) goto fail;
  *out = s;
  return 0;
fail:
  TG_ERROR("store %s: open: %s", cfg->dir, tg_strerror(err));
  tg_coll_store_close(s);
  return err;
}

void tg_coll_store_close(tg_coll_store_t *s) {
  if (!s) return;
  assert(s->writers == 0);
  if (s->cat) s->cat->attached = false;
  if (s->owns_cat) tg_coll_catalog_close(s->cat);
  s->ops->close(s);
  close_fd(&s->snap_fd);
  close_fd(&s->tmp_fd);
  close_fd(&s->root_fd);
  close_fd(&s->lock_fd); /* last: releases the flock */
  free(s);
}

int tg_coll_store_list(tg_coll_store_t *s, const tg_coll_filter_t *f,
                       tg_coll_snapshot_t *out, size_t cap, size_t *n) {
  return s->cat->ops->list(s->cat, f, out, cap, n);
}

int tg_coll_store_get(tg_coll_store_t *s, uint64_t id,
                      tg_coll_snapshot_t *out) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->cat->ops->get(s->cat, id, out);
}

int tg_coll_store_hosts(tg_coll_store_t *s, uint64_t id, tg_coll_host_t *out,
                        size_t cap, size_t *n) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->cat->ops->hosts(s->cat, id, out, cap, n);
}

int tg_coll_store_get_with_hosts(tg_coll_store_t *s, uint64_t id,
                                 tg_coll_snapshot_t *out,
                                 tg_coll_host_t *hosts, size_t cap,
                                 size_t *n) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->cat->ops->get_with_hosts(s->cat, id, out, hosts, cap, n);
}

int tg_coll_store_set_shares(tg_coll_store_t *s, uint64_t id,
                             const tg_coll_host_shares_t *hosts,
                             size_t n_hosts) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->cat->ops->set_shares(s->cat, id, hosts, n_hosts);
}

int tg_coll_store_find_shares(tg_coll_store_t *s,
                              const tg_coll_share_query_t *q,
                              tg_coll_share_t *out, size_t cap, size_t *n) {
  return s->cat->ops->find_shares(s->cat, q, out, cap, n);
}

int tg_coll_store_live(tg_coll_store_t *s, uint64_t id) {
  tg_coll_snapshot_t snap;
  int err = tg_coll_store_get(s, id, &snap);
  if (err) return err;
  return TG_COLL_LIVE_STATES & TG_COLL_STATE_BIT(snap.state) ? 0 : -ENOENT;
}

int tg_coll_store_open_file(tg_coll_store_t *s, uint64_t id, int *fd) {
  int err = tg_coll_store_live(s, id);
  return err ? err : s->ops->open_object(s, id, false, fd);
}

int tg_coll_store_open_index(tg_coll_store_t *s, uint64_t id, int *fd) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->ops->open_object(s, id, true, fd);
}

int tg_coll_store_presign(tg_coll_store_t *s, uint64_t id, uint32_t expires_s,
                          char *url, size_t cap) {
  if (!s->ops->presign) return -EOPNOTSUPP;
  int err = tg_coll_store_live(s, id);
  if (err) return err;
  return s->ops->presign(s, id, tg__coll_now(s) / 1000, expires_s, url,
                             cap);
}

/* After a row's change, what keeps a copy of it (a bucket's sidecar)
 * says it too. */
int tg_coll_store_pin(tg_coll_store_t *s, uint64_t id, bool pinned) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  int err = s->cat->ops->set_pinned(s->cat, id, pinned);
  if (!err) s->ops->refresh_meta(s, id);
  return err;
}

int tg_coll_store_set_problems(tg_coll_store_t *s, uint64_t id,
                               const char *host, const char *problems) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  int err = s->cat->ops->set_problems(s->cat, id, host, problems);
  if (!err) s->ops->refresh_meta(s, id);
  return err;
}

/* The row goes first, committed: a crash before the unlinks leaves an
 * orphan file (or index), which the next open removes; the other order could leave a
 * live row without its file. Only the collector whose delete removed the
 * row unlinks: with a shared catalog, the others get -ENOENT first. */
int tg__coll_remove(tg_coll_store_t *s, uint64_t id, bool unless_pinned) {
  tg__coll_step(s, TG_COLL_STEP_REMOVING, id);
  int err = s->cat->ops->remove(s->cat, id, unless_pinned);
  if (err) return err;
  tg__coll_step(s, TG_COLL_STEP_ROW_REMOVED, id);
  s->ops->remove(s, id);
  tg__coll_step(s, TG_COLL_STEP_UNLINKED, id);
  return 0;
}

int tg_coll_store_delete(tg_coll_store_t *s, uint64_t id) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return tg__coll_remove(s, id, false);
}

/* How often one retention step looks again after its candidate went or
 * was pinned under it (another collector sharing the catalog). */
#define RETAIN_RACES 8

int tg_coll_store_retain(tg_coll_store_t *s, tg_coll_retained_t *out) {
  tg_coll_retained_t r;
  for (int races = 0;; races++) {
    tg_coll_retention_view_t v;
    int err = s->cat->ops->retention_view(s->cat, &v);
    if (err) return err;
    r = (tg_coll_retained_t){0};
    for (size_t i = 0; i < v.n; i++) r.total_bytes += v.rows[i].bytes;
    size_t victim = 0;
    r.verdict =
        tg_coll_retention_decide(&s->retention, &v, tg__coll_now(s), &victim);
    if (r.verdict != TG_COLL_KEEP) {
      r.id = v.rows[victim].id;
      r.bytes = v.rows[victim].bytes;
    }
    free(v.rows);
    if (r.verdict == TG_COLL_KEEP) break;
    char idtext[TG_COLL_ID_STRLEN];
    tg_coll_id_format(r.id, idtext);
    /* Guarded by its pin: a pin committed since the view keeps it. */
    err = tg__coll_remove(s, r.id, true);
    if (err == 0) {
      TG_INFO("store: retention (%s) deleted snapshot %s, %llu bytes",
              tg_coll_verdict_name(r.verdict), idtext,
              (unsigned long long)r.bytes);
      break;
    }
    /* Deleted or pinned by another collector since the view: look again. */
    if ((err != -ENOENT && err != -EBUSY) || races == RETAIN_RACES) return err;
  }
  if (out) *out = r;
  return r.verdict != TG_COLL_KEEP;
}

int tg_coll_store_fetch_new(tg_coll_store_t *s, uint64_t id,
                            tg_coll_fetch_t **out) {
  if (!s->ops->fetch_new) return -EOPNOTSUPP;
  return s->ops->fetch_new(s, id, out);
}

int tg_coll_store_rebuild(tg_coll_store_t *s, tg_coll_rebuild_fn fn,
                          void *ctx, tg_coll_rebuild_t *out) {
  memset(out, 0, sizeof(*out));
  return s->ops->rebuild(s, fn, ctx, out);
}

const char *tg_coll_store_kind_name(tg_coll_store_kind_t k) {
  switch (k) {
  case TG_COLL_STORE_DIRECTORY: return "directory";
  case TG_COLL_STORE_BUCKET: return "bucket";
  }
  return "?";
}

tg_coll_store_kind_t tg_coll_store_kind(const tg_coll_store_t *s) {
  return s->ops->kind;
}

bool tg_coll_store_remote(const tg_coll_store_t *s) {
  return s->ops->fetch_new != NULL; /* store.h: what "remote" means */
}

bool tg_coll_store_can_presign(const tg_coll_store_t *s) {
  return s->ops->presign != NULL;
}

bool tg_coll_store_symbols_shareable(const tg_coll_store_t *s) {
  return s->ops->symbols_shareable;
}

void tg_coll_store_describe(tg_coll_store_t *s, tg_coll_store_desc_t *out) {
  memset(out, 0, sizeof(*out));
  out->kind = s->ops->kind;
  s->ops->describe(s, out);
}
