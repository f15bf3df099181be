/* What every catalog implementation shares: state names and the checks of
 * what callers hand in, so that each backend refuses the same input. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_check.h"

const char *const tg_coll_state_names[TG_COLL_STATE_COUNT] = {
    [TG_COLL_PENDING] = "pending",
    [TG_COLL_COMPLETE] = "complete",
    [TG_COLL_PARTIAL] = "partial",
    [TG_COLL_FAILED] = "failed",
};

const char *tg_coll_state_name(tg_coll_state_t s) {
  return (unsigned)s < TG_COLL_STATE_COUNT ? tg_coll_state_names[s] : "?";
}

/* NULL counts as "" wherever |min| is 0. */
static bool text_ok(const char *s, size_t min, size_t max) {
  size_t n = s ? strlen(s) : 0;
  return n >= min && n <= max;
}

static bool count_ok(uint64_t v) { return v <= (uint64_t)INT64_MAX; }

int tg__coll_check_begin(const tg_coll_begin_t *b) {
  if (!b || !text_ok(b->trigger, 1, TG_COLL_TRIGGER_MAX) ||
      !text_ok(b->reason, 0, TG_COLL_REASON_MAX) ||
      !text_ok(b->origin, 0, TG_COLL_HOST_MAX))
    return -EINVAL;
  return 0;
}

int tg__coll_check_finish(const tg_coll_finish_t *f) {
  if (!f || (f->n_hosts && !f->hosts) || f->n_hosts > UINT32_MAX ||
      !count_ok(f->bytes) || !count_ok(f->packets))
    return -EINVAL;
  for (size_t i = 0; i < f->n_hosts; i++) {
    const tg_coll_host_result_t *h = &f->hosts[i];
    if (!text_ok(h->host, 1, TG_COLL_HOST_MAX) ||
        !text_ok(h->name, 0, TG_COLL_HOST_MAX) ||
        !text_ok(h->error, 0, TG_COLL_ERROR_MAX) ||
        !text_ok(h->problems, 0, TG_COLL_PROBLEMS_MAX) ||
        !text_ok(h->boost, 0, TG_COLL_BOOST_MAX) ||
        !text_ok(h->links, 0, TG_COLL_LINKS_MAX) ||
        (h->outcome != TG_COLL_HOST_OK && h->outcome != TG_COLL_HOST_FAILED &&
         h->outcome != TG_COLL_HOST_PARTIAL) ||
        !count_ok(h->bytes) || !count_ok(h->packets) || !count_ok(h->loss))
      return -EINVAL;
  }
  return 0;
}

tg_coll_state_t tg__coll_finish_state(const tg_coll_finish_t *f,
                                      uint32_t *n_failed, uint64_t *loss) {
  uint32_t failed = 0, nothing = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < f->n_hosts; i++) {
    /* A host that failed part-way is not complete, but its data is there:
     * a snapshot of such hosts alone is partial, not failed. */
    if (f->hosts[i].outcome != TG_COLL_HOST_OK) failed++;
    if (f->hosts[i].outcome == TG_COLL_HOST_FAILED) nothing++;
    sum = f->hosts[i].loss > UINT64_MAX - sum ? UINT64_MAX
                                              : sum + f->hosts[i].loss;
  }
  *n_failed = failed;
  *loss = sum > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : sum;
  if (f->n_hosts == 0 || nothing == f->n_hosts) return TG_COLL_FAILED;
  return failed ? TG_COLL_PARTIAL : TG_COLL_COMPLETE;
}

tg_coll_host_outcome_t tg__coll_host_outcome_of(int64_t v) {
  return v == TG_COLL_HOST_OK        ? TG_COLL_HOST_OK
         : v == TG_COLL_HOST_PARTIAL ? TG_COLL_HOST_PARTIAL
                                     : TG_COLL_HOST_FAILED;
}

const char *tg_coll_host_outcome_name(tg_coll_host_outcome_t o) {
  return o == TG_COLL_HOST_OK        ? "ok"
         : o == TG_COLL_HOST_PARTIAL ? "partial"
                                     : "failed";
}

