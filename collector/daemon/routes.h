/* The collector's HTTP routes as data (docs/collector.md, "HTTP API"):
 * each row says the method, the path pattern, the role a caller needs,
 * the arguments it takes and the handler. api.c holds the table and walks
 * it with coll_route_find() for every request; the checks here are pure
 * (no I/O, no allocation), so tests/collector/test_collector_routes.c
 * drives them, and api.c's table, without a network.
 *
 * A pattern is literal but for at most one "{id}" segment, which matches
 * a snapshot id as tg_coll_id_parse() reads it (snapshot_id.h) and
 * nothing else. The order of refusals is fixed: no row for the path 404
 * (a path under a pattern's literal prefix whose {id} does not parse:
 * 404 naming the id's form), no row for the method 405, a role below the
 * row's 403, an argument the row does not take (or twice, or without a
 * value) 400.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_ROUTES_H
#define TRACEGATE_COLLECTOR_DAEMON_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include "auth/authz.h"

struct coll;
struct tg_http_exchange;
struct tg_http_request;

/* What an id is, said in refusals (snapshot_id.h). */
#define COLL_ROUTE_ID_FORM \
  "16 lowercase hex digits, 0000000000000001 to 7fffffffffffffff"

typedef enum coll_route_method {
  COLL_ROUTE_GET,  /* GET, and HEAD (the HTTP layer leaves the body out) */
  COLL_ROUTE_POST,
} coll_route_method_t;

/* A matched request: |id| is the {id} segment's (0: the pattern has none). */
typedef void (*coll_route_fn)(struct coll *c, struct tg_http_exchange *x,
                              const struct tg_http_request *r, uint64_t id);

typedef struct coll_route {
  coll_route_method_t method;
  const char *pattern;   /* "/api/v1/snapshots/{id}/pin" */
  tg_authz_role_t role;  /* the least role that may call it */
  /* The argument names it takes, NULL-terminated, each at most once;
   * NULL: arguments are not looked at (the page, /metrics). */
  const char *const *args;
  coll_route_fn fn;
} coll_route_t;

typedef struct coll_route_match {
  const coll_route_t *route; /* the row (status 0), else NULL */
  uint64_t id;               /* the {id} segment's value, 0 if none */
  int status;                /* 0: call route->fn; else answer this */
  const char *why;           /* with a status: the refusal, static text */
} coll_route_match_t;

/* The row of |table| (|n| rows) for |method| ("GET", "HEAD", "POST", ...)
 * on |path| (decoded and normalised, no query) and a caller of |role|,
 * into *m. Every string is borrowed for the call; m->route points into
 * |table|. Returns m->status. Arguments are not checked here
 * (coll_route_args_check, which needs the row). */
int coll_route_find(const coll_route_t *table, size_t n, const char *method,
                    const char *path, tg_authz_role_t role,
                    coll_route_match_t *m);

/* Whether every one of |args| (|n|, each "name=value" as sent) names an
 * argument of |allowed| (NULL-terminated), with a value, and no name
 * comes twice. 0, or -EINVAL with the refusal in |why| (the client's name
 * cut to 64 bytes, raw: the caller escapes it). A misspelt name would be
 * ignored and a repeated one would have one of its values taken, and the
 * answer would look like the one asked for. */
int coll_route_args_check(const char *const *allowed, const char *const *args,
                          size_t n, char *why, size_t why_len);

/* The value of argument |name| in |args| (|n|), NULL if absent. Borrowed
 * from |args|. */
const char *coll_route_arg(const char *const *args, size_t n,
                           const char *name);

/* api.c's table, static: |*n| rows. */
const coll_route_t *coll_api_routes(size_t *n);

#endif /* TRACEGATE_COLLECTOR_DAEMON_ROUTES_H */
