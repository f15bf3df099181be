/* The collector's snapshot reply, read as hostile JSON: see snapshot_json.h.
 *
 * jansson parses the text into a tree; the accessors below take each field
 * the summary needs with its type and range checked, naming it on failure.
 * Fields not read are never looked at, whatever their type.
 */
#include "cli/snapshot_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

typedef struct reader {
  char *err;
  size_t err_cap;
} reader_t;

/* A field |name| (|i| >= 0: an element of the hosts array) is wrong. */
static int bad(const reader_t *r, const char *name, long i, const char *why) {
  if (r->err_cap == 0) return -EINVAL;
  if (i >= 0)
    snprintf(r->err, r->err_cap, "hosts[%ld].%s: %s", i, name, why);
  else
    snprintf(r->err, r->err_cap, "%s: %s", name, why);
  return -EINVAL;
}

/* Copies the UTF-8 |s| into |dst| (|cap| > 0 bytes), cut before the first
 * character that does not fit whole. */
static void copy_text(char *dst, size_t cap, const char *s) {
  size_t n = strlen(s);
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80) n--;
  }
  memcpy(dst, s, n);
  dst[n] = 0;
}

/* obj[key] as text into |dst|: absent leaves it "" (and *present false);
 * null too when |nullable|; anything but a string is an error. */
static int get_text(const reader_t *r, const json_t *obj, const char *key,
                    const char *name, long i, bool nullable, char *dst,
                    size_t cap, bool *present) {
  const json_t *v = json_object_get(obj, key);
  if (present) *present = v != NULL;
  if (!v || (nullable && json_is_null(v))) return 0;
  if (!json_is_string(v))
    return bad(r, name, i, nullable ? "not a string or null" : "not a string");
  copy_text(dst, cap, json_string_value(v));
  return 0;
}

/* obj[key] as a count: absent leaves *has false. */
static int get_count(const reader_t *r, const json_t *obj, const char *key,
                     const char *name, bool *has, uint64_t *out) {
  const json_t *v = json_object_get(obj, key);
  *has = v != NULL;
  if (v && tg_json_get_u64(v, out) < 0) return bad(r, name, -1, "not a count");
  return 0;
}

static bool is_id(const char *v) {
  if (strlen(v) != CLI_SNAP_ID_LEN) return false;
  for (size_t i = 0; i < CLI_SNAP_ID_LEN; i++)
    if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'))) return false;
  return true;
}

static int read_snapshot(const reader_t *r, const json_t *s, cli_snap_reply_t *o) {
  if (!json_is_object(s)) return bad(r, "snapshot", -1, "not an object");
  char id[CLI_SNAP_ID_LEN + 2] = "";
  bool has_id;
  if (get_text(r, s, "id", "snapshot.id", -1, false, id, sizeof(id), &has_id) < 0)
    return -EINVAL;
  if (!has_id) return bad(r, "snapshot.id", -1, "missing");
  if (!is_id(id)) return bad(r, "snapshot.id", -1, "not 16 lower-case hex digits");
  memcpy(o->id, id, sizeof(o->id));
  if (get_text(r, s, "state", "snapshot.state", -1, false, o->state,
               sizeof(o->state), NULL) < 0 ||
      get_count(r, s, "hosts", "snapshot.hosts", &o->has_hosts, &o->hosts) < 0 ||
      get_count(r, s, "hosts_failed", "snapshot.hosts_failed",
                &o->has_hosts_failed, &o->hosts_failed) < 0 ||
      get_count(r, s, "bytes", "snapshot.bytes", &o->has_bytes, &o->bytes) < 0)
    return -EINVAL;
  o->has_snapshot = true;
  return 0;
}

/* h["problems"]: absent or an array of objects (consumer/fleet/ds_problem.h). */
static int read_problems(const reader_t *r, const json_t *h, long i,
                         cli_snap_host_t *row) {
  const json_t *a = json_object_get(h, "problems");
  if (!a) return 0;
  if (!json_is_array(a)) return bad(r, "problems", i, "not an array");
  for (size_t k = 0; k < json_array_size(a); k++) {
    const json_t *p = json_array_get(a, k);
    if (!json_is_object(p))
      return bad(r, "problems", i, "an entry that is not an object");
    cli_snap_problem_t got;
    memset(&got, 0, sizeof(got));
    if (get_text(r, p, "code", "problems.code", i, false, got.code,
                 sizeof(got.code), NULL) < 0 ||
        get_text(r, p, "kind", "problems.kind", i, false, got.kind,
                 sizeof(got.kind), NULL) < 0 ||
        get_text(r, p, "data_source", "problems.data_source", i, false,
                 got.data_source, sizeof(got.data_source), NULL) < 0 ||
        get_text(r, p, "why", "problems.why", i, false, got.why,
                 sizeof(got.why), NULL) < 0)
      return -EINVAL;
    if (row->n_problems < CLI_SNAP_MAX_PROBLEMS)
      row->problems[row->n_problems] = got;
    row->n_problems++;
  }
  return 0;
}

