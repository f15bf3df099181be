/* SPDX-License-Identifier: Apache-2.0 */
/* Function shares in the catalog (catalog.h, docs/collector.md "Function
 * shares"), with SQLite and then PostgreSQL: rows read back exactly,
 * both questions ("F above X%", "F on host H over time") answered with
 * exactly the rows that qualify, in order, paged without loss or
 * repeat; names compared byte for byte and cut at their bound; rows
 * replaced, refused when bad, removed with their snapshot (delete and
 * retention); a catalog of schema 5 moved to 6 keeping its rows. */
#include <errno.h>
#include <libpq-fe.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "collector/catalog/catalog_pg.h"
#include "collector/catalog/catalog_sqlite.h"
#include "collector/store/store.h"

static const char *const two_hosts[] = {"alpha", "beta", NULL};

/* Host |host|'s rows: F with |f_total_ns| of 1000 ns, a pseudo row, an
 * unknown frame of a mapping, and the rest. */
static tg_coll_host_shares_t host_rows(const char *host, uint64_t f_total_ns,
                                       tg_coll_share_in_t rows[4]) {
  rows[0] = (tg_coll_share_in_t){.function = "F",
                                 .kind = TG_COLL_SHARE_FUNCTION,
                                 .self_ns = f_total_ns / 2,
                                 .total_ns = f_total_ns,
                                 .self_samples = f_total_ns / 20,
                                 .total_samples = f_total_ns / 10};
  rows[1] = (tg_coll_share_in_t){.function = "[no callstack]",
                                 .kind = TG_COLL_SHARE_PSEUDO,
                                 .self_ns = 100,
                                 .total_ns = 100,
                                 .self_samples = 10,
                                 .total_samples = 10};
  rows[2] = (tg_coll_share_in_t){.function = "[unknown]",
                                 .file = "/usr/lib/libx.so",
                                 .kind = TG_COLL_SHARE_PSEUDO,
                                 .self_ns = 50,
                                 .total_ns = 60,
                                 .self_samples = 5,
                                 .total_samples = 6};
  rows[3] = (tg_coll_share_in_t){.function = "[rest]",
                                 .kind = TG_COLL_SHARE_REST,
                                 .self_ns = 850 - f_total_ns / 2,
                                 .total_ns = 850 - f_total_ns / 2,
                                 .self_samples = 85 - f_total_ns / 20,
                                 .total_samples = 85 - f_total_ns / 20};
  return (tg_coll_host_shares_t){
      .host = host, .cpu_ns = 1000, .samples = 100, .rows = rows, .n_rows = 4};
}

/* Snapshot with hosts alpha and beta, F at |a_ns| and |b_ns| of 1000. */
static uint64_t snapshot_with_shares(coll_fixture_t *fx, uint64_t seed,
                                     uint64_t a_ns, uint64_t b_ns) {
  uint64_t id;
  fx->now_ms += 1000;
  assert_int_equal(coll_snapshot(fx->store, "t", two_hosts, 64, seed, &id), 0);
  tg_coll_share_in_t ra[4], rb[4];
  tg_coll_host_shares_t h[2] = {host_rows("alpha", a_ns, ra),
                                host_rows("beta", b_ns, rb)};
  assert_int_equal(tg_coll_store_set_shares(fx->store, id, h, 2), 0);
  return id;
}

static size_t find(coll_fixture_t *fx, const tg_coll_share_query_t *q,
                   tg_coll_share_t *out, size_t cap) {
  size_t n = 0;
  assert_int_equal(tg_coll_store_find_shares(fx->store, q, out, cap, &n), 0);
  return n;
}

