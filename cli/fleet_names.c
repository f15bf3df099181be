/* Data source names a fleet's hosts have not registered, as
 * record_check.c does for a local recording: a typo, or a producer that
 * runs on some hosts only, records nothing there, silently.
 *
 * Each host's QueryServiceState answer (the relay passes the data sources
 * through; it scopes the sessions only) is kept as one byte per host and
 * data source. Once every host has answered or failed, each missing name
 * is said once: the hosts that lack it, all of them when they are few,
 * else a count and the first few, so that a thousand hosts give one line
 * per name, not one per host. Warnings, and each host's summary names
 * them as problems (consumer/fleet/ds_problem.h) for its exit status: a producer
 * may still register after the session started. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/printable.h"
#include "cli/fleet.h"

/* Up to this many hosts are named; beyond, "N of M hosts (a, b, c, ...)". */
#define NAMES_LISTED 3

static size_t n_ds(const fleet_t *f) {
  return f->pcfg ? f->pcfg->n_data_sources : 0;
}

int fleet_names_init(fleet_t *f, const Perfetto__Protos__TraceConfig *cfg) {
  f->pcfg = cfg;
  size_t m = n_ds(f);
  if (!m) return 0;
  f->ds_missing = calloc(f->n, m);
  f->ds_near = calloc(m, sizeof(*f->ds_near));
  if (!f->ds_missing || !f->ds_near) {
    fleet_names_free(f);
    return -ENOMEM;
  }
  return 0;
}

void fleet_names_free(fleet_t *f) {
  for (size_t i = 0; f->ds_near && i < n_ds(f); i++) free(f->ds_near[i]);
  free(f->ds_near);
  free(f->ds_missing);
  f->ds_near = NULL;
  f->ds_missing = NULL;
  f->pcfg = NULL;
}

typedef struct host_ctx {
  fleet_t *f;
  size_t host;
} host_ctx_t;

static void note_missing(void *ctx, size_t index, const char *name,
                         const char *near) {
  (void)name;
  host_ctx_t *hc = ctx;
  fleet_t *f = hc->f;
  if (index >= n_ds(f)) return;
  f->ds_missing[hc->host * n_ds(f) + index] = 1;
  /* The first host's suggestions stand for all: they are alike. */
  if (!f->ds_near[index] && near[0]) f->ds_near[index] = strdup(near);
}

static const char *ds_name(const fleet_t *f, size_t i) {
  const Perfetto__Protos__DataSourceConfig *d = f->pcfg->data_sources[i]->config;
  return d && d->name ? d->name : NULL;
}

/* The same name configured twice is said once, at its first index. */
static bool first_of_its_name(const fleet_t *f, size_t i) {
  const char *n = ds_name(f, i);
  for (size_t j = 0; n && j < i; j++) {
    const char *o = ds_name(f, j);
    if (o && !strcmp(o, n)) return false;
  }
  return n != NULL;
}

static void say_name(fleet_t *f, size_t i) {
  size_t m = n_ds(f), lacking = 0;
  for (size_t k = 0; k < f->n; k++) lacking += f->ds_missing[k * m + i];
  if (!lacking) return;
  char hosts[NAMES_LISTED * 80 + 64];
  size_t off = 0, listed = 0;
  hosts[0] = 0;
  for (size_t k = 0; k < f->n && listed < NAMES_LISTED; k++) {
    if (!f->ds_missing[k * m + i]) continue;
    off += (size_t)snprintf(hosts + off, sizeof(hosts) - off, "%s%s",
                            listed ? ", " : "", f->hosts[k].t->spec);
    if (off >= sizeof(hosts)) off = sizeof(hosts) - 1;
    listed++;
  }
  char shown[256];
  tg_printable(shown, sizeof(shown), ds_name(f, i));
  const char *near = f->ds_near[i] ? f->ds_near[i] : "";
  if (lacking <= NAMES_LISTED)
    fleet_say(f, TG_N_UNKNOWN_DATA_SOURCE,
              "warning: the data source '%s' is not registered on %s%s "
              "(yet: it records nothing there unless a producer registers it)%s",
              shown, lacking == f->n && f->n > 1 ? "any host: " : "", hosts, near);
  else
    fleet_say(f, TG_N_UNKNOWN_DATA_SOURCE,
              "warning: the data source '%s' is not registered on %zu of "
              "%zu hosts (%s, ...) (yet: it records nothing there unless a "
              "producer registers it)%s", shown, lacking, f->n, hosts, near);
}

void fleet_names_record(fleet_t *f, fleet_host_t *h,
                        const Perfetto__Protos__TracingServiceState *st) {
  if (h->names_checked || h->names_recorded || !n_ds(f)) return;
  h->names_recorded = true;
  host_ctx_t hc = {f, h->core.index};
  record_missing_names(f->pcfg, st, note_missing, &hc);
}

void fleet_names_host(fleet_t *f, fleet_host_t *h,
                      const Perfetto__Protos__TracingServiceState *st) {
  if (h->names_checked || !n_ds(f)) return;
  if (st) fleet_names_record(f, h, st);
  h->names_checked = true;
  if (++f->names_checked < f->n) return;
  for (size_t i = 0; i < n_ds(f); i++)
    if (first_of_its_name(f, i)) say_name(f, i);
}

void fleet_names_problems(const fleet_t *f, size_t host, tg_ds_problems_t *ps) {
  size_t m = n_ds(f);
  if (!f->ds_missing || host >= f->n) return;
  for (size_t i = 0; i < m; i++) {
    if (!f->ds_missing[host * m + i]) continue;
    const Perfetto__Protos__DataSourceConfig *dsc =
        f->pcfg->data_sources[i]->config;
    tg_ds_problems_add(ps, TG_DS_NOT_OFFERED,
                       dsc && dsc->name ? dsc->name : "?", NULL,
                       "no producer on the host offered it when the session "
                       "was prepared: it records nothing unless one "
                       "registers it");
  }
}
