/* What `tracegate record` says before it enables a config: data source
 * names that no producer registered (a typo records nothing, silently),
 * with the registered names closest to each, and config fields that
 * tracegate-probes does not act on.
 *
 * Only warnings: a producer may register its data source after the
 * session started (the service then starts it), so an unknown name is
 * not an error. The unacted fields come from tg_probes_unacted_fields()
 * (abi/config_fields.h), the table tracegate-probes warns from too. */
#include <stdlib.h>
#include <string.h>

#include "abi/config_fields.h"
#include "cli/record.h"

#define MAX_SUGGESTIONS 3
#define NAME_MAX_LEN 128 /* longer names are not compared: none is close */

/* Levenshtein distance of |a| and |b| (both at most NAME_MAX_LEN). */
static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t row[NAME_MAX_LEN + 1];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

static bool registered(const Perfetto__Protos__TracingServiceState *st,
                       const char *name) {
  for (size_t i = 0; i < st->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceDescriptor *d = st->data_sources[i]->ds_descriptor;
    if (d && d->name && !strcmp(d->name, name)) return true;
  }
  return false;
}

/* "did you mean: a, b?" with the registered names within a third of the
 * name's length (at least 2) edits, closest first; "" when none is. */
static void suggestions(const Perfetto__Protos__TracingServiceState *st,
                        const char *name, char *out, size_t cap) {
  out[0] = 0;
  size_t len = strlen(name);
  if (len > NAME_MAX_LEN) return;
  size_t limit = len / 3 > 2 ? len / 3 : 2;
  const char *best[MAX_SUGGESTIONS];
  size_t dist[MAX_SUGGESTIONS], n = 0;
  for (size_t i = 0; i < st->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceDescriptor *d = st->data_sources[i]->ds_descriptor;
    if (!d || !d->name || strlen(d->name) > NAME_MAX_LEN) continue;
    size_t dd = edit_distance(name, d->name);
    if (dd > limit) continue;
    bool dup = false;
    for (size_t k = 0; k < n; k++) dup |= !strcmp(best[k], d->name);
    if (dup) continue;
    /* Insert in order of distance, keeping the closest few. */
    size_t at = n;
    while (at > 0 && dist[at - 1] > dd) at--;
    if (at >= MAX_SUGGESTIONS) continue;
    if (n < MAX_SUGGESTIONS) n++;
    for (size_t k = n - 1; k > at; k--) {
      best[k] = best[k - 1];
      dist[k] = dist[k - 1];
    }
    best[at] = d->name;
    dist[at] = dd;
  }
  size_t off = 0;
  for (size_t k = 0; k < n && off < cap; k++) {
    char shown[NAME_MAX_LEN + 1];
    tg_printable(shown, sizeof(shown), best[k]);
    off += (size_t)snprintf(out + off, cap - off, "%s%s", k ? ", " : "; did you mean: ",
                            shown);
  }
  if (n && off < cap) snprintf(out + off, cap - off, "?");
}

void record_missing_names(const Perfetto__Protos__TraceConfig *cfg,
                          const Perfetto__Protos__TracingServiceState *st,
                          record_missing_fn fn, void *ctx) {
  for (size_t i = 0; i < cfg->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceConfig *dsc = cfg->data_sources[i]->config;
    if (!dsc || !dsc->name || registered(st, dsc->name)) continue;
    char shown[256], near[3 * (NAME_MAX_LEN + 2) + 32];
    tg_printable(shown, sizeof(shown), dsc->name);
    suggestions(st, dsc->name, near, sizeof(near));
    fn(ctx, i, shown, near);
  }
}

static void say_missing(void *ctx, size_t index, const char *name,
                        const char *near) {
  record_t *r = ctx;
  (void)index;
  tg_ds_problems_add(&r->problems, TG_DS_NOT_OFFERED, name, NULL,
                     "no producer offered it when the session was enabled: "
                     "it records nothing unless one registers it");
  fprintf(stderr,
          CLI_PROG ": %s warning: no producer has registered the data source "
          "'%s' (yet: it records nothing unless one does)%s\n",
          TG_NOTE(UNKNOWN_DATA_SOURCE), name, near);
}

/* The fields of each probes data source's config the probes ignore. */
static void check_fields(const Perfetto__Protos__TraceConfig *cfg) {
  for (size_t i = 0; i < cfg->n_data_sources; i++) {
    const Perfetto__Protos__DataSourceConfig *dsc = cfg->data_sources[i]->config;
    if (!dsc || !dsc->name) continue;
    size_t len = perfetto__protos__data_source_config__get_packed_size(dsc);
    uint8_t *bytes = malloc(len ? len : 1);
    if (!bytes) return;
    perfetto__protos__data_source_config__pack(dsc, bytes);
    char names[512];
    size_t n = tg_probes_unacted_fields(dsc->name, bytes, len, names, sizeof(names));
    free(bytes);
    if (n)
      fprintf(stderr,
              CLI_PROG ": %s warning: %s: tracegate-probes does not act on "
              "%zu config field(s): %s\n", TG_NOTE(UNACTED_FIELDS), dsc->name,
              n, names);
  }
}

void record_check_config(record_t *r) {
  if (!r->cfg) return; /* --attach: the session's config is not ours */
  check_fields(r->cfg);
  Perfetto__Protos__TracingServiceState *st = cli_query_state(&r->conn);
  if (!st) return; /* said why; the recording tells the rest */
  record_missing_names(r->cfg, st, say_missing, r);
  perfetto__protos__tracing_service_state__free_unpacked(st, NULL);
}
