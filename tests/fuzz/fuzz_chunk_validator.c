/* Fuzzes the SMB chunk validator (abi/smb.h) with hostile chunk copies.
 *
 * The input is a chunk exactly as the service copies it out of the SMB. It
 * is validated as a Complete chunk and as a scraped BeingWritten one, and
 * the fragment iterator must then hand out only bytes inside the copy that
 * add up, headers included, to info.payload_used. Bytes at or past
 * info.headers_end may change (the service skips re-validation after a
 * patch there) without changing the result.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/smb.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_chunk_info_t check(const uint8_t *copy, size_t size, bool complete) {
  tg_chunk_info_t info;
  memset(&info, 0xA5, sizeof(info)); /* validate must overwrite everything */
  int rv = tg_chunk_validate(copy, size, complete, &info);
  if (rv != 0 && rv != TG_EABI_VIOLATION) __builtin_trap();
  if ((rv == 0) != (info.violations == 0)) __builtin_trap();
  if (size < TG_SMB_CHUNK_HEADER_SIZE) {
    if (info.violations != TG_CHUNK_V_TOO_SMALL) __builtin_trap();
  } else if (info.payload_used > size - TG_SMB_CHUNK_HEADER_SIZE) {
    __builtin_trap();
  }
  if (info.valid_fragments > info.packet_count) __builtin_trap();
  if (info.packet_count > TG_CHUNK_MAX_PACKETS) __builtin_trap();
  if (info.flags & ~TG_CHUNK_KNOWN_FLAGS) __builtin_trap();
  if (info.last_fragment_open &&
      (complete || info.valid_fragments + 1 != info.packet_count))
    __builtin_trap();
  if (info.ends_with_drop && info.last_fragment_open) __builtin_trap();
  if (info.ends_with_drop && !(info.violations & TG_CHUNK_V_DROP_NOT_LAST) &&
      info.valid_fragments + 1 != info.packet_count)
    __builtin_trap();
  if ((info.violations & TG_CHUNK_V_WRITER_ID_ZERO) && info.valid_fragments)
    __builtin_trap();
  if (size < TG_SMB_CHUNK_HEADER_SIZE) {
    if (info.valid_fragments || info.payload_used) __builtin_trap();
    tg_fragment_iter_t it;
    tg_fragment_iter_init(&it, copy, size, &info);
    const uint8_t *frag;
    size_t len;
    if (tg_fragment_iter_next(&it, &frag, &len)) __builtin_trap();
    return info;
  }

  tg_fragment_iter_t it;
  tg_fragment_iter_init(&it, copy, size, &info);
  const uint8_t *frag;
  size_t len;
  const uint8_t *expect = copy + TG_SMB_CHUNK_HEADER_SIZE;
  size_t sum = 0;
  unsigned n = 0;
  while (tg_fragment_iter_next(&it, &frag, &len)) {
    /* Inside the copy, after a 1..4-byte size header, back to back. */
    if (frag <= expect || frag - expect > (ptrdiff_t)TG_PACKET_HEADER_SIZE)
      __builtin_trap();
    if (frag < copy + TG_SMB_CHUNK_HEADER_SIZE || frag > copy + size ||
        len > (size_t)(copy + size - frag))
      __builtin_trap();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < len; i++) sink ^= frag[i]; /* ASan probes them */
    (void)sink;
    sum += (size_t)(frag - expect) + len;
    expect = frag + len;
    if (++n > info.valid_fragments) __builtin_trap();
  }
  if (n != info.valid_fragments) __builtin_trap();
  if (sum != info.payload_used) __builtin_trap();
  return info;
}

static bool same_info(const tg_chunk_info_t *a, const tg_chunk_info_t *b) {
  return a->chunk_id == b->chunk_id && a->writer_id == b->writer_id &&
         a->packet_count == b->packet_count && a->flags == b->flags &&
         a->valid_fragments == b->valid_fragments &&
         a->ends_with_drop == b->ends_with_drop &&
         a->last_fragment_open == b->last_fragment_open &&
         a->violations == b->violations &&
         a->payload_used == b->payload_used &&
         a->headers_end == b->headers_end;
}

/* Flips every payload byte from info.headers_end on: the result holds. */
static void check_tail_unread(const uint8_t *data, size_t size, bool complete,
                              const tg_chunk_info_t *info) {
  if (size < TG_SMB_CHUNK_HEADER_SIZE) return;
  size_t from = TG_SMB_CHUNK_HEADER_SIZE + (size_t)info->headers_end;
  if (from > size) __builtin_trap();
  if (from == size) return;
  uint8_t *copy = malloc(size);
  if (!copy) return;
  memcpy(copy, data, size);
  for (size_t i = from; i < size; i++) copy[i] ^= 0xFF;
  tg_chunk_info_t again = check(copy, size, complete);
  free(copy);
  if (!same_info(info, &again)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_chunk_info_t done = check(data, size, true);
  tg_chunk_info_t open = check(data, size, false);
  /* The two modes differ only by a trailing zero-size fragment, which a
   * complete chunk counts as an empty packet. */
  if (open.last_fragment_open) {
    if (done.valid_fragments != open.valid_fragments + 1 ||
        done.violations != open.violations ||
        done.payload_used <= open.payload_used ||
        done.payload_used - open.payload_used > TG_PACKET_HEADER_SIZE)
      __builtin_trap();
  } else if (!same_info(&done, &open)) {
    __builtin_trap();
  }
  check_tail_unread(data, size, true, &done);
  check_tail_unread(data, size, false, &open);
  return 0;
}
