// SPDX-License-Identifier: Apache-2.0
/* A lost catalog made again from a bucket store's sidecars (store.h,
 * tg_coll_store_rebuild). The bucket is listed once; then, in id order,
 * each snapshot's sidecar is read and checked (snap_meta.h: it is
 * untrusted), its trace is compared with what the sidecar says, and its
 * row is inserted at its id. Nothing in the bucket is written or deleted
 * here: what the catalog then says is the next open's to act on.
 *
 * A key's name is no proof: anyone who may write the bucket can put
 * "snapshots/7fffffffffffff00.pftrace" there. Only an id with a row, or
 * whose sidecar parsed and named that id, moves the catalog's ids; any
 * other is counted as unreserved and said, never taken as the id space's
 * new floor. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "collector/store/snap_meta.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store_internal.h"
#include "collector/store/store_s3.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

const char *tg_coll_rebuilt_name(tg_coll_rebuilt_t r) {
  switch (r) {
    case TG_COLL_REBUILT_INSERTED:
      return "inserted";
    case TG_COLL_REBUILT_FAILED:
      return "failed";
    case TG_COLL_REBUILT_PRESENT:
      return "present";
    case TG_COLL_REBUILT_REFUSED:
      return "refused";
    case TG_COLL_REBUILT_NO_SIDECAR:
      return "no_sidecar";
  }
  return "?";
}

typedef tg__coll_listed_t entry_t;

typedef struct listing {
  tg_coll_store_t *s;
  entry_t *e;
  size_t n, cap;
  size_t snapshots; /* entries with a trace or a sidecar, once sorted */
} listing_t;

/* Keys come in key order from a store that lists as S3 says, so an id's
 * objects are neighbours and share an entry; a listing out of order
 * gives an id a second entry, which tg__coll_listed_sort() folds into the
 * first. Every id
 * gets an entry; one with only an index or symbols (they need no row
 * field: the trace's index is named by the sidecar, the symbols are found
 * by their key) is no snapshot, but its id is counted as unreserved. */
static int on_object(void *ctx, const tg_s3_object_t *o) {
  listing_t *l = ctx;
  uint64_t id;
  tg__coll_obj_t kind;
  if (tg__coll_s3_parse_key(l->s, o->key, &id, &kind) != 0) return 0;
  if (!l->n || l->e[l->n - 1].id != id) {
    if (l->n == l->cap) {
      size_t cap = l->cap ? l->cap * 2 : 64;
      entry_t *e = realloc(l->e, cap * sizeof(*e));
      if (!e) return -ENOMEM;
      l->e = e;
      l->cap = cap;
    }
    l->e[l->n++] = (entry_t){.id = id};
  }
  entry_t *e = &l->e[l->n - 1];
  if (kind == TG__COLL_OBJ_TRACE) e->trace = true;
  if (kind == TG__COLL_OBJ_META) {
    e->meta = true;
    e->meta_size = o->size;
  }
  return 0;
}

/* An id in the bucket that moves nothing: counted, the highest kept. */
static void unreserved(tg_coll_rebuild_t *out, uint64_t id) {
  out->unreserved++;
  if (id > out->max_unreserved_id) out->max_unreserved_id = id;
}

static int cmp_id(const void *a, const void *b) {
  uint64_t x = ((const entry_t *)a)->id, y = ((const entry_t *)b)->id;
  return x < y ? -1 : x > y;
}

size_t tg__coll_listed_sort(tg__coll_listed_t *e, size_t n,
                            size_t *snapshots) {
  if (n) qsort(e, n, sizeof(*e), cmp_id);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (w && e[w - 1].id == e[i].id) {
      entry_t *d = &e[w - 1];
      d->trace |= e[i].trace;
      if (e[i].meta) {
        d->meta = true;
        d->meta_size = e[i].meta_size;
      }
    } else {
      e[w++] = e[i];
    }
  }
  *snapshots = 0;
  for (size_t i = 0; i < w; i++)
    if (e[i].trace || e[i].meta) (*snapshots)++;
  return w;
}

typedef struct sink {
  char *p;
  size_t n, cap;
} sink_t;

/* The sidecar's bytes, refused past the cap the listing promised. */
static int to_sink(void *ctx, const void *p, size_t n) {
  sink_t *k = ctx;
  if (n > k->cap - k->n) return -E2BIG;
  memcpy(k->p + k->n, p, n);
  k->n += n;
  return 0;
}

typedef struct crc_state {
  uint32_t crc;
  uint64_t n;
} crc_state_t;

static int to_crc(void *ctx, const void *p, size_t n) {
  crc_state_t *c = ctx;
  const unsigned char *b = p;
  c->n += n;
  for (size_t left = n; left;) {
    uInt k = left > UINT_MAX ? UINT_MAX : (uInt)left;
    c->crc = (uint32_t)crc32(c->crc, b, k);
    b += k;
    left -= k;
  }
  return 0;
}

