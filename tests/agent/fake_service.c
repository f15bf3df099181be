/* A simulated service for the agent's tests (fake_service.h). */
#include "fake_service.h"

#include <stdlib.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "pb/common/commit_data_request.pb-c.h"
#include "tracegate/error.h"

static void *grow(void *arr, size_t *cap, size_t n, size_t esz) {
  if (n < *cap) return arr;
  size_t ncap = *cap ? *cap * 2 : 64;
  void *na = realloc(arr, ncap * esz);
  if (!na) abort();
  *cap = ncap;
  return na;
}

void fake_service_init(fake_service_t *fs, tg_arbiter_t *arb, size_t tb_size,
                       bool keep_raw) {
  memset(fs, 0, sizeof(*fs));
  fs->arb = arb;
  fs->smb = *tg_arbiter_smb(arb);
  if (tb_size) fs->tb = tg_trace_buffer_new(tb_size, TG_FILL_RING_BUFFER);
  fs->ident = (tg_producer_ident_t){.producer_id = 7, .uid = 1000, .pid = 42};
  fs->max_bytes = 120000;
  fs->keep_raw = keep_raw;
  tg_buf_init(&fs->buf, 0);
}

void fake_service_free(fake_service_t *fs) {
  fake_service_release_held(fs);
  free(fs->held);
  for (size_t i = 0; i < fs->nchunks; i++) free(fs->chunks[i].data);
  free(fs->chunks);
  free(fs->groups);
  tg_buf_free(&fs->buf);
  tg_trace_buffer_free(fs->tb);
}

void fake_service_release_held(fake_service_t *fs) {
  for (size_t i = 0; i < fs->nheld; i++)
    if (tg_smb_release_chunk_as_free(&fs->smb, &fs->held[i]) != 0) fs->errors++;
  fs->nheld = 0;
}

static void move_chunk(
    fake_service_t *fs,
    const Perfetto__Protos__CommitDataRequest__ChunksToMove *m) {
  tg_smb_chunk_t c;
  if (!m->has_page || !m->has_chunk ||
      tg_smb_try_acquire_chunk_for_reading(&fs->smb, m->page, m->chunk, &c)) {
    fs->errors++;
    return;
  }
  fs->moves++;
  uint8_t *copy = malloc(c.size);
  if (!copy) abort();
  memcpy(copy, c.begin, c.size); /* one read of the shared bytes */
  if (fs->hold) {
    fs->held = grow(fs->held, &fs->held_cap, fs->nheld, sizeof(*fs->held));
    fs->held[fs->nheld++] = c;
  } else if (tg_smb_release_chunk_as_free(&fs->smb, &c) != 0) {
    fs->errors++;
  }
  if (fs->tb) {
    int rv = tg_trace_buffer_copy_chunk(fs->tb, &fs->ident, copy, c.size, true);
    if (rv != 0) fs->errors++;
  }
  if (!fs->keep_raw) {
    free(copy);
    return;
  }
  fs->chunks =
      grow(fs->chunks, &fs->chunks_cap, fs->nchunks, sizeof(*fs->chunks));
  uint16_t packets = (uint16_t)(copy[6] | copy[7] << 8);
  fs->chunks[fs->nchunks++] = (fs_chunk_t){
      .data = copy,
      .size = c.size,
      .writer_id = (uint16_t)(copy[4] | copy[5] << 8),
      .chunk_id = tg_pb_read_le32(copy),
      .needs_patching =
          (tg_chunk_packets_flags(packets) & TG_CHUNK_NEEDS_PATCHING) != 0,
  };
}

static void patch_chunk(
    fake_service_t *fs,
    const Perfetto__Protos__CommitDataRequest__ChunkToPatch *cp) {
  if (!cp->has_writer_id || !cp->has_chunk_id || cp->n_patches > 32) {
    fs->errors++;
    return;
  }
  fs_patch_group_t g = {
      .writer_id = (uint16_t)cp->writer_id,
      .chunk_id = cp->chunk_id,
      .n = cp->n_patches,
      .has_more = cp->has_has_more_patches && cp->has_more_patches};
  for (size_t i = 0; i < cp->n_patches; i++) {
    const Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *p =
        cp->patches[i];
    if (!p->has_offset || !p->has_data || p->data.len != 4) {
      fs->errors++;
      return;
    }
    g.offsets[i] = p->offset;
    memcpy(g.data[i], p->data.data, 4);
  }
  fs->patches += g.n;
  fs->groups =
      grow(fs->groups, &fs->groups_cap, fs->ngroups, sizeof(*fs->groups));
  fs->groups[fs->ngroups++] = g;
  if (fs->tb &&
      tg_trace_buffer_patch(fs->tb, fs->ident.producer_id, g.writer_id,
                            g.chunk_id, g.offsets, (const uint8_t(*)[4])g.data,
                            g.n, g.has_more) != 0)
    fs->errors++;
  if (!fs->keep_raw) return;
  /* The newest copy of that chunk: ids of one writer do not repeat here. */
  for (size_t k = fs->nchunks; k-- > 0;) {
    fs_chunk_t *c = &fs->chunks[k];
    if (c->writer_id != g.writer_id || c->chunk_id != g.chunk_id) continue;
    uint8_t *payload = c->data + TG_SMB_CHUNK_HEADER_SIZE;
    size_t room = c->size - TG_SMB_CHUNK_HEADER_SIZE;
    for (size_t i = 0; i < g.n; i++) {
      if (g.offsets[i] > room - 4) {
        fs->errors++;
        return;
      }
      memcpy(payload + g.offsets[i], g.data[i], 4);
    }
    if (!g.has_more) c->patched_final = true;
    return;
  }
  fs->errors++; /* a patch before its chunk */
}