static void shares_answer_both_questions_exactly(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t s1 = snapshot_with_shares(fx, 1, 400, 100);
  uint64_t s2 = snapshot_with_shares(fx, 2, 200, 600);
  uint64_t s3 = snapshot_with_shares(fx, 3, 500, 300);
  tg_coll_share_t out[16];

  /* F above 25% of a host's CPU: s3 alpha, s2 beta, s1 alpha, newest
   * first. */
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  q.min_share = 0.25;
  size_t n = find(fx, &q, out, 16);
  assert_int_equal(n, 4);
  assert_int_equal(out[0].snapshot_id, s3);
  assert_string_equal(out[0].host, "alpha");
  assert_int_equal(out[1].snapshot_id, s3);
  assert_string_equal(out[1].host, "beta");
  assert_int_equal(out[2].snapshot_id, s2);
  assert_string_equal(out[2].host, "beta");
  assert_int_equal(out[3].snapshot_id, s1);
  assert_string_equal(out[3].host, "alpha");
  assert_int_equal(out[3].total_ns, 400);
  assert_int_equal(out[3].self_ns, 200);
  assert_int_equal(out[3].total_samples, 40);
  assert_int_equal(out[3].self_samples, 20);
  assert_int_equal(out[3].host_cpu_ns, 1000);
  assert_int_equal(out[3].host_samples, 100);
  assert_int_equal(out[3].rank, 0);
  assert_int_equal(out[3].kind, TG_COLL_SHARE_FUNCTION);
  assert_false(out[3].by_samples);
  assert_false(out[3].cut);
  assert_string_equal(out[3].file, "");
  assert_true(out[3].total_share == 0.4);
  assert_true(out[3].self_share == 0.2);

  /* "More than": exactly 30% is not above 0.3. */
  q.min_share = 0.3;
  assert_int_equal(find(fx, &q, out, 16), 3);
  /* By the self share: only s2 beta (300 of 1000) is above 25%. */
  q.min_share = 0.25;
  q.by_self = true;
  n = find(fx, &q, out, 16);
  assert_int_equal(n, 1);
  assert_int_equal(out[0].snapshot_id, s2);
  q.by_self = false;

  /* A time window: snapshots started in [s2's, s3's). */
  tg_coll_snapshot_t r2, r3;
  assert_int_equal(tg_coll_store_get(fx->store, s2, &r2), 0);
  assert_int_equal(tg_coll_store_get(fx->store, s3, &r3), 0);
  q.from_ms = r2.started_ms;
  q.to_ms = r3.started_ms;
  n = find(fx, &q, out, 16);
  assert_int_equal(n, 1);
  assert_int_equal(out[0].snapshot_id, s2);
  assert_int_equal(out[0].started_ms, r2.started_ms);

  /* F on beta over time: every snapshot, whatever the share. */
  tg_coll_share_query_t h = TG_COLL_SHARE_QUERY_INIT;
  h.function = "F";
  h.host = "beta";
  n = find(fx, &h, out, 16);
  assert_int_equal(n, 3);
  assert_int_equal(out[0].snapshot_id, s3);
  assert_int_equal(out[0].total_ns, 300);
  assert_int_equal(out[1].snapshot_id, s2);
  assert_int_equal(out[1].total_ns, 600);
  assert_int_equal(out[2].snapshot_id, s1);
  assert_int_equal(out[2].total_ns, 100);
  for (size_t i = 0; i < n; i++) assert_string_equal(out[i].host, "beta");

  /* Pseudo names are rows of their own, the unknown frame with its
   * mapping; the rest is the host's leaves past the top. */
  h.function = "[unknown]";
  n = find(fx, &h, out, 16);
  assert_int_equal(n, 3);
  assert_int_equal(out[0].kind, TG_COLL_SHARE_PSEUDO);
  assert_string_equal(out[0].file, "/usr/lib/libx.so");
  assert_int_equal(out[0].rank, 2);
  h.function = "[rest]";
  n = find(fx, &h, out, 16);
  assert_int_equal(n, 3);
  assert_int_equal(out[0].kind, TG_COLL_SHARE_REST);
  assert_int_equal(out[0].self_ns, 850 - 150);
  assert_int_equal(out[0].rank, 3);

  /* Byte for byte: no case folding, no prefix. */
  h.host = NULL;
  h.function = "f";
  assert_int_equal(find(fx, &h, out, 16), 0);
  h.function = "F ";
  assert_int_equal(find(fx, &h, out, 16), 0);
  h.function = "[no callstack]";
  assert_int_equal(find(fx, &h, out, 16), 6);
}

