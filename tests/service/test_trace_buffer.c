/* The central trace buffer (service/trace_buffer.h).
 *
 * Chunks are built byte by byte here, exactly as a producer lays them out in
 * the SMB (8-byte header: u32 chunk id, u16 writer id, u16 count | flags <<
 * 10; fragments with a 4-byte redundant varint size), so the buffer is
 * checked against the wire format rather than against our own writer.
 * Packets carry a tag so that every read can be matched to what was
 * written.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "abi/smb.h"
#include "service/trace_buffer.h"
#include "tracegate/error.h"

#define FIRST TG_CHUNK_FIRST_PACKET_CONTINUES
#define LAST TG_CHUNK_LAST_PACKET_CONTINUES
#define PATCH TG_CHUNK_NEEDS_PATCHING

static const tg_producer_ident_t kP1 = {1, 1001, 111};
static const tg_producer_ident_t kP2 = {2, 1002, 222};

/* --- building chunks ------------------------------------------------------ */

#define CHUNK_MAX 8192

typedef struct chunk {
  uint8_t b[CHUNK_MAX];
  size_t len;
  unsigned count;
} chunk_t;

static void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static void put_size(uint8_t *p, uint32_t v) { /* redundant varint */
  p[0] = (uint8_t)((v & 0x7F) | 0x80);
  p[1] = (uint8_t)(((v >> 7) & 0x7F) | 0x80);
  p[2] = (uint8_t)(((v >> 14) & 0x7F) | 0x80);
  p[3] = (uint8_t)((v >> 21) & 0x7F);
}

static chunk_t *chunk_new(uint32_t id, uint16_t writer) {
  chunk_t *c = calloc(1, sizeof(*c));
  assert_non_null(c);
  put_le32(c->b, id);
  c->b[4] = (uint8_t)writer;
  c->b[5] = (uint8_t)(writer >> 8);
  c->len = TG_SMB_CHUNK_HEADER_SIZE;
  return c;
}

static void chunk_flags(chunk_t *c, unsigned flags) {
  uint16_t packets = tg_chunk_packets_pack(c->count, flags);
  c->b[6] = (uint8_t)packets;
  c->b[7] = (uint8_t)(packets >> 8);
}

static unsigned chunk_get_flags(const chunk_t *c) {
  return tg_chunk_packets_flags((uint16_t)(c->b[6] | (c->b[7] << 8)));
}

/* Appends a fragment with size header |size| and |n| bytes of |p|. */
static void chunk_frag_sized(chunk_t *c, uint32_t size, const void *p,
                             size_t n) {
  assert_true(c->len + 4 + n <= CHUNK_MAX);
  put_size(c->b + c->len, size);
  if (n) memcpy(c->b + c->len + 4, p, n);
  c->len += 4 + n;
  c->count++;
  chunk_flags(c, chunk_get_flags(c));
}

static void chunk_frag(chunk_t *c, const void *p, size_t n) {
  chunk_frag_sized(c, (uint32_t)n, p, n);
}

static void chunk_drop_marker(chunk_t *c) {
  chunk_frag_sized(c, TG_PACKET_SIZE_DROP, NULL, 0);
}

/* SMB chunks have a fixed size: zero-fill the unused tail. */
static void chunk_pad(chunk_t *c, size_t size) {
  assert_true(size >= c->len && size <= CHUNK_MAX);
  c->len = size;
}

static int commit(tg_trace_buffer_t *tb, const tg_producer_ident_t *p,
                  chunk_t *c, bool complete) {
  return tg_trace_buffer_copy_chunk(tb, p, c->b, c->len, complete);
}

/* A flush's scrape of |c|, Complete in the SMB, its CommitData to come. */
static int scrape(tg_trace_buffer_t *tb, const tg_producer_ident_t *p,
                  const chunk_t *c) {
  return tg_trace_buffer_scrape_chunk(tb, p, c->b, c->len, true);
}

/* Commits and frees. */
static int commit_free(tg_trace_buffer_t *tb, const tg_producer_ident_t *p,
                       chunk_t *c) {
  int rv = commit(tb, p, c, true);
  free(c);
  return rv;
}

/* Deterministic packet bytes for |tag|. */
static void payload(uint8_t *p, size_t n, uint32_t tag) {
  uint32_t x = tag * 2654435761u + 12345u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}

/* --- reading -------------------------------------------------------------- */

typedef struct got {
  uint8_t data[65536];
  size_t len;
  unsigned slices;
  tg_producer_ident_t producer;
  uint16_t writer;
  bool dropped;
} got_t;

static got_t g_got;

/* Reads one packet into g_got; checks the slices add up. */
static int read_one(tg_trace_buffer_t *tb) {
  tg_packet_t pkt;
  memset(&pkt, 0xA5, sizeof(pkt));
  int rv = tg_trace_buffer_read_packet(tb, &pkt);
  assert_true(rv == 0 || rv == 1);
  if (rv == 0) return 0;
  assert_true(pkt.num_slices >= 1);
  size_t sum = 0;
  for (unsigned i = 0; i < pkt.num_slices; i++) {
    assert_true(sum + pkt.slice_len[i] <= sizeof(g_got.data));
    memcpy(g_got.data + sum, pkt.slice[i], pkt.slice_len[i]);
    sum += pkt.slice_len[i];
  }
  assert_int_equal(sum, pkt.size);
  g_got.len = sum;
  g_got.slices = pkt.num_slices;
  g_got.producer = pkt.producer;
  g_got.writer = pkt.writer_id;
  g_got.dropped = pkt.previous_packet_dropped;
  return 1;
}

/* Reads the next packet and checks it is |n| bytes of payload(tag). */
static void expect_packet(tg_trace_buffer_t *tb, uint16_t writer, uint32_t tag,
                          size_t n, bool dropped) {
  uint8_t want[65536];
  payload(want, n, tag);
  assert_int_equal(read_one(tb), 1);
  assert_int_equal(g_got.writer, writer);
  assert_int_equal(g_got.len, n);
  assert_memory_equal(g_got.data, want, n);
  assert_int_equal(g_got.dropped, dropped);
}

static void expect_nothing(tg_trace_buffer_t *tb) {
  assert_int_equal(read_one(tb), 0);
}

/* A chunk with whole packets tagged |tag0|, |tag0 + 1|, ... of |n| bytes. */
static chunk_t *chunk_whole(uint32_t id, uint16_t writer, uint32_t tag0,
                            unsigned count, size_t n) {
  chunk_t *c = chunk_new(id, writer);
  uint8_t p[4096];
  for (unsigned i = 0; i < count; i++) {
    payload(p, n, tag0 + i);
    chunk_frag(c, p, n);
  }
  return c;
}

static const tg_trace_buffer_stats_t *stats(const tg_trace_buffer_t *tb) {
  return tg_trace_buffer_stats(tb);
}

/* --- tests ---------------------------------------------------------------- */

static void new_rejects_bad_sizes_and_policies(void **state) {
  (void)state;
  assert_null(tg_trace_buffer_new(4095, TG_FILL_RING_BUFFER));
  assert_null(tg_trace_buffer_new(0, TG_FILL_DISCARD));
  assert_null(tg_trace_buffer_new(8192, (tg_fill_policy_t)0));
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096 + 7, TG_FILL_DISCARD);
  assert_non_null(tb);
  assert_int_equal(tg_trace_buffer_size(tb), 4096);
  assert_int_equal(stats(tb)->buffer_size, 4096);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
  tg_trace_buffer_free(NULL);
}

