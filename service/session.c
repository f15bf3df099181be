/* Tracing sessions: config validation, buffers, data source instances,
 * start/flush/stop, timers and triggers.
 *
 * Lifecycle: CONFIGURED (deferred_start or waiting for a START trigger)
 * -> STARTED -> DISABLING (stop sent, waiting for acks or the timeout)
 * -> DISABLED (stats written, consumer told) -> freed by FreeBuffers or
 * when its consumer goes away.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pb/ipc/consumer_port.pb-c.h"
#include "service/service.h"
#include "pb/trace/perfetto/tracing_service_event.pb-c.h"
#include "tracegate/error.h"
#include "common/log.h"

#define MIN_FILE_WRITE_PERIOD_MS 100
#define DEFAULT_FILE_WRITE_PERIOD_MS 5000
#define MIN_FLUSH_PERIOD_MS 100

static void config_error(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void config_error(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

tg_trace_buffer_t *tg__session_buffer(tg_session_t *s, uint32_t global_id) {
  for (size_t i = 0; i < s->n_buffers; i++)
    if (s->buffers[i].global_id == global_id) return s->buffers[i].tb;
  return NULL;
}

tg_session_t *tg__session_by_buffer(tg_service_t *svc, uint32_t id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    if (!s->freeing && tg__session_buffer(s, id)) return s;
  }
  return NULL;
}

/* Buffer ids travel as 16 bits in the SMB ABI (target_buffer of writers
 * and chunks), so they are taken from 1..65535, round robin (a late commit
 * for a freed buffer does not land in a new one at once), skipping ids in
 * use by live sessions and by |s|'s buffers so far (the last one is
 * |s|'s new buffer, still 0). Returns 0 when every id is taken. */
static uint16_t next_buffer_id(tg_service_t *svc, tg_session_t *s) {
  for (uint32_t tries = 0; tries < UINT16_MAX; tries++) {
    uint16_t id = ++svc->last_buffer_id;
    if (id == 0) id = ++svc->last_buffer_id;
    if (tg__session_buffer(s, id) || tg__session_by_buffer(svc, id)) continue;
    return id;
  }
  return 0;
}

/* --- sequence ids ---------------------------------------------------------- */

