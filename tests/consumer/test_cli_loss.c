/* The CLI's loss counters (cli/progress.c): every non-zero loss
 * counter of a TraceStats counted in the total, the first 64 listed by
 * name, the rest counted as omitted, never dropped from the total; and
 * the kernel's ftrace overruns the trace's packets carry
 * (consumer/fleet/ftrace_loss.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "test_service.h"

#define N_BUFS 20

static void every_counter_is_in_the_total(void **state) {
  (void)state;
  Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
  Perfetto__Protos__TraceStats__BufferStats bs[N_BUFS], *bsp[N_BUFS];
  uint64_t want = 0;
  for (int i = 0; i < N_BUFS; i++) {
    perfetto__protos__trace_stats__buffer_stats__init(&bs[i]);
    bsp[i] = &bs[i];
    /* Four loss counters a buffer, and one that is no loss. */
    bs[i].has_chunks_overwritten = 1;
    bs[i].chunks_overwritten = 1 + (uint64_t)i;
    bs[i].has_patches_failed = 1;
    bs[i].patches_failed = 100;
    bs[i].has_abi_violations = 1;
    bs[i].abi_violations = 7;
    bs[i].has_trace_writer_packet_loss = 1;
    bs[i].trace_writer_packet_loss = 1000;
    bs[i].has_bytes_written = 1;
    bs[i].bytes_written = 1 << 20;
    want += 1 + (uint64_t)i + 100 + 7 + 1000;
  }
  st.n_buffer_stats = N_BUFS;
  st.buffer_stats = bsp;
  st.has_chunks_discarded = 1;
  st.chunks_discarded = 5;
  want += 5;

  cli_loss_t loss;
  cli_loss_collect(&st, &loss);
  assert_int_equal(loss.n, 64);
  assert_int_equal(loss.omitted, 4 * N_BUFS + 1 - 64);
  assert_int_equal(loss.total, want);
  uint64_t listed = 0;
  for (size_t i = 0; i < loss.n; i++) listed += loss.items[i].value;
  assert_true(listed < loss.total);
  assert_string_equal(loss.items[0].name, "buffer 0 chunks_overwritten");
}

static void no_loss_is_nothing(void **state) {
  (void)state;
  Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
  cli_loss_t loss;
  cli_loss_collect(&st, &loss);
  assert_int_equal(loss.n, 0);
  assert_int_equal(loss.omitted, 0);
  assert_int_equal(loss.total, 0);
}

/* The loss a trace with no service stats and |fl|'s ftrace stats lists. */
static void ftrace_loss_only(const tg_ftrace_loss_t *fl, cli_loss_t *loss) {
  Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
  cli_loss_collect(&st, loss);
  cli_ftrace_loss_add(fl, loss);
}

/* The overrun between linux.ftrace's start and end stats is listed as
 * ftrace_cpu_overrun and counted in the total; other packets and garbage
 * change nothing. */
static void ftrace_overruns_are_a_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t fl = {0};
  uint8_t pkt[256];
  const uint64_t start[2] = {5, 7}, end[2] = {105, 57};
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 1, start, 2));
  const uint8_t other[] = {0x40, 0x2a, 0x0a, 0x00}; /* timestamp, an empty bundle */
  tg_ftrace_loss_scan(&fl, other, sizeof(other));
  const uint8_t garbage[] = {0x92, 0x02, 0x7f, 0x01}; /* field 34 cut short */
  tg_ftrace_loss_scan(&fl, garbage, sizeof(garbage));
  cli_loss_t loss;
  ftrace_loss_only(&fl, &loss); /* no end stats yet: not known */
  assert_int_equal(loss.n, 0);
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 2, end, 2));
  ftrace_loss_only(&fl, &loss);
  assert_int_equal(loss.n, 1);
  assert_string_equal(loss.items[0].name, "ftrace_cpu_overrun");
  assert_int_equal(loss.items[0].value, 150);
  assert_int_equal(loss.total, 150);
}

/* No overrun between the two: no loss. */
static void ftrace_without_overrun_is_no_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t fl = {0};
  uint8_t pkt[256];
  const uint64_t same[2] = {3, 4};
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 1, same, 2));
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 2, same, 2));
  cli_loss_t loss;
  ftrace_loss_only(&fl, &loss);
  assert_int_equal(loss.n, 0);
  assert_int_equal(loss.total, 0);
}

/* A clone's trace holds linux.ftrace's pair of every flush, the START the
 * same each time: the loss listed is the last END's, not the pairs' sum. */
static void ftrace_flush_pairs_count_once(void **state) {
  (void)state;
  tg_ftrace_loss_t fl = {0};
  uint8_t pkt[256];
  const uint64_t start[2] = {5, 7}, end1[2] = {25, 7}, end2[2] = {45, 17};
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 1, start, 2));
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 2, end1, 2));
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 1, start, 2));
  tg_ftrace_loss_scan(&fl, pkt, make_ftrace_stats_packet(pkt, 2, end2, 2));
  cli_loss_t loss;
  ftrace_loss_only(&fl, &loss);
  assert_int_equal(loss.n, 1);
  assert_int_equal(loss.items[0].value, 50);
  assert_int_equal(loss.total, 50);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_counter_is_in_the_total),
      cmocka_unit_test(no_loss_is_nothing),
      cmocka_unit_test(ftrace_overruns_are_a_loss),
      cmocka_unit_test(ftrace_without_overrun_is_no_loss),
      cmocka_unit_test(ftrace_flush_pairs_count_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
