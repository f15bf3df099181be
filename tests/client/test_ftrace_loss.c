/* The kernel's ftrace overruns a trace's packets carry
 * (client/ftrace_loss.c): per packet sequence, the last END's overruns
 * minus the START before it, summed over sequences.
 *
 * The numbers of last_pair_counts_not_their_sum and
 * two_sequences_add_up were checked once by hand against Perfetto v50.1's
 * trace_processor_shell: the same packets, framed as a Trace, give
 * stats.ftrace_cpu_overrun_delta summing to 50 in both (the sequences of
 * two_sequences_add_up name different CPUs, since trace_processor keys
 * these stats by CPU alone). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/ftrace_loss.h"
#include "test_service.h"

#define START 1
#define END 2

/* Scans one stats packet of |n| CPUs (from cpu |cpu0|) on sequence |seq|. */
static void scan_stats(tg_ftrace_loss_t *l, int phase, uint32_t seq,
                       uint32_t cpu0, const uint64_t *overrun, size_t n) {
  uint8_t pkt[256];
  size_t len = make_ftrace_stats_packet_on(pkt, phase, seq, cpu0, overrun, n);
  assert_true(len > 0);
  tg_ftrace_loss_scan(l, pkt, len);
}

static void no_stats_is_no_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint8_t other[] = {0x40, 0x2a, 0x0a, 0x00, 0x50, 0x07};
  tg_ftrace_loss_scan(&l, other, sizeof(other));
  tg_ftrace_loss_scan(&l, NULL, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  assert_int_equal(l.starts + l.ends, 0);
  assert_int_equal(l.n_seqs, 0);
}

/* Without an END the loss is not known: nothing is claimed. */
static void start_only_claims_nothing(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {5, 7};
  scan_stats(&l, START, 3, 0, start, 2);
  assert_int_equal(l.starts, 1);
  assert_int_equal(l.ends, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

static void one_pair_is_its_difference(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {5, 7}, end[2] = {105, 57};
  scan_stats(&l, START, 3, 0, start, 2);
  scan_stats(&l, END, 3, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 150);
}

/* A pair at every flush, the START the same each time: the last END
 * holds the whole loss (the sum of the pairs would be 90). */
static void last_pair_counts_not_their_sum(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {2, 3};
  const uint64_t ends[3][2] = {{12, 3}, {22, 13}, {32, 23}};
  for (int i = 0; i < 3; i++) {
    scan_stats(&l, START, 7, 0, start, 2);
    scan_stats(&l, END, 7, 0, ends[i], 2);
  }
  assert_int_equal(l.starts, 3);
  assert_int_equal(l.ends, 3);
  assert_int_equal(l.n_seqs, 1);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 50);
  /* A START the trace kept without its END (a flush cut short) leaves
   * the last END's loss as it was. */
  scan_stats(&l, START, 7, 0, start, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 50);
}

/* Two instances, their packets interleaved, one with the sequence id
 * after the stats (where the service appends it): each END is matched
 * with its own sequence's START. */
static void two_sequences_add_up(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t a0[2] = {1, 1}, a1[2] = {11, 1};
  const uint64_t b0[2] = {100, 200}, b1[2] = {100, 240};
  scan_stats(&l, START, 5, 0, a0, 2);
  uint8_t pkt[256];
  size_t len = make_ftrace_stats_packet_on(pkt, START, 0, 2, b0, 2);
  pkt[len++] = 0x50; /* trusted_packet_sequence_id = 6 */
  pkt[len++] = 6;
  tg_ftrace_loss_scan(&l, pkt, len);
  scan_stats(&l, END, 5, 0, a1, 2);
  scan_stats(&l, END, 6, 2, b1, 2);
  assert_int_equal(l.n_seqs, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 10 + 40);
}

/* Counters that went down (another instance's, a reset) are no loss. */
static void end_below_start_is_no_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {50, 50}, end[2] = {10, 60};
  scan_stats(&l, START, 4, 0, start, 2);
  scan_stats(&l, END, 4, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  /* An END with no START before it on its sequence claims nothing. */
  scan_stats(&l, END, 9, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

static void sums_saturate(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t zero[2] = {0, 0}, huge[2] = {UINT64_MAX - 1, UINT64_MAX - 1};
  /* Over CPUs: one sequence's END sums to UINT64_MAX. */
  scan_stats(&l, START, 2, 0, zero, 2);
  scan_stats(&l, END, 2, 0, huge, 2);
  assert_true(tg_ftrace_loss_overrun(&l) == UINT64_MAX);
  /* Over sequences. */
  scan_stats(&l, START, 3, 0, zero, 1);
  scan_stats(&l, END, 3, 0, huge, 1);
  assert_true(tg_ftrace_loss_overrun(&l) == UINT64_MAX);
}

/* Past the table's sequences, stats are counted as untracked, and the
 * tracked sequences' loss stays what it was. */
static void sequences_past_the_table_are_untracked(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[1] = {0}, end[1] = {1};
  for (uint32_t s = 0; s < TG_FTRACE_LOSS_MAX_SEQS + 3; s++) {
    scan_stats(&l, START, 100 + s, 0, start, 1);
    scan_stats(&l, END, 100 + s, 0, end, 1);
  }
  assert_int_equal(l.n_seqs, TG_FTRACE_LOSS_MAX_SEQS);
  assert_int_equal(l.untracked, 2 * 3);
  assert_int_equal(tg_ftrace_loss_overrun(&l), TG_FTRACE_LOSS_MAX_SEQS);
  /* A tracked sequence still is. */
  scan_stats(&l, END, 100, 0, (const uint64_t[]){5}, 1);
  assert_int_equal(tg_ftrace_loss_overrun(&l), TG_FTRACE_LOSS_MAX_SEQS + 4);
  assert_int_equal(l.untracked, 2 * 3);
}

static void garbage_is_ignored(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint8_t cut[] = {0x92, 0x02, 0x7f, 0x01};     /* field 34 cut short */
  const uint8_t bad[] = {0x92, 0x02, 0x02, 0xff, 0xff}; /* not FtraceStats */
  const uint8_t seq_only[] = {0x50, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const uint8_t wrong_type[] = {0x91, 0x02, 1, 2, 3, 4, 5, 6, 7, 8};
  tg_ftrace_loss_scan(&l, cut, sizeof(cut));
  tg_ftrace_loss_scan(&l, bad, sizeof(bad));
  tg_ftrace_loss_scan(&l, seq_only, sizeof(seq_only));
  tg_ftrace_loss_scan(&l, wrong_type, sizeof(wrong_type));
  /* A good packet cut anywhere. */
  uint8_t pkt[256];
  const uint64_t end[2] = {9, 9};
  size_t len = make_ftrace_stats_packet_on(pkt, END, 5, 0, end, 2);
  for (size_t n = 0; n < len; n++) tg_ftrace_loss_scan(&l, pkt, n);
  assert_int_equal(l.starts, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  /* A phase that is neither START nor END is not counted. */
  scan_stats(&l, 3, 5, 0, end, 2);
  assert_int_equal(l.starts + l.ends, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_stats_is_no_loss),
      cmocka_unit_test(start_only_claims_nothing),
      cmocka_unit_test(one_pair_is_its_difference),
      cmocka_unit_test(last_pair_counts_not_their_sum),
      cmocka_unit_test(two_sequences_add_up),
      cmocka_unit_test(end_below_start_is_no_loss),
      cmocka_unit_test(sums_saturate),
      cmocka_unit_test(sequences_past_the_table_are_untracked),
      cmocka_unit_test(garbage_is_ignored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
