/* A data source a host did not run as asked: see ds_problem.h. */
#include "consumer/fleet/ds_problem.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

#define FTRACE_DS "linux.ftrace"
#define PERF_DS "linux.perf"

static const struct {
  const char *name;
  tg_notice_t code;
} kReasons[TG_DS_REASON_COUNT] = {
    [TG_DS_NOT_STARTED] = {"not_started", TG_N_DS_NOT_STARTED},
    [TG_DS_EVENTS_REFUSED] = {"events_refused", TG_N_DS_EVENTS_REFUSED},
    [TG_DS_NOT_OFFERED] = {"not_offered", TG_N_DS_NOT_OFFERED},
};

const char *tg_ds_reason_name(tg_ds_reason_t r) {
  return (unsigned)r < TG_DS_REASON_COUNT ? kReasons[r].name : "?";
}

tg_notice_t tg_ds_reason_code(tg_ds_reason_t r) {
  return (unsigned)r < TG_DS_REASON_COUNT ? kReasons[r].code : TG_N_NONE;
}

bool tg_ds_reason_fails(tg_ds_reason_t r) {
  return r == TG_DS_NOT_STARTED || r == TG_DS_EVENTS_REFUSED;
}

size_t tg_ds_problems_failures(const tg_ds_problems_t *ps,
                               const tg_ds_problem_t **first) {
  size_t n = 0;
  if (first) *first = NULL;
  for (size_t i = 0; i < ps->n; i++) {
    if (!tg_ds_reason_fails(ps->items[i].reason)) continue;
    if (first && !n) *first = &ps->items[i];
    n++;
  }
  return n;
}

/* Control bytes from a host would reach a terminal or a log line as they
 * are: each becomes '?'. Bytes past 0x7f stay (JSON makes them valid). */
static void tame(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

void tg_ds_problems_add(tg_ds_problems_t *ps, tg_ds_reason_t reason,
                        const char *data_source, const uint64_t *events,
                        const char *fmt, ...) {
  if (ps->n == TG_DS_PROBLEMS_MAX) {
    ps->omitted++;
    return;
  }
  tg_ds_problem_t *p = &ps->items[ps->n++];
  memset(p, 0, sizeof(*p));
  p->reason = reason;
  snprintf(p->data_source, sizeof(p->data_source), "%s",
           data_source ? data_source : "");
  tame(p->data_source);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->why, sizeof(p->why), fmt, ap);
  va_end(ap);
  tame(p->why);
  if (events) {
    p->has_events = true;
    p->events = *events;
  }
}

/* "a, b, c and 2 more" from the names the scan kept, for |total|
 * events. */
static void name_list(const tg_ftrace_loss_t *l, uint64_t total, char *out,
                      size_t cap) {
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < l->n_names && len < cap; i++) {
    int k = snprintf(out + len, cap - len, "%s%s", i ? ", " : "", l->names[i]);
    if (k < 0) break;
    len += (size_t)k;
  }
  if (len < cap && total > l->n_names)
    snprintf(out + len, cap - len, "%s%llu more", l->n_names ? " and " : "",
             (unsigned long long)(total - l->n_names));
}

void tg_ds_problems_from_ftrace(tg_ds_problems_t *ps, const tg_ftrace_loss_t *l) {
  tg_ftrace_setup_t s;
  tg_ftrace_setup_summary(l, &s);
  char names[4 * (TG_FTRACE_SETUP_NAME_MAX + 2) + 32];
  if (s.down) {
    name_list(l, s.down_events + s.refused, names, sizeof(names));
    tg_ds_problems_add(
        ps, TG_DS_NOT_STARTED, FTRACE_DS, &s.down_events,
        "did not start: no kernel ring buffer was opened, events refused: "
        "%llu (all it asked for); tracefs cannot be opened "
        "(tracegate-probes needs root) or the kernel has none, the probes' "
        "log says which (%s)%s%s; events: %s",
        (unsigned long long)s.down_events, TG_NOTE(PROBES_FTRACE_UNAVAILABLE),
        s.atrace ? "; atrace: " : "", s.atrace ? l->atrace : "", names);
  } else if (s.partial || s.atrace) {
    name_list(l, s.refused, names, sizeof(names));
    tg_ds_problems_add(ps, TG_DS_EVENTS_REFUSED, FTRACE_DS, &s.refused,
                       "runs without some of the events it asked for (%llu): "
                       "this kernel has no such event, or refused to enable "
                       "it%s%s; events: %s",
                       (unsigned long long)s.refused,
                       s.atrace ? "; atrace: " : "", s.atrace ? l->atrace : "",
                       names);
  }
  for (size_t i = 0; i < l->n_not_started; i++) {
    const tg_ds_not_started_t *e = &l->not_started[i];
    /* linux.ftrace that opened no ring buffer is said above, with why. */
    if (s.down && !strcmp(e->data_source, FTRACE_DS)) continue;
    bool perf = !strcmp(e->data_source, PERF_DS);
    tg_ds_problems_add(
        ps, TG_DS_NOT_STARTED, e->data_source, NULL,
        "did not start: its producer %s did not confirm its start within the "
        "service's start timeout or before the session ended (the trace's "
        "slow_starting_data_sources); see the producer's log on the "
        "host%s%s%s%s%s",
        e->producer[0] ? e->producer : "(unnamed)",
        perf ? " (tracegate-perf: " : "",
        perf ? TG_NOTE(PERF_CONFIG_REFUSED) : "",
        perf ? " config refused, " : "", perf ? TG_NOTE(PERF_OPEN_FAILED) : "",
        perf ? " perf_event_open refused, e.g. without CAP_PERFMON)" : "");
  }
  if (l->not_started_omitted) {
    ps->omitted = ps->omitted > UINT64_MAX - l->not_started_omitted
                      ? UINT64_MAX
                      : ps->omitted + l->not_started_omitted;
  }
}

