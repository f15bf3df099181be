/* The catalog's insert_at and reserve (catalog.h), what a rebuild from a
 * bucket's sidecars writes with: a row read back as given, a taken id
 * refused and nothing changed, the id allocation kept ahead of inserted
 * and reserved ids, a FAILED row with its reason, bad input refused with
 * nothing left behind; with each catalog, SQLite and PostgreSQL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "collector/catalog/catalog_sqlite.h"

/* The fixture's catalog, opened on its own (no store). */
static tg_coll_catalog_t *open_catalog(coll_fixture_t *fx) {
  tg_coll_catalog_t *cat = NULL;
  if (fx->kind == COLL_PG) {
    assert_int_equal(coll_pg_catalog(fx->conninfo, fx->member, &cat), 0);
  } else {
    char path[512];
    snprintf(path, sizeof path, "%s/catalog.sqlite", fx->dir);
    assert_int_equal(tg_coll_catalog_sqlite_open(path, &cat), 0);
  }
  return cat;
}

static const tg_coll_host_result_t hosts[] = {
    {.host = "alpha:7000", .name = "a", .outcome = TG_COLL_HOST_OK,
     .bytes = 600, .packets = 6, .loss = 2, .window_first_ms = 10,
     .window_last_ms = 20},
    {.host = "beta:7000", .outcome = TG_COLL_HOST_PARTIAL,
     .error = "cut short", .problems = "[{\"kind\":\"x\"}]", .bytes = 400,
     .packets = 4, .loss = 3, .window_first_ms = 11, .window_last_ms = 21},
};

static tg_coll_insert_t row(uint64_t id, const tg_coll_begin_t *b,
                            tg_coll_finish_t *f) {
  *f = (tg_coll_finish_t){.bytes = 1000, .crc32 = 0xdeadbeef, .packets = 10,
                          .hosts = hosts, .n_hosts = 2,
                          .finished_ms = 5000};
  return (tg_coll_insert_t){
      .id = id, .begin = b, .started_ms = 4000, .finish = f, .pinned = true};
}

