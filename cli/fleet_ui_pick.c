/* Which hosts a fleet's progress display names. With a few hosts, all of
 * them; with hundreds, a line each would scroll the screen away, so only
 * the ones an operator has to look at: failing first, then those whose
 * link is not up (still connecting or preparing, or reconnecting), then
 * those far behind the others in bytes received. */
#include <stdlib.h>

#include "cli/fleet.h"

/* Behind: under this fraction of the median host's bytes, once the median
 * host has this many bytes (before that, every host looks behind). */
#define BEHIND_FRACTION 0.5
#define BEHIND_MIN_MEDIAN (64u << 10)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* 0: failing, 1: link not up, 2: behind, 3: nothing to say. */
static int urgency(const fleet_host_t *h, uint64_t median) {
  tg_link_state_t s = h->core.report.link_state;
  if (s == TG_LINK_FAILED || s == TG_LINK_FAILING) return 0;
  if (tg_link_starting(s) || s == TG_LINK_DROPPING ||
      tg_fleet_host_reconnecting(&h->core))
    return 1;
  if (s == TG_LINK_UP && median >= BEHIND_MIN_MEDIAN &&
      (double)h->core.report.bytes < BEHIND_FRACTION * (double)median)
    return 2;
  return 3;
}

static uint64_t median_bytes(const fleet_t *f) {
  uint64_t *b = malloc(f->n * sizeof(*b));
  if (!b) return 0; /* then nobody is named as behind */
  size_t m = 0;
  for (size_t i = 0; i < f->n; i++)
    if (f->hosts[i].core.report.link_state == TG_LINK_UP)
      b[m++] = f->hosts[i].core.report.bytes;
  uint64_t med = 0;
  if (m) {
    qsort(b, m, sizeof(*b), cmp_u64);
    med = b[m / 2];
  }
  free(b);
  return med;
}

size_t fleet_ui_pick(const fleet_t *f, size_t *idx, size_t cap,
                     size_t *total) {
  if (f->n <= cap) {
    for (size_t i = 0; i < f->n; i++) idx[i] = i;
    *total = f->n;
    return f->n;
  }
  uint64_t med = median_bytes(f);
  size_t got = 0;
  *total = 0;
  for (int u = 0; u < 3; u++) {
    for (size_t i = 0; i < f->n; i++) {
      if (urgency(&f->hosts[i], med) != u) continue;
      ++*total;
      if (got < cap) idx[got++] = i;
    }
  }
  return got;
}
