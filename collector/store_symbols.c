/* Symbols beside a stored snapshot (store.h, tg_coll_store_symbols_*):
 * "<id>.symbols" and "<id>.symidx" in snapshots/, written under tmp/ and
 * renamed in once synced; or, for a bucket's store, written under tmp/
 * and PUT as objects (index first, symbols last, each If-None-Match: *)
 * by tg_coll_symput_run (store_s3.c) before commit. The trace, its index,
 * its sidecar and its row are never touched, so a snapshot is as whole
 * without its symbols as before them, and a crash at any step leaves at
 * worst a symbols file without its index (served whole, not in host
 * parts), an index object without its symbols (read by nobody, replaced
 * by the next attempt, deleted with the snapshot) or garbage in tmp/
 * (removed at the next open). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collector/snapshot_id.h"
#include "collector/store_internal.h"
#include "collector/store_s3.h"
#include "common/log.h"

static bool live(tg_coll_store_t *s, uint64_t id) {
  tg_coll_snapshot_t snap;
  return tg_coll_store_get(s, id, &snap) == 0 &&
         (snap.state == TG_COLL_COMPLETE || snap.state == TG_COLL_PARTIAL);
}

static int create_tmp(tg_coll_store_t *s, const char *name) {
  /* O_TRUNC, not O_EXCL: what an interrupted attempt of this collector
   * left under the name is garbage. */
  int fd = openat(s->tmp_fd, name,
                  O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
  return fd < 0 ? -errno : fd;
}

int tg_coll_store_symbols_begin(tg_coll_store_t *s, uint64_t id, int *fd,
                                int *ifd) {
  if (!tg_coll_id_valid(id) || !live(s, id)) return -ENOENT;
  char name[TG_COLL_FILE_NAME_MAX], iname[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 1, name);
  tg_coll_id_symidx_name(id, 1, iname);
  int f = create_tmp(s, name);
  if (f < 0) return f;
  int i = create_tmp(s, iname);
  if (i < 0) {
    close(f);
    unlinkat(s->tmp_fd, name, 0);
    return i;
  }
  *fd = f;
  *ifd = i;
  return 0;
}

void tg_coll_store_symbols_abort(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
  tg_coll_id_symidx_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
}

/* The index goes in first: a reader takes the symbols file as the sign
 * that they are there, and checks the index against its size. */
int tg_coll_store_symbols_commit(tg_coll_store_t *s, uint64_t id,
                                 bool with_index) {
  if (!tg_coll_id_valid(id) || !live(s, id)) {
    /* Deleted meanwhile (retention): its symbols go with it. A delete
     * after this check removes the objects itself (store_s3.c). */
    tg_coll_store_symbols_abort(s, id);
    if (s->s3 && tg_coll_id_valid(id)) tg__coll_s3_remove_symbols(s, id);
    return -ENOENT;
  }
  if (s->s3) {
    /* The objects are in (tg_coll_symput_run): tmp/ is done with. */
    tg_coll_store_symbols_abort(s, id);
    return 0;
  }
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
    tg_coll_store_symbols_abort(s, id);
    unlinkat(s->snap_fd, final, 0);
    tg_coll_id_symidx_name(id, 0, final);
    unlinkat(s->snap_fd, final, 0);
  }
  return err;
}

int tg_coll_store_has_symbols(tg_coll_store_t *s, uint64_t id) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  if (s->s3) return tg__coll_s3_has_symbols(s, id);
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 0, name);
  return faccessat(s->snap_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? 0
                                                                     : -errno;
}

int tg_coll_store_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                               int *ifd) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  if (s->s3) {
    tg_coll_fetch_t *f = NULL;
    int err = tg_coll_store_fetch_new(s, id, false, &f);
    if (!err) err = tg_coll_fetch_symbols(f, fd, ifd);
    tg_coll_fetch_free(f);
    return err;
  }
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 0, name);
  int f = openat(s->snap_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (f < 0) return -errno;
  tg_coll_id_symidx_name(id, 0, name);
  *ifd = openat(s->snap_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  *fd = f;
  return 0;
}

void tg__coll_unlink_symbols(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symidx_name(id, 0, name);
  if (unlinkat(s->snap_fd, name, 0) != 0 && errno != ENOENT)
    TG_WARN("store: %s: unlink: %s (removed at the next open)", name,
            strerror(errno));
  tg_coll_id_symbols_name(id, 0, name);
  if (unlinkat(s->snap_fd, name, 0) != 0 && errno != ENOENT)
    TG_WARN("store: %s: unlink: %s (removed at the next open)", name,
            strerror(errno));
}
