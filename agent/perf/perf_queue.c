/* The reader -> unwinder queue: see perf_queue.h. */
#include "agent/perf/perf_queue.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The word at an offset where no entry fits before the buffer's end: the
 * next entry is at 0. An entry's |size| is never 0. */
#define WRAP_MARK 0u

static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The stack copy's room: the copy, or the frames a walk over it can
 * yield (one per 8 bytes of stack and the leaf), whichever is larger. */
static size_t area_of(uint32_t stack_len) { return round8(stack_len) + 8; }

size_t tg_perf_qentry_bytes(uint32_t n_ips, uint32_t n_regs,
                            uint32_t stack_len) {
  return sizeof(tg_perf_qentry_t) + 8 * (size_t)n_ips + 8 * (size_t)n_regs +
         area_of(stack_len);
}

int tg_perf_queue_init(tg_perf_queue_t *q, size_t cap) {
  memset(q, 0, sizeof(*q));
  q->cap = cap & ~(size_t)7;
  /* Pages are touched only as far as the largest backlog reaches. */
  q->buf = malloc(q->cap ? q->cap : 8);
  if (!q->buf) return -ENOMEM;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&q->mu, NULL);
  return 0;
}

void tg_perf_queue_destroy(tg_perf_queue_t *q) {
  if (!q->buf) return;
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q->buf);
  q->buf = NULL;
}

/* |off| (where an entry or the wrap mark is) -> where the entry is. */
static size_t at_entry(const tg_perf_queue_t *q, size_t off) {
  uint32_t w;
  if (off == q->cap) return 0;
  memcpy(&w, q->buf + off, sizeof(w));
  return w == WRAP_MARK ? 0 : off;
}

/* Under q->mu. Finds room for |size| bytes: the offset, or -1. */
static long find_room(tg_perf_queue_t *q, size_t size, size_t *waste) {
  *waste = 0;
  if (q->closed) return -1;
  if (!q->n_live) q->head = q->unw = q->tail = q->used = 0;
  if (!q->n_live || q->tail > q->head) {
    /* Free: from the tail to the end, then from 0 to the head. */
    if (q->cap - q->tail >= size) return (long)q->tail;
    if (q->head >= size) {
      *waste = q->cap - q->tail;
      return 0;
    }
    return -1;
  }
  if (q->tail < q->head && q->head - q->tail >= size) return (long)q->tail;
  return -1; /* tail == head with entries in: full */
}

static tg_perf_qentry_t *reserve_locked(tg_perf_queue_t *q, size_t size) {
  assert(!q->reserved);
  size_t waste;
  long off = find_room(q, size, &waste);
  if (off < 0) return NULL;
  q->reserved = true;
  q->res_off = (size_t)off;
  q->res_size = size;
  if (waste) q->used += waste; /* committed below with the entry */
  tg_perf_qentry_t *e = (tg_perf_qentry_t *)(void *)(q->buf + off);
  memset(e, 0, sizeof(*e));
  e->size = (uint32_t)size;
  return e;
}

#define PID_SLOTS (2 * TG_PERF_QUEUE_PIDS)

static size_t pid_home(uint32_t pid) {
  return (size_t)((pid * 2654435761u) % PID_SLOTS);
}

static long pid_find(const tg_perf_queue_t *q, uint32_t pid) {
  for (size_t i = pid_home(pid), n = 0; n < PID_SLOTS;
       i = (i + 1) % PID_SLOTS, n++) {
    if (q->pids[i] == pid) return (long)i;
    if (!q->pids[i]) return -1;
  }
  return -1;
}

/* Under q->mu. A sample of |pid| is committed: the unwinder may build its
 * cache. Past TG_PERF_QUEUE_PIDS the filter is off for good (every
 * forget is queued): an exact set or none. */
static void pid_add(tg_perf_queue_t *q, uint32_t pid) {
  if (q->st.filter_off || !pid || pid_find(q, pid) >= 0) return;
  if (q->n_pids == TG_PERF_QUEUE_PIDS) {
    q->st.filter_off = true;
    return;
  }
  size_t i = pid_home(pid);
  while (q->pids[i]) i = (i + 1) % PID_SLOTS;
  q->pids[i] = pid;
  q->n_pids++;
}

/* Under q->mu. Empties slot |at| (backward-shift deletion: no
 * tombstones, so that a lookup still stops at the first free slot). */
static void pid_remove(tg_perf_queue_t *q, long at) {
  size_t hole = (size_t)at;
  q->pids[hole] = 0;
  q->n_pids--;
  for (size_t j = (hole + 1) % PID_SLOTS; q->pids[j]; j = (j + 1) % PID_SLOTS) {
    size_t home = pid_home(q->pids[j]);
    /* |j| stays when its home lies cyclically in (hole, j]. */
    bool stays = hole < j ? (home > hole && home <= j)
                          : (home > hole || home <= j);
    if (stays) continue;
    q->pids[hole] = q->pids[j];
    q->pids[j] = 0;
    hole = j;
  }
}