/* Every page follows the last row of the one before: together they are
 * the whole answer, in order, once. */
static void shares_page_without_loss_or_repeat(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  for (uint64_t i = 0; i < 4; i++) snapshot_with_shares(fx, i, 100 + i, 200);
  tg_coll_share_t all[16], page[3];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  size_t n_all = find(fx, &q, all, 16);
  assert_int_equal(n_all, 8);
  q.limit = 3;
  size_t seen = 0;
  for (int round = 0; round < 10; round++) {
    size_t n = find(fx, &q, page, 3);
    for (size_t i = 0; i < n; i++, seen++) {
      assert_true(seen < n_all);
      assert_int_equal(page[i].snapshot_id, all[seen].snapshot_id);
      assert_string_equal(page[i].host, all[seen].host);
      assert_int_equal(page[i].rank, all[seen].rank);
    }
    if (n < 3) break;
    q.after_id = page[n - 1].snapshot_id;
    q.after_host = NULL;
    static char host[TG_COLL_HOST_MAX + 1];
    snprintf(host, sizeof(host), "%s", page[n - 1].host);
    q.after_host = host;
    q.after_rank = page[n - 1].rank;
  }
  assert_int_equal(seen, n_all);
  /* cap bounds the answer as limit does. */
  q = (tg_coll_share_query_t)TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  assert_int_equal(find(fx, &q, page, 2), 2);
}

static void shares_names_cut_at_their_bound(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_hosts, 64, 1, &id), 0);
  char *long_name = malloc(TG_COLL_FUNCTION_MAX + 100);
  assert_non_null(long_name);
  memset(long_name, 'x', TG_COLL_FUNCTION_MAX + 99);
  long_name[TG_COLL_FUNCTION_MAX + 99] = 0;
  /* Bytes that are not UTF-8 are a name like any other. */
  tg_coll_share_in_t rows[2] = {
      {.function = long_name, .self_ns = 10, .total_ns = 20},
      {.function = "\xff\xfe\x01weird", .self_ns = 5, .total_ns = 5}};
  tg_coll_host_shares_t h = {.host = "alpha", .cpu_ns = 100, .samples = 10,
                             .rows = rows, .n_rows = 2};
  assert_int_equal(tg_coll_store_set_shares(fx->store, id, &h, 1), 0);
  tg_coll_share_t out[2];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  /* The whole name is over the query's bound too. */
  q.function = long_name;
  size_t n;
  assert_int_equal(tg_coll_store_find_shares(fx->store, &q, out, 2, &n),
                   -EINVAL);
  long_name[TG_COLL_FUNCTION_MAX] = 0;
  assert_int_equal(find(fx, &q, out, 2), 1);
  assert_true(out[0].cut);
  assert_true(out[0].total_share == 0.2);
  long_name[TG_COLL_FUNCTION_MAX - 1] = 0;
  assert_int_equal(find(fx, &q, out, 2), 0);
  q.function = "\xff\xfe\x01weird";
  assert_int_equal(find(fx, &q, out, 2), 1);
  assert_false(out[0].cut);
  assert_int_equal(out[0].rank, 1);
  free(long_name);
}

/* A host whose samples had no CPU-clock rate: shares of samples. */
static void shares_of_samples_when_no_cpu_rate(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_hosts, 64, 1, &id), 0);
  tg_coll_share_in_t row = {.function = "F", .self_samples = 3,
                            .total_samples = 6, .self_ns = 999,
                            .total_ns = 999};
  tg_coll_host_shares_t h = {.host = "alpha", .cpu_ns = 1000, .samples = 8,
                             .by_samples = true, .rows = &row, .n_rows = 1};
  assert_int_equal(tg_coll_store_set_shares(fx->store, id, &h, 1), 0);
  tg_coll_share_t out[1];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  assert_int_equal(find(fx, &q, out, 1), 1);
  assert_true(out[0].by_samples);
  assert_true(out[0].total_share == 0.75);
  assert_true(out[0].self_share == 0.375);
}

