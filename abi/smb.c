/* SMB state machine and chunk validation (see smb.h for the contract).
 *
 * Every bitmap transition is a CAS loop: other chunks of the same page change
 * state concurrently (other producer threads, the service), so a failed CAS
 * that still finds our chunk in the expected state retries with the fresh
 * word. A producer can write anything into the bitmap; the service side
 * therefore bounds its retries and treats surprises as a state error.
 */
#include "abi/smb.h"

#include <errno.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

/* A hostile producer flipping other chunks' bits could make the service spin
 * forever; legitimate contention settles in a handful of attempts. */
#define SERVICE_CAS_ATTEMPTS 1024

bool tg_smb_geometry_valid(size_t size, size_t page_size) {
  if (page_size < TG_SMB_MIN_PAGE_SIZE || page_size > TG_SMB_MAX_PAGE_SIZE)
    return false;
  if (page_size & (page_size - 1)) return false; /* 4, 8, 16, 32 KiB */
  if (size == 0 || size > TG_SMB_MAX_SIZE || size % page_size) return false;
  return true;
}

int tg_smb_init(tg_smb_t *smb, void *base, size_t size, size_t page_size) {
  if (!base || !tg_smb_geometry_valid(size, page_size)) return -EINVAL;
  smb->base = base;
  smb->size = size;
  smb->page_size = page_size;
  smb->num_pages = size / page_size;
  return 0;
}

static void chunk_fill(const tg_smb_t *smb, size_t page_idx, unsigned chunk_idx,
                       unsigned layout, tg_smb_chunk_t *out) {
  size_t csize = tg_smb_chunk_size(smb->page_size, layout);
  out->begin = smb->base + page_idx * smb->page_size +
               TG_SMB_PAGE_HEADER_SIZE + chunk_idx * csize;
  out->size = csize;
  out->page_idx = (uint32_t)page_idx;
  out->chunk_idx = (uint8_t)chunk_idx;
  out->layout = (uint8_t)layout;
}

int tg_smb_chunk_locate(const tg_smb_t *smb, size_t page_idx,
                        unsigned chunk_idx, uint32_t bitmap,
                        tg_smb_chunk_t *out) {
  if (page_idx >= smb->num_pages) return -EINVAL;
  unsigned layout = tg_smb_bitmap_layout(bitmap);
  if (chunk_idx >= tg_smb_layout_num_chunks(layout)) return -EINVAL;
  chunk_fill(smb, page_idx, chunk_idx, layout, out);
  return 0;
}

int tg_smb_try_partition_page(tg_smb_t *smb, size_t page_idx, unsigned layout) {
  /* Checked before any masking: 9 must not pass as 1. */
  if (page_idx >= smb->num_pages || layout < TG_PAGE_DIV_1 ||
      layout > TG_PAGE_DIV_14)
    return -EINVAL;
  uint32_t expected = 0;
  /* acq_rel: acquire pairs with the service's release of the last chunk (so
   * its reads of the old chunks are done); release publishes the layout. */
  if (!atomic_compare_exchange_strong_explicit(
          &tg_smb_page(smb, page_idx)->bitmap, &expected,
          (uint32_t)layout << TG_SMB_LAYOUT_SHIFT, memory_order_acq_rel,
          memory_order_relaxed))
    return TG_ECHUNK_STATE;
  return 0;
}

/* Moves chunk |chunk_idx| of a page from |from| to |to|. |free_page| turns
 * the word to 0 when every other chunk is Free too. |attempts| bounds the
 * loop (0: unbounded, for the producer, which trusts its own threads). */
