/* Shared by catalog_sqlite.c (database, schema, statements) and
 * catalog_sqlite_ops.c (the operations): nothing else includes it. One
 * module split for size: catalog_sqlite.c installs the operations at
 * open, and they call back into it for the helpers below by design
 * (tests/layout/cycles_allow.txt). */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_INTERNAL_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_INTERNAL_H

#include <sqlite3.h>

#include "collector/catalog/catalog.h"

/* Every statement, prepared once at open. */
typedef enum {
  S_TX_BEGIN,
  S_TX_READ,
  S_TX_COMMIT,
  S_TX_ROLLBACK,
  S_INSERT,
  S_FINISH,
  S_INSERT_HOST,
  S_FAIL,
  S_LOSE,
  S_LIST,
  S_GET,
  S_HOSTS,
  S_PIN,
  S_SET_PROBLEMS,
  S_STATE,
  S_REMOVE,
  S_REMOVE_UNPINNED,
  S_INTERRUPT,
  S_RETENTION,
  S_INSERT_AT,
  S_RESERVE_UPDATE,
  S_RESERVE_INSERT,
  S_SHARES_CLEAR,
  S_SHARES_INSERT,
  S_SHARES_FIND,
  S_SHARES_FIND_HOST,
  S_COUNT
} tg__coll_stmt_t;

typedef struct tg__coll_sqlite {
  tg_coll_catalog_t base; /* first: the interface's view */
  sqlite3 *db;
  sqlite3_stmt *stmt[S_COUNT];
} tg__coll_sqlite_t;

extern const tg_coll_catalog_ops_t tg__coll_sqlite_ops;

/* Finalizes the statements, closes the database, frees |cat|. */
void tg__coll_sqlite_close(tg_coll_catalog_t *cat);

/* Maps an SQLite result to our codes, logging it once with |what|. */
int tg__coll_sqlite_err(tg__coll_sqlite_t *c, int rc, const char *what);
/* The statement, reset and unbound, ready for its binds. */
sqlite3_stmt *tg__coll_sqlite_stmt(tg__coll_sqlite_t *c, tg__coll_stmt_t s);
/* Runs a statement that returns no rows (transaction control, writes). */
int tg__coll_sqlite_exec(tg__coll_sqlite_t *c, tg__coll_stmt_t s,
                         const char *what);

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_INTERNAL_H */