static int seq_grow(tg_seq_map_t *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  uint32_t *k = calloc(ncap, sizeof(*k)), *v = calloc(ncap, sizeof(*v));
  if (!k || !v) {
    free(k);
    free(v);
    return -ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t j = (m->keys[i] * 2654435761u) & (ncap - 1);
    while (k[j]) j = (j + 1) & (ncap - 1);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = ncap;
  return 0;
}

uint32_t tg__session_sequence_id(tg_session_t *s, uint16_t producer_id,
                                 uint16_t writer_id) {
  tg_seq_map_t *m = &s->seqs;
  uint32_t key = ((uint32_t)producer_id << 16) | writer_id;
  if (m->cap) {
    size_t j = (key * 2654435761u) & (m->cap - 1);
    while (m->keys[j]) {
      if (m->keys[j] == key) return m->vals[j];
      j = (j + 1) & (m->cap - 1);
    }
  }
  if ((m->count + 1) * 2 > m->cap && seq_grow(m) < 0) return 0;
  size_t j = (key * 2654435761u) & (m->cap - 1);
  while (m->keys[j]) j = (j + 1) & (m->cap - 1);
  m->keys[j] = key;
  m->vals[j] = ++m->next;
  m->count++;
  return m->vals[j];
}

/* --- timers ---------------------------------------------------------------- */

static void maybe_release(tg_session_t *s);

static void on_timer_closed(uv_handle_t *h) {
  tg_session_t *s = h->data;
  s->open_timers--;
  maybe_release(s);
}

static void timer_init(tg_session_t *s, uv_timer_t *t) {
  uv_timer_init(s->svc->loop, t);
  t->data = s;
  s->open_timers++;
}

/* --- instances ---------------------------------------------------------------- */

/* Compiles |pat| to match whole names only (as std::regex_match does in
 * Perfetto). Returns 0 or -1 (invalid pattern, out of memory). */
static int compile_whole_name(regex_t *re, const char *pat) {
  size_t n = strlen(pat);
  char *anchored = malloc(n + 5);
  if (!anchored) return -1;
  snprintf(anchored, n + 5, "^(%s)$", pat);
  int rv = regcomp(re, anchored, REG_EXTENDED | REG_NOSUB) == 0 ? 0 : -1;
  free(anchored);
  return rv;
}

static bool whole_name_matches(const char *pat, const char *name) {
  regex_t re;
  if (!pat || compile_whole_name(&re, pat) < 0) return false;
  bool ok = regexec(&re, name, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

static bool producer_matches(const Perfetto__Protos__TraceConfig__DataSource *ds,
                             const tg_producer_t *p) {
  const char *name = p->name ? p->name : "";
  if (ds->n_producer_name_filter == 0 && ds->n_producer_name_regex_filter == 0)
    return true;
  for (size_t i = 0; i < ds->n_producer_name_filter; i++)
    if (ds->producer_name_filter[i] && !strcmp(ds->producer_name_filter[i], name))
      return true;
  for (size_t i = 0; i < ds->n_producer_name_regex_filter; i++)
    if (whole_name_matches(ds->producer_name_regex_filter[i], name)) return true;
  return false;
}

/* Unlinks |inst| from its producer (if still attached) and its session,
 * and frees it. */
static void instance_destroy(tg_ds_instance_t *inst) {
  if (inst->producer) tg_list_remove(&inst->producer_node);
  tg_list_remove(&inst->session_node);
  free(inst->name);
  free(inst->producer_name);
  free(inst);
}

static void maybe_instantiate(tg_session_t *s, size_t cfg_idx, tg_producer_t *p,
                              const tg_registered_ds_t *ds) {
  const Perfetto__Protos__TraceConfig__DataSource *cds =
      s->config->data_sources[cfg_idx];
  if (!cds->config || !cds->config->name || strcmp(cds->config->name, ds->name))
    return;
  if (!producer_matches(cds, p)) return;
  /* Re-matching (ChangeTraceConfig) must not set up a second instance. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    const tg_ds_instance_t *o = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (o->producer == p && o->ds == ds && o->cfg_index == cfg_idx) return;
  }
  tg_ds_instance_t *inst = calloc(1, sizeof(*inst));
  if (!inst) return;
  inst->id = ++s->svc->last_instance_id;
  inst->producer = p;
  inst->session = s;
  inst->ds = ds;
  inst->cfg_index = cfg_idx;
  inst->name = strdup(ds->name);
  inst->producer_name = strdup(p->name ? p->name : "");
  uint32_t local = cds->config->has_target_buffer ? cds->config->target_buffer : 0;
  inst->target_buffer = s->buffers[local].global_id; /* validated at create */
  inst->will_notify_on_stop = ds->will_notify_on_stop;
  inst->will_notify_on_start = ds->will_notify_on_start;
  inst->state = TG_DS_SETUP;
  tg_list_insert_tail(&s->instances, &inst->session_node);
  tg_list_insert_tail(&p->instances, &inst->producer_node);
  if (tg__producer_setup_instance(inst, cds->config) < 0) {
    instance_destroy(inst);
    return;
  }
  if (s->state == TG_SESSION_STARTED) tg__producer_start_instance(inst, cds->config);
}

static void instantiate_all(tg_session_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    for (size_t d = 0; d < p->n_ds; d++)
      for (size_t c = 0; c < s->config->n_data_sources; c++)
        maybe_instantiate(s, c, p, &p->ds[d]);
  }
}

void tg__session_rematch(tg_session_t *s) {
  if (s->freeing || s->state >= TG_SESSION_DISABLING) return;
  instantiate_all(s);
}

void tg__session_on_data_source_registered(tg_service_t *svc, tg_producer_t *p,
                                           const tg_registered_ds_t *ds) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    if (s->freeing || s->state >= TG_SESSION_DISABLING) continue;
    for (size_t c = 0; c < s->config->n_data_sources; c++)
      maybe_instantiate(s, c, p, ds);
  }
}

