// SPDX-License-Identifier: Apache-2.0
/* The bucket backend's table (store_internal.h, tg__coll_store_ops_t):
 * the writer's steps and the store's calls mapped onto store_s3.c (the
 * objects), store_s3_symbols.c and store_rebuild.c. Above them all, so
 * that none of them calls back into the store. */
#include <errno.h>
#include <stdio.h>

#include "collector/store/store_internal.h"
#include "collector/store/store_s3.h"
#include "common/log.h"
#include "tracegate/error.h"

static int s3_begin(tg_coll_writer_t *w, const tg_coll_begin_t *b,
                    int64_t started_ms, char *why, size_t cap) {
  int err = tg__coll_s3_begin(w->store, w->id, b, started_ms, &w->be.up);
  if (!err) return 0;
  snprintf(why, cap, "cannot start its upload: %s", tg_strerror(err));
  TG_ERROR("store: snapshot %016llx: %s", (unsigned long long)w->id, why);
  return err;
}

static int s3_write(tg_coll_writer_t *w, const void *p, size_t n) {
  return tg__coll_s3_write(w->be.up, p, n);
}

static int s3_rewrite(tg_coll_writer_t *w, tg_coll_rewrite_fn fn, void *ctx) {
  (void)w, (void)fn, (void)ctx;
  return -ENOTSUP; /* uploaded as they came: no file to read again */
}

static int s3_sync(tg_coll_writer_t *w) {
  return tg__coll_s3_seal(w->be.up, w->index, w->bytes);
}

/* Nothing to move: the sync before it (store_writer.c) sealed the upload,
 * so the object (and its index) exist, whole, before the row says so. */
static int s3_publish(tg_coll_writer_t *w, char *why, size_t cap) {
  (void)why;
  (void)cap;
  tg__coll_step(w->store, TG_COLL_STEP_RENAMED, w->id);
  tg__coll_step(w->store, TG_COLL_STEP_DIR_SYNCED, w->id);
  return 0;
}

static int s3_put_meta(tg_coll_writer_t *w, const tg_coll_finish_t *f) {
  return tg__coll_s3_put_meta(w->be.up, f);
}

static void s3_discard(tg_coll_writer_t *w) { tg__coll_s3_discard(w->be.up); }

static void s3_free(tg_coll_writer_t *w) { tg__coll_s3_free(w->be.up); }

static void s3_describe(tg_coll_store_t *s, tg_coll_store_desc_t *out) {
  tg__coll_s3_url(s, out->url, sizeof out->url);
  out->has_stats = true;
  tg_s3_stats_get(tg_s3_client_monitor(tg__coll_s3_client(s)), &out->stats);
}

const tg__coll_store_ops_t tg__coll_store_s3 = {
    .kind = TG_COLL_STORE_BUCKET,
    .sync_name = "upload",
    .symbols_shareable = true,
    .close = tg__coll_s3_close,
    .recover = tg__coll_s3_recover,
    .open_object = tg__coll_s3_open_object,
    .presign = tg__coll_s3_presign,
    .refresh_meta = tg__coll_s3_refresh_meta,
    .remove = tg__coll_s3_remove,
    .fetch_new = tg__coll_s3_fetch_new,
    .symput_new = tg__coll_s3_symput_new,
    .symbols_commit = tg__coll_s3_symbols_commit,
    .symbols_gone = tg__coll_s3_symbols_gone,
    .has_symbols = tg__coll_s3_has_symbols,
    .open_symbols = tg__coll_s3_open_symbols,
    .rebuild = tg__coll_s3_rebuild,
    .describe = s3_describe,
    .begin = s3_begin,
    .write = s3_write,
    .rewrite = s3_rewrite,
    .sync = s3_sync,
    .publish = s3_publish,
    .put_meta = s3_put_meta,
    .unpublish = NULL, /* s3_discard removes the published objects too */
    .discard = s3_discard,
    .free = s3_free,
};
