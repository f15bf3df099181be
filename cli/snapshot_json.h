/* The collector's answer to POST /api/v1/snapshots, read for
 * `tracegate snapshot` (collector/daemon/api.c writes it).
 *
 * The reply comes from the network: jansson reads it (json_loadb, its
 * tree within CLI_SNAP_MAX_TREE bytes), and it must be one JSON object (RFC 8259) with nothing but whitespace after
 * it, no key twice in an object (JSON_REJECT_DUPLICATES), no "\u0000",
 * nesting within jansson's JSON_PARSER_MAX_DEPTH. Each field read has its
 * type and range checked; a wrong one fails the whole reply with an error
 * naming the field ("snapshot.bytes: not a count"), never a default. Only
 * the fields the summary needs are kept, each in a fixed-size buffer
 * (longer strings are cut on a character boundary); the rest is ignored.
 * Strings are UTF-8, as the collector writes them (common/json.h: bytes
 * that were not UTF-8 arrive as U+FFFD). Nothing read here is fit for a
 * terminal as it is: print strings through tg_printable().
 */
#ifndef TRACEGATE_CLI_SNAPSHOT_JSON_H
#define TRACEGATE_CLI_SNAPSHOT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Failed hosts kept for the summary; the others are only counted. */
#define CLI_SNAP_MAX_FAILED 64
#define CLI_SNAP_MAX_NOTED 8
#define CLI_SNAP_ID_LEN 16 /* hex digits */
/* The collector's largest answer `tracegate snapshot` takes: a snapshot
 * of its at most 1024 hosts, each row up to ~5.4 KB when every byte of a
 * 320-byte host and a 512-byte error is escaped (\u00XX), plus the
 * snapshot itself. Past it the request fails ([TG-2060]). */
#define CLI_SNAP_REPLY_MAX (16u << 20)
/* The memory the reply's parsed tree may take (common/json.h,
 * tg_json_load): the largest reply, a snapshot of 1024 hosts with every
 * text at its cap, takes a few MiB; docs/operations.md has the figures. */
#define CLI_SNAP_MAX_TREE (64u << 20)

/* A host's problems kept for the summary (its "problems" array: objects
 * with "code", "kind", "data_source" and "why" strings, other keys
 * ignored); the others are only counted. */
#define CLI_SNAP_MAX_PROBLEMS 2

typedef struct cli_snap_problem {
  char code[16];
  char kind[24]; /* "data_source", "merge", "import", ... */
  char data_source[72];
  char why[320];
} cli_snap_problem_t;

typedef struct cli_snap_host {
  char host[256];
  char error[512];
  bool partial; /* outcome "partial": its data up to the failure is kept */
  size_t n_problems; /* in its "problems"; the first ones in |problems| */
  cli_snap_problem_t problems[CLI_SNAP_MAX_PROBLEMS];
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
  /* Hosts "ok" whose problems are not failures (a data source no producer
   * offered): counted, the first CLI_SNAP_MAX_NOTED kept. */
  size_t n_noted;
  cli_snap_host_t noted[CLI_SNAP_MAX_NOTED];
  /* {"error": "..."} of a refusal ("" if none). */
  char error[512];
} cli_snap_reply_t;

/* Reads |json_untrusted| (|len| bytes, no NUL needed) into *out. Returns
 * 0, -EINVAL with why in |err| (|err_cap| bytes, always NUL-terminated
 * when |err_cap| > 0): not JSON (with the byte offset), too deep, a key
 * twice, a field of the wrong type, a count that is not a whole number
 * within 64 bits (common/json.h's two forms), or a snapshot without a
 * valid id; -E2BIG past CLI_SNAP_MAX_TREE; or -ENOMEM. *out is all zero
 * on failure. The parsed tree is
 * freed before the return. */
int cli_snap_parse(const char *json_untrusted, size_t len, cli_snap_reply_t *out,
                   char *err, size_t err_cap);

/* `tracegate snapshot check`: the "host" of every entry of the reply's
 * "hosts" array (GET /api/v1/snapshots/ID), in order, whole: each a
 * string of 1..CLI_SNAP_HOST_MAX bytes (the collector's host specs) with
 * no NUL, at most CLI_SNAP_MAX_HOSTS of them, no name twice. 0 with
 * *names (free with cli_snap_names_free) and *n; -EINVAL with why in
 * |err| (as cli_snap_parse: not JSON, no "hosts" array, an entry without
 * a valid host); -E2BIG past CLI_SNAP_MAX_TREE; -ENOMEM. *names is NULL
 * and *n 0 on failure. */
#define CLI_SNAP_HOST_MAX 320u
#define CLI_SNAP_MAX_HOSTS 1024u
int cli_snap_host_names(const char *json_untrusted, size_t len, char ***names,
                        size_t *n, char *err, size_t err_cap);
void cli_snap_names_free(char **names, size_t n); /* NULL-safe */

#endif /* TRACEGATE_CLI_SNAPSHOT_JSON_H */
