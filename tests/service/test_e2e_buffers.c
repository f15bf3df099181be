/* tracegated end to end: what the central buffers keep and return. Ring
 * and discard policies, fragment reassembly with patches, and sessions
 * that must not see each other's data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "service_scenario.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

/* ~90-byte packets: ten fill a 1020-byte chunk (4 KiB page, 4 chunks). */
#define LONG_STR \
  "0123456789012345678901234567890123456789012345678901234567890123456789012345678"
#define PER_CHUNK 10

/* Writes chunk |id| of writer 1 (PER_CHUNK packets, values id*PER_CHUNK...)
 * into page 0 chunk 0 and commits it; the service frees the chunk before it
 * replies, so the slot can be reused at once. */
static void commit_chunk(raw_producer_t *p, uint32_t id) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, id, LONG_STR,
                                              id * PER_CHUNK, PER_CHUNK), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

static bool dropped_flag(const Perfetto__Protos__TracePacket *pk) {
  return pk->has_previous_packet_dropped && pk->previous_packet_dropped != 0;
}

static void ring_buffer_overwrites_oldest_and_flags_the_gap(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "ring.ds", .buffer_kb = 16,
                                  .policy = 1 /* RING_BUFFER */});
  scenario_start(&s);

  /* A first read drains chunk 0: nothing lost yet. The sequence's first
   * packet is flagged all the same, as Perfetto's are; the stats say that
   * nothing was lost. */
  commit_chunk(&s.p, 0);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[1024];
  size_t k = test_packets(out, n, tp, 1024);
  assert_int_equal(k, PER_CHUNK);
  for (size_t i = 0; i < k; i++) {
    assert_int_equal(tp[i]->for_testing->seq_value, i);
    assert_int_equal(dropped_flag(tp[i]), i == 0);
  }
  free_packets(out, n);
  Perfetto__Protos__GetTraceStatsResponse *gs = raw_consumer_stats(&s.c);
  assert_non_null(gs);
  assert_non_null(gs->trace_stats);
  assert_int_equal(gs->trace_stats->buffer_stats[0]->chunks_overwritten, 0);
  assert_int_equal(gs->trace_stats->buffer_stats[0]->chunks_discarded, 0);
  perfetto__protos__get_trace_stats_response__free_unpacked(gs, NULL);

  /* 63 more chunks (~63 KiB) through a 16 KiB ring. */
  const uint32_t chunks = 64;
  for (uint32_t id = 1; id < chunks; id++) commit_chunk(&s.p, id);
  scenario_stop(&s);
  out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  k = test_packets(out, n, tp, 1024);
  assert_true(k > 0);
  assert_true(k < (chunks - 1) * PER_CHUNK);
  /* The oldest are gone, the newest all there, in order and contiguous;
   * the first packet after the gap says so, the others do not. */
  assert_true(tp[0]->for_testing->seq_value > 2 * PER_CHUNK);
  assert_int_equal(tp[k - 1]->for_testing->seq_value, chunks * PER_CHUNK - 1);
  assert_true(dropped_flag(tp[0]));
  for (size_t i = 1; i < k; i++) {
    assert_int_equal(tp[i]->for_testing->seq_value, tp[i - 1]->for_testing->seq_value + 1);
    assert_false(dropped_flag(tp[i]));
    assert_int_equal(tp[i]->trusted_packet_sequence_id, tp[0]->trusted_packet_sequence_id);
  }
  const Perfetto__Protos__TraceStats *st = find_trace_stats(out, n);
  assert_non_null(st);
  assert_int_equal(st->n_buffer_stats, 1);
  assert_true(st->buffer_stats[0]->chunks_overwritten > 0);
  assert_int_equal(st->buffer_stats[0]->chunks_discarded, 0);
  free_packets(out, n);
  scenario_close(&s);
}

static void discard_buffer_keeps_earliest_and_counts_dropped_chunks(void **state) {
  scenario_t s;
  scenario_open(&s, *state,
                (scenario_opts_t){.ds = "discard.ds", .buffer_kb = 16,
                                  .policy = 2 /* DISCARD */});
  scenario_start(&s);

  const uint32_t chunks = 64;
  for (uint32_t id = 0; id < chunks; id++) commit_chunk(&s.p, id);
  scenario_stop(&s);
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[1024];
  size_t k = test_packets(out, n, tp, 1024);
  assert_true(k >= PER_CHUNK);
  assert_true(k < chunks * PER_CHUNK);
  for (size_t i = 0; i < k; i++) {
    assert_int_equal(tp[i]->for_testing->seq_value, i); /* from the very first */
    assert_int_equal(dropped_flag(tp[i]), i == 0);      /* the sequence's first */
  }
  const Perfetto__Protos__TraceStats *st = find_trace_stats(out, n);
  assert_non_null(st);
  assert_true(st->buffer_stats[0]->chunks_discarded > 0);
  assert_int_equal(st->buffer_stats[0]->chunks_overwritten, 0);
  /* Every chunk is either kept or discarded. */
  assert_int_equal(st->buffer_stats[0]->chunks_written + st->buffer_stats[0]->chunks_discarded,
                   chunks);
  free_packets(out, n);
  scenario_close(&s);
}