/* The config entry the instance was made from (two entries may name the
 * same data source with different configs). */
static const Perfetto__Protos__DataSourceConfig *instance_config(
    tg_session_t *s, tg_ds_instance_t *inst) {
  if (inst->cfg_index >= s->config->n_data_sources) return NULL;
  return s->config->data_sources[inst->cfg_index]->config;
}

/* --- create / start ------------------------------------------------------- */

static int validate(tg_service_t *svc, const Perfetto__Protos__TraceConfig *c,
                    int write_fd, char *err, size_t n) {
  if (c->n_buffers == 0) {
    config_error(err, n, "buffers: at least one buffer is required");
    return -EINVAL;
  }
  if (c->n_buffers > TG_SERVICE_MAX_BUFFERS_PER_SESSION) {
    config_error(err, n, "buffers: %zu buffers, at most %d", c->n_buffers,
                 TG_SERVICE_MAX_BUFFERS_PER_SESSION);
    return -EINVAL;
  }
  for (size_t i = 0; i < c->n_buffers; i++) {
    const Perfetto__Protos__TraceConfig__BufferConfig *b = c->buffers[i];
    if (!b->has_size_kb || b->size_kb < 4) {
      config_error(err, n, "buffers[%zu].size_kb: must be at least 4", i);
      return -EINVAL;
    }
    if ((uint64_t)b->size_kb * 1024 > TG_SERVICE_MAX_BUFFER_BYTES) {
      config_error(err, n, "buffers[%zu].size_kb: %u exceeds the %llu KiB limit",
                   i, b->size_kb,
                   (unsigned long long)(TG_SERVICE_MAX_BUFFER_BYTES / 1024));
      return -EINVAL;
    }
    if (b->has_fill_policy && b->fill_policy != 0 && b->fill_policy != 1 &&
        b->fill_policy != 2) {
      config_error(err, n, "buffers[%zu].fill_policy: unknown value %d", i,
                   (int)b->fill_policy);
      return -EINVAL;
    }
  }
  for (size_t i = 0; i < c->n_data_sources; i++) {
    const Perfetto__Protos__TraceConfig__DataSource *d = c->data_sources[i];
    if (!d->config || !d->config->name || !d->config->name[0]) {
      config_error(err, n, "data_sources[%zu].config.name: missing", i);
      return -EINVAL;
    }
    if (d->config->has_target_buffer && d->config->target_buffer >= c->n_buffers) {
      config_error(err, n,
                   "data_sources[%zu].config.target_buffer: %u, but the config "
                   "has %zu buffer(s)",
                   i, d->config->target_buffer, c->n_buffers);
      return -EINVAL;
    }
    for (size_t r = 0; r < d->n_producer_name_regex_filter; r++) {
      regex_t re;
      const char *pat = d->producer_name_regex_filter[r];
      if (!pat || compile_whole_name(&re, pat) < 0) {
        config_error(err, n,
                     "data_sources[%zu].producer_name_regex_filter[%zu]: not a "
                     "valid regular expression",
                     i, r);
        return -EINVAL;
      }
      regfree(&re);
    }
  }
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = c->trigger_config;
  for (size_t i = 0; tc && i < tc->n_triggers; i++) {
    regex_t re;
    const char *pat = tc->triggers[i]->producer_name_regex;
    if (!pat || !pat[0]) continue;
    if (compile_whole_name(&re, pat) < 0) {
      config_error(err, n,
                   "trigger_config.triggers[%zu].producer_name_regex: not a "
                   "valid regular expression",
                   i);
      return -EINVAL;
    }
    regfree(&re);
  }
  if (c->has_write_into_file && c->write_into_file && write_fd < 0) {
    config_error(err, n,
                 "write_into_file: set, but EnableTracing carried no file "
                 "descriptor");
    return -EINVAL;
  }
  if (c->unique_session_name && c->unique_session_name[0]) {
    tg_list_t *it, *tmp;
    tg_list_foreach_safe(it, tmp, &svc->sessions) {
      tg_session_t *o = TG_CONTAINER_OF(it, tg_session_t, node);
      const char *on = o->config->unique_session_name;
      if (!o->freeing && on && !strcmp(on, c->unique_session_name)) {
        config_error(err, n,
                     "unique_session_name: a session named '%s' is already "
                     "running",
                     on);
        return -EBUSY;
      }
    }
  }
  if (svc->n_sessions >= TG_SERVICE_MAX_SESSIONS) {
    config_error(err, n, "too many concurrent sessions (%d)",
                 TG_SERVICE_MAX_SESSIONS);
    return -EBUSY;
  }
  return 0;
}

