/* Writing a snapshot (store.h): begin, the writer, finish and abort.
 *
 * Every step of the protocol is here, in its order; docs/collector.md
 * says why each one is where it is. In short: the row exists before the
 * id leaves (so an id is never lost), the file is whole and durable under
 * its final name before the row says so (so no live row points at a
 * missing or partial file), and whatever a crash leaves between two steps
 * is something the next open recognises and repairs. Where the bytes go
 * (a tmp file renamed into snapshots/, or a bucket's upload) is the
 * backend's (s->ops): this file never asks which.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "collector/catalog/catalog_check.h"
#include "collector/store/store_internal.h"
#include "common/log.h"
#include "tracegate/error.h"

uint64_t tg_coll_writer_id(const tg_coll_writer_t *w) { return w->id; }
uint64_t tg_coll_writer_bytes(const tg_coll_writer_t *w) { return w->bytes; }

static int fail_row(tg_coll_store_t *s, uint64_t id, const char *why) {
  int err = s->cat->ops->fail(s->cat, id, why, tg__coll_now(s));
  if (err)
    TG_ERROR("store: snapshot %016llx stays pending until the next open: %s",
             (unsigned long long)id, tg_strerror(err));
  return err;
}

int tg_coll_store_begin(tg_coll_store_t *s, const tg_coll_begin_t *b,
                        tg_coll_writer_t **out, uint64_t *id) {
  uint64_t nid;
  int64_t started_ms = tg__coll_now(s);
  /* The row first, committed: from here on the id cannot be lost. */
  int err = s->cat->ops->begin(s->cat, b, started_ms, &nid);
  if (err) return err;
  tg__coll_step(s, TG_COLL_STEP_BEGUN, nid);
  char why[128];
  tg_coll_writer_t *w = calloc(1, sizeof(*w));
  if (!w) {
    fail_row(s, nid, "out of memory");
    return -ENOMEM;
  }
  w->store = s;
  w->id = nid;
  if ((err = s->ops->begin(w, b, started_ms, why, sizeof(why)))) {
    fail_row(s, nid, why);
    free(w);
    return err;
  }
  w->crc = (uint32_t)crc32(0L, Z_NULL, 0);
  s->writers++;
  tg__coll_step(s, TG_COLL_STEP_CREATED, nid);
  *out = w;
  *id = nid;
  return 0;
}

int tg_coll_writer_write(tg_coll_writer_t *w, const void *p, size_t n) {
  if (w->err) return w->err;
  if (n > (uint64_t)INT64_MAX - w->bytes) return w->err = -EFBIG;
  int err = w->store->ops->write(w, p, n);
  if (err) return w->err = err;
  /* crc32() takes a uInt length. */
  const unsigned char *b = p;
  for (size_t left = n; left;) {
    uInt k = left > UINT_MAX ? UINT_MAX : (uInt)left;
    w->crc = (uint32_t)crc32(w->crc, b, k);
    b += k;
    left -= k;
  }
  w->bytes += n;
  w->synced = false;
  tg__coll_step(w->store, TG_COLL_STEP_WROTE, w->id);
  return 0;
}

void tg_coll_writer_set_index(tg_coll_writer_t *w,
                              const tg_coll_index_builder_t *b) {
  w->index = b;
}

int tg_coll_writer_rewrite(tg_coll_writer_t *w, tg_coll_rewrite_fn fn,
                           void *ctx) {
  if (w->err) return w->err;
  return w->store->ops->rewrite(w, fn, ctx);
}

int tg_coll_writer_sync(tg_coll_writer_t *w) {
  if (w->err) return w->err;
  int err = w->store->ops->sync(w);
  if (err) return w->err = err;
  w->synced = true;
  tg__coll_step(w->store, TG_COLL_STEP_SYNCED, w->id);
  return 0;
}

static void release(tg_coll_store_t *s, tg_coll_writer_t *w) {
  s->ops->free(w);
  s->writers--;
  free(w);
}

int tg_coll_store_finish(tg_coll_store_t *s, tg_coll_writer_t *w,
                         const tg_coll_result_t *r) {
  uint64_t id = w->id;
  char why[TG_COLL_ERROR_MAX];
  tg_coll_finish_t f = {.bytes = w->bytes, .crc32 = w->crc};
  if (r) {
    f.packets = r->packets;
    f.hosts = r->hosts;
    f.n_hosts = r->n_hosts;
  }
  int err = r ? tg__coll_check_finish(&f) : -EINVAL;
  if (err) {
    snprintf(why, sizeof(why), "finish: invalid result");
    goto fail;
  }
  if (w->err) {
    err = w->err;
    snprintf(why, sizeof(why), "write: %s", tg_strerror(err));
    goto fail;
  }
  uint32_t n_failed;
  uint64_t loss;
  bool live = tg__coll_finish_state(&f, &n_failed, &loss) != TG_COLL_FAILED;
  /* Synced before published: a name (or an object) a reader can reach
   * never shows bytes that are not durable. */
  if (live && !w->synced && (err = tg_coll_writer_sync(w))) {
    snprintf(why, sizeof(why), "%s: %s", s->ops->sync_name,
             tg_strerror(err));
    goto fail;
  }
  if (live && (err = s->ops->publish(w, why, sizeof(why)))) goto fail;
  if (!live) s->ops->discard(w); /* no host delivered: nothing to keep */
  f.finished_ms = tg__coll_now(s);
  /* A bucket's sidecar before the row: a live row never lacks one, so
   * the catalog can be made again from the bucket (snap_meta.h). */
  if (live && (err = s->ops->put_meta(w, &f))) {
    snprintf(why, sizeof(why), "sidecar: %s", tg_strerror(err));
    goto fail;
  }
  if ((err = s->cat->ops->finish(s->cat, id, &f))) {
    snprintf(why, sizeof(why), "catalog: %s", tg_strerror(err));
    if (live && s->ops->unpublish) s->ops->unpublish(w);
    goto fail;
  }
  tg__coll_step(s, TG_COLL_STEP_FINISHED, id);
  release(s, w);
  return 0;
fail:
  TG_ERROR("store: snapshot %016llx failed: %s", (unsigned long long)id, why);
  s->ops->discard(w);
  fail_row(s, id, why);
  release(s, w);
  return err;
}

int tg_coll_store_abort(tg_coll_store_t *s, tg_coll_writer_t *w,
                        const char *why) {
  uint64_t id = w->id;
  s->ops->discard(w);
  int err = fail_row(s, id, why ? why : "aborted");
  if (!err) tg__coll_step(s, TG_COLL_STEP_ABORTED, id);
  release(s, w);
  return err;
}
