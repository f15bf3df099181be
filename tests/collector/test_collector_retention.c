/* Retention (collector/catalog/retention.h, tg_coll_store_retain): by total size
 * and by age, oldest first, pinned and PENDING snapshots kept, a snapshot
 * over the cap alone and a burst never costing what came before; on the
 * fixture's clock, which the test moves instead of sleeping; with each
 * catalog, SQLite and PostgreSQL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "collector/catalog/retention.h"

static const char *const hosts[] = {"h1", NULL};

/* Runs retention to the end; the ids deleted, in order, into |gone|. */
static size_t retain_all(coll_fixture_t *fx, uint64_t *gone, size_t cap,
                         tg_coll_verdict_t *verdicts) {
  size_t n = 0;
  tg_coll_retained_t r;
  int rc;
  while ((rc = tg_coll_store_retain(fx->store, &r)) == 1) {
    assert_true(n < cap);
    verdicts[n] = r.verdict;
    gone[n++] = r.id;
  }
  assert_int_equal(rc, 0);
  assert_int_equal(r.verdict, TG_COLL_KEEP);
  return n;
}

static bool exists(coll_fixture_t *fx, uint64_t id) {
  tg_coll_snapshot_t s;
  return tg_coll_store_get(fx->store, id, &s) == 0;
}

static void retention_by_size_goes_oldest_first_and_keeps_pins(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  fx->cfg.retention.max_bytes = 3000;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t id[5];
  for (int i = 0; i < 5; i++) {
    assert_int_equal(
        coll_snapshot(fx->store, "t", hosts, 1000, (uint64_t)i, &id[i]), 0);
    fx->now_ms += TG_COLL_BURST_MS; /* apart: no burst */
  }
  /* The oldest is pinned: the next two go instead. */
  assert_int_equal(tg_coll_store_pin(fx->store, id[0], true), 0);
  uint64_t gone[8];
  tg_coll_verdict_t why[8];
  assert_int_equal(retain_all(fx, gone, 8, why), 2);
  assert_int_equal(gone[0], id[1]);
  assert_int_equal(gone[1], id[2]);
  assert_int_equal(why[0], TG_COLL_DROP_SIZE);
  assert_true(exists(fx, id[0]));
  assert_false(exists(fx, id[1]));
  assert_true(exists(fx, id[3]) && exists(fx, id[4]));
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 3);

  /* Pins alone over the cap: they stay, and so retention stops. */
  fx->cfg.retention.max_bytes = 500;
  coll_fixture_close(fx);
  assert_int_equal(coll_fixture_open(fx), 0);
  assert_int_equal(tg_coll_store_pin(fx->store, id[4], true), 0);
  assert_int_equal(retain_all(fx, gone, 8, why), 1);
  assert_int_equal(gone[0], id[3]);
  assert_true(exists(fx, id[0]) && exists(fx, id[4]));
}

static void retention_by_age_spares_young_and_pinned(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  fx->cfg.retention.max_age_ms = 60000;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t old1, old2, pinned, young;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 1, &old1), 0);
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 2, &pinned), 0);
  fx->now_ms += 30000;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 3, &old2), 0);
  fx->now_ms += 30000;
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 10, 4, &young), 0);
  assert_int_equal(tg_coll_store_pin(fx->store, pinned, true), 0);

  uint64_t gone[8];
  tg_coll_verdict_t why[8];
  /* 60 s exactly is not older than 60 s. */
  assert_int_equal(retain_all(fx, gone, 8, why), 0);
  fx->now_ms += 1;
  assert_int_equal(retain_all(fx, gone, 8, why), 1);
  assert_int_equal(gone[0], old1);
  assert_int_equal(why[0], TG_COLL_DROP_AGE);
  fx->now_ms += 30000;
  assert_int_equal(retain_all(fx, gone, 8, why), 1);
  assert_int_equal(gone[0], old2);
  assert_true(exists(fx, pinned));
  assert_true(exists(fx, young));
  /* A clock stepped back ages nothing. */
  fx->now_ms = 0;
  assert_int_equal(retain_all(fx, gone, 8, why), 0);
}

static void retention_never_touches_a_pending_snapshot(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  fx->cfg.retention.max_bytes = 1;
  fx->cfg.retention.max_age_ms = 1;
  assert_int_equal(coll_fixture_open(fx), 0);
  tg_coll_begin_t b = {.trigger = "t"};
  tg_coll_writer_t *w;
  uint64_t pending, done;
  assert_int_equal(tg_coll_store_begin(fx->store, &b, &w, &pending), 0);
  assert_int_equal(coll_snapshot(fx->store, "t", hosts, 100, 1, &done), 0);
  fx->now_ms += 3600 * 1000;
  uint64_t gone[8];
  tg_coll_verdict_t why[8];
  assert_int_equal(retain_all(fx, gone, 8, why), 1);
  assert_int_equal(gone[0], done);
  assert_true(exists(fx, pending));
  assert_int_equal(tg_coll_writer_write(w, "late", 4), 0);
  tg_coll_host_result_t h = {.host = "h1"};
  tg_coll_result_t r = {.hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(fx->store, w, &r), 0);
}

