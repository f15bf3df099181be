/* Trace writer and SMB arbiter (agent/trace_writer.h, agent/smb_arbiter.h),
 * checked end to end against the service's central trace buffer.
 *
 * Each test writes packets with the real writer into a malloc'ed SMB, takes
 * CommitData from the arbiter, and lets a simulated service (fake_service.h)
 * move the chunks into a real tg_trace_buffer and apply the patches; the
 * packets read back must be byte-identical to the same packets serialized
 * contiguously by the zero-copy writer.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "agent/smb_arbiter.h"
#include "agent/trace_writer.h"
#include "pb/common/commit_data_request.pb-c.h"
#include "fake_service.h"
#include "tracegate/error.h"

#define PAGE 4096u
#define TB_SIZE (16u * 1024u * 1024u)
#define MAX_PACKET (6u * 1024u * 1024u)

/* --- packets -------------------------------------------------------------- */

/* A test packet: seq (field 1), a bytes filler (field 2), then |depth|
 * nested messages (fields 3, 4, ...) inside each other, level d holding
 * its index (field 1) and |inner[d]| pattern bytes (field 2). */
typedef struct spec {
  uint32_t seq;
  size_t filler;
  unsigned depth;
  size_t inner[4];
} spec_t;

static uint8_t *g_tmp; /* pattern scratch, MAX_PACKET bytes */

static void fill_pattern(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

static void write_spec(tg_pbw_t *pw, const spec_t *s) {
  tg_pbw_append_varint(pw, 1, s->seq);
  fill_pattern(g_tmp, s->filler, s->seq);
  tg_pbw_append_bytes(pw, 2, g_tmp, s->filler);
  for (unsigned d = 0; d < s->depth; d++) {
    tg_pbw_begin_nested(pw, 3 + d);
    tg_pbw_append_varint(pw, 1, d);
    if (s->inner[d]) {
      fill_pattern(g_tmp, s->inner[d], s->seq + d + 1);
      tg_pbw_append_bytes(pw, 2, g_tmp, s->inner[d]);
    }
  }
  for (unsigned d = 0; d < s->depth; d++) tg_pbw_end_nested(pw);
}

/* The packet serialized contiguously: what the service must hand back. */
static size_t expect_spec(const spec_t *s, uint8_t *out, size_t cap) {
  tg_pbw_t pw;
  tg_pbw_init(&pw, out, cap, NULL, NULL);
  write_spec(&pw, s);
  assert_int_equal(tg_pbw_error(&pw), 0);
  return (size_t)tg_pbw_written(&pw);
}

static void write_packet(tg_trace_writer_t *w, const spec_t *s) {
  tg_pbw_t *pw = tg_trace_writer_begin_packet(w);
  write_spec(pw, s);
  tg_trace_writer_end_packet(w);
}

/* --- environment ---------------------------------------------------------- */

typedef struct env {
  tg_arbiter_t *arb;
  fake_service_t fs;
  tg_trace_writer_t w;
  _Atomic unsigned wakes;
  sem_t wake_sem;
  uint8_t *expect;
  tg_buf_t got;
} env_t;

static void smb_free(void *base, size_t size) {
  (void)size;
  free(base);
}

static void on_wake(void *ctx) {
  env_t *e = ctx;
  atomic_fetch_add_explicit(&e->wakes, 1, memory_order_relaxed);
  sem_post(&e->wake_sem);
}

/* Arbiters made from now on patch in place (tg_arbiter_opts_t). */
static bool g_direct;

/* The arbiters' clock (opts.now_ns): it moves only when a test moves it,
 * so the drop backoff's time limit never ends a step behind a test's
 * back, however slowly it runs. */
static uint64_t g_test_now_ns = 1000000000u;
static uint64_t test_now_ns(void) { return g_test_now_ns; }

static tg_arbiter_t *new_arbiter(size_t pages, unsigned layout, bool stall,
                                 void *wake_ctx) {
  size_t size = pages * PAGE;
  void *mem = aligned_alloc(PAGE, size);
  assert_non_null(mem);
  memset(mem, 0, size);
  tg_arbiter_opts_t o = {.smb_base = mem,
                         .smb_size = size,
                         .page_size = PAGE,
                         .free_fn = smb_free,
                         .stall_when_full = stall,
                         .direct_patching = g_direct,
                         .layout = layout,
                         .wake = wake_ctx ? on_wake : NULL,
                         .wake_ctx = wake_ctx,
                         .now_ns = test_now_ns};
  tg_arbiter_t *arb = NULL;
  assert_int_equal(tg_arbiter_new(&o, &arb), 0);
  return arb;
}

static void env_init(env_t *e, size_t pages, unsigned layout, bool stall,
                     size_t tb_size, bool keep_raw) {
  memset(e, 0, sizeof(*e));
  sem_init(&e->wake_sem, 0, 0);
  e->arb = new_arbiter(pages, layout, stall, e);
  fake_service_init(&e->fs, e->arb, tb_size, keep_raw);
  assert_true(!tb_size || e->fs.tb);
  assert_int_equal(tg_trace_writer_init(&e->w, e->arb, 1), 0);
  e->expect = malloc(MAX_PACKET);
  assert_non_null(e->expect);
  tg_buf_init(&e->got, 0);
}

static void env_fini(env_t *e) {
  tg_trace_writer_fini(&e->w);
  fake_service_free(&e->fs);
  tg_arbiter_unref(e->arb);
  free(e->expect);
  tg_buf_free(&e->got);
  sem_destroy(&e->wake_sem);
}

/* Reads every packet the trace buffer has and checks it against the next
 * expected seq. Returns how many were read. */
static unsigned read_and_check(env_t *e, uint32_t *next_seq,
                               spec_t (*spec_of)(uint32_t seq)) {
  unsigned n = 0;
  bool dropped;
  uint16_t wid;
  while (fake_service_read(&e->fs, &e->got, &dropped, &wid)) {
    spec_t s = spec_of(*next_seq);
    size_t len = expect_spec(&s, e->expect, MAX_PACKET);
    if (tg_buf_size(&e->got) != len ||
        memcmp(tg_buf_begin(&e->got), e->expect, len) != 0)
      fail_msg("packet %u differs: got %zu bytes, want %zu", *next_seq,
               tg_buf_size(&e->got), len);
    /* The service flags a sequence's first packet, as Perfetto's does
     * (what came before it is unknown to the reader); no other. */
    assert_int_equal(dropped, *next_seq == 0);
    assert_int_equal(wid, e->w.writer_id);
    (*next_seq)++;
    n++;
  }
  return n;
}

static void assert_service_clean(const env_t *e) {
  assert_int_equal(e->fs.errors, 0);
  if (!e->fs.tb) return;
  const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(e->fs.tb);
  assert_int_equal(st->abi_violations, 0);
  assert_int_equal(st->patches_failed, 0);
  assert_int_equal(st->trace_writer_packet_loss, 0);
  assert_int_equal(st->chunks_overwritten, 0);
  assert_int_equal(st->chunks_discarded, 0);
}

/* --- 1. fragmentation ----------------------------------------------------- */

static spec_t sweep_spec(uint32_t seq) {
  return (spec_t){.seq = seq, .filler = seq, .depth = 1, .inner = {3}};
}

/* Filler sizes 0 .. 3 chunks, one packet each: every packet length around
 * every chunk boundary, and (one packet per chunk) every position of the
 * nested size field relative to the boundary. */
static void sweep(unsigned layout, bool packet_per_chunk) {
  env_t e;
  env_init(&e, 16, layout, false, TB_SIZE, true);
  size_t cs = tg_smb_chunk_size(PAGE, layout);
  uint32_t n = (uint32_t)(3 * cs), next = 0;
  for (uint32_t seq = 0; seq <= n; seq++) {
    spec_t s = sweep_spec(seq);
    write_packet(&e.w, &s);
    if (packet_per_chunk) tg_trace_writer_flush(&e.w);
    fake_service_drain(&e.fs);
    read_and_check(&e, &next, sweep_spec);
  }
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  read_and_check(&e, &next, sweep_spec);
  assert_int_equal(next, n + 1);
  assert_int_equal(e.w.packets_written, n + 1);
  assert_int_equal(e.w.packets_dropped, 0);
  assert_service_clean(&e);
  env_fini(&e);
}

static void fragments_reassemble_at_every_boundary(void **state) {
  (void)state;
  const unsigned layouts[] = {TG_PAGE_DIV_14, TG_PAGE_DIV_4, TG_PAGE_DIV_1};
  for (int direct = 0; direct < 2; direct++) {
    g_direct = direct;
    for (size_t i = 0; i < 3; i++) {
      sweep(layouts[i], true);
      sweep(layouts[i], false);
    }
  }
  g_direct = false;
}

/* Fragment framing to the letter: ids, counts and continuation flags. */
typedef struct collect {
  unsigned packets, dropped;
  size_t last_len;
  uint8_t *last;
} collect_t;

static void collect_cb(void *ctx, const uint8_t *data, size_t len) {
  collect_t *c = ctx;
  if (!data) {
    c->dropped++;
    return;
  }
  c->packets++;
  c->last_len = len;
  if (c->last) memcpy(c->last, data, len);
}

/* Packets the strict reassembler finds for the env's writer, its framing
 * checked to the letter on the way. */
static unsigned reassembled_packets(env_t *e) {
  collect_t c = {0};
  assert_int_equal(
      fake_service_reassemble(&e->fs, e->w.writer_id, collect_cb, &c), 0);
  return c.packets;
}

static void chunk_headers_follow_the_abi(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_14, false, 0, true);
  /* 3 packets in chunk 0; then one over 3 chunks. */
  for (uint32_t i = 0; i < 3; i++)
    write_packet(&e.w, &(spec_t){.seq = i, .filler = 10});
  write_packet(&e.w, &(spec_t){.seq = 3, .filler = 600});
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.nchunks, 3);
  const uint16_t want[3] = {
      tg_chunk_packets_pack(4, TG_CHUNK_LAST_PACKET_CONTINUES),
      tg_chunk_packets_pack(
          1, TG_CHUNK_FIRST_PACKET_CONTINUES | TG_CHUNK_LAST_PACKET_CONTINUES),
      tg_chunk_packets_pack(1, TG_CHUNK_FIRST_PACKET_CONTINUES)};
  for (uint32_t i = 0; i < 3; i++) {
    const uint8_t *c = e.fs.chunks[i].data;
    assert_int_equal(tg_pb_read_le32(c), i);
    assert_int_equal(c[4] | c[5] << 8, e.w.writer_id);
    assert_int_equal(c[6] | c[7] << 8, want[i]);
  }
  /* The first fragment: a 4-byte redundant size, then the packet. */
  const uint8_t *p = e.fs.chunks[0].data + TG_SMB_CHUNK_HEADER_SIZE;
  size_t len = expect_spec(&(spec_t){.seq = 0, .filler = 10}, e.expect, 64);
  uint8_t hdr[4];
  tg_pb_write_redundant_varint(hdr, (uint32_t)len);
  assert_memory_equal(p, hdr, 4);
  assert_memory_equal(p + 4, e.expect, len);
  assert_int_equal(reassembled_packets(&e), 4);
  env_fini(&e);
}

