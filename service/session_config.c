/* TraceConfig validation and producer name matching; see session_config.h. */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/name_regex.h"
#include "service/producer_port.h"
#include "service/readout_filter.h"
#include "service/session.h"
#include "service/session_config.h"

static void config_error(char *err, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void config_error(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

/* Compiles |pat| to match whole names only (as std::regex_match does in
 * Perfetto). Returns 0, -EINVAL (invalid pattern) or -ENOMEM. */
static int compile_whole_name(regex_t *re, const char *pat) {
  size_t n = strlen(pat);
  char *anchored = malloc(n + 5);
  if (!anchored) return -ENOMEM;
  snprintf(anchored, n + 5, "^(%s)$", pat);
  int rv = regcomp(re, anchored, REG_EXTENDED | REG_NOSUB);
  free(anchored);
  if (rv == 0) return 0;
  return rv == REG_ESPACE ? -ENOMEM : -EINVAL;
}

/* Whether the pattern |pat| of |field| did not compile; then says why in
 * |err|. */
static bool refused_pattern(const tg_name_matcher_t *m, const char *pat,
                            const char *field, char *err, size_t n) {
  if (m->compiled) return false;
  char why[256];
  if (m->over_budget)
    config_error(err, n, "%s: the config's producer name patterns together "
                 "cost more than %d (how a pattern's cost is counted: "
                 "docs/security.md, Limits)", field,
                 TG_NAME_REGEX_MAX_CONFIG_POSITIONS);
  else if (pat && tg_name_regex_check(pat, why, sizeof(why)) < 0)
    config_error(err, n, "%s: refused: %s", field, why);
  else
    config_error(err, n, "%s: not a valid regular expression", field);
  return true;
}

int tg__session_config_validate(tg_service_t *svc,
                                const Perfetto__Protos__TraceConfig *c,
                                const tg_session_matchers_t *m, int write_fd,
                                char *err, size_t n) {
  /* No buffers is a session that records nothing but its own packets (a
   * data source then has no buffer to target: refused below). */
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
    uint32_t target =
        d->config->has_target_buffer ? d->config->target_buffer : 0;
    if (target >= c->n_buffers) {
      config_error(err, n,
                   "data_sources[%zu].config.target_buffer: %u, but the config "
                   "has %zu buffer(s)",
                   i, target, c->n_buffers);
      return -EINVAL;
    }
    for (size_t r = 0; r < d->n_producer_name_regex_filter; r++) {
      char field[96];
      snprintf(field, sizeof(field),
               "data_sources[%zu].producer_name_regex_filter[%zu]", i, r);
      if (refused_pattern(&m->ds_regex[i][r], d->producer_name_regex_filter[r],
                          field, err, n))
        return -EINVAL;
    }
  }
  /* A filter that does not load refuses the config, as in Perfetto: a
   * trace recorded without it would keep what the user asked to remove.
   * The session builds its own (session.c); this one only checks. */
  tg_readout_filter_t *rf;
  int frv = tg__readout_filter_new(&rf, c, err, n);
  tg__readout_filter_free(rf);
  if (frv < 0) return frv;
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = c->trigger_config;
  if (tc && tc->has_trigger_timeout_ms &&
      tc->trigger_timeout_ms > TG_SERVICE_MAX_TRIGGER_TIMEOUT_MS) {
    config_error(err, n,
                 "trigger_config.trigger_timeout_ms: %u, over the limit of 7 "
                 "days (%llu)",
                 (unsigned)tc->trigger_timeout_ms,
                 (unsigned long long)TG_SERVICE_MAX_TRIGGER_TIMEOUT_MS);
    return -EINVAL;
  }
  for (size_t i = 0; tc && i < tc->n_triggers; i++) {
    const char *pat = tc->triggers[i]->producer_name_regex;
    if (!pat || !pat[0]) continue;
    char field[96];
    snprintf(field, sizeof(field),
             "trigger_config.triggers[%zu].producer_name_regex", i);
    if (refused_pattern(&m->trigger_regex[i], pat, field, err, n))
      return -EINVAL;
  }
  if (c->has_write_into_file && c->write_into_file && write_fd < 0) {
    config_error(err, n,
                 "write_into_file: set, but EnableTracing carried no file "
                 "descriptor");
    return -EINVAL;
  }
  /* Each session's entry in QueryServiceState must fit one reply: its
   * names are bounded (Perfetto's own are short identifiers). */
  const char *too_long =
      c->unique_session_name && strlen(c->unique_session_name) > TG_SESSION_NAME_MAX
          ? "unique_session_name"
      : c->bugreport_filename && strlen(c->bugreport_filename) > TG_SESSION_NAME_MAX
          ? "bugreport_filename"
          : NULL;
  if (too_long) {
    config_error(err, n, "%s: longer than %d bytes", too_long,
                 TG_SESSION_NAME_MAX);
    return -EINVAL;
  }
  if (c->unique_session_name && c->unique_session_name[0]) {
    tg_list_t *it, *tmp;
    tg_list_foreach_safe(it, tmp, &svc->sessions) {
      tg_session_t *o = TG_CONTAINER_OF(it, tg_session_t, node);
      const char *on = o->config->unique_session_name;
      /* A snapshot keeps its source's config but not its name. */
      if (!o->freeing && !o->cloned && on && !strcmp(on, c->unique_session_name)) {
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

/* --- matchers ---------------------------------------------------------------- */

/* An invalid pattern (possible after ChangeTraceConfig, which is not
 * validated) stays uncompiled and matches nothing, as before; so does one
 * past name_regex.h's limits, or past what is left of |budget|, the cost
 * the config's patterns may still take. */
static int matcher_compile(tg_name_matcher_t *m, const char *pat,
                           long *budget) {
  m->compiled = false;
  m->over_budget = false;
  if (!pat) return 0;
  char why[256];
  long cost = tg_name_regex_check(pat, why, sizeof(why));
  if (cost < 0) return 0;
  if (cost > *budget) {
    m->over_budget = true;
    return 0;
  }
  *budget -= cost;
  int rv = compile_whole_name(&m->re, pat);
  if (rv == -ENOMEM) return rv;
  m->compiled = rv == 0;
  return 0;
}

void tg__session_matchers_free(tg_session_matchers_t *m) {
  for (size_t i = 0; m->ds_regex && i < m->n_ds; i++) {
    for (size_t r = 0; m->ds_regex[i] && r < m->n_ds_regex[i]; r++)
      if (m->ds_regex[i][r].compiled) regfree(&m->ds_regex[i][r].re);
    free(m->ds_regex[i]);
  }
  free(m->ds_regex);
  free(m->n_ds_regex);
  for (size_t i = 0; m->trigger_regex && i < m->n_triggers; i++)
    if (m->trigger_regex[i].compiled) regfree(&m->trigger_regex[i].re);
  free(m->trigger_regex);
  memset(m, 0, sizeof(*m));
}

int tg__session_matchers_compile(tg_session_matchers_t *m,
                                 const Perfetto__Protos__TraceConfig *c) {
  memset(m, 0, sizeof(*m));
  const Perfetto__Protos__TraceConfig__TriggerConfig *tc = c->trigger_config;
  /* Counts are set as arrays fill, so that free releases what exists. */
  m->ds_regex = calloc(c->n_data_sources + 1, sizeof(*m->ds_regex));
  m->n_ds_regex = calloc(c->n_data_sources + 1, sizeof(*m->n_ds_regex));
  m->trigger_regex = calloc((tc ? tc->n_triggers : 0) + 1, sizeof(*m->trigger_regex));
  if (!m->ds_regex || !m->n_ds_regex || !m->trigger_regex) goto oom;
  m->n_ds = c->n_data_sources;
  long budget = TG_NAME_REGEX_MAX_CONFIG_POSITIONS;
  for (size_t i = 0; i < c->n_data_sources; i++) {
    const Perfetto__Protos__TraceConfig__DataSource *d = c->data_sources[i];
    m->ds_regex[i] = calloc(d->n_producer_name_regex_filter + 1, sizeof(**m->ds_regex));
    if (!m->ds_regex[i]) goto oom;
    m->n_ds_regex[i] = d->n_producer_name_regex_filter;
    for (size_t r = 0; r < d->n_producer_name_regex_filter; r++)
      if (matcher_compile(&m->ds_regex[i][r], d->producer_name_regex_filter[r],
                          &budget) < 0)
        goto oom;
  }
  m->n_triggers = tc ? tc->n_triggers : 0;
  for (size_t i = 0; i < m->n_triggers; i++) {
    const char *pat = tc->triggers[i]->producer_name_regex;
    /* An empty pattern means any producer: nothing to compile. */
    if (pat && pat[0] && matcher_compile(&m->trigger_regex[i], pat, &budget) < 0)
      goto oom;
  }
  return 0;
oom:
  tg__session_matchers_free(m);
  return -ENOMEM;
}

static bool matcher_matches(const tg_name_matcher_t *m, const char *name) {
  return m->compiled && regexec(&m->re, name, 0, NULL, 0) == 0;
}

bool tg__session_config_producer_matches(const tg_session_t *s, size_t cfg_idx,
                                         const tg_producer_t *p) {
  const Perfetto__Protos__TraceConfig__DataSource *ds =
      s->config->data_sources[cfg_idx];
  const char *name = p->name ? p->name : "";
  if (ds->n_producer_name_filter == 0 && ds->n_producer_name_regex_filter == 0)
    return true;
  for (size_t i = 0; i < ds->n_producer_name_filter; i++)
    if (ds->producer_name_filter[i] && !strcmp(ds->producer_name_filter[i], name))
      return true;
  for (size_t i = 0; i < ds->n_producer_name_regex_filter; i++)
    if (matcher_matches(&s->matchers.ds_regex[cfg_idx][i], name)) return true;
  return false;
}

bool tg__session_config_trigger_producer_ok(const tg_session_t *s, size_t idx,
                                            const tg_producer_t *p) {
  const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t =
      s->config->trigger_config->triggers[idx];
  if (!t->producer_name_regex || !t->producer_name_regex[0]) return true;
  return matcher_matches(&s->matchers.trigger_regex[idx], p->name ? p->name : "");
}

/* Swaps the producer filters of the entries of |a| and |b| that name the
 * same data source (the first of |b| per entry of |a|): applied twice, it
 * undoes itself. */
static void swap_filters(Perfetto__Protos__TraceConfig *a,
                         Perfetto__Protos__TraceConfig *b) {
  for (size_t i = 0; i < a->n_data_sources; i++) {
    Perfetto__Protos__TraceConfig__DataSource *od = a->data_sources[i];
    for (size_t j = 0; j < b->n_data_sources; j++) {
      Perfetto__Protos__TraceConfig__DataSource *nd = b->data_sources[j];
      if (!od->config || !nd->config || !od->config->name || !nd->config->name ||
          strcmp(od->config->name, nd->config->name))
        continue;
#define SWAP(x, y) do { __typeof__(x) t_ = (x); (x) = (y); (y) = t_; } while (0)
      SWAP(od->n_producer_name_filter, nd->n_producer_name_filter);
      SWAP(od->producer_name_filter, nd->producer_name_filter);
      SWAP(od->n_producer_name_regex_filter, nd->n_producer_name_regex_filter);
      SWAP(od->producer_name_regex_filter, nd->producer_name_regex_filter);
#undef SWAP
      break;
    }
  }
}

int tg__session_config_change_filters(tg_session_t *s,
                                      Perfetto__Protos__TraceConfig *neu) {
  swap_filters(s->config, neu);
  tg_session_matchers_t m;
  if (tg__session_matchers_compile(&m, s->config) < 0) {
    swap_filters(s->config, neu);
    return -ENOMEM;
  }
  tg__session_matchers_free(&s->matchers);
  s->matchers = m;
  return 0;
}