tg_session_t *tg__session_create(tg_service_t *svc, const uint8_t *cfg_bytes,
                                 size_t cfg_len, int write_fd, char *err,
                                 size_t errlen) {
  Perfetto__Protos__TraceConfig *cfg =
      perfetto__protos__trace_config__unpack(NULL, cfg_len, cfg_bytes);
  if (!cfg) {
    config_error(err, errlen, "trace_config: does not decode as a TraceConfig");
    if (write_fd >= 0) close(write_fd);
    return NULL;
  }
  if (validate(svc, cfg, write_fd, err, errlen) < 0) {
    perfetto__protos__trace_config__free_unpacked(cfg, NULL);
    if (write_fd >= 0) close(write_fd);
    return NULL;
  }
  /* A file descriptor the config does not write into is not kept. */
  if (write_fd >= 0 && !(cfg->has_write_into_file && cfg->write_into_file)) {
    close(write_fd);
    write_fd = -1;
  }
  tg_session_t *s = calloc(1, sizeof(*s));
  if (!s) goto oom;
  s->svc = svc;
  s->id = ++svc->last_session_id;
  s->config = cfg;
  s->config_bytes = malloc(cfg_len ? cfg_len : 1);
  if (!s->config_bytes) goto oom;
  memcpy(s->config_bytes, cfg_bytes, cfg_len);
  s->config_len = cfg_len;
  s->write_fd = write_fd;
  s->seqs.next = 1; /* sequence 1 is the service's own */
  tg_list_init(&s->instances);
  tg_list_init(&s->flushes);
  tg_buf_init(&s->service_packets, 64u << 20);
  for (size_t i = 0; i < cfg->n_buffers; i++) {
    const Perfetto__Protos__TraceConfig__BufferConfig *b = cfg->buffers[i];
    tg_fill_policy_t pol =
        b->has_fill_policy && b->fill_policy == 2 ? TG_FILL_DISCARD : TG_FILL_RING_BUFFER;
    s->buffers[i].tb = tg_trace_buffer_new((size_t)b->size_kb * 1024, pol);
    if (!s->buffers[i].tb) {
      config_error(err, errlen, "buffers[%zu]: cannot allocate %u KiB", i,
                   b->size_kb);
      s->n_buffers = i;
      goto fail;
    }
    s->n_buffers = i + 1;
    s->buffers[i].global_id = next_buffer_id(svc, s);
    if (!s->buffers[i].global_id) {
      config_error(err, errlen, "buffers[%zu]: all 65535 buffer ids are in use",
                   i);
      goto fail;
    }
  }
  timer_init(s, &s->duration_timer);
  timer_init(s, &s->period_timer);
  timer_init(s, &s->file_timer);
  timer_init(s, &s->stop_timer);
  timer_init(s, &s->clear_timer);
  s->state = TG_SESSION_CONFIGURED;
  tg_list_insert_tail(&svc->sessions, &s->node);
  svc->n_sessions++;
  instantiate_all(s);
  TG_INFO("session %llu created: %zu buffer(s), %zu data source config(s)",
          (unsigned long long)s->id, s->n_buffers, cfg->n_data_sources);
  return s;

oom:
  config_error(err, errlen, "out of memory");
fail:
  if (write_fd >= 0) close(write_fd);
  if (s) {
    for (size_t i = 0; i < s->n_buffers; i++) tg_trace_buffer_free(s->buffers[i].tb);
    tg_buf_free(&s->service_packets);
    free(s->config_bytes);
    free(s);
  }
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);
  return NULL;
}