/* A chunk never holds more than TG_CHUNK_MAX_PACKETS fragments. */
static void packet_count_per_chunk_is_capped(void **state) {
  (void)state;
  /* 6-byte fragments: over 5000 fit in a 32 KiB chunk, but 1023 may. */
  tg_arbiter_t *arb = NULL;
  size_t size = 4 * 32768;
  void *mem = aligned_alloc(32768, size);
  assert_non_null(mem);
  memset(mem, 0, size);
  tg_arbiter_opts_t o = {.smb_base = mem,
                         .smb_size = size,
                         .page_size = 32768,
                         .free_fn = smb_free,
                         .layout = TG_PAGE_DIV_1};
  assert_int_equal(tg_arbiter_new(&o, &arb), 0);
  fake_service_t fs;
  fake_service_init(&fs, arb, TB_SIZE, true);
  tg_trace_writer_t w;
  assert_int_equal(tg_trace_writer_init(&w, arb, 1), 0);
  for (uint32_t i = 0; i < 2500; i++) {
    tg_pbw_t *pw = tg_trace_writer_begin_packet(&w);
    tg_pbw_append_varint(pw, 1, 1);
    tg_trace_writer_end_packet(&w);
  }
  tg_trace_writer_flush(&w);
  fake_service_drain(&fs);
  assert_int_equal(fs.nchunks, 3);
  unsigned total = 0;
  for (size_t i = 0; i < fs.nchunks; i++) {
    const uint8_t *c = fs.chunks[i].data;
    unsigned count = tg_chunk_packets_count((uint16_t)(c[6] | c[7] << 8));
    assert_true(count <= TG_CHUNK_MAX_PACKETS);
    total += count;
  }
  assert_int_equal(total, 2500);
  tg_buf_t got;
  tg_buf_init(&got, 0);
  unsigned n = 0;
  while (fake_service_read(&fs, &got, NULL, NULL)) n++;
  assert_int_equal(n, 2500);
  assert_int_equal(fs.errors, 0);
  tg_buf_free(&got);
  tg_trace_writer_fini(&w);
  fake_service_free(&fs);
  tg_arbiter_unref(arb);
}

/* A packet does not start in the last few bytes of a chunk. */
static void packet_does_not_start_in_a_sliver(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_14, false, 0, true);
  size_t payload = tg_smb_chunk_size(PAGE, TG_PAGE_DIV_14) - 8;
  /* One packet leaving 6 bytes in chunk 0, then a small one. */
  spec_t a = {.seq = 0, .filler = 0};
  size_t base = expect_spec(&a, e.expect, 64);
  size_t want = payload - 6 - 4; /* packet bytes */
  a.filler = want - base - 1;    /* a 2-byte length varint: 1 more */
  size_t alen = expect_spec(&a, e.expect, 1024);
  if (alen != want) a.filler -= alen - want;
  assert_int_equal(expect_spec(&a, e.expect, 1024), want);
  write_packet(&e.w, &a);
  write_packet(&e.w, &(spec_t){.seq = 1, .filler = 2});
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.nchunks, 2);
  const uint8_t *c0 = e.fs.chunks[0].data, *c1 = e.fs.chunks[1].data;
  assert_int_equal(c0[6] | c0[7] << 8, tg_chunk_packets_pack(1, 0));
  assert_int_equal(c1[6] | c1[7] << 8, tg_chunk_packets_pack(1, 0));
  env_fini(&e);
}

/* --- 2. nested messages across chunks ------------------------------------- */

/* Three size fields in chunk 0, content over 5 chunks: one patch group for
 * chunk 0 with the three offsets. */
static void nested_sizes_are_patched_in_one_group(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_14, false, TB_SIZE, true);
  spec_t s = {.seq = 7, .filler = 0, .depth = 3, .inner = {0, 0, 1200}};
  write_packet(&e.w, &s);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.nchunks, 5);
  assert_true(e.fs.chunks[0].needs_patching);
  for (size_t i = 1; i < 5; i++) assert_false(e.fs.chunks[i].needs_patching);
  assert_int_equal(e.fs.ngroups, 1);
  const fs_patch_group_t *g = &e.fs.groups[0];
  assert_int_equal(g->writer_id, e.w.writer_id);
  assert_int_equal(g->chunk_id, 0);
  assert_false(g->has_more);
  assert_int_equal(g->n, 3);
  /* [size 4][08 07][12 00][1A size][08 00][22 size][08 01][2A size] ... */
  const uint32_t offsets[3] = {9, 16, 23};
  size_t len = expect_spec(&s, e.expect, MAX_PACKET);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(g->offsets[i], offsets[i]);
    /* The payload starts with the 4-byte fragment header. */
    assert_memory_equal(g->data[i], e.expect + offsets[i] - 4, 4);
  }
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
  assert_int_equal(e.w.packets_written, 1);
  assert_service_clean(&e);
  env_fini(&e);
}

/* An env whose arbiter patches in place, small chunks. */
static void env_init_direct(env_t *e) {
  g_direct = true;
  env_init(e, 16, TG_PAGE_DIV_14, false, TB_SIZE, true);
  g_direct = false;
}

/* The service's next packet is |s|, byte for byte. */
static void assert_next_packet(env_t *e, const spec_t *s) {
  size_t len = expect_spec(s, e->expect, MAX_PACKET);
  assert_int_equal(fake_service_read(&e->fs, &e->got, NULL, NULL), 1);
  assert_int_equal(tg_buf_size(&e->got), len);
  assert_memory_equal(tg_buf_begin(&e->got), e->expect, len);
}

/* Direct patching: the same packet's three patches go into chunk 0 while
 * its move waits in the batch; it leaves Complete, its needs-patching
 * flag cleared, and no patch goes by CommitData. */
static void patches_land_in_a_chunk_whose_move_waits(void **state) {
  (void)state;
  env_t e;
  env_init_direct(&e);
  spec_t s = {.seq = 7, .filler = 0, .depth = 3, .inner = {0, 0, 1200}};
  write_packet(&e.w, &s);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.nchunks, 5);
  for (size_t i = 0; i < 5; i++) assert_false(e.fs.chunks[i].needs_patching);
  assert_int_equal(e.fs.ngroups, 0);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_int_equal(as.patches_in_place, 3);
  assert_int_equal(as.patches, 0);
  assert_next_packet(&e, &s);
  assert_int_equal(reassembled_packets(&e), 1);
  assert_service_clean(&e);
  env_fini(&e);
}

