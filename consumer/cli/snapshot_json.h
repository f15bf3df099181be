/* The collector's answer to POST /api/v1/snapshots, read for
 * `tracegate snapshot` (collector/daemon/api.c writes it).
 *
 * The reply comes from the network: this reads it as hostile JSON. The
 * whole text must be one valid JSON value (RFC 8259) and nothing but
 * whitespace after it; nesting deeper than CLI_SNAP_MAX_DEPTH is refused,
 * so the recursion is bounded whatever the input. Only the fields the
 * summary needs are kept, each in a fixed-size buffer (longer strings are
 * cut on a character boundary); everything else is checked and skipped.
 * Escapes \u0080..\u00ff are read as single bytes, as the collector
 * writes them (docs/commands.md: text from hosts is escaped per byte).
 * Nothing read here is fit for a terminal as it is: print strings through
 * tg_printable().
 */
#ifndef TRACEGATE_CONSUMER_CLI_SNAPSHOT_JSON_H
#define TRACEGATE_CONSUMER_CLI_SNAPSHOT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_SNAP_MAX_DEPTH 32
/* Failed hosts kept for the summary; the others are only counted. */
#define CLI_SNAP_MAX_FAILED 64
#define CLI_SNAP_ID_LEN 16 /* hex digits */

typedef struct cli_snap_host {
  char host[256];
  char error[512];
  bool partial; /* outcome "partial": its data up to the failure is kept */
} cli_snap_host_t;

typedef struct cli_snap_reply {
  /* {"snapshot": {...}}: an id of exactly 16 hex digits, else no snapshot. */
  bool has_snapshot;
  char id[CLI_SNAP_ID_LEN + 1];
  char state[16]; /* "complete", "partial", "failed", ... as sent */
  bool has_hosts, has_hosts_failed, has_bytes;
  uint64_t hosts, hosts_failed, bytes;
  /* {"hosts": [...]}: every entry counted; those whose outcome is not
   * "ok" kept (up to CLI_SNAP_MAX_FAILED) in order. */
  size_t n_host_entries, n_failed;
  cli_snap_host_t failed[CLI_SNAP_MAX_FAILED];
  /* {"error": "..."} of a refusal ("" if none). */
  char error[512];
} cli_snap_reply_t;

/* Reads |json_untrusted| (|len| bytes, no NUL needed) into *out. Returns
 * 0, or -EINVAL with why (and the byte offset) in |err| (|err_cap| bytes,
 * always NUL-terminated when |err_cap| > 0): not JSON, too deep, a field
 * of the wrong type, a count that is not a whole number within 64 bits, a
 * field given twice, or a snapshot without a valid id. Never allocates. */
int cli_snap_parse(const char *json_untrusted, size_t len, cli_snap_reply_t *out,
                   char *err, size_t err_cap);

#endif /* TRACEGATE_CONSUMER_CLI_SNAPSHOT_JSON_H */
