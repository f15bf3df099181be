/* SMB layout, chunk state machine and chunk validator (abi/smb.h).
 *
 * Everything here is checked against raw bytes and raw bitmap words rather
 * than only through the accessors: the layout is a wire contract with
 * Perfetto's SharedMemoryABI, and an accessor that agrees with a wrong writer
 * would hide the bug. Single-threaded; races live in test_smb_race.c.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "abi/smb.h"
#include "tracegate/error.h"

static const size_t kPageSizes[] = {4096, 8192, 16384, 32768};
#define NUM_PAGE_SIZES (sizeof(kPageSizes) / sizeof(kPageSizes[0]))
/* Chunks per layout, straight from Perfetto's kNumChunksForLayout. */
static const unsigned kChunksPerLayout[TG_SMB_NUM_LAYOUTS] = {0, 1, 2, 4,
                                                              7, 14, 0, 0};

/* --- helpers ------------------------------------------------------------ */

typedef struct smb_fixture {
  uint8_t *mem;
  tg_smb_t smb;
} smb_fixture_t;

static void fixture_open(smb_fixture_t *f, size_t num_pages, size_t page_size) {
  size_t size = num_pages * page_size;
  f->mem = aligned_alloc(page_size, size);
  assert_non_null(f->mem);
  memset(f->mem, 0, size);
  assert_int_equal(tg_smb_init(&f->smb, f->mem, size, page_size), 0);
}

static void fixture_close(smb_fixture_t *f) {
  free(f->mem);
  f->mem = NULL;
}

static uint32_t le32_at(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

/* The page header word as bytes in memory, not through the atomic. */
static uint32_t raw_bitmap(const smb_fixture_t *f, size_t page_idx) {
  return le32_at(f->mem + page_idx * f->smb.page_size);
}

/* What a hostile producer does: scribble the word directly. */
static void write_raw_bitmap(smb_fixture_t *f, size_t page_idx, uint32_t v) {
  uint8_t *p = f->mem + page_idx * f->smb.page_size;
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* A release the bitmap no longer supports. smb.h documents TG_ECHUNK_STATE;
 * a layout that lost the chunk yields -EINVAL: either is a clean refusal. */
#define assert_rejected(expr)                         \
  do {                                                \
    int rv_ = (expr);                                 \
    assert_true(rv_ == TG_ECHUNK_STATE || rv_ == -EINVAL); \
  } while (0)

static uint32_t state_bits(unsigned chunk_idx, unsigned state) {
  return (uint32_t)state << (2 * chunk_idx);
}

static uint32_t layout_bits(unsigned layout) {
  return (uint32_t)layout << 28;
}

/* --- chunk sizes and offsets ------------------------------------------- */

static void layout_chunk_sizes_match_perfetto_for_4k_pages(void **state) {
  (void)state;
  static const size_t want[TG_SMB_NUM_LAYOUTS] = {0,   4088, 2044, 1020,
                                                  584, 292,  0,    0};
  for (unsigned l = 0; l < TG_SMB_NUM_LAYOUTS; l++) {
    assert_int_equal(tg_smb_layout_num_chunks(l), kChunksPerLayout[l]);
    assert_int_equal(tg_smb_chunk_size(4096, l), want[l]);
  }
}

static void layout_chunk_size_formula_holds_for_every_page_size(void **state) {
  (void)state;
  for (size_t s = 0; s < NUM_PAGE_SIZES; s++) {
    size_t ps = kPageSizes[s];
    for (unsigned l = 0; l < TG_SMB_NUM_LAYOUTS; l++) {
      unsigned n = kChunksPerLayout[l];
      size_t want = n ? ((ps - 8) / n) & ~(size_t)3 : 0;
      assert_int_equal(tg_smb_chunk_size(ps, l), want);
      assert_int_equal(want % 4, 0);
      assert_true(n * want <= ps - 8);
    }
  }
}

static void layout_chunk_offsets_match_for_every_page_size_and_layout(
    void **state) {
  (void)state;
  enum { kPages = 3 };
  for (size_t s = 0; s < NUM_PAGE_SIZES; s++) {
    size_t ps = kPageSizes[s];
    smb_fixture_t f;
    fixture_open(&f, kPages, ps);
    for (unsigned l = TG_PAGE_DIV_1; l <= TG_PAGE_DIV_14; l++) {
      unsigned n = kChunksPerLayout[l];
      size_t csize = ((ps - 8) / n) & ~(size_t)3;
      memset(f.mem, 0, kPages * ps);
      for (size_t p = 0; p < kPages; p++) {
        assert_int_equal(tg_smb_try_partition_page(&f.smb, p, l), 0);
        for (unsigned i = 0; i < n; i++) {
          tg_smb_chunk_t c;
          uint32_t id = (uint32_t)(0xC0DE0000u + p * 100 + i);
          assert_int_equal(tg_smb_try_acquire_chunk_for_writing(
                               &f.smb, p, i, id, (uint16_t)(i + 1), &c),
                           0);
          size_t off = p * ps + 8 + i * csize;
          assert_ptr_equal(c.begin, f.mem + off);
          assert_int_equal(c.size, csize);
          assert_int_equal(c.page_idx, p);
          assert_int_equal(c.chunk_idx, i);
          assert_int_equal(c.layout, l);
          assert_int_equal((uintptr_t)c.begin % 4, 0);
          /* The header really landed at that offset. */
          assert_int_equal(le32_at(f.mem + off), id);
          if (i == n - 1) assert_true(off + csize <= (p + 1) * ps);
        }
        /* One past the layout's last chunk does not exist. */
        tg_smb_chunk_t c;
        if (n < TG_SMB_MAX_CHUNKS_PER_PAGE)
          assert_int_equal(tg_smb_try_acquire_chunk_for_writing(&f.smb, p, n,
                                                                1, 1, &c),
                           -EINVAL);
      }
    }
    fixture_close(&f);
  }
}

static void layout_partition_rejects_layouts_without_chunks(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  static const unsigned bad[] = {0, 6, 7, 15, UINT_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, bad[i]), -EINVAL);
    assert_int_equal(raw_bitmap(&f, 0), 0);
  }
  fixture_close(&f);
}