/* Rows |started_ms| apart from 0, each of |bytes|. */
static void rows_apart(tg_coll_retention_row_t *rows, size_t n, int64_t apart,
                       uint64_t bytes) {
  for (size_t i = 0; i < n; i++)
    rows[i] = (tg_coll_retention_row_t){
        .id = i + 1, .started_ms = (int64_t)i * apart, .bytes = bytes};
}

static void retention_policy_decides_from_the_view_alone(void **state) {
  (void)state;
  tg_coll_retention_policy_t p = {.max_bytes = 100, .max_age_ms = 1000};
  tg_coll_retention_row_t rows[2];
  rows_apart(rows, 2, TG_COLL_BURST_MS, 50);
  rows[0].started_ms = 5000;
  rows[1].started_ms = 5000 + TG_COLL_BURST_MS;
  tg_coll_retention_view_t v = {.rows = rows, .n = 2};
  size_t victim = 99;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 6000, &victim),
                   TG_COLL_KEEP);
  assert_int_equal(tg_coll_retention_decide(&p, &v, 6001, &victim),
                   TG_COLL_DROP_AGE);
  assert_int_equal(victim, 0);
  rows[1].bytes = 51;
  victim = 99;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_SIZE);
  assert_int_equal(victim, 0);
  /* Pinned and PENDING rows are never the victim (beside 50 pinned
   * bytes, 51 cannot fit a cap of 100). */
  rows[0].pinned = true;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_OVERSIZE);
  assert_int_equal(victim, 1);
  rows[1].pending = true;
  assert_int_equal(tg_coll_retention_decide(&p, &v, INT64_MAX, &victim),
                   TG_COLL_KEEP);
  v.n = 0;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 1 << 30, &victim),
                   TG_COLL_KEEP);
  tg_coll_retention_policy_t none = {0};
  rows_apart(rows, 2, TG_COLL_BURST_MS, UINT64_MAX);
  rows[0].started_ms = INT64_MIN;
  v.n = 2;
  assert_int_equal(tg_coll_retention_decide(&none, &v, INT64_MAX, &victim),
                   TG_COLL_KEEP);
  p.max_age_ms = 1;
  p.max_bytes = 0;
  assert_int_equal(tg_coll_retention_decide(&p, &v, INT64_MAX, &victim),
                   TG_COLL_DROP_AGE);
  assert_int_equal(victim, 0);
}

/* Issue 59 point 1: one snapshot larger than the cap alone went last,
 * after every other. It goes first, and alone. */
static void retention_policy_drops_an_oversize_snapshot_alone(void **state) {
  (void)state;
  tg_coll_retention_policy_t p = {.max_bytes = 1000};
  tg_coll_retention_row_t rows[4];
  rows_apart(rows, 4, TG_COLL_BURST_MS, 300);
  rows[3].bytes = 1001; /* the newest */
  tg_coll_retention_view_t v = {.rows = rows, .n = 4};
  size_t victim = 99;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_OVERSIZE);
  assert_int_equal(victim, 3);
  v.n = 3; /* it went: the rest fit */
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_KEEP);
  /* Beside 800 pinned bytes, 300 can never fit: it goes, not the 100
   * older ones that fit. */
  v.n = 4;
  rows_apart(rows, 4, TG_COLL_BURST_MS, 100);
  rows[0].bytes = 800;
  rows[0].pinned = true;
  rows[3].bytes = 300;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_OVERSIZE);
  assert_int_equal(victim, 3);
  /* Several that cannot fit: the largest first. */
  rows[2].bytes = 400;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_OVERSIZE);
  assert_int_equal(victim, 2);
}

/* Issue 59 point 5: a storm of snapshots evicted the operator's older
 * one. A burst thins itself first, from its second snapshot on. */
