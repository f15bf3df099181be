/* The embedded catalog: one SQLite database file (Debian's libsqlite3).
 *
 * WAL journal with synchronous=FULL: a commit is on disk when the call
 * returns, so an id handed out survives a power cut, not just a killed
 * process (NORMAL would keep the last commits only in the WAL's page
 * cache). Commits are rare (a few per snapshot), so the fsync each costs
 * does not matter. A busy database is waited for at most
 * TG_COLL_SQLITE_BUSY_MS, then the call fails with -EBUSY.
 *
 * The schema is versioned with PRAGMA user_version and stamped with
 * PRAGMA application_id; open migrates an older version forward, one step
 * per transaction, and refuses a newer one or a foreign database.
 */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_H

#include "collector/catalog/catalog.h"

#define TG_COLL_SQLITE_BUSY_MS 1000
/* The schema this code writes. */
#define TG_COLL_SQLITE_SCHEMA 6
/* "TGC1", in PRAGMA application_id. */
#define TG_COLL_SQLITE_APP_ID 0x54474331

/* Opens (creating if needed) the catalog at |path| (copied). Returns 0 and
 * the catalog in *out (the caller's, freed by tg_coll_catalog_close()), or
 * -errno / TG_ENOT_SUPPORTED (a newer schema or a foreign database). */
int tg_coll_catalog_sqlite_open(const char *path, tg_coll_catalog_t **out);

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_SQLITE_H */
