/* Symbols beside a stored snapshot (store.h, tg_coll_store_symbols_*):
 * "<id>.symbols" and "<id>.symidx" in snapshots/, written under tmp/ and
 * renamed in once synced; or, for a bucket's store, written under tmp/
 * and PUT as objects (index first, symbols last, each If-None-Match: *)
 * by tg_coll_symput_run (store_s3_symbols.c) before commit. The trace, its index,
 * its sidecar and its row are never touched, so a snapshot is as whole
 * without its symbols as before them, and a crash at any step leaves at
 * worst a symbols file without its index (served whole, not in host
 * parts), an index object without its symbols (read by nobody, replaced
 * by the next attempt, deleted with the snapshot) or garbage in tmp/
 * (removed at the next open). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "common/log.h"
#include "tracegate/error.h"

int tg_coll_store_symput_new(tg_coll_store_t *s, uint64_t id,
                             tg_coll_symput_t **out) {
  return s->ops->symput_new(s, id, out);
}

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
  tg__coll_unlink_tmp_symbols(s, id);
}

int tg_coll_store_symbols_commit(tg_coll_store_t *s, uint64_t id,
                                 bool with_index) {
  if (!tg_coll_id_valid(id) || !live(s, id)) {
    /* Deleted meanwhile (retention): its symbols go with it. A delete
     * after this check removes them itself (the backend's remove). */
    tg_coll_store_symbols_abort(s, id);
    if (tg_coll_id_valid(id)) s->ops->symbols_gone(s, id);
    return -ENOENT;
  }
  return s->ops->symbols_commit(s, id, with_index);
}

int tg_coll_store_has_symbols(tg_coll_store_t *s, uint64_t id) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->ops->has_symbols(s, id);
}

int tg_coll_store_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                               int *ifd) {
  if (!tg_coll_id_valid(id)) return -ENOENT;
  return s->ops->open_symbols(s, id, fd, ifd);
}