static void retention_policy_thins_a_burst_before_older_ones(void **state) {
  (void)state;
  tg_coll_retention_policy_t p = {.max_bytes = 500};
  /* rows[0]: the operator's; rows[1..9] a storm a second apart, an hour
   * later. */
  tg_coll_retention_row_t rows[10];
  rows_apart(rows, 10, 1000, 100);
  for (size_t i = 1; i < 10; i++) rows[i].started_ms += 3600 * 1000;
  tg_coll_retention_view_t v = {.rows = rows, .n = 10};
  size_t victim = 99;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_BURST);
  assert_int_equal(victim, 2); /* the storm's second */
  /* The storm's first is pinned: still its second goes, not the older. */
  rows[1].pinned = true;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_BURST);
  assert_int_equal(victim, 2);
  /* A PENDING row starts a burst too: what follows it closely goes. */
  rows[1].pinned = false;
  rows_apart(rows, 3, TG_COLL_BURST_MS, 300);
  rows[1].pending = true;
  rows[2].started_ms = rows[1].started_ms + TG_COLL_BURST_MS - 1;
  v.n = 3;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_BURST);
  assert_int_equal(victim, 2);
  /* TG_COLL_BURST_MS apart is no burst: the oldest goes. */
  rows[2].started_ms = rows[1].started_ms + TG_COLL_BURST_MS;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0, &victim),
                   TG_COLL_DROP_SIZE);
  assert_int_equal(victim, 0);
}

/* The store's part of point 1: the sequence with each catalog. */
static void retention_an_oversize_snapshot_never_empties_the_store(
    void **state) {
  coll_fixture_t *fx = coll_fx(state);
  fx->cfg.retention.max_bytes = 1000;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t id[4];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(coll_snapshot(fx->store, "t", hosts, i == 3 ? 1500 : 300,
                                   (uint64_t)i, &id[i]),
                     0);
    fx->now_ms += TG_COLL_BURST_MS;
  }
  uint64_t gone[8];
  tg_coll_verdict_t why[8];
  assert_int_equal(retain_all(fx, gone, 8, why), 1);
  assert_int_equal(gone[0], id[3]);
  assert_int_equal(why[0], TG_COLL_DROP_OVERSIZE);
  for (int i = 0; i < 3; i++) assert_true(exists(fx, id[i]));
  assert_int_equal(coll_count_entries(fx->dir, TG_COLL_SNAPSHOT_DIR), 3);
}

/* The store's part of point 5: an operator's snapshot, then a storm of
 * triggers a few seconds apart; the cap holds four. */
static void retention_a_storm_never_evicts_what_came_before(void **state) {
  coll_fixture_t *fx = coll_fx(state);
  fx->cfg.retention.max_bytes = 400;
  assert_int_equal(coll_fixture_open(fx), 0);
  uint64_t operator_id, storm[10];
  assert_int_equal(coll_snapshot(fx->store, "operator", hosts, 100, 1,
                                 &operator_id),
                   0);
  fx->now_ms += 3600 * 1000;
  uint64_t gone[16];
  tg_coll_verdict_t why[16];
  size_t n_gone = 0;
  for (int i = 0; i < 10; i++) {
    assert_int_equal(coll_snapshot(fx->store, "storm", hosts, 100,
                                   (uint64_t)i + 2, &storm[i]),
                     0);
    fx->now_ms += 10000;
    /* Retention after each, as the collector runs it. */
    n_gone += retain_all(fx, gone + n_gone, 16 - n_gone, why + n_gone);
  }
  /* Only the storm paid, never its first nor its last. */
  assert_int_equal(n_gone, 7);
  for (size_t i = 0; i < n_gone; i++) {
    assert_int_equal(why[i], TG_COLL_DROP_BURST);
    assert_true(gone[i] != storm[0] && gone[i] != storm[9]);
  }
  assert_true(exists(fx, operator_id));
  assert_true(exists(fx, storm[0]) && exists(fx, storm[9]));
}

#define RETENTION_TESTS(setup, setup_open)                                     \
  {                                                                            \
    cmocka_unit_test_setup_teardown(                                           \
        retention_by_size_goes_oldest_first_and_keeps_pins, setup,             \
        coll_teardown),                                                        \
        cmocka_unit_test_setup_teardown(                                       \
            retention_by_age_spares_young_and_pinned, setup, coll_teardown),   \
        cmocka_unit_test_setup_teardown(                                       \
            retention_never_touches_a_pending_snapshot, setup, coll_teardown), \
        cmocka_unit_test_setup_teardown(                                       \
            retention_an_oversize_snapshot_never_empties_the_store, setup,     \
            coll_teardown),                                                    \
        cmocka_unit_test_setup_teardown(                                       \
            retention_a_storm_never_evicts_what_came_before, setup,            \
            coll_teardown),                                                    \
        cmocka_unit_test(retention_policy_decides_from_the_view_alone),        \
        cmocka_unit_test(retention_policy_drops_an_oversize_snapshot_alone),   \
        cmocka_unit_test(retention_policy_thins_a_burst_before_older_ones),    \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(RETENTION_TESTS); }