/* smb.h: layout must be 1..5, anything else is -EINVAL. A layout that only
 * aliases a valid one in its low 3 bits (9 -> 1, 13 -> 5) must not reach the
 * bitmap: 13 << 28 would set the reserved bit 31. Static memory, so a failed
 * assertion does not leak. */
static void layout_partition_rejects_layouts_above_reserved_range(
    void **state) {
  (void)state;
  static _Alignas(4096) uint8_t page[4096];
  smb_fixture_t f = {.mem = page};
  memset(page, 0, sizeof(page));
  assert_int_equal(tg_smb_init(&f.smb, page, sizeof(page), 4096), 0);
  static const unsigned bad[] = {8, 9, 10, 11, 12, 13, 0x15, 0x80000001u};
  unsigned failures = 0;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int rv = tg_smb_try_partition_page(&f.smb, 0, bad[i]);
    uint32_t word = raw_bitmap(&f, 0);
    write_raw_bitmap(&f, 0, 0);
    if (rv != -EINVAL || word != 0) {
      print_error("layout %u: rv %d, bitmap 0x%08x (want -EINVAL, 0)\n",
                  bad[i], rv, word);
      failures++;
    }
  }
  assert_int_equal(failures, 0);
}

static void layout_bitmap_accessors_use_documented_bits(void **state) {
  (void)state;
  /* Layout at bits 28..30; bit 31 is reserved and ignored. */
  assert_int_equal(tg_smb_bitmap_layout(0x50000000u), 5);
  assert_int_equal(tg_smb_bitmap_layout(0xD0000000u), 5);
  assert_int_equal(tg_smb_bitmap_layout(0x70000000u), 7);
  assert_int_equal(tg_smb_bitmap_layout(0x0FFFFFFFu), 0);
  for (unsigned i = 0; i < TG_SMB_MAX_CHUNKS_PER_PAGE; i++) {
    for (unsigned s = 0; s < 4; s++) {
      uint32_t bm = layout_bits(TG_PAGE_DIV_14) | state_bits(i, s);
      assert_int_equal(tg_smb_bitmap_chunk_state(bm, i), s);
      assert_int_equal(tg_smb_bitmap_chunk_state(bm, i), (bm >> (2 * i)) & 3);
      for (unsigned j = 0; j < TG_SMB_MAX_CHUNKS_PER_PAGE; j++)
        if (j != i) assert_int_equal(tg_smb_bitmap_chunk_state(bm, j), 0);
    }
  }
}

/* --- geometry ----------------------------------------------------------- */

static void geometry_accepts_supported_page_sizes(void **state) {
  (void)state;
  for (size_t s = 0; s < NUM_PAGE_SIZES; s++) {
    size_t ps = kPageSizes[s];
    assert_true(tg_smb_geometry_valid(ps, ps));
    assert_true(tg_smb_geometry_valid(2 * ps, ps));
    assert_true(tg_smb_geometry_valid(TG_SMB_DEFAULT_SIZE, ps));
    assert_true(tg_smb_geometry_valid(32u * 1024 * 1024, ps));
  }
}

static void geometry_accepts_multiples_up_to_32mib(void **state) {
  (void)state;
  for (size_t size = 4096; size <= 32u * 1024 * 1024; size += 4096 * 977)
    assert_true(tg_smb_geometry_valid(size, 4096));
  assert_true(tg_smb_geometry_valid(3 * 32768, 32768));
  assert_true(tg_smb_geometry_valid(32u * 1024 * 1024 - 32768, 32768));
}

static void geometry_rejects_unsupported_page_sizes(void **state) {
  (void)state;
  static const size_t bad[] = {0,     1,     2048,  4095,  4097, 6144,
                               12288, 24576, 65536, 131072, SIZE_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_false(tg_smb_geometry_valid(196608, bad[i]));
    assert_false(tg_smb_geometry_valid(bad[i] ? bad[i] : 4096, bad[i]));
  }
}

static void geometry_rejects_size_not_a_multiple_of_the_page(void **state) {
  (void)state;
  assert_false(tg_smb_geometry_valid(0, 4096));
  assert_false(tg_smb_geometry_valid(4095, 4096));
  assert_false(tg_smb_geometry_valid(4096 + 4, 4096));
  assert_false(tg_smb_geometry_valid(8192, 16384));
  assert_false(tg_smb_geometry_valid(3 * 16384 + 8192, 16384));
}

static void geometry_rejects_size_over_32mib(void **state) {
  (void)state;
  for (size_t s = 0; s < NUM_PAGE_SIZES; s++) {
    size_t ps = kPageSizes[s];
    assert_false(tg_smb_geometry_valid(32u * 1024 * 1024 + ps, ps));
    assert_false(tg_smb_geometry_valid(64u * 1024 * 1024, ps));
    assert_false(tg_smb_geometry_valid(SIZE_MAX - (SIZE_MAX % ps), ps));
  }
}

static void init_fills_geometry_without_touching_memory(void **state) {
  (void)state;
  /* tg_smb_init must not touch the mapping: a 32 MiB claim over a 1-byte
   * object would crash under ASan if it did. */
  static uint8_t sentinel;
  tg_smb_t smb;
  assert_int_equal(tg_smb_init(&smb, &sentinel, 32u * 1024 * 1024, 32768), 0);
  assert_ptr_equal(smb.base, &sentinel);
  assert_int_equal(smb.size, 32u * 1024 * 1024);
  assert_int_equal(smb.page_size, 32768);
  assert_int_equal(smb.num_pages, 1024);
}

static void init_rejects_bad_geometry_and_null_base(void **state) {
  (void)state;
  static uint8_t sentinel;
  tg_smb_t smb;
  assert_int_equal(tg_smb_init(&smb, NULL, 4096, 4096), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 0, 4096), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 4096, 0), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 4096, 2048), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 36864, 12288), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 65536, 65536), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 4096 + 1, 4096), -EINVAL);
  assert_int_equal(tg_smb_init(&smb, &sentinel, 33u * 1024 * 1024, 4096),
                   -EINVAL);
}