bool tg__coll_filter_ok(const tg_coll_filter_t *f) {
  return f && f->limit <= TG_COLL_LIST_MAX &&
         text_ok(f->trigger, 0, TG_COLL_TRIGGER_MAX) &&
         text_ok(f->host, 0, TG_COLL_HOST_MAX) &&
         f->states < (1u << TG_COLL_STATE_COUNT);
}

int tg__coll_retention_add(tg_coll_retention_view_t *v, size_t *cap,
                           const tg_coll_retention_row_t *r) {
  if (v->n == *cap) {
    size_t want = *cap ? *cap * 2 : 64;
    if (want > SIZE_MAX / sizeof(*r)) return -ENOMEM;
    tg_coll_retention_row_t *rows = realloc(v->rows, want * sizeof(*r));
    if (!rows) return -ENOMEM;
    v->rows = rows;
    *cap = want;
  }
  v->rows[v->n++] = *r;
  return 0;
}

int tg__coll_check_insert(const tg_coll_insert_t *r, tg_coll_state_t *state,
                          uint32_t *n_failed, uint64_t *loss) {
  int err;
  if (!r || r->id == 0 || r->id > (uint64_t)INT64_MAX ||
      !text_ok(r->failure, 0, TG_COLL_ERROR_MAX))
    return -EINVAL;
  if ((err = tg__coll_check_begin(r->begin)) ||
      (err = tg__coll_check_finish(r->finish)))
    return err;
  *state = tg__coll_finish_state(r->finish, n_failed, loss);
  if (r->failure) *state = TG_COLL_FAILED;
  return 0;
}

const char *tg_coll_share_kind_name(tg_coll_share_kind_t k) {
  switch (k) {
    case TG_COLL_SHARE_FUNCTION:
      return "function";
    case TG_COLL_SHARE_PSEUDO:
      return "pseudo";
    case TG_COLL_SHARE_REST:
      return "rest";
  }
  return "?";
}

size_t tg__coll_stored_len(const char *s, size_t max, bool *cut) {
  size_t n = s ? strnlen(s, max + 1) : 0;
  if (cut) *cut = n > max;
  return n > max ? max : n;
}

double tg__coll_share_of(uint64_t part, uint64_t whole) {
  if (!whole) return 0;
  double v = (double)part / (double)whole;
  return v > 1 ? 1 : v;
}

int tg__coll_check_shares(const tg_coll_host_shares_t *hosts, size_t n_hosts) {
  if (n_hosts && !hosts) return -EINVAL;
  for (size_t i = 0; i < n_hosts; i++) {
    const tg_coll_host_shares_t *h = &hosts[i];
    if (!text_ok(h->host, 1, TG_COLL_HOST_MAX) ||
        h->n_rows > TG_COLL_SHARES_TOP_MAX + 1 || (h->n_rows && !h->rows) ||
        !count_ok(h->cpu_ns) || !count_ok(h->samples))
      return -EINVAL;
    for (size_t k = 0; k < i; k++)
      if (!strcmp(hosts[k].host, h->host)) return -EINVAL;
    for (size_t r = 0; r < h->n_rows; r++) {
      const tg_coll_share_in_t *s = &h->rows[r];
      if (!s->function || !s->function[0] ||
          (s->kind != TG_COLL_SHARE_FUNCTION &&
           s->kind != TG_COLL_SHARE_PSEUDO && s->kind != TG_COLL_SHARE_REST) ||
          !count_ok(s->self_ns) || !count_ok(s->total_ns) ||
          !count_ok(s->self_samples) || !count_ok(s->total_samples))
        return -EINVAL;
    }
  }
  return 0;
}

int tg__coll_check_share_query(const tg_coll_share_query_t *q) {
  /* !(x >= 0 && x <= 1) also refuses NaN. */
  if (!q || !text_ok(q->function, 1, TG_COLL_FUNCTION_MAX) ||
      !text_ok(q->host, 0, TG_COLL_HOST_MAX) ||
      !text_ok(q->after_host, 0, TG_COLL_HOST_MAX) ||
      !(q->min_share >= 0 && q->min_share <= 1) ||
      q->limit > TG_COLL_SHARES_LIST_MAX || q->after_id > (uint64_t)INT64_MAX)
    return -EINVAL;
  return 0;
}
