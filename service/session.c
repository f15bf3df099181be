/* Tracing sessions: lifecycle, buffers, data source instances, timers
 * and triggers; see session.h. Config checks live in session_config.c,
 * flush bookkeeping in session_flush.c, clones and the consumer binding
 * (detach, attach, lease) in session_consumer.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fsm.h"
#include "common/log.h"
#include "common/notice.h"
#include "service/producer_port.h"
#include "service/readout.h"
#include "service/session.h"

#define MIN_FILE_WRITE_PERIOD_MS 100
#define DEFAULT_FILE_WRITE_PERIOD_MS 5000
#define MIN_FLUSH_PERIOD_MS 100

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

uint16_t tg__session_next_buffer_id(tg_service_t *svc, tg_session_t *s) {
  for (uint32_t tries = 0; tries < UINT16_MAX; tries++) {
    uint16_t id = ++svc->last_buffer_id;
    if (id == 0) id = ++svc->last_buffer_id;
    if (tg__session_buffer(s, id) || tg__session_by_buffer(svc, id)) continue;
    return id;
  }
  return 0;
}

/* --- state ----------------------------------------------------------------- */

#define S(x) TG_FSM_BIT(TG_SESSION_##x)
/* The Lifecycle's arrows (session.h). */
static const uint32_t kNext[] = {
    [TG_SESSION_CONFIGURED] = S(STARTED) | S(DISABLING),
    [TG_SESSION_STARTED] = S(DISABLING),
    [TG_SESSION_DISABLING] = S(DISABLED),
    [TG_SESSION_DISABLED] = 0, /* only freed from here */
};
/* A clone's: one more, as it never runs and is readable from birth. */
static const uint32_t kNextCloned[] = {
    [TG_SESSION_CONFIGURED] = S(STARTED) | S(DISABLING) | S(DISABLED),
    [TG_SESSION_STARTED] = S(DISABLING),
    [TG_SESSION_DISABLING] = S(DISABLED),
    [TG_SESSION_DISABLED] = 0,
};
#undef S
/* Perfetto's spellings (TracingServiceState.TracingSession.state). */
static const char *const kNames[] = {"CONFIGURED", "STARTED",
                                     "DISABLING_WAITING_STOP_ACKS", "DISABLED"};
_Static_assert(TG_FSM_COUNT(kNext) == TG_SESSION_DISABLED + 1,
               "arrows per state");
_Static_assert(TG_FSM_COUNT(kNextCloned) == TG_FSM_COUNT(kNext),
               "arrows per state of a clone");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"session", TG_FSM_COUNT(kNext), kNext,
                                  kNames};
static const tg_fsm_def_t kDefCloned = {"session", TG_FSM_COUNT(kNext),
                                        kNextCloned, kNames};

const char *tg__session_state_name(enum tg_session_state st) {
  return tg_fsm_name(&kDef, st);
}

bool tg__session_transition_ok(enum tg_session_state from,
                               enum tg_session_state to, bool cloned) {
  return tg_fsm_allowed(cloned ? &kDefCloned : &kDef, from, to);
}

int tg__session_set_state(tg_session_t *s, enum tg_session_state to,
                          const char *why) {
  char who[24];
  snprintf(who, sizeof(who), "%llu", (unsigned long long)s->id);
  unsigned st = s->state;
  if (!tg_fsm_move(s->cloned ? &kDefCloned : &kDef, &st, to,
                   &s->svc->bad_transitions, who, why))
    return -EINVAL;
  s->state = to;
  return 0;
}

/* --- timers ---------------------------------------------------------------- */

static void maybe_release(tg_session_t *s);

/* One of |s|'s timers closed (session_triggers.c calls it back for its
 * waits): frees |s| once the last has, if freeing. */
static void timer_closed(tg_session_t *s) {
  s->open_timers--;
  maybe_release(s);
}

static void on_timer_closed(uv_handle_t *h) { timer_closed(h->data); }