/* --- state machine on one page ----------------------------------------- */

static void partition_succeeds_once_then_reports_chunk_state(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 2, 4096);
  assert_int_equal(tg_smb_page_bitmap(&f.smb, 1), 0);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 1, TG_PAGE_DIV_4), 0);
  assert_int_equal(raw_bitmap(&f, 1), 0x30000000u);
  assert_int_equal(raw_bitmap(&f, 0), 0);
  for (unsigned l = TG_PAGE_DIV_1; l <= TG_PAGE_DIV_14; l++)
    assert_int_equal(tg_smb_try_partition_page(&f.smb, 1, l),
                     TG_ECHUNK_STATE);
  assert_int_equal(raw_bitmap(&f, 1), 0x30000000u);
  assert_int_equal(tg_smb_page_bitmap(&f.smb, 1), 0x30000000u);
  /* Page 0 is independent. */
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_14), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x50000000u);
  fixture_close(&f);
}

static void partition_rejects_page_out_of_range(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 2, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 2, TG_PAGE_DIV_1),
                   -EINVAL);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, SIZE_MAX, TG_PAGE_DIV_1),
                   -EINVAL);
  fixture_close(&f);
}

static void acquire_for_writing_writes_header_bytes_exactly(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  memset(f.mem + 8, 0xAA, 4096 - 8); /* stale data from an earlier chunk */
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_4), 0);
  tg_smb_chunk_t c;
  assert_int_equal(tg_smb_try_acquire_chunk_for_writing(
                       &f.smb, 0, 2, 0x11223344u, 0xA1B2u, &c),
                   0);
  const uint8_t *h = f.mem + 8 + 2 * 1020;
  assert_ptr_equal(c.begin, h);
  static const uint8_t want[8] = {0x44, 0x33, 0x22, 0x11, 0xB2, 0xA1, 0, 0};
  assert_memory_equal(h, want, sizeof(want));
  /* Only the header: payload and neighbours untouched. */
  assert_int_equal(h[8], 0xAA);
  assert_int_equal(h[-1], 0xAA);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x30000000u | state_bits(2, TG_CHUNK_BEING_WRITTEN));
  fixture_close(&f);
}

static void acquire_for_writing_twice_fails(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_2), 0);
  tg_smb_chunk_t c, c2;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 1, 7, 3, &c), 0);
  memset(&c2, 0x5A, sizeof(c2));
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 1, 8, 4, &c2),
      TG_ECHUNK_STATE);
  /* The loser did not overwrite the winner's header. */
  assert_int_equal(le32_at(c.begin), 7);
  assert_int_equal(c.begin[4], 3);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x20000000u | state_bits(1, TG_CHUNK_BEING_WRITTEN));
  fixture_close(&f);
}

static void acquire_for_writing_on_unpartitioned_page_fails(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  tg_smb_chunk_t c;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 1, &c), -EINVAL);
  assert_int_equal(raw_bitmap(&f, 0), 0);
  fixture_close(&f);
}

static void chunk_moves_through_every_state_and_frees_page(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 8192);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_1), 0);
  tg_smb_chunk_t w, r;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 42, 9, &w), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x10000001u);
  tg_smb_chunk_set_packets(&w, 1, TG_CHUNK_LAST_PACKET_CONTINUES);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x10000003u);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w),
                   TG_ECHUNK_STATE);
  assert_int_equal(tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 1,
                                                        &r),
                   TG_ECHUNK_STATE);

  memset(&r, 0, sizeof(r));
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x10000002u);
  assert_ptr_equal(r.begin, w.begin);
  assert_int_equal(r.size, 8184);
  assert_int_equal(r.layout, TG_PAGE_DIV_1);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r),
                   TG_ECHUNK_STATE);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w),
                   TG_ECHUNK_STATE);

  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &r), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0); /* last chunk: not partitioned */
  assert_rejected(tg_smb_release_chunk_as_free(&f.smb, &r));

  /* The page takes a new layout. */
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_7), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x40000000u);
  fixture_close(&f);
}

static void acquire_for_reading_only_from_complete(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_4), 0);
  tg_smb_chunk_t w, r;
  /* Free. */
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r),
                   TG_ECHUNK_STATE);
  /* BeingWritten. */
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 1, &w), 0);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r),
                   TG_ECHUNK_STATE);
  /* Complete. */
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w), 0);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r), 0);
  /* BeingRead. */
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r),
                   TG_ECHUNK_STATE);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x30000000u | state_bits(0, TG_CHUNK_BEING_READ));
  fixture_close(&f);
}

static void release_as_free_only_from_being_read(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_2), 0);
  tg_smb_chunk_t w;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 1, &w), 0);
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &w), TG_ECHUNK_STATE);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w), 0);
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &w), TG_ECHUNK_STATE);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x20000000u | state_bits(0, TG_CHUNK_COMPLETE));
  fixture_close(&f);
}

static void page_bitmap_returns_to_zero_only_after_last_chunk_freed(
    void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_4), 0);
  tg_smb_chunk_t c[4];
  uint32_t want = 0x30000000u;
  for (unsigned i = 0; i < 4; i++) {
    assert_int_equal(tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, i, i, 1,
                                                          &c[i]),
                     0);
    want |= state_bits(i, TG_CHUNK_BEING_WRITTEN);
    assert_int_equal(raw_bitmap(&f, 0), want);
  }
  assert_int_equal(want, 0x30000055u);
  for (unsigned i = 0; i < 4; i++) {
    assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &c[i]), 0);
    want |= state_bits(i, TG_CHUNK_COMPLETE);
    assert_int_equal(raw_bitmap(&f, 0), want);
  }
  assert_int_equal(want, 0x300000FFu);
  /* Read in a scrambled order; the page must stay partitioned until the
   * very last one is freed. */
  static const unsigned order[4] = {2, 0, 3, 1};
  for (unsigned k = 0; k < 4; k++) {
    unsigned i = order[k];
    tg_smb_chunk_t r;
    assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, i, &r),
                     0);
    want = (want & ~state_bits(i, 3)) | state_bits(i, TG_CHUNK_BEING_READ);
    assert_int_equal(raw_bitmap(&f, 0), want);
    assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &r), 0);
    want &= ~state_bits(i, 3);
    if (k < 3) {
      assert_int_equal(raw_bitmap(&f, 0), want);
      assert_int_equal(tg_smb_bitmap_layout(raw_bitmap(&f, 0)),
                       TG_PAGE_DIV_4);
    }
  }
  assert_int_equal(raw_bitmap(&f, 0), 0);
  fixture_close(&f);
}

