/* A set of pids of fixed capacity: linux.ftrace collects the pids of its
 * records into one while it encodes pages, and the pid feed keeps what a
 * process_stats instance has yet to resolve in another.
 *
 * The typed face of key_set.h (open addressing over at least twice as many
 * slots as members, a slot holding a member's index + 1, members in
 * insertion order in |pids|): add and has stay inline here, on the
 * encoder's path for every record. Pid 0 (the idle task, no process) is
 * never a member, which is why 0 in |last| stands for none, and neither is
 * a negative pid of a garbled record. Adding allocates nothing: past the
 * capacity a pid is counted in |dropped| instead.
 */
#ifndef TRACEGATE_PROBES_PID_SET_H
#define TRACEGATE_PROBES_PID_SET_H

#include <stddef.h>
#include <stdint.h>

#include "agent/probes/key_set.h"

typedef struct tg_pid_set {
  tg_key_set_t base; /* slots, count, capacity, drops: key_set.h */
  int32_t *pids; /* the members, in insertion order */
  int32_t last;  /* the last pid added or found: runs skip the probe */
} tg_pid_set_t;

/* Room for |cap| (1 .. 2^28) members. Returns 0, -EINVAL, -ENOMEM. */
int tg_pid_set_init(tg_pid_set_t *s, uint32_t cap);
/* Frees what init allocated; a zeroed or freed set is a no-op. */
void tg_pid_set_free(tg_pid_set_t *s);
/* Empties the set and its drop count. */
void tg_pid_set_clear(tg_pid_set_t *s);

/* The probe start before masking (key_set.h's hash). */
static inline uint32_t tg__pid_hash(int32_t pid) {
  return (uint32_t)pid * UINT32_C(0x9e3779b1);
}

static inline uint32_t tg__pid_set_hash(const tg_pid_set_t *s, int32_t pid) {
  return tg__pid_hash(pid) & s->base.mask;
}

/* Adds |pid| (> 0; others are ignored). */
static inline void tg_pid_set_add(tg_pid_set_t *s, int32_t pid) {
  if (pid <= 0 || pid == s->last) return;
  uint32_t k = tg__pid_set_hash(s, pid);
  for (;; k = (k + 1) & s->base.mask) {
    uint32_t v = s->base.slots[k];
    if (v == 0) break;
    if (s->pids[v - 1] == pid) {
      s->last = pid;
      return;
    }
  }
  if (s->base.n == s->base.cap) {
    s->base.dropped++;
    return;
  }
  s->pids[s->base.n] = pid;
  s->base.slots[k] = ++s->base.n;
  s->last = pid;
}

static inline int tg_pid_set_has(const tg_pid_set_t *s, int32_t pid) {
  if (pid <= 0 || !s->base.slots) return 0;
  for (uint32_t k = tg__pid_set_hash(s, pid);; k = (k + 1) & s->base.mask) {
    uint32_t v = s->base.slots[k];
    if (v == 0) return 0;
    if (s->pids[v - 1] == pid) return 1;
  }
}

/* Moves up to |cap| members, in insertion order, to |out|; the rest stay
 * (in their order). Returns how many. */
size_t tg_pid_set_take(tg_pid_set_t *s, int32_t *out, size_t cap);

/* Copies to |out| (room for |n|; it may be |pids|) those of the |n| pids
 * that were not members, in order, and adds them; a pid past the
 * capacity is copied but not added. Returns how many were copied. */
size_t tg_pid_set_add_new(tg_pid_set_t *s, const int32_t *pids, size_t n,
                          int32_t *out);

static inline uint32_t tg_pid_set_room(const tg_pid_set_t *s) {
  return s->base.cap - s->base.n;
}

#endif /* TRACEGATE_PROBES_PID_SET_H */
