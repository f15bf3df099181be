/* /proc/stat parser; see proc_stat.h. Lines look like
 *   cpu0 4705 150 1120 16250 520 0 40 0 0 0
 *   intr 114930 31 9 0 ...
 *   softirq 59031 2 20164 ...
 *   processes 8421
 */
#include "agent/probes/proc_stat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sys/text.h"
#include "tracegate/error.h"

static int grow(void **arr, size_t *cap, size_t need, size_t elem,
                size_t max) {
  if (need <= *cap) return 0;
  if (need > max) return TG_EPARSE;
  size_t ncap = *cap ? *cap * 2 : 16;
  while (ncap < need) ncap *= 2;
  if (ncap > max) ncap = max;
  void *p = realloc(*arr, ncap * elem);
  if (!p) return -ENOMEM;
  *arr = p;
  *cap = ncap;
  return 0;
}

static int parse_cpu(const char *w, size_t wn, const char *p, const char *end,
                     tg_proc_stat_t *out) {
  uint64_t id;
  const char *q = w + 3;
  if (tg__parse_u64(&q, w + wn, &id) < 0 || q != w + wn || id > UINT32_MAX)
    return TG_EPARSE;
  uint64_t v[8] = {0};
  size_t n = 0;
  while (n < 8 && !tg__only_blanks(p, end)) {
    if (tg__parse_u64(&p, end, &v[n]) < 0) return TG_EPARSE;
    n++;
  }
  /* user nice system idle exist on every kernel; the rest came later. */
  if (n < 4) return TG_EPARSE;
  int rv = grow((void **)&out->cpus, &out->cap_cpus, out->n_cpus + 1,
                sizeof(*out->cpus), TG_PROC_STAT_MAX_CPUS);
  if (rv < 0) return rv;
  tg_cpu_times_t *c = &out->cpus[out->n_cpus++];
  *c = (tg_cpu_times_t){.cpu_id = (uint32_t)id, .user = v[0], .nice = v[1],
                        .system = v[2], .idle = v[3], .iowait = v[4],
                        .irq = v[5], .softirq = v[6], .steal = v[7]};
  return 0;
}

/* "intr total n0 n1 ..." and "softirq total n0 n1 ...". */
static int parse_counts(const char *p, const char *end, uint64_t *total,
                        uint64_t **arr, size_t *n, size_t *cap) {
  if (tg__parse_u64(&p, end, total) < 0) return TG_EPARSE;
  *n = 0;
  while (!tg__only_blanks(p, end)) {
    uint64_t v;
    if (tg__parse_u64(&p, end, &v) < 0) return TG_EPARSE;
    if (*n == TG_PROC_STAT_MAX_IRQS) continue; /* keep the total only */
    int rv = grow((void **)arr, cap, *n + 1, sizeof(**arr),
                  TG_PROC_STAT_MAX_IRQS);
    if (rv < 0) return rv;
    (*arr)[(*n)++] = v;
  }
  return 0;
}

int tg_proc_stat_parse(const char *text, size_t len, tg_proc_stat_t *out) {
  out->n_cpus = out->n_irqs = out->n_softirqs = 0;
  out->irq_total = out->softirq_total = out->forks = 0;
  out->present = 0;
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  bool saw_cpu = false;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n, *w;
    size_t wn;
    if (!tg__next_word(&p, end, &w, &wn)) continue;
    int rv = 0;
    if (wn >= 3 && memcmp(w, "cpu", 3) == 0) {
      saw_cpu = true;
      if (wn > 3) rv = parse_cpu(w, wn, p, end, out); /* not the sum */
    } else if (tg__word_is(w, wn, "intr")) {
      rv = parse_counts(p, end, &out->irq_total, &out->irqs, &out->n_irqs,
                        &out->cap_irqs);
      out->present |= TG_PROC_STAT_HAS_IRQ;
    } else if (tg__word_is(w, wn, "softirq")) {
      rv = parse_counts(p, end, &out->softirq_total, &out->softirqs,
                        &out->n_softirqs, &out->cap_softirqs);
      out->present |= TG_PROC_STAT_HAS_SOFTIRQ;
    } else if (tg__word_is(w, wn, "processes")) {
      rv = tg__parse_u64(&p, end, &out->forks);
      if (rv == 0 && !tg__only_blanks(p, end)) rv = TG_EPARSE;
      out->present |= TG_PROC_STAT_HAS_FORKS;
    }
    if (rv < 0) return rv;
  }
  return saw_cpu && out->n_cpus > 0 ? 0 : TG_EPARSE;
}

void tg_proc_stat_free(tg_proc_stat_t *s) {
  free(s->cpus);
  free(s->irqs);
  free(s->softirqs);
  memset(s, 0, sizeof(*s));
}
