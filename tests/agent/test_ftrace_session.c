/* A linux.ftrace session's rules that need no kernel: the drain cadence
 * (tg_ftrace_drain_wait_ms: the period the config asked for, else once a
 * second with pollable CPUs unless new processes showed up within
 * TG_FTRACE_NEW_PIDS_HOLD_MS, else the default period) and
 * throttle_rss_stat's trigger, against a directory laid out as an
 * instance's. */
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

/* A period the config asked for is kept, whatever the descriptors; else
 * a pollable session waits TG_FTRACE_QUIET_WAIT_MS (its CPUs wake the
 * reader when busy) unless a drain named new processes less than
 * TG_FTRACE_NEW_PIDS_HOLD_MS ago: while processes keep coming, each is
 * resolved at the default period while it lives (one that came after a
 * drain without new pids lived through a whole quiet wait unseen:
 * conformance's process table beside a job starting a process every few
 * hundred milliseconds had 106 rows against traced_probes' 118). One
 * that cannot be polled keeps the default period, so a burst is still
 * read before it overwrites itself. */
static void drain_wait_follows_the_asked_period_or_the_poll(void **state) {
  (void)state;
  const uint32_t quiet = TG_FTRACE_QUIET_WAIT_MS;
  const uint32_t hold = TG_FTRACE_NEW_PIDS_HOLD_MS;
  assert_true(hold > quiet);
  assert_int_equal(tg_ftrace_drain_wait_ms(250, true, true, UINT64_MAX), 250);
  assert_int_equal(tg_ftrace_drain_wait_ms(250, true, true, 0), 250);
  assert_int_equal(tg_ftrace_drain_wait_ms(250, true, false, UINT64_MAX), 250);
  assert_int_equal(tg_ftrace_drain_wait_ms(5000, true, true, UINT64_MAX), 5000);
  assert_int_equal(tg_ftrace_drain_wait_ms(5000, true, true, 0), 5000);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, true, UINT64_MAX),
                   quiet);
  /* New processes in this drain, or in one less than the hold ago. */
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, true, 0), 100);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, true, quiet), 100);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, true, hold - 1), 100);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, true, hold), quiet);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, false, UINT64_MAX), 100);
  assert_int_equal(tg_ftrace_drain_wait_ms(100, false, false, 0), 100);
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
      cmocka_unit_test(drain_wait_follows_the_asked_period_or_the_poll),
      cmocka_unit_test(rss_throttle_sets_the_hist_trigger),
      cmocka_unit_test(rss_throttle_without_the_synthetic_event_falls_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