static void on_duration_elapsed(uv_timer_t *t);
static void on_flush_period(uv_timer_t *t);
static void on_clear_period(uv_timer_t *t);
static void on_file_period(uv_timer_t *t);

bool tg__session_waits_for_trigger(const tg_session_t *s) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
  return tc && tc->has_trigger_mode &&
         tc->trigger_mode ==
             PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING;
}

void tg__session_start(tg_session_t *s) {
  if (s->state != TG_SESSION_CONFIGURED) return;
  s->state = TG_SESSION_STARTED;
  tg__readout_preamble(s);
  tg__readout_service_event(s, 2 /* tracing_started */);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    const Perfetto__Protos__DataSourceConfig *dc = instance_config(s, inst);
    if (inst->producer && dc) tg__producer_start_instance(inst, dc);
  }
  const Perfetto__Protos__TraceConfig *c = s->config;
  if (c->has_duration_ms && c->duration_ms > 0)
    uv_timer_start(&s->duration_timer, on_duration_elapsed, c->duration_ms, 0);
  if (c->has_flush_period_ms && c->flush_period_ms > 0) {
    uint64_t p = c->flush_period_ms < MIN_FLUSH_PERIOD_MS ? MIN_FLUSH_PERIOD_MS
                                                          : c->flush_period_ms;
    uv_timer_start(&s->period_timer, on_flush_period, p, p);
  }
  const Perfetto__Protos__TraceConfig__IncrementalStateConfig *ic =
      c->incremental_state_config;
  if (ic && ic->has_clear_period_ms && ic->clear_period_ms > 0) {
    uint64_t p = ic->clear_period_ms < MIN_FLUSH_PERIOD_MS ? MIN_FLUSH_PERIOD_MS
                                                           : ic->clear_period_ms;
    uv_timer_start(&s->clear_timer, on_clear_period, p, p);
  }
  if (s->write_fd >= 0) {
    uint64_t p = c->has_file_write_period_ms && c->file_write_period_ms
                     ? c->file_write_period_ms : DEFAULT_FILE_WRITE_PERIOD_MS;
    if (p < MIN_FILE_WRITE_PERIOD_MS) p = MIN_FILE_WRITE_PERIOD_MS;
    uv_timer_start(&s->file_timer, on_file_period, p, p);
  }
  tg__consumer_notify_all_started(s);
  TG_INFO("session %llu started", (unsigned long long)s->id);
}

/* --- flush -------------------------------------------------------------------- */

static bool wants_flush(const tg_ds_instance_t *inst) {
  return !(inst->ds && inst->ds->no_flush);
}

static bool handles_clear(const tg_ds_instance_t *inst) {
  return inst->ds && inst->ds->handles_incremental_state_clear;
}

/* The ids of |p|'s instances in |s| that |want| accepts, as a malloc'ed
 * array the caller frees; NULL (and *n = 0) when there are none. */
static uint64_t *instance_ids(tg_producer_t *p, tg_session_t *s,
                              bool (*want)(const tg_ds_instance_t *), size_t *n) {
  size_t count = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->session == s && want(inst)) count++;
  }
  *n = 0;
  uint64_t *ids = count ? malloc(count * sizeof(*ids)) : NULL;
  if (!ids) return NULL;
  tg_list_foreach_safe(it, tmp, &p->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, producer_node);
    if (inst->session == s && want(inst)) ids[(*n)++] = inst->id;
  }
  return ids;
}

static void on_flush_closed(uv_handle_t *h) {
  tg_pending_flush_t *f = h->data;
  free(f->waiting);
  free(f);
}

static void flush_complete(tg_pending_flush_t *f, bool ok) {
  tg_session_t *s = f->session;
  tg_list_remove(&f->node);
  uv_timer_stop(&f->timer);
  if (ok) s->flushes_succeeded++; else s->flushes_failed++;
  if (f->has_call) {
    Perfetto__Protos__FlushResponse r = PERFETTO__PROTOS__FLUSH_RESPONSE__INIT;
    tg_ipc_reply(&f->call, ok, false, &r.base, -1);
  }
  void (*done)(tg_session_t *, bool) = f->done;
  uv_close((uv_handle_t *)&f->timer, on_flush_closed);
  if (ok) tg__readout_service_event(s, 3 /* all_data_sources_flushed */);
  if (done) done(s, ok);
}

