/* The store's snapshots in an S3 bucket instead of snapshots/ (store.h,
 * tg_coll_store_config_t.s3): the store's files become objects, its
 * protocol keeps its order. Nothing outside collector/store/ includes
 * this but the unit test of its listing's sort.
 *
 *   <prefix>snapshots/<id>.pftrace   a finished snapshot (live row)
 *   <prefix>snapshots/<id>.index     its host index, if any
 *   <prefix>snapshots/<id>.meta      its sidecar: the row (snap_meta.h)
 *   <prefix>snapshots/<id>.symbols   its symbols, if symbolized (store.h)
 *   <prefix>snapshots/<id>.symidx    their host index, if any
 *
 * A snapshot streams into a multipart upload of that key while it is
 * written (parts of part_size bytes, uploaded in parallel by queue_parts
 * threads of the writer's own, at most queue_parts parts waiting or in
 * flight: memory is bounded by (queue_parts + 1) * part_size per
 * snapshot, never the whole snapshot).
 *
 *   begin:   PENDING row committed -> id returned; the writer's first
 *            uploader thread initiates the upload (a failure there fails
 *            the snapshot at sync, never holds begin)
 *   sync:    the last part uploaded -> the upload completed (the object
 *            exists, no row says so) -> index PUT (If-None-Match: *) ->
 *            HEAD: the object's size is the bytes written
 *   finish:  [sync] -> sidecar PUT (If-None-Match: *) -> row
 *            COMPLETE/PARTIAL committed
 *   abort, or finish failing: the upload aborted, or the objects deleted
 *   delete:  row deleted (committed) -> objects deleted
 *   open:    PENDING rows nobody writes -> FAILED; uploads under the
 *            prefix whose row is not PENDING aborted; objects whose row is
 *            neither live nor PENDING deleted; live rows whose object is
 *            missing or of the wrong size -> FAILED
 * So an object a reader can reach (through a live row) is whole, and
 * whatever a kill leaves (an upload, an object without its row) is
 * removed by the next open of a collector on the same catalog.
 */
#ifndef TRACEGATE_COLLECTOR_STORE_STORE_S3_H
#define TRACEGATE_COLLECTOR_STORE_STORE_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/store/snap_meta.h"
#include "collector/store/store.h"

typedef struct tg__coll_s3_writer tg__coll_s3_writer_t;

/* A snapshot's objects: its trace, its host index, its sidecar, and the
 * symbols the collector's symbolize stores after (store_symbols.c). */
typedef enum tg__coll_obj {
  TG__COLL_OBJ_TRACE = 0,
  TG__COLL_OBJ_INDEX = 1,
  TG__COLL_OBJ_META = 2,
  TG__COLL_OBJ_SYMBOLS = 3,
  TG__COLL_OBJ_SYMIDX = 4,
} tg__coll_obj_t;

/* Connects the store to its bucket (the store's own client, used on the
 * store's thread). 0 or -errno. */
int tg__coll_s3_open(tg_coll_store_t *s, const tg_coll_s3_config_t *cfg);
void tg__coll_s3_close(tg_coll_store_t *s);

/* Initiates snapshot |id|'s upload; its uploader thread started. |b|
 * (copied) and |started_ms| are kept for the sidecar. */
int tg__coll_s3_begin(tg_coll_store_t *s, uint64_t id,
                      const tg_coll_begin_t *b, int64_t started_ms,
                      tg__coll_s3_writer_t **out);
/* Queues |n| bytes; blocks while queue_parts parts wait for the bucket.
 * The first upload failure is returned by this and every later call. */
int tg__coll_s3_write(tg__coll_s3_writer_t *w, const void *p, size_t n);
/* The sync step above; once it succeeded, further writes are -EINVAL.
 * |index| may be NULL; |bytes| is what the writer counted. */
int tg__coll_s3_seal(tg__coll_s3_writer_t *w,
                     const tg_coll_index_builder_t *index, uint64_t bytes);
/* The sidecar (snap_meta.h) of a sealed snapshot, PUT with
 * If-None-Match: * before its row is committed: what begin recorded, |f|
 * (borrowed for the call), and the writer's etag and index. 0, -EEXIST
 * (a sidecar is there), the client's error. */
