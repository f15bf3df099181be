/* The unwinder thread: see perf_unwind_thread.h. */
#include "agent/perf/perf_unwind_thread.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/perf/perf_unwind.h"

struct tg_perf_unwind_thread {
  tg_perf_queue_t *q;
  tg_perf_unwinder_t *u;
  uint32_t clear_period_ms, max_frames;
  pthread_t thread;
  tg_perf_unwind_thread_stats_t st;
  uint64_t *pcs; /* |max_frames|: the walk's frames before they are copied */
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Every Dwfl goes, with the mappings of the files they read; the freed
 * heap goes back to the kernel, which is what the memory guardrail
 * measures. */
static void clear_all(tg_perf_unwind_thread_t *t) {
  tg_perf_unwinder_clear(t->u);
  malloc_trim(0);
}

static void unwind_one(tg_perf_unwind_thread_t *t, tg_perf_qentry_t *e) {
  if (e->kind == TG_PERF_Q_FORGET) {
    tg_perf_unwinder_forget(t->u, e->pid);
    return;
  }
  size_t cap = tg_perf_qentry_pcs_cap(e);
  size_t left = e->n_ips < t->max_frames ? t->max_frames - e->n_ips : 0;
  if (cap > left) cap = left;
  if (!cap || e->n_regs != tg_perf_unwind_n_regs()) {
    e->n_pcs = 0;
    return;
  }
  int m = tg_perf_unwind(t->u, e->pid, e->tid, tg_perf_qentry_regs(e),
                         tg_perf_qentry_stack(e), e->stack_len, t->pcs, cap);
  if (m < 0) {
    t->st.unwind_failed++;
  } else {
    /* The walk is over: its frames may overwrite the stack copy. */
    memcpy(tg_perf_qentry_pcs(e), t->pcs, (size_t)m * sizeof(*t->pcs));
    if (m > 1) t->st.unwound++;
  }
  e->n_pcs = m;
}

static void *thread_main(void *arg) {
  tg_perf_unwind_thread_t *t = arg;
  uint64_t next_clear =
      t->clear_period_ms ? now_ms() + t->clear_period_ms : UINT64_MAX;
  for (;;) {
    int timeout = -1;
    if (next_clear != UINT64_MAX) {
      uint64_t now = now_ms();
      timeout = next_clear <= now ? 0
                : next_clear - now > INT32_MAX ? INT32_MAX
                                               : (int)(next_clear - now);
    }
    tg_perf_qentry_t *e;
    bool drop;
    int rv = tg_perf_queue_take(t->q, timeout, &e, &drop);
    if (drop) {
      clear_all(t);
      t->st.requested_drops++;
    }
    if (next_clear != UINT64_MAX && now_ms() >= next_clear) {
      clear_all(t);
      t->st.periodic_clears++;
      next_clear = now_ms() + t->clear_period_ms;
    }
    if (rv < 0) break;
    if (rv == 0) continue;
    unwind_one(t, e);
    tg_perf_queue_done(t->q);
  }
  return NULL;
}

int tg_perf_unwind_thread_start(tg_perf_queue_t *q, uint32_t clear_period_ms,
                                uint32_t max_frames,
                                tg_perf_unwind_thread_t **out) {
  *out = NULL;
  tg_perf_unwind_thread_t *t = calloc(1, sizeof(*t));
  if (!t) return -ENOMEM;
  t->q = q;
  t->clear_period_ms = clear_period_ms;
  t->max_frames = max_frames;
  t->pcs = malloc((max_frames ? max_frames : 1) * sizeof(*t->pcs));
  t->u = tg_perf_unwinder_new();
  int rv = -ENOMEM;
  if (!t->pcs || !t->u) goto fail;
  if ((rv = -pthread_create(&t->thread, NULL, thread_main, t)) < 0) goto fail;
  *out = t;
  return 0;
fail:
  tg_perf_unwinder_free(t->u);
  free(t->pcs);
  free(t);
  return rv;
}

void tg_perf_unwind_thread_stop(tg_perf_unwind_thread_t *t,
                                tg_perf_unwind_thread_stats_t *st) {
  if (!t) return;
  tg_perf_queue_close(t->q);
  pthread_join(t->thread, NULL);
  t->st.rebuilds_deferred = tg_perf_unwinder_rebuilds_deferred(t->u);
  if (st) *st = t->st;
  tg_perf_unwinder_free(t->u);
  free(t->pcs);
  free(t);
}