static void commit_locked(tg_perf_queue_t *q) {
  assert(q->reserved);
  if (q->res_off != q->tail) {
    /* Wrapped: the rest of the buffer is skipped (already in |used|). */
    uint32_t w = WRAP_MARK;
    memcpy(q->buf + q->tail, &w, sizeof(w));
  }
  q->used += q->res_size;
  q->tail = q->res_off + q->res_size;
  if (q->tail == q->cap) q->tail = 0;
  q->reserved = false;
  const tg_perf_qentry_t *e =
      (const tg_perf_qentry_t *)(const void *)(q->buf + q->res_off);
  if (e->kind == TG_PERF_Q_SAMPLE) pid_add(q, e->pid);
  q->n_live++;
  q->n_queued++;
  q->st.committed++;
  if (q->used > q->st.peak_bytes) q->st.peak_bytes = q->used;
  pthread_cond_broadcast(&q->cv);
}

tg_perf_qentry_t *tg_perf_queue_reserve(tg_perf_queue_t *q, uint32_t n_ips,
                                        uint32_t n_regs, uint32_t stack_len) {
  size_t size = tg_perf_qentry_bytes(n_ips, n_regs, stack_len);
  pthread_mutex_lock(&q->mu);
  tg_perf_qentry_t *e =
      size <= UINT32_MAX && size <= q->cap ? reserve_locked(q, size) : NULL;
  if (e) {
    e->kind = TG_PERF_Q_SAMPLE;
    e->n_ips = n_ips;
    e->n_regs = (uint16_t)n_regs;
    e->stack_len = stack_len;
    e->area = (uint32_t)area_of(stack_len);
  } else if (!q->closed) {
    q->st.full++;
  }
  pthread_mutex_unlock(&q->mu);
  return e;
}

void tg_perf_queue_commit(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  commit_locked(q);
  pthread_mutex_unlock(&q->mu);
}

void tg_perf_queue_forget(tg_perf_queue_t *q, uint32_t pid) {
  pthread_mutex_lock(&q->mu);
  if (!q->st.filter_off) {
    long at = pid_find(q, pid);
    if (at < 0) {
      q->st.forgets_filtered++;
      pthread_mutex_unlock(&q->mu);
      return;
    }
    /* Its next sample adds it again. */
    pid_remove(q, at);
  }
  tg_perf_qentry_t *e = sizeof(*e) <= q->cap ? reserve_locked(q, sizeof(*e))
                                             : NULL;
  if (e) {
    e->kind = TG_PERF_Q_FORGET;
    e->pid = pid;
    commit_locked(q);
  } else {
    q->drop_all = true;
    q->st.forgets_folded++;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
}

void tg_perf_queue_request_drop(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  q->drop_all = true;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

tg_perf_qentry_t *tg_perf_queue_next_done(tg_perf_queue_t *q) {
  tg_perf_qentry_t *e = NULL;
  pthread_mutex_lock(&q->mu);
  if (q->n_done) {
    size_t h = at_entry(q, q->head);
    if (h != q->head) {
      q->used -= q->cap - q->head;
      q->head = h;
    }
    e = (tg_perf_qentry_t *)(void *)(q->buf + q->head);
  }
  pthread_mutex_unlock(&q->mu);
  return e;
}

void tg_perf_queue_release(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  assert(q->n_done);
  tg_perf_qentry_t *e = (tg_perf_qentry_t *)(void *)(q->buf + q->head);
  q->used -= e->size;
  q->head += e->size;
  if (q->head == q->cap) q->head = 0;
  q->n_done--;
  q->n_live--;
  q->st.released++;
  if (!q->n_live && !q->reserved) q->head = q->unw = q->tail = q->used = 0;
  pthread_mutex_unlock(&q->mu);
}

void tg_perf_queue_wait_idle(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  while (q->n_queued) pthread_cond_wait(&q->cv, &q->mu);
  pthread_mutex_unlock(&q->mu);
}

void tg_perf_queue_close(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  q->closed = true;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

void tg_perf_queue_stats(tg_perf_queue_t *q, tg_perf_queue_stats_t *st,
                         size_t *used) {
  pthread_mutex_lock(&q->mu);
  *st = q->st;
  if (used) *used = q->used;
  pthread_mutex_unlock(&q->mu);
}

static struct timespec deadline_in(int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long ns = ts.tv_nsec + (long)(ms % 1000) * 1000000L;
  ts.tv_sec += ms / 1000 + ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  return ts;
}

int tg_perf_queue_take(tg_perf_queue_t *q, int timeout_ms,
                       tg_perf_qentry_t **out, bool *drop) {
  *out = NULL;
  *drop = false;
  struct timespec until;
  if (timeout_ms >= 0) until = deadline_in(timeout_ms);
  int rv;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    if (q->drop_all) {
      *drop = true;
      q->drop_all = false;
    }
    if (q->n_queued && !q->taken) {
      q->unw = at_entry(q, q->unw);
      *out = (tg_perf_qentry_t *)(void *)(q->buf + q->unw);
      q->taken = true;
      rv = 1;
      break;
    }
    if (q->closed) {
      rv = -EPIPE;
      break;
    }
    if (*drop) {
      rv = 0;
      break;
    }
    if (timeout_ms < 0) {
      pthread_cond_wait(&q->cv, &q->mu);
    } else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) == ETIMEDOUT) {
      rv = 0;
      break;
    }
  }
  pthread_mutex_unlock(&q->mu);
  return rv;
}

void tg_perf_queue_done(tg_perf_queue_t *q) {
  pthread_mutex_lock(&q->mu);
  assert(q->taken);
  tg_perf_qentry_t *e = (tg_perf_qentry_t *)(void *)(q->buf + q->unw);
  q->unw += e->size;
  if (q->unw == q->cap) q->unw = 0;
  q->taken = false;
  q->n_queued--;
  q->n_done++;
  q->st.unwound++;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}
