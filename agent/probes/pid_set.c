/* Fixed-capacity pid sets; see pid_set.h. */
#include "agent/probes/pid_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tg_pid_set_init(tg_pid_set_t *s, uint32_t cap) {
  memset(s, 0, sizeof(*s));
  if (cap == 0 || cap > (UINT32_C(1) << 28)) return -EINVAL;
  uint32_t slots = 1;
  while (slots < 2 * cap) slots <<= 1;
  s->slots = calloc(slots, sizeof(*s->slots));
  s->pids = malloc((size_t)cap * sizeof(*s->pids));
  if (!s->slots || !s->pids) {
    tg_pid_set_free(s);
    return -ENOMEM;
  }
  s->cap = cap;
  s->mask = slots - 1;
  return 0;
}

void tg_pid_set_free(tg_pid_set_t *s) {
  free(s->slots);
  free(s->pids);
  memset(s, 0, sizeof(*s));
}

void tg_pid_set_clear(tg_pid_set_t *s) {
  if ((size_t)s->n * 8 > (size_t)s->mask + 1) {
    memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof(*s->slots));
  } else {
    /* Newest first: the probe chain of a member runs only through slots of
     * members added before it, which are all still in place. */
    for (uint32_t i = s->n; i-- > 0;) {
      int32_t pid = s->pids[i];
      uint32_t k = tg__pid_set_hash(s, pid);
      while (s->slots[k] != pid) k = (k + 1) & s->mask;
      s->slots[k] = 0;
    }
  }
  s->n = 0;
  s->last = 0;
  s->dropped = 0;
}

size_t tg_pid_set_take(tg_pid_set_t *s, int32_t *out, size_t cap) {
  size_t n = s->n < cap ? s->n : cap;
  memcpy(out, s->pids, n * sizeof(*out));
  if (n == s->n) {
    uint64_t dropped = s->dropped;
    tg_pid_set_clear(s);
    s->dropped = dropped;
    return n;
  }
  /* The rest move to the front and are added again (each add writes at or
   * before where it reads). */
  uint32_t rest = s->n - (uint32_t)n;
  memmove(s->pids, s->pids + n, rest * sizeof(*s->pids));
  memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof(*s->slots));
  s->n = 0;
  s->last = 0;
  for (uint32_t i = 0; i < rest; i++) tg_pid_set_add(s, s->pids[i]);
  return n;
}