static void timer_init(tg_session_t *s, uv_timer_t *t) {
  uv_timer_init(s->svc->loop, t);
  t->data = s;
  s->open_timers++;
}

void tg__session_timers_init(tg_session_t *s) {
  timer_init(s, &s->duration_timer);
  timer_init(s, &s->trigger_timer);
  timer_init(s, &s->period_timer);
  timer_init(s, &s->file_timer);
  timer_init(s, &s->stop_timer);
  timer_init(s, &s->clear_timer);
  timer_init(s, &s->lease_timer);
  timer_init(s, &s->clock_timer);
  timer_init(s, &s->start_timer);
}

/* --- instances ---------------------------------------------------------------- */

static int grant_right(tg_session_t *s, uint32_t producer_id,
                       uint32_t buffer_id) {
  if (tg__session_writer_may(s, producer_id, buffer_id)) return 0;
  if (s->n_rights == s->cap_rights) {
    size_t cap = s->cap_rights ? 2 * s->cap_rights : 8;
    void *r = realloc(s->rights, cap * sizeof(*s->rights));
    if (!r) return -ENOMEM;
    s->rights = r;
    s->cap_rights = cap;
  }
  s->rights[s->n_rights++] = (struct tg_session_writer_right){producer_id,
                                                              buffer_id};
  return 0;
}

bool tg__session_writer_may(const tg_session_t *s, uint32_t producer_id,
                            uint32_t buffer_id) {
  for (size_t i = 0; i < s->n_rights; i++)
    if (s->rights[i].producer_id == producer_id &&
        s->rights[i].buffer_id == buffer_id)
      return true;
  return false;
}

/* ObservableEvents: every instance of a started session runs. */
static void check_all_started(tg_session_t *s) {
  if (s->state != TG_SESSION_STARTED) return;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (inst->state != TG_DS_STARTED) return;
  }
  tg__readout_service_event(s, 1 /* all_data_sources_started */);
  if (s->observer.all_started) s->observer.all_started(s, s->observer.ctx);
}

#define D(x) TG_FSM_BIT(TG_DS_##x)
/* A data source instance's arrows (session.h): forward only; it may stop
 * from any state, and a STOPPED one is destroyed at once. */
static const uint32_t kDsNext[] = {
    [TG_DS_SETUP] = D(STARTING) | D(STARTED) | D(STOPPING) | D(STOPPED),
    [TG_DS_STARTING] = D(STARTED) | D(STOPPING) | D(STOPPED),
    [TG_DS_STARTED] = D(STOPPING) | D(STOPPED),
    [TG_DS_STOPPING] = D(STOPPED),
    [TG_DS_STOPPED] = 0,
};
#undef D
static const char *const kDsNames[] = {"setup", "starting", "started",
                                       "stopping", "stopped"};
_Static_assert(TG_FSM_COUNT(kDsNext) == TG_DS_STOPPED + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kDsNames) == TG_FSM_COUNT(kDsNext),
               "a name per state");
static const tg_fsm_def_t kDsDef = {"data source", TG_FSM_COUNT(kDsNext),
                                    kDsNext, kDsNames};

bool tg__ds_transition_ok(enum tg_ds_state from, enum tg_ds_state to) {
  return tg_fsm_allowed(&kDsDef, from, to);
}

/* The only writer of inst->state after its creation (SETUP). */
static bool ds_set_state(tg_ds_instance_t *inst, enum tg_ds_state to) {
  char who[300];
  snprintf(who, sizeof(who), "%s of session %llu", inst->name ? inst->name : "?",
           (unsigned long long)inst->session->id);
  unsigned st = inst->state;
  if (!tg_fsm_move(&kDsDef, &st, to, &inst->session->svc->bad_transitions, who,
                   NULL))
    return false;
  inst->state = to;
  return true;
}