static void single_packets_read_in_order(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 1, 100, 3, 40)), 0);
  chunk_t *c = chunk_whole(1, 1, 103, 2, 77);
  chunk_pad(c, 292); /* a DIV_14 chunk with free space at the end */
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_true(tg_trace_buffer_used(tb) > 0);

  for (uint32_t i = 0; i < 3; i++) expect_packet(tb, 1, 100 + i, 40, i == 0);
  assert_int_equal(g_got.producer.producer_id, 1);
  assert_int_equal(g_got.producer.uid, 1001);
  assert_int_equal(g_got.producer.pid, 111);
  assert_int_equal(g_got.slices, 1);
  for (uint32_t i = 0; i < 2; i++) expect_packet(tb, 1, 103 + i, 77, false);
  expect_nothing(tb);

  const tg_trace_buffer_stats_t *st = stats(tb);
  assert_int_equal(st->chunks_written, 2);
  assert_int_equal(st->chunks_read, 2);
  assert_int_equal(st->bytes_written, 8 + 3 * 44 + 292);
  assert_int_equal(st->bytes_read, st->bytes_written);
  assert_int_equal(st->chunks_overwritten + st->chunks_discarded, 0);
  assert_int_equal(st->abi_violations + st->trace_writer_packet_loss, 0);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void many_sequences_interleave_and_keep_their_order(void **state) {
  (void)state;
  enum { WRITERS = 8, CHUNKS = 4, PER_CHUNK = 3 };
  tg_trace_buffer_t *tb = tg_trace_buffer_new(256 * 1024, TG_FILL_RING_BUFFER);
  for (uint32_t k = 0; k < CHUNKS; k++) {
    for (uint16_t w = 1; w <= WRITERS; w++) {
      uint32_t tag0 = w * 1000u + k * PER_CHUNK;
      const tg_producer_ident_t *p = w % 2 ? &kP1 : &kP2;
      assert_int_equal(
          commit_free(tb, p, chunk_whole(k, w, tag0, PER_CHUNK, 10 + w)), 0);
    }
  }
  uint32_t next[WRITERS + 1] = {0};
  bool seen_first_round[WRITERS + 1] = {false};
  for (unsigned n = 0; n < WRITERS * CHUNKS * PER_CHUNK; n++) {
    assert_int_equal(read_one(tb), 1);
    uint16_t w = g_got.writer;
    assert_true(w >= 1 && w <= WRITERS);
    assert_int_equal(g_got.producer.producer_id, w % 2 ? 1 : 2);
    uint8_t want[64];
    payload(want, 10 + w, w * 1000u + next[w]);
    assert_int_equal(g_got.len, 10 + w);
    assert_memory_equal(g_got.data, want, g_got.len);
    assert_int_equal(g_got.dropped, next[w] == 0); /* a sequence's first */
    next[w]++;
    /* Round robin: the first WRITERS reads give one packet of each. */
    if (n < WRITERS) {
      assert_false(seen_first_round[w]);
      seen_first_round[w] = true;
    }
  }
  for (uint16_t w = 1; w <= WRITERS; w++)
    assert_int_equal(next[w], CHUNKS * PER_CHUNK);
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void sequences_of_departed_producers_are_forgotten(void **state) {
  (void)state;
  enum { WRITERS = 300 };
  static const tg_producer_ident_t kP3 = {3, 1003, 333};
  const tg_producer_ident_t *ps[3] = {&kP1, &kP2, &kP3};
  tg_trace_buffer_t *tb = tg_trace_buffer_new(1 << 20, TG_FILL_RING_BUFFER);
  for (unsigned k = 0; k < 3; k++)
    for (uint16_t w = 1; w <= WRITERS; w++)
      assert_int_equal(commit_free(tb, ps[k], chunk_whole(0, w, w, 1, 4)), 0);
  unsigned n = 0;
  while (read_one(tb)) n++;
  assert_int_equal(n, 3 * WRITERS);
  tg_trace_buffer_producer_gone(tb, 2); /* its 300 sequences go */
  /* The others still remember chunk 0: chunk 1 just goes on. */
  for (unsigned k = 0; k < 3; k += 2)
    for (uint16_t w = 1; w <= WRITERS; w++)
      assert_int_equal(commit_free(tb, ps[k], chunk_whole(1, w, w, 1, 4)), 0);
  /* Producer 2's writer starts a new sequence: its first packet is
   * flagged, as every sequence's first (remembered, it would go on). */
  assert_int_equal(commit_free(tb, &kP2, chunk_whole(1, 7, 7, 1, 4)), 0);
  n = 0;
  while (read_one(tb)) {
    assert_int_equal(g_got.dropped, g_got.producer.producer_id == 2);
    n++;
  }
  assert_int_equal(n, 2 * WRITERS + 1);
  tg_trace_buffer_free(tb);
}

static void fragmented_packet_across_three_chunks_is_reassembled(void **s) {
  (void)s;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t p2[350];
  payload(p2, sizeof(p2), 2);
  chunk_t *a = chunk_whole(10, 3, 1, 1, 30);
  chunk_frag(a, p2, 100);
  chunk_flags(a, LAST);
  chunk_t *b = chunk_new(11, 3); /* a middle fragment, nothing else */
  chunk_frag(b, p2 + 100, 200);
  chunk_flags(b, FIRST | LAST);
  chunk_t *c = chunk_new(12, 3);
  chunk_frag(c, p2 + 300, 50);
  uint8_t p3[20];
  payload(p3, sizeof(p3), 3);
  chunk_frag(c, p3, sizeof(p3));
  chunk_flags(c, FIRST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  assert_int_equal(commit_free(tb, &kP1, b), 0);
  assert_int_equal(commit_free(tb, &kP1, c), 0);

  expect_packet(tb, 3, 1, 30, true);
  expect_packet(tb, 3, 2, 350, false);
  assert_int_equal(g_got.slices, 3);
  expect_packet(tb, 3, 3, 20, false);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_read, 3);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void fragment_waiting_for_next_chunk_stalls_only_its_sequence(
    void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pb[500];
  payload(pb, sizeof(pb), 2);
  chunk_t *a = chunk_whole(0, 1, 1, 1, 16);
  chunk_frag(a, pb, 200);
  chunk_flags(a, LAST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 2, 50, 2, 8)), 0);

  expect_packet(tb, 1, 1, 16, true);
  expect_packet(tb, 2, 50, 8, true);
  expect_packet(tb, 2, 51, 8, false);
  expect_nothing(tb);
  expect_nothing(tb); /* still nothing: the stall is stable */
  assert_true(tg_trace_buffer_used(tb) > 0);

  chunk_t *b = chunk_new(1, 1);
  chunk_frag(b, pb + 200, 300);
  chunk_flags(b, FIRST);
  assert_int_equal(commit_free(tb, &kP1, b), 0);
  expect_packet(tb, 1, 2, 500, false);
  assert_int_equal(g_got.slices, 2);
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void needs_patching_stalls_until_final_patch(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  /* Packet B starts in chunk 0 with a size still to be patched. */
  uint8_t pb[120];
  payload(pb, sizeof(pb), 2);
  uint8_t unpatched[60];
  memcpy(unpatched, pb, sizeof(unpatched));
  memset(unpatched + 10, 0, 4);
  chunk_t *a = chunk_whole(0, 1, 1, 1, 24);
  chunk_frag(a, unpatched, sizeof(unpatched));
  chunk_flags(a, LAST | PATCH);
  chunk_t *b = chunk_new(1, 1);
  chunk_frag(b, pb + 60, 60);
  chunk_flags(b, FIRST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  assert_int_equal(commit_free(tb, &kP1, b), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 2, 9, 1, 5)), 0);

  expect_packet(tb, 2, 9, 5, true); /* the other sequence flows */
  expect_nothing(tb);

  /* Offsets count from the payload: 4 (size header of A) + 24 + 4 + 10. */
  const uint32_t off = 4 + 24 + 4 + 10;
  const uint8_t first[1][4] = {{pb[10], pb[11], 0, 0}};
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 0, &off, first, 1, true), 0);
  expect_nothing(tb); /* more patches announced */
  const uint8_t second[1][4] = {{pb[10], pb[11], pb[12], pb[13]}};
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 0, &off, second, 1, false),
                   0);
  expect_packet(tb, 1, 1, 24, true);
  expect_packet(tb, 1, 2, 120, false); /* the patched bytes */
  expect_nothing(tb);
  assert_int_equal(stats(tb)->patches_succeeded, 2);
  assert_int_equal(stats(tb)->patches_failed, 0);
  tg_trace_buffer_free(tb);
}

/* A patch may rewrite a fragment's size header itself: then the chunk is
 * analysed again, either way (a size made sound brings that fragment back,
 * one made to overflow the chunk drops it). Patches past every header are
 * not re-analysed; if that boundary were wrong, these would be missed. */
