/* CommitDataRequest, read in place: the producer port's hot path.
 *
 * A producer sends one CommitData per batch of chunks, and at full rate
 * that is tens of thousands a second. protobuf-c's unpack allocates a
 * struct per chunk to move and per patch and frees them all again, a
 * malloc per chunk on the hot path. This reader allocates nothing: every
 * view below points into the request's own bytes, which must outlive it
 * (the IPC frame being handled).
 *
 * Same rules as protobuf-c's unpack, so that a request means the same
 * either way: a request is taken whole or refused whole (first
 * tg_commit_data_parse checks every nested message); a known field with
 * another wire type refuses it (protobuf-c lets a bool through with any,
 * the one case where this reader refuses more); unknown fields are
 * skipped; of a field
 * given twice the last counts; uint32 fields keep a varint's low 32 bits.
 * Field numbers: proto/common/commit_data_request.proto.
 */
#ifndef TRACEGATE_SERVICE_COMMIT_DATA_H
#define TRACEGATE_SERVICE_COMMIT_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracegate/pb_wire.h"

/* CommitDataRequest.ChunksToMove */
typedef struct tg_commit_move {
  bool has_page, has_chunk, has_target_buffer, has_data, has_chunk_incomplete;
  uint32_t page, chunk, target_buffer;
  bool chunk_incomplete;
  const uint8_t *data; /* inline chunk bytes (producers without an SMB) */
  size_t data_len;
} tg_commit_move_t;

/* CommitDataRequest.ChunkToPatch; its patches are read with
 * tg_commit_patch_entries(). */
typedef struct tg_commit_patch {
  bool has_target_buffer, has_writer_id, has_chunk_id, has_has_more_patches;
  uint32_t target_buffer, writer_id, chunk_id;
  bool has_more_patches;
  size_t n_patches;
  const uint8_t *msg; /* the ChunkToPatch message */
  size_t msg_len;
} tg_commit_patch_t;

/* CommitDataRequest.ChunkToPatch.Patch */
typedef struct tg_commit_patch_entry {
  bool has_offset, has_data;
  uint32_t offset;
  const uint8_t *data;
  size_t data_len;
} tg_commit_patch_entry_t;

typedef struct tg_commit_data {
  const uint8_t *msg;
  size_t len;
  size_t n_moves, n_patches; /* chunks_to_move, chunks_to_patch */
  bool has_flush_request_id;
  uint64_t flush_request_id;
} tg_commit_data_t;

/* Checks the whole request and fills |out|. Returns 0, or
 * TG_EPROTO_DECODE when protobuf-c would have refused it too. */
int tg_commit_data_parse(const uint8_t *msg, size_t len, tg_commit_data_t *out);

/* Walks a parsed request's chunks_to_move, chunks_to_patch, or one
 * ChunkToPatch's patches, in the order sent: 1 with the next in |out|, 0
 * at the end. */
typedef struct tg_commit_iter {
  tg_pb_reader_t r;
} tg_commit_iter_t;

void tg_commit_iter_init(tg_commit_iter_t *it, const tg_commit_data_t *cd);
int tg_commit_next_move(tg_commit_iter_t *it, tg_commit_move_t *out);
int tg_commit_next_patch(tg_commit_iter_t *it, tg_commit_patch_t *out);
void tg_commit_patch_entries(tg_commit_iter_t *it, const tg_commit_patch_t *cp);
int tg_commit_next_entry(tg_commit_iter_t *it, tg_commit_patch_entry_t *out);

#endif /* TRACEGATE_SERVICE_COMMIT_DATA_H */
