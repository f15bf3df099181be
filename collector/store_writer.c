/* Writing a snapshot (store.h): begin, the writer, finish and abort.
 *
 * Every step of the protocol is here, in its order; docs/collector.md
 * says why each one is where it is. In short: the row exists before the
 * id leaves (so an id is never lost), the file is whole and durable under
 * its final name before the row says so (so no live row points at a
 * missing or partial file), and whatever a crash leaves between two steps
 * is something the next open recognises and repairs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/catalog_check.h"
#include "collector/snap_index.h"
#include "collector/snapshot_id.h"
#include "collector/store_internal.h"
#include "collector/store_s3.h"
#include "common/fd_write.h"
#include "common/log.h"
#include "tracegate/error.h"

struct tg_coll_writer {
  tg_coll_store_t *store;
  uint64_t id;
  int fd; /* the tmp file, until finish or abort */
  uint64_t bytes;
  uint32_t crc; /* zlib crc32 of the bytes so far */
  int err;      /* the first write or sync failure; sticky */
  bool synced;  /* fsync()ed since the last write */
  const tg_coll_index_builder_t *index; /* borrowed; NULL: none */
  tg__coll_s3_writer_t *s3; /* a bucket's store: the upload, not fd */
  /* A bucket's store: what begin recorded, for the sidecar. */
  int64_t started_ms;
  char *trigger, *reason, *origin;
};

uint64_t tg_coll_writer_id(const tg_coll_writer_t *w) { return w->id; }
uint64_t tg_coll_writer_bytes(const tg_coll_writer_t *w) { return w->bytes; }

static int fail_row(tg_coll_store_t *s, uint64_t id, const char *why) {
  int err = s->cat->ops->fail(s->cat, id, why, tg__coll_now(s));
  if (err)
    TG_ERROR("store: snapshot %016llx stays pending until the next open: %s",
             (unsigned long long)id, tg_strerror(err));
  return err;
}