static void patch_on_a_size_header_is_analysed_again(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pa[24], pb[20];
  payload(pa, sizeof(pa), 1);
  payload(pb, sizeof(pb), 2);
  const uint32_t b_header = 4 + 24; /* payload offset of B's size header */

  /* Writer 1: B's size overflows the chunk until the patch fixes it. */
  chunk_t *c = chunk_new(0, 1);
  chunk_frag(c, pa, sizeof(pa));
  chunk_frag_sized(c, 4000, pb, sizeof(pb));
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), TG_EABI_VIOLATION);
  assert_int_equal(stats(tb)->abi_violations, 1);
  expect_nothing(tb); /* waits for its patches */
  uint8_t sound[1][4];
  put_size(sound[0], sizeof(pb));
  assert_int_equal(
      tg_trace_buffer_patch(tb, 1, 1, 0, &b_header, sound, 1, false), 0);
  expect_packet(tb, 1, 1, sizeof(pa), true);
  expect_packet(tb, 1, 2, sizeof(pb), false);
  expect_nothing(tb);

  /* Writer 2: B is sound until a patch makes its size overflow. */
  c = chunk_new(0, 2);
  chunk_frag(c, pa, sizeof(pa));
  chunk_frag(c, pb, sizeof(pb));
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  uint8_t overflow[1][4];
  put_size(overflow[0], 4000);
  assert_int_equal(
      tg_trace_buffer_patch(tb, 1, 2, 0, &b_header, overflow, 1, false), 0);
  assert_int_equal(stats(tb)->abi_violations, 2);
  expect_packet(tb, 2, 1, sizeof(pa), true);
  expect_nothing(tb); /* B is gone */
  tg_trace_buffer_free(tb);
}

static void patch_failures_are_counted_and_touch_nothing(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  /* One packet of 20 bytes: payload is 24 bytes. */
  chunk_t *c = chunk_whole(7, 1, 1, 1, 20);
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  const uint8_t junk[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};

  uint32_t past = 21; /* 21 + 4 > 24 */
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 7, &past, junk, 1, false),
                   TG_EABI_VIOLATION);
  uint32_t huge = UINT32_MAX - 1; /* offset + 4 wraps */
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 7, &huge, junk, 1, false),
                   TG_EABI_VIOLATION);
  const uint32_t mixed[2] = {4, 21}; /* all or nothing */
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 7, mixed, junk, 2, false),
                   TG_EABI_VIOLATION);
  uint32_t ok = 4;
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 8, &ok, junk, 1, false),
                   -ENOENT); /* unknown chunk */
  assert_int_equal(tg_trace_buffer_patch(tb, 2, 1, 7, &ok, junk, 1, false),
                   -ENOENT); /* another producer's writer 1 */
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 2, 7, &ok, junk, 1, false),
                   -ENOENT); /* another writer */
  assert_int_equal(stats(tb)->patches_failed, 6);
  assert_int_equal(stats(tb)->patches_succeeded, 0);
  expect_nothing(tb); /* failed patches did not clear needs-patching */

  uint32_t at_end = 20; /* the last 4 bytes: 20 + 4 == 24 */
  assert_int_equal(
      tg_trace_buffer_patch(tb, 1, 1, 7, &at_end, junk + 1, 1, false), 0);
  uint8_t want[20];
  payload(want, sizeof(want), 1);
  memcpy(want + 16, junk[1], 4);
  assert_int_equal(read_one(tb), 1);
  assert_int_equal(g_got.len, 20);
  assert_memory_equal(g_got.data, want, 20); /* junk[0] never landed */

  /* The chunk was read: patching it now fails. */
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 7, &ok, junk, 1, false),
                   -ENOENT);
  assert_int_equal(stats(tb)->patches_failed, 7);
  assert_int_equal(stats(tb)->patches_succeeded, 1);
  tg_trace_buffer_free(tb);
}

/* 1000-byte chunks filled by one packet of BIG bytes (1048-byte records):
 * three fit in 4 KiB. */
#define BIG 988
static chunk_t *big_chunk(uint32_t id, uint16_t writer, uint32_t tag) {
  return chunk_whole(id, writer, tag, 1, BIG);
}

static void ring_wrap_counts_overwrites_and_flags_next_packet(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_RING_BUFFER);
  for (uint32_t i = 0; i < 6; i++)
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, i)), 0);
  const tg_trace_buffer_stats_t *st = stats(tb);
  assert_int_equal(st->chunks_written, 6);
  assert_int_equal(st->chunks_overwritten, 3);
  assert_int_equal(st->bytes_overwritten, 3000);
  assert_int_equal(st->write_wrap_count, 1);
  /* The ring holds the buffer's 4096 bytes and one record header. */
  assert_int_equal(st->padding_bytes_written, 4096 + 48 - 3 * 1048);

  expect_packet(tb, 1, 3, BIG, true); /* chunks 0..2 are gone */
  expect_packet(tb, 1, 4, BIG, false);
  expect_packet(tb, 1, 5, BIG, false);
  expect_nothing(tb);

  /* Read chunks are not overwrite losses. */
  for (uint32_t i = 6; i < 12; i++) {
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, i)), 0);
    expect_packet(tb, 1, i, BIG, false);
  }
  assert_int_equal(st->chunks_overwritten, 3);
  assert_int_equal(st->chunks_read, 9);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void overwrite_of_partly_read_chunk_is_a_loss(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 0, 3, 326); /* 998 bytes: 1048 held */
  chunk_pad(c, 1000);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  expect_packet(tb, 1, 0, 326, true);
  for (uint32_t i = 1; i < 4; i++) /* the 4th record evicts chunk 0 */
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, 10 + i)), 0);
  assert_int_equal(stats(tb)->chunks_overwritten, 1);
  expect_packet(tb, 1, 11, BIG, true); /* packets 1 and 2 were lost */
  expect_packet(tb, 1, 12, BIG, false);
  expect_packet(tb, 1, 13, BIG, false);
  tg_trace_buffer_free(tb);
}

static void discard_refuses_when_full_and_reuses_read_space(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_DISCARD);
  for (uint32_t i = 0; i < 3; i++)
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, i)), 0);
  assert_int_equal(commit_free(tb, &kP1, big_chunk(3, 1, 3)), TG_ENO_SPACE);
  const tg_trace_buffer_stats_t *st = stats(tb);
  assert_int_equal(st->chunks_discarded, 1);
  assert_int_equal(st->chunks_overwritten, 0);

  expect_packet(tb, 1, 0, BIG, true); /* frees chunk 0's record */
  assert_int_equal(commit_free(tb, &kP1, big_chunk(4, 1, 4)), 0);
  assert_int_equal(st->chunks_discarded, 1);
  assert_int_equal(st->write_wrap_count, 1);
  expect_packet(tb, 1, 1, BIG, false);
  expect_packet(tb, 1, 2, BIG, false);
  expect_packet(tb, 1, 4, BIG, true); /* chunk 3 was refused */
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void discarded_continuation_drops_the_waiting_packet(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_DISCARD);
  uint8_t pb[984];
  payload(pb, sizeof(pb), 1);
  chunk_t *a = chunk_whole(0, 1, 0, 1, 100); /* B's start fills it */
  chunk_frag(a, pb, 884);
  chunk_flags(a, LAST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  for (uint32_t i = 0; i < 2; i++)
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 2, 20 + i)), 0);
  /* Full: the rest of B is refused. Waiting for it would pin chunk 0 at
   * the head of the ring and refuse every later chunk. */
  chunk_t *b = chunk_new(1, 1);
  chunk_frag(b, pb + 884, 100);
  chunk_flags(b, FIRST);
  chunk_pad(b, 1000);
  assert_int_equal(commit_free(tb, &kP1, b), TG_ENO_SPACE);
  expect_packet(tb, 1, 0, 100, true);
  expect_packet(tb, 2, 20, BIG, true);
  expect_packet(tb, 2, 21, BIG, false);
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  assert_int_equal(commit_free(tb, &kP1, big_chunk(2, 1, 5)), 0);
  expect_packet(tb, 1, 5, BIG, true);
  tg_trace_buffer_free(tb);
}

static void discarded_first_chunk_flags_first_packet(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_DISCARD);
  for (uint32_t i = 0; i < 3; i++)
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, i)), 0);
  /* Writer 2's first chunk is refused: its first packet read says so. */
  assert_int_equal(commit_free(tb, &kP1, big_chunk(0, 2, 20)), TG_ENO_SPACE);
  for (uint32_t i = 0; i < 3; i++) expect_packet(tb, 1, i, BIG, i == 0);
  assert_int_equal(commit_free(tb, &kP1, big_chunk(1, 2, 21)), 0);
  expect_packet(tb, 2, 21, BIG, true);
  tg_trace_buffer_free(tb);
}

/* Chunks as an agent commits them when its writers idle: the SMB's
 * 4088-byte chunks, each with one 100-byte packet. A record keeps what the
 * fragments cover (112 bytes: a 160-byte record), not the chunk's size, so
 * a 64 KiB ring holds hundreds of them rather than fifteen, and reads them
 * out newest last, with the overwritten ones counted. */
