/* Checks every catalog implementation applies before touching its
 * database (catalog.c): one definition of what input is acceptable. */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_CHECK_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_CHECK_H

#include "collector/catalog/catalog.h"

/* 0, or -EINVAL: a missing trigger, text over its cap. */
int tg__coll_check_begin(const tg_coll_begin_t *b);
/* 0, or -EINVAL: text over its cap, a count over INT64_MAX, an unknown
 * outcome. */
int tg__coll_check_finish(const tg_coll_finish_t *f);
/* The state finish() moves a row to, the failed hosts and the summed loss
 * (saturated at INT64_MAX). */
tg_coll_state_t tg__coll_finish_state(const tg_coll_finish_t *f,
                                      uint32_t *n_failed, uint64_t *loss);
bool tg__coll_filter_ok(const tg_coll_filter_t *f);
/* 0, or -EINVAL: an id out of range, what check_begin or check_finish
 * refuse, a failure over TG_COLL_ERROR_MAX. *state gets the row's state. */
int tg__coll_check_insert(const tg_coll_insert_t *r, tg_coll_state_t *state,
                          uint32_t *n_failed, uint64_t *loss);
/* A host outcome read back from a database: an unknown value is FAILED
 * (it claims no data). */
tg_coll_host_outcome_t tg__coll_host_outcome_of(int64_t v);
/* Appends |r| to |v|, whose array holds *cap rows (grown by doubling):
 * 0 or -ENOMEM (|v| unchanged). */
int tg__coll_retention_add(tg_coll_retention_view_t *v, size_t *cap,
                           const tg_coll_retention_row_t *r);

/* 0, or -EINVAL: a host's name over its cap or twice, too many rows, a
 * count over INT64_MAX, an empty function name, an unknown kind. */
int tg__coll_check_shares(const tg_coll_host_shares_t *hosts, size_t n_hosts);
/* 0, or -EINVAL: no function or one over its cap, a share out of 0..1, a
 * limit over the max, a host over its cap. */
int tg__coll_check_share_query(const tg_coll_share_query_t *q);
/* A host's share of |part| (its cpu_ns, or samples when |by_samples|) of
 * |whole|: 0..1, 0 when the whole is 0. */
double tg__coll_share_of(uint64_t part, uint64_t whole);
/* Bytes of |s| stored: at most |max|; *cut when there were more. */
size_t tg__coll_stored_len(const char *s, size_t max, bool *cut);

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_CHECK_H */