int tg_coll_store_begin(tg_coll_store_t *s, const tg_coll_begin_t *b,
                        tg_coll_writer_t **out, uint64_t *id) {
  uint64_t nid;
  int64_t started_ms = tg__coll_now(s);
  /* The row first, committed: from here on the id cannot be lost. */
  int err = s->cat->ops->begin(s->cat, b, started_ms, &nid);
  if (err) return err;
  tg__coll_step(s, TG_COLL_STEP_BEGUN, nid);
  char why[128];
  tg_coll_writer_t *w = calloc(1, sizeof(*w));
  if (!w) {
    fail_row(s, nid, "out of memory");
    return -ENOMEM;
  }
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(nid, 1, name);
  if (s->s3) {
    w->fd = -1;
    w->started_ms = started_ms;
    w->trigger = strdup(b->trigger);
    w->reason = strdup(b->reason ? b->reason : "");
    w->origin = strdup(b->origin ? b->origin : "");
    if (!w->trigger || !w->reason || !w->origin) err = -ENOMEM;
    if (err || (err = tg__coll_s3_begin(s, nid, &w->s3))) {
      snprintf(why, sizeof(why), "cannot start its upload: %s",
               tg_strerror(err));
      TG_ERROR("store: snapshot %016llx: %s", (unsigned long long)nid, why);
      fail_row(s, nid, why);
      free(w->trigger);
      free(w->reason);
      free(w->origin);
      free(w);
      return err;
    }
    goto created;
  }
  /* O_EXCL: ids are never reused, so an existing file is a bug to see. */
  w->fd = openat(s->tmp_fd, name,
                 O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (w->fd < 0) {
    err = -errno;
    snprintf(why, sizeof(why), "cannot create its file: %s", strerror(errno));
    TG_ERROR("store: %s: %s", name, why);
    fail_row(s, nid, why);
    free(w);
    return err;
  }
created:
  w->store = s;
  w->id = nid;
  w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
  s->writers++;
  tg__coll_step(s, TG_COLL_STEP_CREATED, nid);
  *out = w;
  *id = nid;
  return 0;
}

int tg_coll_writer_write(tg_coll_writer_t *w, const void *p, size_t n) {
  if (w->err) return w->err;
  if (n > (uint64_t)INT64_MAX - w->bytes) return w->err = -EFBIG;
  int err = w->s3 ? tg__coll_s3_write(w->s3, p, n) : tg_write_all(w->fd, p, n);
  if (err) return w->err = err;
  /* crc32() takes a uInt length. */
  const unsigned char *b = p;
  for (size_t left = n; left;) {
    uInt k = left > UINT_MAX ? UINT_MAX : (uInt)left;
    w->crc = (uint32_t)crc32(w->crc, b, k);
    b += k;
    left -= k;
  }
  w->bytes += n;
  w->synced = false;
  tg__coll_step(w->store, TG_COLL_STEP_WROTE, w->id);
  return 0;
}

void tg_coll_writer_set_index(tg_coll_writer_t *w,
                              const tg_coll_index_builder_t *b) {
  w->index = b;
}

int tg_coll_writer_rewrite(tg_coll_writer_t *w, tg_coll_rewrite_fn fn,
                           void *ctx) {
  if (w->err) return w->err;
  if (w->s3) return -ENOTSUP;
  tg_coll_store_t *s = w->store;
  char name[TG_COLL_FILE_NAME_MAX], next[TG_COLL_FILE_NAME_MAX + 16];
  tg_coll_id_file_name(w->id, 1, name);
  snprintf(next, sizeof(next), "%s" TG__COLL_REWRITE_SUFFIX, name);
  int in = openat(s->tmp_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return -errno;
  int fd = openat(s->tmp_fd, next,
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    int err = -errno;
    close(in);
    return err;
  }
  /* The old file's state, back if |fn| fails. */
  int old_fd = w->fd;
  uint64_t old_bytes = w->bytes;
  uint32_t old_crc = w->crc;
  bool old_synced = w->synced;
  w->fd = fd;
  w->bytes = 0;
  w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
  int err = fn(ctx, in, w);
  close(in);
  if (!err && w->err) err = w->err;
  if (!err && renameat(s->tmp_fd, next, s->tmp_fd, name) != 0) err = -errno;
  if (err) {
    close(fd);
    unlinkat(s->tmp_fd, next, 0);
    w->fd = old_fd;
    w->bytes = old_bytes;
    w->crc = old_crc;
    w->synced = old_synced;
    w->err = 0;
    return err;
  }
  close(old_fd);
  return 0;
}

int tg_coll_writer_sync(tg_coll_writer_t *w) {
  if (w->err) return w->err;
  if (w->s3) {
    int err = tg__coll_s3_seal(w->s3, w->index, w->bytes);
    if (err) return w->err = err;
  } else if (fsync(w->fd) != 0) {
    return w->err = -errno;
  }
  w->synced = true;
  tg__coll_step(w->store, TG_COLL_STEP_SYNCED, w->id);
  return 0;
}

static void release(tg_coll_store_t *s, tg_coll_writer_t *w) {
  if (w->fd >= 0) close(w->fd);
  tg__coll_s3_free(w->s3);
  s->writers--;
  free(w->trigger);
  free(w->reason);
  free(w->origin);
  free(w);
}

static void unlink_partial(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, 1, name);
  if (unlinkat(s->tmp_fd, name, 0) != 0 && errno != ENOENT)
    TG_WARN("store: %s: unlink: %s (removed at the next open)", name,
            strerror(errno));
}

/* Drops what a writer left: its tmp file, or its upload and objects. */
static void drop(tg_coll_store_t *s, tg_coll_writer_t *w) {
  if (w->s3) tg__coll_s3_discard(w->s3);
  else unlink_partial(s, w->id);
}

/* The host index, written whole and synced under its tmp name, then
 * renamed beside where the trace goes next: the directory's fsync after
 * the trace's rename makes both names durable, and recovery removes an
 * index whose snapshot did not become live. A snapshot without one is
 * still stored (the whole trace serves); only its hosts' parts are
 * refused, so a failure here is said and not fatal. */
static void publish_index(tg_coll_store_t *s, tg_coll_writer_t *w) {
  if (!w->index) return;
  char tmp[TG_COLL_FILE_NAME_MAX], final[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_index_name(w->id, 1, tmp);
  tg_coll_id_index_name(w->id, 0, final);
  const char *why = tg_coll_index_why(w->index);
  int err = 0;
  if (why) goto fail;
  int fd = openat(s->tmp_fd, tmp,
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    err = -errno;
    goto fail;
  }
  err = tg_coll_index_write(w->index, fd, w->bytes);
  if (!err && fsync(fd) != 0) err = -errno;
  close(fd);
  if (!err && renameat(s->tmp_fd, tmp, s->snap_fd, final) != 0) err = -errno;
  if (!err) return;
  unlinkat(s->tmp_fd, tmp, 0);
fail:
  TG_WARN("store: snapshot %016llx: stored without its host index (%s):"
          " its hosts' parts cannot be served alone, the whole trace can",
          (unsigned long long)w->id, why ? why : tg_strerror(err));
}

/* Moves the synced tmp file to its final name, durably. */
static int publish(tg_coll_store_t *s, tg_coll_writer_t *w, char *why,
                   size_t cap) {
  char tmp[TG_COLL_FILE_NAME_MAX], final[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(w->id, 1, tmp);
  tg_coll_id_file_name(w->id, 0, final);
  int err;
  if (w->s3) {
    /* Sealing completes the upload: the object (and its index) exist,
     * whole, before the row says so. */
    if (!w->synced && (err = tg_coll_writer_sync(w))) {
      snprintf(why, cap, "upload: %s", tg_strerror(err));
      return err;
    }
    tg__coll_step(s, TG_COLL_STEP_RENAMED, w->id);
    tg__coll_step(s, TG_COLL_STEP_DIR_SYNCED, w->id);
    return 0;
  }
  /* Synced before the rename: after a power cut the final name must not
   * show a file whose blocks never reached the disk. */
  if (!w->synced && (err = tg_coll_writer_sync(w))) {
    snprintf(why, cap, "fsync: %s", tg_strerror(err));
    return err;
  }
  close(w->fd);
  w->fd = -1;
  publish_index(s, w);
  if (renameat(s->tmp_fd, tmp, s->snap_fd, final) != 0) {
    err = -errno;
    snprintf(why, cap, "rename: %s", strerror(errno));
    tg__coll_unlink_index(s, w->id);
    return err;
  }
  tg__coll_step(s, TG_COLL_STEP_RENAMED, w->id);
  /* The new name durable before the row says live: else a power cut could
   * leave a live row and no file. */
  if (fsync(s->snap_fd) != 0) {
    err = -errno;
    snprintf(why, cap, "fsync of %s/: %s", TG_COLL_SNAPSHOT_DIR,
             strerror(errno));
    unlinkat(s->snap_fd, final, 0);
    tg__coll_unlink_index(s, w->id);
    return err;
  }
  tg__coll_step(s, TG_COLL_STEP_DIR_SYNCED, w->id);
  return 0;
}

int tg_coll_store_finish(tg_coll_store_t *s, tg_coll_writer_t *w,
                         const tg_coll_result_t *r) {
  uint64_t id = w->id;
  char why[TG_COLL_ERROR_MAX];
  tg_coll_finish_t f = {.bytes = w->bytes, .crc32 = w->crc};
  if (r) {
    f.packets = r->packets;
    f.hosts = r->hosts;
    f.n_hosts = r->n_hosts;
  }
  int err = r ? tg__coll_check_finish(&f) : -EINVAL;
  if (err) {
    snprintf(why, sizeof(why), "finish: invalid result");
    goto fail;
  }
  if (w->err) {
    err = w->err;
    snprintf(why, sizeof(why), "write: %s", tg_strerror(err));
    goto fail;
  }
  uint32_t n_failed;
  uint64_t loss;
  bool live = tg__coll_finish_state(&f, &n_failed, &loss) != TG_COLL_FAILED;
  if (live && (err = publish(s, w, why, sizeof(why)))) goto fail;
  if (!live) drop(s, w); /* no host delivered: nothing to keep */
  f.finished_ms = tg__coll_now(s);
  /* A bucket's sidecar before the row: a live row never lacks one, so
   * the catalog can be made again from the bucket (snap_meta.h). */
  if (live && w->s3) {
    tg_coll_begin_t b = {w->trigger, w->reason, w->origin};
    tg_coll_meta_in_t in = {.id = id, .started_ms = w->started_ms,
                            .begin = &b, .finish = &f};
    if ((err = tg__coll_s3_put_meta(w->s3, &in))) {
      snprintf(why, sizeof(why), "sidecar: %s", tg_strerror(err));
      goto fail;
    }
  }
  if ((err = s->cat->ops->finish(s->cat, id, &f))) {
    snprintf(why, sizeof(why), "catalog: %s", tg_strerror(err));
    if (live && w->s3) {
      tg__coll_s3_discard(w->s3);
    } else if (live) {
      char final[TG_COLL_FILE_NAME_MAX];
      tg_coll_id_file_name(id, 0, final);
      unlinkat(s->snap_fd, final, 0);
      tg__coll_unlink_index(s, id);
    }
    goto fail;
  }
  tg__coll_step(s, TG_COLL_STEP_FINISHED, id);
  release(s, w);
  return 0;
fail:
  TG_ERROR("store: snapshot %016llx failed: %s", (unsigned long long)id, why);
  drop(s, w);
  fail_row(s, id, why);
  release(s, w);
  return err;
}

int tg_coll_store_abort(tg_coll_store_t *s, tg_coll_writer_t *w,
                        const char *why) {
  uint64_t id = w->id;
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  drop(s, w);
  int err = fail_row(s, id, why ? why : "aborted");
  if (!err) tg__coll_step(s, TG_COLL_STEP_ABORTED, id);
  release(s, w);
  return err;
}