static void page_stays_partitioned_while_another_chunk_is_being_written(
    void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_2), 0);
  tg_smb_chunk_t a, b, r;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 1, &a), 0);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &a), 0);
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 1, 2, 1, &b), 0);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 0, &r), 0);
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &r), 0);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x20000000u | state_bits(1, TG_CHUNK_BEING_WRITTEN));
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &b), 0);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 1, &r), 0);
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &r), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0);
  fixture_close(&f);
}

static void bitmap_bit_positions_for_all_14_chunks(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_14), 0);
  assert_int_equal(raw_bitmap(&f, 0), 0x50000000u);
  /* Chunk i ends in state i % 4: 0 Free, 1 BeingWritten, 2 BeingRead,
   * 3 Complete. */
  uint32_t want = 0x50000000u;
  for (unsigned i = 0; i < 14; i++) {
    unsigned target = i % 4;
    if (target == TG_CHUNK_FREE) continue;
    tg_smb_chunk_t c, r;
    assert_int_equal(tg_smb_try_acquire_chunk_for_writing(
                         &f.smb, 0, i, i, (uint16_t)(i + 1), &c),
                     0);
    assert_int_equal(c.size, 292);
    if (target != TG_CHUNK_BEING_WRITTEN)
      assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &c), 0);
    if (target == TG_CHUNK_BEING_READ)
      assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, i, &r),
                       0);
    want |= (uint32_t)target << (2 * i);
    assert_int_equal(raw_bitmap(&f, 0), want);
  }
  /* Chunks 3..0 in states 3,2,1,0 are the byte 0b11100100 = 0xE4, and the
   * pattern repeats every 4 chunks; chunks 13, 12 are 01 00. */
  assert_int_equal(want, 0x54E4E4E4u);
  for (unsigned i = 0; i < 14; i++) {
    assert_int_equal((want >> (2 * i)) & 3, i % 4);
    assert_int_equal(tg_smb_bitmap_chunk_state(raw_bitmap(&f, 0), i), i % 4);
  }
  assert_int_equal(tg_smb_bitmap_layout(raw_bitmap(&f, 0)), TG_PAGE_DIV_14);
  fixture_close(&f);
}

static void chunk_locate_does_not_change_state(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 2, 16384);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 1, TG_PAGE_DIV_7), 0);
  tg_smb_chunk_t w, l;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 1, 6, 5, 5, &w), 0);
  uint32_t bm = tg_smb_page_bitmap(&f.smb, 1);
  assert_int_equal(tg_smb_chunk_locate(&f.smb, 1, 6, bm, &l), 0);
  assert_ptr_equal(l.begin, w.begin);
  assert_int_equal(l.size, w.size);
  assert_int_equal(l.size, ((16384 - 8) / 7) & ~3u);
  assert_int_equal(tg_smb_page_bitmap(&f.smb, 1), bm);
  assert_int_equal(tg_smb_chunk_locate(&f.smb, 1, 7, bm, &l), -EINVAL);
  assert_int_equal(tg_smb_chunk_locate(&f.smb, 2, 0, bm, &l), -EINVAL);
  assert_int_equal(tg_smb_chunk_locate(&f.smb, 0, 0, 0, &l), -EINVAL);
  fixture_close(&f);
}

/* --- packets field ------------------------------------------------------ */

static void packets_pack_puts_count_low_and_flags_high(void **state) {
  (void)state;
  assert_int_equal(tg_chunk_packets_pack(5, TG_CHUNK_FIRST_PACKET_CONTINUES),
                   0x0405);
  assert_int_equal(tg_chunk_packets_pack(0, TG_CHUNK_LAST_PACKET_CONTINUES),
                   0x0800);
  assert_int_equal(tg_chunk_packets_pack(0, TG_CHUNK_NEEDS_PATCHING), 0x1000);
  assert_int_equal(tg_chunk_packets_pack(1023, 0x3F), 0xFFFF);
  /* Out-of-range inputs are masked, never spill into the other field. */
  assert_int_equal(tg_chunk_packets_pack(1024, 0), 0);
  assert_int_equal(tg_chunk_packets_pack(1025, 0), 1);
  assert_int_equal(tg_chunk_packets_pack(0, 0x40), 0);
  assert_int_equal(tg_chunk_packets_count(0xFC00), 0);
  assert_int_equal(tg_chunk_packets_flags(0xFC00), 0x3F);
  assert_int_equal(tg_chunk_packets_count(0x03FF), 1023);
  assert_int_equal(tg_chunk_packets_flags(0x03FF), 0);
  assert_int_equal(tg_chunk_packets_count(0x0C07), 7);
  assert_int_equal(tg_chunk_packets_flags(0x0C07), 3);
  assert_int_equal(TG_CHUNK_MAX_PACKETS, 1023);
}

