/* CommitDataRequest read in place (commit_data.h). */
#include "service/commit_data.h"

#include <string.h>

#include "tracegate/error.h"

/* CommitDataRequest */
enum { F_MOVES = 1, F_PATCHES = 2, F_FLUSH_ID = 3 };
/* ChunksToMove */
enum { M_PAGE = 1, M_CHUNK = 2, M_TARGET = 3, M_DATA = 4, M_INCOMPLETE = 5 };
/* ChunkToPatch */
enum { P_TARGET = 1, P_WRITER = 2, P_CHUNK_ID = 3, P_PATCHES = 4, P_MORE = 5 };
/* ChunkToPatch.Patch */
enum { E_OFFSET = 1, E_DATA = 2 };

/* A known field must come with its own wire type: protobuf-c refuses the
 * whole message otherwise. */
static bool is(const tg_pb_field_t *f, uint32_t id, uint8_t type, int *bad) {
  if (f->id != id) return false;
  if (f->type != type) *bad = 1;
  return f->type == type;
}

/* Reads one ChunksToMove; -1 if it does not parse. */
static int read_move(const uint8_t *p, size_t n, tg_commit_move_t *m) {
  memset(m, 0, sizeof(*m));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv, bad = 0;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (is(&f, M_PAGE, TG_PB_WT_VARINT, &bad)) {
      m->has_page = true;
      m->page = (uint32_t)f.value;
    } else if (is(&f, M_CHUNK, TG_PB_WT_VARINT, &bad)) {
      m->has_chunk = true;
      m->chunk = (uint32_t)f.value;
    } else if (is(&f, M_TARGET, TG_PB_WT_VARINT, &bad)) {
      m->has_target_buffer = true;
      m->target_buffer = (uint32_t)f.value;
    } else if (is(&f, M_DATA, TG_PB_WT_LEN, &bad)) {
      m->has_data = true;
      m->data = f.data;
      m->data_len = f.size;
    } else if (is(&f, M_INCOMPLETE, TG_PB_WT_VARINT, &bad)) {
      m->has_chunk_incomplete = true;
      m->chunk_incomplete = tg_pb_reader_bool(&r);
    }
    if (bad) return -1;
  }
  return rv;
}

/* Reads one Patch; -1 if it does not parse. */
static int read_entry(const uint8_t *p, size_t n, tg_commit_patch_entry_t *e) {
  memset(e, 0, sizeof(*e));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv, bad = 0;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (is(&f, E_OFFSET, TG_PB_WT_VARINT, &bad)) {
      e->has_offset = true;
      e->offset = (uint32_t)f.value;
    } else if (is(&f, E_DATA, TG_PB_WT_LEN, &bad)) {
      e->has_data = true;
      e->data = f.data;
      e->data_len = f.size;
    }
    if (bad) return -1;
  }
  return rv;
}

/* Reads one ChunkToPatch, its patches checked and counted; -1 if it or
 * one of them does not parse. */
static int read_patch(const uint8_t *p, size_t n, tg_commit_patch_t *cp) {
  memset(cp, 0, sizeof(*cp));
  cp->msg = p;
  cp->msg_len = n;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv, bad = 0;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (is(&f, P_TARGET, TG_PB_WT_VARINT, &bad)) {
      cp->has_target_buffer = true;
      cp->target_buffer = (uint32_t)f.value;
    } else if (is(&f, P_WRITER, TG_PB_WT_VARINT, &bad)) {
      cp->has_writer_id = true;
      cp->writer_id = (uint32_t)f.value;
    } else if (is(&f, P_CHUNK_ID, TG_PB_WT_VARINT, &bad)) {
      cp->has_chunk_id = true;
      cp->chunk_id = (uint32_t)f.value;
    } else if (is(&f, P_PATCHES, TG_PB_WT_LEN, &bad)) {
      tg_commit_patch_entry_t e;
      if (read_entry(f.data, f.size, &e) < 0) return -1;
      cp->n_patches++;
    } else if (is(&f, P_MORE, TG_PB_WT_VARINT, &bad)) {
      cp->has_has_more_patches = true;
      cp->has_more_patches = tg_pb_reader_bool(&r);
    }
    if (bad) return -1;
  }
  return rv;
}

int tg_commit_data_parse(const uint8_t *msg, size_t len,
                         tg_commit_data_t *out) {
  memset(out, 0, sizeof(*out));
  out->msg = msg;
  out->len = len;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv, bad = 0;
  tg_pb_reader_init(&r, msg, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (is(&f, F_MOVES, TG_PB_WT_LEN, &bad)) {
      tg_commit_move_t m;
      if (read_move(f.data, f.size, &m) < 0) return TG_EPROTO_DECODE;
      out->n_moves++;
    } else if (is(&f, F_PATCHES, TG_PB_WT_LEN, &bad)) {
      tg_commit_patch_t cp;
      if (read_patch(f.data, f.size, &cp) < 0) return TG_EPROTO_DECODE;
      out->n_patches++;
    } else if (is(&f, F_FLUSH_ID, TG_PB_WT_VARINT, &bad)) {
      out->has_flush_request_id = true;
      out->flush_request_id = f.value;
    }
    if (bad) return TG_EPROTO_DECODE;
  }
  return rv < 0 ? TG_EPROTO_DECODE : 0;
}

/* --- walking a parsed request: every part was checked by the parse ------ */

void tg_commit_iter_init(tg_commit_iter_t *it, const tg_commit_data_t *cd) {
  tg_pb_reader_init(&it->r, cd->msg, cd->len);
}

/* The next field |id| of the walked message (LEN, as the parse saw). */
static bool next_field(tg_commit_iter_t *it, uint32_t id, tg_pb_field_t *f) {
  while (tg_pb_reader_next(&it->r, f) == 1)
    if (f->id == id && f->type == TG_PB_WT_LEN) return true;
  return false;
}

int tg_commit_next_move(tg_commit_iter_t *it, tg_commit_move_t *out) {
  tg_pb_field_t f;
  if (!next_field(it, F_MOVES, &f)) return 0;
  return read_move(f.data, f.size, out) == 0 ? 1 : 0;
}

int tg_commit_next_patch(tg_commit_iter_t *it, tg_commit_patch_t *out) {
  tg_pb_field_t f;
  if (!next_field(it, F_PATCHES, &f)) return 0;
  return read_patch(f.data, f.size, out) == 0 ? 1 : 0;
}

void tg_commit_patch_entries(tg_commit_iter_t *it,
                             const tg_commit_patch_t *cp) {
  tg_pb_reader_init(&it->r, cp->msg, cp->msg_len);
}

int tg_commit_next_entry(tg_commit_iter_t *it, tg_commit_patch_entry_t *out) {
  tg_pb_field_t f;
  if (!next_field(it, P_PATCHES, &f)) return 0;
  return read_entry(f.data, f.size, out) == 0 ? 1 : 0;
}
