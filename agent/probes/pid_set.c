/* Fixed-capacity pid sets; see pid_set.h. */
#include "agent/probes/pid_set.h"

#include <stddef.h>
#include <string.h>

static uint32_t member_hash(const void *member) {
  int32_t pid;
  memcpy(&pid, member, sizeof(pid));
  return tg__pid_hash(pid);
}

static const tg_key_set_type_t pid_type = {
    .size = sizeof(int32_t),
    .max_cap = UINT32_C(1) << 28,
    .hash = member_hash,
};

int tg_pid_set_init(tg_pid_set_t *s, uint32_t cap) {
  memset(s, 0, sizeof(*s));
  void *pids;
  int rv = tg_key_set_init(&s->base, &pid_type, cap, &pids);
  s->pids = pids;
  return rv;
}

void tg_pid_set_free(tg_pid_set_t *s) {
  tg_key_set_free(&s->base, s->pids);
  memset(s, 0, sizeof(*s));
}

void tg_pid_set_clear(tg_pid_set_t *s) {
  tg_key_set_clear(&s->base, &pid_type, s->pids);
  s->last = 0;
}

size_t tg_pid_set_take(tg_pid_set_t *s, int32_t *out, size_t cap) {
  size_t n = tg_key_set_take(&s->base, &pid_type, s->pids, out, cap);
  s->last = 0;
  return n;
}

size_t tg_pid_set_add_new(tg_pid_set_t *s, const int32_t *pids, size_t n,
                          int32_t *out) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t pid = pids[i];
    if (pid <= 0 || tg_pid_set_has(s, pid)) continue;
    tg_pid_set_add(s, pid);
    out[m++] = pid;
  }
  s->base.dropped = 0; /* not a loss: the pid is handed over again */
  return m;
}
