/* A linux.ftrace session's rules that need no kernel: the drain cadence
 * (tg_ftrace_next_wait_ms: the drain period while CPUs are busy, waits
 * that double up to TG_FTRACE_QUIET_WAIT_MS while they are quiet, back to
 * the period at the first busy drain) and throttle_rss_stat's trigger,
 * against a directory laid out as an instance's. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_session.h"

/* More than a page a CPU: busy. */
static void busy_drains_keep_the_period(void **state) {
  (void)state;
  assert_int_equal(tg_ftrace_next_wait_ms(0, 100, 3, 2), 100);
  assert_int_equal(tg_ftrace_next_wait_ms(100, 100, 64, 2), 100);
  assert_int_equal(tg_ftrace_next_wait_ms(800, 100, 3, 2), 100);
}

static void quiet_drains_double_the_wait_up_to_the_cap(void **state) {
  (void)state;
  uint32_t w = tg_ftrace_next_wait_ms(0, 100, 0, 2);
  assert_int_equal(w, 100);
  const uint32_t want[] = {200, 400, 800, TG_FTRACE_QUIET_WAIT_MS,
                           TG_FTRACE_QUIET_WAIT_MS};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    /* A partly filled page a CPU is quiet too. */
    w = tg_ftrace_next_wait_ms(w, 100, 2, 2);
    assert_int_equal(w, want[i]);
  }
  assert_int_equal(tg_ftrace_next_wait_ms(w, 100, 5, 2), 100);
}

/* A period longer than the cap is kept, never shortened. */
static void a_long_period_is_kept(void **state) {
  (void)state;
  assert_int_equal(tg_ftrace_next_wait_ms(0, 5000, 0, 2), 5000);
  assert_int_equal(tg_ftrace_next_wait_ms(5000, 5000, 0, 2), 5000);
  assert_int_equal(tg_ftrace_next_wait_ms(5000, 5000, 9, 2), 5000);
  /* Odd periods end at the cap exactly. */
  uint32_t w = 300;
  for (int i = 0; i < 4; i++) w = tg_ftrace_next_wait_ms(w, 300, 0, 2);
  assert_int_equal(w, TG_FTRACE_QUIET_WAIT_MS);
}

/* --- throttle_rss_stat ----------------------------------------------------- */

typedef struct fake_instance {
  char dir[64];
} fake_instance_t;

static void put_file(const char *dir, const char *rel, const char *text) {
  char p[256];
  snprintf(p, sizeof(p), "%s/%s", dir, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static void read_file(const char *dir, const char *rel, char *buf, size_t cap) {
  char p[256];
  snprintf(p, sizeof(p), "%s/%s", dir, rel);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

static void make_dirs(fake_instance_t *fi, bool synthetic) {
  snprintf(fi->dir, sizeof(fi->dir), "/tmp/tg-rss-XXXXXX");
  assert_non_null(mkdtemp(fi->dir));
  const char *dirs[] = {"events", "events/kmem", "events/kmem/rss_stat",
                        "events/synthetic",
                        "events/synthetic/rss_stat_throttled"};
  for (size_t i = 0; i < (synthetic ? 5u : 3u); i++) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", fi->dir, dirs[i]);
    assert_int_equal(mkdir(p, 0700), 0);
  }
  put_file(fi->dir, "events/kmem/rss_stat/trigger", "");
  if (synthetic) put_file(fi->dir, "events/synthetic/rss_stat_throttled/id", "1834\n");
}

static void remove_dirs(fake_instance_t *fi) {
  const char *paths[] = {"events/synthetic/rss_stat_throttled/id",
                         "events/synthetic/rss_stat_throttled",
                         "events/synthetic",
                         "events/kmem/rss_stat/trigger",
                         "events/kmem/rss_stat",
                         "events/kmem",
                         "events"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", fi->dir, paths[i]);
    if (unlink(p) != 0) rmdir(p); /* absent without the synthetic event */
  }
  assert_int_equal(rmdir(fi->dir), 0);
}

/* With the system's synthetic event: the trigger goes on kmem/rss_stat,
 * and off again at stop. */
static void rss_throttle_sets_the_hist_trigger(void **state) {
  (void)state;
  fake_instance_t fi;
  make_dirs(&fi, true);
  char got[512];
  assert_int_equal(tg__ftrace_rss_throttle_on(fi.dir), 0);
  read_file(fi.dir, "events/kmem/rss_stat/trigger", got, sizeof(got));
  assert_string_equal(got, TG_FTRACE_RSS_TRIGGER);
  assert_int_equal(tg__ftrace_rss_throttle_off(fi.dir), 0);
  read_file(fi.dir, "events/kmem/rss_stat/trigger", got, sizeof(got));
  assert_string_equal(got, "!" TG_FTRACE_RSS_TRIGGER);
  remove_dirs(&fi);
}

/* Without it: -ENOENT (the session records kmem/rss_stat unthrottled) and
 * no trigger written. */
static void rss_throttle_without_the_synthetic_event_falls_back(void **state) {
  (void)state;
  fake_instance_t fi;
  make_dirs(&fi, false);
  assert_int_equal(tg__ftrace_rss_throttle_on(fi.dir), -ENOENT);
  char got[64];
  read_file(fi.dir, "events/kmem/rss_stat/trigger", got, sizeof(got));
  assert_string_equal(got, "");
  remove_dirs(&fi);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(busy_drains_keep_the_period),
      cmocka_unit_test(quiet_drains_double_the_wait_up_to_the_cap),
      cmocka_unit_test(a_long_period_is_kept),
      cmocka_unit_test(rss_throttle_sets_the_hist_trigger),
      cmocka_unit_test(rss_throttle_without_the_synthetic_event_falls_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