static void instance_state_changed(tg_ds_instance_t *inst) {
  tg_session_t *s = inst->session;
  if (s->observer.instance_state) s->observer.instance_state(s, inst, s->observer.ctx);
  if (inst->state == TG_DS_STARTED) check_all_started(s);
}

/* Producers that asked to confirm the start stay STARTING until they do. */
static void start_instance(tg_ds_instance_t *inst,
                           const Perfetto__Protos__DataSourceConfig *cfg) {
  ds_set_state(inst, inst->will_notify_on_start ? TG_DS_STARTING
                                                : TG_DS_STARTED);
  inst->session->svc->producer_ops->start_instance(inst, cfg);
  if (inst->state == TG_DS_STARTED) instance_state_changed(inst);
}

void tg__session_instance_started(tg_ds_instance_t *inst) {
  if (inst->state != TG_DS_STARTING) return;
  if (ds_set_state(inst, TG_DS_STARTED)) instance_state_changed(inst);
}

/* An instance of a started session that has not started: set up, or
 * waiting for its producer's NotifyDataSourceStarted. */
static bool not_started(const tg_ds_instance_t *inst) {
  return inst->state == TG_DS_SETUP || inst->state == TG_DS_STARTING;
}

size_t tg__session_report_not_started(tg_session_t *s, tg_session_t *into) {
  if (s->state != TG_SESSION_STARTED) return 0;
  const char *producers[TG_SESSION_SLOW_START_LISTED];
  const char *names[TG_SESSION_SLOW_START_LISTED];
  size_t n = 0, listed = 0;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (!not_started(inst)) continue;
    n++;
    if (listed == TG_SESSION_SLOW_START_LISTED) continue;
    producers[listed] = inst->producer_name ? inst->producer_name : "";
    names[listed] = inst->name ? inst->name : "";
    listed++;
  }
  if (listed) tg__readout_slow_starting(into, producers, names, listed);
  return n;
}

static uint32_t start_timeout_ms(const tg_session_t *s) {
  return s->svc->opt.ds_start_timeout_ms;
}

/* Logs each instance of |s| that has not started, |when|. */
static void log_not_started(const tg_session_t *s, const char *when) {
  const tg_list_t *it;
  for (it = s->instances.next; it != &s->instances; it = it->next) {
    const tg_ds_instance_t *inst =
        TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (not_started(inst))
      TG_WARN("%s session %llu: data source %s of producer %s did not "
              "confirm its start %s; its producer's log says why",
              TG_NOTE(DS_NOT_STARTED), (unsigned long long)s->id,
              inst->name ? inst->name : "?",
              inst->producer_name ? inst->producer_name : "?", when);
  }
}

/* Perfetto's OnAllDataSourceStartedTimeout: the instances that have not
 * acknowledged their start are named in the trace and the log; from now
 * on each flush names them again, so that a ring that wraps still holds
 * the report. */
static void on_start_timeout(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (!tg__session_report_not_started(s, s)) return;
  s->start_overdue = true;
  char when[48];
  snprintf(when, sizeof(when), "within %u ms", start_timeout_ms(s));
  log_not_started(s, when);
}

/* Each flush names the overdue instances again, until none is
 * (session_flush.c tells each start). */
static void on_flush_started(tg_session_t *s) {
  if (s->start_overdue && !tg__session_report_not_started(s, s))
    s->start_overdue = false;
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
  if (!tg__session_config_producer_matches(s, cfg_idx, p)) return;
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
  if (grant_right(s, p->ident.producer_id, inst->target_buffer) < 0 ||
      s->svc->producer_ops->setup_instance(inst, cds->config) < 0) {
    instance_destroy(inst);
    return;
  }
  if (s->state == TG_SESSION_STARTED) start_instance(inst, cds->config);
}

static void instantiate_all(tg_session_t *s) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->producers) {
    tg_producer_t *p = TG_CONTAINER_OF(it, tg_producer_t, node);
    for (size_t d = 0; d < p->n_ds; d++)
      for (size_t c = 0; c < s->config->n_data_sources; c++)
        maybe_instantiate(s, c, p, p->ds[d]);
  }
}

