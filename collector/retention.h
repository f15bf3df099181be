/* Retention policy: which snapshot goes next. Pure: it decides from the
 * catalog's view and the time it is given; the store does the deleting
 * (store.h, tg_coll_store_retain()).
 *
 * Oldest first (by begin time, then id), pinned snapshots and PENDING
 * ones never: the oldest candidate goes while the live snapshots' total
 * size is above max_bytes, or while it is older than max_age_ms. Pinned
 * snapshots count in the total (they use the disk), so a store whose pins
 * alone exceed the cap keeps them and nothing else.
 */
#ifndef TRACEGATE_COLLECTOR_RETENTION_H
#define TRACEGATE_COLLECTOR_RETENTION_H

#include <stdint.h>

#include "collector/catalog.h"

typedef struct tg_coll_retention_policy {
  uint64_t max_bytes; /* 0: no size limit */
  int64_t max_age_ms; /* 0: no age limit */
} tg_coll_retention_policy_t;

typedef enum tg_coll_verdict {
  TG_COLL_KEEP = 0,      /* nothing (more) to delete */
  TG_COLL_DROP_SIZE = 1, /* the total is over max_bytes */
  TG_COLL_DROP_AGE = 2,  /* the candidate is older than max_age_ms */
} tg_coll_verdict_t;

/* "keep", "size", "age". */
const char *tg_coll_verdict_name(tg_coll_verdict_t v);

/* What to do with |v|'s candidate at |now_ms|. */
tg_coll_verdict_t tg_coll_retention_decide(const tg_coll_retention_policy_t *p,
                                           const tg_coll_retention_view_t *v,
                                           int64_t now_ms);

#endif /* TRACEGATE_COLLECTOR_RETENTION_H */
