/* Zero-copy protobuf writer, varints and the field reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "tracegate/error.h"

static void redundant_varint_boundary_values(void **state) {
  (void)state;
  const uint32_t values[] = {0,       1,         127,       128,
                             16383,   16384,     2097151,   2097152,
                             1u << 27, 0x0FFFFFFEu, 0x0FFFFFFFu};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    uint8_t b[4];
    tg_pb_write_redundant_varint(b, values[i]);
    /* Continuation bits on the first three bytes, never on the last. */
    assert_true(b[0] & 0x80);
    assert_true(b[1] & 0x80);
    assert_true(b[2] & 0x80);
    assert_false(b[3] & 0x80);
    uint64_t v = 0;
    assert_int_equal(tg_pb_read_varint(b, b + 4, &v), 4);
    assert_int_equal(v, values[i]);
  }
  uint8_t five[4];
  tg_pb_write_redundant_varint(five, 5);
  static const uint8_t expect5[4] = {0x85, 0x80, 0x80, 0x00};
  assert_memory_equal(five, expect5, 4);
  uint8_t max[4];
  tg_pb_write_redundant_varint(max, TG_PB_MAX_REDUNDANT_VARINT);
  static const uint8_t expect_max[4] = {0xFF, 0xFF, 0xFF, 0x7F};
  assert_memory_equal(max, expect_max, 4);
}

static void varint_sizes_at_boundaries(void **state) {
  (void)state;
  const struct {
    uint64_t v;
    size_t n;
  } cases[] = {{0, 1},          {127, 1},           {128, 2},
               {16383, 2},      {16384, 3},         {(1ull << 35) - 1, 5},
               {1ull << 35, 6}, {1ull << 63, 10},   {UINT64_MAX, 10}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint8_t b[10];
    assert_int_equal(tg_pb_write_varint(b, cases[i].v) - b, cases[i].n);
    assert_int_equal(tg_pb_varint_size(cases[i].v), cases[i].n);
    uint64_t v;
    assert_int_equal(tg_pb_read_varint(b, b + cases[i].n, &v), cases[i].n);
    assert_true(v == cases[i].v);
    /* One byte short is a truncation, not a misread. */
    assert_int_equal(tg_pb_read_varint(b, b + cases[i].n - 1, &v), 0);
  }
  /* An 11-byte varint is rejected. */
  uint8_t longv[11];
  memset(longv, 0x80, 10);
  longv[10] = 0;
  uint64_t v;
  assert_int_equal(tg_pb_read_varint(longv, longv + 11, &v), 0);
}

static void scalar_fields_encode_exactly(void **state) {
  (void)state;
  uint8_t buf[64];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_varint(&w, 1, 150);
  tg_pbw_append_sint(&w, 2, -1);
  tg_pbw_append_fixed32(&w, 3, 0x01020304);
  tg_pbw_append_string(&w, 4, "hi");
  tg_pbw_append_int(&w, 5, -1);
  static const uint8_t expect[] = {
      0x08, 0x96, 0x01,                   /* 1: 150 */
      0x10, 0x01,                         /* 2: zigzag(-1) = 1 */
      0x1D, 0x04, 0x03, 0x02, 0x01,       /* 3: fixed32 */
      0x22, 0x02, 'h',  'i',              /* 4: "hi" */
      0x28, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, /* 5: -1 as 10-byte varint */
      0xFF, 0xFF, 0xFF, 0xFF, 0x01};
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_int_equal(tg_pbw_written(&w), sizeof(expect));
  assert_memory_equal(buf, expect, sizeof(expect));
}

static void nested_message_backfill(void **state) {
  (void)state;
  uint8_t buf[64];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  assert_int_equal(tg_pbw_begin_nested(&w, 11), 0);
  tg_pbw_append_varint(&w, 1, 1);
  assert_int_equal(tg_pbw_begin_nested(&w, 2), 0);
  tg_pbw_append_string(&w, 3, "abc");
  assert_int_equal(tg_pbw_end_nested(&w), 5);
  assert_int_equal(tg_pbw_end_nested(&w), 2 + 1 + 4 + 5);
  static const uint8_t expect[] = {
      0x5A, 0x8C, 0x80, 0x80, 0x00, /* 11: LEN 12 (redundant) */
      0x08, 0x01,                   /* 1: 1 */
      0x12, 0x85, 0x80, 0x80, 0x00, /* 2: LEN 5 (redundant) */
      0x1A, 0x03, 'a',  'b',  'c'};
  assert_int_equal(tg_pbw_written(&w), sizeof(expect));
  assert_memory_equal(buf, expect, sizeof(expect));
}

/* A refill hook that hands out small segments of one arena and remembers
 * the used part of each retired segment, so the logical byte stream can be
 * rebuilt once the sizes have been back-filled. It also moves size fields out of retired segments into patch
 * slots, as the agent does when a chunk is committed. */