int tg__session_change_filters(tg_session_t *s, Perfetto__Protos__TraceConfig *neu) {
  int rv = tg__session_config_change_filters(s, neu);
  if (rv < 0) return rv;
  /* Producers that match now get instances; existing ones stay. */
  if (!s->freeing && s->state < TG_SESSION_DISABLING) instantiate_all(s);
  return 0;
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

tg_session_t *tg__session_create(tg_service_t *svc, const uint8_t *cfg_bytes,
                                 size_t cfg_len, int write_fd,
                                 tg_ipc_host_conn_t *conn,
                                 const tg_session_observer_t *obs, char *err,
                                 size_t errlen) {
  Perfetto__Protos__TraceConfig *cfg =
      perfetto__protos__trace_config__unpack(NULL, cfg_len, cfg_bytes);
  if (!cfg) {
    snprintf(err, errlen, "trace_config: does not decode as a TraceConfig");
    tg_notice_prefix(err, errlen, TG_N_SERVICE_CONFIG_REFUSED);
    if (write_fd >= 0) close(write_fd);
    return NULL;
  }
  /* Compiled once: validation reports the patterns that do not compile,
   * and the session matches producer names with them until it is freed. */
  tg_session_matchers_t matchers;
  int rv = tg__session_matchers_compile(&matchers, cfg);
  if (rv < 0)
    snprintf(err, errlen, "out of memory");
  else if ((rv = tg__session_config_validate(svc, cfg, &matchers, write_fd, err,
                                             errlen)) < 0)
    tg__session_matchers_free(&matchers);
  if (rv < 0) {
    tg_notice_prefix(err, errlen,
                     rv == -ENOMEM  ? TG_N_SERVICE_NO_RESOURCES
                     : rv == -EBUSY ? TG_N_SERVICE_BUSY
                                    : TG_N_SERVICE_CONFIG_REFUSED);
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
  if (!s) {
    tg__session_matchers_free(&matchers);
    goto oom;
  }
  s->matchers = matchers;
  s->svc = svc;
  s->id = ++svc->last_session_id;
  s->config = cfg;
  s->config_bytes = malloc(cfg_len ? cfg_len : 1);
  if (!s->config_bytes) goto oom;
  memcpy(s->config_bytes, cfg_bytes, cfg_len);
  s->config_len = cfg_len;
  s->write_fd = write_fd;
  s->observer = *obs;
  s->consumer = conn;
  s->consumer_uid = conn->chan.peer_uid;
  tg_list_init(&s->instances);
  tg_list_init(&s->clone_waits);
  tg__session_flushes_init(&s->flushes, on_flush_started);
  tg__readout_init(&s->readout);
  if (tg__readout_filter_new(&s->readout.filter, cfg, err, errlen) < 0)
    goto fail;
  for (size_t i = 0; i < cfg->n_buffers; i++) {
    const Perfetto__Protos__TraceConfig__BufferConfig *b = cfg->buffers[i];
    tg_fill_policy_t pol =
        b->has_fill_policy && b->fill_policy == 2 ? TG_FILL_DISCARD : TG_FILL_RING_BUFFER;
    s->buffers[i].tb = tg_trace_buffer_new((size_t)b->size_kb * 1024, pol);
    if (!s->buffers[i].tb) {
      snprintf(err, errlen, "buffers[%zu]: cannot allocate %u KiB", i,
                   b->size_kb);
      tg_notice_prefix(err, errlen, TG_N_SERVICE_NO_RESOURCES);
      s->n_buffers = i;
      goto fail;
    }
    s->n_buffers = i + 1;
    s->buffers[i].global_id = tg__session_next_buffer_id(svc, s);
    if (!s->buffers[i].global_id) {
      snprintf(err, errlen, "buffers[%zu]: all 65535 buffer ids are in use",
                   i);
      tg_notice_prefix(err, errlen, TG_N_SERVICE_NO_RESOURCES);
      goto fail;
    }
  }
  tg__session_timers_init(s);
  /* CONFIGURED, the zero of the calloc'd struct: where every session
   * begins. */
  tg_list_insert_tail(&svc->sessions, &s->node);
  svc->n_sessions++;
  instantiate_all(s);
  TG_INFO("session %llu created: %zu buffer(s), %zu data source config(s)",
          (unsigned long long)s->id, s->n_buffers, cfg->n_data_sources);
  return s;

oom:
  snprintf(err, errlen, "out of memory");
  tg_notice_prefix(err, errlen, TG_N_SERVICE_NO_RESOURCES);
fail:
  if (write_fd >= 0) close(write_fd);
  if (s) {
    for (size_t i = 0; i < s->n_buffers; i++) tg_trace_buffer_free(s->buffers[i].tb);
    tg__readout_free(&s->readout);
    tg__session_matchers_free(&s->matchers);
    free(s->config_bytes);
    free(s);
  }
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);
  return NULL;
}

static void on_duration_elapsed(uv_timer_t *t);
static void arm_trigger_timeout(tg_session_t *s);
static void on_flush_period(uv_timer_t *t);
static void on_clear_period(uv_timer_t *t);
static void on_file_period(uv_timer_t *t);
static void on_clock_period(uv_timer_t *t);

/* The session's trigger mode, or UNSPECIFIED without a trigger_config. */
static int trigger_mode(const tg_session_t *s) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
  return tc && tc->has_trigger_mode
             ? (int)tc->trigger_mode
             : PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__UNSPECIFIED;
}