static bool registered(const Perfetto__Protos__TracingServiceState *st,
                       const char *name) {
  for (size_t i = 0; i < st->n_data_sources; i++) {
    const Perfetto__Protos__TracingServiceState__DataSource *d =
        st->data_sources[i];
    if (d && d->ds_descriptor && d->ds_descriptor->name &&
        !strcmp(d->ds_descriptor->name, name))
      return true;
  }
  return false;
}

void tg_ds_problems_not_offered(tg_ds_problems_t *ps,
                                const Perfetto__Protos__TraceConfig *cfg,
                                const Perfetto__Protos__TracingServiceState *st) {
  for (size_t i = 0; i < cfg->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceConfig *dsc =
        cfg->data_sources[i] ? cfg->data_sources[i]->config : NULL;
    if (!dsc || !dsc->name || registered(st, dsc->name)) continue;
    tg_ds_problems_add(ps, TG_DS_NOT_OFFERED, dsc->name, NULL,
                       "no producer on the host offers it: it records "
                       "nothing unless one registers it");
  }
}

json_t *tg_ds_problem_json(const tg_ds_problem_t *p) {
  const char *tag = tg_notice_tag(tg_ds_reason_code(p->reason));
  char code[16];
  /* "[TG-7010]" -> "TG-7010" */
  snprintf(code, sizeof(code), "%.*s", (int)strlen(tag) - 2, tag + 1);
  json_t *o = json_pack("{s:s, s:o, s:s, s:o, s:s}", "kind", "data_source",
                        "data_source", tg_json_text(p->data_source), "code",
                        code, "why", tg_json_text(p->why), "reason",
                        tg_ds_reason_name(p->reason));
  if (o && p->has_events) o = tg_json_put(o, "events", tg_json_u64(p->events));
  return o;
}

json_t *tg_ds_problems_json(const tg_ds_problems_t *ps) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < ps->n; i++)
    a = tg_json_push(a, tg_ds_problem_json(&ps->items[i]));
  return a;
}

int tg_ds_problems_text(const tg_ds_problems_t *ps, char *out, size_t cap) {
  return tg_problems_text(NULL, ps, out, cap);
}

int tg_problems_text(json_t *lead, const tg_ds_problems_t *ps, char *out,
                     size_t cap) {
  if (cap < 3) return -ENOSPC;
  size_t n_lead = json_array_size(lead); /* 0 for NULL */
  /* The longest prefix of the list that fits: the list is cut, never the
   * JSON. */
  for (size_t keep = n_lead + ps->n + 1; keep-- > 0;) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < keep && i < n_lead; i++)
      a = tg_json_push(a, json_incref(json_array_get(lead, i)));
    for (size_t i = n_lead; a && i < keep; i++)
      a = tg_json_push(a, tg_ds_problem_json(&ps->items[i - n_lead]));
    if (!a) return -ENOMEM;
    char *text = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    if (!text) return -ENOMEM;
    size_t len = strlen(text);
    if (len < cap) {
      memcpy(out, text, len + 1);
      free(text);
      return (int)keep;
    }
    free(text);
  }
  return -ENOSPC; /* not reached: "[]" fits in 3 bytes */
}

const char *tg_ds_problem_line(const tg_ds_problem_t *p, char *buf, size_t cap) {
  if (!cap) return "";
  snprintf(buf, cap, "%s %s: %s", tg_notice_tag(tg_ds_reason_code(p->reason)),
           p->data_source, p->why);
  return buf;
}