static void on_flush_timeout(uv_timer_t *t) {
  tg_pending_flush_t *f = t->data;
  tg_session_t *s = f->session;
  TG_WARN("session %llu: flush %llu timed out, %zu producer(s) did not ack",
          (unsigned long long)s->id, (unsigned long long)f->request_id,
          f->n_waiting);
  for (size_t i = 0; i < f->n_waiting; i++) {
    tg_producer_t *p = tg__producer_by_id(s->svc, f->waiting[i]);
    if (p) tg__producer_scrape(p, s);
  }
  flush_complete(f, false);
}

void tg__session_flush(tg_session_t *s, uint32_t timeout_ms,
                       const tg_ipc_call_t *call,
                       void (*done)(tg_session_t *, bool)) {
  tg_pending_flush_t *f = calloc(1, sizeof(*f));
  size_t max_p = s->svc->n_producers;
  if (f && max_p) f->waiting = calloc(max_p, sizeof(uint16_t));
  if (!f || (max_p && !f->waiting)) {
    free(f);
    if (call) tg_ipc_reply(call, false, false, NULL, -1);
    if (done) done(s, false);
    return;
  }
  f->session = s;
  f->request_id = ++s->svc->last_flush_id;
  f->done = done;
  if (call) {
    f->has_call = true;
    f->call = *call;
  }
  s->flushes_requested++;
  uv_timer_init(s->svc->loop, &f->timer);
  f->timer.data = f;
  tg_list_insert_tail(&s->flushes, &f->node);
  tg__readout_service_event(s, 9 /* flush_started */);

  /* One Flush command per producer, naming its instances of this session. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    size_t n;
    uint64_t *ids = instance_ids(p, s, wants_flush, &n);
    if (!ids) continue;
    f->waiting[f->n_waiting++] = p->ident.producer_id;
    tg__producer_flush(p, f->request_id, ids, n);
    free(ids);
  }
  if (f->n_waiting == 0) { /* no producer to wait for */
    flush_complete(f, true);
    return;
  }
  if (timeout_ms == 0)
    timeout_ms = s->config->has_flush_timeout_ms && s->config->flush_timeout_ms
                     ? s->config->flush_timeout_ms
                     : TG_SERVICE_DEFAULT_FLUSH_TIMEOUT_MS;
  uv_timer_start(&f->timer, on_flush_timeout, timeout_ms, 0);
}

/* |producer_id| answered (or can no longer answer) flush |f|. */
static void flush_producer_done(tg_pending_flush_t *f, uint16_t producer_id) {
  for (size_t i = 0; i < f->n_waiting; i++) {
    if (f->waiting[i] != producer_id) continue;
    f->waiting[i] = f->waiting[--f->n_waiting];
    /* Threads that were idle still hold partial chunks the producer could
     * not commit for them: read those too, as Perfetto's service does
     * when a flush completes. */
    tg_producer_t *p = tg__producer_by_id(f->session->svc, producer_id);
    if (p) tg__producer_scrape(p, f->session);
    break;
  }
  if (f->n_waiting == 0) flush_complete(f, true);
}

void tg__session_flush_ack(tg_service_t *svc, tg_producer_t *p, uint64_t flush_id) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    tg_list_t *jt, *jtmp;
    tg_list_foreach_safe(jt, jtmp, &s->flushes) {
      tg_pending_flush_t *f = TG_CONTAINER_OF(jt, tg_pending_flush_t, node);
      /* Acks are cumulative: a producer that answers flush N has also
       * committed what earlier flushes asked for. */
      if (f->request_id <= flush_id) flush_producer_done(f, p->ident.producer_id);
    }
  }
}

static void on_flush_period(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state == TG_SESSION_STARTED) tg__session_flush(s, 0, NULL, NULL);
}