static void packets_set_writes_little_endian_bytes(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_1), 0);
  tg_smb_chunk_t c;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 0, 1, 2, &c), 0);
  tg_smb_chunk_set_packets(&c, 0x123,
                           TG_CHUNK_FIRST_PACKET_CONTINUES |
                               TG_CHUNK_NEEDS_PATCHING);
  /* 0x123 | 0x5 << 10 = 0x1523 */
  assert_int_equal(f.mem[8 + 6], 0x23);
  assert_int_equal(f.mem[8 + 7], 0x15);
  tg_smb_chunk_set_packets(&c, 1023, TG_CHUNK_LAST_PACKET_CONTINUES);
  assert_int_equal(f.mem[8 + 6], 0xFF);
  assert_int_equal(f.mem[8 + 7], 0x0B);
  /* chunk_id and writer_id untouched. */
  static const uint8_t hdr[6] = {1, 0, 0, 0, 2, 0};
  assert_memory_equal(f.mem + 8, hdr, sizeof(hdr));
  fixture_close(&f);
}

/* --- service-side robustness -------------------------------------------- */

static void service_rejects_page_index_out_of_range(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 4, 4096);
  tg_smb_chunk_t c;
  static const size_t bad[] = {4, 5, 1000, SIZE_MAX / 4096, SIZE_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, bad[i], 0,
                                                          &c),
                     -EINVAL);
    assert_int_equal(tg_smb_try_acquire_chunk_for_writing(&f.smb, bad[i], 0,
                                                          1, 1, &c),
                     -EINVAL);
    assert_int_equal(
        tg_smb_chunk_locate(&f.smb, bad[i], 0, 0x10000003u, &c), -EINVAL);
  }
  /* A forged chunk handle (page_idx is u32) must not be dereferenced. */
  tg_smb_chunk_t forged = {.page_idx = 4, .chunk_idx = 0};
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &forged), -EINVAL);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &forged), -EINVAL);
  forged.page_idx = UINT32_MAX;
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &forged), -EINVAL);
  fixture_close(&f);
}

static void service_rejects_chunk_index_beyond_layout(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  /* Both chunks of a DIV_2 page Complete, plus garbage in the state bits of
   * chunks that do not exist in this layout. */
  write_raw_bitmap(&f, 0, 0x2FFFFFFFu);
  tg_smb_chunk_t c;
  static const unsigned bad[] = {2, 3, 13, 14, 15, 255, 256, UINT_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, bad[i],
                                                          &c),
                     -EINVAL);
    assert_int_equal(tg_smb_chunk_locate(&f.smb, 0, bad[i], 0x2FFFFFFFu, &c),
                     -EINVAL);
  }
  assert_int_equal(raw_bitmap(&f, 0), 0x2FFFFFFFu);
  /* The chunks that do exist are readable. */
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 1, &c), 0);
  assert_int_equal(c.size, 2044);
  fixture_close(&f);
}

static void service_rejects_reserved_layouts_in_bitmap(void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  static const uint32_t words[] = {0x6FFFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu,
                                   0xEAAAAAAAu, 0x60000000u, 0x0FFFFFFFu};
  for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
    write_raw_bitmap(&f, 0, words[w]);
    for (unsigned i = 0; i <= TG_SMB_MAX_CHUNKS_PER_PAGE; i++) {
      tg_smb_chunk_t c;
      assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, i, &c),
                       -EINVAL);
      assert_int_equal(tg_smb_chunk_locate(&f.smb, 0, i, words[w], &c),
                       -EINVAL);
      tg_smb_chunk_t forged = {.page_idx = 0, .chunk_idx = (uint8_t)i};
      assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &forged),
                       -EINVAL);
      assert_int_equal(raw_bitmap(&f, 0), words[w]);
    }
  }
  fixture_close(&f);
}

static void service_release_fails_when_producer_scribbled_the_state(
    void **state) {
  (void)state;
  smb_fixture_t f;
  fixture_open(&f, 1, 4096);
  assert_int_equal(tg_smb_try_partition_page(&f.smb, 0, TG_PAGE_DIV_4), 0);
  tg_smb_chunk_t w, r;
  assert_int_equal(
      tg_smb_try_acquire_chunk_for_writing(&f.smb, 0, 1, 1, 1, &w), 0);
  assert_int_equal(tg_smb_release_chunk_as_complete(&f.smb, &w), 0);
  assert_int_equal(tg_smb_try_acquire_chunk_for_reading(&f.smb, 0, 1, &r), 0);
  /* The producer flips our BeingRead chunk back to Complete. */
  write_raw_bitmap(&f, 0, 0x30000000u | state_bits(1, TG_CHUNK_COMPLETE));
  assert_int_equal(tg_smb_release_chunk_as_free(&f.smb, &r), TG_ECHUNK_STATE);
  assert_int_equal(raw_bitmap(&f, 0),
                   0x30000000u | state_bits(1, TG_CHUNK_COMPLETE));
  /* ... or repartitions the page under us to a layout without chunk 1. */
  write_raw_bitmap(&f, 0, 0x10000002u);
  assert_rejected(tg_smb_release_chunk_as_free(&f.smb, &r));
  assert_int_equal(raw_bitmap(&f, 0), 0x10000002u);
  fixture_close(&f);
}

/* --- chunk validator ---------------------------------------------------- */

/* A chunk copy assembled byte by byte. */
typedef struct chunk_buf {
  uint8_t b[512];
  size_t n;
} chunk_buf_t;

static void cb_header(chunk_buf_t *c, uint32_t id, uint16_t writer,
                      unsigned count, unsigned flags) {
  memset(c, 0, sizeof(*c));
  uint16_t packets = (uint16_t)(count | (flags << 10));
  c->b[0] = (uint8_t)id;
  c->b[1] = (uint8_t)(id >> 8);
  c->b[2] = (uint8_t)(id >> 16);
  c->b[3] = (uint8_t)(id >> 24);
  c->b[4] = (uint8_t)writer;
  c->b[5] = (uint8_t)(writer >> 8);
  c->b[6] = (uint8_t)packets;
  c->b[7] = (uint8_t)(packets >> 8);
  c->n = 8;
}

static void cb_bytes(chunk_buf_t *c, const void *p, size_t n) {
  assert_true(c->n + n <= sizeof(c->b));
  memcpy(c->b + c->n, p, n);
  c->n += n;
}

