/* --summary-json: see summary_json.h. */
#include "consumer/cli/summary_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    /* The sum of the counters listed (the service's and the relay's
     * transit losses alike), so that 0 means what "no data loss" means. */
    uint64_t total = 0;
    for (size_t k = 0; k < h->loss->n; k++) total += h->loss->items[k].value;
    fprintf(f, "{\"total\": %" PRIu64 ", \"counters\": {", total);
    for (size_t k = 0; k < h->loss->n; k++) {
      if (k) fputs(", ", f);
      cli_json_str(f, h->loss->items[k].name);
      fprintf(f, ": %" PRIu64, h->loss->items[k].value);
    }
    fputs("}}", f);
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

int cli_summary_json_write(const char *path, const cli_summary_t *s) {
  if (!strcmp(path, "-")) {
    put_summary(stdout, s);
    return fflush(stdout) == 0 ? 0 : -errno;
  }
  /* Beside the destination, then renamed over it: a reader sees the old
   * summary or the whole new one. */
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return -ENOMEM;
  snprintf(tmp, n, "%s.tmp-XXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int rv = 0;
  if (!f) {
    rv = -errno;
    if (fd >= 0) close(fd);
  } else {
    put_summary(f, s);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) rv = -errno;
    if (fclose(f) != 0 && rv == 0) rv = -errno;
    if (rv == 0 && rename(tmp, path) != 0) rv = -errno;
  }
  if (rv < 0) {
    fprintf(stderr, CLI_PROG ": --summary-json %s: %s\n", path, strerror(-rv));
    if (fd >= 0) unlink(tmp);
  }
  free(tmp);
  return rv;
}