static bool waits_for_trigger(const tg_session_t *s) {
  return trigger_mode(s) ==
         PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING;
}

void tg__session_start(tg_session_t *s) {
  if (s->state != TG_SESSION_CONFIGURED) return;
  tg__session_set_state(s, TG_SESSION_STARTED, "starting");
  tg__readout_preamble(s);
  tg__readout_service_event(s, 2 /* tracing_started */);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    const Perfetto__Protos__DataSourceConfig *dc = instance_config(s, inst);
    if (inst->producer && dc) start_instance(inst, dc);
  }
  const Perfetto__Protos__TraceConfig *c = s->config;
  if (c->has_duration_ms && c->duration_ms > 0)
    uv_timer_start(&s->duration_timer, on_duration_elapsed, c->duration_ms, 0);
  /* Perfetto's PeriodicSnapshotTask, for the clocks (the preamble took the
   * first snapshot). */
  const Perfetto__Protos__TraceConfig__BuiltinDataSource *b = c->builtin_data_sources;
  uint64_t cp = b && b->has_snapshot_interval_ms && b->snapshot_interval_ms
                    ? b->snapshot_interval_ms : TG_CLOCK_SNAPSHOT_DEFAULT_INTERVAL_MS;
  if (cp < TG_CLOCK_SNAPSHOT_MIN_INTERVAL_MS) cp = TG_CLOCK_SNAPSHOT_MIN_INTERVAL_MS;
  if (!(b && b->has_disable_clock_snapshotting && b->disable_clock_snapshotting))
    uv_timer_start(&s->clock_timer, on_clock_period, cp, cp);
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
  /* STOP_TRACING and CLONE_SNAPSHOT wait for their trigger from here. */
  if (s->trigger_state == TG_TRIG_NONE) arm_trigger_timeout(s);
  uv_timer_start(&s->start_timer, on_start_timeout, start_timeout_ms(s), 0);
  check_all_started(s);
  TG_INFO("session %llu started", (unsigned long long)s->id);
}

void tg__session_enable(tg_session_t *s) {
  if (waits_for_trigger(s))
    arm_trigger_timeout(s);
  else if (!(s->config->has_deferred_start && s->config->deferred_start))
    tg__session_start(s);
}

