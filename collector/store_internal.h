/* The store's state, shared by store.c (open, reads, delete, retention),
 * store_recover.c (repair at open), store_writer.c (writing snapshots),
 * store_s3.c (snapshots in a bucket) and store_util.c (what they all
 * use). Nothing outside collector/ includes it. */
#ifndef TRACEGATE_COLLECTOR_STORE_INTERNAL_H
#define TRACEGATE_COLLECTOR_STORE_INTERNAL_H

#include "collector/store.h"

struct tg_coll_store {
  tg_coll_catalog_t *cat;
  bool owns_cat;
  int lock_fd, root_fd, tmp_fd, snap_fd; /* directories by fd: no paths */
  tg_coll_retention_policy_t retention;
  int64_t (*now_ms)(void *ctx);
  void *clock_ctx;
  tg_coll_step_fn on_step;
  void *step_ctx;
  unsigned writers; /* open writers: close asserts there are none */
  struct tg__coll_s3 *s3; /* NULL: snapshots/ holds the snapshots */
};

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

/* --- store_recover.c ------------------------------------------------- */

/* Repairs the store after whatever ended the last process (store.h). */
int tg__coll_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec);

/* --- store.c ---------------------------------------------------------- */

/* Deletes |id|'s row (not if pinned, when |unless_pinned|), then its file
 * (if it has one): delete and retention. */
int tg__coll_remove(tg_coll_store_t *s, uint64_t id, bool unless_pinned);

/* A snapshot's file written anew (tg_coll_writer_rewrite) is in tmp/
 * under its file's tmp name and this, until it replaces it; recovery
 * keeps it as it keeps that file. */
#define TG__COLL_REWRITE_SUFFIX ".rewrite"

#endif /* TRACEGATE_COLLECTOR_STORE_INTERNAL_H */