typedef struct segs {
  uint8_t arena[8192];
  size_t next;
  size_t seg_len;
  uint8_t *seg_begin;
  uint8_t *used_begin[512]; /* retired segments, in order */
  size_t used_len[512];
  size_t nsegs;
  int relocate;
  uint8_t patch[TG_PBW_MAX_DEPTH][4];
  uint8_t *patched_from[TG_PBW_MAX_DEPTH];
  int refills;
} segs_t;

static int refill(void *ctx, tg_pbw_t *w, size_t min_contiguous) {
  segs_t *s = ctx;
  s->used_begin[s->nsegs] = s->seg_begin;
  s->used_len[s->nsegs++] = (size_t)(w->cur - s->seg_begin);
  if (s->relocate) {
    for (unsigned i = 0; i < w->depth; i++) {
      uint8_t *f = w->nest[i].size_field;
      if (f >= s->seg_begin && f < s->seg_begin + s->seg_len) {
        s->patched_from[i] = f;
        w->nest[i].size_field = s->patch[i];
      }
    }
  }
  size_t len = s->seg_len < min_contiguous ? min_contiguous : s->seg_len;
  if (s->next + len > sizeof(s->arena)) return TG_ENO_SPACE;
  s->seg_begin = s->arena + s->next;
  s->next += len;
  w->cur = s->seg_begin;
  w->end = s->seg_begin + len;
  s->refills++;
  return 0;
}

static void write_sample(tg_pbw_t *w) {
  tg_pbw_begin_nested(w, 1);
  tg_pbw_append_varint(w, 2, 123456789);
  tg_pbw_begin_nested(w, 3);
  static const char text[] = "the quick brown fox jumps over the lazy dog";
  tg_pbw_append_bytes(w, 4, text, sizeof(text) - 1);
  tg_pbw_append_fixed64(w, 5, 0x1122334455667788ull);
  tg_pbw_end_nested(w);
  tg_pbw_append_double(w, 6, 3.5);
  tg_pbw_end_nested(w);
  tg_pbw_append_varint(w, 7, 1);
}

static void writes_split_across_segments_match_contiguous(void **state) {
  (void)state;
  uint8_t whole[512];
  tg_pbw_t w;
  tg_pbw_init(&w, whole, sizeof(whole), NULL, NULL);
  write_sample(&w);
  size_t whole_len = (size_t)tg_pbw_written(&w);

  for (size_t seg = 4; seg <= 40; seg++) {
    segs_t *s = calloc(1, sizeof(*s));
    s->seg_len = seg;
    s->seg_begin = s->arena;
    s->next = seg;
    tg_pbw_init(&w, s->arena, seg, refill, s);
    write_sample(&w);
    assert_int_equal(tg_pbw_error(&w), 0);
    assert_int_equal(tg_pbw_written(&w), whole_len);
    s->used_begin[s->nsegs] = s->seg_begin;
    s->used_len[s->nsegs++] = (size_t)(w.cur - s->seg_begin);
    uint8_t stream[512];
    size_t len = 0;
    for (size_t i = 0; i < s->nsegs; i++) {
      assert_true(len + s->used_len[i] <= sizeof(stream));
      memcpy(stream + len, s->used_begin[i], s->used_len[i]);
      len += s->used_len[i];
    }
    assert_true(s->refills > 0);
    free(s);
    assert_int_equal(len, whole_len);
    assert_memory_equal(stream, whole, whole_len);
  }
}

static void refill_hook_relocates_size_fields(void **state) {
  (void)state;
  segs_t *s = calloc(1, sizeof(*s));
  s->seg_len = 16;
  s->seg_begin = s->arena;
  s->next = 16;
  s->relocate = 1;
  tg_pbw_t w;
  tg_pbw_init(&w, s->arena, 16, refill, s);
  tg_pbw_begin_nested(&w, 1);
  uint8_t *orig = w.nest[0].size_field;
  static const uint8_t payload[40] = {1, 2, 3};
  tg_pbw_append_bytes(&w, 2, payload, sizeof(payload));
  assert_int_equal(tg_pbw_end_nested(&w), 2 + sizeof(payload));
  /* The size went to the patch slot; the retired segment kept its zero. */
  assert_ptr_equal(s->patched_from[0], orig);
  uint64_t v;
  assert_int_equal(tg_pb_read_varint(s->patch[0], s->patch[0] + 4, &v), 4);
  assert_int_equal(v, 42);
  assert_int_equal(tg_pb_read_varint(orig, orig + 4, &v), 4);
  assert_int_equal(v, 0);
  free(s);
}

