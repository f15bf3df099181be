/* tracegate-emit's writer threads; see emit.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/clock.h"
#include "agent/emit/emit.h"
#include "agent/emit/rpc.h"
#include "tracegate/track_event.h"

/* TracePacket.timestamp, TracePacket.for_testing, TestEvent.str and
 * TestEvent.seq_value (proto/trace/test_event.proto). */
enum { PACKET_TIMESTAMP = 8, PACKET_FOR_TESTING = 900 };
enum { TEST_STR = 1, TEST_SEQ_VALUE = 2 };

#define NS_PER_S UINT64_C(1000000000)
/* Units written between checks of the clock and of the session. */
#define BATCH 64

static TG_CATEGORY(cat_emit, "emit");

int emit_register_category(void) {
  static tg_category_t *const cats[] = {&cat_emit};
  return tg_track_event_register(cats, 1);
}

bool emit_active(const emit_shared_t *sh) {
  if (sh->opts->rpc != EMIT_RPC_NONE) return tg_category_enabled(&emit_rpc_cat);
  if (sh->opts->track_events) return tg_category_enabled(&cat_emit);
  return tg_ds_enabled_mask(sh->ds) != 0;
}

uint64_t emit_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* "t<idx>:" then a-z repeating, |*len| bytes (at least the prefix), NUL
 * after them. */
static char *make_payload(unsigned idx, uint64_t want, size_t *len) {
  char prefix[16];
  int p = snprintf(prefix, sizeof(prefix), "t%u:", idx);
  size_t n = want > (uint64_t)p ? (size_t)want : (size_t)p;
  char *b = malloc(n + 1);
  if (!b) return NULL;
  memcpy(b, prefix, (size_t)p);
  for (size_t i = (size_t)p; i < n; i++) b[i] = (char)('a' + i % 26);
  b[n] = '\0';
  *len = n;
  return b;
}

int emit_worker_init(emit_worker_t *w, emit_shared_t *sh, unsigned idx) {
  memset(w, 0, sizeof(*w));
  w->sh = sh;
  w->idx = idx;
  w->payload = make_payload(idx, sh->opts->size, &w->payload_len);
  if (!w->payload) return -ENOMEM;
  if (sh->opts->large_every) {
    w->large_payload = make_payload(idx, sh->opts->large_size, &w->large_len);
    if (!w->large_payload) {
      free(w->payload);
      return -ENOMEM;
    }
  }
  return 0;
}

void emit_worker_free(emit_worker_t *w) {
  free(w->payload);
  free(w->large_payload);
  w->payload = w->large_payload = NULL;
}

static void emit_raw(emit_worker_t *w, uint32_t seq, const char *pl,
                     size_t n) {
  uint64_t ts = tg__clock_boottime();
  TG_DS_TRACE(w->sh->ds, inst, pbw) {
    tg_pbw_append_varint(pbw, PACKET_TIMESTAMP, ts);
    tg_pbw_begin_nested(pbw, PACKET_FOR_TESTING);
    tg_pbw_append_varint(pbw, TEST_SEQ_VALUE, seq);
    tg_pbw_append_bytes(pbw, TEST_STR, pl, n);
    tg_pbw_end_nested(pbw);
    w->packets++;
  }
}

/* A slice with the sequence number, thread and payload as annotations, and
 * a counter of the sequence number. */
static void emit_track(emit_worker_t *w, uint32_t seq, const char *pl) {
  TG_SLICE_BEGIN(cat_emit, "emit", TG_ARG_UINT("seq", seq),
                 TG_ARG_UINT("thread", w->idx), TG_ARG_STR("payload", pl));
  TG_SLICE_END(cat_emit);
  TG_COUNTER(cat_emit, "emit.seq", seq);
  w->packets += 3;
}

static void emit_unit(emit_worker_t *w, uint32_t seq) {
  const emit_opts_t *o = w->sh->opts;
  bool large = o->large_every && (seq + 1) % o->large_every == 0;
  const char *pl = large ? w->large_payload : w->payload;
  size_t n = large ? w->large_len : w->payload_len;
  if (o->track_events)
    emit_track(w, seq, pl);
  else
    emit_raw(w, seq, pl, n);
  w->units++;
}

/* Commits this thread's partial chunks (raw mode; the track event data
 * source is the agent's and is committed by its timer and flushes). */
static void flush_raw(emit_worker_t *w) {
  if (w->sh->opts->track_events) return;
  uint8_t m = tg_ds_enabled_mask(w->sh->ds);
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++)
    if (m & (1u << k)) tg_ds_flush_thread(w->sh->ds, k);
}

void emit_idle_wait(emit_shared_t *sh, unsigned ms) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_nsec += (long)ms * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&sh->mu);
  if (!atomic_load(&sh->quit)) pthread_cond_timedwait(&sh->cv, &sh->mu, &dl);
  pthread_mutex_unlock(&sh->mu);
}

uint64_t emit_units_due(uint64_t elapsed, uint64_t rate) {
  return elapsed / NS_PER_S * rate + elapsed % NS_PER_S * rate / NS_PER_S;
}

uint64_t emit_unit_time(uint64_t i, uint64_t rate) {
  return i / rate * NS_PER_S + i % rate * NS_PER_S / rate;
}

void emit_sleep_until(uint64_t t) {
  struct timespec ts = {.tv_sec = (time_t)(t / NS_PER_S),
                        .tv_nsec = (long)(t % NS_PER_S)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* Writes while the source stays enabled; the sequence restarts at 0. */
static void run_session(emit_worker_t *w) {
  emit_shared_t *sh = w->sh;
  const emit_opts_t *o = sh->opts;
  uint64_t t0 = emit_now_ns(), expected = 0;
  atomic_compare_exchange_strong(&sh->first_start_ns, &expected, t0);
  uint64_t sent = 0;
  while (!atomic_load_explicit(&sh->quit, memory_order_relaxed) &&
         emit_active(sh)) {
    if (o->count && sent >= o->count) {
      flush_raw(w);
      while (!atomic_load(&sh->quit) && emit_active(sh)) emit_idle_wait(sh, 5);
      return;
    }
    uint64_t batch = BATCH;
    if (o->rate) {
      uint64_t now = emit_now_ns();
      uint64_t due = emit_units_due(now - t0, o->rate);
      if (due <= sent) {
        /* Sleep to the next unit, but look at the session every 10 ms. */
        uint64_t next = t0 + emit_unit_time(sent + 1, o->rate);
        if (next > now + 10000000u) {
          flush_raw(w);
          next = now + 10000000u;
        }
        emit_sleep_until(next);
        continue;
      }
      if (due - sent < batch) batch = due - sent;
    }
    if (o->count && o->count - sent < batch) batch = o->count - sent;
    for (uint64_t i = 0; i < batch; i++) emit_unit(w, (uint32_t)sent++);
  }
  flush_raw(w);
}

void *emit_worker_main(void *arg) {
  emit_worker_t *w = arg;
  emit_shared_t *sh = w->sh;
  while (!atomic_load(&sh->quit)) {
    if (emit_active(sh)) {
      run_session(w);
      continue;
    }
    /* A start was announced but the agent has not enabled it yet: look
     * again soon. */
    bool starting = atomic_load(&sh->starts) > atomic_load(&sh->stops);
    emit_idle_wait(sh, starting ? 1 : 20);
  }
  flush_raw(w);
  return NULL;
}
