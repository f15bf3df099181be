/* The hosts placed by their requests (reclock.h, "place"): each ordered
 * host pair's residual fitted per window, then per connected part of the
 * request graph one anchor kept and the others moved along a spanning
 * tree of the edges with the most samples. The samples are in collector
 * time as pass 1 placed them, so theta (the server's placed clock minus
 * the client's) is pass 1's error, and the correction of a server moved
 * against its client is minus theta. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/fleet/reclock_internal.h"

static int by_c1(const void *x, const void *y) {
  const tg_pair_sample_t *a = x, *b = y;
  return (a->c1 > b->c1) - (a->c1 < b->c1);
}

static uint64_t bound_of(const tg_reclock_host_t *h) {
  return h->bound_ns ? h->bound_ns : TG_RECLOCK_BOUND_UNKNOWN_NS;
}

/* theta of edge |e| in window |w| at |t| (clamped to the range the
 * window's line was fitted on: a line is not carried past its samples). */
static double theta_at(const tg__rc_edge_t *e, size_t w, int64_t t) {
  const tg__rc_win_t *x = &e->win[w];
  if (t < x->lo) t = x->lo;
  if (t > x->hi) t = x->hi;
  return tg_pair_clock_theta(&x->fit, t);
}

/* The window of time |t|. */
static size_t window_of(const tg_reclock_t *rc, int64_t t) {
  if (t <= rc->t_lo) return 0;
  uint64_t i = (uint64_t)(t - rc->t_lo) / (uint64_t)rc->win_ns;
  return i < rc->n_win ? (size_t)i : rc->n_win - 1;
}

/* The upper bounds are the hard ones: a server's slice that goes on after
 * it answered (its end past the client's) breaks a lower bound without
 * anything being out of order, while trace processor joins a flow only
 * when the server's slice begins after the client's. So every request
 * whose upper bound is sane (tg_pair_clock_orderable: used by the fit or
 * not, for one whose server's end came after its client's is not fitted
 * on; CI saw one such placed before its client, "early 1" again) is held
 * against each line the rewrite moves its halves by (a
 * client at its send, a server at its receive: the window each falls in,
 * which for a request across a window's edge, or in a window that
 * borrowed a neighbour's line, is not the line fitted on it), and a line
 * that leaves it under TG_RECLOCK_BEGIN_SLACK_NS of room is lowered by
 * what is missing. Lowering a line only adds room to the others it holds,
 * so one pass holds them all. */
static void hold_every_request(const tg_reclock_t *rc, tg__rc_edge_t *e,
                               const tg_pair_prior_t *prior,
                               tg_reclock_stats_t *st) {
  for (size_t i = 0; i < e->n; i++) {
    const tg_pair_sample_t *s = &e->s[i];
    if (!tg_pair_clock_orderable(s, prior)) continue;
    const int64_t at[2] = {s->c1, s->s1};
    for (size_t k = 0; k < 2; k++) {
      size_t w = window_of(rc, at[k]);
      double room = (double)(s->s1 - s->c1) - theta_at(e, w, at[k]);
      if (room >= TG_RECLOCK_BEGIN_SLACK_NS) continue;
      e->win[w].fit.offset_ns += room - TG_RECLOCK_BEGIN_SLACK_NS;
      st->windows_lowered++;
    }
  }
}

/* Fits |e| window by window; false when no window has enough samples
 * within the prior. */
