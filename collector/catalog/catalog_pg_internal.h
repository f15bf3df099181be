/* Shared by catalog_pg.c (connection, session, schema, statements, values)
 * and catalog_pg_ops.c (the operations): nothing else includes it. One
 * module split for size: catalog_pg.c installs the operations at open,
 * and they call back into it for the helpers below by design
 * (tests/layout/cycles_allow.txt). */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_INTERNAL_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/catalog/catalog.h"

/* Every statement, prepared at open (and again after a reconnect). */
typedef enum {
  P_INSERT,
  P_FINISH,
  P_INSERT_HOST,
  P_FAIL,
  P_INTERRUPT,
  P_LOSE,
  P_LIST,
  P_GET,
  P_HOSTS,
  P_PIN,
  P_SET_PROBLEMS,
  P_REMOVE,
  P_REMOVE_UNPINNED,
  P_RETENTION,
  P_INSERT_AT,
  P_RESERVE,
  P_SHARES_CLEAR,
  P_SHARES_LOCK,
  P_SHARES_INSERT,
  P_SHARES_FIND,
  P_SHARES_FIND_HOST,
  P_COUNT
} tg__coll_pg_stmt_t;

typedef struct tg__coll_pg {
  tg_coll_catalog_t base; /* first: the interface's view */
  PGconn *conn;
  uint32_t member;
} tg__coll_pg_t;

extern const tg_coll_catalog_ops_t tg__coll_pg_ops;

/* A statement's parameters, all binary: int8 in network order, bytea as
 * the bytes themselves. */
#define TG__COLL_PG_ARGS_MAX 17
typedef struct tg__coll_pg_args {
  int n;
  const char *val[TG__COLL_PG_ARGS_MAX];
  int len[TG__COLL_PG_ARGS_MAX];
  int fmt[TG__COLL_PG_ARGS_MAX];
  unsigned char be[TG__COLL_PG_ARGS_MAX][8];
} tg__coll_pg_args_t;

void tg__coll_pg_arg_int(tg__coll_pg_args_t *a, int64_t v);
/* A float8 (prepared as 'd'). */
void tg__coll_pg_arg_double(tg__coll_pg_args_t *a, double v);
/* NULL is "" (every text column is NOT NULL); at most |max| bytes. */
void tg__coll_pg_arg_text(tg__coll_pg_args_t *a, const char *s, size_t max);
/* NULL stays SQL NULL: the filters' "any". */
void tg__coll_pg_arg_opt_text(tg__coll_pg_args_t *a, const char *s);

/* Closes the connection, frees |cat|. */
void tg__coll_pg_close(tg_coll_catalog_t *cat);
/* Before each operation: a connection found broken is reset and its
 * session set up again (the member reclaimed). 0 or an error. */
int tg__coll_pg_ready(tg__coll_pg_t *c);
/* Maps a failed result (NULL: the connection's) to our codes, logging it
 * once with |what|; clears |res|. */
int tg__coll_pg_err(tg__coll_pg_t *c, PGresult *res, const char *what);
/* Runs prepared statement |s|. Returns 0 and *res (the caller PQclear()s
 * it), its columns checked against the statement's shape; or an error. */
int tg__coll_pg_run(tg__coll_pg_t *c, tg__coll_pg_stmt_t s,
                    const tg__coll_pg_args_t *a, PGresult **res,
                    const char *what);
/* BEGIN, COMMIT or ROLLBACK (constant text). */
int tg__coll_pg_tx(tg__coll_pg_t *c, const char *verb, const char *what);

/* Binary column values; NULL reads as 0, false, "". Text longer than |cap|
 * - 1 (a database edited by hand) is cut, never overrun. */
int64_t tg__coll_pg_int(const PGresult *r, int row, int col);
bool tg__coll_pg_bool(const PGresult *r, int row, int col);
double tg__coll_pg_double(const PGresult *r, int row, int col);
void tg__coll_pg_text(const PGresult *r, int row, int col, char *dst,
                      size_t cap);

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_INTERNAL_H */
