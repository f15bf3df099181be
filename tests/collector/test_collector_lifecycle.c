/* The store's lifecycle (collector/store/store.h): begin, write, finish complete,
 * partial and failed, abort, list with filters, get, hosts, pin, delete,
 * the lock, and text stored verbatim whatever SQL it holds; with each
 * catalog, SQLite and PostgreSQL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "collector/catalog/snapshot_id.h"

static const char *const two_ok[] = {"alpha", "beta", NULL};
static const char *const one_failed[] = {"alpha", "!beta", NULL};
static const char *const all_failed[] = {"!alpha", "!beta", NULL};
static const char *const cut_short[] = {"~alpha", "!beta", NULL};

static void lifecycle_complete_snapshot_has_its_file_and_hosts(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "oom", two_ok, 10000, 1, &id), 0);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_COMPLETE);
  assert_string_equal(s.trigger, "oom");
  assert_string_equal(s.reason, "r");
  assert_string_equal(s.origin, "o");
  assert_int_equal(s.bytes, 10000);
  assert_int_equal(s.packets, 20);
  assert_int_equal(s.n_hosts, 2);
  assert_int_equal(s.n_hosts_failed, 0);
  assert_int_equal(s.loss, 0 + 1);
  assert_int_equal(s.started_ms, fx->now_ms);
  uint64_t size;
  uint32_t crc;
  assert_int_equal(coll_file_crc(fx->dir, id, false, &size, &crc), 0);
  assert_int_equal(size, 10000);
  assert_int_equal(crc, s.crc32);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);

  tg_coll_host_t h[4];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(h[0].host, "alpha");
  assert_string_equal(h[1].host, "beta");
  assert_int_equal(h[1].outcome, TG_COLL_HOST_OK);
  assert_int_equal(h[1].loss, 1);
  assert_int_equal(h[1].window_first_ms, 1000);
  assert_int_equal(h[1].window_last_ms, 1500);
  /* Too little room: the count says how much is needed. */
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 1, &n), 0);
  assert_int_equal(n, 2);

  int fd;
  assert_int_equal(tg_coll_store_open_file(fx->store, id, &fd), 0);
  char first[4];
  assert_int_equal(read(fd, first, sizeof(first)), sizeof(first));
  close(fd);
}

static void lifecycle_partial_and_failed_follow_the_hosts(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t partial, failed;
  assert_int_equal(coll_snapshot(fx->store, "t", one_failed, 500, 2, &partial),
                   0);
  assert_int_equal(coll_snapshot(fx->store, "t", all_failed, 500, 3, &failed),
                   0);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, partial, &s), 0);
  assert_int_equal(s.state, TG_COLL_PARTIAL);
  assert_int_equal(s.n_hosts_failed, 1);
  tg_coll_host_t h[2];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, partial, h, 2, &n), 0);
  assert_int_equal(h[1].outcome, TG_COLL_HOST_FAILED);
  assert_string_equal(h[1].error, "unreachable");

  /* No host delivered: the row says so, and no file is kept. */
  assert_int_equal(tg_coll_store_get(fx->store, failed, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_int_equal(s.bytes, 0);
  assert_int_equal(s.n_hosts_failed, 2);
  uint64_t size;
  uint32_t crc;
  assert_int_equal(coll_file_crc(fx->dir, failed, false, &size, &crc), -ENOENT);
  int fd;
  assert_int_equal(tg_coll_store_open_file(fx->store, failed, &fd), -ENOENT);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
}

/* A host that failed part-way delivered data: a snapshot of it alone (and
 * a host that delivered nothing) is partial and live, not failed, and the
 * host's row says partial, with why. */
static void lifecycle_a_host_cut_short_keeps_its_data(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", cut_short, 500, 4, &id), 0);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_PARTIAL);
  assert_int_equal(s.n_hosts_failed, 2);
  assert_int_equal(s.bytes, 500);
  tg_coll_host_t h[2];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(h[0].outcome, TG_COLL_HOST_PARTIAL);
  assert_string_equal(h[0].error, "link lost");
  assert_string_equal(h[0].name, COLL_FX_PARTIAL_NAME);
  assert_string_equal(h[0].problems, COLL_FX_PARTIAL_PROBLEMS);
  assert_string_equal(h[0].boost, COLL_FX_PARTIAL_BOOST);
  assert_string_equal(h[0].links, COLL_FX_PARTIAL_LINKS);
  assert_string_equal(tg_coll_host_outcome_name(h[0].outcome), "partial");
  assert_int_equal(h[1].outcome, TG_COLL_HOST_FAILED);
  assert_string_equal(h[1].name, "");
  assert_string_equal(h[1].problems, "");
  assert_string_equal(h[1].boost, "");
  assert_string_equal(h[1].links, "");
  int fd;
  assert_int_equal(tg_coll_store_open_file(fx->store, id, &fd), 0);
  close(fd);
}

static void lifecycle_abort_keeps_the_row_failed_without_file(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_begin_t b = {.trigger = "manual"};
  tg_coll_writer_t *w;
  uint64_t id;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &id), 0);
  assert_int_equal(tg_coll_writer_id(w), id);
  assert_int_equal(tg_coll_writer_write(w, "abc", 3), 0);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 1);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_PENDING);
  /* A PENDING snapshot is being written: not deletable. */
  assert_int_equal(tg_coll_store_delete(fx->store, id), -EBUSY);
  assert_int_equal(tg_coll_store_abort(fx->store, w, "host list empty"), 0);
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_string_equal(s.failure, "host list empty");
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
}