static bool fit_edge(tg_reclock_t *rc, tg__rc_edge_t *e,
                     const tg_reclock_host_t *hosts, tg_reclock_stats_t *st) {
  qsort(e->s, e->n, sizeof(*e->s), by_c1);
  free(e->win); /* a second placement starts afresh */
  e->used = e->rejected = 0;
  e->in_tree = false;
  e->win = calloc(rc->n_win, sizeof(*e->win));
  if (!e->win) return false;
  double span = (double)(rc->t_hi - rc->t_lo);
  double x = (double)bound_of(&hosts[e->a]) + (double)bound_of(&hosts[e->b]) +
             TG_RECLOCK_DRIFT_ALLOWANCE * span;
  tg_pair_prior_t prior = {-x, x};
  e->min_margin = INFINITY;
  size_t i = 0;
  bool any = false;
  for (size_t w = 0; w < rc->n_win; w++) {
    int64_t start = rc->t_lo + (int64_t)w * rc->win_ns;
    int64_t end = w + 1 == rc->n_win ? INT64_MAX : start + rc->win_ns;
    size_t j = i;
    while (j < e->n && e->s[j].c1 < end) j++;
    st->windows++;
    if (j - i >= TG_RECLOCK_WINDOW_MIN_SAMPLES) {
      tg_pair_fit_t fit;
      int rv = tg_pair_clock_fit(e->s + i, j - i, &prior, &fit);
      e->rejected += fit.rejected;
      if (rv == 0 && fit.used >= TG_RECLOCK_WINDOW_MIN_SAMPLES) {
        e->used += fit.used;
        e->win[w] = (tg__rc_win_t){true, fit, e->s[i].c1, e->s[j - 1].c1};
        if (fit.margin_ns < e->min_margin) e->min_margin = fit.margin_ns;
        any = true;
      } else if (rv == 0) {
        e->rejected += fit.used; /* too few left to fit a window */
      }
    }
    i = j;
  }
  if (!any) return false;
  /* A window without a line of its own takes its nearest neighbour's. */
  for (size_t w = 0; w < rc->n_win; w++) {
    if (e->win[w].own) continue;
    st->windows_borrowed++;
    for (size_t d = 1; d < rc->n_win; d++) {
      if (w >= d && e->win[w - d].own) {
        e->win[w] = e->win[w - d];
        break;
      }
      if (w + d < rc->n_win && e->win[w + d].own) {
        e->win[w] = e->win[w + d];
        break;
      }
    }
    e->win[w].own = false;
  }
  /* Under every request's upper bound (hold_every_request). */
  hold_every_request(rc, e, &prior, st);
  return true;
}

bool tg__rc_moved(const tg_reclock_t *rc, size_t k) {
  return k < rc->n_hosts && (rc->has_constant[k] || rc->corr[k].edge);
}

double tg__rc_corr_at(const tg_reclock_t *rc, size_t k, int64_t t) {
  if (rc->has_constant[k]) return (double)rc->constant[k];
  size_t w = window_of(rc, t);
  double c = 0;
  /* Up the tree to the anchor: at most n_hosts steps, one for most hosts
   * (the ones that talk to the anchor). */
  for (size_t steps = 0; rc->corr[k].edge && steps < rc->n_hosts; steps++) {
    const tg__rc_corr_t *x = &rc->corr[k];
    c += x->sign * theta_at(x->edge, w, t);
    k = x->parent;
  }
  return c;
}

static void free_corr(tg_reclock_t *rc) {
  for (size_t i = 0; i < rc->n_hosts; i++)
    rc->corr[i] = (tg__rc_corr_t){NULL, 0, 0};
}