/* --- flush -------------------------------------------------------------------- */

static bool handles_clear(const tg_ds_instance_t *inst) {
  return inst->ds && inst->ds->handles_incremental_state_clear;
}

static void on_flush_period(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state == TG_SESSION_STARTED) tg__session_flush_start(s, 0, 0, NULL);
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
    uint64_t *ids = tg__session_instance_ids(p, s, handles_clear, &n);
    if (!ids) continue;
    s->svc->producer_ops->clear_incremental_state(p, ids, n);
    free(ids);
  }
}

/* Read-out cannot write on: a started session stops; one already
 * stopping just ends without the rest of its file. */
static void write_file(tg_session_t *s) {
  if (s->write_fd < 0) return;
  tg_readout_status_t st = tg__readout_write_file(s, s->write_fd);
  if (st != TG_READOUT_OK && s->state == TG_SESSION_STARTED) {
    TG_INFO("session %llu: %s; stopping", (unsigned long long)s->id,
            tg__readout_status_str(st));
    tg__session_disable(s);
  }
}

static void on_file_period(uv_timer_t *t) { write_file(t->data); }

static void on_clock_period(uv_timer_t *t) { tg__readout_clock_snapshot(t->data); }

/* --- disable ------------------------------------------------------------------- */

static void on_detached_ended(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->consumer || !s->detach_key || s->freeing) return; /* attached */
  TG_INFO("session %llu: ended detached with its trace in its file; freeing "
          "it", (unsigned long long)s->id);
  tg__session_free(s);
}

static void finalize_disable(tg_session_t *s) {
  if (s->state == TG_SESSION_DISABLED ||
      tg__session_set_state(s, TG_SESSION_DISABLED, "its data sources stopped") < 0)
    return;
  uv_timer_stop(&s->stop_timer);
  tg__readout_service_event(s, 5 /* tracing_disabled */);
  /* The trace stats packet comes from the read-out that drains the
   * session, so it also counts what read-out itself refused. */
  bool into_file = s->write_fd >= 0;
  if (into_file) {
    write_file(s);
    close(s->write_fd);
    s->write_fd = -1;
  }
  TG_INFO("session %llu disabled", (unsigned long long)s->id);
  /* Detached, with the whole trace in its file: nothing is left to attach
   * to, so it goes, as in Perfetto (an Attach then fails). From the loop:
   * our callers still hold |s|. */
  if (into_file && !s->consumer && s->detach_key)
    uv_timer_start(&s->lease_timer, on_detached_ended, 0, 0);
  if (s->observer.ended) s->observer.ended(s, s->observer.ctx);
}

static void on_stop_timeout(uv_timer_t *t) {
  tg_session_t *s = t->data;
  TG_WARN("session %llu: data sources did not stop in time",
          (unsigned long long)s->id);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (inst->producer) s->svc->producer_ops->scrape(inst->producer, s);
    instance_destroy(inst);
  }
  finalize_disable(s);
}

static void instance_stopped(tg_ds_instance_t *inst) {
  tg_session_t *s = inst->session;
  ds_set_state(inst, TG_DS_STOPPED); /* observers are told it stopped, not
                                      * its last state */
  instance_state_changed(inst);
  instance_destroy(inst);
  if (s->state == TG_SESSION_DISABLING && tg_list_empty(&s->instances))
    finalize_disable(s);
}

void tg__session_instance_gone(tg_ds_instance_t *inst) {
  /* What it wrote before stopping may still sit in the SMB. */
  if (inst->producer) {
    inst->session->svc->producer_ops->scrape(inst->producer, inst->session);
    tg_list_remove(&inst->producer_node);
  }
  inst->producer = NULL;
  inst->ds = NULL;
  instance_stopped(inst);
}