static int chunk_transition(tg_smb_t *smb, size_t page_idx, unsigned chunk_idx,
                            unsigned from, unsigned to, bool free_page,
                            unsigned attempts, uint32_t *layout_out) {
  _Atomic uint32_t *word = &tg_smb_page(smb, page_idx)->bitmap;
  uint32_t cur = atomic_load_explicit(word, memory_order_relaxed);
  for (unsigned i = 0; attempts == 0 || i < attempts; i++) {
    unsigned layout = tg_smb_bitmap_layout(cur);
    if (chunk_idx >= tg_smb_layout_num_chunks(layout)) return -EINVAL;
    if (tg_smb_bitmap_chunk_state(cur, chunk_idx) != from)
      return TG_ECHUNK_STATE;
    unsigned shift = 2 * chunk_idx;
    uint32_t next = (cur & ~(TG_SMB_CHUNK_STATE_MASK << shift)) |
                    ((uint32_t)to << shift);
    if (free_page && (next & TG_SMB_ALL_CHUNK_STATES_MASK) == 0) next = 0;
    /* acq_rel on success: release publishes what this side wrote in the
     * chunk before the transition, acquire sees what the other side wrote
     * before its own (e.g. Complete's release -> BeingRead's acquire). */
    if (atomic_compare_exchange_weak_explicit(word, &cur, next,
                                              memory_order_acq_rel,
                                              memory_order_relaxed)) {
      if (layout_out) *layout_out = layout;
      return 0;
    }
  }
  return TG_ECHUNK_STATE;
}

int tg_smb_try_acquire_chunk_for_writing(tg_smb_t *smb, size_t page_idx,
                                         unsigned chunk_idx, uint32_t chunk_id,
                                         uint16_t writer_id,
                                         tg_smb_chunk_t *out) {
  if (page_idx >= smb->num_pages || chunk_idx >= TG_SMB_MAX_CHUNKS_PER_PAGE)
    return -EINVAL;
  uint32_t layout;
  int rv = chunk_transition(smb, page_idx, chunk_idx, TG_CHUNK_FREE,
                            TG_CHUNK_BEING_WRITTEN, false, 0, &layout);
  if (rv < 0) return rv;
  chunk_fill(smb, page_idx, chunk_idx, layout, out);
  /* The header is written after winning the CAS: writing it before would
   * race with another thread of the same producer acquiring the same chunk.
   * The service only trusts it after BeingWritten -> Complete (release). */
  tg_smb_chunk_header_t *h = (tg_smb_chunk_header_t *)out->begin;
  atomic_store_explicit(&h->chunk_id, chunk_id, memory_order_relaxed);
  atomic_store_explicit(&h->writer_id, writer_id, memory_order_relaxed);
  atomic_store_explicit(&h->packets, 0, memory_order_release);
  return 0;
}

int tg_smb_release_chunk_as_complete(tg_smb_t *smb, const tg_smb_chunk_t *c) {
  if (c->page_idx >= smb->num_pages) return -EINVAL;
  return chunk_transition(smb, c->page_idx, c->chunk_idx,
                          TG_CHUNK_BEING_WRITTEN, TG_CHUNK_COMPLETE, false, 0,
                          NULL);
}

int tg_smb_try_acquire_chunk_for_reading(tg_smb_t *smb, size_t page_idx,
                                         unsigned chunk_idx,
                                         tg_smb_chunk_t *out) {
  if (page_idx >= smb->num_pages || chunk_idx >= TG_SMB_MAX_CHUNKS_PER_PAGE)
    return -EINVAL;
  uint32_t layout;
  int rv = chunk_transition(smb, page_idx, chunk_idx, TG_CHUNK_COMPLETE,
                            TG_CHUNK_BEING_READ, false, SERVICE_CAS_ATTEMPTS,
                            &layout);
  if (rv < 0) return rv;
  chunk_fill(smb, page_idx, chunk_idx, layout, out);
  return 0;
}

int tg_smb_release_chunk_as_free(tg_smb_t *smb, const tg_smb_chunk_t *c) {
  if (c->page_idx >= smb->num_pages) return -EINVAL;
  return chunk_transition(smb, c->page_idx, c->chunk_idx, TG_CHUNK_BEING_READ,
                          TG_CHUNK_FREE, true, SERVICE_CAS_ATTEMPTS, NULL);
}

/* Parses a fragment size header at |p|: a varint of at most 4 bytes (the
 * writer always uses exactly 4; shorter ones are legal protobuf). Returns the
 * header length, 0 if it runs past |end|, -1 if it is longer than 4 bytes. */
static int read_fragment_size(const uint8_t *p, const uint8_t *end,
                              uint32_t *size) {
  uint32_t v = 0;
  for (int i = 0; i < (int)TG_PACKET_HEADER_SIZE; i++) {
    if (p + i >= end) return 0;
    v |= (uint32_t)(p[i] & 0x7F) << (7 * i);
    if (!(p[i] & 0x80)) {
      *size = v;
      return i + 1;
    }
  }
  return -1;
}

