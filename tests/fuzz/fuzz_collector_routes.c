/* Fuzzes the collector's routing of HTTP requests (collector/daemon/
 * routes.h) and the list's filter (api_parts.h): the method, the path and
 * the arguments are a client's.
 *
 * Input: lines; the first is the method, the second the path, each further
 * one an argument ("name=value"), at most MAX_ARGS. The table is api.c's
 * (its handlers are not called).
 *
 * Invariants (trap on violation):
 * - the status is 0, 403, 404 or 405, with a refusal text when not 0;
 * - a match is a row of the table whose method the request's is, whose
 *   role the caller has, and whose pattern with the id formatted into its
 *   {id} segment is the path byte for byte (one spelling per route);
 * - accepted arguments each have a value, a name of the row's, and no
 *   name twice; the refusal text is bounded;
 * - an accepted list filter has a limit of 1..TG_COLL_LIST_MAX and texts
 *   within the catalog's lengths, borrowed from the arguments;
 * - an accepted function-shares question (coll_share_query) names a
 *   function of 1..TG_COLL_FUNCTION_MAX bytes, a share in 0..1, a limit
 *   of 1..TG_COLL_SHARES_LIST_MAX, a page's host within its length and a
 *   valid id, and the catalog's own check accepts it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/catalog_check.h"
#include "collector/daemon/api_parts.h"
#include "collector/daemon/routes.h"
#include "collector/catalog/snapshot_id.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 16
#define MAX_TEXT 4096

/* api.c's table (coll_api_routes), read once. */
static const coll_route_t *table;
static size_t n_routes;

/* The arguments GET |pattern| takes. */
static const char *const *get_args(const char *pattern) {
  for (size_t i = 0; i < n_routes; i++)
    if (table[i].method == COLL_ROUTE_GET && !strcmp(table[i].pattern, pattern))
      return table[i].args;
  __builtin_trap();
}

/* The list filter's (GET /api/v1/snapshots). */
static const char *const *list_args(void) {
  return get_args("/api/v1/snapshots");
}

static void check_share_query(const char *const *args, size_t n) {
  tg_coll_share_query_t q;
  const char *why = NULL;
  if (coll_share_query(args, n, &q, &why) != 0) {
    if (!why) __builtin_trap();
    return;
  }
  size_t len = strlen(q.function);
  if (len < 1 || len > TG_COLL_FUNCTION_MAX) __builtin_trap();
  if (!(q.min_share >= 0 && q.min_share <= 1)) __builtin_trap();
  if (q.limit < 1 || q.limit > TG_COLL_SHARES_LIST_MAX) __builtin_trap();
  if (q.host && strlen(q.host) > TG_COLL_HOST_MAX) __builtin_trap();
  if (q.after_id && (!tg_coll_id_valid(q.after_id) || !q.after_host ||
                     strlen(q.after_host) > TG_COLL_HOST_MAX ||
                     q.after_rank > TG_COLL_SHARES_TOP_MAX))
    __builtin_trap();
  if (tg__coll_check_share_query(&q) != 0) __builtin_trap();
}

static void check_match(const char *method, const char *path,
                        tg_authz_role_t role, const coll_route_match_t *m) {
  const coll_route_t *r = m->route;
  if (r < table || r >= table + n_routes) __builtin_trap();
  int want = !strcmp(method, "POST") ? COLL_ROUTE_POST : COLL_ROUTE_GET;
  if ((int)r->method != want || role < r->role) __builtin_trap();
  if (strcmp(method, "GET") && strcmp(method, "HEAD") && strcmp(method, "POST"))
    __builtin_trap();
  const char *seg = strstr(r->pattern, "{id}");
  char again[256];
  if (seg) {
    if (!tg_coll_id_valid(m->id)) __builtin_trap();
    char id[TG_COLL_ID_STRLEN];
    tg_coll_id_format(m->id, id);
    snprintf(again, sizeof(again), "%.*s%s%s", (int)(seg - r->pattern),
             r->pattern, id, seg + 4);
  } else {
    if (m->id != 0) __builtin_trap();
    snprintf(again, sizeof(again), "%s", r->pattern);
  }
  if (strcmp(again, path)) __builtin_trap();
}

static void check_args(const char *const *allowed, const char *const *args,
                       size_t n) {
  char why[160];
  memset(why, 'z', sizeof(why));
  if (coll_route_args_check(allowed, args, n, why, sizeof(why)) != 0) {
    if (!memchr(why, 0, sizeof(why))) __builtin_trap();
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(args[i], '=');
    if (!eq) __builtin_trap();
    size_t len = (size_t)(eq - args[i]);
    size_t k = 0;
    while (allowed[k] &&
           !(strlen(allowed[k]) == len && !memcmp(allowed[k], args[i], len)))
      k++;
    if (!allowed[k]) __builtin_trap();
    for (size_t j = 0; j < i; j++)
      if (!strncmp(args[j], args[i], len + 1)) __builtin_trap();
  }
  if (allowed == get_args("/api/v1/functions")) {
    check_share_query(args, n);
    return;
  }
  if (allowed != list_args()) return;
  tg_coll_filter_t f;
  const char *why_f = NULL;
  if (coll_list_filter(args, n, &f, &why_f) != 0) {
    if (!why_f) __builtin_trap();
    return;
  }
  if (f.limit < 1 || f.limit > TG_COLL_LIST_MAX) __builtin_trap();
  if (f.trigger && strlen(f.trigger) > TG_COLL_TRIGGER_MAX) __builtin_trap();
  if (f.host && strlen(f.host) > TG_COLL_HOST_MAX) __builtin_trap();
  if (f.before_id && !tg_coll_id_valid(f.before_id)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!table) table = coll_api_routes(&n_routes);
  if (size > MAX_TEXT) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  /* Lines; a NUL inside one ends it there, as a C string would. */
  const char *lines[2 + MAX_ARGS];
  size_t n = 0;
  for (char *p = text; n < 2 + MAX_ARGS;) {
    lines[n++] = p;
    char *nl = strchr(p, '\n');
    if (!nl) break;
    *nl = 0;
    p = nl + 1;
  }
  if (n < 2) {
    free(text);
    return 0;
  }
  const char *const *args = lines + 2;
  size_t n_args = n - 2;
  for (int role = TG_ROLE_NONE; role <= TG_ROLE_RECORD; role++) {
    coll_route_match_t m;
    int st = coll_route_find(table, n_routes, lines[0], lines[1],
                             (tg_authz_role_t)role, &m);
    if (st != m.status) __builtin_trap();
    if (st == 0) {
      check_match(lines[0], lines[1], (tg_authz_role_t)role, &m);
      if (m.route->args) check_args(m.route->args, args, n_args);
    } else if ((st != 403 && st != 404 && st != 405) || !m.why || m.route) {
      __builtin_trap();
    }
  }
  check_args(list_args(), args, n_args);
  check_args(get_args("/api/v1/functions"), args, n_args);
  free(text);
  return 0;
}