/* Direct patching, but the chunk's move leaves before the packet ends:
 * the chunk goes Complete with its flag set, and its patch follows by
 * CommitData as without direct patching. */
static void a_chunk_that_leaves_first_is_patched_by_commit(void **state) {
  (void)state;
  env_t e;
  env_init_direct(&e);
  spec_t s = {.seq = 3, .filler = 0, .depth = 1, .inner = {900}};
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  tg_pbw_append_varint(pw, 1, s.seq);
  tg_pbw_append_bytes(pw, 2, g_tmp, 0);
  tg_pbw_begin_nested(pw, 3);
  tg_pbw_append_varint(pw, 1, 0);
  fill_pattern(g_tmp, 900, s.seq + 1);
  /* Two chunks' worth of the nested message: the first chunk, holding
   * its size field, has left the writer. */
  tg_pbw_append_raw(pw, (const uint8_t[]){0x12, 0x84, 0x07}, 3); /* 2: 900 */
  tg_pbw_append_raw(pw, g_tmp, 600);
  assert_true(fake_service_commit(&e.fs, 0, NULL) > 0);
  assert_int_equal(e.fs.nchunks, 2);
  assert_true(e.fs.chunks[0].needs_patching);
  tg_pbw_append_raw(pw, g_tmp + 600, 300);
  tg_pbw_end_nested(pw);
  tg_trace_writer_end_packet(&e.w);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.ngroups, 1);
  assert_int_equal(e.fs.groups[0].chunk_id, 0);
  assert_true(e.fs.chunks[0].patched_final);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_int_equal(as.patches_in_place, 0);
  assert_int_equal(as.patches, 1);
  assert_next_packet(&e, &s);
  assert_service_clean(&e);
  env_fini(&e);
}

/* Direct patching, a patch the chunk cannot hold: it goes by CommitData
 * for the service to judge, and the chunk leaves Complete, flag set, at
 * once, so that its next patch does not land in place ahead of it. */
static void a_patch_out_of_the_chunk_sends_the_chunk_as_without(void **state) {
  (void)state;
  env_t e;
  env_init_direct(&e);
  const tg_smb_t *smb = tg_arbiter_smb(e.arb);
  tg_smb_chunk_t c;
  assert_int_equal(tg_arbiter_chunk_get(e.arb, e.w.writer_id, 1000, &c), 0);
  tg_smb_chunk_set_packets(&c, 1, TG_CHUNK_NEEDS_PATCHING);
  tg_arbiter_chunk_return(e.arb, &c, 1);
  assert_int_equal(tg_smb_bitmap_chunk_state(
                       tg_smb_page_bitmap(smb, c.page_idx), c.chunk_idx),
                   TG_CHUNK_BEING_WRITTEN);
  const uint8_t data[4] = {0x81, 0x80, 0x80, 0x00};
  tg_arbiter_patch_add(e.arb, 1, e.w.writer_id, 1000, (uint32_t)c.size, data,
                       true);
  assert_int_equal(tg_smb_bitmap_chunk_state(
                       tg_smb_page_bitmap(smb, c.page_idx), c.chunk_idx),
                   TG_CHUNK_COMPLETE);
  const tg_smb_chunk_header_t *h = (const tg_smb_chunk_header_t *)c.begin;
  assert_true(tg_chunk_packets_flags(atomic_load(&h->packets)) &
              TG_CHUNK_NEEDS_PATCHING);
  tg_arbiter_patch_add(e.arb, 1, e.w.writer_id, 1000, 0, data, false);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_int_equal(as.patches_in_place, 0);
  uint8_t zero[4] = {0};
  assert_memory_equal(c.begin + TG_SMB_CHUNK_HEADER_SIZE, zero, 4);
  env_fini(&e);
}

/* Depth 3 with each level's size field in a different chunk, 5 chunks. */
static void nested_depth3_over_five_chunks(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_14, false, TB_SIZE, true);
  spec_t s = {.seq = 9, .filler = 0, .depth = 3, .inner = {400, 400, 400}};
  write_packet(&e.w, &s);
  write_packet(&e.w, &(spec_t){.seq = 10, .filler = 5});
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.nchunks, 5);
  assert_int_equal(e.fs.ngroups, 3);
  for (size_t i = 0; i < 3; i++) {
    const fs_patch_group_t *g = &e.fs.groups[i];
    assert_int_equal(g->n, 1);
    assert_false(g->has_more);
    assert_true(g->chunk_id < 3);
    assert_true(e.fs.chunks[g->chunk_id].needs_patching);
    for (size_t k = 0; k < i; k++)
      assert_int_not_equal(e.fs.groups[k].chunk_id, g->chunk_id);
  }
  assert_false(e.fs.chunks[3].needs_patching);
  assert_false(e.fs.chunks[4].needs_patching);
  size_t len = expect_spec(&s, e.expect, MAX_PACKET);
  bool dropped = false;
  assert_int_equal(fake_service_read(&e.fs, &e.got, &dropped, NULL), 1);
  assert_true(dropped); /* the sequence's first packet */
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
  /* The small packet after it shares the last chunk. */
  len = expect_spec(&(spec_t){.seq = 10, .filler = 5}, e.expect, 64);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
  assert_int_equal(reassembled_packets(&e), 2);
  assert_service_clean(&e);
  env_fini(&e);
}

/* More boundary-crossing nested messages in one packet than patch slots:
 * closed ones are sent early, and a chunk whose other size field is still
 * open says has_more_patches. */
static void write_many_siblings(tg_pbw_t *pw, unsigned n, size_t each) {
  tg_pbw_append_varint(pw, 1, 77);
  tg_pbw_begin_nested(pw, 11);
  tg_pbw_append_varint(pw, 1, 1);
  for (unsigned i = 0; i < n; i++) {
    tg_pbw_begin_nested(pw, 2);
    fill_pattern(g_tmp, each, i);
    tg_pbw_append_bytes(pw, 1, g_tmp, each);
    tg_pbw_end_nested(pw);
  }
  tg_pbw_end_nested(pw);
}

static void patch_slots_are_recycled(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 64, TG_PAGE_DIV_14, false, 0, true);
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  write_many_siblings(pw, 40, 300);
  tg_trace_writer_end_packet(&e.w);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  tg_pbw_t ew;
  tg_pbw_init(&ew, e.expect, MAX_PACKET, NULL, NULL);
  write_many_siblings(&ew, 40, 300);
  size_t len = (size_t)tg_pbw_written(&ew);
  /* Chunk 0 holds the outer size and the first sibling's: a group with
   * more to come, then the final one. */
  bool early = false, final = false;
  for (size_t i = 0; i < e.fs.ngroups; i++) {
    const fs_patch_group_t *g = &e.fs.groups[i];
    if (g->chunk_id != 0) continue;
    if (g->has_more) {
      assert_false(final);
      early = true;
    } else {
      final = true;
    }
  }
  assert_true(early);
  assert_true(final);
  collect_t c = {.last = malloc(len)};
  assert_int_equal(
      fake_service_reassemble(&e.fs, e.w.writer_id, collect_cb, &c), 0);
  assert_int_equal(c.packets, 1);
  assert_int_equal(c.last_len, len);
  assert_memory_equal(c.last, e.expect, len);
  free(c.last);
  assert_int_equal(e.fs.errors, 0);
  env_fini(&e);
}

/* --- 3. a packet larger than the SMB -------------------------------------- */

typedef struct service_thread {
  env_t *e;
  pthread_t thread;
  _Atomic bool stop;
  bool read_packets; /* drain the trace buffer too (into |got_log|) */
  /* Take nothing until a writer has stalled: the SMB filled, whatever the
   * speed of the writer and of this thread. */
  bool hold_until_stall;
  uint32_t next_seq; /* packets read in order */
  unsigned bad;      /* mismatches, checked by the test thread */
  spec_t (*spec_of)(uint32_t);
} service_thread_t;

static void *service_main(void *arg) {
  service_thread_t *st = arg;
  env_t *e = st->e;
  for (;;) {
    bool stop = atomic_load_explicit(&st->stop, memory_order_acquire);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    sem_timedwait(&e->wake_sem, &ts);
    if (st->hold_until_stall && !stop) {
      tg_arbiter_stats_t as;
      tg_arbiter_get_stats(e->arb, &as);
      if (as.stalls == 0) continue;
      st->hold_until_stall = false;
    }
    fake_service_drain(&e->fs);
    if (st->read_packets) {
      while (fake_service_read(&e->fs, &e->got, NULL, NULL)) {
        spec_t s = st->spec_of(st->next_seq);
        size_t len = expect_spec(&s, e->expect, MAX_PACKET);
        if (tg_buf_size(&e->got) != len ||
            memcmp(tg_buf_begin(&e->got), e->expect, len) != 0)
          st->bad++;
        st->next_seq++;
      }
    }
    if (stop && !tg_arbiter_commit_pending(e->arb)) break;
  }
  return NULL;
}

