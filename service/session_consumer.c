/* A session's consumers: a clone for another consumer (CloneSession),
 * and the consumer binding that survives its connection (Detach, Attach,
 * the disconnect lease). See session.h.
 *
 * Owns: nothing of its own; it changes a session's consumer, detach key
 * and lease timer, and makes clones. Must never touch a session's data
 * sources or producers (session.c's).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "service/readout.h"
#include "service/session.h"
#include "service/trace_buffer.h"

/* --- clone --------------------------------------------------------------------- */

bool tg__session_clone_allowed(const tg_session_t *s, uid_t uid) {
  return s->consumer_uid == uid;
}

tg_session_t *tg__session_find(tg_service_t *svc, uint64_t id, const char *name) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    if (s->freeing) continue;
    if (name ? s->config->unique_session_name &&
                   !strcmp(s->config->unique_session_name, name) && !s->cloned
             : s->id == id)
      return s;
  }
  return NULL;
}

tg_session_t *tg__session_clone(tg_session_t *src, tg_ipc_host_conn_t *conn,
                                const tg_trigger_info_t *trigger,
                                bool skip_trace_filter, char *err,
                                size_t errlen) {
  tg_service_t *svc = src->svc;
  tg_session_t *s = calloc(1, sizeof(*s));
  if (!s) goto oom;
  s->svc = svc;
  s->write_fd = -1;
  s->observer = src->observer;
  tg_list_init(&s->instances);
  tg_list_init(&s->clone_waits);
  /* A clone never starts: no start overdue to name again at a flush. */
  tg__session_flushes_init(&s->flushes, NULL);
  tg__readout_init(&s->readout);
  /* Its own copy of the config: the source may be freed first. */
  s->config = perfetto__protos__trace_config__unpack(NULL, src->config_len,
                                                     src->config_bytes);
  s->config_bytes = malloc(src->config_len ? src->config_len : 1);
  if (!s->config || !s->config_bytes) goto oom;
  memcpy(s->config_bytes, src->config_bytes, src->config_len);
  s->config_len = src->config_len;
  if (tg__session_matchers_compile(&s->matchers, s->config) < 0) {
    memset(&s->matchers, 0, sizeof(s->matchers));
    goto oom;
  }
  /* The source's filter, stats from zero, unless the clone skips it. */
  if (src->readout.filter && !skip_trace_filter &&
      !(s->readout.filter = tg__readout_filter_dup(src->readout.filter)))
    goto oom;
  for (size_t i = 0; i < src->n_buffers; i++) {
    s->buffers[i].tb = tg_trace_buffer_clone(src->buffers[i].tb);
    if (!s->buffers[i].tb) goto oom;
    s->n_buffers = i + 1;
    /* An id of its own, though no producer ever writes into a snapshot:
     * ids stay unique among the buffers a query lists. */
    s->buffers[i].global_id = tg__session_next_buffer_id(svc, s);
    if (!s->buffers[i].global_id) {
      snprintf(err, errlen, "all 65535 buffer ids are in use");
      goto fail;
    }
  }
  s->id = ++svc->last_session_id;
  s->consumer = conn;
  s->consumer_uid = conn->chan.peer_uid;
  s->cloned = true;
  tg__session_timers_init(s);
  /* Never started: readable at once, as a session that ended. */
  tg__session_set_state(s, TG_SESSION_DISABLED, "a clone");
  tg__readout_preamble(s);
  /* The source's report of instances that have not started, once its
   * start timeout ran out: a snapshot of a ring says what the ring runs
   * without, however long ago the ring's own report was written. */
  if (src->start_overdue) tg__session_report_not_started(src, s);
  if (trigger) tg__readout_trigger(s, TG_READOUT_CLONE_SNAPSHOT_TRIGGER, trigger);
  /* As Perfetto: a CLONE_SNAPSHOT session snapshotted for hours would
   * otherwise repeat every old trigger in each snapshot. */
  tg__session_triggers_move(src, s);
  tg_list_insert_tail(&svc->sessions, &s->node);
  svc->n_sessions++;
  TG_INFO("session %llu cloned from session %llu", (unsigned long long)s->id,
          (unsigned long long)src->id);
  return s;

oom:
  snprintf(err, errlen, "out of memory");
fail:
  if (s) {
    for (size_t i = 0; i < s->n_buffers; i++) tg_trace_buffer_free(s->buffers[i].tb);
    tg__readout_free(&s->readout);
    tg__session_matchers_free(&s->matchers);
    free(s->config_bytes);
    if (s->config) perfetto__protos__trace_config__free_unpacked(s->config, NULL);
    free(s);
  }
  return NULL;
}