static void size_field_never_straddles_segments(void **state) {
  (void)state;
  segs_t *s = calloc(1, sizeof(*s));
  s->seg_len = 6;
  s->seg_begin = s->arena;
  s->next = 6;
  tg_pbw_t w;
  tg_pbw_init(&w, s->arena, 6, refill, s);
  tg_pbw_append_varint(&w, 1, 300); /* 3 bytes: 3 left, fewer than 4 */
  tg_pbw_begin_nested(&w, 2);       /* tag in seg 0, size in seg 1 */
  uint8_t *f = w.nest[0].size_field;
  assert_true(f >= s->arena + 6);
  assert_true(f + 4 <= s->arena + 12);
  tg_pbw_end_nested(&w);
  assert_int_equal(tg_pbw_error(&w), 0);
  free(s);
}

static void out_of_space_is_sticky(void **state) {
  (void)state;
  uint8_t buf[8];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  tg_pbw_append_varint(&w, 1, 1);
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_int_equal(tg_pbw_begin_nested(&w, 2), 0);
  tg_pbw_append_bytes(&w, 3, "0123456789", 10);
  assert_int_equal(tg_pbw_error(&w), TG_ENO_SPACE);
  assert_int_equal(tg_pbw_end_nested(&w), TG_ENO_SPACE);
  tg_pbw_append_varint(&w, 4, 4); /* no-op, no crash */
  assert_int_equal(tg_pbw_error(&w), TG_ENO_SPACE);
}

static void nesting_depth_is_bounded(void **state) {
  (void)state;
  uint8_t buf[512];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  for (int i = 0; i < TG_PBW_MAX_DEPTH; i++)
    assert_int_equal(tg_pbw_begin_nested(&w, 1), 0);
  assert_int_equal(tg_pbw_begin_nested(&w, 1), TG_ENESTING_TOO_DEEP);
}

static void reader_walks_what_writer_wrote(void **state) {
  (void)state;
  uint8_t buf[512];
  tg_pbw_t w;
  tg_pbw_init(&w, buf, sizeof(buf), NULL, NULL);
  write_sample(&w);
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, buf, (size_t)tg_pbw_written(&w));
  tg_pb_field_t f;
  assert_int_equal(tg_pb_reader_next(&r, &f), 1);
  assert_int_equal(f.id, 1);
  assert_int_equal(f.type, TG_PB_WT_LEN);
  tg_pb_reader_t inner;
  tg_pb_reader_init(&inner, f.data, f.size);
  tg_pb_field_t g;
  assert_int_equal(tg_pb_reader_next(&inner, &g), 1);
  assert_int_equal(g.id, 2);
  assert_int_equal(g.value, 123456789);
  assert_int_equal(tg_pb_reader_next(&inner, &g), 1);
  assert_int_equal(g.id, 3);
  assert_int_equal(tg_pb_reader_next(&inner, &g), 1);
  assert_int_equal(g.id, 6);
  assert_int_equal(g.type, TG_PB_WT_FIXED64);
  double d;
  memcpy(&d, &g.value, sizeof(d));
  assert_true(d == 3.5);
  assert_int_equal(tg_pb_reader_next(&inner, &g), 0);
  assert_int_equal(tg_pb_reader_next(&r, &f), 1);
  assert_int_equal(f.id, 7);
  assert_int_equal(tg_pb_reader_next(&r, &f), 0);
}

static void reader_rejects_malformed_input(void **state) {
  (void)state;
  const struct {
    uint8_t b[12];
    size_t n;
  } bad[] = {
      {{0x00, 0x01}, 2},             /* field id 0 */
      {{0x0B}, 1},                   /* group start */
      {{0x0E, 0x01}, 2},             /* wire type 6 */
      {{0x08, 0x80}, 2},             /* truncated varint */
      {{0x12, 0x05, 'a'}, 3},        /* length past the end */
      {{0x0D, 0x01, 0x02}, 3},       /* truncated fixed32 */
      {{0x09, 1, 2, 3, 4, 5, 6}, 7}, /* truncated fixed64 */
      /* field 1 varint, its tag padded to 6 bytes (still < 2^32) */
      {{0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01}, 7},
      /* field 2 bytes, its length 0 padded to 6 bytes */
      {{0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 7},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tg_pb_reader_t r;
    tg_pb_field_t f;
    tg_pb_reader_init(&r, bad[i].b, bad[i].n);
    assert_int_equal(tg_pb_reader_next(&r, &f), -1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(redundant_varint_boundary_values),
      cmocka_unit_test(varint_sizes_at_boundaries),
      cmocka_unit_test(scalar_fields_encode_exactly),
      cmocka_unit_test(nested_message_backfill),
      cmocka_unit_test(writes_split_across_segments_match_contiguous),
      cmocka_unit_test(refill_hook_relocates_size_fields),
      cmocka_unit_test(size_field_never_straddles_segments),
      cmocka_unit_test(out_of_space_is_sticky),
      cmocka_unit_test(nesting_depth_is_bounded),
      cmocka_unit_test(reader_walks_what_writer_wrote),
      cmocka_unit_test(reader_rejects_malformed_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
