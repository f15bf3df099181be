/* Retention policy (retention.h): a decision, no effects. */
#include "collector/catalog/retention.h"

const char *tg_coll_verdict_name(tg_coll_verdict_t v) {
  switch (v) {
    case TG_COLL_KEEP:
      return "keep";
    case TG_COLL_DROP_SIZE:
      return "size";
    case TG_COLL_DROP_AGE:
      return "age";
    case TG_COLL_DROP_OVERSIZE:
      return "oversize";
    case TG_COLL_DROP_BURST:
      return "burst";
  }
  return "?";
}

static bool deletable(const tg_coll_retention_row_t *r) {
  return !r->pinned && !r->pending;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Rows are sorted, so b began at or after a; the difference in unsigned
 * arithmetic is exact over the whole int64 range. */
static bool follows_closely(const tg_coll_retention_row_t *a,
                            const tg_coll_retention_row_t *b) {
  return (uint64_t)b->started_ms - (uint64_t)a->started_ms <
         (uint64_t)TG_COLL_BURST_MS;
}

static tg_coll_verdict_t by_size(const tg_coll_retention_policy_t *p,
                                 const tg_coll_retention_view_t *v,
                                 size_t *victim) {
  uint64_t total = 0, pinned = 0;
  for (size_t i = 0; i < v->n; i++) {
    total = sat_add(total, v->rows[i].bytes);
    if (v->rows[i].pinned) pinned = sat_add(pinned, v->rows[i].bytes);
  }
  if (!p->max_bytes || total <= p->max_bytes) return TG_COLL_KEEP;
  const size_t none = v->n;
  size_t big = none, burst = none, oldest = none;
  for (size_t i = 0; i < v->n; i++) {
    const tg_coll_retention_row_t *r = &v->rows[i];
    if (!deletable(r)) continue;
    if (oldest == none) oldest = i;
    if (burst == none && i > 0 && follows_closely(&v->rows[i - 1], r))
      burst = i;
    if (sat_add(pinned, r->bytes) > p->max_bytes &&
        (big == none || r->bytes > v->rows[big].bytes))
      big = i;
  }
  if (big != none) {
    *victim = big;
    return TG_COLL_DROP_OVERSIZE;
  }
  if (burst != none) {
    *victim = burst;
    return TG_COLL_DROP_BURST;
  }
  if (oldest != none) {
    *victim = oldest;
    return TG_COLL_DROP_SIZE;
  }
  return TG_COLL_KEEP;
}

tg_coll_verdict_t tg_coll_retention_decide(const tg_coll_retention_policy_t *p,
                                           const tg_coll_retention_view_t *v,
                                           int64_t now_ms, size_t *victim) {
  tg_coll_verdict_t verdict = by_size(p, v, victim);
  if (verdict != TG_COLL_KEEP || p->max_age_ms <= 0) return verdict;
  for (size_t i = 0; i < v->n; i++) {
    const tg_coll_retention_row_t *r = &v->rows[i];
    if (!deletable(r)) continue;
    /* A clock stepped back makes ages negative: nothing is old then. The
     * first deletable row is the oldest: if it is young, all are. */
    if (now_ms > r->started_ms &&
        (uint64_t)now_ms - (uint64_t)r->started_ms > (uint64_t)p->max_age_ms) {
      *victim = i;
      return TG_COLL_DROP_AGE;
    }
    break;
  }
  return TG_COLL_KEEP;
}