static void part_full_chunks_take_the_bytes_they_hold(void **state) {
  (void)state;
  enum { N = 1000, SIZE = 65536 };
  tg_trace_buffer_t *tb = tg_trace_buffer_new(SIZE, TG_FILL_RING_BUFFER);
  for (uint32_t i = 0; i < N; i++) {
    chunk_t *c = chunk_whole(i, 1, i, 1, 100);
    chunk_pad(c, 4088);
    assert_int_equal(commit_free(tb, &kP1, c), 0);
    /* Full but for the room a next chunk needs and the tail left as
     * padding when the ring wrapped: less than a chunk each. */
    if (i > 2 * SIZE / 160)
      assert_true(tg_trace_buffer_used(tb) + 2 * 4136 >= SIZE);
    assert_true(tg_trace_buffer_used(tb) <= SIZE + TG_TRACE_BUFFER_RECORD_OVERHEAD);
  }
  const tg_trace_buffer_stats_t *st = stats(tb);
  uint64_t kept = N - st->chunks_overwritten;
  assert_true(kept >= (SIZE - 2 * 4136) / 160);
  assert_int_equal(st->bytes_written, (uint64_t)N * 4088);
  for (uint64_t k = 0; k < kept; k++)
    expect_packet(tb, 1, (uint32_t)(N - kept + k), 100, k == 0);
  expect_nothing(tb);
  assert_int_equal(st->chunks_read, kept);
  assert_int_equal(st->bytes_read + st->bytes_overwritten, st->bytes_written);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

/* A record that kept only its fragments' prefix behaves as the whole
 * chunk did: a drop marker still counts (once), a malformed chunk keeps
 * its sound fragments and is counted once however often it is analysed
 * again, a second complete copy does not return packets twice, a patch
 * past the prefix lands nowhere that is read, and a clone reads the same. */
static void trimmed_records_read_as_whole_chunks(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pb[60];
  payload(pb, sizeof(pb), 7);
  /* Writer 1: two packets and a drop marker. */
  chunk_t *c = chunk_whole(0, 1, 0, 2, 60);
  chunk_drop_marker(c);
  chunk_pad(c, 4088);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(1, 1, 2, 1, 60)), 0);
  /* Writer 2: one packet, then a fragment running past the chunk. */
  c = chunk_whole(0, 2, 10, 1, 60);
  chunk_frag_sized(c, 5000, pb, 60);
  chunk_pad(c, 4088);
  assert_int_equal(commit_free(tb, &kP1, c), TG_EABI_VIOLATION);
  /* Writer 3: committed twice (scraped as complete, then CommitData). */
  c = chunk_whole(0, 3, 20, 3, 60);
  chunk_pad(c, 4088);
  assert_int_equal(commit(tb, &kP1, c, true), 0);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(stats(tb)->chunks_rewritten, 1);
  /* A patch into writer 3's unused tail, and one on a packet. */
  uint32_t off[2] = {4000, 4};
  const uint8_t data[2][4] = {{1, 2, 3, 4}, {9, 9, 9, 9}};
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 3, 0, off, data, 2, false), 0);
  uint8_t want[60];
  payload(want, 60, 20);
  memcpy(want, data[1], 4);
  /* Three records of a few hundred bytes, not three of 4 KiB. */
  assert_true(tg_trace_buffer_used(tb) < 3 * 4136);

  tg_trace_buffer_t *cl = tg_trace_buffer_clone(tb);
  assert_non_null(cl);
  tg_trace_buffer_t *both[2] = {tb, cl};
  for (int k = 0; k < 2; k++) {
    tg_trace_buffer_t *b = both[k];
    tg_trace_buffer_producer_gone(b, kP1.producer_id); /* analysed again */
    unsigned got[4] = {0};
    while (read_one(b)) {
      uint16_t w = g_got.writer;
      assert_true(w >= 1 && w <= 3);
      assert_int_equal(g_got.len, 60);
      if (w == 1) assert_int_equal(g_got.dropped, got[1] != 1);
      if (w == 3 && got[3] == 0) assert_memory_equal(g_got.data, want, 60);
      got[w]++;
    }
    assert_int_equal(got[1], 3);
    assert_int_equal(got[2], 1);
    assert_int_equal(got[3], 3);
    const tg_trace_buffer_stats_t *st = stats(b);
    assert_int_equal(st->trace_writer_packet_loss, 1);
    assert_int_equal(st->abi_violations, 1);
    assert_int_equal(st->chunks_discarded, 0);
    assert_int_equal(tg_trace_buffer_used(b), 0);
  }
  tg_trace_buffer_free(cl);
  tg_trace_buffer_free(tb);
}

/* A chunk as large as the buffer fits (Perfetto's traced_probes writes
 * 32 KiB chunks, and a 32 KiB buffer must hold one); a larger one is
 * discarded, evicting nothing. */
static void chunk_larger_than_buffer_is_discarded(void **state) {
  (void)state;
  for (int policy = TG_FILL_RING_BUFFER; policy <= TG_FILL_DISCARD; policy++) {
    tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, (tg_fill_policy_t)policy);
    assert_int_equal(stats(tb)->buffer_size, 4096);
    assert_int_equal(tg_trace_buffer_size(tb), 4096);
    assert_int_equal(commit_free(tb, &kP1, big_chunk(0, 1, 0)), 0);
    chunk_t *c = chunk_whole(1, 1, 1, 1, 100);
    chunk_pad(c, 4096 + 8);
    assert_int_equal(commit_free(tb, &kP1, c), TG_ENO_SPACE);
    assert_int_equal(stats(tb)->chunks_discarded, 1);
    assert_int_equal(stats(tb)->chunks_overwritten, 0); /* nothing evicted */
    expect_packet(tb, 1, 0, BIG, true);
    /* A chunk of the buffer's whole size takes the whole ring. */
    c = chunk_whole(2, 1, 2, 1, 100);
    chunk_pad(c, 4096);
    assert_int_equal(commit_free(tb, &kP1, c), 0);
    expect_packet(tb, 1, 2, 100, true);
    tg_trace_buffer_free(tb);
  }
}

static void recommit_of_scraped_chunk_returns_each_packet_once(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t p[4][50];
  for (int i = 0; i < 4; i++) payload(p[i], 50, (uint32_t)i);

  /* Scraped: A and B done, C still being written (size 0). */
  chunk_t *c = chunk_new(0, 1);
  chunk_frag(c, p[0], 50);
  chunk_frag(c, p[1], 50);
  chunk_frag_sized(c, 0, p[2], 20);
  chunk_pad(c, 292);
  assert_int_equal(commit(tb, &kP1, c, false), 0);
  expect_packet(tb, 1, 0, 50, true);
  expect_packet(tb, 1, 1, 50, false);
  expect_nothing(tb); /* the rest comes with the complete copy */
  assert_int_equal(commit_free(tb, &kP2, chunk_whole(0, 1, 90, 1, 9)), 0);
  expect_packet(tb, 1, 90, 9, true); /* other producer, same writer id */

  /* Complete: C finished, D added. A and B must not come again. */
  c->len = TG_SMB_CHUNK_HEADER_SIZE;
  c->count = 0;
  chunk_frag(c, p[0], 50);
  chunk_frag(c, p[1], 50);
  chunk_frag(c, p[2], 50);
  chunk_frag(c, p[3], 50);
  chunk_pad(c, 292);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  expect_packet(tb, 1, 2, 50, false);
  expect_packet(tb, 1, 3, 50, false);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_rewritten, 1);
  assert_int_equal(stats(tb)->chunks_written, 2);

  /* A scraped chunk whose last fragment has its size set is still held
   * back: the writer may yet mark it as continuing. */
  c = chunk_new(5, 2);
  chunk_frag(c, p[0], 50);
  chunk_frag(c, p[1], 50);
  assert_int_equal(commit(tb, &kP1, c, false), 0);
  expect_packet(tb, 2, 0, 50, true);
  expect_nothing(tb);
  chunk_t *d = chunk_new(6, 2);
  chunk_frag(d, p[1] + 20, 30);
  chunk_frag(d, p[3], 50);
  chunk_flags(d, FIRST);
  c->len = TG_SMB_CHUNK_HEADER_SIZE;
  c->count = 0;
  chunk_frag(c, p[0], 50);
  chunk_frag(c, p[1], 20); /* B continues in chunk 6 after all */
  chunk_flags(c, LAST);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, d), 0);
  expect_packet(tb, 2, 1, 50, false);
  assert_int_equal(g_got.slices, 2);
  expect_packet(tb, 2, 3, 50, false);
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

