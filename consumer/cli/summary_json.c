/* --summary-json: see summary_json.h. */
#include "consumer/cli/summary_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/version.h"
#include "consumer/cli/json_out.h"

static void put_host(FILE *f, const cli_summary_host_t *h) {
  fputs("{\"host\": ", f);
  cli_json_str(f, h->host);
  fprintf(f, ", \"outcome\": \"%s\", \"reason\": ", h->ok ? "ok" : "failed");
  cli_json_str(f, h->reason);
  fputs(", \"failure\": ", f);
  cli_json_str(f, h->ok ? NULL : h->failure);
  fputs(", \"end\": ", f);
  cli_json_str(f, h->end);
  fprintf(f, ", \"bytes\": %" PRIu64 ", \"packets\": %" PRIu64 ", \"loss\": ",
          h->bytes, h->packets);
  if (!h->loss) {
    fputs("null", f);
  } else {
    /* The sum of every counter, listed or not (the service's and the
     * relay's transit losses alike), so that 0 means what "no data loss"
     * means. */
    fprintf(f, "{\"total\": %" PRIu64 ", \"counters\": {",
            h->loss->total + h->loss->transit);
    for (size_t k = 0; k < h->loss->n; k++) {
      if (k) fputs(", ", f);
      cli_json_str(f, h->loss->items[k].name);
      fprintf(f, ": %" PRIu64, h->loss->items[k].value);
    }
    fprintf(f, "}, \"counters_omitted\": %zu}", h->loss->omitted);
  }
  fprintf(f, ", \"reconnects\": %u, \"link_down_ms\": %" PRIu64
          ", \"reads_cut\": %u, \"reads_lost\": %u, \"clock_syncs\": %u"
          ", \"clock_offset_ns\": ", h->reconnects, h->link_down_ms,
          h->reads_cut, h->reads_lost, h->clock_syncs);
  if (h->has_clock)
    fprintf(f, "%" PRId64 ", \"clock_uncertainty_ns\": %" PRIu64,
            h->clock_offset_ns, h->clock_uncertainty_ns);
  else
    fputs("null, \"clock_uncertainty_ns\": null", f);
  fputs(", \"compression\": ", f);
  cli_json_str(f, h->compression);
  fputs(", \"machine_id\": ", f);
  if (h->has_machine_id) fprintf(f, "%" PRIu32, h->machine_id);
  else fputs("null", f);
  fputs(", \"path\": ", f);
  cli_json_str(f, h->path);
  fputc('}', f);
}

static void put_summary(FILE *f, const cli_summary_t *s) {
  fprintf(f, "{\"schema\": %d, \"tracegate\": \"%s\", \"exit_code\": %d, "
          "\"elapsed_ms\": %" PRIu64 ", \"output\": ",
          CLI_SUMMARY_SCHEMA, TG_VERSION, s->exit_code, s->elapsed_ms);
  cli_json_str(f, s->output);
  fputs(", \"hosts\": [", f);
  for (size_t i = 0; i < s->n_hosts; i++) {
    fputs(i ? ",\n  " : "\n  ", f);
    put_host(f, &s->hosts[i]);
  }
  fputs(s->n_hosts ? "\n]}\n" : "]}\n", f);
}

static void put_summary_cb(FILE *f, const void *arg) { put_summary(f, arg); }

int cli_summary_json_write(const char *path, const cli_summary_t *s) {
  int rv = cli_json_file_write(path, put_summary_cb, s);
  if (rv < 0)
    fprintf(stderr, CLI_PROG ": --summary-json %s: %s\n", path, strerror(-rv));
  return rv;
}
