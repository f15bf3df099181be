/* A live snapshot's files for a job off the store's thread (store.h,
 * tg_coll_store_files_*): a directory's opened at new, a bucket's
 * downloaded at get. The one place that asks whether the store is
 * remote, so that the collector's jobs do not. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "collector/store/store_internal.h"

struct tg_coll_files {
  tg_coll_fetch_t *fetch; /* a bucket's downloads; NULL: a directory's */
  unsigned want;
  bool got;
  /* A directory's error opening a part (other than -ENOENT), given by
   * get: the same answer a bucket's download of it would give. */
  int open_err;
  int fd[TG_COLL_FILE_COUNT]; /* -1: none (yet), or taken */
};

/* |rv| of opening or fetching a part into |fd|: none is -1 and no error. */
static int part(int rv, int *fd) {
  if (rv == -ENOENT) *fd = -1;
  return rv == -ENOENT ? 0 : rv;
}

static void open_in_place(tg_coll_store_t *s, uint64_t id,
                          tg_coll_files_t *f) {
  int *fd = f->fd;
  if (f->want & TG_COLL_FILES_INDEX)
    f->open_err = part(tg_coll_store_open_index(s, id, &fd[TG_COLL_FILE_INDEX]),
                       &fd[TG_COLL_FILE_INDEX]);
  if (!f->open_err && (f->want & TG_COLL_FILES_SYMBOLS))
    f->open_err = part(tg_coll_store_open_symbols(s, id,
                                                  &fd[TG_COLL_FILE_SYMBOLS],
                                                  &fd[TG_COLL_FILE_SYMIDX]),
                       &fd[TG_COLL_FILE_SYMBOLS]);
}

int tg_coll_store_files_new(tg_coll_store_t *s, uint64_t id, unsigned want,
                            tg_coll_files_t **out) {
  tg_coll_files_t *f = calloc(1, sizeof(*f));
  if (!f) return -ENOMEM;
  for (int i = 0; i < TG_COLL_FILE_COUNT; i++) f->fd[i] = -1;
  f->want = want;
  int err;
  if (tg_coll_store_remote(s)) {
    /* A fetch does not look at the catalog: the liveness check is here,
     * as tg_coll_store_open_file makes it. */
    err = tg_coll_store_live(s, id);
    if (!err) err = tg_coll_store_fetch_new(s, id, &f->fetch);
  } else {
    err = tg_coll_store_open_file(s, id, &f->fd[TG_COLL_FILE_TRACE]);
    if (!err) open_in_place(s, id, f);
  }
  if (err) {
    tg_coll_files_free(f);
    return err;
  }
  *out = f;
  return 0;
}

/* A bucket's: the trace, then the parts asked for. The symbols' index is
 * read after the symbols (tg_coll_fetch_symbols says why). */
static int fetch_all(tg_coll_files_t *f) {
  int *fd = f->fd;
  int err = tg_coll_fetch_run(f->fetch, &fd[TG_COLL_FILE_TRACE]);
  if (!err && (f->want & TG_COLL_FILES_INDEX))
    err = part(tg_coll_fetch_index(f->fetch, &fd[TG_COLL_FILE_INDEX]),
               &fd[TG_COLL_FILE_INDEX]);
  if (!err && (f->want & TG_COLL_FILES_SYMBOLS))
    err = part(tg_coll_fetch_symbols(f->fetch, &fd[TG_COLL_FILE_SYMBOLS],
                                     &fd[TG_COLL_FILE_SYMIDX]),
               &fd[TG_COLL_FILE_SYMBOLS]);
  return err;
}

int tg_coll_files_get(tg_coll_files_t *f) {
  if (f->got) return -EALREADY;
  f->got = true;
  int err = f->fetch ? fetch_all(f) : f->open_err;
  if (err)
    for (int i = 0; i < TG_COLL_FILE_COUNT; i++)
      if (f->fd[i] >= 0) {
        close(f->fd[i]);
        f->fd[i] = -1;
      }
  return err;
}

int tg_coll_files_take(tg_coll_files_t *f, tg_coll_file_t which) {
  if (!f->got || (unsigned)which >= TG_COLL_FILE_COUNT) return -1;
  int fd = f->fd[which];
  f->fd[which] = -1;
  return fd;
}

void tg_coll_files_free(tg_coll_files_t *f) {
  if (!f) return;
  for (int i = 0; i < TG_COLL_FILE_COUNT; i++)
    if (f->fd[i] >= 0) close(f->fd[i]);
  tg_coll_fetch_free(f->fetch);
  free(f);
}
