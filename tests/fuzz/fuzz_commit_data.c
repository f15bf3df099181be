/* Fuzzes the in-place CommitDataRequest reader (service/commit_data.h)
 * with a producer's hostile request, differentially against protobuf-c's
 * unpack, which tracegated used before: the reader takes nothing
 * protobuf-c refuses (it refuses a little more), and what it walks (every chunk
 * to move, every chunk to patch and its patches, the flush id) equals what
 * protobuf-c gives.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pb/common/commit_data_request.pb-c.h"
#include "service/commit_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef Perfetto__Protos__CommitDataRequest req_t;

static void same_bytes(bool has, const uint8_t *p, size_t n, bool want_has,
                       const ProtobufCBinaryData *want) {
  if (has != want_has) __builtin_trap();
  if (!has) return;
  if (n != want->len || (n && memcmp(p, want->data, n) != 0)) __builtin_trap();
}

static void check_moves(const tg_commit_data_t *cd, const req_t *want) {
  tg_commit_iter_t it;
  tg_commit_move_t m;
  size_t i = 0;
  tg_commit_iter_init(&it, cd);
  while (tg_commit_next_move(&it, &m) == 1) {
    if (i >= want->n_chunks_to_move) __builtin_trap();
    const Perfetto__Protos__CommitDataRequest__ChunksToMove *w =
        want->chunks_to_move[i++];
    if (m.has_page != (bool)w->has_page || m.has_chunk != (bool)w->has_chunk ||
        m.has_target_buffer != (bool)w->has_target_buffer ||
        m.has_chunk_incomplete != (bool)w->has_chunk_incomplete)
      __builtin_trap();
    if ((m.has_page && m.page != w->page) ||
        (m.has_chunk && m.chunk != w->chunk) ||
        (m.has_target_buffer && m.target_buffer != w->target_buffer) ||
        (m.has_chunk_incomplete &&
         m.chunk_incomplete != (bool)w->chunk_incomplete))
      __builtin_trap();
    same_bytes(m.has_data, m.data, m.data_len, w->has_data, &w->data);
  }
  if (i != want->n_chunks_to_move || i != cd->n_moves) __builtin_trap();
}

static void check_patches(const tg_commit_data_t *cd, const req_t *want) {
  tg_commit_iter_t it;
  tg_commit_patch_t cp;
  size_t i = 0;
  tg_commit_iter_init(&it, cd);
  while (tg_commit_next_patch(&it, &cp) == 1) {
    if (i >= want->n_chunks_to_patch) __builtin_trap();
    const Perfetto__Protos__CommitDataRequest__ChunkToPatch *w =
        want->chunks_to_patch[i++];
    if (cp.has_target_buffer != (bool)w->has_target_buffer ||
        cp.has_writer_id != (bool)w->has_writer_id ||
        cp.has_chunk_id != (bool)w->has_chunk_id ||
        cp.has_has_more_patches != (bool)w->has_has_more_patches ||
        cp.n_patches != w->n_patches)
      __builtin_trap();
    if ((cp.has_target_buffer && cp.target_buffer != w->target_buffer) ||
        (cp.has_writer_id && cp.writer_id != w->writer_id) ||
        (cp.has_chunk_id && cp.chunk_id != w->chunk_id) ||
        (cp.has_has_more_patches &&
         cp.has_more_patches != (bool)w->has_more_patches))
      __builtin_trap();
    tg_commit_iter_t e;
    tg_commit_patch_entry_t pt;
    size_t k = 0;
    tg_commit_patch_entries(&e, &cp);
    while (tg_commit_next_entry(&e, &pt) == 1) {
      if (k >= w->n_patches) __builtin_trap();
      const Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *wp =
          w->patches[k++];
      if (pt.has_offset != (bool)wp->has_offset ||
          (pt.has_offset && pt.offset != wp->offset))
        __builtin_trap();
      same_bytes(pt.has_data, pt.data, pt.data_len, wp->has_data, &wp->data);
    }
    if (k != w->n_patches) __builtin_trap();
  }
  if (i != want->n_chunks_to_patch || i != cd->n_patches) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_commit_data_t cd;
  int rv = tg_commit_data_parse(data, size, &cd);
  req_t *want = perfetto__protos__commit_data_request__unpack(NULL, size, data);
  /* The reader may refuse more: protobuf-c takes a bool field sent with
   * any wire type (a producer's mistake nobody makes); the reader holds
   * bools to varints like every other field. It never takes what
   * protobuf-c refuses. */
  if (rv == 0 && !want) __builtin_trap();
  if (rv != 0) {
    if (want) perfetto__protos__commit_data_request__free_unpacked(want, NULL);
    return 0;
  }
  if (cd.has_flush_request_id != (bool)want->has_flush_request_id ||
      (cd.has_flush_request_id &&
       cd.flush_request_id != want->flush_request_id))
    __builtin_trap();
  check_moves(&cd, want);
  check_patches(&cd, want);
  perfetto__protos__commit_data_request__free_unpacked(want, NULL);
  return 0;
}
