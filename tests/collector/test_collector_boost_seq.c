/* boost_seq.c on golden bytes: what a boost packet's scan decides (moved,
 * kept, left out, too high), the exact bytes of a moved packet, and that
 * a moved packet reads back with its new sequence (the last field 10
 * wins) and nothing else changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collector/daemon/boost_seq.h"

/* TracePacket { timestamp: 5 (8), trusted_packet_sequence_id: 7 (10),
 * perf_sample (66) { cpu: 1 } } */
static const uint8_t kSample7[] = {0x40, 0x05, 0x50, 0x07,
                                   0x92, 0x04, 0x02, 0x08, 0x01};

static void a_sample_moves_with_its_sequence_appended(void **state) {
  (void)state;
  coll_boost_seq_scan_t sc;
  assert_int_equal(coll_boost_seq_scan(kSample7, sizeof(kSample7), &sc),
                   COLL_BOOST_SEQ_MOVE);
  assert_int_equal(sc.seq, 7);
  assert_true(sc.sample);
  assert_true(sc.decoded);
  uint8_t out[sizeof(kSample7) + COLL_BOOST_SEQ_EXTRA];
  size_t n = coll_boost_seq_append(kSample7, sizeof(kSample7), sc.seq, out);
  /* 7 + 2^19 = 524295: varint 87 80 20 after the tag 0x50. */
  static const uint8_t want[] = {0x40, 0x05, 0x50, 0x07, 0x92, 0x04, 0x02,
                                 0x08, 0x01, 0x50, 0x87, 0x80, 0x20};
  assert_int_equal(n, sizeof(want));
  assert_memory_equal(out, want, sizeof(want));
  /* Read back: the appended id wins, still a sample, decodes whole; it
   * is past what a boost numbers, so no packet is moved twice. */
  assert_int_equal(coll_boost_seq_scan(out, n, &sc), COLL_BOOST_SEQ_TOO_HIGH);
  assert_int_equal(sc.seq, 7 + COLL_BOOST_SEQ_BASE);
  assert_true(sc.sample);
}

static void the_highest_sequence_moves_and_one_more_is_too_high(
    void **state) {
  (void)state;
  /* COLL_BOOST_SEQ_MAX = 524286: varint fe ff 1f. */
  static const uint8_t max[] = {0x50, 0xfe, 0xff, 0x1f};
  static const uint8_t over[] = {0x50, 0xff, 0xff, 0x1f};
  coll_boost_seq_scan_t sc;
  assert_int_equal(coll_boost_seq_scan(max, sizeof(max), &sc),
                   COLL_BOOST_SEQ_MOVE);
  assert_int_equal(sc.seq, COLL_BOOST_SEQ_MAX);
  uint8_t out[sizeof(max) + COLL_BOOST_SEQ_EXTRA];
  size_t n = coll_boost_seq_append(max, sizeof(max), sc.seq, out);
  /* 2^20 - 2 = 1048574: fe ff 3f, the largest a boost writes. */
  static const uint8_t want[] = {0x50, 0xfe, 0xff, 0x1f,
                                 0x50, 0xfe, 0xff, 0x3f};
  assert_int_equal(n, sizeof(want));
  assert_memory_equal(out, want, sizeof(want));
  assert_int_equal(coll_boost_seq_scan(over, sizeof(over), &sc),
                   COLL_BOOST_SEQ_TOO_HIGH);
  assert_int_equal(sc.seq, COLL_BOOST_SEQ_MAX + 1);
}

static void the_service_clock_snapshot_is_left_out(void **state) {
  (void)state;
  /* sequence 1, clock_snapshot (6) { clocks { clock_id: 6 } } */
  static const uint8_t clocks[] = {0x50, 0x01, 0x32, 0x04,
                                   0x0a, 0x02, 0x08, 0x06};
  /* sequence 1 without one (its trace stats, say): moved like any. */
  static const uint8_t stats[] = {0x50, 0x01, 0xaa, 0x02, 0x00};
  /* a clock snapshot on a producer's sequence: moved. */
  static const uint8_t theirs[] = {0x50, 0x03, 0x32, 0x00};
  coll_boost_seq_scan_t sc;
  assert_int_equal(coll_boost_seq_scan(clocks, sizeof(clocks), &sc),
                   COLL_BOOST_SEQ_DROP);
  assert_int_equal(coll_boost_seq_scan(stats, sizeof(stats), &sc),
                   COLL_BOOST_SEQ_MOVE);
  assert_int_equal(sc.seq, 1);
  assert_int_equal(coll_boost_seq_scan(theirs, sizeof(theirs), &sc),
                   COLL_BOOST_SEQ_MOVE);
  assert_int_equal(sc.seq, 3);
}

static void the_last_sequence_field_wins(void **state) {
  (void)state;
  static const uint8_t two[] = {0x50, 0x09, 0x40, 0x01, 0x50, 0x04};
  coll_boost_seq_scan_t sc;
  assert_int_equal(coll_boost_seq_scan(two, sizeof(two), &sc),
                   COLL_BOOST_SEQ_MOVE);
  assert_int_equal(sc.seq, 4);
}

static void packets_without_a_sequence_or_that_do_not_decode_are_kept(
    void **state) {
  (void)state;
  coll_boost_seq_scan_t sc;
  static const uint8_t none[] = {0x40, 0x05};
  assert_int_equal(coll_boost_seq_scan(none, sizeof(none), &sc),
                   COLL_BOOST_SEQ_KEEP);
  assert_true(sc.decoded);
  static const uint8_t zero[] = {0x50, 0x00};
  assert_int_equal(coll_boost_seq_scan(zero, sizeof(zero), &sc),
                   COLL_BOOST_SEQ_KEEP);
  /* field 10 as bytes is no sequence id */
  static const uint8_t as_len[] = {0x52, 0x01, 0x07};
  assert_int_equal(coll_boost_seq_scan(as_len, sizeof(as_len), &sc),
                   COLL_BOOST_SEQ_KEEP);
  assert_int_equal(sc.seq, 0);
  /* a sequence, then a length past the end: kept, the merge counts it */
  static const uint8_t cut[] = {0x50, 0x07, 0x92, 0x04, 0x09, 0x08};
  assert_int_equal(coll_boost_seq_scan(cut, sizeof(cut), &sc),
                   COLL_BOOST_SEQ_KEEP);
  assert_false(sc.decoded);
  /* a varint cut short */
  static const uint8_t short_varint[] = {0x50, 0x87};
  assert_int_equal(
      coll_boost_seq_scan(short_varint, sizeof(short_varint), &sc),
      COLL_BOOST_SEQ_KEEP);
  assert_false(sc.decoded);
  assert_int_equal(coll_boost_seq_scan(NULL, 0, &sc), COLL_BOOST_SEQ_KEEP);
  assert_true(sc.decoded);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_sample_moves_with_its_sequence_appended),
      cmocka_unit_test(the_highest_sequence_moves_and_one_more_is_too_high),
      cmocka_unit_test(the_service_clock_snapshot_is_left_out),
      cmocka_unit_test(the_last_sequence_field_wins),
      cmocka_unit_test(
          packets_without_a_sequence_or_that_do_not_decode_are_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