static void lifecycle_finish_refuses_a_bad_result_and_fails_the_row(
    void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_begin_t b = {.trigger = "t"};
  tg_coll_writer_t *w;
  uint64_t id;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &id), 0);
  tg_coll_host_result_t twice[2] = {{.host = "same"}, {.host = "same"}};
  tg_coll_result_t r = {.hosts = twice, .n_hosts = 2};
  assert_int_equal(tg_coll_store_finish(fx->store, w, &r), -EINVAL);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_int_equal(s.state, TG_COLL_FAILED);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_TMP_DIR), 0);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 0);

  /* Text over its cap is refused before anything is written. */
  char longer[TG_COLL_TRIGGER_MAX + 2];
  memset(longer, 't', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = 0;
  b.trigger = longer;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &id), -EINVAL);
  b.trigger = "";
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &id), -EINVAL);
}

static size_t list(coll_fixture_t *fx, const tg_coll_filter_t *f, uint64_t *ids,
                   size_t cap) {
  tg_coll_snapshot_t rows[16];
  size_t n = 0;
  assert_int_equal(tg_coll_store_list(fx->store, f, rows, 16, &n), 0);
  assert_true(n <= cap);
  for (size_t i = 0; i < n; i++) ids[i] = rows[i].id;
  return n;
}

static void lifecycle_list_filters_by_time_trigger_host_and_state(
    void **state) {
  coll_fixture_t *fx = coll_fx(state);
  static const char *const ab[] = {"a", "b", NULL};
  static const char *const bc[] = {"b", "!c", NULL};
  uint64_t id[4];
  int64_t t0 = fx->now_ms;
  assert_int_equal(coll_snapshot(fx->store, "oom", ab, 10, 1, &id[0]), 0);
  fx->now_ms += 1000;
  assert_int_equal(coll_snapshot(fx->store, "latency", bc, 10, 2, &id[1]), 0);
  fx->now_ms += 1000;
  assert_int_equal(coll_snapshot(fx->store, "oom", bc, 10, 3, &id[2]), 0);
  fx->now_ms += 1000;
  assert_int_equal(coll_snapshot(fx->store, "manual", ab, 10, 4, &id[3]), 0);

  uint64_t got[16];
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  assert_int_equal(list(fx, &f, got, 16), 4);
  assert_int_equal(got[0], id[3]); /* newest first */
  assert_int_equal(got[3], id[0]);

  f.from_ms = t0 + 1000;
  f.to_ms = t0 + 3000; /* [from, to): the last one is out */
  assert_int_equal(list(fx, &f, got, 16), 2);
  assert_int_equal(got[0], id[2]);
  assert_int_equal(got[1], id[1]);

  f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f.trigger = "oom";
  assert_int_equal(list(fx, &f, got, 16), 2);
  assert_int_equal(got[0], id[2]);
  assert_int_equal(got[1], id[0]);

  f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f.host = "c"; /* failed hosts count: it was asked */
  assert_int_equal(list(fx, &f, got, 16), 2);
  f.host = "a";
  f.trigger = "oom";
  assert_int_equal(list(fx, &f, got, 16), 1);
  assert_int_equal(got[0], id[0]);

  f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f.states = TG_COLL_STATE_BIT(TG_COLL_PARTIAL);
  assert_int_equal(list(fx, &f, got, 16), 2);

  /* Paging: two at a time, on from the last id seen. */
  f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f.limit = 2;
  assert_int_equal(list(fx, &f, got, 16), 2);
  f.before_id = got[1];
  assert_int_equal(list(fx, &f, got, 16), 2);
  assert_int_equal(got[1], id[0]);
  f.before_id = got[1];
  assert_int_equal(list(fx, &f, got, 16), 0);

  f = (tg_coll_filter_t)TG_COLL_FILTER_INIT;
  f.limit = TG_COLL_LIST_MAX + 1;
  tg_coll_snapshot_t one;
  size_t n;
  assert_int_equal(tg_coll_store_list(fx->store, &f, &one, 1, &n), -EINVAL);
}