/* A chunk as large as the buffer is kept: Perfetto's traced_probes writes
 * 32 KiB pages as one chunk each, and a 32 KiB buffer must record one
 * (traced does). Both fill policies. */
static void a_chunk_the_size_of_the_buffer_is_kept(void **state) {
  test_service_t *ts = *state;
  for (int policy = 1; policy <= 2; policy++) {
    scenario_t s;
    const char *ds = policy == 1 ? "whole.ring.ds" : "whole.discard.ds";
    scenario_open(&s, ts,
                  (scenario_opts_t){.producer = "whole.producer", .ds = ds,
                                    .buffer_kb = 32, .policy = policy,
                                    .page_kb = 32, .smb_kb = 128});
    scenario_start(&s);
    assert_int_equal(s.p.page_size_kb, 32);
    /* One chunk in the whole 32 KiB page (TG_PAGE_DIV_1). */
    const uint8_t *frag[1] = {(const uint8_t *)"whole"};
    size_t len[1] = {5};
    assert_int_equal(raw_producer_write_chunk(&s.p, 0, 0, TG_PAGE_DIV_1, 1, 0, 0,
                                              frag, len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&s.p, &page, &chunk, 1, 0), 0);
    scenario_stop(&s);
    size_t n = 0;
    Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
    assert_non_null(out);
    const Perfetto__Protos__TraceStats *st = find_trace_stats(out, n);
    assert_non_null(st);
    assert_int_equal(st->buffer_stats[0]->chunks_discarded, 0);
    assert_int_equal(st->buffer_stats[0]->chunks_written, 1);
    assert_true(st->buffer_stats[0]->bytes_written >= 32 * 1024 - 64);
    assert_int_equal(st->buffer_stats[0]->buffer_size, 32 * 1024);
    free_packets(out, n);
    scenario_close(&s);
  }
}

static void fragmented_packet_is_reassembled_after_its_patch(void **state) {
  scenario_t s;
  scenario_open(&s, *state, (scenario_opts_t){.ds = "frag.ds", .buffer_kb = 256});
  scenario_start(&s);

  /* TracePacket { for_testing (900) = [size: 4 bytes, patched later]
   * TestEvent { str = 1500 x 'f', seq_value = 7 } }, written as the SDK does
   * when a nested message's size is only known after its chunk was
   * returned: the size bytes stay zero until the patch. */
  enum { STR_LEN = 1500, EV_LEN = 1 + 2 + STR_LEN + 2, PKT_LEN = 2 + 4 + EV_LEN };
  uint8_t pkt[PKT_LEN];
  uint8_t *q = pkt;
  *q++ = 0xA2; /* field 900, length-delimited */
  *q++ = 0x38;
  memset(q, 0, 4); /* the size, to be patched */
  q += 4;
  *q++ = 0x0A; /* str */
  *q++ = (uint8_t)(0x80 | (STR_LEN & 0x7F));
  *q++ = (uint8_t)(STR_LEN >> 7);
  memset(q, 'f', STR_LEN);
  q += STR_LEN;
  *q++ = 0x10; /* seq_value */
  *q++ = 7;
  assert_int_equal(q - pkt, PKT_LEN);

  const size_t cut1 = 500, cut2 = 1300;
  const uint8_t *f1 = pkt, *f2 = pkt + cut1, *f3 = pkt + cut2;
  size_t l1 = cut1, l2 = cut2 - cut1, l3 = PKT_LEN - cut2;
  assert_int_equal(raw_producer_write_chunk(&s.p, 0, 0, TG_PAGE_DIV_4, 1, 0,
                                            TG_CHUNK_LAST_PACKET_CONTINUES |
                                                TG_CHUNK_NEEDS_PATCHING,
                                            &f1, &l1, 1), 0);
  assert_int_equal(raw_producer_write_chunk(&s.p, 0, 1, TG_PAGE_DIV_4, 1, 1,
                                            TG_CHUNK_FIRST_PACKET_CONTINUES |
                                                TG_CHUNK_LAST_PACKET_CONTINUES,
                                            &f2, &l2, 1), 0);
  assert_int_equal(raw_producer_write_chunk(&s.p, 0, 2, TG_PAGE_DIV_4, 1, 2,
                                            TG_CHUNK_FIRST_PACKET_CONTINUES,
                                            &f3, &l3, 1), 0);
  /* And a whole packet after it on the same sequence. */
  uint8_t after[64];
  const uint8_t *f4 = after;
  size_t l4 = make_test_packet(after, sizeof(after), "after", 8);
  assert_int_equal(raw_producer_write_chunk(&s.p, 0, 3, TG_PAGE_DIV_4, 1, 3, 0,
                                            &f4, &l4, 1), 0);
  uint32_t pages[4] = {0, 0, 0, 0}, chunks[4] = {0, 1, 2, 3};
  assert_int_equal(raw_producer_commit(&s.p, pages, chunks, 4, 0), 0);

  /* Unpatched, the sequence stalls: nothing of it is readable. */
  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  Perfetto__Protos__TracePacket *tp[8];
  assert_int_equal(test_packets(out, n, tp, 8), 0);
  free_packets(out, n);

  /* The patch: offset from the chunk payload start, past the fragment's
   * own 4-byte size header and the 2-byte tag. */
  raw_patch_t patch = {.target_buffer = s.p.target_buffer, .writer_id = 1,
                       .chunk_id = 0, .offset = 4 + 2, .has_more = false};
  tg_pb_write_redundant_varint(patch.data, EV_LEN);
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, &patch, 1, 0, false), 0);

  scenario_stop(&s);
  out = raw_consumer_read(&s.c, &n);
  assert_non_null(out);
  assert_int_equal(test_packets(out, n, tp, 8), 2);
  assert_int_equal(tp[0]->for_testing->seq_value, 7);
  assert_non_null(tp[0]->for_testing->str);
  assert_int_equal(strlen(tp[0]->for_testing->str), STR_LEN);
  assert_int_equal(strspn(tp[0]->for_testing->str, "f"), STR_LEN);
  assert_int_equal(tp[1]->for_testing->seq_value, 8);
  assert_string_equal(tp[1]->for_testing->str, "after");
  assert_int_equal(tp[0]->trusted_packet_sequence_id, tp[1]->trusted_packet_sequence_id);
  free_packets(out, n);

  Perfetto__Protos__GetTraceStatsResponse *gs = raw_consumer_stats(&s.c);
  assert_non_null(gs);
  assert_non_null(gs->trace_stats);
  assert_int_equal(gs->trace_stats->buffer_stats[0]->patches_succeeded, 1);
  assert_int_equal(gs->trace_stats->buffer_stats[0]->patches_failed, 0);
  perfetto__protos__get_trace_stats_response__free_unpacked(gs, NULL);
  scenario_close(&s);
}

