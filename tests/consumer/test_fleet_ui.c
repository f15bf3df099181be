/* The progress display of a big fleet (cli/fleet_ui_pick.c): with
 * a thousand hosts it names the few an operator must look at, most urgent
 * first, and stays a fixed number of lines high; with a few hosts it names
 * every one of them in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/fleet.h"

#define HOSTS 1000
#define CAP 20

static fleet_t *make_fleet(size_t n, uint64_t bytes_each) {
  fleet_t *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  f->hosts = calloc(n, sizeof(*f->hosts));
  assert_non_null(f->hosts);
  f->n = n;
  for (size_t i = 0; i < n; i++) {
    f->hosts[i].core.index = i;
    f->hosts[i].core.report.link_state = TG_LINK_UP;
    f->hosts[i].core.report.bytes = bytes_each;
  }
  return f;
}

static void free_fleet(fleet_t *f) {
  free(f->hosts);
  free(f);
}

static void a_few_hosts_are_all_shown_in_order(void **state) {
  (void)state;
  fleet_t *f = make_fleet(5, 0);
  f->hosts[3].core.report.link_state = TG_LINK_FAILED;
  size_t idx[CAP], total;
  assert_int_equal(fleet_ui_pick(f, idx, CAP, &total), 5);
  assert_int_equal(total, 5);
  for (size_t i = 0; i < 5; i++) assert_int_equal(idx[i], i);
  free_fleet(f);
}

static void a_healthy_big_fleet_names_nobody(void **state) {
  (void)state;
  fleet_t *f = make_fleet(HOSTS, 10u << 20);
  size_t idx[CAP], total;
  assert_int_equal(fleet_ui_pick(f, idx, CAP, &total), 0);
  assert_int_equal(total, 0);
  free_fleet(f);
}

static void failing_then_not_up_then_behind(void **state) {
  (void)state;
  fleet_t *f = make_fleet(HOSTS, 10u << 20);
  f->hosts[900].core.report.bytes = 1u << 20;  /* behind */
  f->hosts[10].core.report.bytes = 1u << 20;  /* behind */
  f->hosts[500].core.report.link_state = TG_LINK_RECONNECTING;  /* not up */
  f->hosts[7].core.report.link_state = TG_LINK_CONNECTING;  /* not up */
  f->hosts[999].core.report.link_state = TG_LINK_FAILED;  /* failing */
  f->hosts[42].core.report.link_state = TG_LINK_FAILING;  /* failing */
  /* finished: nothing to say */
  f->hosts[43].core.report.link_state = TG_LINK_DONE;
  f->hosts[44].core.report.bytes = 6u << 20;  /* above half the median */
  size_t idx[CAP], total;
  size_t n = fleet_ui_pick(f, idx, CAP, &total);
  assert_int_equal(n, 6);
  assert_int_equal(total, 6);
  const size_t want[] = {42, 999, 7, 500, 10, 900};
  for (size_t i = 0; i < 6; i++) assert_int_equal(idx[i], want[i]);
  free_fleet(f);
}

/* A bad moment (half the fleet unreachable) still fits the screen. */
static void many_failing_hosts_are_capped_and_counted(void **state) {
  (void)state;
  fleet_t *f = make_fleet(HOSTS, 0);
  for (size_t i = 0; i < HOSTS; i += 2)
    f->hosts[i].core.report.link_state = TG_LINK_FAILED;
  for (size_t i = 1; i < HOSTS; i += 4)
    f->hosts[i].core.report.link_state = TG_LINK_CONNECTING;
  size_t idx[CAP], total;
  assert_int_equal(fleet_ui_pick(f, idx, CAP, &total), CAP);
  assert_int_equal(total, HOSTS / 2 + HOSTS / 4);
  for (size_t i = 0; i < CAP; i++) assert_int_equal(idx[i], 2 * i);
  free_fleet(f);
}

/* At the start nobody has data yet: nobody is behind. */
static void nobody_is_behind_before_data_flows(void **state) {
  (void)state;
  fleet_t *f = make_fleet(HOSTS, 0);
  f->hosts[1].core.report.bytes = 4096;
  size_t idx[CAP], total;
  assert_int_equal(fleet_ui_pick(f, idx, CAP, &total), 0);
  free_fleet(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_few_hosts_are_all_shown_in_order),
      cmocka_unit_test(a_healthy_big_fleet_names_nobody),
      cmocka_unit_test(failing_then_not_up_then_behind),
      cmocka_unit_test(many_failing_hosts_are_capped_and_counted),
      cmocka_unit_test(nobody_is_behind_before_data_flows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
