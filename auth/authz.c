/* The authorization file: "identity role" lines, and the role table. */
#include "auth/authz.h"
#include "auth/auth_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/consumer_port_methods.h"
#include "common/config_text.h"
#include "common/read_file.h"
#include "tracegate/error.h"

/* A file larger than this is surely not an authorization file: room for
 * several hundred thousand identities of the longest kind. */
#define AUTHZ_FILE_MAX (16u * 1024 * 1024)

/* A line holds one identity (at most TG_AUTHZ_IDENTITY_MAX bytes) and a
 * role; the line count leaves room for a million identities. */
static const tg_conf_limits_t kLimits = {
    .file_max = AUTHZ_FILE_MAX,
    .line_max = 4096,
    .lines_max = 1u << 22,
    .what = "an authorization file",
};

typedef struct authz_entry {
  char *identity;
  size_t len;
  size_t line; /* where the file named it */
  tg_authz_role_t role;
} authz_entry_t;

/* Sorted by identity once parsed: a role is looked up per client call, and
 * files may list many identities. */
struct tg_authz {
  authz_entry_t *entries;
  size_t n;
};

/* The least role each ConsumerPort method needs (its row's role). */
static const struct {
  const char *name;
  tg_authz_role_t role;
} kMethodRoles[] = {
#define ROLE_ROW(id, Name, snake, role, traffic, refusal) \
  {#Name, TG_ROLE_##role},
    TG_CPORT_METHODS(ROLE_ROW)
#undef ROLE_ROW
};

bool tg_authz_allows(tg_authz_role_t role, const char *method) {
  if (!method) return false;
  for (size_t i = 0; i < sizeof(kMethodRoles) / sizeof(kMethodRoles[0]); i++)
    if (!strcmp(kMethodRoles[i].name, method))
      return kMethodRoles[i].role != TG_ROLE_NONE &&
             role >= kMethodRoles[i].role;
  return false;
}

const char *tg_authz_role_name(tg_authz_role_t role) {
  switch (role) {
    case TG_ROLE_OBSERVE:
      return "observe";
    case TG_ROLE_RECORD:
      return "record";
    default:
      return "none";
  }
}

int tg_authz_parse_role(const char *s, tg_authz_role_t *out) {
  if (!strcmp(s, "observe")) *out = TG_ROLE_OBSERVE;
  else if (!strcmp(s, "record")) *out = TG_ROLE_RECORD;
  else return -EINVAL;
  return 0;
}

void tg_authz_free(tg_authz_t *a) {
  if (!a) return;
  for (size_t i = 0; i < a->n; i++) free(a->entries[i].identity);
  free(a->entries);
  free(a);
}

int tg__auth_fail(char *err, size_t errlen, int rv, const char *fmt, ...) {
  if (errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rv;
}

/* Splits |line| into blank-separated words; returns how many there were
 * (at most |max| are recorded). */
static size_t split_words(tg_conf_span_t line, const char **w, size_t *wl,
                          size_t max) {
  size_t k = 0;
  tg_conf_span_t word;
  while (tg_conf_word(&line, &word)) {
    if (k < max) {
      w[k] = word.s;
      wl[k] = word.n;
    }
    k++;
  }
  return k;
}

static int add_entry(tg_authz_t *a, size_t *cap, const char *id, size_t idlen,
                     size_t line, tg_authz_role_t role) {
  if (a->n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    authz_entry_t *ne = realloc(a->entries, nc * sizeof(*ne));
    if (!ne) return -ENOMEM;
    a->entries = ne;
    *cap = nc;
  }
  char *copy = malloc(idlen + 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, id, idlen);
  copy[idlen] = 0;
  a->entries[a->n].identity = copy;
  a->entries[a->n].len = idlen;
  a->entries[a->n].line = line;
  a->entries[a->n].role = role;
  a->n++;
  return 0;
}

/* Orders entries by identity bytes, then length. */
static int cmp_identity(const void *pa, const void *pb) {
  const authz_entry_t *a = pa, *b = pb;
  int c = memcmp(a->identity, b->identity, a->len < b->len ? a->len : b->len);
  return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* The same, then by line, so the first of equal identities comes first. */
static int cmp_entry(const void *pa, const void *pb) {
  int c = cmp_identity(pa, pb);
  if (c) return c;
  const authz_entry_t *a = pa, *b = pb;
  return (a->line > b->line) - (a->line < b->line);
}

/* Sorts the table and returns the first line that repeats an identity named
 * earlier (the line a top-to-bottom reading stops at), or NULL. */
static const authz_entry_t *sort_and_find_repeat(tg_authz_t *a) {
  if (a->n == 0) return NULL;
  qsort(a->entries, a->n, sizeof(a->entries[0]), cmp_entry);
  const authz_entry_t *rep = NULL;
  for (size_t i = 1; i < a->n; i++)
    if (cmp_identity(&a->entries[i - 1], &a->entries[i]) == 0 &&
        (!rep || a->entries[i].line < rep->line))
      rep = &a->entries[i];
  return rep;
}

/* One line as the grammar gives it (comment cut, trimmed, not empty).
 * Returns 1 with |id|, |idlen| and |role| set, or TG_EPARSE with |err|
 * written. */
static int parse_line(tg_conf_span_t line, const char *name, size_t lineno,
                      const char **id, size_t *idlen, tg_authz_role_t *role,
                      char *err, size_t errlen) {
  const char *w[3];
  size_t wl[3];
  size_t k = split_words(line, w, wl, 3);
  for (size_t i = 0; i < line.n; i++) {
    unsigned char c = (unsigned char)line.s[i];
    if (c == 0 || (c < 0x20 && c != '\t' && c != '\r') || c >= 0x7f)
      return tg__auth_fail(err, errlen, TG_EPARSE,
                  "%s:%zu: byte 0x%02x is not printable ASCII", name, lineno,
                  c);
  }
  if (k != 2)
    return tg__auth_fail(err, errlen, TG_EPARSE,
                "%s:%zu: expected \"identity role\", found %zu word%s", name,
                lineno, k, k == 1 ? "" : "s");
  const char *why = NULL;
  if (!tg_identity_valid_listed(w[0], wl[0], &why))
    return tg__auth_fail(err, errlen, TG_EPARSE, "%s:%zu: identity '%.*s': %s", name,
                lineno, (int)(wl[0] < 64 ? wl[0] : 64), w[0], why);
  char role_s[16];
  snprintf(role_s, sizeof(role_s), "%.*s", (int)(wl[1] < 15 ? wl[1] : 15),
           w[1]);
  if (wl[1] >= sizeof(role_s) || tg_authz_parse_role(role_s, role) < 0)
    return tg__auth_fail(err, errlen, TG_EPARSE,
                "%s:%zu: role '%.*s' is not observe or record", name, lineno,
                (int)(wl[1] < 32 ? wl[1] : 32), w[1]);
  *id = w[0];
  *idlen = wl[0];
  return 1;
}

int tg_authz_parse(const char *text, size_t len, const char *name,
                   tg_authz_t **out, char *err, size_t errlen) {
  *out = NULL;
  tg_authz_t *a = calloc(1, sizeof(*a));
  if (!a) return tg__auth_fail(err, errlen, -ENOMEM, "%s: out of memory", name);
  size_t cap = 0;
  tg_conf_t r;
  tg_conf_span_t line;
  int rv = tg_conf_begin(&r, text, len, name, &kLimits, err, errlen);
  while (rv == 0 && (rv = tg_conf_next(&r, &line)) == 1) {
    const char *id = NULL;
    size_t idlen = 0;
    tg_authz_role_t role = TG_ROLE_NONE;
    rv = parse_line(line, name, r.line, &id, &idlen, &role, err, errlen);
    if (rv == 1) {
      rv = add_entry(a, &cap, id, idlen, r.line, role);
      if (rv < 0) {
        tg__auth_fail(err, errlen, rv, "%s: out of memory", name);
        goto out;
      }
    }
  }
  /* What the grammar refuses (a long line, a NUL byte, too large) is a
   * syntax error like any other. */
  if (rv == -EINVAL || rv == -EFBIG) rv = TG_EPARSE;
  /* Two lines for one identity: which one wins would be a guess. Every
   * entry comes from above a syntax error, so a repeat is reported first. */
  const authz_entry_t *dup = sort_and_find_repeat(a);
  if (dup)
    rv = tg__auth_fail(err, errlen, TG_EPARSE,
              "%s:%zu: identity '%s' is listed twice", name, dup->line,
              dup->identity);
out:
  if (rv < 0) {
    tg_authz_free(a);
    return rv;
  }
  *out = a;
  return 0;
}

int tg_authz_load(const char *path, tg_authz_t **out, char *err,
                  size_t errlen) {
  *out = NULL;
  char *buf = NULL;
  size_t n = 0;
  int rv = tg_read_regular_file(path, AUTHZ_FILE_MAX, &buf, &n);
  if (rv < 0) {
    char why[96];
    return tg__auth_fail(err, errlen, rv == -ENOMEM ? rv : TG_EBAD_CONFIG,
                         "%s: %s", path,
                         tg_read_file_why(why, sizeof(why), rv, AUTHZ_FILE_MAX));
  }
  rv = tg_authz_parse(buf, n, path, out, err, errlen);
  free(buf);
  return rv;
}

tg_authz_role_t tg_authz_role(const tg_authz_t *a, const char *identity) {
  if (!a || !identity || a->n == 0) return TG_ROLE_NONE;
  const authz_entry_t key = {.identity = (char *)identity,
                             .len = strlen(identity)};
  const authz_entry_t *e =
      bsearch(&key, a->entries, a->n, sizeof(key), cmp_identity);
  return e ? e->role : TG_ROLE_NONE;
}

size_t tg_authz_count(const tg_authz_t *a) { return a ? a->n : 0; }