/* A flush scrapes the Complete chunks whose CommitData has not come yet,
 * as Perfetto's service does, and the reader may take them whole before
 * it comes. The CommitData (or another flush's scrape) then brings the
 * same bytes: neither a late chunk to count as discarded (relayed demo
 * recordings reported chunks_discarded 3-5 for these) nor packets to read
 * again, also when the sequence holds nothing else. A writer id that
 * comes back for a new writer starts afresh. */
static void scraped_complete_chunk_read_then_committed_is_not_lost_or_repeated(
    void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  chunk_t *c0 = chunk_whole(0, 1, 0, 2, 50);
  chunk_t *c1 = chunk_whole(1, 1, 2, 2, 50);
  assert_int_equal(scrape(tb, &kP1, c0), 0);
  assert_int_equal(scrape(tb, &kP1, c1), 0);
  expect_packet(tb, 1, 0, 50, true);
  expect_packet(tb, 1, 1, 50, false);
  expect_packet(tb, 1, 2, 50, false);
  expect_packet(tb, 1, 3, 50, false);
  expect_nothing(tb);
  /* The next flush scrapes chunk 1 again, then the CommitData come. */
  assert_int_equal(scrape(tb, &kP1, c1), 0);
  expect_nothing(tb);
  assert_int_equal(commit_free(tb, &kP1, c0), 0);
  assert_int_equal(commit_free(tb, &kP1, c1), 0);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_discarded, 0);
  /* The writer goes on with no gap flagged. */
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(2, 1, 4, 1, 50)), 0);
  expect_packet(tb, 1, 4, 50, false);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_rewritten, 3);
  assert_int_equal(stats(tb)->chunks_read, 3);

  /* Writer 2: chunk 0 scraped and read, then the writer unregisters and
   * its id comes back for a new writer, whose chunk 0 is new. */
  c0 = chunk_whole(0, 2, 20, 1, 50);
  assert_int_equal(scrape(tb, &kP1, c0), 0);
  expect_packet(tb, 2, 20, 50, true);
  free(c0);
  tg_trace_buffer_writer_gone(tb, kP1.producer_id, 2);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 2, 30, 1, 50)), 0);
  expect_packet(tb, 2, 30, 50, true);
  expect_nothing(tb);
  tg_trace_buffer_free(tb);
}

static void scraped_chunk_overwritten_then_recommitted_is_not_repeated(
    void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 0, 3, 100);
  chunk_pad(c, 1000);
  assert_int_equal(commit(tb, &kP1, c, false), 0);
  expect_packet(tb, 1, 0, 100, true);
  expect_packet(tb, 1, 1, 100, false);
  for (uint32_t i = 0; i < 3; i++) /* writer 2 overwrites it */
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 2, 20 + i)), 0);
  assert_int_equal(stats(tb)->chunks_overwritten, 1);
  for (uint32_t i = 0; i < 3; i++) expect_packet(tb, 2, 20 + i, BIG, i == 0);
  assert_int_equal(commit_free(tb, &kP1, c), 0); /* the complete copy */
  expect_packet(tb, 1, 2, 100, true); /* not packets 0 and 1 again */
  expect_nothing(tb);
  tg_trace_buffer_free(tb);
}

static void drop_marker_counts_trace_writer_packet_loss(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pb[100];
  payload(pb, sizeof(pb), 2);
  /* B starts in chunk 0; the writer lost the rest and says so in chunk 1. */
  chunk_t *a = chunk_whole(0, 1, 1, 1, 10);
  chunk_frag(a, pb, 40);
  chunk_flags(a, LAST);
  chunk_t *b = chunk_new(1, 1);
  chunk_drop_marker(b);
  chunk_flags(b, FIRST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  assert_int_equal(commit_free(tb, &kP1, b), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(2, 1, 3, 1, 10)), 0);
  /* A drop marker after a whole packet: the writer backfilled the header
   * of a packet it could not finish. */
  chunk_t *c = chunk_whole(3, 1, 4, 1, 10);
  chunk_drop_marker(c);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(4, 1, 5, 1, 10)), 0);

  expect_packet(tb, 1, 1, 10, true);
  expect_packet(tb, 1, 3, 10, true);
  expect_packet(tb, 1, 4, 10, false);
  expect_packet(tb, 1, 5, 10, true);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 2);
  assert_int_equal(stats(tb)->abi_violations, 0);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

static void malformed_chunk_keeps_leading_fragments(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 1, 2, 30);
  uint8_t junk[16] = {0};
  chunk_frag_sized(c, 5000, junk, sizeof(junk)); /* runs off the end */
  chunk_flags(c, LAST); /* ignored: the chunk is truncated */
  assert_int_equal(commit_free(tb, &kP1, c), TG_EABI_VIOLATION);
  assert_int_equal(stats(tb)->abi_violations, 1);
  /* Chunk 1 continues the lost fragment: dropped as an orphan. */
  chunk_t *d = chunk_new(1, 1);
  chunk_frag(d, junk, 8);
  uint8_t p[20];
  payload(p, sizeof(p), 3);
  chunk_frag(d, p, sizeof(p));
  chunk_flags(d, FIRST);
  assert_int_equal(commit_free(tb, &kP1, d), 0);

  expect_packet(tb, 1, 1, 30, true);
  expect_packet(tb, 1, 2, 30, false);
  expect_packet(tb, 1, 3, 20, true);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->abi_violations, 1);
  assert_int_equal(stats(tb)->chunks_read, 2);

  /* Shorter than a header; unknown flags keep their fragments. */
  uint8_t tiny[5] = {1, 0, 0, 0, 1};
  assert_int_equal(tg_trace_buffer_copy_chunk(tb, &kP1, tiny, 5, true),
                   TG_EABI_VIOLATION);
  c = chunk_whole(0, 4, 7, 1, 12);
  chunk_flags(c, 0x20);
  assert_int_equal(commit_free(tb, &kP1, c), TG_EABI_VIOLATION);
  assert_int_equal(stats(tb)->abi_violations, 3);
  expect_packet(tb, 4, 7, 12, true);
  tg_trace_buffer_free(tb);
}

static void writer_id_zero_is_rejected(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 0, 1, 2, 10)),
                   TG_EABI_VIOLATION);
  assert_int_equal(stats(tb)->abi_violations, 1);
  assert_int_equal(stats(tb)->chunks_written, 0);
  assert_int_equal(stats(tb)->bytes_written, 0);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  expect_nothing(tb);
  tg_trace_buffer_free(tb);
}

/* Writer ids are 15 bits (Perfetto's kMaxWriterID): 32767 is the last. */
static void writer_ids_above_32767_are_rejected(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 32768, 1, 2, 10)),
                   TG_EABI_VIOLATION);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 65535, 1, 2, 10)),
                   TG_EABI_VIOLATION);
  assert_int_equal(stats(tb)->abi_violations, 2);
  assert_int_equal(stats(tb)->chunks_written, 0);
  expect_nothing(tb);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 32767, 3, 1, 10)), 0);
  expect_packet(tb, 32767, 3, 10, true);
  tg_trace_buffer_free(tb);
}

static void chunk_id_wraparound_keeps_order(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  const uint32_t ids[4] = {0xFFFFFFFEu, 0xFFFFFFFFu, 0, 1};
  for (int i = 0; i < 4; i++)
    assert_int_equal(commit_free(tb, &kP1, chunk_whole(ids[i], 1, i, 1, 8)),
                     0);
  /* Writer 2: the same ids committed out of order in one batch, with a
   * packet fragmented across the wrap. */
  uint8_t pw[40];
  payload(pw, sizeof(pw), 11);
  chunk_t *c1 = chunk_new(0xFFFFFFFFu, 2);
  chunk_frag(c1, pw, 25);
  chunk_flags(c1, LAST);
  chunk_t *c2 = chunk_new(0, 2);
  chunk_frag(c2, pw + 25, 15);
  chunk_flags(c2, FIRST);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(1, 2, 13, 1, 8)), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0xFFFFFFFEu, 2, 10, 1, 8)),
                   0);
  assert_int_equal(commit_free(tb, &kP1, c2), 0);
  assert_int_equal(commit_free(tb, &kP1, c1), 0);
  assert_int_equal(stats(tb)->chunks_committed_out_of_order, 3);

  uint32_t next1 = 0;
  const uint32_t want2[3] = {10, 11, 13};
  const size_t len2[3] = {8, 40, 8};
  unsigned next2 = 0;
  for (int n = 0; n < 7; n++) {
    assert_int_equal(read_one(tb), 1);
    /* Only each sequence's first packet is flagged. */
    assert_int_equal(g_got.dropped, g_got.writer == 1 ? next1 == 0 : next2 == 0);
    uint8_t want[64];
    if (g_got.writer == 1) {
      payload(want, 8, next1);
      assert_int_equal(g_got.len, 8);
      next1++;
    } else {
      assert_true(next2 < 3);
      payload(want, len2[next2], want2[next2]);
      assert_int_equal(g_got.len, len2[next2]);
      next2++;
    }
    assert_memory_equal(g_got.data, want, g_got.len);
  }
  assert_int_equal(next1, 4);
  assert_int_equal(next2, 3);
  expect_nothing(tb);
  tg_trace_buffer_free(tb);
}