/* Whether the trace object is the one |m| describes: "" when it is, else
 * why not into |why|. A bucket error other than a missing object is
 * returned (the rebuild stops: the answer is unknown, not "no"). */
static int check_trace(tg_coll_store_t *s, const tg_coll_meta_t *m,
                       tg_coll_rebuild_t *out, char *why, size_t cap) {
  char key[TG_S3_KEY_MAX + 1], etag[TG_S3_ETAG_MAX] = "";
  tg__coll_s3_key(s, m->id, TG__COLL_OBJ_TRACE, key);
  uint64_t size = 0;
  int err = tg_s3_head(tg__coll_s3_client(s), key, &size, etag);
  why[0] = '\0';
  if (err == -ENOENT) {
    snprintf(why, cap, "rebuild: the trace object is missing");
    return 0;
  }
  if (err) return err;
  if (size != m->bytes) {
    snprintf(why, cap, "rebuild: the trace object holds %llu bytes, its"
             " sidecar says %llu", (unsigned long long)size,
             (unsigned long long)m->bytes);
    return 0;
  }
  if (m->etag[0] && strcmp(etag, m->etag) != 0) {
    snprintf(why, cap, "rebuild: the trace object's ETag is not its"
             " sidecar's (it was written again)");
    return 0;
  }
  crc_state_t c = {.crc = (uint32_t)crc32(0L, Z_NULL, 0)};
  err = tg_s3_get(tg__coll_s3_client(s), key, 0, 0, to_crc, &c);
  out->bytes_read += c.n;
  if (err == -ENOENT) {
    snprintf(why, cap, "rebuild: the trace object is missing");
    return 0;
  }
  if (err) return err;
  if (c.n != m->bytes || c.crc != m->crc32)
    snprintf(why, cap, "rebuild: the trace object's crc32 is %08x, its"
             " sidecar says %08x", (unsigned)c.crc, (unsigned)m->crc32);
  return 0;
}

/* One snapshot with a sidecar: its row inserted (live or FAILED), or the
 * sidecar refused. */
static int rebuild_one(tg_coll_store_t *s, const entry_t *e,
                       tg_coll_rebuild_t *out, tg_coll_rebuilt_t *what,
                       char *why, size_t cap) {
  if (e->meta_size > TG_COLL_META_MAX) {
    snprintf(why, cap, "sidecar: %llu bytes, more than %u",
             (unsigned long long)e->meta_size, TG_COLL_META_MAX);
    *what = TG_COLL_REBUILT_REFUSED;
    return 0;
  }
  char key[TG_S3_KEY_MAX + 1];
  tg__coll_s3_key(s, e->id, TG__COLL_OBJ_META, key);
  /* The listing's size: an object grown since is refused. */
  sink_t k = {.cap = (size_t)e->meta_size};
  if (!(k.p = malloc(k.cap + 1))) return -ENOMEM;
  int err = tg_s3_get(tg__coll_s3_client(s), key, 0, 0, to_sink, &k);
  if (err == -ENOENT || err == -E2BIG) {
    snprintf(why, cap, "sidecar: %s",
             err == -ENOENT ? "gone since the listing"
                            : "larger than the listing said");
    *what = TG_COLL_REBUILT_REFUSED;
    free(k.p);
    return 0;
  }
  if (err) {
    free(k.p);
    return err;
  }
  tg_coll_meta_t m;
  char perr[256];
  err = tg_coll_meta_parse(k.p, k.n, &m, perr, sizeof perr);
  free(k.p);
  if (err == -ENOMEM) return err;
  if (err) {
    snprintf(why, cap, "sidecar: %s", perr);
    *what = TG_COLL_REBUILT_REFUSED;
    return 0;
  }
  if (m.id != e->id) {
    snprintf(why, cap, "sidecar: its id is not its key's");
    *what = TG_COLL_REBUILT_REFUSED;
    tg_coll_meta_free(&m);
    return 0;
  }
  char failure[TG_COLL_ERROR_MAX + 1] = "";
  if ((err = check_trace(s, &m, out, failure, sizeof failure))) {
    tg_coll_meta_free(&m);
    return err;
  }
  tg_coll_begin_t b = {m.trigger, m.reason, m.origin};
  tg_coll_finish_t f = {.bytes = m.bytes,
                        .crc32 = m.crc32,
                        .packets = m.packets,
                        .hosts = m.hosts,
                        .n_hosts = m.n_hosts,
                        .finished_ms = m.finished_ms};
  tg_coll_insert_t ins = {.id = m.id,
                          .begin = &b,
                          .started_ms = m.started_ms,
                          .finish = &f,
                          .pinned = m.pinned,
                          .failure = failure[0] ? failure : NULL};
  err = s->cat->ops->insert_at(s->cat, &ins);
  tg_coll_meta_free(&m);
  if (err == -EEXIST) {
    /* Inserted meanwhile (another rebuild): its row stands. */
    *what = TG_COLL_REBUILT_PRESENT;
    return 0;
  }
  if (err == -EINVAL) {
    snprintf(why, cap, "sidecar: refused by the catalog (a host twice?)");
    *what = TG_COLL_REBUILT_REFUSED;
    return 0;
  }
  if (err) return err;
  snprintf(why, cap, "%s", failure);
  *what = failure[0] ? TG_COLL_REBUILT_FAILED : TG_COLL_REBUILT_INSERTED;
  return 0;
}

