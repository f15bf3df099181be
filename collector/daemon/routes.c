/* The routes' checks (routes.h): pure, on the caller's strings. */
#include "collector/daemon/routes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "collector/catalog/snapshot_id.h"

#define ID_SEGMENT "{id}"

typedef enum path_fit {
  FIT_NONE,   /* another path */
  FIT_BAD_ID, /* the pattern's prefix, but no snapshot id where {id} is */
  FIT_YES,
} path_fit_t;

/* Whether |path| is |pattern|, its {id} segment (if any) parsed into *id. */
static path_fit_t fit(const char *pattern, const char *path, uint64_t *id) {
  const char *seg = strstr(pattern, ID_SEGMENT);
  *id = 0;
  if (!seg) return strcmp(pattern, path) ? FIT_NONE : FIT_YES;
  size_t pre = (size_t)(seg - pattern);
  if (strncmp(pattern, path, pre)) return FIT_NONE;
  const char *p = path + pre;
  const char *slash = strchr(p, '/');
  size_t n = slash ? (size_t)(slash - p) : strlen(p);
  if (tg_coll_id_parse(p, n, id) < 0) {
    *id = 0;
    return FIT_BAD_ID;
  }
  if (strcmp(seg + strlen(ID_SEGMENT), p + n)) {
    *id = 0;
    return FIT_NONE;
  }
  return FIT_YES;
}

/* -1: a method no row has. */
static int method_of(const char *m) {
  if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return COLL_ROUTE_GET;
  if (!strcmp(m, "POST")) return COLL_ROUTE_POST;
  return -1;
}

static int refuse(coll_route_match_t *m, int status, const char *why) {
  m->route = NULL;
  m->id = 0;
  m->status = status;
  m->why = why;
  return status;
}

int coll_route_find(const coll_route_t *table, size_t n, const char *method,
                    const char *path, tg_authz_role_t role,
                    coll_route_match_t *m) {
  int want = method_of(method);
  bool bad_id = false, has_get = false, has_post = false;
  const coll_route_t *hit = NULL;
  uint64_t hit_id = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t id;
    path_fit_t f = fit(table[i].pattern, path, &id);
    if (f == FIT_BAD_ID) bad_id = true;
    if (f != FIT_YES) continue;
    if (table[i].method == COLL_ROUTE_GET) has_get = true;
    if (table[i].method == COLL_ROUTE_POST) has_post = true;
    if ((int)table[i].method == want && !hit) {
      hit = &table[i];
      hit_id = id;
    }
  }
  if (!has_get && !has_post)
    return refuse(m, 404, bad_id ? "not a snapshot id: " COLL_ROUTE_ID_FORM
                                 : "no such resource");
  if (!hit)
    return refuse(m, 405, has_get && has_post ? "GET or POST"
                          : has_get           ? "GET only"
                                              : "POST only");
  if (role < hit->role)
    return refuse(m, 403, hit->role == TG_ROLE_RECORD
                              ? "triggering and pinning need the record role"
                              : "this certificate's identity has no role here");
  m->route = hit;
  m->id = hit_id;
  m->status = 0;
  m->why = NULL;
  return 0;
}

int coll_route_args_check(const char *const *allowed, const char *const *args,
                          size_t n, char *why, size_t why_len) {
  for (size_t i = 0; i < n; i++) {
    const char *a = args[i];
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const char *bad = NULL;
    size_t k = 0;
    while (allowed[k] &&
           !(strlen(allowed[k]) == len && !memcmp(allowed[k], a, len)))
      k++;
    if (!allowed[k]) {
      bad = "not an argument of this request";
    } else if (!eq) {
      bad = "no value (name=value)";
    } else {
      for (size_t j = 0; j < i && !bad; j++)
        if (!strncmp(args[j], a, len + 1)) bad = "given twice";
    }
    if (!bad) continue;
    snprintf(why, why_len, "%.*s: %s", len > 64 ? 64 : (int)len, a, bad);
    return -EINVAL;
  }
  return 0;
}

const char *coll_route_arg(const char *const *args, size_t n,
                           const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i < n; i++)
    if (!strncmp(args[i], name, len) && args[i][len] == '=')
      return args[i] + len + 1;
  return NULL;
}