static void shares_replaced_refused_and_removed(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t s1 = snapshot_with_shares(fx, 1, 400, 100);
  uint64_t s2 = snapshot_with_shares(fx, 2, 400, 100);
  tg_coll_share_t out[16];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  assert_int_equal(find(fx, &q, out, 16), 4);

  /* Set again: the old rows go. */
  tg_coll_share_in_t row = {.function = "G", .total_ns = 1};
  tg_coll_host_shares_t one = {.host = "alpha", .cpu_ns = 10, .rows = &row,
                               .n_rows = 1};
  assert_int_equal(tg_coll_store_set_shares(fx->store, s1, &one, 1), 0);
  assert_int_equal(find(fx, &q, out, 16), 2);

  /* Refused, changing nothing. */
  tg_coll_host_shares_t twice[2] = {one, one};
  assert_int_equal(tg_coll_store_set_shares(fx->store, s2, twice, 2), -EINVAL);
  tg_coll_share_in_t empty = {.function = ""};
  tg_coll_host_shares_t bad = {.host = "alpha", .rows = &empty, .n_rows = 1};
  assert_int_equal(tg_coll_store_set_shares(fx->store, s2, &bad, 1), -EINVAL);
  bad.rows = &row;
  bad.cpu_ns = (uint64_t)INT64_MAX + 1;
  assert_int_equal(tg_coll_store_set_shares(fx->store, s2, &bad, 1), -EINVAL);
  bad.cpu_ns = 0;
  bad.n_rows = TG_COLL_SHARES_TOP_MAX + 2;
  assert_int_equal(tg_coll_store_set_shares(fx->store, s2, &bad, 1), -EINVAL);
  assert_int_equal(tg_coll_store_set_shares(fx->store, 999999, &one, 1),
                   -ENOENT);
  assert_int_equal(find(fx, &q, out, 16), 2);
  tg_coll_share_query_t badq = q;
  badq.min_share = 1.5;
  size_t n;
  assert_int_equal(tg_coll_store_find_shares(fx->store, &badq, out, 16, &n),
                   -EINVAL);
  badq.min_share = 0;
  badq.function = "";
  assert_int_equal(tg_coll_store_find_shares(fx->store, &badq, out, 16, &n),
                   -EINVAL);

  /* A snapshot being written has no shares yet. */
  tg_coll_begin_t b = {.trigger = "t"};
  tg_coll_writer_t *w;
  uint64_t pending;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &pending), 0);
  assert_int_equal(tg_coll_store_set_shares(fx->store, pending, &one, 1),
                   -EINVAL);
  assert_int_equal(tg_coll_store_abort(fx->store, w, "test"), 0);

  /* Deleted with their snapshot. */
  assert_int_equal(tg_coll_store_delete(fx->store, s2), 0);
  assert_int_equal(find(fx, &q, out, 16), 0);
  q.function = "G";
  assert_int_equal(find(fx, &q, out, 16), 1);
}

static void shares_go_with_retention(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  snapshot_with_shares(fx, 1, 400, 100);
  uint64_t keep = snapshot_with_shares(fx, 2, 400, 100);
  coll_fixture_close(fx);
  /* The first is 1600 ms old, the second 600. */
  fx->cfg.retention.max_age_ms = 1500;
  fx->now_ms += 600;
  assert_int_equal(coll_fixture_open(fx), 0);
  tg_coll_retained_t r;
  assert_int_equal(tg_coll_store_retain(fx->store, &r), 1);
  assert_int_equal(r.verdict, TG_COLL_DROP_AGE);
  assert_int_equal(tg_coll_store_retain(fx->store, &r), 0);
  tg_coll_share_t out[16];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  size_t n = find(fx, &q, out, 16);
  assert_int_equal(n, 2);
  assert_int_equal(out[0].snapshot_id, keep);
  assert_int_equal(out[1].snapshot_id, keep);
}

/* Runs |sql| on the fixture's catalog behind the store's back; with
 * |out|, its one integer answer. */
