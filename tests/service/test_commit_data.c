/* The in-place CommitDataRequest reader (service/commit_data.h): requests
 * packed by protobuf-c read back field for field, in the order sent; a
 * request with a broken or mistyped part is refused whole; unknown fields
 * are skipped and a field given twice keeps its last value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pb/common/commit_data_request.pb-c.h"
#include "service/commit_data.h"
#include "tracegate/error.h"

typedef Perfetto__Protos__CommitDataRequest req_t;
typedef Perfetto__Protos__CommitDataRequest__ChunksToMove move_t;
typedef Perfetto__Protos__CommitDataRequest__ChunkToPatch patch_t;
typedef Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch entry_t;

static size_t pack(const req_t *r, uint8_t *buf, size_t cap) {
  size_t n = perfetto__protos__commit_data_request__get_packed_size(r);
  assert_true(n <= cap);
  return perfetto__protos__commit_data_request__pack(r, buf);
}

static void reads_back_what_protobuf_c_packed(void **state) {
  (void)state;
  move_t mv[3];
  move_t *pmv[3];
  for (int i = 0; i < 3; i++) {
    perfetto__protos__commit_data_request__chunks_to_move__init(&mv[i]);
    pmv[i] = &mv[i];
  }
  mv[0].has_page = mv[0].has_chunk = mv[0].has_target_buffer = 1;
  mv[0].page = 7;
  mv[0].chunk = 2;
  mv[0].target_buffer = 0xFFFFFFFFu;
  static uint8_t inline_chunk[12] = {1, 0, 0, 0, 3, 0, 0, 0, 9, 9, 9, 9};
  mv[1].has_target_buffer = mv[1].has_data = 1;
  mv[1].target_buffer = 4;
  mv[1].data.data = inline_chunk;
  mv[1].data.len = sizeof(inline_chunk);
  mv[1].has_chunk_incomplete = 1;
  mv[1].chunk_incomplete = 1;
  /* mv[2]: empty, every field absent */

  entry_t e[2];
  entry_t *pe[2];
  for (int i = 0; i < 2; i++) {
    perfetto__protos__commit_data_request__chunk_to_patch__patch__init(&e[i]);
    pe[i] = &e[i];
    e[i].has_offset = e[i].has_data = 1;
    e[i].offset = 100u * (unsigned)(i + 1);
    e[i].data.data = (uint8_t *)(i ? "wxyz" : "abcd");
    e[i].data.len = 4;
  }
  patch_t cp;
  patch_t *pcp = &cp;
  perfetto__protos__commit_data_request__chunk_to_patch__init(&cp);
  cp.has_target_buffer = cp.has_writer_id = cp.has_chunk_id = 1;
  cp.target_buffer = 4;
  cp.writer_id = 3;
  cp.chunk_id = 99;
  cp.n_patches = 2;
  cp.patches = pe;
  cp.has_has_more_patches = 1;
  cp.has_more_patches = 1;

  req_t r = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
  r.n_chunks_to_move = 3;
  r.chunks_to_move = pmv;
  r.n_chunks_to_patch = 1;
  r.chunks_to_patch = &pcp;
  r.has_flush_request_id = 1;
  r.flush_request_id = 1ull << 40;
  uint8_t buf[512];
  size_t n = pack(&r, buf, sizeof(buf));

  tg_commit_data_t cd;
  assert_int_equal(tg_commit_data_parse(buf, n, &cd), 0);
  assert_int_equal(cd.n_moves, 3);
  assert_int_equal(cd.n_patches, 1);
  assert_true(cd.has_flush_request_id);
  assert_true(cd.flush_request_id == 1ull << 40);

  tg_commit_iter_t it;
  tg_commit_move_t m;
  tg_commit_iter_init(&it, &cd);
  assert_int_equal(tg_commit_next_move(&it, &m), 1);
  assert_true(m.has_page && m.has_chunk && m.has_target_buffer);
  assert_false(m.has_data || m.has_chunk_incomplete);
  assert_int_equal(m.page, 7);
  assert_int_equal(m.chunk, 2);
  assert_true(m.target_buffer == 0xFFFFFFFFu);
  assert_int_equal(tg_commit_next_move(&it, &m), 1);
  assert_false(m.has_page || m.has_chunk);
  assert_true(m.has_data && m.has_chunk_incomplete && m.chunk_incomplete);
  assert_int_equal(m.data_len, sizeof(inline_chunk));
  assert_memory_equal(m.data, inline_chunk, sizeof(inline_chunk));
  assert_true(m.data >= buf && m.data + m.data_len <= buf + n); /* a view */
  assert_int_equal(tg_commit_next_move(&it, &m), 1);
  assert_false(m.has_page || m.has_chunk || m.has_target_buffer || m.has_data ||
               m.has_chunk_incomplete);
  assert_int_equal(tg_commit_next_move(&it, &m), 0);

  tg_commit_patch_t p;
  tg_commit_iter_init(&it, &cd);
  assert_int_equal(tg_commit_next_patch(&it, &p), 1);
  assert_int_equal(p.target_buffer, 4);
  assert_int_equal(p.writer_id, 3);
  assert_int_equal(p.chunk_id, 99);
  assert_int_equal(p.n_patches, 2);
  assert_true(p.has_has_more_patches && p.has_more_patches);
  tg_commit_iter_t ei;
  tg_commit_patch_entry_t pt;
  tg_commit_patch_entries(&ei, &p);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tg_commit_next_entry(&ei, &pt), 1);
    assert_true(pt.has_offset && pt.has_data);
    assert_int_equal(pt.offset, 100 * (i + 1));
    assert_int_equal(pt.data_len, 4);
    assert_memory_equal(pt.data, i ? "wxyz" : "abcd", 4);
  }
  assert_int_equal(tg_commit_next_entry(&ei, &pt), 0);
  assert_int_equal(tg_commit_next_patch(&it, &p), 0);
}