static void gap_between_chunks_is_skipped_not_waited_for(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pb[60];
  payload(pb, sizeof(pb), 2);
  chunk_t *a = chunk_whole(0, 1, 1, 1, 10);
  chunk_frag(a, pb, 30);
  chunk_flags(a, LAST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  expect_packet(tb, 1, 1, 10, true);
  expect_nothing(tb); /* chunk 1 may still come: wait */
  /* Chunk 2 arrives without chunk 1: the packet can never complete. */
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(2, 1, 3, 1, 10)), 0);
  expect_packet(tb, 1, 3, 10, true);
  expect_nothing(tb);

  /* Chunk 4 waits for patches; chunk 1 turning up now is discarded (the
   * reader is past it) rather than read out of order. */
  chunk_t *c = chunk_whole(4, 1, 5, 1, 10);
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(1, 1, 9, 1, 10)),
                   TG_ENO_SPACE);
  assert_int_equal(stats(tb)->chunks_discarded, 1);
  /* Chunk 3, late but not passed yet, goes before the stalled chunk 4. */
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(3, 1, 4, 1, 10)), 0);
  expect_packet(tb, 1, 4, 10, false);
  expect_nothing(tb);
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 4, NULL, NULL, 0, false), 0);
  expect_packet(tb, 1, 5, 10, false);

  /* A recycled writer id restarts at chunk 0 once the sequence is empty. */
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(0, 1, 6, 1, 10)), 0);
  expect_packet(tb, 1, 6, 10, true);
  tg_trace_buffer_free(tb);
}

static void producer_gone_unblocks_stalled_sequences(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t pb[60];
  payload(pb, sizeof(pb), 2);
  /* Writer 1: B waits for chunk 1, which will never come. */
  chunk_t *a = chunk_whole(0, 1, 1, 1, 10);
  chunk_frag(a, pb, 30);
  chunk_flags(a, LAST);
  assert_int_equal(commit_free(tb, &kP1, a), 0);
  /* Writer 2: scraped, D half-written. */
  chunk_t *c = chunk_whole(0, 2, 3, 1, 10);
  chunk_frag_sized(c, 0, pb, 10);
  assert_int_equal(commit(tb, &kP1, c, false), 0);
  free(c);
  /* Writer 3: E continues into chunk 1 but chunk 0 waits for patches. */
  c = chunk_whole(0, 3, 5, 1, 10);
  chunk_frag(c, pb, 30);
  chunk_flags(c, LAST | PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  c = chunk_new(1, 3);
  chunk_frag(c, pb + 30, 30);
  uint8_t pf[10];
  payload(pf, sizeof(pf), 7);
  chunk_frag(c, pf, sizeof(pf));
  chunk_flags(c, FIRST);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  /* Another producer is not affected. */
  assert_int_equal(commit_free(tb, &kP2, chunk_whole(0, 1, 8, 1, 10)), 0);

  unsigned n = 0;
  while (read_one(tb)) n++;
  assert_int_equal(n, 3); /* 1, 3 and 8 */
  assert_true(tg_trace_buffer_used(tb) > 0);

  tg_trace_buffer_producer_gone(tb, 1);
  /* Writer 3's chunk 0 never got its patch: dropped whole, E with it. */
  expect_packet(tb, 3, 7, 10, true);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 2); /* B, D */
  assert_int_equal(stats(tb)->chunks_discarded, 1);         /* chunk 0 */
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

/* A chunk still flagged as needing patches when its producer goes is not
 * read as it is, not even its whole packets: any of its bytes may be one
 * the patch was meant for. It is counted as discarded, not as read, once. */
static void unpatched_chunk_of_departed_producer_is_dropped(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 1, 3, 20);
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(1, 1, 4, 1, 20)), 0);
  assert_int_equal(commit_free(tb, &kP2, chunk_whole(0, 1, 9, 1, 20)), 0);
  expect_packet(tb, 1, 9, 20, true); /* only the other producer flows */
  expect_nothing(tb);

  tg_trace_buffer_producer_gone(tb, 1);
  tg_trace_buffer_producer_gone(tb, 1); /* twice changes nothing */
  expect_packet(tb, 1, 4, 20, true); /* the next chunk, flagged */
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_discarded, 1);
  assert_int_equal(stats(tb)->chunks_read, 2);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 0);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

/* A patched chunk is read normally after its producer left. */
static void patched_chunk_of_departed_producer_is_read(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 1, 2, 20);
  chunk_flags(c, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 1, 0, NULL, NULL, 0, false), 0);
  tg_trace_buffer_producer_gone(tb, 1);
  expect_packet(tb, 1, 1, 20, true);
  expect_packet(tb, 1, 2, 20, false);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->chunks_discarded, 0);
  tg_trace_buffer_free(tb);
}

/* A packet spans as many chunks as it needs (here 300 one-fragment
 * chunks): the slice table grows, nothing is lost. */
static void packet_of_many_fragments_is_reassembled(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(256 * 1024, TG_FILL_RING_BUFFER);
  enum { FRAG = 10, FRAGS = 300 };
  static uint8_t p[FRAG * FRAGS];
  payload(p, sizeof(p), 1);
  for (unsigned i = 0; i < FRAGS; i++) {
    chunk_t *c = chunk_new(i, 1);
    chunk_frag(c, p + i * FRAG, FRAG);
    unsigned flags = (i ? FIRST : 0) | (i + 1 < FRAGS ? LAST : 0);
    if (i + 1 == FRAGS) {
      uint8_t z[10];
      payload(z, sizeof(z), 101);
      chunk_frag(c, z, sizeof(z));
    }
    chunk_flags(c, flags);
    assert_int_equal(commit_free(tb, &kP1, c), 0);
  }
  expect_packet(tb, 1, 1, sizeof(p), true);
  assert_int_equal(g_got.slices, FRAGS);
  expect_packet(tb, 1, 101, 10, false);
  expect_nothing(tb);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 0);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  tg_trace_buffer_free(tb);
}

/* --- random stress -------------------------------------------------------- */

typedef struct prng {
  uint64_t s;
} prng_t;

static uint32_t rnd(prng_t *r, uint32_t n) { /* [0, n) */
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return (uint32_t)((r->s >> 16) % n);
}

enum { STRESS_SEQS = 4, PKT_HDR = 8 };

/* Packet |num| of sequence |seq|: [u32 num][u32 seq][bytes]. */
static size_t stress_packet(uint8_t *p, unsigned seq, uint32_t num) {
  uint32_t h = (num * 2654435761u) ^ (seq * 40503u);
  size_t n = PKT_HDR + (h >> 7) % 2200;
  put_le32(p, num);
  put_le32(p + 4, seq);
  payload(p + PKT_HDR, n - PKT_HDR, h);
  return n;
}

typedef struct writer {
  const tg_producer_ident_t *producer;
  uint16_t writer_id;
  uint32_t next_chunk;
  uint32_t next_pkt; /* the next packet to start */
  uint8_t cur[4096]; /* the packet being written */
  size_t cur_len, cur_off;
  bool in_packet;
} writer_t;

/* Fills one chunk of |size| like a trace writer: packets back to back,
 * fragmenting the last one into the next chunk. When |scrape| is set,
 * also produces the copy a flush would have scraped half-way. */