void tg__session_disable(tg_session_t *s) {
  if (s->state == TG_SESSION_DISABLING || s->state == TG_SESSION_DISABLED) return;
  /* An instance that did not start by the end never ran: said here too,
   * for sessions shorter than the start timeout. */
  uv_timer_stop(&s->start_timer);
  if (tg__session_report_not_started(s, s))
    log_not_started(s, "before the session stopped");
  tg__session_set_state(s, TG_SESSION_DISABLING, "stopping");
  tg__readout_clock_snapshot(s); /* Perfetto's, with tracing_disabled */
  uv_timer_stop(&s->clock_timer);
  uv_timer_stop(&s->duration_timer);
  uv_timer_stop(&s->trigger_timer);
  uv_timer_stop(&s->period_timer);
  uv_timer_stop(&s->clear_timer);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->instances) {
    tg_ds_instance_t *inst = TG_CONTAINER_OF(it, tg_ds_instance_t, session_node);
    if (!inst->producer) continue;
    ds_set_state(inst, TG_DS_STOPPING);
    s->svc->producer_ops->stop_instance(inst);
    if (!inst->will_notify_on_stop) {
      s->svc->producer_ops->scrape(inst->producer, s);
      tg_list_remove(&inst->producer_node);
      inst->producer = NULL;
      instance_stopped(inst);
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

static void after_final_flush(tg_session_t *s, int status) {
  (void)status; /* stopping anyway: what was not flushed is lost */
  tg__session_disable(s);
}

static void on_duration_elapsed(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state != TG_SESSION_STARTED) return;
  TG_INFO("session %llu: duration elapsed", (unsigned long long)s->id);
  tg__session_flush_start(s, 0, 0, after_final_flush);
}

/* --- triggers -------------------------------------------------------------- */

/* The trace clock, which trigger packets are stamped with. */
static uint64_t now_boottime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The first trigger's stop_delay_ms ran out (STOP_TRACING, or a
 * START_TRACING session's duration): stop as duration_ms does. */
static void on_trigger_stop(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->state != TG_SESSION_STARTED) return;
  TG_INFO("session %llu: stopping after its trigger's delay",
          (unsigned long long)s->id);
  tg__session_flush_start(s, 0, 0, after_final_flush);
}

/* One matching trigger |t| for |s| (its packet is recorded already). */
static void trigger_fired(tg_session_t *s, const tg_trigger_info_t *t) {
  uint64_t delay = t->delay_ms;
  switch (trigger_mode(s)) {
    case PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING:
      if (s->state != TG_SESSION_CONFIGURED) return;
      uv_timer_stop(&s->trigger_timer);
      s->trigger_state = TG_TRIG_FIRED;
      tg__session_start(s);
      /* Perfetto takes the trigger's stop_delay_ms as the duration. */
      if (delay) uv_timer_start(&s->trigger_timer, on_trigger_stop, delay, 0);
      return;
    case PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING:
      /* The first trigger's delay holds; later ones change nothing. */
      if (s->state != TG_SESSION_STARTED || s->trigger_state == TG_TRIG_FIRED)
        return;
      s->trigger_state = TG_TRIG_FIRED;
      uv_timer_start(&s->trigger_timer, on_trigger_stop, delay, 0);
      return;
    case PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT:
      /* Each trigger clones after its own delay, as in Perfetto: two
       * triggers close together give two snapshots. */
      if (s->state != TG_SESSION_STARTED) return;
      s->trigger_state = TG_TRIG_FIRED;
      if (tg__session_clone_wait(s, t, timer_closed) == 0) s->open_timers++;
      return;
    default:
      return;
  }
}

