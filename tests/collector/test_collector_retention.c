/* Retention (collector/retention.h, tg_coll_store_retain): by total size
 * and by age, oldest first, pinned and PENDING snapshots kept; on the
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
#include "collector/retention.h"

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
    fx->now_ms += 10;
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

static void retention_policy_decides_from_the_view_alone(void **state) {
  (void)state;
  tg_coll_retention_policy_t p = {.max_bytes = 100, .max_age_ms = 1000};
  tg_coll_retention_view_t v = {.total_bytes = 100, .has_candidate = true};
  v.candidate.started_ms = 5000;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 6000), TG_COLL_KEEP);
  assert_int_equal(tg_coll_retention_decide(&p, &v, 6001), TG_COLL_DROP_AGE);
  v.total_bytes = 101;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 0), TG_COLL_DROP_SIZE);
  v.has_candidate = false;
  assert_int_equal(tg_coll_retention_decide(&p, &v, 1 << 30), TG_COLL_KEEP);
  tg_coll_retention_policy_t none = {0};
  v.has_candidate = true;
  v.candidate.started_ms = INT64_MIN;
  assert_int_equal(tg_coll_retention_decide(&none, &v, INT64_MAX),
                   TG_COLL_KEEP);
  p.max_age_ms = 1;
  v.total_bytes = 0;
  assert_int_equal(tg_coll_retention_decide(&p, &v, INT64_MAX),
                   TG_COLL_DROP_AGE);
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
        cmocka_unit_test(retention_policy_decides_from_the_view_alone),        \
  }

int main(void) { COLL_RUN_BOTH_CATALOGS(RETENTION_TESTS); }
