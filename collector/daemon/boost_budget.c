/* The perf boost's duty-cycle budget: boost_budget.h. Pure: reads its
 * arguments, writes only the ledger it is given. */
#include "collector/daemon/boost_budget.h"

#include <string.h>

const char *coll_boost_budget_name(coll_boost_verdict_t v) {
  switch (v) {
    case COLL_BOOST_BUDGET_HOST: return "host";
    case COLL_BOOST_BUDGET_FLEET: return "fleet";
    case COLL_BOOST_BUDGET_OK: break;
  }
  return "";
}

int64_t coll_boost_ledger_used(const coll_boost_ledger_t *l, int64_t now_ms,
                               int64_t window_ms) {
  int64_t since = now_ms - window_ms, used = 0;
  for (uint32_t i = 0; i < l->n; i++) {
    const coll_boost_span_t *s = &l->spans[i];
    int64_t from = s->start_ms > since ? s->start_ms : since;
    if (s->end_ms > from) used += s->end_ms - from;
  }
  return used;
}

static void drop_first(coll_boost_ledger_t *l, uint32_t k) {
  memmove(l->spans, l->spans + k, (l->n - k) * sizeof(l->spans[0]));
  l->n -= k;
}

void coll_boost_ledger_add(coll_boost_ledger_t *l, int64_t start_ms,
                           int64_t end_ms, int64_t window_ms) {
  /* Oldest first and apart: those that ended too long ago are a prefix. */
  uint32_t old = 0;
  while (old < l->n && l->spans[old].end_ms <= start_ms - window_ms) old++;
  drop_first(l, old);
  if (l->n == COLL_BOOST_LEDGER_MAX) {
    coll_boost_span_t *a = &l->spans[0], *b = &l->spans[1];
    int64_t both = (a->end_ms - a->start_ms) + (b->end_ms - b->start_ms);
    /* Within [a->start_ms, b->end_ms]: they did not overlap. */
    b->start_ms = b->end_ms - both;
    drop_first(l, 1);
  }
  l->spans[l->n++] =
      (coll_boost_span_t){.start_ms = start_ms,
                          .end_ms = end_ms > start_ms ? end_ms : start_ms};
}

int64_t coll_boost_ledger_cut(coll_boost_ledger_t *l, int64_t start_ms,
                              int64_t end_ms) {
  for (uint32_t i = l->n; i-- > 0;) {
    coll_boost_span_t *s = &l->spans[i];
    if (s->start_ms != start_ms) continue;
    if (end_ms < s->end_ms) s->end_ms = end_ms > start_ms ? end_ms : start_ms;
    return s->end_ms - s->start_ms;
  }
  return 0;
}

int64_t coll_boost_host_limit(const coll_boost_budget_t *b) {
  return b->window_ms * b->host_percent / 100;
}

int64_t coll_boost_fleet_limit(const coll_boost_budget_t *b, size_t n_hosts) {
  return b->window_ms * b->fleet_percent / 100 * (int64_t)n_hosts;
}

coll_boost_verdict_t coll_boost_decide(const coll_boost_budget_t *b,
                                       int64_t host_used, int64_t fleet_used,
                                       size_t n_hosts) {
  if (host_used + b->boost_ms > coll_boost_host_limit(b))
    return COLL_BOOST_BUDGET_HOST;
  if (fleet_used + b->boost_ms > coll_boost_fleet_limit(b, n_hosts))
    return COLL_BOOST_BUDGET_FLEET;
  return COLL_BOOST_BUDGET_OK;
}

static int64_t used_all(const coll_boost_ledger_t *const *ls, size_t n,
                        int64_t now_ms, int64_t window_ms) {
  int64_t used = 0;
  for (size_t i = 0; i < n; i++)
    used += coll_boost_ledger_used(ls[i], now_ms, window_ms);
  return used;
}

int64_t coll_boost_refill(const coll_boost_ledger_t *const *ls, size_t n,
                          int64_t now_ms, int64_t window_ms, int64_t limit,
                          int64_t need) {
  if (need > limit) return -1;
  if (used_all(ls, n, now_ms, window_ms) + need <= limit) return now_ms;
  /* What is used only falls as time passes (the window's start moves
   * past the spans), and nothing is left once the last span is a window
   * old: the earliest time that fits is found by halving. */
  int64_t hi = now_ms;
  for (size_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < ls[i]->n; k++)
      if (ls[i]->spans[k].end_ms > hi) hi = ls[i]->spans[k].end_ms;
  hi += window_ms;
  int64_t lo = now_ms; /* does not fit; hi does */
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (used_all(ls, n, mid, window_ms) + need <= limit) hi = mid;
    else lo = mid;
  }
  return hi;
}
