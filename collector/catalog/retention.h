/* Retention policy: which snapshot goes next. Pure: it decides from the
 * catalog's rows and the time it is given; the store does the deleting
 * (store.h, tg_coll_store_retain()).
 *
 * Pinned and PENDING snapshots are never deleted. Pinned ones count in
 * the total (they use the disk). While the live total is over max_bytes,
 * one snapshot goes per step, the first of these that exists:
 *
 *  1. "oversize": one that cannot fit beside the pins (its bytes plus the
 *     pinned bytes exceed max_bytes), the largest (then the oldest).
 *     Deleting others would not make room for it, so it alone goes: one
 *     snapshot over the cap never empties the store. So a store whose
 *     pins alone exceed the cap keeps them and nothing else.
 *  2. "burst": the oldest one begun less than TG_COLL_BURST_MS after the
 *     row before it (any row, pinned and PENDING ones too). A storm of
 *     snapshots thins itself, from its second on, to about one per
 *     TG_COLL_BURST_MS before it costs what came before it; the first of
 *     each burst stays.
 *  3. "size": the oldest (by begin time, then id).
 *
 * Then, whatever the total, "age": the oldest older than max_age_ms.
 */
#ifndef TRACEGATE_COLLECTOR_CATALOG_RETENTION_H
#define TRACEGATE_COLLECTOR_CATALOG_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "collector/catalog/catalog.h"

/* Snapshots begun closer than this to the one before are a burst. */
#define TG_COLL_BURST_MS 60000

typedef struct tg_coll_retention_policy {
  uint64_t max_bytes; /* 0: no size limit */
  int64_t max_age_ms; /* 0: no age limit */
} tg_coll_retention_policy_t;

typedef enum tg_coll_verdict {
  TG_COLL_KEEP = 0,          /* nothing (more) to delete */
  TG_COLL_DROP_SIZE = 1,     /* the total is over max_bytes: the oldest */
  TG_COLL_DROP_AGE = 2,      /* older than max_age_ms */
  TG_COLL_DROP_OVERSIZE = 3, /* could never fit beside the pins */
  TG_COLL_DROP_BURST = 4,    /* over max_bytes: thinning a burst */
} tg_coll_verdict_t;

/* "keep", "size", "age", "oversize", "burst". */
const char *tg_coll_verdict_name(tg_coll_verdict_t v);

/* What to do at |now_ms| with |v|'s rows (sorted by started_ms, then id,
 * as the catalog gives them). Unless it returns TG_COLL_KEEP, *victim is
 * the index in v->rows of the snapshot to delete. */
tg_coll_verdict_t tg_coll_retention_decide(const tg_coll_retention_policy_t *p,
                                           const tg_coll_retention_view_t *v,
                                           int64_t now_ms, size_t *victim);

#endif /* TRACEGATE_COLLECTOR_CATALOG_RETENTION_H */