static void writer_fill(writer_t *w, unsigned seq, size_t size, prng_t *r,
                        chunk_t *c, chunk_t *scraped, bool *has_scraped) {
  memset(c, 0, sizeof(*c));
  put_le32(c->b, w->next_chunk++);
  c->b[4] = (uint8_t)w->writer_id;
  c->b[5] = (uint8_t)(w->writer_id >> 8);
  c->len = TG_SMB_CHUNK_HEADER_SIZE;
  unsigned flags = w->in_packet ? FIRST : 0;
  unsigned scrape_at = rnd(r, 8) == 0 ? 1 + rnd(r, 4) : 0;
  *has_scraped = false;
  for (;;) {
    if (size - c->len < 4 + 1) break;
    if (!w->in_packet) {
      w->cur_len = stress_packet(w->cur, seq, w->next_pkt++);
      w->cur_off = 0;
      w->in_packet = true;
    }
    if (scrape_at && c->count + 1 == scrape_at) {
      /* The writer has started this fragment: the size is still 0. */
      *scraped = *c;
      chunk_frag_sized(scraped, 0, w->cur + w->cur_off, 0);
      chunk_flags(scraped, flags);
      scraped->len = size;
      *has_scraped = true;
    }
    size_t room = size - c->len - 4;
    size_t n = w->cur_len - w->cur_off;
    if (n > room) n = room;
    chunk_frag(c, w->cur + w->cur_off, n);
    w->cur_off += n;
    if (w->cur_off < w->cur_len) {
      flags |= LAST;
      break;
    }
    w->in_packet = false;
    if (rnd(r, 6) == 0) break; /* a flush commits a part-filled chunk */
  }
  chunk_flags(c, flags);
  c->len = size;
}

typedef struct stress {
  tg_trace_buffer_t *tb;
  writer_t w[STRESS_SEQS];
  int64_t last[STRESS_SEQS]; /* last packet number read */
  uint64_t packets, flagged;
} stress_t;

/* Reads one packet, if any, and checks it against what its writer wrote:
 * in order, intact, and flagged exactly when packets were skipped or it is
 * its sequence's first. */
static void stress_read(stress_t *t) {
  if (!read_one(t->tb)) return;
  assert_true(g_got.len >= PKT_HDR);
  uint32_t num = (uint32_t)(g_got.data[0] | g_got.data[1] << 8 |
                            g_got.data[2] << 16 |
                            (uint32_t)g_got.data[3] << 24);
  unsigned sq = g_got.data[4];
  assert_true(sq < STRESS_SEQS);
  assert_int_equal(g_got.writer, t->w[sq].writer_id);
  assert_int_equal(g_got.producer.producer_id,
                   t->w[sq].producer->producer_id);
  assert_true((int64_t)num > t->last[sq]);
  static uint8_t want[4096];
  size_t n = stress_packet(want, sq, num);
  assert_int_equal(g_got.len, n);
  assert_memory_equal(g_got.data, want, n);
  /* A sequence's first packet is flagged too (Perfetto's rule); only the
   * others count as losses seen. */
  bool first = t->last[sq] < 0;
  assert_int_equal(g_got.dropped, first || (int64_t)num != t->last[sq] + 1);
  t->flagged += g_got.dropped && !first;
  t->last[sq] = num;
  t->packets++;
}

static void stress_run(uint64_t seed, tg_fill_policy_t policy) {
  static const size_t kSizes[] = {292, 584, 1020, 2044, 4088};
  prng_t r = {seed};
  static stress_t ctx;
  memset(&ctx, 0, sizeof(ctx));
  tg_trace_buffer_t *tb = ctx.tb = tg_trace_buffer_new(24 * 1024, policy);
  writer_t *w = ctx.w;
  for (unsigned i = 0; i < STRESS_SEQS; i++) {
    w[i].producer = i % 2 ? &kP2 : &kP1;
    w[i].writer_id = (uint16_t)(1 + i / 2);
    w[i].next_chunk = i == 0 ? 0xFFFFFF00u : rnd(&r, 1000);
    ctx.last[i] = -1;
  }
  static chunk_t c, scraped;

  for (unsigned step = 0; step < 6000; step++) {
    unsigned sq = rnd(&r, STRESS_SEQS);
    bool has_scraped;
    writer_fill(&w[sq], sq, kSizes[rnd(&r, 5)], &r, &c, &scraped,
                &has_scraped);
    if (has_scraped) {
      int rv = commit(tb, w[sq].producer, &scraped, false);
      assert_true(rv == 0 || rv == TG_ENO_SPACE);
      for (unsigned k = rnd(&r, 4); k > 0; k--) stress_read(&ctx);
    }
    int rv = commit(tb, w[sq].producer, &c, true);
    assert_true(rv == 0 || rv == TG_ENO_SPACE);
    for (unsigned k = rnd(&r, 12); k > 0; k--) stress_read(&ctx);
  }
  /* Finish the packets in flight, then drain. */
  for (unsigned sq = 0; sq < STRESS_SEQS; sq++) {
    while (w[sq].in_packet) {
      bool has_scraped;
      writer_fill(&w[sq], sq, 4088, &r, &c, &scraped, &has_scraped);
      commit(tb, w[sq].producer, &c, true);
      for (int k = 0; k < 64; k++) stress_read(&ctx);
    }
  }
  tg_trace_buffer_producer_gone(tb, 1);
  tg_trace_buffer_producer_gone(tb, 2);
  for (;;) {
    uint64_t before = ctx.packets;
    stress_read(&ctx);
    if (ctx.packets == before) break;
  }
  const tg_trace_buffer_stats_t *st = stats(tb);
  assert_int_equal(tg_trace_buffer_used(tb), 0);
  assert_int_equal(st->chunks_written,
                   st->chunks_read + st->chunks_overwritten);
  assert_int_equal(st->abi_violations, 0);
  assert_true(ctx.packets > 1000);
  if (policy == TG_FILL_RING_BUFFER) {
    assert_true(st->chunks_overwritten > 0);
    assert_int_equal(st->chunks_discarded, 0);
  } else {
    assert_true(st->chunks_discarded > 0);
    assert_int_equal(st->chunks_overwritten, 0);
  }
  assert_true(ctx.flagged > 0);
  assert_true(st->chunks_rewritten > 0);
  tg_trace_buffer_free(tb);
}

/* Reads |tb| dry: writer 1 must give payload(tags[i]) of 100 bytes in
 * order, exactly |n| of them; writer 2 packets of 30 bytes are counted. */
static void drain_by_writer(tg_trace_buffer_t *tb, const uint32_t *tags,
                            unsigned n, unsigned *w1, unsigned *w2) {
  *w1 = *w2 = 0;
  while (read_one(tb)) {
    if (g_got.writer == 2) {
      assert_int_equal(g_got.len, 30);
      (*w2)++;
      continue;
    }
    assert_int_equal(g_got.writer, 1);
    assert_true(*w1 < n);
    uint8_t want[BIG];
    payload(want, BIG, tags[*w1]);
    assert_int_equal(g_got.len, BIG);
    assert_memory_equal(g_got.data, want, BIG);
    (*w1)++;
  }
  assert_int_equal(*w1, n);
}

/* A clone holds what was unread at the time, reads out on its own, and
 * leaves the original untouched: producers keep writing into it. */
static void clone_is_a_snapshot_and_the_original_goes_on(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(4096, TG_FILL_RING_BUFFER);
  for (uint32_t i = 0; i < 5; i++) /* wraps: chunks 0 and 1 are overwritten */
    assert_int_equal(commit_free(tb, &kP1, big_chunk(i, 1, i)), 0);
  expect_packet(tb, 1, 2, BIG, true); /* read before the clone */
  /* A packet of writer 2 that continues in a chunk not committed yet. */
  chunk_t *c = chunk_whole(0, 2, 50, 1, 30);
  uint8_t half[20];
  payload(half, sizeof(half), 51);
  chunk_frag(c, half, sizeof(half));
  chunk_flags(c, LAST);
  assert_int_equal(commit_free(tb, &kP2, c), 0);

  tg_trace_buffer_t *cl = tg_trace_buffer_clone(tb);
  assert_non_null(cl);
  assert_int_equal(tg_trace_buffer_size(cl), 4096);
  assert_int_equal(stats(cl)->chunks_overwritten, 2);

  /* The original goes on: a new chunk lands in it, not in the clone. */
  assert_int_equal(commit_free(tb, &kP1, big_chunk(5, 1, 5)), 0);

  /* The clone: the unread packets. Writer 2's unfinished packet was in
   * flight: the snapshot ends before it, and nothing is lost (the
   * original still has it). */
  unsigned w1 = 0, w2 = 0;
  const uint32_t clone_tags[] = {3, 4};
  drain_by_writer(cl, clone_tags, 2, &w1, &w2);
  assert_int_equal(w2, 1);
  assert_int_equal(stats(cl)->trace_writer_packet_loss, 0);
  tg_trace_buffer_free(cl);

  /* The original still has everything unread, plus the new chunk, and its
   * writer 2 still waits for the rest of its packet (nothing lost). */
  const uint32_t all_tags[] = {3, 4, 5};
  drain_by_writer(tb, all_tags, 3, &w1, &w2);
  assert_int_equal(w2, 1);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 0);
  assert_int_equal(stats(tb)->chunks_written, 7);
  tg_trace_buffer_free(tb);
}