/* Asks every producer to drop its interned data and descriptors, so that a
 * ring buffer that wrapped still holds a self-contained tail of the trace.
 * Only instances whose descriptor says they handle it are named. */
static void on_clear_period(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state != TG_SESSION_STARTED) return;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    size_t n;
    uint64_t *ids = instance_ids(p, s, handles_clear, &n);
    if (!ids) continue;
    tg__producer_clear_incremental_state(p, ids, n);
    free(ids);
  }
}

static void on_file_period(uv_timer_t *t) {
  tg_session_t *s = t->data;
  tg__readout_write_file(s);
}

/* --- disable ------------------------------------------------------------------- */

static void finalize_disable(tg_session_t *s) {
  if (s->state == TG_SESSION_DISABLED) return;
  s->state = TG_SESSION_DISABLED;
  uv_timer_stop(&s->stop_timer);
  tg__readout_service_event(s, 5 /* tracing_disabled */);
  /* The trace stats packet comes from the read-out that drains the
   * session, so it also counts what read-out itself refused. */
  if (s->write_fd >= 0) {
    tg__readout_write_file(s);
    close(s->write_fd);
    s->write_fd = -1;
  }
  TG_INFO("session %llu disabled", (unsigned long long)s->id);
  tg__session_notify_disabled(s, NULL);
}

static void on_stop_timeout(uv_timer_t *t) {
  tg_session_t *s = t->data;
  TG_WARN("session %llu: data sources did not stop in time",
          (unsigned long long)s->id);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (inst->producer) tg__producer_scrape(inst->producer, s);
    instance_destroy(inst);
  }
  finalize_disable(s);
}

void tg__session_instance_stopped(tg_ds_instance_t *inst) {
  tg_session_t *s = inst->session;
  inst->state = TG_DS_STOPPED; /* observers are told it stopped, not its last state */
  tg__consumer_notify_instance_state(s->svc, inst);
  instance_destroy(inst);
  if (s->state == TG_SESSION_DISABLING && tg_list_empty(&s->instances))
    finalize_disable(s);
}

void tg__session_disable(tg_session_t *s) {
  if (s->state == TG_SESSION_DISABLING || s->state == TG_SESSION_DISABLED) return;
  s->state = TG_SESSION_DISABLING;
  uv_timer_stop(&s->duration_timer);
  uv_timer_stop(&s->period_timer);
  uv_timer_stop(&s->clear_timer);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (!inst->producer) continue;
    inst->state = TG_DS_STOPPING;
    tg__producer_stop_instance(inst);
    if (!inst->will_notify_on_stop) {
      tg__producer_scrape(inst->producer, s);
      tg_list_remove(&inst->producer_node);
      inst->producer = NULL;
      tg__session_instance_stopped(inst);
    }
  }
  if (tg_list_empty(&s->instances)) {
    finalize_disable(s);
    return;
  }
  uint32_t to = s->config->has_data_source_stop_timeout_ms &&
                        s->config->data_source_stop_timeout_ms
                    ? s->config->data_source_stop_timeout_ms
                    : TG_SERVICE_DEFAULT_STOP_TIMEOUT_MS;
  uv_timer_start(&s->stop_timer, on_stop_timeout, to, 0);
}

static void after_final_flush(tg_session_t *s, bool ok) {
  (void)ok;
  tg__session_disable(s);
}

static void on_duration_elapsed(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state != TG_SESSION_STARTED) return;
  TG_INFO("session %llu: duration elapsed", (unsigned long long)s->id);
  tg__session_flush(s, 0, NULL, after_final_flush);
}

void tg__session_notify_disabled(tg_session_t *s, const char *error) {
  if (!s->has_enable_call) return;
  s->has_enable_call = false;
  Perfetto__Protos__EnableTracingResponse r =
      PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
  r.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
  r.disabled = 1;
  r.error = (char *)error;
  tg_ipc_reply(&s->enable_call, error == NULL, false, &r.base, -1);
}

/* --- triggers -------------------------------------------------------------- */