int tg_chunk_validate(const uint8_t *copy, size_t size, bool complete,
                      tg_chunk_info_t *info) {
  memset(info, 0, sizeof(*info));
  if (size < TG_SMB_CHUNK_HEADER_SIZE) {
    info->violations = TG_CHUNK_V_TOO_SMALL;
    return TG_EABI_VIOLATION;
  }
  info->chunk_id = tg_pb_read_le32(copy);
  info->writer_id = (uint16_t)(copy[4] | (copy[5] << 8));
  uint16_t packets = (uint16_t)(copy[6] | (copy[7] << 8));
  info->packet_count = (uint16_t)tg_chunk_packets_count(packets);
  unsigned flags = tg_chunk_packets_flags(packets);
  if (flags & ~TG_CHUNK_KNOWN_FLAGS) info->violations |= TG_CHUNK_V_UNKNOWN_FLAGS;
  info->flags = (uint8_t)(flags & TG_CHUNK_KNOWN_FLAGS);
  if (info->writer_id == 0) {
    info->violations |= TG_CHUNK_V_WRITER_ID_ZERO;
    return TG_EABI_VIOLATION; /* nothing in it can be attributed */
  }
  if (info->packet_count == 0 &&
      (info->flags & (TG_CHUNK_FIRST_PACKET_CONTINUES |
                      TG_CHUNK_LAST_PACKET_CONTINUES))) {
    info->violations |= TG_CHUNK_V_FLAGS_WITHOUT_PACKETS;
    info->flags &= (uint8_t)~(TG_CHUNK_FIRST_PACKET_CONTINUES |
                              TG_CHUNK_LAST_PACKET_CONTINUES);
  }

  const uint8_t *begin = copy + TG_SMB_CHUNK_HEADER_SIZE;
  const uint8_t *p = begin;
  const uint8_t *end = copy + size;
  for (unsigned i = 0; i < info->packet_count; i++) {
    uint32_t fsize;
    int hdr = read_fragment_size(p, end, &fsize);
    size_t seen = hdr > 0 ? (size_t)hdr : (size_t)(end - p);
    if (seen > TG_PACKET_HEADER_SIZE) seen = TG_PACKET_HEADER_SIZE;
    info->headers_end = (uint32_t)(p + seen - begin);
    if (hdr <= 0) {
      info->violations |= hdr == 0 ? TG_CHUNK_V_HEADER_TRUNCATED
                                   : TG_CHUNK_V_BAD_SIZE_VARINT;
      break;
    }
    if (fsize == TG_PACKET_SIZE_DROP) {
      info->ends_with_drop = true;
      if (i + 1 != info->packet_count)
        info->violations |= TG_CHUNK_V_DROP_NOT_LAST;
      break;
    }
    if (fsize == 0 && !complete && i + 1 == info->packet_count) {
      info->last_fragment_open = true; /* still being written */
      break;
    }
    if (fsize > (size_t)(end - p) - (size_t)hdr) {
      info->violations |= TG_CHUNK_V_FRAGMENT_OVERFLOW;
      break;
    }
    p += (size_t)hdr + fsize;
    info->valid_fragments++;
  }
  info->payload_used = (uint32_t)(p - begin);
  return info->violations ? TG_EABI_VIOLATION : 0;
}

void tg_fragment_iter_init(tg_fragment_iter_t *it, const uint8_t *copy,
                           size_t size, const tg_chunk_info_t *info) {
  it->cur = copy + TG_SMB_CHUNK_HEADER_SIZE;
  it->end = copy + size;
  it->left = size >= TG_SMB_CHUNK_HEADER_SIZE ? info->valid_fragments : 0;
}

int tg_fragment_iter_next(tg_fragment_iter_t *it, const uint8_t **data,
                          size_t *len) {
  if (it->left == 0) return 0;
  uint32_t fsize = 0;
  int hdr = read_fragment_size(it->cur, it->end, &fsize);
  /* The copy was validated: a failure here means the caller mixed up
   * buffers. Stop rather than read out of bounds. */
  if (hdr <= 0 || fsize > (size_t)(it->end - it->cur) - (size_t)hdr) {
    it->left = 0;
    return 0;
  }
  *data = it->cur + hdr;
  *len = fsize;
  it->cur += (size_t)hdr + fsize;
  it->left--;
  return 1;
}
