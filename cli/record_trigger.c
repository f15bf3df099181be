/* `tracegate record` with a START_TRACING trigger: until a trigger fires
 * the session is armed but not tracing, so the progress line says what it
 * waits for instead of counting towards the duration, and a session that
 * ends without it (trigger_timeout_ms) says the trigger never fired.
 *
 * The start is learnt from the service's ObservableEvents: the session's
 * data sources started (or all of them, when it has none). The same one
 * observer takes CLONE_SNAPSHOT hits (handed to record_snapshot.c) and
 * tells a --background-wait parent that every data source started.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/record.h"

static bool waits_for_start_trigger(const Perfetto__Protos__TraceConfig *cfg) {
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc =
      cfg ? cfg->trigger_config : NULL;
  return tc && tc->n_triggers > 0 && tc->has_trigger_mode &&
         tc->trigger_mode ==
             PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING;
}

void record_background_started(record_t *r) {
  if (r->bg_fd < 0) return;
  ssize_t n = write(r->bg_fd, "S", 1);
  (void)n; /* a parent that went away hears nothing either way */
  close(r->bg_fd);
  r->bg_fd = -1;
}

static void on_events(tg_consumer_t *c, void *ctx, int status, const char *msg,
                      bool has_more, const Perfetto__Protos__ObservableEvents *ev) {
  (void)c, (void)msg, (void)has_more;
  record_t *r = ctx;
  if (status || !ev) return;
  if (ev->clone_trigger_hit && r->snapshot_watch)
    record_snapshot_hit(r, ev->clone_trigger_hit);
  bool started = ev->has_all_data_sources_started && ev->all_data_sources_started;
  /* A START_TRACING session's first data source starting is the trigger
   * having fired (the service starts them all together). */
  for (size_t i = 0; r->trigger_wait && i < ev->n_instance_state_changes; i++)
    started |= ev->instance_state_changes[i]->state ==
               PERFETTO__PROTOS__OBSERVABLE_EVENTS__DATA_SOURCE_INSTANCE_STATE__DATA_SOURCE_INSTANCE_STATE_STARTED;
  if (!started) return;
  if (ev->has_all_data_sources_started && ev->all_data_sources_started)
    record_background_started(r);
  if (r->trigger_wait && !r->trigger_fired) {
    r->trigger_fired = true;
    r->t0 = cli_now_ms(); /* the duration counts from the start */
  }
}

/* One ObserveEvents for everything the recording watches: a service keeps
 * one set of event types per connection. */
void record_trigger_watch(record_t *r, const Perfetto__Protos__TraceConfig *cfg) {
  r->snapshot_watch = record_snapshot_mode(cfg) && r->o.out;
  bool start = !r->snapshot_watch && waits_for_start_trigger(cfg);
  Perfetto__Protos__ObservableEvents__Type types[3];
  size_t n = 0;
  if (r->snapshot_watch)
    types[n++] = PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT;
  if (start)
    types[n++] = PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_DATA_SOURCES_INSTANCES;
  if (start || r->bg_fd >= 0)
    types[n++] = PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED;
  if (start) {
    const Perfetto__Protos__TraceConfig__TriggerConfig *tc = cfg->trigger_config;
    size_t k = 0;
    r->trigger_names[0] = 0;
    for (size_t i = 0; i < tc->n_triggers && k < sizeof(r->trigger_names); i++) {
      const char *name = tc->triggers[i]->name ? tc->triggers[i]->name : "";
      char safe[128];
      tg_printable(safe, sizeof(safe), name);
      int w = snprintf(r->trigger_names + k, sizeof(r->trigger_names) - k,
                       "%s'%s'",
                       i == 0 ? "" : i + 1 == tc->n_triggers ? " or " : ", ",
                       safe);
      if (w < 0) break;
      k += (size_t)w;
    }
    r->trigger_timeout_ms =
        tc->has_trigger_timeout_ms ? tc->trigger_timeout_ms : 0;
    r->trigger_wait = true;
  }
  if (n == 0) return;
  if (tg_consumer_observe_events(r->conn.c, types, n, on_events, r) == 0)
    return;
  /* Unwatched: the plain progress line, no snapshots, and a parent that
   * hears the pipe close. */
  r->trigger_wait = false;
  if (r->snapshot_watch)
    fprintf(stderr, CLI_PROG ": %s warning: cannot watch for CLONE_SNAPSHOT "
            "triggers: no snapshots will be taken\n", TG_NOTE(SNAPSHOT_FAILED));
  if (r->bg_fd >= 0) {
    close(r->bg_fd);
    r->bg_fd = -1;
  }
}

bool record_trigger_progress(record_t *r) {
  if (!r->trigger_wait || r->trigger_fired) return false;
  char el[32], to[48] = "";
  cli_format_ms(el, sizeof(el), cli_now_ms() - r->t0);
  if (r->trigger_timeout_ms) {
    char t[32];
    cli_format_ms(t, sizeof(t), r->trigger_timeout_ms);
    snprintf(to, sizeof(to), ", timeout %s", t);
  }
  fprintf(stderr, "\r\033[K" CLI_PROG ": %s waiting for trigger %s (%s%s)",
          TG_NOTE(TRIGGER_WAITING), r->trigger_names, el, to);
  fflush(stderr);
  return true;
}

bool record_trigger_never_fired(record_t *r) {
  if (!r->trigger_wait || r->trigger_fired) return false;
  char to[32] = "";
  if (r->trigger_timeout_ms) cli_format_ms(to, sizeof(to), r->trigger_timeout_ms);
  fprintf(stderr, CLI_PROG ": %s the trigger never fired: no %s within %s; "
          "nothing was traced\n", TG_NOTE(TRIGGER_NEVER_FIRED), r->trigger_names,
          to[0] ? to : "the session's life");
  return true;
}