static void service_start(service_thread_t *st, env_t *e) {
  st->e = e;
  atomic_init(&st->stop, false);
  assert_int_equal(pthread_create(&st->thread, NULL, service_main, st), 0);
}

static void service_stop(service_thread_t *st) {
  atomic_store_explicit(&st->stop, true, memory_order_release);
  sem_post(&st->e->wake_sem);
  pthread_join(st->thread, NULL);
}

static void packet_larger_than_smb_arrives_intact(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 64, 0, true, 0, true); /* 256 KiB SMB, stall */
  spec_t s = {
      .seq = 1, .filler = 100, .depth = 2, .inner = {5u * 1024 * 1024, 17}};
  /* The service takes nothing until the SMB is full and the writer
   * stalls, so the packet goes round the SMB through a stall at any
   * speed, not only when the service falls behind. */
  service_thread_t st = {.hold_until_stall = true};
  service_start(&st, &e);
  write_packet(&e.w, &s);
  tg_trace_writer_flush(&e.w);
  service_stop(&st);
  size_t len = expect_spec(&s, e.expect, MAX_PACKET);
  collect_t c = {.last = malloc(len)};
  assert_int_equal(
      fake_service_reassemble(&e.fs, e.w.writer_id, collect_cb, &c), 0);
  assert_int_equal(c.packets, 1);
  assert_int_equal(c.dropped, 0);
  assert_int_equal(c.last_len, len);
  assert_memory_equal(c.last, e.expect, len);
  free(c.last);
  assert_int_equal(e.fs.errors, 0);
  assert_int_equal(e.w.packets_dropped, 0);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_true(as.stalls > 0);
  assert_true(e.fs.nchunks > 64); /* went round the SMB */
  assert_int_equal(as.chunks_committed, e.fs.nchunks);
  env_fini(&e);
}

/* --- 4. drops ------------------------------------------------------------- */

static void drops_are_counted_and_flagged(void **state) {
  (void)state;
  env_t e;
  /* 4 chunks of 4088; the service keeps what it moved (slow to free). */
  env_init(&e, 4, TG_PAGE_DIV_1, false, TB_SIZE, true);
  e.fs.hold = true;
  spec_t p1 = {.seq = 1, .filler = 10000}; /* chunks 0, 1, 2 */
  write_packet(&e.w, &p1);
  /* P2 starts in chunk 2 and moves on to chunk 3... */
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  tg_pbw_append_varint(pw, 1, 2);
  fill_pattern(g_tmp, 3000, 2);
  tg_pbw_append_bytes(pw, 2, g_tmp, 3000);
  /* ... and the service has its first fragment (chunk 2) ... */
  fake_service_drain(&e.fs);
  assert_int_equal(e.fs.moves, 3);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1); /* P1 */
  size_t len = expect_spec(&p1, e.expect, MAX_PACKET);
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 0);
  /* ... when the SMB runs out: the rest is dropped. */
  fill_pattern(g_tmp, 6000, 3);
  tg_pbw_append_bytes(pw, 3, g_tmp, 6000);
  tg_trace_writer_end_packet(&e.w);
  assert_int_equal(e.w.packets_dropped, 1);
  /* P3 finds no chunk at all. */
  write_packet(&e.w, &(spec_t){.seq = 3, .filler = 10});
  assert_int_equal(e.w.packets_dropped, 2);
  assert_int_equal(e.w.packets_written, 1);
  /* The service catches up: P2 is discarded whole, not emitted in part. */
  fake_service_release_held(&e.fs);
  e.fs.hold = false;
  fake_service_drain(&e.fs);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 0);
  const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(e.fs.tb);
  assert_int_equal(st->trace_writer_packet_loss, 1);
  /* The writer that found no chunk backs off: P2's failed look set the
   * first step (4 KiB, of which P2's dropped rest used most), and P3 went
   * without a look. Whatever the SMB holds now, the rest of the step is
   * dropped before the writer looks again. */
  assert_int_equal(e.w.drop_backoff, 2 * TG_TW_DROP_BACKOFF_MIN);
  assert_true(e.w.drop_retry_after > 0);
  unsigned backed_off = 0;
  while (e.w.drop_retry_after) {
    write_packet(&e.w, &(spec_t){.seq = 3, .filler = 100});
    backed_off++;
    assert_true(backed_off <= TG_TW_DROP_BACKOFF_MIN / 100);
  }
  assert_int_equal(e.w.packets_dropped, 2 + backed_off);
  /* The chunk with the drop marker: P2's continuation, then the marker. */
  const fs_chunk_t *c3 = &e.fs.chunks[3];
  assert_int_equal(c3->chunk_id, 3);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c3->data, c3->size, true, &info), 0);
  assert_true(info.ends_with_drop);
  assert_int_equal(info.valid_fragments, 0);
  assert_int_equal(info.flags, TG_CHUNK_FIRST_PACKET_CONTINUES);
  /* P4 gets through and says so first. */
  spec_t p4 = {.seq = 4, .filler = 20};
  write_packet(&e.w, &p4);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  bool dropped = false;
  uint16_t wid = 0;
  assert_int_equal(fake_service_read(&e.fs, &e.got, &dropped, &wid), 1);
  assert_true(dropped); /* the service saw the marker */
  len = expect_spec(&p4, e.expect + 3, MAX_PACKET - 3);
  static const uint8_t field42[3] = {0xD0, 0x02, 0x01}; /* 42: true */
  memcpy(e.expect, field42, 3);
  assert_int_equal(tg_buf_size(&e.got), len + 3);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len + 3);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 0);
  assert_int_equal(e.w.packets_written, 2);
  assert_int_equal(e.w.packets_dropped, 2 + backed_off);
  assert_int_equal(e.w.drop_backoff, 0); /* a chunk ends the backoff */
  /* P3 and the packets after it left no marker anywhere: P4's writer sent a
   * chunk holding one lone drop marker before P4, so the service counted
   * that loss too. */
  assert_int_equal(st->trace_writer_packet_loss, 2);
  tg_arbiter_stats_t ast;
  tg_arbiter_get_stats(e.arb, &ast);
  assert_int_equal(ast.packets_dropped, 2 + backed_off);
  assert_int_equal(ast.drop_markers, 2);
  /* One look at a full SMB (P2's refill), none while backing off. */
  assert_int_equal(ast.chunk_misses, 1);
  collect_t c = {0};
  assert_int_equal(
      fake_service_reassemble(&e.fs, e.w.writer_id, collect_cb, &c), 0);
  assert_int_equal(c.packets, 2);
  assert_int_equal(c.dropped, 2);
  assert_int_equal(e.fs.errors, 0);
  assert_int_equal(st->abi_violations, 0);
  env_fini(&e);
}

/* A writer of a 4-page SMB the service holds on to, just past its first
 * drop: backing off. */
static void env_init_full(env_t *e) {
  env_init(e, 4, TG_PAGE_DIV_1, false, TB_SIZE, true);
  e->fs.hold = true;
  while (e->w.packets_dropped == 0)
    write_packet(&e->w, &(spec_t){.seq = 1, .filler = 1000});
}

/* A full SMB costs a writer one look per backoff step, not one per packet,
 * and most looks read only the pages near the cursor: a full pass reads
 * every page header, lines the service is writing as it frees chunks. The
 * steps double up to the cap while the SMB stays full. */
static void a_full_smb_is_scanned_once_per_backoff_step(void **state) {
  (void)state;
  env_t e;
  env_init_full(&e);
  tg_arbiter_stats_t ast;
  tg_arbiter_get_stats(e.arb, &ast);
  uint64_t misses0 = ast.chunk_misses, near0 = ast.near_misses;
  /* 64 MiB of 1 KiB packets into a full SMB. */
  const unsigned n = 64u * 1024u;
  for (unsigned i = 0; i < n; i++)
    write_packet(&e.w, &(spec_t){.seq = 2, .filler = 1000});
  tg_arbiter_get_stats(e.arb, &ast);
  uint64_t full = ast.chunk_misses - misses0;
  uint64_t looks = full + ast.near_misses - near0;
  /* 4+8+...+128 KiB, then one look per 256 KiB: about 260 looks, of which
   * one in TG_TW_FULL_LOOK_EVERY passes over the whole SMB. */
  assert_true(looks >= 64u * 1024u / 256u);
  assert_true(looks <= 64u * 1024u / 256u + 16u);
  assert_true(full >= looks / TG_TW_FULL_LOOK_EVERY - 1);
  assert_true(full <= looks / TG_TW_FULL_LOOK_EVERY + 1);
  assert_int_equal(e.w.drop_backoff, TG_TW_DROP_BACKOFF_MAX);
  /* The service catches up: the writer is back within one step. */
  fake_service_release_held(&e.fs);
  e.fs.hold = false;
  fake_service_drain(&e.fs);
  uint64_t written0 = e.w.packets_written;
  unsigned lost = 0;
  while (e.w.packets_written == written0) {
    write_packet(&e.w, &(spec_t){.seq = 3, .filler = 1000});
    lost++;
    assert_true(lost <= TG_TW_DROP_BACKOFF_MAX / 1000 + 1);
  }
  assert_int_equal(e.w.drop_backoff, 0);
  env_fini(&e);
}