static void insert_at_reads_back_as_given(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat = open_catalog(fx);
  tg_coll_begin_t b = {"oom", "the reason", "origin:1"};
  tg_coll_finish_t f;
  tg_coll_insert_t r = row(40, &b, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  tg_coll_snapshot_t s;
  tg_coll_host_t h[4];
  size_t n;
  assert_int_equal(cat->ops->get_with_hosts(cat, 40, &s, h, 4, &n), 0);
  assert_int_equal(s.id, 40);
  assert_int_equal(s.state, TG_COLL_PARTIAL);
  assert_true(s.pinned);
  assert_int_equal(s.started_ms, 4000);
  assert_int_equal(s.finished_ms, 5000);
  assert_int_equal(s.bytes, 1000);
  assert_int_equal(s.crc32, 0xdeadbeef);
  assert_int_equal(s.packets, 10);
  assert_int_equal(s.loss, 5);
  assert_int_equal(s.n_hosts, 2);
  assert_int_equal(s.n_hosts_failed, 1);
  assert_string_equal(s.trigger, "oom");
  assert_string_equal(s.reason, "the reason");
  assert_string_equal(s.origin, "origin:1");
  assert_string_equal(s.failure, "");
  assert_int_equal(n, 2);
  assert_string_equal(h[0].host, "alpha:7000");
  assert_string_equal(h[0].name, "a");
  assert_int_equal(h[0].outcome, TG_COLL_HOST_OK);
  assert_string_equal(h[1].host, "beta:7000");
  assert_int_equal(h[1].outcome, TG_COLL_HOST_PARTIAL);
  assert_string_equal(h[1].error, "cut short");
  assert_string_equal(h[1].problems, "[{\"kind\":\"x\"}]");
  assert_int_equal(h[1].bytes, 400);
  assert_int_equal(h[1].loss, 3);
  assert_int_equal(h[1].window_last_ms, 21);
  tg_coll_catalog_close(cat);
}

static void insert_at_refuses_a_taken_id(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat = open_catalog(fx);
  tg_coll_begin_t b = {"oom", "", ""}, other = {"other", "", ""};
  uint64_t id;
  assert_int_equal(cat->ops->begin(cat, &b, 1, &id), 0);
  tg_coll_finish_t f;
  tg_coll_insert_t r = row(id, &other, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), -EEXIST);
  r = row(id + 10, &other, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  assert_int_equal(cat->ops->insert_at(cat, &r), -EEXIST);
  /* Both rows as they were. */
  tg_coll_snapshot_t s;
  assert_int_equal(cat->ops->get(cat, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_PENDING);
  assert_string_equal(s.trigger, "oom");
  tg_coll_host_t h[4];
  size_t n;
  assert_int_equal(cat->ops->get_with_hosts(cat, id + 10, &s, h, 4, &n), 0);
  assert_int_equal(n, 2);
  tg_coll_catalog_close(cat);
}

static void begin_after_insert_at_gets_a_higher_id(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat = open_catalog(fx);
  tg_coll_begin_t b = {"oom", "", ""};
  tg_coll_finish_t f;
  tg_coll_insert_t r = row(1000, &b, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  uint64_t id;
  assert_int_equal(cat->ops->begin(cat, &b, 1, &id), 0);
  assert_true(id > 1000);
  /* An id with no row: reserved past. */
  assert_int_equal(cat->ops->reserve(cat, 5000), 0);
  assert_int_equal(cat->ops->begin(cat, &b, 1, &id), 0);
  assert_true(id > 5000);
  uint64_t last = id;
  /* A lower one moves nothing back; a lower insert neither. */
  assert_int_equal(cat->ops->reserve(cat, 10), 0);
  r = row(20, &b, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  assert_int_equal(cat->ops->begin(cat, &b, 1, &id), 0);
  assert_true(id > last);
  tg_coll_catalog_close(cat);
  /* And across a reopen. */
  cat = open_catalog(fx);
  assert_int_equal(cat->ops->begin(cat, &b, 1, &last), 0);
  assert_true(last > id);
  tg_coll_catalog_close(cat);
}

static void insert_at_failed_keeps_its_hosts_and_reason(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat = open_catalog(fx);
  tg_coll_begin_t b = {"oom", "", ""};
  tg_coll_finish_t f;
  tg_coll_insert_t r = row(7, &b, &f);
  r.failure = "rebuild: the trace object is missing";
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  tg_coll_snapshot_t s;
  tg_coll_host_t h[4];
  size_t n;
  assert_int_equal(cat->ops->get_with_hosts(cat, 7, &s, h, 4, &n), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_string_equal(s.failure, "rebuild: the trace object is missing");
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.crc32, 0);
  assert_int_equal(n, 2);
  tg_coll_catalog_close(cat);
}

static void insert_at_refuses_bad_rows_leaving_nothing(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_catalog_t *cat = open_catalog(fx);
  tg_coll_begin_t b = {"oom", "", ""}, none = {"", "", ""};
  tg_coll_finish_t f;
  tg_coll_insert_t r = row(0, &b, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), -EINVAL);
  r = row((uint64_t)INT64_MAX + 1, &b, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), -EINVAL);
  r = row(3, &none, &f);
  assert_int_equal(cat->ops->insert_at(cat, &r), -EINVAL);
  assert_int_equal(cat->ops->reserve(cat, 0), -EINVAL);
  /* A host twice: the row goes with it (one transaction). */
  tg_coll_host_result_t twice[2] = {hosts[0], hosts[0]};
  r = row(3, &b, &f);
  f.hosts = twice;
  assert_int_equal(cat->ops->insert_at(cat, &r), -EINVAL);
  tg_coll_snapshot_t s;
  assert_int_equal(cat->ops->get(cat, 3, &s), -ENOENT);
  f.hosts = hosts;
  assert_int_equal(cat->ops->insert_at(cat, &r), 0);
  tg_coll_catalog_close(cat);
}

#define INSERT_AT_TESTS(setup, setup_open)                                   \
  {                                                                          \
    cmocka_unit_test_setup_teardown(insert_at_reads_back_as_given, setup,    \
                                    coll_teardown),                          \
        cmocka_unit_test_setup_teardown(insert_at_refuses_a_taken_id, setup, \
                                        coll_teardown),                      \
        cmocka_unit_test_setup_teardown(                                     \
            begin_after_insert_at_gets_a_higher_id, setup, coll_teardown),   \
        cmocka_unit_test_setup_teardown(                                     \
            insert_at_failed_keeps_its_hosts_and_reason, setup,              \
            coll_teardown),                                                  \
        cmocka_unit_test_setup_teardown(                                     \
            insert_at_refuses_bad_rows_leaving_nothing, setup,               \
            coll_teardown),                                                  \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(INSERT_AT_TESTS); }
