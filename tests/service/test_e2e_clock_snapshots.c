/* tracegated end to end: clock snapshots as Perfetto's service writes
 * them. One at the start, then one per snapshot_interval_ms while tracing
 * (kept until the next read), one at the end; none with
 * disable_clock_snapshotting. The interval is set to 20 ms: the test waits
 * for snapshots to appear, it does not sleep through a 10 s period. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_service.h"
#include "test_proc.h"

static size_t count_snapshots(Perfetto__Protos__TracePacket **pk, size_t n,
                              uint64_t *last_boot) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT)
      continue;
    const Perfetto__Protos__ClockSnapshot *cs = pk[i]->clock_snapshot;
    assert_int_equal(cs->n_clocks, 6);
    assert_int_equal(cs->clocks[0]->clock_id, 6); /* BOOTTIME first */
    assert_true(cs->clocks[0]->timestamp > *last_boot); /* in order */
    *last_boot = cs->clocks[0]->timestamp;
    k++;
  }
  return k;
}

/* A session of 20 ms snapshot periods, clock snapshots |disabled| or
 * not (|b| must outlive it). */
static void start(test_service_t *ts, raw_consumer_t *c, simple_cfg_t *sc,
                  Perfetto__Protos__TraceConfig__BuiltinDataSource *b,
                  bool disabled) {
  perfetto__protos__trace_config__builtin_data_source__init(b);
  b->has_snapshot_interval_ms = 1;
  b->snapshot_interval_ms = 20;
  b->has_disable_clock_snapshotting = disabled;
  b->disable_clock_snapshotting = disabled;
  simple_cfg_init(sc, 64, 1, "clock.ds");
  sc->cfg.builtin_data_sources = b;
  assert_int_equal(raw_consumer_connect(c, ts), 0);
  assert_int_equal(raw_consumer_enable(c, &sc->cfg, -1), 0);
}

/* Reads while tracing until the periodic snapshots show up: each read
 * writes what was pending and the next period adds one again. */
static void long_trace_gets_periodic_clock_snapshots(void **state) {
  test_service_t *ts = *state;
  Perfetto__Protos__TraceConfig__BuiltinDataSource b;
  raw_consumer_t c;
  simple_cfg_t sc;
  start(ts, &c, &sc, &b, false);
  size_t total = 0, reads = 0;
  uint64_t last_boot = 0;
  int64_t deadline = tg_test_now_ms() + 10000;
  while (total < 5 && tg_test_now_ms() < deadline) {
    size_t n = 0;
    Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
    assert_non_null(pk);
    total += count_snapshots(pk, n, &last_boot);
    reads++;
    free_packets(pk, n);
  }
  assert_true(total >= 5);
  assert_true(reads >= 2);
  /* And one more when tracing is disabled. */
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  assert_true(count_snapshots(pk, n, &last_boot) >= 1);
  free_packets(pk, n);
  raw_consumer_close(&c);
}

static void disabled_clock_snapshotting_writes_none(void **state) {
  test_service_t *ts = *state;
  Perfetto__Protos__TraceConfig__BuiltinDataSource b;
  raw_consumer_t c;
  simple_cfg_t sc;
  start(ts, &c, &sc, &b, true);
  uint64_t last_boot = 0;
  for (int i = 0; i < 3; i++) {
    size_t n = 0;
    Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
    assert_non_null(pk);
    assert_int_equal(count_snapshots(pk, n, &last_boot), 0);
    free_packets(pk, n);
  }
  assert_int_equal(raw_consumer_disable(&c, 5000), 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&c, &n);
  assert_non_null(pk);
  assert_int_equal(count_snapshots(pk, n, &last_boot), 0);
  free_packets(pk, n);
  raw_consumer_close(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(long_trace_gets_periodic_clock_snapshots,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(disabled_clock_snapshotting_writes_none,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
