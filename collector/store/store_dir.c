// SPDX-License-Identifier: Apache-2.0
/* The store's directory backend (store_internal.h, tg__coll_store_ops_t):
 * a snapshot is a file written under tmp/ and renamed into snapshots/
 * once synced, its host index beside it (store.h draws the layout).
 * Recovery's half is store_recover.c's, the symbols' store_symbols.c's.
 * It never decides the protocol's order: store_writer.c calls it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "collector/store/snap_index.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "common/fd_write.h"
#include "common/log.h"
#include "tracegate/error.h"

static void dir_close(tg_coll_store_t *s) {
  (void)s; /* the directories' fds are the store's */
}

static int dir_open_object(tg_coll_store_t *s, uint64_t id, bool index,
                           int *fd) {
  char name[TG_COLL_FILE_NAME_MAX];
  if (index) tg_coll_id_index_name(id, 0, name);
  else tg_coll_id_file_name(id, 0, name);
  int f = openat(s->snap_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (f < 0) return -errno;
  *fd = f;
  return 0;
}

static void dir_refresh_meta(tg_coll_store_t *s, uint64_t id) {
  (void)s, (void)id; /* the row is the only record of it */
}

static void dir_remove(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, 0, name);
  tg__coll_unlink_name(s, name);
  tg__coll_unlink_index(s, id);
}

static int dir_symput_new(tg_coll_store_t *s, uint64_t id,
                          tg_coll_symput_t **out) {
  (void)s, (void)id, (void)out;
  return -EOPNOTSUPP; /* commit renames the files in */
}

static void dir_symbols_gone(tg_coll_store_t *s, uint64_t id) {
  (void)s, (void)id; /* nothing left the tmp/ files the caller removed */
}

static int dir_rebuild(tg_coll_store_t *s, tg_coll_rebuild_fn fn, void *ctx,
                       tg_coll_rebuild_t *out) {
  (void)s, (void)fn, (void)ctx, (void)out;
  return -EOPNOTSUPP; /* no sidecars: the catalog is the only record */
}

static void dir_describe(tg_coll_store_t *s, tg_coll_store_desc_t *out) {
  (void)s, (void)out; /* a kind, no URL, no requests to count */
}

/* --- symbols: <id>.symbols and <id>.symidx in snapshots/ -------------- */

/* The index goes in first: a reader takes the symbols file as the sign
 * that they are there, and checks the index against its size. */
static int dir_symbols_commit(tg_coll_store_t *s, uint64_t id,
                              bool with_index) {
  char tmp[TG_COLL_FILE_NAME_MAX], final[TG_COLL_FILE_NAME_MAX];
  int err = 0;
  tg_coll_id_symidx_name(id, 1, tmp);
  tg_coll_id_symidx_name(id, 0, final);
  if (with_index ? renameat(s->tmp_fd, tmp, s->snap_fd, final) != 0
                 : unlinkat(s->snap_fd, final, 0) != 0 && errno != ENOENT)
    err = -errno;
  if (!with_index) unlinkat(s->tmp_fd, tmp, 0);
  tg_coll_id_symbols_name(id, 1, tmp);
  tg_coll_id_symbols_name(id, 0, final);
  if (!err && renameat(s->tmp_fd, tmp, s->snap_fd, final) != 0) err = -errno;
  if (!err && fsync(s->snap_fd) != 0) err = -errno;
  if (err) {
    TG_WARN("store: snapshot %s: cannot store its symbols: %s", final,
            strerror(-err));
    tg__coll_unlink_tmp_symbols(s, id);
    tg__coll_unlink_symbols(s, id);
  }
  return err;
}

static int dir_has_symbols(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 0, name);
  return faccessat(s->snap_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? 0
                                                                     : -errno;
}