static void lifecycle_pin_and_delete(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_ok, 100, 9, &id), 0);
  tg_coll_snapshot_t s;
  assert_int_equal(tg_coll_store_pin(fx->store, id, true), 0);
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_true(s.pinned);
  assert_int_equal(tg_coll_store_pin(fx->store, id, false), 0);
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), 0);
  assert_false(s.pinned);

  assert_int_equal(tg_coll_store_delete(fx->store, id), 0);
  assert_int_equal(tg_coll_store_get(fx->store, id, &s), -ENOENT);
  tg_coll_host_t h;
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, id, &h, 1, &n), -ENOENT);
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 0);
  assert_int_equal(tg_coll_store_delete(fx->store, id), -ENOENT);
  assert_int_equal(tg_coll_store_pin(fx->store, id, true), -ENOENT);
  assert_int_equal(tg_coll_store_pin(fx->store, 0, true), -ENOENT);
}

/* A check after the finish (collector/daemon/import_check.c) sets one
 * host's problems; the others keep theirs. Only a finished snapshot's
 * known host can be set. */
static void lifecycle_problems_set_after_the_finish(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_ok, 100, 9, &id), 0);
  static const char p[] =
      "[{\"kind\":\"import\",\"code\":\"TG-5070\",\"why\":\"x'); --\"}]";
  assert_int_equal(tg_coll_store_set_problems(fx->store, id, "beta", p), 0);
  tg_coll_host_t h[2];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(h[0].host, "alpha");
  assert_string_equal(h[0].problems, "");
  assert_string_equal(h[1].problems, p);
  assert_int_equal(tg_coll_store_set_problems(fx->store, id, "beta", ""), 0);
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 2, &n), 0);
  assert_string_equal(h[1].problems, "");
  assert_int_equal(tg_coll_store_set_problems(fx->store, id, "gamma", p),
                   -ENOENT);
  assert_int_equal(tg_coll_store_set_problems(fx->store, id + 1000, "beta", p),
                   -ENOENT);
  static char big[TG_COLL_PROBLEMS_MAX + 2];
  memset(big, 'x', sizeof(big) - 1);
  assert_int_equal(tg_coll_store_set_problems(fx->store, id, "beta", big),
                   -EINVAL);
  /* A snapshot being written has no host rows to set yet. */
  tg_coll_begin_t b = {.trigger = "manual"};
  tg_coll_writer_t *w;
  uint64_t pending;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &pending), 0);
  assert_int_equal(tg_coll_store_set_problems(fx->store, pending, "beta", p),
                   -EINVAL);
  assert_int_equal(tg_coll_store_abort(fx->store, w, "done"), 0);
}

