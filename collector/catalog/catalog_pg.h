/* The shared catalog: a PostgreSQL database (Debian's libpq), used by
 * several collectors at once, each one connection and one "member".
 *
 * Ids come from an identity column (a sequence): increasing, never reused,
 * never the same for two collectors, whatever the interleaving. Commits
 * are durable on return (synchronous_commit = on for the session). A lock
 * or row held by someone else is waited for at most TG_COLL_PG_BUSY_MS
 * (lock_timeout), then the call fails with -EBUSY.
 *
 * A member is a number the collectors sharing a database tell apart (a
 * fleet collector's shard index). The catalog holds a session-level
 * advisory lock on (TG_COLL_PG_LOCK_KEY, member) while it is open, so a
 * second catalog of the same member is refused (-EBUSY), and a member
 * whose connection is gone (its process died) is proven gone: interrupt()
 * fails the PENDING rows of this member and of every member whose lock it
 * can take, never those of a running one.
 *
 * Text columns are bytea: what a caller gives is stored and returned byte
 * for byte, whatever the database's encoding. Every statement is constant
 * and prepared at open; values travel as binary parameters.
 *
 * The schema is versioned in table schema_version (component
 * 'tracegate-collector'); open migrates an older version forward, one step
 * per transaction (DDL is transactional in PostgreSQL), collectors starting
 * at once serialised by an advisory lock; a newer version or a database
 * that holds tables of someone else's is refused (TG_ENOT_SUPPORTED).
 */
#ifndef TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_H
#define TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_H

#include <stdint.h>

#include "collector/catalog/catalog.h"

#define TG_COLL_PG_BUSY_MS 1000
/* Seconds a connection attempt may take, unless the conninfo says. */
#define TG_COLL_PG_CONNECT_S 10
/* The schema this code writes. */
#define TG_COLL_PG_SCHEMA 6
/* The first key of our advisory locks: "TGC1" (0x54474331), in decimal
 * because it is spelt into SQL. */
#define TG_COLL_PG_LOCK_KEY 1414742833
/* Members are 0..TG_COLL_PG_MEMBER_MAX (the lock's second key is an int4;
 * -1 is the migration lock's). */
#define TG_COLL_PG_MEMBER_MAX ((uint32_t)INT32_MAX)

/* Connects with |conninfo| (a "postgresql://..." URI or "key=value ..."
 * text, libpq's; borrowed for the call, never logged: it may hold a
 * password) as |member|, migrating the schema if needed. Returns 0 and the
 * catalog in *out (the caller's, freed by tg_coll_catalog_close()), or
 * -EBUSY (the member is in use), -EINVAL (bad member), -EIO (cannot
 * connect; logged), TG_ENOT_SUPPORTED (newer schema, foreign database). */
int tg_coll_catalog_pg_open(const char *conninfo, uint32_t member,
                            tg_coll_catalog_t **out);

#endif /* TRACEGATE_COLLECTOR_CATALOG_CATALOG_PG_H */