tg_session_t *tg__session_find_for_bugreport(tg_service_t *svc, uid_t uid) {
  tg_session_t *best = NULL;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    int32_t score = s->config->has_bugreport_score ? s->config->bugreport_score : 0;
    /* A session is no bugreport's unless its config says so. */
    if (s->freeing || s->state != TG_SESSION_STARTED || score <= 0 ||
        !tg__session_clone_allowed(s, uid))
      continue;
    if (!best || score > best->config->bugreport_score) best = s;
  }
  return best;
}

/* --- consumer binding ------------------------------------------------------------- */

int tg__session_detach(tg_session_t *s, const char *key) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &s->svc->sessions) {
    tg_session_t *o = TG_CONTAINER_OF(it, tg_session_t, node);
    if (o->detach_key && o->consumer_uid == s->consumer_uid &&
        !strcmp(o->detach_key, key))
      return -EEXIST;
  }
  char *copy = strdup(key);
  if (!copy) return -ENOMEM;
  s->detach_key = copy;
  s->consumer = NULL;
  TG_INFO("session %llu detached", (unsigned long long)s->id);
  return 0;
}

tg_session_t *tg__session_attach(tg_service_t *svc, const char *key,
                                 tg_ipc_host_conn_t *conn) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    /* Same key and same uid: one user cannot take another's session. */
    if (s->detach_key && !s->consumer && !strcmp(s->detach_key, key) &&
        s->consumer_uid == conn->chan.peer_uid) {
      free(s->detach_key);
      s->detach_key = NULL;
      s->consumer = conn;
      uv_timer_stop(&s->lease_timer);
      s->lease_end_ms = 0;
      TG_INFO("session %llu attached", (unsigned long long)s->id);
      return s;
    }
  }
  return NULL;
}

uint64_t tg__session_lease_left_ms(const tg_session_t *s, uint64_t now_ms) {
  if (s->consumer || !s->detach_key || s->freeing || !s->lease_end_ms)
    return UINT64_MAX;
  return now_ms >= s->lease_end_ms ? 0 : s->lease_end_ms - now_ms;
}

/* The timer only wakes the decision: its loop time and the service's
 * clock need not agree, so an early wake sleeps for what is left. */
static void on_lease_timer(uv_timer_t *t) {
  tg_session_t *s = t->data;
  uint64_t left = tg__session_lease_left_ms(s, tg_clock_ms(s->svc->opt.clock));
  if (left == UINT64_MAX) return;
  if (left) {
    uv_timer_start(&s->lease_timer, on_lease_timer, left, 0);
    return;
  }
  TG_INFO("session %llu: disconnect lease ran out with nobody attached; "
          "freeing it", (unsigned long long)s->id);
  tg__session_free(s);
}

void tg__session_lease_start(tg_session_t *s, uint64_t lease_ms) {
  if (s->freeing || s->consumer || !s->detach_key) return;
  uint64_t now = tg_clock_ms(s->svc->opt.clock);
  /* 0 is "no lease": a lease ending at the clock's origin ends at 1. */
  s->lease_end_ms = now + lease_ms ? now + lease_ms : 1;
  uv_timer_start(&s->lease_timer, on_lease_timer, lease_ms, 0);
  TG_INFO("session %llu kept for %llu ms under its disconnect lease",
          (unsigned long long)s->id, (unsigned long long)lease_ms);
}

void tg__session_consumer_gone(tg_service_t *svc, tg_ipc_host_conn_t *conn) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &svc->sessions) {
    tg_session_t *s = TG_CONTAINER_OF(it, tg_session_t, node);
    if (s->consumer == conn) s->consumer = NULL;
  }
}