/* What a clone finds of each writer that is between two commits: the
 * service scraped its chunk while it was writing a packet (last fragment
 * open, as an agent leaves it between packets too), or a packet goes on in
 * a chunk not committed yet, or a chunk waits for its patches. None of it
 * is lost: the snapshot ends there (as Perfetto's CloneReadOnly), counts
 * nothing, and the original reads it all once the writer is done. */
static void clone_of_writers_in_flight_counts_no_loss(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  uint8_t p[3][50];
  for (int i = 0; i < 3; i++) payload(p[i], 50, (uint32_t)i);
  /* Writer 1: chunk 0 scraped with A done and B being written. */
  chunk_t *c1 = chunk_new(0, 1);
  chunk_frag(c1, p[0], 50);
  chunk_frag_sized(c1, 0, p[1], 20);
  chunk_pad(c1, 292);
  assert_int_equal(commit(tb, &kP1, c1, false), 0);
  /* Writer 2: one whole packet, then one going on in chunk 1. */
  chunk_t *c2 = chunk_whole(0, 2, 20, 1, 30);
  chunk_frag(c2, p[2], 25);
  chunk_flags(c2, LAST);
  assert_int_equal(commit(tb, &kP1, c2, true), 0);
  /* Writer 3: a chunk still waiting for a patch. */
  chunk_t *c3 = chunk_whole(0, 3, 30, 2, 40);
  chunk_flags(c3, PATCH);
  assert_int_equal(commit_free(tb, &kP1, c3), 0);

  tg_trace_buffer_t *cl = tg_trace_buffer_clone(tb);
  assert_non_null(cl);
  unsigned n = 0;
  while (read_one(cl)) {
    n++;
    assert_int_equal(g_got.dropped, true); /* each writer's first */
    assert_true(g_got.writer == 1 || g_got.writer == 2);
  }
  assert_int_equal(n, 2); /* A of writer 1, tag 20 of writer 2 */
  /* The producer leaving now changes nothing in the snapshot. */
  tg_trace_buffer_producer_gone(cl, kP1.producer_id);
  expect_nothing(cl);
  const tg_trace_buffer_stats_t *st = stats(cl);
  assert_int_equal(st->trace_writer_packet_loss, 0);
  assert_int_equal(st->chunks_discarded, 0);
  assert_int_equal(st->chunks_overwritten, 0);
  assert_int_equal(st->abi_violations, 0);
  tg_trace_buffer_free(cl);

  /* The original: the writers finish, everything reads out once. */
  c1->len = TG_SMB_CHUNK_HEADER_SIZE;
  c1->count = 0;
  chunk_frag(c1, p[0], 50);
  chunk_frag(c1, p[1], 50);
  chunk_pad(c1, 292);
  assert_int_equal(commit_free(tb, &kP1, c1), 0);
  chunk_t *c2b = chunk_new(1, 2);
  chunk_frag(c2b, p[2] + 25, 25);
  chunk_flags(c2b, FIRST);
  assert_int_equal(commit_free(tb, &kP1, c2b), 0);
  uint32_t offsets[1] = {0};
  const uint8_t data[1][4] = {{0x80 | 40, 0x80, 0x80, 0}};
  assert_int_equal(tg_trace_buffer_patch(tb, 1, 3, 0, offsets, data, 1, false), 0);
  unsigned got[4] = {0};
  while (read_one(tb)) got[g_got.writer]++;
  assert_int_equal(got[1], 2);
  assert_int_equal(got[2], 2);
  assert_int_equal(got[3], 2);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 0);
  free(c2);
  tg_trace_buffer_free(tb);
}

/* A real loss still shows in a clone: a writer that dropped packets says
 * so with a drop marker, counted whether the original or the clone reads
 * it first. */
static void clone_still_counts_a_writers_real_loss(void **state) {
  (void)state;
  tg_trace_buffer_t *tb = tg_trace_buffer_new(65536, TG_FILL_RING_BUFFER);
  chunk_t *c = chunk_whole(0, 1, 0, 2, 40);
  chunk_drop_marker(c);
  assert_int_equal(commit_free(tb, &kP1, c), 0);
  assert_int_equal(commit_free(tb, &kP1, chunk_whole(1, 1, 2, 1, 40)), 0);
  tg_trace_buffer_t *cl = tg_trace_buffer_clone(tb);
  assert_non_null(cl);
  expect_packet(cl, 1, 0, 40, true);
  expect_packet(cl, 1, 1, 40, false);
  expect_packet(cl, 1, 2, 40, true); /* after the dropped one */
  expect_nothing(cl);
  assert_int_equal(stats(cl)->trace_writer_packet_loss, 1);
  tg_trace_buffer_free(cl);
  assert_int_equal(stats(tb)->trace_writer_packet_loss, 1);
  tg_trace_buffer_free(tb);
}

static void random_stress_matches_writers(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 4; seed++) {
    stress_run(seed * 0x9E3779B97F4A7C15ull, TG_FILL_RING_BUFFER);
    stress_run(seed * 0xD1B54A32D192ED03ull, TG_FILL_DISCARD);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(new_rejects_bad_sizes_and_policies),
      cmocka_unit_test(single_packets_read_in_order),
      cmocka_unit_test(many_sequences_interleave_and_keep_their_order),
      cmocka_unit_test(sequences_of_departed_producers_are_forgotten),
      cmocka_unit_test(fragmented_packet_across_three_chunks_is_reassembled),
      cmocka_unit_test(
          fragment_waiting_for_next_chunk_stalls_only_its_sequence),
      cmocka_unit_test(needs_patching_stalls_until_final_patch),
      cmocka_unit_test(patch_on_a_size_header_is_analysed_again),
      cmocka_unit_test(patch_failures_are_counted_and_touch_nothing),
      cmocka_unit_test(ring_wrap_counts_overwrites_and_flags_next_packet),
      cmocka_unit_test(overwrite_of_partly_read_chunk_is_a_loss),
      cmocka_unit_test(discard_refuses_when_full_and_reuses_read_space),
      cmocka_unit_test(discarded_continuation_drops_the_waiting_packet),
      cmocka_unit_test(discarded_first_chunk_flags_first_packet),
      cmocka_unit_test(part_full_chunks_take_the_bytes_they_hold),
      cmocka_unit_test(trimmed_records_read_as_whole_chunks),
      cmocka_unit_test(chunk_larger_than_buffer_is_discarded),
      cmocka_unit_test(recommit_of_scraped_chunk_returns_each_packet_once),
      cmocka_unit_test(
          scraped_complete_chunk_read_then_committed_is_not_lost_or_repeated),
      cmocka_unit_test(
          scraped_chunk_overwritten_then_recommitted_is_not_repeated),
      cmocka_unit_test(drop_marker_counts_trace_writer_packet_loss),
      cmocka_unit_test(malformed_chunk_keeps_leading_fragments),
      cmocka_unit_test(writer_id_zero_is_rejected),
      cmocka_unit_test(writer_ids_above_32767_are_rejected),
      cmocka_unit_test(chunk_id_wraparound_keeps_order),
      cmocka_unit_test(gap_between_chunks_is_skipped_not_waited_for),
      cmocka_unit_test(producer_gone_unblocks_stalled_sequences),
      cmocka_unit_test(unpatched_chunk_of_departed_producer_is_dropped),
      cmocka_unit_test(patched_chunk_of_departed_producer_is_read),
      cmocka_unit_test(packet_of_many_fragments_is_reassembled),
      cmocka_unit_test(clone_is_a_snapshot_and_the_original_goes_on),
      cmocka_unit_test(clone_of_writers_in_flight_counts_no_loss),
      cmocka_unit_test(clone_still_counts_a_writers_real_loss),
      cmocka_unit_test(random_stress_matches_writers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
