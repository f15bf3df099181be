/* A real PostgreSQL server for the collector's tests: initdb, pg_ctl start
 * and stop in a temporary directory, UNIX socket only (its own socket
 * directory, listen_addresses ''), a fresh database per test.
 *
 * initdb and pg_ctl refuse to run as root; a test run as root runs them
 * as Debian's "postgres" user (made by the postgresql-common package; else
 * "nobody"), dropping privileges in the forked child before exec: no
 * su/sudo, no PAM, no shell. The server is stopped with pg_ctl stop -m
 * immediate; its files go with the directory.
 */
#ifndef TRACEGATE_TESTS_COLL_PG_H
#define TRACEGATE_TESTS_COLL_PG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct coll_pg_server {
  char dir[256]; /* the temporary directory: data/, sock/, logs */
  bool up;       /* started, not yet stopped */
  unsigned dbs;  /* databases made so far */
} coll_pg_server_t;

/* Whether PostgreSQL's server programs are installed. */
bool coll_pg_installed(void);
/* Starts a server in a fresh directory. 0, or -1 (why on stderr, with the
 * logs' ends). */
int coll_pg_start(coll_pg_server_t *pg);
/* Stops it (if up) and removes its directory. Idempotent. */
void coll_pg_stop(coll_pg_server_t *pg);
/* Makes a fresh database; its conninfo (a postgresql:// URI) into |out|.
 * 0 or -1. */
int coll_pg_createdb(coll_pg_server_t *pg, char *out, size_t cap);

#endif /* TRACEGATE_TESTS_COLL_PG_H */