static void concurrent_sessions_get_only_their_own_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t pa, pb;
  raw_consumer_t ca, cb;
  simple_cfg_t sa, sb;
  assert_int_equal(raw_producer_connect(&pa, ts, "prod.a", "ds.a", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&pb, ts, "prod.b", "ds.b", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&ca, ts), 0);
  assert_int_equal(raw_consumer_connect(&cb, ts), 0);
  simple_cfg_init(&sa, 64, 1, "ds.a");
  simple_cfg_init(&sb, 64, 1, "ds.b");
  assert_int_equal(raw_consumer_enable(&ca, &sa.cfg, -1), 0);
  assert_int_equal(raw_consumer_enable(&cb, &sb.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&pa, 5000), 0);
  assert_int_equal(raw_producer_wait_started(&pb, 5000), 0);
  assert_int_not_equal(pa.target_buffer, pb.target_buffer);

  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_write_packets(&pa, 0, 0, 1, 0, "from-a", 100, 5), 0);
  assert_int_equal(raw_producer_commit(&pa, &page, &chunk, 1, 0), 0);
  assert_int_equal(raw_producer_write_packets(&pb, 0, 0, 1, 0, "from-b", 200, 7), 0);
  assert_int_equal(raw_producer_commit(&pb, &page, &chunk, 1, 0), 0);

  struct {
    raw_consumer_t *c;
    const char *str;
    uint32_t first;
    size_t count;
  } want[2] = {{&ca, "from-a", 100, 5}, {&cb, "from-b", 200, 7}};
  for (int s = 0; s < 2; s++) {
    assert_int_equal(raw_consumer_disable(want[s].c, 5000), 0);
    size_t n = 0;
    Perfetto__Protos__TracePacket **out = raw_consumer_read(want[s].c, &n);
    assert_non_null(out);
    Perfetto__Protos__TracePacket *tp[16];
    assert_int_equal(test_packets(out, n, tp, 16), want[s].count);
    for (size_t i = 0; i < want[s].count; i++) {
      assert_string_equal(tp[i]->for_testing->str, want[s].str);
      assert_int_equal(tp[i]->for_testing->seq_value, want[s].first + i);
    }
    free_packets(out, n);
  }
  raw_consumer_close(&ca);
  raw_consumer_close(&cb);
  raw_producer_close(&pa);
  raw_producer_close(&pb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(ring_buffer_overwrites_oldest_and_flags_the_gap,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(discard_buffer_keeps_earliest_and_counts_dropped_chunks,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(a_chunk_the_size_of_the_buffer_is_kept,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(fragmented_packet_is_reassembled_after_its_patch,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(concurrent_sessions_get_only_their_own_packets,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