/* Fragment with the writer's 4-byte redundant varint size. */
static void cb_fragment(chunk_buf_t *c, const char *data, uint32_t size) {
  uint8_t h[4] = {(uint8_t)((size & 0x7F) | 0x80),
                  (uint8_t)(((size >> 7) & 0x7F) | 0x80),
                  (uint8_t)(((size >> 14) & 0x7F) | 0x80),
                  (uint8_t)((size >> 21) & 0x7F)};
  cb_bytes(c, h, 4);
  if (data) cb_bytes(c, data, size);
}

static unsigned iterate_all(const chunk_buf_t *c, const tg_chunk_info_t *info,
                            const uint8_t **data, size_t *len, unsigned max) {
  tg_fragment_iter_t it;
  tg_fragment_iter_init(&it, c->b, c->n, info);
  unsigned k = 0;
  const uint8_t *d;
  size_t l;
  while (tg_fragment_iter_next(&it, &d, &l)) {
    assert_true(k < max);
    assert_true(d >= c->b + 8 && d + l <= c->b + c->n);
    data[k] = d;
    len[k] = l;
    k++;
  }
  assert_int_equal(tg_fragment_iter_next(&it, &d, &l), 0);
  return k;
}

static void validate_clean_chunk_with_three_fragments(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 0x01020304u, 0x0102, 3, 0);
  /* 5 = 85 80 80 00, written out once by hand. */
  static const uint8_t size5[4] = {0x85, 0x80, 0x80, 0x00};
  cb_bytes(&c, size5, 4);
  cb_bytes(&c, "hello", 5);
  cb_fragment(&c, "xy", 2);
  cb_fragment(&c, "abc", 3);
  c.n += 40; /* unused tail of the chunk, zeroed */

  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.chunk_id, 0x01020304u);
  assert_int_equal(info.writer_id, 0x0102);
  assert_int_equal(info.packet_count, 3);
  assert_int_equal(info.flags, 0);
  assert_int_equal(info.valid_fragments, 3);
  assert_false(info.ends_with_drop);
  assert_false(info.last_fragment_open);
  assert_int_equal(info.violations, 0);
  assert_int_equal(info.payload_used, 4 + 5 + 4 + 2 + 4 + 3);
  assert_int_equal(info.headers_end, 4 + 5 + 4 + 2 + 4); /* "abc" onwards */

  const uint8_t *d[4];
  size_t l[4];
  assert_int_equal(iterate_all(&c, &info, d, l, 4), 3);
  assert_int_equal(l[0], 5);
  assert_memory_equal(d[0], "hello", 5);
  assert_ptr_equal(d[0], c.b + 12);
  assert_int_equal(l[1], 2);
  assert_memory_equal(d[1], "xy", 2);
  assert_int_equal(l[2], 3);
  assert_memory_equal(d[2], "abc", 3);

  /* The scraping path (complete=false) sees the same clean chunk. */
  tg_chunk_info_t open;
  assert_int_equal(tg_chunk_validate(c.b, c.n, false, &open), 0);
  assert_memory_equal(&open, &info, sizeof(info));
}

static void validate_reports_known_flags(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 9, 3, 2,
            TG_CHUNK_FIRST_PACKET_CONTINUES | TG_CHUNK_LAST_PACKET_CONTINUES |
                TG_CHUNK_NEEDS_PATCHING);
  cb_fragment(&c, "a", 1);
  cb_fragment(&c, "b", 1);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.flags, 7);
  assert_int_equal(info.valid_fragments, 2);
}

static void validate_rejects_writer_id_zero(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 0, 1, 0);
  cb_fragment(&c, "abc", 3);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_WRITER_ID_ZERO);
  assert_int_equal(info.valid_fragments, 0);
  assert_int_equal(info.payload_used, 0);
  const uint8_t *d[1];
  size_t l[1];
  assert_int_equal(iterate_all(&c, &info, d, l, 1), 0);
}

static void validate_flags_unknown_bits(void **state) {
  (void)state;
  static const unsigned unknown[] = {0x08, 0x10, 0x20, 0x38};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    chunk_buf_t c;
    cb_header(&c, 1, 1, 1, unknown[i] | TG_CHUNK_NEEDS_PATCHING);
    cb_fragment(&c, "abc", 3);
    tg_chunk_info_t info;
    assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                     TG_EABI_VIOLATION);
    assert_int_equal(info.violations, TG_CHUNK_V_UNKNOWN_FLAGS);
    assert_int_equal(info.flags, TG_CHUNK_NEEDS_PATCHING); /* known only */
    assert_int_equal(info.valid_fragments, 1);
  }
}

static void validate_fragment_overflow_keeps_earlier_fragments(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 3, 0);
  cb_fragment(&c, "abc", 3);
  cb_fragment(&c, "de", 2);
  cb_fragment(&c, NULL, 100); /* claims 100 bytes, 10 remain */
  cb_bytes(&c, "0123456789", 10);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_FRAGMENT_OVERFLOW);
  assert_int_equal(info.valid_fragments, 2);
  assert_int_equal(info.payload_used, 7 + 6);
  const uint8_t *d[3];
  size_t l[3];
  assert_int_equal(iterate_all(&c, &info, d, l, 3), 2);
  assert_memory_equal(d[1], "de", 2);
}

static void validate_fragment_exactly_filling_chunk_is_accepted(
    void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 1, 0);
  cb_fragment(&c, "0123456789", 10);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.payload_used, 14);
  /* One byte less is an overflow. */
  assert_int_equal(tg_chunk_validate(c.b, c.n - 1, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_FRAGMENT_OVERFLOW);
  assert_int_equal(info.valid_fragments, 0);
}

static void validate_header_truncated(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 2, 0);
  cb_fragment(&c, "abc", 3);
  static const uint8_t partial[2] = {0x85, 0x80};
  cb_bytes(&c, partial, 2);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_HEADER_TRUNCATED);
  assert_int_equal(info.valid_fragments, 1);
  assert_int_equal(info.payload_used, 7);

  /* No byte at all left for the second size header. */
  assert_int_equal(tg_chunk_validate(c.b, c.n - 2, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_HEADER_TRUNCATED);
  assert_int_equal(info.valid_fragments, 1);
}