/* A slow writer that found the SMB full does not drop a whole step of
 * bytes (seconds of its packets) once the SMB has room again: the step
 * also ends TG_TW_DROP_RETRY_NS after the failed look. */
static void a_slow_writer_backs_off_for_a_bounded_time(void **state) {
  (void)state;
  env_t e;
  env_init_full(&e);
  assert_true(e.w.drop_retry_after > 0);
  /* Time is up while the SMB is still full: one near look, which misses;
   * the step of bytes stays, and the next look waits another period. */
  tg_arbiter_stats_t ast;
  tg_arbiter_get_stats(e.arb, &ast);
  uint64_t full0 = ast.chunk_misses, near0 = ast.near_misses;
  uint32_t backoff0 = e.w.drop_backoff;
  g_test_now_ns += TG_TW_DROP_RETRY_NS;
  write_packet(&e.w, &(spec_t){.seq = 2, .filler = 10});
  write_packet(&e.w, &(spec_t){.seq = 2, .filler = 10});
  tg_arbiter_get_stats(e.arb, &ast);
  assert_int_equal(ast.near_misses, near0 + 1);
  assert_int_equal(ast.chunk_misses, full0);
  assert_int_equal(e.w.drop_backoff, backoff0);
  /* Small packets, far fewer bytes than the step: all dropped, no look. */
  uint64_t looks0 = ast.chunk_misses + ast.near_misses;
  fake_service_release_held(&e.fs);
  e.fs.hold = false;
  fake_service_drain(&e.fs);
  uint64_t dropped0 = e.w.packets_dropped;
  for (unsigned i = 0; i < 8; i++)
    write_packet(&e.w, &(spec_t){.seq = 2, .filler = 10});
  assert_int_equal(e.w.packets_dropped, dropped0 + 8);
  assert_true(e.w.drop_retry_after > 0);
  tg_arbiter_get_stats(e.arb, &ast);
  assert_int_equal(ast.chunk_misses + ast.near_misses, looks0);
  /* Time is up: the next packet looks, finds a chunk and is stored. */
  g_test_now_ns += TG_TW_DROP_RETRY_NS;
  uint64_t written0 = e.w.packets_written;
  write_packet(&e.w, &(spec_t){.seq = 3, .filler = 10});
  assert_int_equal(e.w.packets_written, written0 + 1);
  assert_int_equal(e.w.packets_dropped, dropped0 + 8);
  assert_int_equal(e.w.drop_backoff, 0);
  env_fini(&e);
}

/* A packet dropped while nested sizes of earlier chunks wait for patches:
 * the patches still go out, so the service does not stall the sequence. */
/* Frees the held chunk of page |pg| (the service copied it). */
static void free_held_page(fake_service_t *fs, size_t pg) {
  for (size_t i = 0; i < fs->nheld; i++) {
    if (fs->held[i].page_idx != pg) continue;
    assert_int_equal(tg_smb_release_chunk_as_free(&fs->smb, &fs->held[i]), 0);
    fs->held[i] = fs->held[--fs->nheld];
    return;
  }
  fail_msg("page %zu is not held", pg);
}

/* Writes until the writer has got a chunk and stored a packet in it. */
static void write_until_stored(env_t *e, uint32_t seq) {
  uint64_t written0 = e->w.packets_written;
  for (unsigned n = 0; e->w.packets_written == written0; n++) {
    assert_true(n < 64u * 1024u); /* 64 MiB: far past any backoff */
    write_packet(&e->w, &(spec_t){.seq = seq, .filler = 1000});
  }
}

/* The service frees chunks far from the arbiter's cursor (out of the order
 * it took them): the near looks miss them, the next full pass finds them.
 * Then it frees the chunks at the cursor: the next look, a near one, finds
 * them without another full pass. Two chunks each time: the first a
 * writer gets after a loss carries the loss's marker alone. */
static void a_chunk_freed_out_of_order_is_found_by_a_full_pass(void **state) {
  (void)state;
  enum { PAGES = 64, FAR = 40 };
  _Static_assert(FAR >= TG_ARBITER_NEAR_PAGES && FAR + 3 < PAGES, "far");
  env_t e;
  env_init(&e, PAGES, TG_PAGE_DIV_1, false, 0, false);
  e.fs.hold = true;
  while (e.w.packets_dropped == 0)
    write_packet(&e.w, &(spec_t){.seq = 1, .filler = 1000});
  fake_service_drain(&e.fs); /* every chunk now BeingRead, held */
  assert_int_equal(e.fs.nheld, PAGES);
  /* One writer took pages 0..PAGES-1 in turn: the cursor is back at 0. */
  free_held_page(&e.fs, FAR);
  free_held_page(&e.fs, FAR + 1);
  tg_arbiter_stats_t a0, a1;
  tg_arbiter_get_stats(e.arb, &a0);
  write_until_stored(&e, 2);
  tg_arbiter_get_stats(e.arb, &a1);
  /* Near misses, then the full pass that found FAR (and FAR + 1). */
  assert_int_equal(a1.chunk_misses, a0.chunk_misses);
  assert_true(a1.near_misses - a0.near_misses >= 1);
  assert_true(a1.near_misses - a0.near_misses <= TG_TW_FULL_LOOK_EVERY - 1);
  /* The writer fills FAR + 1's chunk and is out of chunks again. */
  while (e.w.has_chunk) write_packet(&e.w, &(spec_t){.seq = 3, .filler = 1000});
  free_held_page(&e.fs, FAR + 2); /* the cursor's page */
  free_held_page(&e.fs, FAR + 3);
  tg_arbiter_get_stats(e.arb, &a0);
  write_until_stored(&e, 4);
  tg_arbiter_get_stats(e.arb, &a1);
  assert_int_equal(a1.chunk_misses, a0.chunk_misses);
  assert_int_equal(a1.near_misses, a0.near_misses);
  env_fini(&e);
}

static void drop_releases_pending_patches(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 2, TG_PAGE_DIV_1, false, TB_SIZE, true);
  e.fs.hold = true;
  spec_t p1 = {.seq = 1, .filler = 10, .depth = 2, .inner = {0, 20000}};
  write_packet(&e.w, &p1); /* chunk 0 (sizes) -> chunk 1 -> none */
  assert_int_equal(e.w.packets_dropped, 1);
  fake_service_drain(&e.fs);
  assert_true(e.fs.chunks[0].needs_patching);
  assert_true(e.fs.chunks[0].patched_final);
  fake_service_release_held(&e.fs);
  e.fs.hold = false;
  spec_t p2 = {.seq = 2, .filler = 30};
  write_packet(&e.w, &p2);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  bool dropped = false;
  assert_int_equal(fake_service_read(&e.fs, &e.got, &dropped, NULL), 1);
  assert_true(dropped);
  size_t len = expect_spec(&p2, e.expect, MAX_PACKET);
  assert_int_equal(tg_buf_size(&e.got), len + 3);
  assert_memory_equal(tg_buf_begin(&e.got) + 3, e.expect, len);
  assert_int_equal(e.fs.errors, 0);
  env_fini(&e);
}

/* --- 5. stall ------------------------------------------------------------- */

static spec_t stall_spec(uint32_t seq) {
  size_t filler = (seq * 2654435761u) % 9000u;
  return (spec_t){.seq = seq,
                  .filler = filler,
                  .depth = seq % 3,
                  .inner = {seq % 50, 200, 7}};
}