static bool trigger_producer_ok(const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t,
                                const tg_producer_t *p) {
  if (!t->producer_name_regex || !t->producer_name_regex[0]) return true;
  return whole_name_matches(t->producer_name_regex, p->name ? p->name : "");
}

void tg__session_on_trigger(tg_service_t *svc, tg_producer_t *p, const char *name) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
    if (s->freeing || !tc) continue;
    for (size_t i = 0; i < tc->n_triggers; i++) {
      const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t = tc->triggers[i];
      if (!t->name || strcmp(t->name, name) || !trigger_producer_ok(t, p)) continue;
      TG_INFO("session %llu: trigger '%s' from producer %u",
              (unsigned long long)s->id, name, p->ident.producer_id);
      if (tc->trigger_mode ==
              PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING &&
          s->state == TG_SESSION_CONFIGURED) {
        uv_timer_stop(&s->duration_timer); /* the trigger timeout */
        tg__session_start(s);
      } else if (tc->trigger_mode ==
                     PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING &&
                 s->state == TG_SESSION_STARTED) {
        uint64_t delay = t->has_stop_delay_ms ? t->stop_delay_ms : 0;
        uv_timer_start(&s->duration_timer, on_duration_elapsed, delay, 0);
      }
      break;
    }
  }
}

static void on_trigger_timeout(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state != TG_SESSION_CONFIGURED) return;
  TG_INFO("session %llu: no start trigger in time; ending",
          (unsigned long long)s->id);
  tg__session_disable(s);
}

void tg__session_arm_trigger_timeout(tg_session_t *s) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
  if (tg__session_waits_for_trigger(s) && tc->has_trigger_timeout_ms && tc->trigger_timeout_ms)
    uv_timer_start(&s->duration_timer, on_trigger_timeout, tc->trigger_timeout_ms, 0);
}

/* --- producers going away ---------------------------------------------------- */

void tg__session_on_producer_gone(tg_service_t *svc, tg_producer_t *p) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    for (size_t i = 0; i < s->n_buffers; i++)
      tg_trace_buffer_producer_gone(s->buffers[i].tb, p->ident.producer_id);
    tg_list_t *jt, *jtmp;
    tg_list_foreach_safe(jt, jtmp, &s->flushes) {
      flush_producer_done(TG_CONTAINER_OF(jt, tg_pending_flush_t, node),
                          p->ident.producer_id);
    }
  }
}

/* --- free ------------------------------------------------------------------------ */

static void maybe_release(tg_session_t *s) {
  if (!s->freeing || s->open_timers > 0) return;
  for (size_t i = 0; i < s->n_buffers; i++) tg_trace_buffer_free(s->buffers[i].tb);
  tg_buf_free(&s->service_packets);
  free(s->seqs.keys);
  free(s->seqs.vals);
  free(s->config_bytes);
  free(s->detach_key);
  perfetto__protos__trace_config__free_unpacked(s->config, NULL);
  free(s);
}

void tg__session_free(tg_session_t *s) {
  if (s->freeing) return;
  if (s->state < TG_SESSION_DISABLING) tg__session_disable(s);
  /* Whatever is still waiting is abandoned now. */
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    instance_destroy(TG_CONTAINER_OF(it, tg_ds_instance_t, session_node));
  }
  if (s->state != TG_SESSION_DISABLED) finalize_disable(s);
  tg_list_foreach_safe(it, tmp, &s->flushes) {
    tg_pending_flush_t *f = TG_CONTAINER_OF(it, tg_pending_flush_t, node);
    f->done = NULL;
    flush_complete(f, false);
  }
  if (s->write_fd >= 0) close(s->write_fd);
  s->write_fd = -1;
  s->freeing = true;
  /* Consumers still connected (service shutdown) must not keep it. */
  tg__consumer_forget_session(s->svc, s);
  tg_list_remove(&s->node);
  s->svc->n_sessions--;
  TG_INFO("session %llu freed", (unsigned long long)s->id);
  uv_close((uv_handle_t *)&s->duration_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->period_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->file_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->stop_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->clear_timer, on_timer_closed);
}
