/* The store's state, shared by store.c (open, reads, delete, retention),
 * store_recover.c (repair at open), store_writer.c (writing snapshots),
 * its two backends, store_dir.c (snapshots/) and the bucket's
 * (store_s3_ops.c, its table over store_s3.c, store_s3_symbols.c and
 * store_rebuild.c),
 * and store_util.c (what they all use). Nothing outside collector/
 * includes it. */
#ifndef TRACEGATE_COLLECTOR_STORE_STORE_INTERNAL_H
#define TRACEGATE_COLLECTOR_STORE_STORE_INTERNAL_H

#include "collector/store/store.h"

typedef struct tg__coll_store_ops tg__coll_store_ops_t;

struct tg_coll_store {
  const tg__coll_store_ops_t *ops; /* the backend: tg__coll_store_dir, _s3 */
  tg_coll_catalog_t *cat;
  bool owns_cat;
  int lock_fd, root_fd, tmp_fd, snap_fd; /* directories by fd: no paths */
  tg_coll_retention_policy_t retention;
  int64_t (*now_ms)(void *ctx);
  void *clock_ctx;
  tg_coll_step_fn on_step;
  void *step_ctx;
  unsigned writers; /* open writers: close asserts there are none */
  struct tg__coll_s3 *s3; /* the bucket backend's state; NULL otherwise */
};

/* A snapshot being written (store.h). The protocol's order is
 * store_writer.c's; the backend's part is in |be|, which only the
 * backend's functions touch. */
struct tg_coll_writer {
  tg_coll_store_t *store;
  uint64_t id;
  uint64_t bytes;
  uint32_t crc; /* zlib crc32 of the bytes so far */
  int err;      /* the first write or sync failure; sticky */
  bool synced;  /* synced (fsync, or the upload sealed) since the last write */
  const tg_coll_index_builder_t *index; /* borrowed; NULL: none */
  union {
    int fd;                         /* the directory's tmp file, or -1 */
    struct tg__coll_s3_writer *up;  /* the bucket's upload */
  } be;
};

/* Where the store keeps its snapshots: the one interface store.c,
 * store_writer.c and store_symbols.c call without asking which backend is
 * behind it, as the catalog's callers do with tg_coll_catalog_ops_t. An
 * operation a backend cannot do returns -EOPNOTSUPP; a step a backend has
 * no need of (a directory has no sidecar to refresh) does nothing. Every
 * function runs on the store's thread unless said otherwise. */
struct tg__coll_store_ops {
  tg_coll_store_kind_t kind;
  /* store.h's tg_coll_store_symbols_shareable. (Whether the store is
   * remote follows from |fetch_new|, whether it presigns from |presign|.) */
  bool symbols_shareable;
  /* What its writers' sync is, for a failed snapshot's why ("fsync"). */
  const char *sync_name;
  /* Frees the backend's state (store close). */
  void (*close)(tg_coll_store_t *s);
  /* Recovery's backend half, after the catalog's interrupt and tmp/'s
   * sweep: orphans removed, live rows checked against their bytes. */
  int (*recover)(tg_coll_store_t *s, tg_coll_recovery_t *rec);
  /* A read-only fd of live |id|'s trace (or its host index). */
  int (*open_object)(tg_coll_store_t *s, uint64_t id, bool index, int *fd);
  /* A GET URL of |id|'s trace valid |expires_s| from |now_s|; NULL for
   * a backend whose objects have no URL of their own. */
  int (*presign)(tg_coll_store_t *s, uint64_t id, int64_t now_s,
                 uint32_t expires_s, char *url, size_t cap);
  /* |id|'s row changed (pin, problems): what keeps a copy of it follows. */
  void (*refresh_meta)(tg_coll_store_t *s, uint64_t id);
  /* |id|'s row is gone: its trace, index and symbols go (failures logged:
   * the next open removes what is left). */
  void (*remove)(tg_coll_store_t *s, uint64_t id);
  /* store.h's fetch and symput: made on the store's thread. fetch_new
   * NULL: the backend's files are read in place (tg_coll_store_open_file),
   * which is what tg_coll_store_remote() says. */
  int (*fetch_new)(tg_coll_store_t *s, uint64_t id, tg_coll_fetch_t **out);
  int (*symput_new)(tg_coll_store_t *s, uint64_t id, tg_coll_symput_t **out);
  /* Live |id|'s symbols, written under tmp/, stored for good; the
   * symbols of |id| gone (it is no longer live); whether it has them;
   * opened read-only (store.h says each one's answers). */
  int (*symbols_commit)(tg_coll_store_t *s, uint64_t id, bool with_index);
  void (*symbols_gone)(tg_coll_store_t *s, uint64_t id);
  int (*has_symbols)(tg_coll_store_t *s, uint64_t id);
  int (*open_symbols)(tg_coll_store_t *s, uint64_t id, int *fd, int *ifd);
  /* The catalog made again from what the backend holds (store.h). */
  int (*rebuild)(tg_coll_store_t *s, tg_coll_rebuild_fn fn, void *ctx,
                 tg_coll_rebuild_t *out);
  /* How the backend is reached, for the page (store.h). */
  void (*describe)(tg_coll_store_t *s, tg_coll_store_desc_t *out);

