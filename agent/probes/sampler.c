/* The sampler thread; see sampler.h. */
#include "agent/probes/sampler.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracegate/error.h"
#include "common/log.h"

#define MAX_SOURCES 8

typedef struct slot {
  /* Written by the agent's callbacks, under the sampler's mutex. */
  uint32_t want_gen;
  bool want_active;
  bool want_owned; /* want_cfg holds what ops->free_cfg must release */
  _Alignas(max_align_t) unsigned char want_cfg[TG_PROBE_CFG_MAX];
  /* The sampler thread's own. */
  uint32_t have_gen;
  void *state;
  bool enabled_seen;
  uint64_t started_ms;
  uint64_t next_ms;
} slot_t;

typedef struct source {
  tg_sampler_t *s;
  const tg_probe_ops_t *ops;
  void *ctx;
  tg_ds_t *ds;
  slot_t slots[TG_DS_MAX_INSTANCES];
} source_t;

struct tg_sampler {
  /* Held around everything that touches an instance's state (apply, its
   * rounds, its wakes), by the sampler thread and by
   * tg_sampler_run_wakes_here(). Lock order: mu, then run_mu, then the
   * feeds' mutexes. */
  pthread_mutex_t run_mu;
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* CLOCK_MONOTONIC */
  bool quit;           /* under mu */
  bool changed;        /* under mu: a want_gen moved */
  bool woken;          /* under mu: tg_sampler_wake() since the last look */
  bool running;
  pthread_t thread;
  source_t src[MAX_SOURCES];
  size_t n_src;
};

uint64_t tg_probes_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t tg_probes_ns_per_tick(void) {
  long hz = sysconf(_SC_CLK_TCK);
  return 1000000000u / (uint64_t)(hz > 0 ? hz : 100);
}

int tg_probe_no_cfg(const uint8_t *cfg, size_t len, void *out) {
  (void)cfg;
  (void)len;
  (void)out;
  return 0;
}

/* Under s->mu: frees what the slot's parsed config holds, if anything. */
static void release_cfg(source_t *src, slot_t *sl) {
  if (sl->want_owned) src->ops->free_cfg(sl->want_cfg);
  sl->want_owned = false;
}

/* --- agent thread -------------------------------------------------------- */

static void request(source_t *src, unsigned inst, const uint8_t *cfg,
                    size_t len, bool start) {
  tg_sampler_t *s = src->s;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  pthread_mutex_lock(&s->mu);
  slot_t *sl = &src->slots[inst];
  sl->want_active = false;
  release_cfg(src, sl);
  if (start) {
    int rv = src->ops->parse_cfg(cfg, len, sl->want_cfg);
    if (rv < 0)
      TG_WARN("%s: instance %u: unusable config (%s); it stays idle",
              src->ops->name, inst, tg_strerror(rv));
    sl->want_active = rv == 0;
    sl->want_owned = rv == 0 && src->ops->free_cfg;
  }
  sl->want_gen++;
  s->changed = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void on_start(void *ctx, unsigned inst, const uint8_t *cfg,
                     size_t len) {
  request(ctx, inst, cfg, len, true);
}

static void on_stop(void *ctx, unsigned inst) {
  source_t *src = ctx;
  if (src->ops->drain_now && inst < TG_DS_MAX_INSTANCES)
    src->ops->drain_now(src->ds, inst);
  request(ctx, inst, NULL, 0, false);
}

static void on_flush(void *ctx, unsigned inst) {
  source_t *src = ctx;
  if (src->ops->drain_now && inst < TG_DS_MAX_INSTANCES)
    src->ops->drain_now(src->ds, inst);
}

/* --- sampler thread ------------------------------------------------------ */

static void drop_state(source_t *src, slot_t *sl) {
  if (sl->state) src->ops->destroy(sl->state);
  sl->state = NULL;
}

/* Under s->mu: brings the slot in line with the last callback. */
static void apply(source_t *src, unsigned k, uint64_t now) {
  slot_t *sl = &src->slots[k];
  if (sl->have_gen == sl->want_gen) return;
  sl->have_gen = sl->want_gen;
  drop_state(src, sl);
  if (!sl->want_active) return;
  int rv = src->ops->create(sl->want_cfg, src->ctx, &sl->state);
  /* A create that succeeded took what the config held. */
  if (rv == 0) sl->want_owned = false;
  release_cfg(src, sl);
  if (rv < 0) {
    TG_WARN("%s: instance %u: %s", src->ops->name, k, tg_strerror(rv));
    sl->state = NULL;
    return;
  }
  sl->enabled_seen = false;
  sl->started_ms = now;
  sl->next_ms = now;
}

static void run_slot(source_t *src, unsigned k, uint64_t now) {
  slot_t *sl = &src->slots[k];
  if (!sl->enabled_seen) {
    /* on_start runs just before the agent marks the instance enabled;
     * packets begun before that are dropped, so wait for the bit. */
    if (!(tg_ds_enabled_mask(src->ds) & (1u << k))) {
      sl->next_ms = now + (now - sl->started_ms < 1000 ? 2 : 50);
      return;
    }
    sl->enabled_seen = true;
    /* What tg_sampler_run_wakes_here() passed over while it waited for
     * the bit (a feed calls it only when its pending set was empty). */
    if (src->ops->wake) src->ops->wake(sl->state, src->ds, k);
  }
  sl->next_ms = src->ops->tick(sl->state, src->ds, k, now);
  /* Commit this round now rather than when the chunk fills up. */
  tg_ds_flush_thread(src->ds, k);
}

/* The instances that ask to be woken, outside their schedule: those of
 * the source of |only| (NULL: every source). Under run_mu. */
static void run_wakes(tg_sampler_t *s, const tg_probe_ops_t *only) {
  for (size_t i = 0; i < s->n_src; i++) {
    source_t *src = &s->src[i];
    if (!src->ops->wake || (only && src->ops != only)) continue;
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
      slot_t *sl = &src->slots[k];
      if (!sl->state || !sl->enabled_seen) continue;
      src->ops->wake(sl->state, src->ds, k);
      tg_ds_flush_thread(src->ds, k);
    }
  }
}