static int dir_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                            int *ifd) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 0, name);
  int f = openat(s->snap_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (f < 0) return -errno;
  tg_coll_id_symidx_name(id, 0, name);
  *ifd = openat(s->snap_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  *fd = f;
  return 0;
}

/* --- the writer: its tmp file --------------------------------------- */

static int dir_begin(tg_coll_writer_t *w, const tg_coll_begin_t *b,
                     int64_t started_ms, char *why, size_t cap) {
  (void)b, (void)started_ms; /* the row holds them */
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(w->id, 1, name);
  /* O_EXCL: ids are never reused, so an existing file is a bug to see. */
  w->be.fd = openat(w->store->tmp_fd, name,
                    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    0640);
  if (w->be.fd >= 0) return 0;
  int err = -errno;
  snprintf(why, cap, "cannot create its file: %s", strerror(errno));
  TG_ERROR("store: %s: %s", name, why);
  return err;
}

static int dir_write(tg_coll_writer_t *w, const void *p, size_t n) {
  return tg_write_all(w->be.fd, p, n);
}

static int dir_rewrite(tg_coll_writer_t *w, tg_coll_rewrite_fn fn,
                       void *ctx) {
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
  int old_fd = w->be.fd;
  uint64_t old_bytes = w->bytes;
  uint32_t old_crc = w->crc;
  bool old_synced = w->synced;
  w->be.fd = fd;
  w->bytes = 0;
  w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
  int err = fn(ctx, in, w);
  close(in);
  if (!err && w->err) err = w->err;
  if (!err && renameat(s->tmp_fd, next, s->tmp_fd, name) != 0) err = -errno;
  if (err) {
    close(fd);
    unlinkat(s->tmp_fd, next, 0);
    w->be.fd = old_fd;
    w->bytes = old_bytes;
    w->crc = old_crc;
    w->synced = old_synced;
    w->err = 0;
    return err;
  }
  close(old_fd);
  return 0;
}

static int dir_sync(tg_coll_writer_t *w) {
  return fsync(w->be.fd) != 0 ? -errno : 0;
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
static int dir_publish(tg_coll_writer_t *w, char *why, size_t cap) {
  tg_coll_store_t *s = w->store;
  char tmp[TG_COLL_FILE_NAME_MAX], final[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(w->id, 1, tmp);
  tg_coll_id_file_name(w->id, 0, final);
  int err;
  /* Synced (store_writer.c) before the rename: after a power cut the
   * final name must not show a file whose blocks never reached the disk. */
  close(w->be.fd);
  w->be.fd = -1;
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

static int dir_put_meta(tg_coll_writer_t *w, const tg_coll_finish_t *f) {
  (void)w, (void)f; /* no sidecar: the row is the only record */
  return 0;
}

static void dir_unpublish(tg_coll_writer_t *w) {
  char final[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(w->id, 0, final);
  unlinkat(w->store->snap_fd, final, 0);
  tg__coll_unlink_index(w->store, w->id);
}

static void dir_discard(tg_coll_writer_t *w) {
  if (w->be.fd >= 0) close(w->be.fd);
  w->be.fd = -1;
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(w->id, 1, name);
  if (unlinkat(w->store->tmp_fd, name, 0) != 0 && errno != ENOENT)
    TG_WARN("store: %s: unlink: %s (removed at the next open)", name,
            strerror(errno));
}

static void dir_free(tg_coll_writer_t *w) {
  if (w->be.fd >= 0) close(w->be.fd);
  w->be.fd = -1;
}

const tg__coll_store_ops_t tg__coll_store_dir = {
    .kind = TG_COLL_STORE_DIRECTORY,
    .symbols_shareable = false,
    .sync_name = "fsync",
    .close = dir_close,
    .recover = tg__coll_dir_recover,
    .open_object = dir_open_object,
    .presign = NULL, /* a file has no URL of its own */
    .refresh_meta = dir_refresh_meta,
    .remove = dir_remove,
    .fetch_new = NULL, /* tg_coll_store_open_file reads it in place */
    .symput_new = dir_symput_new,
    .symbols_commit = dir_symbols_commit,
    .symbols_gone = dir_symbols_gone,
    .has_symbols = dir_has_symbols,
    .open_symbols = dir_open_symbols,
    .rebuild = dir_rebuild,
    .describe = dir_describe,
    .begin = dir_begin,
    .write = dir_write,
    .rewrite = dir_rewrite,
    .sync = dir_sync,
    .publish = dir_publish,
    .put_meta = dir_put_meta,
    .unpublish = dir_unpublish,
    .discard = dir_discard,
    .free = dir_free,
};
