/* The pending clock snapshots (service/clock_snapshots.h) on made-up
 * clocks: Perfetto's keep-or-drop rule, the bound, and what a long trace
 * read now and then gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "service/clock_snapshots.h"

#define MS 1000000ull
#define SEC (1000 * MS)

/* Every clock at |t| ns, REALTIME (index 4, 5) shifted by |skew| ns. */
static tg_clock_sample_t at(uint64_t t, int64_t skew) {
  tg_clock_sample_t c;
  for (unsigned i = 0; i < TG_CLOCK_SNAPSHOT_CLOCKS; i++) c.ns[i] = t;
  c.ns[4] += (uint64_t)skew;
  c.ns[5] += (uint64_t)skew;
  return c;
}

static void clocks_first_snapshot_is_always_kept(void **state) {
  (void)state;
  tg_clock_ring_t r = {0};
  tg_clock_sample_t c = at(5 * SEC, 0), out;
  assert_true(tg__clock_ring_offer(&r, &c));
  assert_true(tg__clock_ring_take(&r, &out));
  assert_memory_equal(&out, &c, sizeof(c));
  assert_false(tg__clock_ring_take(&r, &out));
}

static void clocks_in_step_keep_the_older_pending_snapshot(void **state) {
  (void)state;
  tg_clock_ring_t r = {0};
  tg_clock_sample_t c = at(1 * SEC, 0);
  assert_true(tg__clock_ring_offer(&r, &c));
  c = at(11 * SEC, 9 * (int64_t)MS); /* 9 ms of slew: not enough */
  assert_false(tg__clock_ring_offer(&r, &c));
  assert_int_equal(r.n, 1);
  c = at(21 * SEC, 10 * (int64_t)MS); /* 10 ms: a new snapshot */
  assert_true(tg__clock_ring_offer(&r, &c));
  c = at(31 * SEC, 10 * (int64_t)MS - 20 * (int64_t)MS); /* a step back */
  assert_true(tg__clock_ring_offer(&r, &c));
  /* Suspend: BOOTTIME runs on, MONOTONIC stands still. */
  c = at(41 * SEC, 0);
  c.ns[0] += 60 * SEC;
  assert_true(tg__clock_ring_offer(&r, &c));
  assert_int_equal(r.n, 4);
}

static void clocks_ring_keeps_the_newest_sixteen(void **state) {
  (void)state;
  tg_clock_ring_t r = {0};
  for (uint64_t i = 0; i < 20; i++) {
    tg_clock_sample_t c = at(i * SEC, (int64_t)(i * 20 * MS));
    assert_true(tg__clock_ring_offer(&r, &c));
  }
  assert_int_equal(r.n, TG_CLOCK_SNAPSHOT_RING);
  tg_clock_sample_t out;
  for (uint64_t i = 4; i < 20; i++) {
    assert_true(tg__clock_ring_take(&r, &out));
    assert_int_equal(out.ns[0], i * SEC);
  }
  assert_false(tg__clock_ring_take(&r, &out));
}

/* A 10-minute trace without drift, offered a snapshot every 10 s and read
 * every 2 minutes (write_into_file, a relay): each read finds one (the
 * first offered since the last read), so the trace gets one every read. */
static void clocks_long_trace_read_periodically_gets_periodic_snapshots(
    void **state) {
  (void)state;
  tg_clock_ring_t r = {0};
  unsigned written = 0;
  uint64_t last_written = 0;
  for (uint64_t t = 0; t <= 600 * SEC; t += 10 * SEC) {
    tg_clock_sample_t c = at(t, 0);
    tg__clock_ring_offer(&r, &c);
    if (t % (120 * SEC) == 0) {
      tg_clock_sample_t out;
      while (tg__clock_ring_take(&r, &out)) {
        assert_true(written == 0 || out.ns[0] > last_written);
        last_written = out.ns[0];
        written++;
      }
    }
  }
  assert_int_equal(written, 6); /* at 0, 120, 240, 360, 480 and 600 s */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(clocks_first_snapshot_is_always_kept),
      cmocka_unit_test(clocks_in_step_keep_the_older_pending_snapshot),
      cmocka_unit_test(clocks_ring_keeps_the_newest_sixteen),
      cmocka_unit_test(clocks_long_trace_read_periodically_gets_periodic_snapshots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