void tg__session_on_trigger(tg_service_t *svc, tg_producer_t *p, const char *name) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
    if (s->freeing || s->cloned || !tc || s->state >= TG_SESSION_DISABLING) continue;
    for (size_t i = 0; i < tc->n_triggers; i++) {
      const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t = tc->triggers[i];
      if (!t->name || strcmp(t->name, name) || !tg__session_config_trigger_producer_ok(s, i, p))
        continue;
      TG_INFO("session %llu: trigger '%s' from producer %u",
              (unsigned long long)s->id, name, p->ident.producer_id);
      tg_trigger_info_t info = {
          .name = (char *)name,
          .producer_name = p->name,
          .producer_uid = p->ident.uid,
          .boot_time_ns = now_boottime_ns(),
          .delay_ms = t->has_stop_delay_ms ? t->stop_delay_ms : 0,
      };
      /* In the trace, as Perfetto records it: which trigger, from whom,
       * when; and kept for the session's next clone. */
      tg__readout_trigger(s, TG_READOUT_TRIGGER, &info);
      if (tg__session_triggers_add(s, &info) < 0)
        TG_WARN("session %llu: out of memory keeping trigger '%s' for its "
                "next clone", (unsigned long long)s->id, name);
      tg__readout_clock_snapshot(s);
      trigger_fired(s, &info);
      break;
    }
  }
}

static void on_trigger_timeout(uv_timer_t *t) {
  tg_session_t *s = t->data;
  if (s->trigger_state != TG_TRIG_WAITING) return;
  s->trigger_state = TG_TRIG_TIMED_OUT;
  TG_INFO("session %llu: no trigger within trigger_timeout_ms; ending",
          (unsigned long long)s->id);
  tg__session_disable(s);
}

/* Starts waiting for the session's trigger, bounded by trigger_timeout_ms
 * when it has one. */
static void arm_trigger_timeout(tg_session_t *s) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
  if (trigger_mode(s) ==
      PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__UNSPECIFIED)
    return;
  s->trigger_state = TG_TRIG_WAITING;
  if (tc->has_trigger_timeout_ms && tc->trigger_timeout_ms)
    uv_timer_start(&s->trigger_timer, on_trigger_timeout, tc->trigger_timeout_ms, 0);
}

/* --- producers going away ---------------------------------------------------- */

/* Producer ids come back once they wrap: a right kept for a departed
 * producer would be the next holder's of its id. */
static void revoke_rights(tg_session_t *s, uint32_t producer_id) {
  size_t kept = 0;
  for (size_t i = 0; i < s->n_rights; i++)
    if (s->rights[i].producer_id != producer_id)
      s->rights[kept++] = s->rights[i];
  s->n_rights = kept;
}

void tg__session_on_producer_gone(tg_service_t *svc, tg_producer_t *p) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    for (size_t i = 0; i < s->n_buffers; i++)
      tg_trace_buffer_producer_gone(s->buffers[i].tb, p->ident.producer_id);
    tg__session_flushes_producer_gone(s, p->ident.producer_id);
    revoke_rights(s, p->ident.producer_id);
  }
}

/* --- free ------------------------------------------------------------------------ */

static void maybe_release(tg_session_t *s) {
  if (!s->freeing || s->open_timers > 0) return;
  for (size_t i = 0; i < s->n_buffers; i++) tg_trace_buffer_free(s->buffers[i].tb);
  tg__readout_free(&s->readout);
  tg__session_matchers_free(&s->matchers);
  free(s->rights);
  free(s->config_bytes);
  free(s->detach_key);
  tg__session_triggers_free(s);
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
  tg__session_flushes_abandon(s);
  if (s->write_fd >= 0) close(s->write_fd);
  s->write_fd = -1;
  s->freeing = true;
  /* Consumers still connected (service shutdown) must not keep it. */
  if (s->observer.freed) s->observer.freed(s, s->observer.ctx);
  memset(&s->observer, 0, sizeof(s->observer));
  tg_list_remove(&s->node);
  s->svc->n_sessions--;
  TG_INFO("session %llu freed", (unsigned long long)s->id);
  uv_close((uv_handle_t *)&s->duration_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->trigger_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->period_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->file_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->stop_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->clear_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->lease_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->clock_timer, on_timer_closed);
  uv_close((uv_handle_t *)&s->start_timer, on_timer_closed);
  tg__session_triggers_close(s);
}