static void refuses_what_does_not_parse_whole(void **state) {
  (void)state;
  tg_commit_data_t cd;
  /* A good move, then one cut short: nothing is taken. */
  const uint8_t cut[] = {0x0A, 0x02, 0x08, 0x01, 0x0A, 0x05, 0x08, 0x01};
  assert_int_equal(tg_commit_data_parse(cut, sizeof(cut), &cd),
                   TG_EPROTO_DECODE);
  /* page (field 1) as a fixed32 inside a move. */
  const uint8_t mistyped[] = {0x0A, 0x05, 0x0D, 1, 0, 0, 0};
  assert_int_equal(tg_commit_data_parse(mistyped, sizeof(mistyped), &cd),
                   TG_EPROTO_DECODE);
  /* chunks_to_move (field 1) as a varint. */
  const uint8_t top[] = {0x08, 0x03};
  assert_int_equal(tg_commit_data_parse(top, sizeof(top), &cd),
                   TG_EPROTO_DECODE);
  /* A broken Patch inside a ChunkToPatch: its offset's varint is cut. */
  const uint8_t entry[] = {0x12, 0x03, 0x22, 0x01, 0x08};
  assert_int_equal(tg_commit_data_parse(entry, sizeof(entry), &cd),
                   TG_EPROTO_DECODE);
  /* The same refused by protobuf-c. */
  assert_null(
      perfetto__protos__commit_data_request__unpack(NULL, sizeof(cut), cut));
  assert_null(perfetto__protos__commit_data_request__unpack(
      NULL, sizeof(mistyped), mistyped));
}

static void skips_unknown_fields_and_keeps_the_last_value(void **state) {
  (void)state;
  /* move {page: 1, field 9: 5, page: 6, field 10 (fixed64)}, field 7
   * (LEN), flush_request_id 1 then 2. */
  const uint8_t msg[] = {0x0A, 0x0F, 0x08, 0x01, 0x48, 0x05, 0x08, 0x06,
                         0x51, 1,    2,    3,    4,    5,    6,    7,
                         8,    0x3A, 0x01, 'z',  0x18, 0x01, 0x18, 0x02};
  tg_commit_data_t cd;
  assert_int_equal(tg_commit_data_parse(msg, sizeof(msg), &cd), 0);
  assert_int_equal(cd.n_moves, 1);
  assert_int_equal(cd.flush_request_id, 2);
  tg_commit_iter_t it;
  tg_commit_move_t m;
  tg_commit_iter_init(&it, &cd);
  assert_int_equal(tg_commit_next_move(&it, &m), 1);
  assert_true(m.has_page);
  assert_int_equal(m.page, 6);
  req_t *r =
      perfetto__protos__commit_data_request__unpack(NULL, sizeof(msg), msg);
  assert_non_null(r);
  assert_int_equal(r->chunks_to_move[0]->page, 6);
  assert_int_equal(r->flush_request_id, 2);
  perfetto__protos__commit_data_request__free_unpacked(r, NULL);
}

/* Bools read as protobuf-c reads them: a 10-byte varint whose only set
 * bits lie past 64 is true (its value, cut to 64 bits, is 0); a padded 0
 * is false. */
static void reads_bools_as_protobuf_c(void **state) {
  (void)state;
  /* move {page 1, chunk_incomplete: 80 x9 02}, patch {more: 80 00} */
  const uint8_t msg[] = {0x0A, 0x0D, 0x08, 0x01, 0x28, 0x80, 0x80, 0x80,
                         0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0x12,
                         0x03, 0x28, 0x80, 0x00};
  tg_commit_data_t cd;
  assert_int_equal(tg_commit_data_parse(msg, sizeof(msg), &cd), 0);
  tg_commit_iter_t it;
  tg_commit_move_t m;
  tg_commit_iter_init(&it, &cd);
  assert_int_equal(tg_commit_next_move(&it, &m), 1);
  assert_true(m.has_chunk_incomplete);
  tg_commit_patch_t cp;
  tg_commit_iter_init(&it, &cd);
  assert_int_equal(tg_commit_next_patch(&it, &cp), 1);
  assert_true(cp.has_has_more_patches);
  req_t *r =
      perfetto__protos__commit_data_request__unpack(NULL, sizeof(msg), msg);
  assert_non_null(r);
  assert_true(r->chunks_to_move[0]->chunk_incomplete);
  assert_int_equal(m.chunk_incomplete, 1);
  assert_false(r->chunks_to_patch[0]->has_more_patches);
  assert_false(cp.has_more_patches);
  perfetto__protos__commit_data_request__free_unpacked(r, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_back_what_protobuf_c_packed),
      cmocka_unit_test(refuses_what_does_not_parse_whole),
      cmocka_unit_test(skips_unknown_fields_and_keeps_the_last_value),
      cmocka_unit_test(reads_bools_as_protobuf_c),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