int tg_reclock_place(tg_reclock_t *rc, tg_reclock_host_t *hosts,
                     tg_reclock_stats_t *st) {
  size_t n = rc->n_hosts, moved = 0;
  free_corr(rc);
  for (size_t k = 0; k < n; k++) {
    tg_reclock_host_t *h = &hosts[k];
    *h = (tg_reclock_host_t){.bound_ns = h->bound_ns};
    if (rc->has_constant[k]) h->moved = true, moved++;
  }
  /* Constants stand for the fit whole. */
  if (moved || !rc->n_edges) return (int)moved;
  /* The windows: from the first request to the last. */
  rc->t_lo = INT64_MAX;
  rc->t_hi = INT64_MIN;
  for (size_t i = 0; i < rc->n_edges; i++)
    for (size_t j = 0; j < rc->edges[i].n; j++) {
      int64_t c1 = rc->edges[i].s[j].c1;
      if (c1 < rc->t_lo) rc->t_lo = c1;
      if (c1 > rc->t_hi) rc->t_hi = c1;
    }
  uint64_t span = (uint64_t)(rc->t_hi - rc->t_lo);
  rc->win_ns = TG_RECLOCK_WINDOW_NS;
  if (span / (uint64_t)rc->win_ns + 1 > TG_RECLOCK_MAX_WINDOWS)
    rc->win_ns = (int64_t)(span / TG_RECLOCK_MAX_WINDOWS + 1);
  rc->n_win = (size_t)(span / (uint64_t)rc->win_ns) + 1;

  for (size_t i = 0; i < rc->n_edges; i++) {
    tg__rc_edge_t *e = &rc->edges[i];
    e->fitted = fit_edge(rc, e, hosts, st);
    st->edges += e->fitted;
    hosts[e->a].samples_used += e->used;
    hosts[e->b].samples_used += e->used;
    hosts[e->a].samples_rejected += e->rejected;
    hosts[e->b].samples_rejected += e->rejected;
  }
  uint8_t *state = calloc(n, 1); /* 0 unseen, 1 in a part, 2 in its tree */
  size_t *part = calloc(n, sizeof(*part));
  double *margin = calloc(n, sizeof(*margin));
  int rv = state && part && margin ? 0 : -ENOMEM;
  for (size_t root = 0; rv == 0 && root < n; root++) {
    if (state[root]) continue;
    /* The connected part of |root| over fitted edges (breadth first). */
    size_t np = 0;
    part[np++] = root;
    state[root] = 1;
    for (size_t q = 0; q < np; q++)
      for (size_t i = 0; i < rc->n_edges; i++) {
        const tg__rc_edge_t *e = &rc->edges[i];
        if (!e->fitted || (e->a != part[q] && e->b != part[q])) continue;
        size_t o = e->a == part[q] ? e->b : e->a;
        if (!state[o]) state[o] = 1, part[np++] = o;
      }
    if (np < 2) continue;
    /* The anchor: the tightest ClockSync bound, then the most samples. */
    size_t anchor = part[0];
    for (size_t q = 1; q < np; q++) {
      const tg_reclock_host_t *a = &hosts[anchor], *b = &hosts[part[q]];
      if (bound_of(b) < bound_of(a) ||
          (bound_of(b) == bound_of(a) && b->samples_used > a->samples_used))
        anchor = part[q];
    }
    hosts[anchor].anchor = true;
    state[anchor] = 2;
    margin[anchor] = INFINITY;
    /* The tree: each step the edge with the most samples from the tree
     * to a host not yet in it. */
    for (size_t added = 1; rv == 0 && added < np; added++) {
      tg__rc_edge_t *best = NULL;
      for (size_t i = 0; i < rc->n_edges; i++) {
        tg__rc_edge_t *e = &rc->edges[i];
        if (!e->fitted || (state[e->a] == 2) == (state[e->b] == 2)) continue;
        if (!best || e->used > best->used) best = e;
      }
      if (!best) break;
      best->in_tree = true;
      size_t h = state[best->a] == 2 ? best->b : best->a;
      size_t p = h == best->a ? best->b : best->a;
      /* theta = b's clock minus a's: corr_b = corr_a - theta,
       * corr_a = corr_b + theta. */
      rc->corr[h] = (tg__rc_corr_t){best, p, h == best->b ? -1.0 : 1.0};
      state[h] = 2;
      margin[h] = fmin(margin[p], best->min_margin);
      hosts[h].moved = true;
      hosts[h].margin_us = margin[h] / 1e3;
      moved++;
    }
  }
  if (rv == 0) {
    /* Edges off the tree: does the tree say what they say? */
    for (size_t i = 0; i < rc->n_edges; i++) {
      const tg__rc_edge_t *e = &rc->edges[i];
      if (!e->fitted || e->in_tree) continue;
      int64_t t = e->s[e->n / 2].c1;
      double tree = tg__rc_corr_at(rc, e->a, t) - tg__rc_corr_at(rc, e->b, t);
      double own = theta_at(e, window_of(rc, t), t);
      if (fabs(tree - own) > fmax(e->min_margin, 0) + TG_RECLOCK_DISAGREE_NS)
        st->paths_disagree++;
    }
    int64_t mid = rc->t_lo + (int64_t)(span / 2);
    for (size_t k = 0; k < n; k++) {
      if (!rc->corr[k].edge) continue;
      hosts[k].offset_us = tg__rc_corr_at(rc, k, mid) / 1e3;
      hosts[k].drift_ppm =
          span ? (tg__rc_corr_at(rc, k, rc->t_hi) -
                  tg__rc_corr_at(rc, k, rc->t_lo)) /
                     (double)span * 1e6
               : 0;
    }
    st->hosts_moved = moved;
  }
  free(state);
  free(part);
  free(margin);
  return rv < 0 ? rv : (int)moved;
}