static int read_host(const reader_t *r, const json_t *h, long i,
                     cli_snap_reply_t *o) {
  if (!json_is_object(h)) return bad(r, "hosts", -1, "an entry that is not an object");
  cli_snap_host_t row;
  memset(&row, 0, sizeof(row));
  char outcome[16] = "";
  bool has_outcome;
  if (get_text(r, h, "outcome", "outcome", i, false, outcome, sizeof(outcome),
               &has_outcome) < 0 ||
      get_text(r, h, "host", "host", i, false, row.host, sizeof(row.host),
               NULL) < 0 ||
      get_text(r, h, "error", "error", i, true, row.error, sizeof(row.error),
               NULL) < 0 ||
      read_problems(r, h, i, &row) < 0)
    return -EINVAL;
  if (!has_outcome) return bad(r, "outcome", i, "missing");
  o->n_host_entries++;
  if (!strcmp(outcome, "ok")) {
    if (!row.n_problems) return 0;
    if (o->n_noted < CLI_SNAP_MAX_NOTED) o->noted[o->n_noted] = row;
    o->n_noted++;
    return 0;
  }
  row.partial = !strcmp(outcome, "partial");
  if (o->n_failed < CLI_SNAP_MAX_FAILED) o->failed[o->n_failed] = row;
  o->n_failed++;
  return 0;
}

static int read_reply(const reader_t *r, const json_t *root, cli_snap_reply_t *o) {
  if (!json_is_object(root)) return bad(r, "reply", -1, "not a JSON object");
  const json_t *s = json_object_get(root, "snapshot");
  if (s && read_snapshot(r, s, o) < 0) return -EINVAL;
  const json_t *hosts = json_object_get(root, "hosts");
  if (hosts && !json_is_array(hosts)) return bad(r, "hosts", -1, "not an array");
  for (size_t i = 0; hosts && i < json_array_size(hosts); i++)
    if (read_host(r, json_array_get(hosts, i), (long)i, o) < 0) return -EINVAL;
  return get_text(r, root, "error", "error", -1, true, o->error,
                  sizeof(o->error), NULL);
}

int cli_snap_parse(const char *json_untrusted, size_t len, cli_snap_reply_t *out,
                   char *err, size_t err_cap) {
  memset(out, 0, sizeof(*out));
  if (err_cap > 0) err[0] = 0;
  reader_t r = {err, err_cap};
  json_error_t je;
  int rv;
  json_t *root = tg_json_load(json_untrusted, len, JSON_REJECT_DUPLICATES,
                              CLI_SNAP_MAX_TREE, &je, &rv);
  if (!root) {
    if (err_cap > 0 && rv == -E2BIG)
      snprintf(err, err_cap, "its JSON takes more than %u MiB to hold",
               CLI_SNAP_MAX_TREE >> 20);
    else if (err_cap > 0)
      snprintf(err, err_cap, "byte %d: %s", je.position, je.text);
    return rv;
  }
  rv = read_reply(&r, root, out);
  json_decref(root);
  if (rv < 0) memset(out, 0, sizeof(*out));
  return rv;
}

void cli_snap_names_free(char **names, size_t n) {
  if (!names) return;
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static int read_names(const reader_t *r, const json_t *root, char **names,
                      size_t *n) {
  if (!json_is_object(root)) return bad(r, "reply", -1, "not a JSON object");
  const json_t *hosts = json_object_get(root, "hosts");
  if (!hosts) return bad(r, "hosts", -1, "missing");
  if (!json_is_array(hosts)) return bad(r, "hosts", -1, "not an array");
  if (json_array_size(hosts) > CLI_SNAP_MAX_HOSTS)
    return bad(r, "hosts", -1, "more entries than a snapshot has hosts");
  for (size_t i = 0; i < json_array_size(hosts); i++) {
    const json_t *h = json_array_get(hosts, i);
    if (!json_is_object(h))
      return bad(r, "hosts", -1, "an entry that is not an object");
    const json_t *v = json_object_get(h, "host");
    if (!v) return bad(r, "host", (long)i, "missing");
    if (!json_is_string(v)) return bad(r, "host", (long)i, "not a string");
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    if (len == 0 || len > CLI_SNAP_HOST_MAX || memchr(s, 0, len))
      return bad(r, "host", (long)i, "not 1 to 320 bytes of text");
    for (size_t k = 0; k < *n; k++)
      if (!strcmp(names[k], s)) return bad(r, "host", (long)i, "named twice");
    names[*n] = strdup(s);
    if (!names[*n]) return -ENOMEM;
    (*n)++;
  }
  return 0;
}

int cli_snap_host_names(const char *json_untrusted, size_t len, char ***names,
                        size_t *n, char *err, size_t err_cap) {
  *names = NULL;
  *n = 0;
  if (err_cap > 0) err[0] = 0;
  reader_t r = {err, err_cap};
  json_error_t je;
  int rv;
  json_t *root = tg_json_load(json_untrusted, len, JSON_REJECT_DUPLICATES,
                              CLI_SNAP_MAX_TREE, &je, &rv);
  if (!root) {
    if (err_cap > 0 && rv == -E2BIG)
      snprintf(err, err_cap, "its JSON takes more than %u MiB to hold",
               CLI_SNAP_MAX_TREE >> 20);
    else if (err_cap > 0)
      snprintf(err, err_cap, "byte %d: %s", je.position, je.text);
    return rv;
  }
  char **out = calloc(CLI_SNAP_MAX_HOSTS, sizeof(*out));
  size_t got = 0;
  rv = out ? read_names(&r, root, out, &got) : -ENOMEM;
  json_decref(root);
  if (rv < 0) {
    if (rv == -ENOMEM && err_cap > 0) snprintf(err, err_cap, "out of memory");
    cli_snap_names_free(out, got);
    return rv;
  }
  *names = out;
  *n = got;
  return 0;
}