static void validate_bad_varint_longer_than_four_bytes(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 2, 0);
  cb_fragment(&c, "abc", 3);
  static const uint8_t five[5] = {0x81, 0x80, 0x80, 0x80, 0x00};
  cb_bytes(&c, five, 5);
  cb_bytes(&c, "x", 1);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_BAD_SIZE_VARINT);
  assert_int_equal(info.valid_fragments, 1);
  assert_int_equal(info.payload_used, 7);
}

static void validate_drop_marker_as_last_fragment(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 2, TG_CHUNK_FIRST_PACKET_CONTINUES);
  cb_fragment(&c, "ab", 2);
  static const uint8_t drop[4] = {0xFF, 0xFF, 0xFF, 0x7F};
  cb_bytes(&c, drop, 4);
  c.n += 16;
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_true(info.ends_with_drop);
  assert_int_equal(info.violations, 0);
  assert_int_equal(info.valid_fragments, 1);
  assert_int_equal(info.packet_count, 2);
  assert_int_equal(info.payload_used, 6);
  const uint8_t *d[2];
  size_t l[2];
  assert_int_equal(iterate_all(&c, &info, d, l, 2), 1);
  assert_memory_equal(d[0], "ab", 2);

  /* Also while scraping. */
  assert_int_equal(tg_chunk_validate(c.b, c.n, false, &info), 0);
  assert_true(info.ends_with_drop);
}

static void validate_drop_marker_not_last(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 3, 0);
  cb_fragment(&c, "ab", 2);
  static const uint8_t drop[4] = {0xFF, 0xFF, 0xFF, 0x7F};
  cb_bytes(&c, drop, 4);
  cb_fragment(&c, "cd", 2);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                   TG_EABI_VIOLATION);
  assert_int_equal(info.violations, TG_CHUNK_V_DROP_NOT_LAST);
  assert_true(info.ends_with_drop);
  assert_int_equal(info.valid_fragments, 1);
  assert_int_equal(info.payload_used, 6);
}

static void validate_continuation_flags_without_packets(void **state) {
  (void)state;
  static const unsigned cont[] = {TG_CHUNK_FIRST_PACKET_CONTINUES,
                                  TG_CHUNK_LAST_PACKET_CONTINUES,
                                  TG_CHUNK_FIRST_PACKET_CONTINUES |
                                      TG_CHUNK_LAST_PACKET_CONTINUES |
                                      TG_CHUNK_NEEDS_PATCHING};
  for (size_t i = 0; i < sizeof(cont) / sizeof(cont[0]); i++) {
    chunk_buf_t c;
    cb_header(&c, 1, 1, 0, cont[i]);
    c.n += 8;
    tg_chunk_info_t info;
    assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info),
                     TG_EABI_VIOLATION);
    assert_int_equal(info.violations, TG_CHUNK_V_FLAGS_WITHOUT_PACKETS);
    /* The bogus continuation flags are not passed on. */
    assert_int_equal(info.flags, cont[i] & TG_CHUNK_NEEDS_PATCHING);
    assert_int_equal(info.valid_fragments, 0);
  }
  /* NEEDS_PATCHING alone on an empty chunk is fine. */
  chunk_buf_t c;
  cb_header(&c, 1, 1, 0, TG_CHUNK_NEEDS_PATCHING);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.flags, TG_CHUNK_NEEDS_PATCHING);
}

/* abc, then a size header still 0 because the packet is being written. */
static void build_open_chunk(chunk_buf_t *c) {
  cb_header(c, 77, 5, 2, 0);
  cb_fragment(c, "abc", 3);
  cb_fragment(c, NULL, 0);
  c->n += 20;
}

static void validate_incomplete_chunk_trailing_empty_fragment_is_open(
    void **state) {
  (void)state;
  chunk_buf_t c;
  build_open_chunk(&c);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, false, &info), 0);
  assert_true(info.last_fragment_open);
  assert_false(info.ends_with_drop);
  assert_int_equal(info.violations, 0);
  assert_int_equal(info.valid_fragments, 1);
  assert_int_equal(info.payload_used, 7);
  const uint8_t *d[2];
  size_t l[2];
  assert_int_equal(iterate_all(&c, &info, d, l, 2), 1);
}

static void validate_complete_chunk_trailing_empty_fragment_is_empty_packet(
    void **state) {
  (void)state;
  chunk_buf_t c;
  build_open_chunk(&c);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_false(info.last_fragment_open);
  assert_int_equal(info.violations, 0);
  assert_int_equal(info.valid_fragments, 2);
  assert_int_equal(info.payload_used, 11);
  const uint8_t *d[2];
  size_t l[2];
  assert_int_equal(iterate_all(&c, &info, d, l, 2), 2);
  assert_int_equal(l[1], 0);
  assert_ptr_equal(d[1], c.b + 8 + 7 + 4);
}

static void validate_incomplete_chunk_empty_fragment_in_middle_is_packet(
    void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 3, 0);
  cb_fragment(&c, "abc", 3);
  cb_fragment(&c, NULL, 0);
  cb_fragment(&c, "d", 1);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, false, &info), 0);
  assert_false(info.last_fragment_open);
  assert_int_equal(info.valid_fragments, 3);
  assert_int_equal(info.payload_used, c.n - 8);
}

