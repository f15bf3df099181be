/* Fuzzes the reader of tracegate-collector's snapshot reply
 * (cli/snapshot_json.c, cli_snap_parse: jansson and the typed
 * accessors on its tree): `tracegate snapshot` parses whatever the
 * collector's address answered.
 *
 * The text is parsed from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan.
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL, -E2BIG or -ENOMEM, and a failure leaves a
 *   NUL-terminated message and an all-zero reply;
 * - every kept string is well-formed UTF-8 (jansson decoded it, and a
 *   cut string is cut between characters);
 * - every kept string is NUL-terminated within its buffer;
 * - a snapshot has an id of exactly 16 lower-case hex digits;
 * - the failed hosts are among the entries, at most CLI_SNAP_MAX_FAILED
 *   of them kept;
 * - parsing the same text again gives the same reply;
 * - cli_snap_host_names (snapshot check's list of hosts) returns 0 with
 *   1..CLI_SNAP_HOST_MAX-byte names, none twice, or an error with none.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/snapshot_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

/* jansson takes only well-formed UTF-8: a kept string it refuses was cut
 * inside a character. */
static int utf8(const char *s) {
  json_t *v = json_string(s);
  json_decref(v);
  return v != NULL;
}

static void check(const cli_snap_reply_t *r) {
  if (!terminated(r->id, sizeof(r->id)) || !terminated(r->state, sizeof(r->state)) ||
      !terminated(r->error, sizeof(r->error)))
    __builtin_trap();
  if (r->has_snapshot) {
    if (strlen(r->id) != CLI_SNAP_ID_LEN) __builtin_trap();
    for (size_t i = 0; i < CLI_SNAP_ID_LEN; i++)
      if (!strchr("0123456789abcdef", r->id[i])) __builtin_trap();
  } else if (r->id[0] || r->state[0] || r->has_hosts || r->has_bytes) {
    __builtin_trap();
  }
  if (r->n_failed > r->n_host_entries) __builtin_trap();
  size_t kept = r->n_failed < CLI_SNAP_MAX_FAILED ? r->n_failed : CLI_SNAP_MAX_FAILED;
  for (size_t i = 0; i < kept; i++)
    if (!terminated(r->failed[i].host, sizeof(r->failed[i].host)) ||
        !terminated(r->failed[i].error, sizeof(r->failed[i].error)) ||
        !utf8(r->failed[i].host) || !utf8(r->failed[i].error))
      __builtin_trap();
  if (!utf8(r->state) || !utf8(r->error)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  cli_snap_reply_t *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
  if (!text || !a || !b) goto out;
  memcpy(text, data, size);
  char err[128];
  memset(err, 'x', sizeof(err));
  int rv = cli_snap_parse(text, size, a, err, sizeof(err));
  if (rv != 0 && rv != -EINVAL && rv != -E2BIG && rv != -ENOMEM) __builtin_trap();
  if (!terminated(err, sizeof(err))) __builtin_trap();
  check(a);
  if (rv != 0) {
    static const cli_snap_reply_t zero;
    if (memcmp(a, &zero, sizeof(zero)) != 0) __builtin_trap();
  } else {
    if (cli_snap_parse(text, size, b, err, sizeof(err)) != 0) __builtin_trap();
    if (memcmp(a, b, sizeof(*a)) != 0) __builtin_trap();
  }
  char **names = NULL;
  size_t n = 0;
  rv = cli_snap_host_names(text, size, &names, &n, err, sizeof(err));
  if (rv != 0 && rv != -EINVAL && rv != -E2BIG && rv != -ENOMEM) __builtin_trap();
  if (!terminated(err, sizeof(err))) __builtin_trap();
  if (rv != 0 && (names || n)) __builtin_trap();
  if (n > CLI_SNAP_MAX_HOSTS) __builtin_trap();
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    if (!len || len > CLI_SNAP_HOST_MAX) __builtin_trap();
    for (size_t k = 0; k < i; k++)
      if (!strcmp(names[i], names[k])) __builtin_trap();
  }
  cli_snap_names_free(names, n);
out:
  free(a);
  free(b);
  free(text);
  return 0;
}