int tg__coll_s3_put_meta(tg__coll_s3_writer_t *w, const tg_coll_finish_t *f);
/* Writes live snapshot |id|'s sidecar again from its row (after a pin or
 * a host's problems changed it): unconditional, last writer wins; a
 * failure is logged, the row stands. */
void tg__coll_s3_refresh_meta(tg_coll_store_t *s, uint64_t id);
/* Removes what the writer put in the bucket (upload or objects). */
void tg__coll_s3_discard(tg__coll_s3_writer_t *w);
/* Frees the writer (its thread joined). */
void tg__coll_s3_free(tg__coll_s3_writer_t *w);

/* The rebuild's and the symbols' view of the bucket (store_rebuild.c,
 * store_symbols.c): the store's client, prefix ("" or ending in '/'),
 * keys and their parse (0 and *id, *kind; -1: not a snapshot's key). */
tg_s3_client_t *tg__coll_s3_client(tg_coll_store_t *s);
const char *tg__coll_s3_prefix(tg_coll_store_t *s);
/* "s3://BUCKET/PREFIX" into |out| (|cap| bytes), for the page. */
void tg__coll_s3_url(tg_coll_store_t *s, char *out, size_t cap);
void tg__coll_s3_key(tg_coll_store_t *s, uint64_t id, tg__coll_obj_t kind,
                     char out[TG_S3_KEY_MAX + 1]);
int tg__coll_s3_parse_key(tg_coll_store_t *s, const char *key, uint64_t *id,
                          tg__coll_obj_t *kind);

/* Recovery's bucket half (after the catalog's interrupt). */
int tg__coll_s3_recover(tg_coll_store_t *s, tg_coll_recovery_t *rec);
/* Deletes |id|'s objects (failures logged: the next open removes them). */
void tg__coll_s3_remove(tg_coll_store_t *s, uint64_t id);
/* A presigned GET URL of |id|'s trace object (tg_s3_presign_get). */
int tg__coll_s3_presign(tg_coll_store_t *s, uint64_t id, int64_t now_s,
                        uint32_t expires_s, char *url, size_t cap);

/* store.h's fetch, and the bucket's half of the symbols
 * (store_s3_symbols.c) and of the rebuild (store_rebuild.c), behind the
 * store's ops (store_internal.h). */
int tg__coll_s3_fetch_new(tg_coll_store_t *s, uint64_t id,
                          tg_coll_fetch_t **out);
int tg__coll_s3_symput_new(tg_coll_store_t *s, uint64_t id,
                           tg_coll_symput_t **out);
int tg__coll_s3_symbols_commit(tg_coll_store_t *s, uint64_t id,
                               bool with_index);
void tg__coll_s3_symbols_gone(tg_coll_store_t *s, uint64_t id);
int tg__coll_s3_has_symbols(tg_coll_store_t *s, uint64_t id);
int tg__coll_s3_open_symbols(tg_coll_store_t *s, uint64_t id, int *fd,
                             int *ifd);
int tg__coll_s3_rebuild(tg_coll_store_t *s, tg_coll_rebuild_fn fn, void *ctx,
                        tg_coll_rebuild_t *out);

/* One id's objects as a bucket listing showed them (store_rebuild.c). */
typedef struct tg__coll_listed {
  uint64_t id;
  bool trace, meta;
  uint64_t meta_size; /* the sidecar's listed size, when |meta| */
} tg__coll_listed_t;
/* Sorts |e| (|n| entries, the caller's) by id and folds entries of one id
 * into one (a listing need not be in key order: S3 promises it, not every
 * store keeps the promise); returns how many remain, in place, and
 * *snapshots, those with a trace or a sidecar. Pure. */
size_t tg__coll_listed_sort(tg__coll_listed_t *e, size_t n,
                            size_t *snapshots);

/* A client of the store's configuration, the caller's (to use on one
 * thread of its own; tg_s3_client_free). */
int tg__coll_s3_client_new(tg_coll_store_t *s, tg_s3_client_t **out);

/* A read-only fd holding a copy of |id|'s trace (or index): an unnamed
 * file under tmp/, gone when closed. -ENOENT when there is none. */
int tg__coll_s3_open_object(tg_coll_store_t *s, uint64_t id, bool index,
                            int *fd);

#endif /* TRACEGATE_COLLECTOR_STORE_STORE_S3_H */