static void stall_mode_loses_nothing(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 8, TG_PAGE_DIV_1, true, TB_SIZE, false);
  service_thread_t st = {.read_packets = true, .spec_of = stall_spec};
  service_start(&st, &e);
  const uint32_t n = 3000;
  uint8_t *tmp = malloc(MAX_PACKET);
  assert_non_null(tmp);
  for (uint32_t i = 0; i < n; i++) {
    /* The service thread uses the shared pattern scratch: not here. */
    spec_t sv = stall_spec(i);
    const spec_t *s = &sv;
    tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
    tg_pbw_append_varint(pw, 1, s->seq);
    fill_pattern(tmp, s->filler, s->seq);
    tg_pbw_append_bytes(pw, 2, tmp, s->filler);
    for (unsigned d = 0; d < s->depth; d++) {
      tg_pbw_begin_nested(pw, 3 + d);
      tg_pbw_append_varint(pw, 1, d);
      if (s->inner[d]) {
        fill_pattern(tmp, s->inner[d], s->seq + d + 1);
        tg_pbw_append_bytes(pw, 2, tmp, s->inner[d]);
      }
    }
    for (unsigned d = 0; d < s->depth; d++) tg_pbw_end_nested(pw);
    tg_trace_writer_end_packet(&e.w);
  }
  tg_trace_writer_flush(&e.w);
  service_stop(&st);
  free(tmp);
  assert_int_equal(st.bad, 0);
  assert_int_equal(st.next_seq, n);
  assert_int_equal(e.w.packets_dropped, 0);
  assert_int_equal(e.w.packets_written, n);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_true(as.stalls > 0);
  assert_true(atomic_load(&e.wakes) > 0);
  assert_service_clean(&e);
  env_fini(&e);
}

/* --- 6. writer ids -------------------------------------------------------- */

static void writer_ids_are_unique_and_not_reused(void **state) {
  (void)state;
  tg_arbiter_t *arb = new_arbiter(1, 0, false, NULL);
  assert_int_equal(tg_arbiter_writer_register(arb, 3), 1);
  assert_int_equal(tg_arbiter_writer_register(arb, 4), 2);
  tg_arbiter_writer_unregister(arb, 1);
  assert_int_equal(tg_arbiter_writer_register(arb, 5), 3); /* not 1 */
  tg_arbiter_writer_unregister(arb, 3);
  tg_arbiter_writer_unregister(arb, 3); /* twice: no second event */
  tg_arbiter_writer_event_t ev[8];
  assert_int_equal(tg_arbiter_take_writer_events(arb, ev, 8), 5);
  const tg_arbiter_writer_event_t want[5] = {
      {true, 1, 3}, {true, 2, 4}, {false, 1, 0}, {true, 3, 5}, {false, 3, 0}};
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(ev[i].registered, want[i].registered);
    assert_int_equal(ev[i].writer_id, want[i].writer_id);
    if (want[i].registered)
      assert_int_equal(ev[i].target_buffer, want[i].target_buffer);
  }
  assert_int_equal(tg_arbiter_take_writer_events(arb, ev, 8), 0);

  /* Fill the id space: 2 is still taken, then ids 4 .. 32767, 1, 3. */
  unsigned seen = 1;
  for (;;) {
    int id = tg_arbiter_writer_register(arb, 1);
    if (id < 0) {
      assert_int_equal(id, -EBUSY);
      break;
    }
    assert_true(id >= 1 && id <= (int)TG_WRITER_ID_MAX);
    seen++;
  }
  assert_int_equal(seen, TG_WRITER_ID_MAX);
  tg_trace_writer_t w;
  assert_int_equal(tg_trace_writer_init(&w, arb, 1), -EBUSY);
  tg_arbiter_writer_unregister(arb, 100);
  assert_int_equal(tg_arbiter_writer_register(arb, 1), 100);
  assert_int_equal(tg_arbiter_writer_register(arb, 1), -EBUSY);
  /* Events come out in order, in portions. */
  size_t total = 0, n;
  while ((n = tg_arbiter_take_writer_events(arb, ev, 8)) > 0) total += n;
  assert_int_equal(total, (TG_WRITER_ID_MAX - 1) + 2);
  tg_arbiter_unref(arb);
}

static void writer_unregisters_on_fini(void **state) {
  (void)state;
  tg_arbiter_t *arb = new_arbiter(4, 0, false, NULL);
  tg_trace_writer_t a, b;
  assert_int_equal(tg_trace_writer_init(&a, arb, 2), 0);
  assert_int_equal(tg_trace_writer_init(&b, arb, 3), 0);
  assert_int_not_equal(a.writer_id, b.writer_id);
  write_packet(&a, &(spec_t){.seq = 1});
  tg_trace_writer_fini(&a); /* returns its chunk, unregisters */
  tg_trace_writer_fini(&b);
  tg_arbiter_writer_event_t ev[8];
  assert_int_equal(tg_arbiter_take_writer_events(arb, ev, 8), 4);
  assert_true(ev[0].registered && ev[0].writer_id == a.writer_id &&
              ev[0].target_buffer == 2);
  assert_true(ev[1].registered && ev[1].writer_id == b.writer_id &&
              ev[1].target_buffer == 3);
  assert_true(!ev[2].registered && ev[2].writer_id == a.writer_id);
  assert_true(!ev[3].registered && ev[3].writer_id == b.writer_id);
  assert_true(tg_arbiter_commit_pending(arb));
  tg_arbiter_unref(arb);
}

/* --- 7. take_commit ------------------------------------------------------- */

static void commit_respects_max_bytes_and_flush_rule(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 64, TG_PAGE_DIV_14, false, TB_SIZE, true);
  /* Patches behind many moves: a nested packet over 3 chunks first. */
  spec_t big = {.seq = 0, .filler = 0, .depth = 2, .inner = {300, 300}};
  write_packet(&e.w, &big);
  for (uint32_t i = 1; i < 300; i++) {
    write_packet(&e.w, &(spec_t){.seq = i, .filler = 3});
    tg_trace_writer_flush(&e.w);
  }
  /* Too small for a single move: nothing taken. */
  e.fs.max_bytes = 8;
  size_t n = 99;
  assert_int_equal(fake_service_commit(&e.fs, 5, &n), TG_ENO_SPACE);
  assert_int_equal(n, 0);
  /* Small requests; the flush id only with the one that empties. */
  e.fs.max_bytes = 100;
  unsigned requests = 0;
  while (tg_arbiter_commit_pending(e.arb)) {
    assert_int_equal(e.fs.last_flush_id, 0);
    int rv = fake_service_commit(&e.fs, 5, &n);
    assert_true(rv > 0);
    assert_true(n <= 100);
    requests++;
  }
  assert_true(requests > 10);
  assert_int_equal(e.fs.last_flush_id, 5);
  assert_int_equal(e.fs.moves, 301); /* 3 chunks for the big one */
  assert_int_equal(e.fs.ngroups, 2);
  /* Everything arrives; no patch reached the service before its chunk. */
  uint32_t count = 0;
  while (fake_service_read(&e.fs, &e.got, NULL, NULL)) {
    spec_t s = count == 0 ? big : (spec_t){.seq = count, .filler = 3};
    size_t len = expect_spec(&s, e.expect, MAX_PACKET);
    assert_int_equal(tg_buf_size(&e.got), len);
    assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
    count++;
  }
  assert_int_equal(count, 300);
  assert_service_clean(&e);
  /* Empty batch: the flush id alone. */
  e.fs.last_flush_id = 0;
  assert_int_equal(fake_service_commit(&e.fs, 300, &n), 0);
  assert_int_equal(n, 3); /* tag + 2-byte varint */
  assert_int_equal(e.fs.last_flush_id, 300);
  /* Nothing and no id: nothing appended. */
  assert_int_equal(fake_service_commit(&e.fs, 0, &n), 0);
  assert_int_equal(n, 0);
  tg_arbiter_stats_t as;
  tg_arbiter_get_stats(e.arb, &as);
  assert_int_equal(as.chunks_committed, 301);
  assert_int_equal(as.patches, 2);
  env_fini(&e);
}

/* A batch larger than an IPC frame goes out in several. */
static void commit_splits_a_large_batch(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 1024, TG_PAGE_DIV_14, false, 0, false); /* 14336 chunks */
  for (uint32_t i = 0; i < 12000; i++) {
    write_packet(&e.w, &(spec_t){.seq = i});
    tg_trace_writer_flush(&e.w);
  }
  size_t n;
  int rv = fake_service_commit(&e.fs, 1, &n);
  assert_true(rv > 0 && rv < 12000);
  assert_true(n <= 120000 && n > 110000);
  assert_int_equal(e.fs.last_flush_id, 0);
  rv = fake_service_commit(&e.fs, 1, &n);
  assert_true(rv > 0);
  assert_int_equal(e.fs.moves, 12000);
  assert_int_equal(e.fs.last_flush_id, 1);
  assert_false(tg_arbiter_commit_pending(e.arb));
  assert_int_equal(e.fs.errors, 0);
  env_fini(&e);
}

/* The wake callback fires when the batch reaches the threshold. */
static void wake_at_commit_threshold(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_1, false, 0, false); /* threshold 4 */
  for (uint32_t i = 0; i < 3; i++) {
    write_packet(&e.w, &(spec_t){.seq = i});
    tg_trace_writer_flush(&e.w);
  }
  assert_int_equal(atomic_load(&e.wakes), 0);
  write_packet(&e.w, &(spec_t){.seq = 3});
  tg_trace_writer_flush(&e.w);
  assert_int_equal(atomic_load(&e.wakes), 1);
  env_fini(&e);
}