static void validate_accepts_short_varint_size_headers(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 1, 1, 4, 0);
  static const uint8_t one[1] = {0x03};
  cb_bytes(&c, one, 1);
  cb_bytes(&c, "abc", 3);
  static const uint8_t two[2] = {0x82, 0x00}; /* 2, non-minimal */
  cb_bytes(&c, two, 2);
  cb_bytes(&c, "de", 2);
  static const uint8_t three[3] = {0x81, 0x80, 0x00}; /* 1 */
  cb_bytes(&c, three, 3);
  cb_bytes(&c, "f", 1);
  static const uint8_t zero[1] = {0x00};
  cb_bytes(&c, zero, 1);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.valid_fragments, 4);
  assert_int_equal(info.payload_used, 4 + 4 + 4 + 1);
  const uint8_t *d[4];
  size_t l[4];
  assert_int_equal(iterate_all(&c, &info, d, l, 4), 4);
  assert_int_equal(l[0], 3);
  assert_memory_equal(d[0], "abc", 3);
  assert_int_equal(l[1], 2);
  assert_memory_equal(d[1], "de", 2);
  assert_int_equal(l[2], 1);
  assert_memory_equal(d[2], "f", 1);
  assert_int_equal(l[3], 0);
}

static void validate_rejects_chunk_smaller_than_header(void **state) {
  (void)state;
  uint8_t b[8] = {1, 0, 0, 0, 1, 0, 1, 0};
  for (size_t n = 0; n < 8; n++) {
    /* Exact-size heap copy so ASan sees any read past |n|. */
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, b, n);
    tg_chunk_info_t info;
    memset(&info, 0x5A, sizeof(info));
    assert_int_equal(tg_chunk_validate(copy, n, true, &info),
                     TG_EABI_VIOLATION);
    assert_int_equal(info.violations, TG_CHUNK_V_TOO_SMALL);
    assert_int_equal(info.valid_fragments, 0);
    assert_int_equal(info.payload_used, 0);
    tg_fragment_iter_t it;
    tg_fragment_iter_init(&it, copy, n, &info);
    const uint8_t *d;
    size_t l;
    assert_int_equal(tg_fragment_iter_next(&it, &d, &l), 0);
    free(copy);
  }
}

static void validate_header_only_chunk_is_clean(void **state) {
  (void)state;
  chunk_buf_t c;
  cb_header(&c, 0xFFFFFFFFu, 0xFFFF, 0, 0);
  tg_chunk_info_t info;
  assert_int_equal(tg_chunk_validate(c.b, c.n, true, &info), 0);
  assert_int_equal(info.chunk_id, 0xFFFFFFFFu);
  assert_int_equal(info.writer_id, 0xFFFF);
  assert_int_equal(info.valid_fragments, 0);
  assert_int_equal(info.payload_used, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(layout_chunk_sizes_match_perfetto_for_4k_pages),
      cmocka_unit_test(layout_chunk_size_formula_holds_for_every_page_size),
      cmocka_unit_test(
          layout_chunk_offsets_match_for_every_page_size_and_layout),
      cmocka_unit_test(layout_partition_rejects_layouts_without_chunks),
      cmocka_unit_test(layout_partition_rejects_layouts_above_reserved_range),
      cmocka_unit_test(layout_bitmap_accessors_use_documented_bits),
      cmocka_unit_test(geometry_accepts_supported_page_sizes),
      cmocka_unit_test(geometry_accepts_multiples_up_to_32mib),
      cmocka_unit_test(geometry_rejects_unsupported_page_sizes),
      cmocka_unit_test(geometry_rejects_size_not_a_multiple_of_the_page),
      cmocka_unit_test(geometry_rejects_size_over_32mib),
      cmocka_unit_test(init_fills_geometry_without_touching_memory),
      cmocka_unit_test(init_rejects_bad_geometry_and_null_base),
      cmocka_unit_test(partition_succeeds_once_then_reports_chunk_state),
      cmocka_unit_test(partition_rejects_page_out_of_range),
      cmocka_unit_test(acquire_for_writing_writes_header_bytes_exactly),
      cmocka_unit_test(acquire_for_writing_twice_fails),
      cmocka_unit_test(acquire_for_writing_on_unpartitioned_page_fails),
      cmocka_unit_test(chunk_moves_through_every_state_and_frees_page),
      cmocka_unit_test(acquire_for_reading_only_from_complete),
      cmocka_unit_test(release_as_free_only_from_being_read),
      cmocka_unit_test(page_bitmap_returns_to_zero_only_after_last_chunk_freed),
      cmocka_unit_test(
          page_stays_partitioned_while_another_chunk_is_being_written),
      cmocka_unit_test(bitmap_bit_positions_for_all_14_chunks),
      cmocka_unit_test(chunk_locate_does_not_change_state),
      cmocka_unit_test(packets_pack_puts_count_low_and_flags_high),
      cmocka_unit_test(packets_set_writes_little_endian_bytes),
      cmocka_unit_test(service_rejects_page_index_out_of_range),
      cmocka_unit_test(service_rejects_chunk_index_beyond_layout),
      cmocka_unit_test(service_rejects_reserved_layouts_in_bitmap),
      cmocka_unit_test(service_release_fails_when_producer_scribbled_the_state),
      cmocka_unit_test(validate_clean_chunk_with_three_fragments),
      cmocka_unit_test(validate_reports_known_flags),
      cmocka_unit_test(validate_rejects_writer_id_zero),
      cmocka_unit_test(validate_flags_unknown_bits),
      cmocka_unit_test(validate_fragment_overflow_keeps_earlier_fragments),
      cmocka_unit_test(validate_fragment_exactly_filling_chunk_is_accepted),
      cmocka_unit_test(validate_header_truncated),
      cmocka_unit_test(validate_bad_varint_longer_than_four_bytes),
      cmocka_unit_test(validate_drop_marker_as_last_fragment),
      cmocka_unit_test(validate_drop_marker_not_last),
      cmocka_unit_test(validate_continuation_flags_without_packets),
      cmocka_unit_test(
          validate_incomplete_chunk_trailing_empty_fragment_is_open),
      cmocka_unit_test(
          validate_complete_chunk_trailing_empty_fragment_is_empty_packet),
      cmocka_unit_test(
          validate_incomplete_chunk_empty_fragment_in_middle_is_packet),
      cmocka_unit_test(validate_accepts_short_varint_size_headers),
      cmocka_unit_test(validate_rejects_chunk_smaller_than_header),
      cmocka_unit_test(validate_header_only_chunk_is_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
