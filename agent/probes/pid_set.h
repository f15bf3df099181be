/* A set of pids of fixed capacity: linux.ftrace collects the pids of its
 * records into one while it encodes pages, and the pid feed keeps what a
 * process_stats instance has yet to resolve in another.
 *
 * Open addressing with linear probing over at least twice as many slots as
 * members, so a probe always ends at an empty slot; 0 marks an empty slot,
 * which is why pid 0 (the idle task) is never a member, and neither is a
 * negative pid of a garbled record. Adding allocates nothing: past the
 * capacity a pid is counted in |dropped| instead. Members are also kept in
 * insertion order, for iteration and to clear only the slots in use.
 */
#ifndef TRACEGATE_PROBES_PID_SET_H
#define TRACEGATE_PROBES_PID_SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct tg_pid_set {
  int32_t *slots;   /* 0: empty */
  int32_t *pids;    /* the members, in insertion order */
  uint32_t n, cap;  /* members, and how many fit */
  uint32_t mask;    /* slots - 1 (a power of two >= 2 * cap) */
  int32_t last;     /* the last pid added or found: runs skip the probe */
  uint64_t dropped; /* pids not added for want of room */
} tg_pid_set_t;

/* Room for |cap| (>= 1) members. Returns 0, -EINVAL, -ENOMEM. */
int tg_pid_set_init(tg_pid_set_t *s, uint32_t cap);
void tg_pid_set_free(tg_pid_set_t *s);
/* Empties the set and its drop count. */
void tg_pid_set_clear(tg_pid_set_t *s);

static inline uint32_t tg__pid_set_hash(const tg_pid_set_t *s, int32_t pid) {
  return ((uint32_t)pid * UINT32_C(0x9e3779b1)) & s->mask;
}

/* Adds |pid| (> 0; others are ignored). */
static inline void tg_pid_set_add(tg_pid_set_t *s, int32_t pid) {
  if (pid <= 0 || pid == s->last) return;
  uint32_t k = tg__pid_set_hash(s, pid);
  for (;; k = (k + 1) & s->mask) {
    int32_t v = s->slots[k];
    if (v == pid) {
      s->last = pid;
      return;
    }
    if (v == 0) break;
  }
  if (s->n == s->cap) {
    s->dropped++;
    return;
  }
  s->slots[k] = pid;
  s->pids[s->n++] = pid;
  s->last = pid;
}

static inline int tg_pid_set_has(const tg_pid_set_t *s, int32_t pid) {
  if (pid <= 0) return 0;
  for (uint32_t k = tg__pid_set_hash(s, pid);; k = (k + 1) & s->mask) {
    if (s->slots[k] == pid) return 1;
    if (s->slots[k] == 0) return 0;
  }
}

/* Moves up to |cap| members, in insertion order, to |out|; the rest stay
 * (in their order). Returns how many. */
size_t tg_pid_set_take(tg_pid_set_t *s, int32_t *out, size_t cap);

static inline uint32_t tg_pid_set_room(const tg_pid_set_t *s) {
  return s->cap - s->n;
}

#endif /* TRACEGATE_PROBES_PID_SET_H */