/* --- 8. shutdown ---------------------------------------------------------- */

static void shutdown_makes_writers_drop(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_14, false, TB_SIZE, true);
  write_packet(&e.w, &(spec_t){.seq = 1, .filler = 10});
  /* A packet under way when the connection goes. */
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  tg_pbw_append_varint(pw, 1, 2);
  tg_arbiter_shutdown(e.arb);
  assert_true(tg_arbiter_is_shut_down(e.arb));
  fill_pattern(g_tmp, 5000, 1);
  tg_pbw_append_bytes(pw, 2, g_tmp, 5000);
  tg_trace_writer_end_packet(&e.w);
  write_packet(&e.w, &(spec_t){.seq = 3, .filler = 10});
  assert_int_equal(e.w.packets_written, 1);
  assert_int_equal(e.w.packets_dropped, 2);
  tg_smb_chunk_t c;
  assert_int_equal(tg_arbiter_chunk_get(e.arb, e.w.writer_id, 0, &c),
                   TG_ENO_SPACE);
  /* What was committed still goes; the marker discards packet 2. */
  fake_service_drain(&e.fs);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 0);
  assert_int_equal(tg_trace_buffer_stats(e.fs.tb)->trace_writer_packet_loss, 1);
  assert_int_equal(e.fs.errors, 0);
  env_fini(&e);
}

typedef struct stalled {
  tg_trace_writer_t *w;
  _Atomic bool done;
} stalled_t;

static void *stalled_writer(void *arg) {
  stalled_t *s = arg;
  uint8_t *tmp = calloc(1, 100000);
  tg_pbw_t *pw = tg_trace_writer_begin_packet(s->w);
  tg_pbw_append_bytes(pw, 2, tmp, 100000); /* more than the SMB */
  tg_trace_writer_end_packet(s->w);
  free(tmp);
  atomic_store(&s->done, true);
  return NULL;
}

static void shutdown_wakes_a_stalled_writer(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 4, TG_PAGE_DIV_1, true, 0, false); /* nobody drains */
  stalled_t s = {.w = &e.w};
  atomic_init(&s.done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, stalled_writer, &s), 0);
  /* The arbiter counts the stall, then asks the agent to commit: each
   * wake is an event on wake_sem. Bounded at 5 s. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  tg_arbiter_stats_t as = {0};
  tg_arbiter_get_stats(e.arb, &as);
  while (as.stalls == 0) {
    if (sem_timedwait(&e.wake_sem, &deadline) != 0 && errno != EINTR) break;
    tg_arbiter_get_stats(e.arb, &as);
  }
  assert_int_equal(as.stalls, 1);
  assert_true(atomic_load(&e.wakes) > 0); /* asked the agent to commit */
  assert_false(atomic_load(&s.done));
  tg_arbiter_shutdown(e.arb);
  /* The writer's exit is the event: join it, bounded at 5 s. */
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  assert_int_equal(pthread_timedjoin_np(t, NULL, &deadline), 0);
  assert_true(atomic_load(&s.done));
  assert_int_equal(e.w.packets_dropped, 1);
  assert_int_equal(e.w.packets_written, 0);
  env_fini(&e);
}

/* --- misc ----------------------------------------------------------------- */

/* A pb writer error (nesting too deep) drops the packet, not the writer. */
static void encoding_error_drops_the_packet(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_4, false, TB_SIZE, true);
  write_packet(&e.w, &(spec_t){.seq = 1, .filler = 10});
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  for (int i = 0; i < TG_PBW_MAX_DEPTH + 1; i++) tg_pbw_begin_nested(pw, 1);
  assert_int_equal(tg_pbw_error(pw), TG_ENESTING_TOO_DEEP);
  tg_trace_writer_end_packet(&e.w);
  assert_int_equal(e.w.packets_dropped, 1);
  spec_t p3 = {.seq = 3, .filler = 10};
  write_packet(&e.w, &p3);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  bool dropped = false;
  assert_int_equal(fake_service_read(&e.fs, &e.got, &dropped, NULL), 1);
  assert_true(dropped);
  size_t len = expect_spec(&p3, e.expect, 64);
  assert_int_equal(tg_buf_size(&e.got), len + 3);
  assert_memory_equal(tg_buf_begin(&e.got) + 3, e.expect, len);
  assert_int_equal(e.fs.errors, 0);
  env_fini(&e);
}

/* begin_packet inside a packet ends it; flush inside a packet waits. */
static void begin_inside_packet_ends_it(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 16, TG_PAGE_DIV_4, false, TB_SIZE, false);
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  tg_pbw_append_varint(pw, 1, 1);
  tg_trace_writer_flush(&e.w); /* no-op inside a packet */
  assert_false(tg_arbiter_commit_pending(e.arb));
  pw = tg_trace_writer_begin_packet(&e.w);
  tg_pbw_append_varint(pw, 1, 2);
  tg_trace_writer_end_packet(&e.w);
  tg_trace_writer_end_packet(&e.w); /* outside a packet: nothing */
  assert_int_equal(e.w.packets_written, 2);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  for (uint32_t i = 1; i <= 2; i++) {
    assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
    const uint8_t want[2] = {0x08, (uint8_t)i};
    assert_int_equal(tg_buf_size(&e.got), 2);
    assert_memory_equal(tg_buf_begin(&e.got), want, 2);
  }
  env_fini(&e);
}

/* Bad options are refused without touching the mapping. */
static void arbiter_rejects_bad_options(void **state) {
  (void)state;
  uint8_t mem[64];
  tg_arbiter_t *arb = NULL;
  tg_arbiter_opts_t o = {.smb_base = mem, .smb_size = 5000, .page_size = PAGE};
  assert_int_equal(tg_arbiter_new(&o, &arb), -EINVAL);
  o.smb_size = PAGE;
  o.layout = 6;
  assert_int_equal(tg_arbiter_new(&o, &arb), -EINVAL);
  assert_null(arb);
}

/* Pages partitioned with another layout are left alone. */
static void foreign_layout_pages_are_skipped(void **state) {
  (void)state;
  tg_arbiter_t *arb = new_arbiter(2, TG_PAGE_DIV_4, false, NULL);
  tg_smb_t *smb = (tg_smb_t *)tg_arbiter_smb(arb);
  assert_int_equal(tg_smb_try_partition_page(smb, 0, TG_PAGE_DIV_14), 0);
  tg_smb_chunk_t c[5];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(tg_arbiter_chunk_get(arb, 1, (uint32_t)i, &c[i]), 0);
    assert_int_equal(c[i].page_idx, 1);
    assert_int_equal(c[i].layout, TG_PAGE_DIV_4);
  }
  assert_int_equal(tg_arbiter_chunk_get(arb, 1, 4, &c[4]), TG_ENO_SPACE);
  tg_arbiter_unref(arb);
}

/* --- idle chunks ----------------------------------------------------------- */

#define MS UINT64_C(1000000)

/* A writer that wrote once and went idle: the agent's pass takes its chunk
 * back once the writer has been seen idle for the idle time, not before;
 * the packet reaches the service without a flush, and the writer goes on
 * in a new chunk with the next id. */
static void idle_writer_chunk_is_taken_back_after_idle_time(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 4, TG_PAGE_DIV_1, false, TB_SIZE, true);
  spec_t p0 = {.seq = 0, .filler = 40, .depth = 1, .inner = {3}};
  write_packet(&e.w, &p0);
  assert_true(tg_trace_writer_holds_chunk(&e.w));
  /* First sighting, then not idle long enough. */
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1000 * MS, 5 * MS), 0);
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1004 * MS, 5 * MS), 0);
  assert_true(tg_trace_writer_holds_chunk(&e.w));
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1005 * MS, 5 * MS), 1);
  assert_false(tg_trace_writer_holds_chunk(&e.w));
  /* Nothing more to take: a second pass is a no-op. */
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1100 * MS, 5 * MS), 0);
  /* Complete now, until the service frees it. */
  assert_int_equal(tg_arbiter_bytes_in_use(e.arb),
                   tg_smb_chunk_size(PAGE, TG_PAGE_DIV_1));
  fake_service_drain(&e.fs);
  assert_int_equal(tg_arbiter_bytes_in_use(e.arb), 0);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  size_t len = expect_spec(&p0, e.expect, MAX_PACKET);
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
  /* The writer comes back: a fresh chunk, the next id, nothing lost. */
  spec_t p1 = {.seq = 1, .filler = 10};
  write_packet(&e.w, &p1);
  tg_trace_writer_flush(&e.w);
  fake_service_drain(&e.fs);
  bool dropped = true;
  assert_int_equal(fake_service_read(&e.fs, &e.got, &dropped, NULL), 1);
  assert_false(dropped);
  len = expect_spec(&p1, e.expect, MAX_PACKET);
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_int_equal(e.fs.nchunks, 2);
  assert_int_equal(e.fs.chunks[0].chunk_id, 0);
  assert_int_equal(e.fs.chunks[1].chunk_id, 1);
  assert_int_equal(reassembled_packets(&e), 2);
  tg_arbiter_stats_t st;
  tg_arbiter_get_stats(e.arb, &st);
  assert_int_equal(st.chunks_reclaimed, 1);
  assert_int_equal(st.packets_dropped, 0);
  assert_service_clean(&e);
  env_fini(&e);
}

