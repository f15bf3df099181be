/* tracegated end to end against hostile producers. Whatever a producer
 * writes into its SMB or sends on its socket, the service must not crash,
 * must not let it touch other producers' data, and must count what it
 * refused. Each scenario runs a good producer beside the bad one and checks
 * the good one's packets come out whole and in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

typedef struct world {
  raw_consumer_t c;
  raw_producer_t good, bad;
  simple_cfg_t sc;
} world_t;

/* One session on "adv.ds" with a good and a bad producer in it. */
static void world_start(test_service_t *ts, world_t *w) {
  assert_int_equal(raw_producer_connect(&w->good, ts, "good", "adv.ds", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&w->bad, ts, "bad", "adv.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&w->c, ts), 0);
  simple_cfg_init(&w->sc, 256, 1, "adv.ds");
  assert_int_equal(raw_consumer_enable(&w->c, &w->sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&w->good, 5000), 0);
  assert_int_equal(raw_producer_wait_started(&w->bad, 5000), 0);
}

static void world_stop(world_t *w) {
  raw_consumer_close(&w->c);
  raw_producer_close(&w->good);
  raw_producer_close(&w->bad);
}

static void commit_good(raw_producer_t *p, const char *str, uint32_t chunk_id,
                        uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, str, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* True the first time |seq| is seen in |seen| (which holds |*n| ids). */
static bool first_of_sequence(uint64_t *seen, size_t *n, size_t cap,
                              uint64_t seq) {
  for (size_t i = 0; i < *n; i++)
    if (seen[i] == seq) return false;
  assert_true(*n < cap);
  seen[(*n)++] = seq;
  return true;
}

/* Reads |c|'s session to the end (disabling it first) and checks that the
 * packets with str |str| are exactly first..first+n-1, in order, flagged
 * previous_packet_dropped only as their sequence's first packet (as
 * Perfetto flags every sequence's first). Returns the stats the trace ends
 * with (freed with |*out|). */
static const Perfetto__Protos__TraceStats *expect_intact(
    raw_consumer_t *c, const char *str, uint32_t first, uint32_t n,
    Perfetto__Protos__TracePacket ***out, size_t *nout) {
  assert_int_equal(raw_consumer_disable(c, 5000), 0);
  *out = raw_consumer_read(c, nout);
  assert_non_null(*out);
  Perfetto__Protos__TracePacket *tp[256];
  size_t k = test_packets(*out, *nout, tp, 256);
  uint32_t next = first;
  uint64_t seen[64];
  size_t n_seen = 0;
  for (size_t i = 0; i < k; i++) {
    bool seq_first = first_of_sequence(seen, &n_seen, 64,
                                       tp[i]->trusted_packet_sequence_id);
    if (!tp[i]->for_testing->str || strcmp(tp[i]->for_testing->str, str)) continue;
    assert_int_equal(tp[i]->for_testing->seq_value, next);
    assert_int_equal(tp[i]->has_previous_packet_dropped &&
                         tp[i]->previous_packet_dropped,
                     seq_first);
    next++;
  }
  assert_int_equal(next, first + n);
  const Perfetto__Protos__TraceStats *st = find_trace_stats(*out, *nout);
  assert_non_null(st);
  return st;
}

static uint32_t rnd(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void garbage_chunks_are_counted_as_abi_violations(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w.good, "good", 0, 0, 5);

  /* Chunks whose very first fragment header is broken (so nothing of them
   * is sound), with random counts, flags and bytes after it. */
  uint32_t seed = 0x9e3779b9u;
  uint8_t junk[1012];
  for (uint32_t i = 0; i < 24; i++) {
    for (size_t b = 0; b < sizeof(junk); b++) junk[b] = (uint8_t)rnd(&seed);
    switch (i % 3) {
      case 0: /* a size past the chunk's end */
        tg_pb_write_redundant_varint(junk, 5000 + rnd(&seed) % 100000);
        break;
      case 1: /* not a varint within 4 bytes */
        memset(junk, 0xFF, 4);
        break;
      default: /* a varint that is not redundant-encoded and too long */
        junk[0] = junk[1] = junk[2] = junk[3] = 0x80;
        break;
    }
    unsigned count = 1 + rnd(&seed) % 1023, flags = rnd(&seed) & 0x3F;
    assert_int_equal(raw_producer_write_chunk_raw(&w.bad, 0, 0, TG_PAGE_DIV_4,
                                                  (uint16_t)(1 + i % 3), i, count,
                                                  flags, junk, sizeof(junk)), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&w.bad, &page, &chunk, 1, 0), 0);
  }
  commit_good(&w.good, "good", 1, 5, 5);

  Perfetto__Protos__TracePacket **out;
  size_t n;
  const Perfetto__Protos__TraceStats *st = expect_intact(&w.c, "good", 0, 10, &out, &n);
  assert_true(st->buffer_stats[0]->abi_violations > 0);
  free_packets(out, n);
  world_stop(&w);
}

/* A second session ("other.ds") with its own producer and consumer, which
 * the adversarial producer is not part of. */
static void start_other_session(test_service_t *ts, raw_producer_t *other,
                                raw_consumer_t *c2, simple_cfg_t *sc2) {
  assert_int_equal(raw_producer_connect(other, ts, "other", "other.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(c2, ts), 0);
  simple_cfg_init(sc2, 64, 1, "other.ds");
  assert_int_equal(raw_consumer_enable(c2, &sc2->cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(other, 5000), 0);
}

static void bogus_commits_store_nothing(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  /* A second session the bad producer is not part of. */
  raw_producer_t other;
  raw_consumer_t c2;
  simple_cfg_t sc2;
  start_other_session(ts, &other, &c2, &sc2);

  commit_good(&w.good, "good", 0, 0, 5);
  commit_good(&other, "other", 0, 0, 3);

  /* Page 1: partitioned, chunk 0 BeingWritten, chunk 1 never written.
   * Page 2: Complete, but committed into the other session's buffer. */
  raw_producer_t *b = &w.bad;
  uint8_t pk[64];
  const uint8_t *f = pk;
  size_t l = make_test_packet(pk, sizeof(pk), "bad", 666);
  assert_int_equal(raw_producer_write_chunk_ex(b, 1, 0, TG_PAGE_DIV_4, 1, 0, 0, &f,
                                               &l, 1, false), 0);
  assert_int_equal(raw_producer_write_chunk(b, 2, 0, TG_PAGE_DIV_4, 1, 1, 0, &f, &l, 1), 0);
  uint32_t npages = (uint32_t)b->smb.num_pages;
  const raw_move_t bogus[] = {
      {npages, 0, b->target_buffer},      /* page out of range */
      {0xFFFFFFFFu, 0, b->target_buffer}, /* far out of range */
      {0, 13, b->target_buffer},          /* chunk out of range */
      {0, 0, b->target_buffer},           /* never partitioned */
      {1, 0, b->target_buffer},           /* still BeingWritten */
      {1, 1, b->target_buffer},           /* Free */
      {1, 99, b->target_buffer},
      {2, 0, other.target_buffer},        /* not its session's buffer */
      {2, 0, 0},                          /* buffer ids start at 1 */
      {2, 0, 0xFFFFFFFFu},
  };
  const size_t nbogus = sizeof(bogus) / sizeof(bogus[0]);
  for (size_t i = 0; i < nbogus; i++)
    assert_int_equal(raw_producer_commit_ex(b, &bogus[i], 1, NULL, 0, 0, false), 0);
  /* All at once, too. */
  assert_int_equal(raw_producer_commit_ex(b, bogus, nbogus, NULL, 0, 0, false), 0);
  commit_good(&w.good, "good", 1, 5, 5);
  commit_good(&other, "other", 1, 3, 3);

  Perfetto__Protos__TracePacket **out;
  size_t n;
  const Perfetto__Protos__TraceStats *st = expect_intact(&w.c, "good", 0, 10, &out, &n);
  /* Only the good producer's two chunks ever reached the buffer. */
  assert_int_equal(st->buffer_stats[0]->chunks_written, 2);
  /* The commits into a foreign buffer are refused and counted where they
   * were aimed (loss is per session); none was aimed at this one. */
  assert_int_equal(st->chunks_discarded, 0);
  /* The 7 moves aimed at this buffer, sent singly and then batched, each
   * count as an ABI violation of the buffer they targeted. */
  assert_int_equal(st->buffer_stats[0]->abi_violations, 14);
  Perfetto__Protos__TracePacket *tp[64];
  size_t k = test_packets(out, n, tp, 64);
  for (size_t i = 0; i < k; i++) assert_string_equal(tp[i]->for_testing->str, "good");
  free_packets(out, n);

  st = expect_intact(&c2, "other", 0, 6, &out, &n);
  assert_int_equal(st->buffer_stats[0]->chunks_written, 2);
  /* The Complete chunk aimed at it, once: the batch finds it freed. */
  assert_int_equal(st->chunks_discarded, 1);
  assert_int_equal(st->buffer_stats[0]->abi_violations, 0);
  k = test_packets(out, n, tp, 64);
  for (size_t i = 0; i < k; i++) assert_string_equal(tp[i]->for_testing->str, "other");
  free_packets(out, n);
  raw_consumer_close(&c2);
  raw_producer_close(&other);
  world_stop(&w);
}

static void patches_of_foreign_chunks_are_refused(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  raw_producer_t other;
  raw_consumer_t c2;
  simple_cfg_t sc2;
  start_other_session(ts, &other, &c2, &sc2);

  commit_good(&w.good, "good", 0, 0, 5);
  commit_good(&other, "other", 0, 0, 5);
  /* Patches aimed at the good producer's chunk (same writer and chunk id,
   * its buffer), and at the other session's buffer. If applied, they would
   * overwrite the first packet's bytes. */
  raw_patch_t forged[] = {
      {w.bad.target_buffer, 1, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {w.bad.target_buffer, 1, 0, 0, {0xde, 0xad, 0xbe, 0xef}, true},
      {other.target_buffer, 1, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {0xFFFFFFFFu, 1, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {w.bad.target_buffer, 0, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {w.bad.target_buffer, 70000, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
  };
  assert_int_equal(raw_producer_commit_ex(&w.bad, NULL, 0, forged,
                                          sizeof(forged) / sizeof(forged[0]), 0, false),
                   0);
  commit_good(&w.good, "good", 1, 5, 5);

  Perfetto__Protos__TracePacket **out;
  size_t n;
  const Perfetto__Protos__TraceStats *st = expect_intact(&w.c, "good", 0, 10, &out, &n);
  assert_int_equal(st->buffer_stats[0]->patches_succeeded, 0);
  assert_true(st->buffer_stats[0]->patches_failed >= 2);
  assert_true(st->patches_discarded >= 2);
  free_packets(out, n);
  st = expect_intact(&c2, "other", 0, 5, &out, &n);
  assert_int_equal(st->buffer_stats[0]->patches_succeeded, 0);
  free_packets(out, n);
  raw_consumer_close(&c2);
  raw_producer_close(&other);
  world_stop(&w);
}

static void commit_flood_leaves_the_service_responsive(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w.good, "good", 0, 0, 5);
  /* 20000 commits, no replies asked for, of chunks that are not there. */
  raw_move_t mv = {0, 0, w.bad.target_buffer};
  for (int i = 0; i < 20000; i++)
    assert_int_equal(raw_producer_commit_ex(&w.bad, &mv, 1, NULL, 0, 0, true), 0);
  /* Requests are handled in order: once Sync answers, the flood is in. */
  Perfetto__Protos__SyncRequest sync = PERFETTO__PROTOS__SYNC_REQUEST__INIT;
  assert_int_equal(raw_call(&w.bad.conn, "Sync", &sync.base, -1, NULL, NULL, 20000), 1);
  Perfetto__Protos__QueryServiceStateResponse *q = raw_consumer_query(&w.c, 20000);
  assert_non_null(q);
  assert_int_equal(q->service_state->n_tracing_sessions, 1);
  perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
  commit_good(&w.good, "good", 1, 5, 5);
  Perfetto__Protos__TracePacket **out;
  size_t n;
  expect_intact(&w.c, "good", 0, 10, &out, &n);
  free_packets(out, n);
  world_stop(&w);
}

static void packets_with_reserved_fields_are_dropped_and_counted(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  /* Fields only the service may write, appended to a valid test packet. */
  static const struct {
    uint8_t bytes[4];
    size_t len;
  } reserved[] = {
      {{0x18, 0x05}, 2},             /* trusted_uid = 5 */
      {{0x50, 0x07}, 2},             /* trusted_packet_sequence_id = 7 */
      {{0xF8, 0x04, 0x01}, 3},       /* trusted_pid = 1 */
      {{0xA2, 0x02, 0x01, 'x'}, 4},  /* synchronization_marker */
      {{0x8A, 0x02, 0x00}, 3},       /* trace_config {} */
      {{0x9A, 0x02, 0x00}, 3},       /* trace_stats {} */
      {{0x92, 0x03, 0x00}, 3},       /* compressed_packets */
      {{0xAA, 0x04, 0x00}, 3},       /* service_event {} */
      {{0x90, 0x06, 0x01}, 3},       /* machine_id = 1 */
  };
  const size_t nres = sizeof(reserved) / sizeof(reserved[0]);
  assert_true(2 * nres <= 32);
  uint8_t pk[32][64];
  const uint8_t *frags[32];
  size_t lens[32];
  unsigned n = 0;
  uint32_t v = 0;
  for (size_t i = 0; i < nres; i++) {
    lens[n] = make_test_packet(pk[n], 48, "ok", v++); /* a good one between */
    frags[n] = pk[n];
    n++;
    lens[n] = make_test_packet(pk[n], 48, "forged", 1000 + (uint32_t)i);
    memcpy(pk[n] + lens[n], reserved[i].bytes, reserved[i].len);
    lens[n] += reserved[i].len;
    frags[n] = pk[n];
    n++;
  }
  assert_int_equal(raw_producer_write_chunk(&w.good, 0, 0, TG_PAGE_DIV_4, 1, 0, 0,
                                            frags, lens, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&w.good, &page, &chunk, 1, 0), 0);

  Perfetto__Protos__TracePacket **out;
  size_t nout;
  expect_intact(&w.c, "ok", 0, (uint32_t)nres, &out, &nout);
  Perfetto__Protos__TracePacket *tp[64];
  size_t k = test_packets(out, nout, tp, 64);
  assert_int_equal(k, nres); /* none of the forged ones */
  for (size_t i = 0; i < k; i++) {
    assert_int_equal(tp[i]->trusted_uid, (int32_t)getuid());
    assert_int_equal(tp[i]->trusted_pid, (int32_t)getpid());
  }
  /* The trace's own stats packet comes last and already counts them. */
  const Perfetto__Protos__TraceStats *tstats = find_trace_stats(out, nout);
  assert_non_null(tstats);
  assert_int_equal(tstats->invalid_packets, nres);
  free_packets(out, nout);
  /* Counted as they were read, so after the read. */
  Perfetto__Protos__GetTraceStatsResponse *gs = raw_consumer_stats(&w.c);
  assert_non_null(gs);
  assert_int_equal(gs->trace_stats->invalid_packets, nres);
  perfetto__protos__get_trace_stats_response__free_unpacked(gs, NULL);
  world_stop(&w);
}

static void garbage_on_the_producer_socket_closes_only_that_connection(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w.good, "good", 0, 0, 5);

  /* A length far past the 128 KiB cap. */
  raw_conn_t x;
  assert_int_equal(raw_connect(&x, ts->producer_sock), 0);
  const uint8_t huge[] = {0xFF, 0xFF, 0xFF, 0xFF, 'j', 'u', 'n', 'k'};
  assert_int_equal(raw_send_bytes(&x, huge, sizeof(huge)), 0);
  assert_true(raw_wait_closed(&x, 5000));
  raw_close(&x);

  /* Just past the cap, from a producer that had bound and initialised. */
  raw_producer_t y;
  assert_int_equal(raw_producer_connect(&y, ts, "y", NULL, 0, 0, false), 0);
  uint8_t over[4];
  uint32_t len = 131069;
  memcpy(over, &len, 4);
  assert_int_equal(raw_send_bytes(&y.conn, over, 4), 0);
  assert_true(raw_wait_closed(&y.conn, 5000));
  raw_producer_close(&y);

  /* A frame that is not an IPCFrame is dropped; the stream goes on. */
  raw_conn_t z;
  assert_int_equal(raw_connect(&z, ts->producer_sock), 0);
  const uint8_t bad_frame[] = {6, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  assert_int_equal(raw_send_bytes(&z, bad_frame, sizeof(bad_frame)), 0);
  assert_int_equal(raw_bind(&z, "ProducerPort"), 0);
  raw_close(&z);

  commit_good(&w.good, "good", 1, 5, 5);
  Perfetto__Protos__TracePacket **out;
  size_t n;
  expect_intact(&w.c, "good", 0, 10, &out, &n);
  free_packets(out, n);
  world_stop(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(garbage_chunks_are_counted_as_abi_violations,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(bogus_commits_store_nothing,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(patches_of_foreign_chunks_are_refused,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(commit_flood_leaves_the_service_responsive,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(packets_with_reserved_fields_are_dropped_and_counted,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          garbage_on_the_producer_socket_closes_only_that_connection,
          test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