int fake_service_commit(fake_service_t *fs, uint64_t flush_id,
                        size_t *appended) {
  tg_buf_reset(&fs->buf);
  int rv = tg_arbiter_take_commit(fs->arb, flush_id, fs->max_bytes, &fs->buf);
  size_t n = tg_buf_size(&fs->buf);
  if (appended) *appended = n;
  if (rv < 0 || n == 0) return rv;
  if (n > fs->max_commit_size) fs->max_commit_size = n;
  fs->commits++;
  Perfetto__Protos__CommitDataRequest *req =
      perfetto__protos__commit_data_request__unpack(NULL, n,
                                                    tg_buf_begin(&fs->buf));
  if (!req) {
    fs->errors++;
    return TG_EPROTO_DECODE;
  }
  /* Moves first, then patches, then the flush: like tracegated. */
  for (size_t i = 0; i < req->n_chunks_to_move; i++)
    move_chunk(fs, req->chunks_to_move[i]);
  for (size_t i = 0; i < req->n_chunks_to_patch; i++)
    patch_chunk(fs, req->chunks_to_patch[i]);
  if (req->has_flush_request_id) fs->last_flush_id = req->flush_request_id;
  perfetto__protos__commit_data_request__free_unpacked(req, NULL);
  return rv;
}

unsigned fake_service_drain(fake_service_t *fs) {
  unsigned n = 0;
  while (tg_arbiter_commit_pending(fs->arb)) {
    if (fake_service_commit(fs, 0, NULL) <= 0) {
      fs->errors++;
      break;
    }
    n++;
  }
  return n;
}

int fake_service_read(fake_service_t *fs, tg_buf_t *out, bool *prev_dropped,
                      uint16_t *writer_id) {
  tg_packet_t p;
  if (!fs->tb || tg_trace_buffer_read_packet(fs->tb, &p) != 1) return 0;
  tg_buf_reset(out);
  for (unsigned i = 0; i < p.num_slices; i++)
    if (tg_buf_append(out, p.slice[i], p.slice_len[i]) != 0) abort();
  if (prev_dropped) *prev_dropped = p.previous_packet_dropped;
  if (writer_id) *writer_id = p.writer_id;
  return 1;
}

unsigned fake_service_reassemble(const fake_service_t *fs, uint16_t writer_id,
                                 fs_packet_cb cb, void *ctx) {
  unsigned errors = 0;
  tg_buf_t pkt;
  tg_buf_init(&pkt, 0);
  bool open = false; /* a packet continues into the next chunk */
  bool have_prev = false;
  uint32_t prev_id = 0;
  for (size_t k = 0; k < fs->nchunks; k++) {
    const fs_chunk_t *c = &fs->chunks[k];
    if (c->writer_id != writer_id) continue;
    if (have_prev && c->chunk_id != prev_id + 1u) errors++;
    have_prev = true;
    prev_id = c->chunk_id;
    if (c->needs_patching && !c->patched_final) errors++;
    tg_chunk_info_t info;
    if (tg_chunk_validate(c->data, c->size, true, &info) != 0) errors++;
    bool first_cont = info.flags & TG_CHUNK_FIRST_PACKET_CONTINUES;
    bool last_cont = info.flags & TG_CHUNK_LAST_PACKET_CONTINUES;
    if (first_cont != open) errors++; /* continuation flags must pair up */
    tg_fragment_iter_t it;
    tg_fragment_iter_init(&it, c->data, c->size, &info);
    const uint8_t *d;
    size_t len;
    for (unsigned i = 0; tg_fragment_iter_next(&it, &d, &len); i++) {
      if (i > 0 || !first_cont) {
        if (open) errors++;
        tg_buf_reset(&pkt);
      }
      if (tg_buf_append(&pkt, d, len) != 0) abort();
      open = true;
      if (i + 1u == info.valid_fragments && last_cont && !info.ends_with_drop)
        break; /* goes on in the next chunk */
      cb(ctx, tg_buf_begin(&pkt), tg_buf_size(&pkt));
      open = false;
    }
    if (info.ends_with_drop) {
      if (last_cont) errors++;
      cb(ctx, NULL, 0);
      open = false;
    } else if (info.valid_fragments == 0 && first_cont && last_cont) {
      errors++; /* a middle chunk without its fragment */
    }
  }
  if (open) errors++;
  tg_buf_free(&pkt);
  return errors;
}