/* The pass never takes a chunk a packet is open in: not while nested
 * sizes of earlier chunks wait for patches, nor the chunk holding the
 * packet's last fragment. The packet arrives whole after it ends. */
static void reclaim_skips_a_writer_inside_a_packet(void **state) {
  (void)state;
  env_t e;
  env_init(&e, 8, TG_PAGE_DIV_4, false, TB_SIZE, true);
  spec_t p = {.seq = 7, .filler = 3000, .depth = 2, .inner = {2500, 900}};
  tg_pbw_t *pw = tg_trace_writer_begin_packet(&e.w);
  write_spec(pw, &p);
  /* Still open: several chunks left already, sizes wait for patches. */
  assert_true(tg_arbiter_commit_pending(e.arb));
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 0, 0), 0);
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1000 * MS, 0), 0);
  tg_trace_writer_end_packet(&e.w);
  /* Between packets: taken at once with idle time 0. */
  assert_int_equal(tg_trace_writers_reclaim_idle(e.arb, 1001 * MS, 0), 1);
  fake_service_drain(&e.fs);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 1);
  size_t len = expect_spec(&p, e.expect, MAX_PACKET);
  assert_int_equal(tg_buf_size(&e.got), len);
  assert_memory_equal(tg_buf_begin(&e.got), e.expect, len);
  assert_int_equal(fake_service_read(&e.fs, &e.got, NULL, NULL), 0);
  assert_int_equal(reassembled_packets(&e), 1);
  assert_service_clean(&e);
  env_fini(&e);
}

/* Many writers, far fewer chunks, drop mode: each writer writes a packet
 * in turn and goes idle. Without the pass the first writers would keep
 * every chunk and the rest would drop; with it nothing is lost. */
static void many_writers_small_smb_lose_nothing_once_idle_chunks_return(
    void **state) {
  (void)state;
  enum { WRITERS = 40, ROUNDS = 3 };
  tg_arbiter_t *arb = new_arbiter(2, TG_PAGE_DIV_1, false, NULL);
  fake_service_t fs;
  fake_service_init(&fs, arb, TB_SIZE, false);
  tg_trace_writer_t *w = calloc(WRITERS, sizeof(*w));
  assert_non_null(w);
  for (unsigned i = 0; i < WRITERS; i++)
    assert_int_equal(tg_trace_writer_init(&w[i], arb, 1), 0);
  uint64_t t = 0;
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned i = 0; i < WRITERS; i++) {
      write_packet(&w[i], &(spec_t){.seq = r, .filler = 100 + i});
      /* The agent's pass (every writer between packets), then the
       * service's commit. */
      tg_trace_writers_reclaim_idle(arb, t += MS, 0);
      fake_service_drain(&fs);
    }
  }
  tg_buf_t got;
  tg_buf_init(&got, 0);
  unsigned n = 0;
  bool dropped;
  uint16_t wid;
  bool seen[WRITERS + 1] = {false};
  while (fake_service_read(&fs, &got, &dropped, &wid)) {
    /* Only each writer's first packet is flagged (as Perfetto's service
     * flags a sequence's first packet): nothing was lost. */
    assert_true(wid >= 1 && wid <= WRITERS);
    assert_int_equal(dropped, !seen[wid]);
    seen[wid] = true;
    n++;
  }
  assert_int_equal(n, WRITERS * ROUNDS);
  tg_arbiter_stats_t st;
  tg_arbiter_get_stats(arb, &st);
  assert_int_equal(st.packets_dropped, 0);
  assert_int_equal(st.chunks_reclaimed, WRITERS * ROUNDS);
  for (unsigned i = 0; i < WRITERS; i++) {
    assert_int_equal(w[i].packets_dropped, 0);
    tg_trace_writer_fini(&w[i]);
  }
  tg_buf_free(&got);
  free(w);
  fake_service_free(&fs);
  tg_arbiter_unref(arb);
}

/* With the adaptive layout, pages get smaller chunks as writers register,
 * and chunks are taken from pages of either layout. */
static void layout_adapts_to_the_writer_count(void **state) {
  (void)state;
  tg_arbiter_t *arb = new_arbiter(8, 0, false, NULL);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_1);
  tg_smb_chunk_t c0;
  assert_int_equal(tg_arbiter_chunk_get(arb, 1, 0, &c0), 0);
  assert_int_equal(c0.layout, TG_PAGE_DIV_1);
  /* 8 pages: DIV_1 gives 8 chunks, enough for 4 writers; 5 need DIV_2. */
  int ids[40];
  for (int i = 0; i < 4; i++) ids[i] = tg_arbiter_writer_register(arb, 1);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_1);
  ids[4] = tg_arbiter_writer_register(arb, 1);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_2);
  for (int i = 5; i < 40; i++) ids[i] = tg_arbiter_writer_register(arb, 1);
  assert_int_equal(tg_arbiter_writer_count(arb), 40);
  /* 80 chunks wanted: 8 x 14 = 112 is the first layout that has them. */
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_14);
  /* The page of c0 keeps its layout (its one chunk is taken); the next
   * free page gets the new one. */
  tg_smb_chunk_t c;
  assert_int_equal(tg_arbiter_chunk_get(arb, 1, 1, &c), 0);
  assert_int_equal(c.layout, TG_PAGE_DIV_14);
  assert_int_equal(c.size, tg_smb_chunk_size(PAGE, TG_PAGE_DIV_14));
  for (int i = 0; i < 40; i++)
    tg_arbiter_writer_unregister(arb, (uint16_t)ids[i]);
  assert_int_equal(tg_arbiter_layout(arb), TG_PAGE_DIV_1);
  tg_arbiter_unref(arb);
}

int main(void) {
  g_tmp = malloc(MAX_PACKET);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fragments_reassemble_at_every_boundary),
      cmocka_unit_test(patches_land_in_a_chunk_whose_move_waits),
      cmocka_unit_test(a_chunk_that_leaves_first_is_patched_by_commit),
      cmocka_unit_test(a_patch_out_of_the_chunk_sends_the_chunk_as_without),
      cmocka_unit_test(chunk_headers_follow_the_abi),
      cmocka_unit_test(packet_count_per_chunk_is_capped),
      cmocka_unit_test(packet_does_not_start_in_a_sliver),
      cmocka_unit_test(nested_sizes_are_patched_in_one_group),
      cmocka_unit_test(nested_depth3_over_five_chunks),
      cmocka_unit_test(patch_slots_are_recycled),
      cmocka_unit_test(packet_larger_than_smb_arrives_intact),
      cmocka_unit_test(drops_are_counted_and_flagged),
      cmocka_unit_test(a_full_smb_is_scanned_once_per_backoff_step),
      cmocka_unit_test(a_slow_writer_backs_off_for_a_bounded_time),
      cmocka_unit_test(a_chunk_freed_out_of_order_is_found_by_a_full_pass),
      cmocka_unit_test(idle_writer_chunk_is_taken_back_after_idle_time),
      cmocka_unit_test(reclaim_skips_a_writer_inside_a_packet),
      cmocka_unit_test(
          many_writers_small_smb_lose_nothing_once_idle_chunks_return),
      cmocka_unit_test(layout_adapts_to_the_writer_count),
      cmocka_unit_test(drop_releases_pending_patches),
      cmocka_unit_test(stall_mode_loses_nothing),
      cmocka_unit_test(writer_ids_are_unique_and_not_reused),
      cmocka_unit_test(writer_unregisters_on_fini),
      cmocka_unit_test(commit_respects_max_bytes_and_flush_rule),
      cmocka_unit_test(commit_splits_a_large_batch),
      cmocka_unit_test(wake_at_commit_threshold),
      cmocka_unit_test(shutdown_makes_writers_drop),
      cmocka_unit_test(shutdown_wakes_a_stalled_writer),
      cmocka_unit_test(encoding_error_drops_the_packet),
      cmocka_unit_test(begin_inside_packet_ends_it),
      cmocka_unit_test(arbiter_rejects_bad_options),
      cmocka_unit_test(foreign_layout_pages_are_skipped),
  };
  int rv = cmocka_run_group_tests(tests, NULL, NULL);
  free(g_tmp);
  return rv;
}