static void catalog_sql(coll_fixture_t *fx, const char *sql, long *out) {
  if (fx->kind == COLL_SQLITE) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fx->dir, TG_COLL_CATALOG_FILE);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (out) {
      sqlite3_stmt *st;
      assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
      assert_int_equal(sqlite3_step(st), SQLITE_ROW);
      *out = (long)sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    } else {
      assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
    sqlite3_close(db);
    return;
  }
  PGconn *c = PQconnectdb(fx->conninfo);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *r = PQexec(c, sql);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(c));
  if (out) {
    assert_int_equal(PQntuples(r), 1);
    *out = strtol(PQgetvalue(r, 0, 0), NULL, 10);
  }
  PQclear(r);
  PQfinish(c);
}

/* A catalog a collector of schema 5 left (no function_shares) moves to
 * 6 at open: its snapshots and hosts kept, and its snapshots take
 * shares. */
static void schema_5_moves_to_6_keeping_rows(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t old_id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_hosts, 64, 1, &old_id),
                   0);
  coll_fixture_close(fx);
  bool lite = fx->kind == COLL_SQLITE;
  catalog_sql(fx,
              lite ? "BEGIN; DROP TABLE function_shares;"
                     " PRAGMA user_version = 5; COMMIT;"
                   : "DROP TABLE function_shares;"
                     " UPDATE schema_version SET version = 5;",
              NULL);
  long v = 0;
  catalog_sql(fx,
              lite ? "SELECT count(*) FROM sqlite_master"
                     " WHERE name = 'function_shares'"
                   : "SELECT count(*) FROM pg_tables"
                     " WHERE tablename = 'function_shares'",
              &v);
  assert_int_equal(v, 0);
  assert_int_equal(coll_fixture_open(fx), 0);
  catalog_sql(fx,
              lite ? "PRAGMA user_version"
                   : "SELECT version FROM schema_version"
                     " WHERE component = 'tracegate-collector'",
              &v);
  assert_int_equal(v, 6);
  tg_coll_host_t h[2];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, old_id, h, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(h[0].host, "alpha");
  tg_coll_share_in_t rows[4];
  tg_coll_host_shares_t hs = host_rows("alpha", 400, rows);
  assert_int_equal(tg_coll_store_set_shares(fx->store, old_id, &hs, 1), 0);
  tg_coll_share_t out[4];
  tg_coll_share_query_t q = TG_COLL_SHARE_QUERY_INIT;
  q.function = "F";
  assert_int_equal(find(fx, &q, out, 4), 1);
  assert_int_equal(out[0].snapshot_id, old_id);
  /* The operator's SQL of docs/collector.md reads the same rows. */
  catalog_sql(fx,
              lite ? "SELECT count(*) FROM function_shares"
                     " WHERE function = 'F' AND total_share > 0.3"
                   : "SELECT count(*) FROM function_shares"
                     " WHERE function = 'F'::bytea AND total_share > 0.3",
              &v);
  assert_int_equal(v, 1);
}

#define SHARES_TESTS(setup, setup_open)                                       \
  {                                                                           \
    cmocka_unit_test_setup_teardown(shares_answer_both_questions_exactly,     \
                                    setup_open, coll_teardown),               \
        cmocka_unit_test_setup_teardown(shares_page_without_loss_or_repeat,   \
                                        setup_open, coll_teardown),           \
        cmocka_unit_test_setup_teardown(shares_names_cut_at_their_bound,      \
                                        setup_open, coll_teardown),           \
        cmocka_unit_test_setup_teardown(shares_of_samples_when_no_cpu_rate,   \
                                        setup_open, coll_teardown),           \
        cmocka_unit_test_setup_teardown(shares_replaced_refused_and_removed,  \
                                        setup_open, coll_teardown),           \
        cmocka_unit_test_setup_teardown(shares_go_with_retention, setup_open, \
                                        coll_teardown),                       \
        cmocka_unit_test_setup_teardown(schema_5_moves_to_6_keeping_rows,     \
                                        setup_open, coll_teardown),           \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(SHARES_TESTS); }