static void lifecycle_sql_in_text_is_stored_verbatim(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  static const char *const hostile[] = {
      "'; DROP TABLE snapshots; --",
      "x' OR '1'='1",
      "\"); DELETE FROM snapshot_hosts; --",
      "%s%n%x",
      "line\nbreak\ttab",
      "caf\xc3\xa9 \xe2\x80\xae",
      "?1 ?2 :name @x $y",
      "Robert'); DROP TABLE snapshot_hosts;--",
      "not utf-8: \xff\xfe\xc0\x80", /* bytes, whatever the encoding */
  };
  size_t count = sizeof(hostile) / sizeof(hostile[0]);
  uint64_t ids[16];
  for (size_t i = 0; i < count; i++) {
    tg_coll_begin_t b = {.trigger = hostile[i],
                         .reason = hostile[(i + 1) % count],
                         .origin = hostile[(i + 2) % count]};
    tg_coll_writer_t *w;
    assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &ids[i]), 0);
    assert_int_equal(tg_coll_writer_write(w, "x", 1), 0);
    tg_coll_host_result_t h = {.host = hostile[(i + 3) % count],
                               .error = hostile[(i + 4) % count]};
    tg_coll_result_t r = {.hosts = &h, .n_hosts = 1};
    assert_int_equal(tg_coll_store_finish(fx->store, w, &r), 0);
  }
  for (size_t i = 0; i < count; i++) {
    tg_coll_snapshot_t s;
    assert_int_equal(tg_coll_store_get(fx->store, ids[i], &s), 0);
    assert_string_equal(s.trigger, hostile[i]);
    assert_string_equal(s.reason, hostile[(i + 1) % count]);
    assert_string_equal(s.origin, hostile[(i + 2) % count]);
    tg_coll_host_t h;
    size_t n;
    assert_int_equal(tg_coll_store_hosts(fx->store, ids[i], &h, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(h.host, hostile[(i + 3) % count]);
    assert_string_equal(h.error, hostile[(i + 4) % count]);
    /* The filters match the text exactly, and only it. */
    tg_coll_filter_t f = TG_COLL_FILTER_INIT;
    f.trigger = hostile[i];
    uint64_t got[16];
    assert_int_equal(list(fx, &f, got, 16), 1);
    assert_int_equal(got[0], ids[i]);
    f.trigger = NULL;
    f.host = hostile[(i + 3) % count];
    assert_int_equal(list(fx, &f, got, 16), 1);
  }
  tg_coll_filter_t all = TG_COLL_FILTER_INIT;
  uint64_t got[16];
  assert_int_equal(list(fx, &all, got, 16), count);
}

static void lifecycle_second_open_of_a_store_is_refused(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  tg_coll_store_t *other = NULL;
  /* SQLite: the directory's lock; PostgreSQL: the catalog in use. */
  assert_int_equal(tg_coll_store_open(&fx->cfg, &other, NULL), -EBUSY);
  assert_null(other);
}

static void lifecycle_store_dir_may_be_a_symlink(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  uint64_t id;
  assert_int_equal(coll_snapshot(fx->store, "t", two_ok, 10, 1, &id), 0);
  coll_fixture_close(fx);
  char link[300];
  snprintf(link, sizeof(link), "%s.link", fx->dir);
  unlink(link);
  assert_int_equal(symlink(fx->dir, link), 0);
  fx->cfg.dir = link;
  assert_int_equal(coll_fixture_open(fx), 0);
  fx->cfg.dir = fx->dir;
  tg_coll_snapshot_t snap;
  assert_int_equal(tg_coll_store_get(fx->store, id, &snap), 0);
  assert_int_equal(snap.state, TG_COLL_COMPLETE);
  assert_int_equal(fx->rec.orphans_removed + fx->rec.lost, 0);
  coll_fixture_close(fx);
  assert_int_equal(unlink(link), 0);
}

#define LIFECYCLE_TESTS(setup, setup_open)                                     \
  {                                                                            \
    cmocka_unit_test_setup_teardown(                                           \
        lifecycle_complete_snapshot_has_its_file_and_hosts, setup_open,        \
        coll_teardown),                                                        \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_partial_and_failed_follow_the_hosts, setup_open,         \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_a_host_cut_short_keeps_its_data, setup_open,             \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_abort_keeps_the_row_failed_without_file, setup_open,     \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_finish_refuses_a_bad_result_and_fails_the_row,           \
            setup_open, coll_teardown),                                        \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_list_filters_by_time_trigger_host_and_state, setup_open, \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(lifecycle_pin_and_delete, setup_open,  \
                                        coll_teardown),                        \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_problems_set_after_the_finish, setup_open,               \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_sql_in_text_is_stored_verbatim, setup_open,              \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            lifecycle_second_open_of_a_store_is_refused, setup_open,           \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(lifecycle_store_dir_may_be_a_symlink,  \
                                        setup_open, coll_teardown),            \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(LIFECYCLE_TESTS); }
