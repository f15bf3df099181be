/* Symbols beside a stored snapshot (store.h, tg_coll_store_symbols_*):
 * "<id>.symbols" and "<id>.symidx" in snapshots/, written under tmp/ and
 * renamed in once synced; or, for a bucket's store, written under tmp/
 * and PUT as objects (index first, symbols last, each If-None-Match: *)
 * by tg_coll_symput_run (below) before commit. The trace, its index,
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/snapshot_id.h"
#include "collector/store_internal.h"
#include "collector/store_s3.h"
#include "common/log.h"
#include "tracegate/error.h"

/* --- a bucket's store -------------------------------------------------- */

struct tg_coll_symput {
  tg_s3_client_t *c;
  uint64_t id;
  char key[TG_S3_KEY_MAX + 1], ikey[TG_S3_KEY_MAX + 1];
};

int tg__coll_s3_symput_new(tg_coll_store_t *s, uint64_t id,
                           tg_coll_symput_t **out) {
  tg_coll_symput_t *p = calloc(1, sizeof *p);
  if (!p) return -ENOMEM;
  int err = tg__coll_s3_client_new(s, &p->c);
  if (err) {
    tg_coll_symput_free(p);
    return err;
  }
  p->id = id;
  tg__coll_s3_key(s, id, TG__COLL_OBJ_SYMBOLS, p->key);
  tg__coll_s3_key(s, id, TG__COLL_OBJ_SYMIDX, p->ikey);
  *out = p;
  return 0;
}

/* PUTs the whole of |fd| at |key| (If-None-Match: *), mapped, not read
 * into memory. */
static int put_file(tg_s3_client_t *c, const char *key, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return -errno;
  if (st.st_size == 0) return tg_s3_put(c, key, NULL, 0, true, NULL);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) return -errno;
  int err = tg_s3_put(c, key, m, (size_t)st.st_size, true, NULL);
  munmap(m, (size_t)st.st_size);
  return err;
}

int tg_coll_symput_run(tg_coll_symput_t *p, int sfd, int sifd,
                       bool with_index) {
  /* Symbols already there were stored whole by an earlier attempt (or by
   * another collector of the catalog): they stand. */
  int err = tg_s3_head(p->c, p->key, NULL, NULL);
  if (err == 0) return -EEXIST;
  if (err != -ENOENT) return err;
  /* An index without its symbols is what an attempt killed between its
   * two PUTs left: nobody reads it (the symbols are the sign). */
  if ((err = tg_s3_delete(p->c, p->ikey))) return err;
  if (with_index && (err = put_file(p->c, p->ikey, sifd))) return err;
  err = put_file(p->c, p->key, sfd);
  if (err && with_index) {
    int e = tg_s3_delete(p->c, p->ikey);
    if (e)
      TG_WARN("store: %s: delete: %s (removed with its snapshot)", p->ikey,
              tg_strerror(e));
  }
  return err;
}

void tg_coll_symput_free(tg_coll_symput_t *p) {
  if (!p) return;
  tg_s3_client_free(p->c);
  free(p);
}

void tg__coll_s3_symbols_gone(tg_coll_store_t *s, uint64_t id) {
  char key[TG_S3_KEY_MAX + 1];
  static const tg__coll_obj_t kinds[] = {TG__COLL_OBJ_SYMBOLS,
                                         TG__COLL_OBJ_SYMIDX};
  for (size_t i = 0; i < 2; i++) {
    tg__coll_s3_key(s, id, kinds[i], key);
    int err = tg_s3_delete(tg__coll_s3_client(s), key);
    if (err)
      TG_WARN("store: %s: delete: %s (removed with its snapshot)", key,
              tg_strerror(err));
  }
}

int tg__coll_s3_has_symbols(tg_coll_store_t *s, uint64_t id) {
  char key[TG_S3_KEY_MAX + 1];
  tg__coll_s3_key(s, id, TG__COLL_OBJ_SYMBOLS, key);
  return tg_s3_head(tg__coll_s3_client(s), key, NULL, NULL);
}

/* The objects are in (tg_coll_symput_run): tmp/ is done with. */
int tg__coll_s3_symbols_commit(tg_coll_store_t *s, uint64_t id,
                               bool with_index) {
  (void)with_index;
  tg_coll_store_symbols_abort(s, id);
  return 0;
}

/* Downloads (blocks: the API uses tg_coll_fetch_symbols on a worker). */
int tg__coll_s3_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                             int *ifd) {
  tg_coll_fetch_t *f = NULL;
  int err = tg_coll_store_fetch_new(s, id, false, &f);
  if (!err) err = tg_coll_fetch_symbols(f, fd, ifd);
  tg_coll_fetch_free(f);
  return err;
}

/* --- either store --------------------------------------------------------- */

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
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
  tg_coll_id_symidx_name(id, 1, name);
  unlinkat(s->tmp_fd, name, 0);
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

/* --- a directory store ---------------------------------------------------- */

/* The index goes in first: a reader takes the symbols file as the sign
 * that they are there, and checks the index against its size. */
int tg__coll_dir_symbols_commit(tg_coll_store_t *s, uint64_t id,
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
    tg_coll_store_symbols_abort(s, id);
    tg__coll_unlink_symbols(s, id);
  }
  return err;
}

int tg__coll_dir_has_symbols(tg_coll_store_t *s, uint64_t id) {
  char name[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_symbols_name(id, 0, name);
  return faccessat(s->snap_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? 0
                                                                     : -errno;
}

int tg__coll_dir_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
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
