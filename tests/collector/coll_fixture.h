/* What the collector's tests share: a store in a fresh directory on a
 * clock the test moves, with either catalog (SQLite in the directory, or
 * PostgreSQL: a fresh database on a server the test group starts), snapshots
 * written from a seed, and a look at the files on disk.
 *
 * A test runs against both catalogs by running its table twice: once with
 * the SQLite setups, once with the PostgreSQL ones inside
 * coll_pg_group_setup/teardown (COLL_RUN_BOTH_CATALOGS). Test bodies take
 * their fixture with coll_fx(), which skips the test when PostgreSQL is not
 * installed. */
#ifndef TRACEGATE_TESTS_COLL_FIXTURE_H
#define TRACEGATE_TESTS_COLL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/store/store.h"

typedef enum coll_kind { COLL_SQLITE, COLL_PG } coll_kind_t;

typedef struct coll_fixture {
  char dir[256];
  int64_t now_ms; /* the store's clock: tests move it */
  tg_coll_store_config_t cfg;
  tg_coll_store_t *store;
  tg_coll_recovery_t rec; /* what the last open repaired */
  coll_kind_t kind;
  bool skip;              /* PostgreSQL is not installed: coll_fx() skips */
  char conninfo[512];     /* COLL_PG: the test's database */
  uint32_t member;        /* COLL_PG: the catalog's member */
  tg_coll_catalog_t *cat; /* COLL_PG: opened and closed with the store */
} coll_fixture_t;

/* A fresh directory; the store is not open yet. Returns 0 or -errno. */
int coll_fixture_init(coll_fixture_t *fx, const char *tag);
/* The same with a fresh PostgreSQL database on the group's server (or
 * fx->skip set when PostgreSQL is not installed). 0 or -1. */
int coll_fixture_init_pg(coll_fixture_t *fx, const char *tag);
/* Opens fx->store with fx->cfg (and, COLL_PG, a catalog of fx->member
 * first), filling fx->rec. Returns its result. */
int coll_fixture_open(coll_fixture_t *fx);
void coll_fixture_close(coll_fixture_t *fx);
/* Closes and removes the directory. */
void coll_fixture_fini(coll_fixture_t *fx);

/* Opens the PostgreSQL catalog at |conninfo| as |member|; a member whose
 * last user was just killed is waited for (its server session ends on
 * its own), a bounded number of times. Returns the open's result. */
int coll_pg_catalog(const char *conninfo, uint32_t member,
                    tg_coll_catalog_t **out);

/* The fixture in *state; skips the test when it needs PostgreSQL and
 * PostgreSQL is not installed. */
coll_fixture_t *coll_fx(void **state);

/* cmocka setups and teardown on one static fixture in *state: a fresh
 * directory, with the store open or not; SQLite or PostgreSQL. */
int coll_setup(void **state);
int coll_setup_open(void **state);
int coll_pg_setup(void **state);
int coll_pg_setup_open(void **state);
int coll_teardown(void **state);
/* Group setup and teardown of the PostgreSQL tables: one server. */
int coll_pg_group_setup(void **state);
int coll_pg_group_teardown(void **state);
/* The group's server, for tests that make databases of their own; NULL
 * when not started. */
struct coll_pg_server *coll_pg_group_server(void);

/* The body of a main() that runs |table| (a macro of (setup, setup_open)
 * giving an array initializer) once per catalog. */
#define COLL_RUN_BOTH_CATALOGS(table)                                          \
  const struct CMUnitTest sqlite_tests[] = table(coll_setup, coll_setup_open); \
  const struct CMUnitTest pg_tests[] =                                         \
      table(coll_pg_setup, coll_pg_setup_open);                                \
  int failed_ =                                                                \
      cmocka_run_group_tests_name("sqlite", sqlite_tests, NULL, NULL);         \
  return failed_ + cmocka_run_group_tests_name("postgresql", pg_tests,         \
                                               coll_pg_group_setup,            \
                                               coll_pg_group_teardown)

/* Fills |buf| with |n| bytes made from |seed|. */
void coll_fill(uint8_t *buf, size_t n, uint64_t seed);

/* The name and problems coll_snapshot() gives a PARTIAL host. */
#define COLL_FX_PARTIAL_NAME "the one cut short"
#define COLL_FX_PARTIAL_PROBLEMS \
  "[{\"kind\":\"data_source\",\"data_source\":\"linux.ftrace\"}]"
/* And the perf boost it gives it. */
#define COLL_FX_PARTIAL_BOOST "{\"state\":\"failed\",\"frequency_hz\":499}"
/* And its requests across hosts. */
#define COLL_FX_PARTIAL_LINKS \
  "{\"mode\":\"joined\",\"flows_started\":7,\"flows_unmatched\":2}"

/* The catalog's move from schema 4 to 5 on |fx| (open): a snapshot with
 * a PARTIAL host stored, the fixture closed, |to_schema_4| (the
 * catalog's own: SQLite or PostgreSQL) drops the links column and sets
 * version 4, the fixture opened again (migrating). The old row then has
 * no links and keeps its boost; a new one has its links. */
void coll_fx_check_links_migration(coll_fixture_t *fx,
                                   void (*to_schema_4)(coll_fixture_t *fx));

/* Begins a snapshot with |trigger| (reason "r", origin "o"), writes |bytes|
 * bytes from |seed| in pieces, and finishes it with the hosts named in
 * |hosts| (NULL-terminated), each OK unless its name starts with '!'
 * (then FAILED) or '~' (then PARTIAL: failed part-way, with data, named
 * and with problems).
 * Returns 0 and *id, or the first error. */
int coll_snapshot(tg_coll_store_t *s, const char *trigger,
                  const char *const *hosts, size_t bytes, uint64_t seed,
                  uint64_t *id);

/* The file of snapshot |id| under |dir| (snapshots/, or tmp/ if
 * |partial|): its size and crc32. Returns 0, or -errno (no file). */
int coll_file_crc(const char *dir, uint64_t id, bool partial, uint64_t *size,
                  uint32_t *crc);
/* Entries in |dir|/|sub|, "." and ".." aside; -errno if unreadable. */
int coll_count_entries(const char *dir, const char *sub);

#endif /* TRACEGATE_TESTS_COLL_FIXTURE_H */
