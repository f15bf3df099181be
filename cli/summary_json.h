/* --summary-json: what a recording came to, per host, for scripts.
 *
 * One JSON object, written at the end of `tracegate record` (local or
 * remote, one host or a fleet) to a file (replaced whole, never left
 * half-written) or to standard output ("-"). The schema is in
 * docs/commands.md ("Summary as JSON"); "schema" says its version and
 * grows only by adding fields. Text from elsewhere (host names, reasons,
 * loss counter names) follows common/json.h's rule, so the output is
 * valid JSON whatever bytes it held.
 */
#ifndef TRACEGATE_CLI_SUMMARY_JSON_H
#define TRACEGATE_CLI_SUMMARY_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "consumer/fleet/reclock.h"

#define CLI_SUMMARY_SCHEMA 1

/* What the merge's joined mode did with a host's app tracks (merge.h,
 * tg_merge_host_t's joined_ and flows_ counters). */
typedef struct cli_summary_links {
  const char *mode; /* "joined" or "machines" */
  uint64_t joined, early, unclocked, shared, refused, clock, pids, uuid;
  uint64_t flows_started, flows_terminated, flows_unmatched,
      flows_unfollowed, flows_across;
} cli_summary_links_t;

/* One host's outcome. Pointers are borrowed for the call; NULL text and
 * the has_ flags off are written as null. */
typedef struct cli_summary_host {
  const char *host;    /* "-H" spec, or "local" */
  const char *name;    /* the host's name (tg_targets_name), or NULL */
  bool ok;
  const char *reason;  /* why it ended, or why it failed */
  const char *failure; /* a failure's kind, a token ("connect", ...); or NULL */
  const char *end;     /* how its session ended, a token; NULL: not known */
  uint64_t bytes, packets;
  const cli_loss_t *loss; /* NULL: loss unknown (no final statistics) */
  unsigned reconnects;
  uint64_t link_down_ms;
  /* Reads a link loss cut, and of those the ones that had taken data the
   * relay could not give back (their loss is in |loss| only if the
   * service counted it). */
  unsigned reads_cut, reads_lost;
  unsigned clock_syncs; /* clock estimates made (a relay's ClockSync) */
  bool has_clock;
  int64_t clock_offset_ns;       /* the host's BOOTTIME minus ours */
  uint64_t clock_uncertainty_ns; /* half the round trip of the estimate */
  const char *compression;       /* "zstd", "plain-not-asked", ... or NULL */
  bool has_machine_id;
  uint32_t machine_id;           /* merged traces */
  const char *path;              /* the host's own file, or NULL */
  /* Data sources that did not run as asked (consumer/fleet/ds_problem.h); NULL:
   * none. */
  const tg_ds_problems_t *problems;
  /* Merged traces: the app tracks and flows; NULL otherwise. */
  const cli_summary_links_t *links;
  /* Merged traces re-clocked by their requests (reclock.h); NULL: the
   * pass did not run. */
  const tg_reclock_host_t *clock_from_requests;
} cli_summary_host_t;

typedef struct cli_summary {
  int exit_code;
  uint64_t elapsed_ms;
  const char *output; /* the trace file written, or NULL */
  const cli_summary_host_t *hosts;
  size_t n_hosts;
} cli_summary_t;

/* Writes |s| to |path| ("-": standard output). Returns 0, or -errno after
 * saying why on stderr. */
int cli_summary_json_write(const char *path, const cli_summary_t *s);

#endif /* TRACEGATE_CLI_SUMMARY_JSON_H */