static void wait_until(tg_sampler_t *s, uint64_t due_ms) {
  if (due_ms == UINT64_MAX) {
    pthread_cond_wait(&s->cv, &s->mu);
    return;
  }
  struct timespec ts = {.tv_sec = (time_t)(due_ms / 1000),
                        .tv_nsec = (long)(due_ms % 1000) * 1000000L};
  pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

static void *sampler_main(void *arg) {
  tg_sampler_t *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->quit) {
    uint64_t now = tg_probes_now_ms();
    if (s->changed) {
      s->changed = false;
      pthread_mutex_lock(&s->run_mu);
      for (size_t i = 0; i < s->n_src; i++)
        for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
          apply(&s->src[i], k, now);
      pthread_mutex_unlock(&s->run_mu);
    }
    bool woken = s->woken;
    s->woken = false;
    pthread_mutex_unlock(&s->mu);

    pthread_mutex_lock(&s->run_mu);
    if (woken) run_wakes(s, NULL);

    uint64_t next = UINT64_MAX;
    for (size_t i = 0; i < s->n_src; i++) {
      for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
        slot_t *sl = &s->src[i].slots[k];
        if (!sl->state) continue;
        now = tg_probes_now_ms();
        if (sl->next_ms <= now) run_slot(&s->src[i], k, now);
        if (sl->next_ms < next) next = sl->next_ms;
      }
    }
    pthread_mutex_unlock(&s->run_mu);

    pthread_mutex_lock(&s->mu);
    if (!s->changed && !s->quit && !s->woken) wait_until(s, next);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* --- lifecycle ----------------------------------------------------------- */

int tg_sampler_new(tg_sampler_t **out) {
  tg_sampler_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->run_mu, NULL);
  *out = s;
  return 0;
}

void tg_sampler_run_wakes_here(tg_sampler_t *s, const tg_probe_ops_t *ops) {
  pthread_mutex_lock(&s->run_mu);
  run_wakes(s, ops);
  pthread_mutex_unlock(&s->run_mu);
}

void tg_sampler_wake(tg_sampler_t *s) {
  pthread_mutex_lock(&s->mu);
  s->woken = true;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

int tg_sampler_add(tg_sampler_t *s, const tg_probe_ops_t *ops, void *ctx) {
  if (s->n_src == MAX_SOURCES || s->running) return -ENOSPC;
  source_t *src = &s->src[s->n_src];
  memset(src, 0, sizeof(*src));
  src->s = s;
  src->ops = ops;
  src->ctx = ctx;
  tg_ds_options_t o = {
      .name = ops->name,
      .cbs = {.on_start = on_start,
              .on_stop = on_stop,
              .on_flush = on_flush,
              .ctx = src},
  };
  int rv = tg_ds_register(&o, &src->ds);
  if (rv < 0) return rv;
  s->n_src++;
  return 0;
}

int tg_sampler_start(tg_sampler_t *s) {
  int rv = pthread_create(&s->thread, NULL, sampler_main, s);
  if (rv != 0) return -rv;
  s->running = true;
  return 0;
}

void tg_sampler_free(tg_sampler_t *s) {
  if (!s) return;
  if (s->running) {
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
  }
  for (size_t i = 0; i < s->n_src; i++) {
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
      drop_state(&s->src[i], &s->src[i].slots[k]);
      release_cfg(&s->src[i], &s->src[i].slots[k]);
    }
  }
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->run_mu);
  free(s);
}
