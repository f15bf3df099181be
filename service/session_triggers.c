/* The triggers a session keeps: those received since its last clone
 * (Perfetto's received_triggers, moved into the next clone's trace) and,
 * with CLONE_SNAPSHOT, each trigger's wait for its stop_delay_ms and the
 * hit told to the consumer until its CloneSession comes. See session.h.
 *
 * Owns: the session's triggers[], clone_waits and clone_hits[]. Must
 * never start, stop or clone a session: it tells the observer, whose
 * consumer clones. It never calls session.c, which calls it: a wait's
 * closed timer goes back through the callback session.c gave.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "service/readout.h"
#include "service/session.h"

/* One CLONE_SNAPSHOT trigger waiting for its delay. Freed in its timer's
 * close callback. */
typedef struct clone_wait {
  uv_timer_t timer;
  tg_session_t *s;
  tg_list_t node;
  tg_trigger_info_t t;
  void (*closed)(tg_session_t *s);
} clone_wait_t;

void tg__trigger_info_free(tg_trigger_info_t *t) {
  free(t->name);
  free(t->producer_name);
  memset(t, 0, sizeof(*t));
}

static int info_copy(tg_trigger_info_t *dst, const tg_trigger_info_t *src) {
  *dst = *src;
  dst->name = strdup(src->name ? src->name : "");
  dst->producer_name = src->producer_name ? strdup(src->producer_name) : NULL;
  if (!dst->name || (src->producer_name && !dst->producer_name)) {
    tg__trigger_info_free(dst);
    return -ENOMEM;
  }
  return 0;
}

/* Appends a copy of |t| to |arr| (|*n| of |cap| used), the oldest going
 * when it is full. */
static int keep(tg_trigger_info_t *arr, size_t *n, size_t cap,
                const tg_trigger_info_t *t) {
  tg_trigger_info_t copy;
  if (info_copy(&copy, t) < 0) return -ENOMEM;
  if (*n == cap) {
    tg__trigger_info_free(&arr[0]);
    memmove(&arr[0], &arr[1], (cap - 1) * sizeof(arr[0]));
    (*n)--;
  }
  arr[(*n)++] = copy;
  return 0;
}

int tg__session_triggers_add(tg_session_t *s, const tg_trigger_info_t *t) {
  return keep(s->triggers, &s->n_triggers, TG_SESSION_MAX_TRIGGERS, t);
}

void tg__session_triggers_move(tg_session_t *src, tg_session_t *clone) {
  for (size_t i = 0; i < src->n_triggers; i++) {
    tg__readout_trigger(clone, TG_READOUT_TRIGGER, &src->triggers[i]);
    tg__trigger_info_free(&src->triggers[i]);
  }
  src->n_triggers = 0;
}

static void on_wait_closed(uv_handle_t *h) {
  clone_wait_t *w = h->data;
  tg_session_t *s = w->s;
  void (*closed)(tg_session_t *) = w->closed;
  tg__trigger_info_free(&w->t);
  free(w);
  closed(s);
}

static void wait_end(clone_wait_t *w) {
  tg_session_t *s = w->s;
  s->n_clone_waits--;
  s->clone_waits_full_said = false; /* a burst ends when a wait does */
  tg_list_remove(&w->node);
  uv_close((uv_handle_t *)&w->timer, on_wait_closed);
}

/* The delay ran out: the consumer is told to clone the session, which
 * runs on; the hit is kept for the CloneSession that answers it. */
static void on_wait_done(uv_timer_t *t) {
  clone_wait_t *w = t->data;
  tg_session_t *s = w->s;
  if (s->state == TG_SESSION_STARTED && s->observer.clone_trigger) {
    if (keep(s->clone_hits, &s->n_clone_hits, TG_SESSION_MAX_CLONE_HITS, &w->t) < 0)
      TG_WARN("session %llu: out of memory remembering trigger '%s'",
              (unsigned long long)s->id, w->t.name);
    s->observer.clone_trigger(s, &w->t, s->observer.ctx);
  }
  wait_end(w);
}

int tg__session_clone_wait(tg_session_t *s, const tg_trigger_info_t *t,
                           void (*closed)(tg_session_t *s)) {
  if (s->n_clone_waits >= TG_SESSION_MAX_CLONE_WAITS) {
    if (!s->clone_waits_full_said)
      TG_WARN("session %llu: %u CLONE_SNAPSHOT triggers already wait for "
              "their delay; trigger '%s' and those after it until one ends "
              "clone nothing", (unsigned long long)s->id,
              TG_SESSION_MAX_CLONE_WAITS, t->name);
    s->clone_waits_full_said = true;
    return -ENOSPC;
  }
  clone_wait_t *w = calloc(1, sizeof(*w));
  if (!w || info_copy(&w->t, t) < 0) {
    free(w);
    TG_WARN("session %llu: out of memory: trigger '%s' clones nothing",
            (unsigned long long)s->id, t->name);
    return -ENOMEM;
  }
  w->s = s;
  w->closed = closed;
  uv_timer_init(s->svc->loop, &w->timer);
  w->timer.data = w;
  tg_list_insert_tail(&s->clone_waits, &w->node);
  s->n_clone_waits++;
  uv_timer_start(&w->timer, on_wait_done, t->delay_ms, 0);
  return 0;
}

static ptrdiff_t hit_index(const tg_session_t *s, const char *name,
                           const char *producer_name) {
  for (size_t i = 0; i < s->n_clone_hits; i++) {
    const tg_trigger_info_t *h = &s->clone_hits[i];
    if (strcmp(h->name, name)) continue;
    if (producer_name && producer_name[0] &&
        (!h->producer_name || strcmp(h->producer_name, producer_name)))
      continue;
    return (ptrdiff_t)i;
  }
  return -1;
}

const tg_trigger_info_t *tg__session_clone_hit_find(const tg_session_t *s,
                                                    const char *name,
                                                    const char *producer_name) {
  ptrdiff_t i = hit_index(s, name, producer_name);
  return i < 0 ? NULL : &s->clone_hits[i];
}

void tg__session_clone_hit_answered(tg_session_t *s, const char *name,
                                    const char *producer_name) {
  ptrdiff_t i = hit_index(s, name, producer_name);
  if (i < 0) return;
  tg__trigger_info_free(&s->clone_hits[i]);
  memmove(&s->clone_hits[i], &s->clone_hits[i + 1],
          (s->n_clone_hits - (size_t)i - 1) * sizeof(s->clone_hits[0]));
  s->n_clone_hits--;
}

void tg__session_triggers_close(tg_session_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->clone_waits) {
    wait_end(TG_CONTAINER_OF(it, clone_wait_t, node));
  }
}

void tg__session_triggers_free(tg_session_t *s) {
  for (size_t i = 0; i < s->n_triggers; i++) tg__trigger_info_free(&s->triggers[i]);
  for (size_t i = 0; i < s->n_clone_hits; i++)
    tg__trigger_info_free(&s->clone_hits[i]);
  s->n_triggers = s->n_clone_hits = 0;
}