int tg__coll_s3_rebuild(tg_coll_store_t *s, tg_coll_rebuild_fn fn, void *ctx,
                        tg_coll_rebuild_t *out) {
  memset(out, 0, sizeof(*out));
  char prefix[TG_S3_KEY_MAX + 1];
  snprintf(prefix, sizeof prefix, "%ssnapshots/", tg__coll_s3_prefix(s));
  listing_t l = {.s = s};
  int err = tg_s3_list(tg__coll_s3_client(s), prefix, on_object, &l);
  if (err) {
    free(l.e);
    return err;
  }
  /* In key order already from a store that lists as S3 says; sorted all
   * the same, for the promise of id order, and an id listed apart (a
   * store that does not) made one. */
  l.n = tg__coll_listed_sort(l.e, l.n, &l.snapshots);
  out->total = l.snapshots;
  uint64_t done = 0;
  for (size_t i = 0; !err && i < l.n; i++) {
    const entry_t *e = &l.e[i];
    char why[TG_COLL_ERROR_MAX + 64] = "";
    tg_coll_rebuilt_t what;
    tg_coll_snapshot_t row;
    if (!e->trace && !e->meta) {
      unreserved(out, e->id);
      TG_WARN("%s snapshot %016llx: an index or symbols object without a"
              " trace or sidecar in the bucket; kept, no row, its id not"
              " reserved", TG_NOTE(COLLECTOR_REBUILD_NO_SIDECAR),
              (unsigned long long)e->id);
      continue;
    }
    err = s->cat->ops->get(s->cat, e->id, &row);
    if (err == 0) {
      what = TG_COLL_REBUILT_PRESENT;
    } else if (err != -ENOENT) {
      break;
    } else if (!e->meta) {
      err = 0;
      what = TG_COLL_REBUILT_NO_SIDECAR;
      TG_WARN("%s snapshot %016llx: a trace without a sidecar in the bucket;"
              " kept, no row, its id not reserved",
              TG_NOTE(COLLECTOR_REBUILD_NO_SIDECAR),
              (unsigned long long)e->id);
    } else if ((err = rebuild_one(s, e, out, &what, why, sizeof why))) {
      break;
    } else if (what == TG_COLL_REBUILT_FAILED ||
               what == TG_COLL_REBUILT_REFUSED) {
      TG_WARN("%s snapshot %016llx: %s%s", TG_NOTE(COLLECTOR_REBUILD_REFUSED),
              (unsigned long long)e->id, why,
              what == TG_COLL_REBUILT_FAILED ? "; its row is FAILED"
                                             : "; no row, its objects kept");
    }
    out->count[what]++;
    /* A row, or a sidecar that parsed and named this id (its row is
     * inserted, live or FAILED): the id is the catalog's. */
    if (what == TG_COLL_REBUILT_REFUSED || what == TG_COLL_REBUILT_NO_SIDECAR)
      unreserved(out, e->id);
    else if (e->id > out->max_id)
      out->max_id = e->id;
    if (fn) fn(ctx, ++done, l.snapshots, e->id, what, why);
  }
  free(l.e);
  if (err) {
    TG_ERROR("store: rebuild stopped: %s (what was inserted stays; run it"
             " again)", tg_strerror(err));
    return err;
  }
  /* Past every verified id. An unreserved one above them is left for a
   * new snapshot to reach: its upload then finds the key taken and fails
   * rather than overwrite it (store_s3.c, uploader). */
  if (out->max_unreserved_id > out->max_id)
    TG_WARN("%s store: rebuild: %llu ids in the bucket have no verified"
            " sidecar and reserve nothing; the highest, %016llx, is above"
            " the highest verified one (%016llx): move its objects out of"
            " the prefix before a new snapshot reaches that id",
            TG_NOTE(COLLECTOR_REBUILD_NO_SIDECAR),
            (unsigned long long)out->unreserved,
            (unsigned long long)out->max_unreserved_id,
            (unsigned long long)out->max_id);
  if (out->max_id && (err = s->cat->ops->reserve(s->cat, out->max_id)))
    TG_ERROR("store: rebuild: the catalog's ids could not be moved past"
             " %016llx: %s", (unsigned long long)out->max_id,
             tg_strerror(err));
  return err;
}
