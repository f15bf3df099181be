// SPDX-License-Identifier: Apache-2.0
/* The bucket backend's symbols (store.h, tg_coll_store_symbols_*;
 * store_symbols.c says the protocol): written under tmp/, PUT as objects
 * (index first, symbols last, each If-None-Match: *) by
 * tg_coll_symput_run before commit, read back by download. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/store/store_internal.h"
#include "collector/store/store_s3.h"
#include "common/log.h"
#include "tracegate/error.h"

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
  tg__coll_unlink_tmp_symbols(s, id);
  return 0;
}

/* Downloads (blocks: the API uses tg_coll_fetch_symbols on a worker). */
int tg__coll_s3_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                             int *ifd) {
  tg_coll_fetch_t *f = NULL;
  int err = tg__coll_s3_fetch_new(s, id, &f);
  if (!err) err = tg_coll_fetch_symbols(f, fd, ifd);
  tg_coll_fetch_free(f);
  return err;
}