  /* The writer's part. begin: where the bytes go (|why| says what failed,
   * |cap| bytes). write and sync: store.h's, sync maybe on another
   * thread. rewrite: store.h's. publish: the bytes, synced first by
   * store_writer.c (the protocol's order, whatever the backend), and the host
   * index) under their final name, durable, before the row says live
   * (|why| as begin's). put_meta: what the backend keeps beside the row,
   * before the row is committed. unpublish: publish undone (the row could
   * not be committed), before discard; NULL for a backend whose discard
   * undoes publish too. discard: what the writer left, removed. free: the
   * writer's part released (the writer itself is store_writer.c's). */
  int (*begin)(tg_coll_writer_t *w, const tg_coll_begin_t *b,
               int64_t started_ms, char *why, size_t cap);
  int (*write)(tg_coll_writer_t *w, const void *p, size_t n);
  int (*rewrite)(tg_coll_writer_t *w, tg_coll_rewrite_fn fn, void *ctx);
  int (*sync)(tg_coll_writer_t *w);
  int (*publish)(tg_coll_writer_t *w, char *why, size_t cap);
  int (*put_meta)(tg_coll_writer_t *w, const tg_coll_finish_t *f);
  void (*unpublish)(tg_coll_writer_t *w);
  void (*discard)(tg_coll_writer_t *w);
  void (*free)(tg_coll_writer_t *w);
};

/* The two backends (store_dir.c, store_s3_ops.c). */
extern const tg__coll_store_ops_t tg__coll_store_dir;
extern const tg__coll_store_ops_t tg__coll_store_s3;

/* --- store_util.c: below the other store files ----------------------- */

int64_t tg__coll_now(tg_coll_store_t *s);
void tg__coll_step(tg_coll_store_t *s, tg_coll_step_t step, uint64_t id);
/* Whether |id|'s row is in one of |states| (a catalog error says yes:
 * nothing is removed on a guess). */
bool tg__coll_row_keeps(tg_coll_store_t *s, uint64_t id, unsigned states);
/* Calls |fn| on every row in |states|, newest first, a page at a time. */
int tg__coll_each_row(tg_coll_store_t *s, unsigned states,
                      int (*fn)(tg_coll_store_t *s, const tg_coll_snapshot_t *r,
                                tg_coll_recovery_t *rec),
                      tg_coll_recovery_t *rec);

/* Unlinks |name| in snapshots/; a failure other than ENOENT is logged
 * (recovery removes what is left at the next open). */
void tg__coll_unlink_name(tg_coll_store_t *s, const char *name);
/* Unlinks |id|'s host index from snapshots/, if there is one (a failure
 * is logged: recovery removes it at the next open). */
void tg__coll_unlink_index(tg_coll_store_t *s, uint64_t id);
/* The same for its symbols and their index (store_symbols.c). */
void tg__coll_unlink_symbols(tg_coll_store_t *s, uint64_t id);
/* Removes |id|'s symbols being written from tmp/ (ENOENT is fine). */
void tg__coll_unlink_tmp_symbols(tg_coll_store_t *s, uint64_t id);

/* --- store_recover.c ------------------------------------------------- */

/* Repairs the store after whatever ended the last process (store.h). */
int tg__coll_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec);
/* The directory backend's half: snapshots/ swept, live rows checked. */
int tg__coll_dir_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec);

/* --- store.c ---------------------------------------------------------- */

/* Deletes |id|'s row (not if pinned, when |unless_pinned|), then its file
 * (if it has one): delete and retention. */
int tg__coll_remove(tg_coll_store_t *s, uint64_t id, bool unless_pinned);

/* A snapshot's file written anew (tg_coll_writer_rewrite) is in tmp/
 * under its file's tmp name and this, until it replaces it; recovery
 * keeps it as it keeps that file. */
#define TG__COLL_REWRITE_SUFFIX ".rewrite"

#endif /* TRACEGATE_COLLECTOR_STORE_STORE_INTERNAL_H */
