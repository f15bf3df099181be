/* --summary-json: see summary_json.h. */
#include "cli/summary_json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json.h"
#include "common/version.h"
#include "consumer/fleet/merge_problem.h"
#include "cli/json_out.h"

/* The sum of every counter, listed or not (the service's and the relay's
 * transit losses alike), so that 0 means what "no data loss" means. */
static json_t *loss_json(const cli_loss_t *loss) {
  if (!loss) return json_null();
  json_t *counters = json_object();
  for (size_t k = 0; counters && k < loss->n; k++) {
    json_t *name = tg_json_text(loss->items[k].name); /* the key, made UTF-8 */
    if (!name) {
      json_decref(counters);
      return NULL;
    }
    counters = tg_json_put(counters, json_string_value(name),
                           tg_json_u64(loss->items[k].value));
    json_decref(name);
  }
  return json_pack("{s:o, s:o, s:o}", "total",
                   tg_json_u64(loss->total + loss->transit), "counters",
                   counters, "counters_omitted", tg_json_u64(loss->omitted));
}

static json_t *links_json(const cli_summary_links_t *l) {
  if (!l) return json_null();
  return json_pack(
      "{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
      "s:o}",
      "mode", l->mode, "joined", tg_json_u64(l->joined), "early",
      tg_json_u64(l->early), "unclocked", tg_json_u64(l->unclocked),
      "shared", tg_json_u64(l->shared),
      "refused", tg_json_u64(l->refused), "clock", tg_json_u64(l->clock),
      "pids", tg_json_u64(l->pids), "uuid", tg_json_u64(l->uuid),
      "flows_started", tg_json_u64(l->flows_started), "flows_terminated",
      tg_json_u64(l->flows_terminated), "flows_unmatched",
      tg_json_u64(l->flows_unmatched), "flows_unfollowed",
      tg_json_u64(l->flows_unfollowed), "flows_across",
      tg_json_u64(l->flows_across));
}

/* json_pack's "o" steals each reference and fails (dropping the others)
 * on a NULL one, out of memory. */
static json_t *host_json(const cli_summary_host_t *h) {
  return json_pack(
      "{s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:I, s:I,"
      " s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
      "host", tg_json_text(h->host), "name", tg_json_text(h->name),
      "outcome", h->ok ? "ok" : "failed",
      "reason", tg_json_text(h->reason), "failure", tg_json_text(h->ok ? NULL : h->failure),
      "end", tg_json_text(h->end), "bytes", tg_json_u64(h->bytes),
      "packets", tg_json_u64(h->packets), "loss", loss_json(h->loss),
      "reconnects", (json_int_t)h->reconnects,
      "link_down_ms", tg_json_u64(h->link_down_ms),
      "reads_cut", (json_int_t)h->reads_cut,
      "reads_lost", (json_int_t)h->reads_lost,
      "clock_syncs", (json_int_t)h->clock_syncs,
      "clock_offset_ns",
      h->has_clock ? json_integer(h->clock_offset_ns) : json_null(),
      "clock_uncertainty_ns",
      h->has_clock ? tg_json_u64(h->clock_uncertainty_ns) : json_null(),
      "compression", tg_json_text(h->compression),
      "machine_id", h->has_machine_id ? json_integer(h->machine_id) : json_null(),
      "path", tg_json_text(h->path), "problems",
      h->problems ? tg_ds_problems_json(h->problems) : json_array(),
      "links", links_json(h->links), "clock_from_requests",
      tg_reclock_host_json(h->clock_from_requests));
}

static json_t *summary_json(const cli_summary_t *s) {
  json_t *hosts = json_array();
  for (size_t i = 0; hosts && i < s->n_hosts; i++)
    hosts = tg_json_push(hosts, host_json(&s->hosts[i]));
  return json_pack("{s:i, s:s, s:i, s:o, s:o, s:o}", "schema",
                   CLI_SUMMARY_SCHEMA, "tracegate", TG_VERSION, "exit_code",
                   s->exit_code, "elapsed_ms", tg_json_u64(s->elapsed_ms),
                   "output", tg_json_text(s->output), "hosts", hosts);
}

int cli_summary_json_write(const char *path, const cli_summary_t *s) {
  json_t *doc = summary_json(s);
  int rv = doc ? cli_json_doc_write(path, doc, JSON_INDENT(1)) : -ENOMEM;
  json_decref(doc);
  if (rv < 0)
    fprintf(stderr, CLI_PROG ": --summary-json %s: %s\n", path, strerror(-rv));
  return rv;
}
