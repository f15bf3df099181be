/* Retention policy (retention.h): a decision, no effects. */
#include "collector/retention.h"

const char *tg_coll_verdict_name(tg_coll_verdict_t v) {
  switch (v) {
    case TG_COLL_KEEP:
      return "keep";
    case TG_COLL_DROP_SIZE:
      return "size";
    case TG_COLL_DROP_AGE:
      return "age";
  }
  return "?";
}

tg_coll_verdict_t tg_coll_retention_decide(const tg_coll_retention_policy_t *p,
                                           const tg_coll_retention_view_t *v,
                                           int64_t now_ms) {
  if (!v->has_candidate) return TG_COLL_KEEP;
  if (p->max_bytes && v->total_bytes > p->max_bytes) return TG_COLL_DROP_SIZE;
  /* A clock stepped back makes ages negative: nothing is old then. */
  if (p->max_age_ms > 0 && now_ms > v->candidate.started_ms &&
      (uint64_t)now_ms - (uint64_t)v->candidate.started_ms >
          (uint64_t)p->max_age_ms)
    return TG_COLL_DROP_AGE;
  return TG_COLL_KEEP;
}
