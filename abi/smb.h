/* The shared memory buffer (SMB) between one producer and the service.
 *
 * Byte-compatible with Perfetto's SharedMemoryABI, so producers built with the
 * Perfetto SDK can write into tracegated and our agent can write into traced.
 *
 *   SMB:   [ page 0 ][ page 1 ] ... [ page N-1 ]      page size 4/8/16/32 KiB
 *   page:  [ header 8 B ][ chunk 0 ][ chunk 1 ] ... [ unused tail ]
 *   header: u32 bitmap (atomic) | u32 reserved
 *           bitmap bits 0..27: 14 chunk states of 2 bits (chunk i at 2*i)
 *           bitmap bits 28..30: layout; bit 31 reserved
 *   chunk: [ header 8 B ][ fragment ][ fragment ] ... [ free space ]
 *   chunk header: u32 chunk_id | u16 writer_id | u16 packets
 *           packets bits 0..9: fragment count; bits 10..15: flags
 *   fragment: [ 4-byte redundant varint size ][ size bytes of a TracePacket ]
 *
 * Layouts 1..5 split a page into 1, 2, 4, 7 or 14 chunks of
 * ((page_size - 8) / n) & ~3 bytes. Layout 0 is "not partitioned".
 *
 * Chunk state machine, every transition a CAS on the page bitmap:
 *
 *   Free --producer--> BeingWritten --producer--> Complete
 *     ^                                               |
 *     +----service---- BeingRead <-----service--------+
 *
 * The producer partitions a page (bitmap 0 -> layout << 28), acquires a Free
 * chunk, writes the chunk header, appends fragments, and releases the chunk as
 * Complete. The service acquires Complete chunks for reading, copies them out
 * and releases them as Free; the release that frees a page's last chunk turns
 * the bitmap back to 0 so the page can take a new layout. The service also
 * reads (scrapes) BeingWritten chunks on flush without changing their state.
 *
 * The producer is untrusted and keeps running while the service reads: the
 * service never parses SMB bytes in place. It copies a chunk out first and
 * validates the copy (tg_chunk_validate), and every bitmap it reads is treated
 * as a snapshot that may be garbage.
 */
#ifndef TRACEGATE_ABI_SMB_H
#define TRACEGATE_ABI_SMB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_SMB_PAGE_HEADER_SIZE 8u
#define TG_SMB_CHUNK_HEADER_SIZE 8u
#define TG_SMB_MIN_PAGE_SIZE 4096u
#define TG_SMB_MAX_PAGE_SIZE 32768u
#define TG_SMB_DEFAULT_PAGE_SIZE 4096u
#define TG_SMB_DEFAULT_SIZE (256u * 1024u)
#define TG_SMB_MAX_SIZE (32u * 1024u * 1024u)
#define TG_SMB_MAX_CHUNKS_PER_PAGE 14u
#define TG_SMB_NUM_LAYOUTS 8u
#define TG_SMB_CHUNK_ALIGNMENT 4u

#define TG_SMB_LAYOUT_SHIFT 28u
#define TG_SMB_LAYOUT_MASK 0x7u
#define TG_SMB_CHUNK_STATE_MASK 0x3u
#define TG_SMB_ALL_CHUNK_STATES_MASK 0x0FFFFFFFu

enum tg_smb_chunk_state {
  TG_CHUNK_FREE = 0,
  TG_CHUNK_BEING_WRITTEN = 1,
  TG_CHUNK_BEING_READ = 2,
  TG_CHUNK_COMPLETE = 3,
};

enum tg_smb_page_layout {
  TG_PAGE_NOT_PARTITIONED = 0,
  TG_PAGE_DIV_1 = 1,
  TG_PAGE_DIV_2 = 2,
  TG_PAGE_DIV_4 = 3,
  TG_PAGE_DIV_7 = 4,
  TG_PAGE_DIV_14 = 5,
  /* 6 and 7 are reserved: a page carrying them is an ABI violation. */
};

/* Chunk header flags (packets bits 10..15). */
#define TG_CHUNK_FIRST_PACKET_CONTINUES 0x1u /* from the previous chunk */
#define TG_CHUNK_LAST_PACKET_CONTINUES 0x2u  /* in the next chunk */
#define TG_CHUNK_NEEDS_PATCHING 0x4u
#define TG_CHUNK_KNOWN_FLAGS 0x7u

#define TG_CHUNK_PACKET_COUNT_BITS 10u
#define TG_CHUNK_MAX_PACKETS ((1u << TG_CHUNK_PACKET_COUNT_BITS) - 1u)

/* Fragment size headers. A size of TG_PACKET_SIZE_DROP ends the chunk and
 * tells the service to discard the packet it belongs to (the writer ran out
 * of SMB in drop mode mid-packet). */
#define TG_PACKET_HEADER_SIZE 4u
#define TG_PACKET_SIZE_DROP 0x0FFFFFFFu

typedef struct tg_smb_page_header {
  _Atomic uint32_t bitmap;
  uint32_t reserved;
} tg_smb_page_header_t;

typedef struct tg_smb_chunk_header {
  _Atomic uint32_t chunk_id;
  _Atomic uint16_t writer_id;
  _Atomic uint16_t packets; /* count | flags << 10 */
} tg_smb_chunk_header_t;

_Static_assert(sizeof(tg_smb_page_header_t) == TG_SMB_PAGE_HEADER_SIZE,
               "page header is 8 bytes");
_Static_assert(offsetof(tg_smb_page_header_t, bitmap) == 0, "bitmap first");
_Static_assert(sizeof(tg_smb_chunk_header_t) == TG_SMB_CHUNK_HEADER_SIZE,
               "chunk header is 8 bytes");
_Static_assert(offsetof(tg_smb_chunk_header_t, chunk_id) == 0, "chunk_id @0");
_Static_assert(offsetof(tg_smb_chunk_header_t, writer_id) == 4,
               "writer_id @4");
_Static_assert(offsetof(tg_smb_chunk_header_t, packets) == 6, "packets @6");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_SHORT_LOCK_FREE == 2,
               "SMB atomics must be lock-free: they cross processes");
_Static_assert(TG_SMB_MAX_CHUNKS_PER_PAGE * 2 == TG_SMB_LAYOUT_SHIFT,
               "chunk states fill the bits below the layout");

static inline unsigned tg_smb_layout_num_chunks(unsigned layout) {
  static const uint8_t n[TG_SMB_NUM_LAYOUTS] = {0, 1, 2, 4, 7, 14, 0, 0};
  return n[layout & TG_SMB_LAYOUT_MASK];
}

/* Chunk size for |layout| in pages of |page_size| bytes (0 for layouts
 * without chunks). */
static inline size_t tg_smb_chunk_size(size_t page_size, unsigned layout) {
  unsigned n = tg_smb_layout_num_chunks(layout);
  if (n == 0) return 0;
  return ((page_size - TG_SMB_PAGE_HEADER_SIZE) / n) &
         ~(size_t)(TG_SMB_CHUNK_ALIGNMENT - 1);
}

static inline unsigned tg_smb_bitmap_layout(uint32_t bitmap) {
  return (bitmap >> TG_SMB_LAYOUT_SHIFT) & TG_SMB_LAYOUT_MASK;
}
static inline unsigned tg_smb_bitmap_chunk_state(uint32_t bitmap,
                                                 unsigned chunk_idx) {
  return (bitmap >> (2 * chunk_idx)) & TG_SMB_CHUNK_STATE_MASK;
}

static inline uint16_t tg_chunk_packets_pack(unsigned count, unsigned flags) {
  return (uint16_t)((count & TG_CHUNK_MAX_PACKETS) |
                    ((flags & 0x3Fu) << TG_CHUNK_PACKET_COUNT_BITS));
}
static inline unsigned tg_chunk_packets_count(uint16_t packets) {
  return packets & TG_CHUNK_MAX_PACKETS;
}
static inline unsigned tg_chunk_packets_flags(uint16_t packets) {
  return (unsigned)packets >> TG_CHUNK_PACKET_COUNT_BITS;
}

/* A view of a mapped SMB. Owns nothing: the mapping belongs to the caller. */
typedef struct tg_smb {
  uint8_t *base;
  size_t size;
  size_t page_size;
  size_t num_pages;
} tg_smb_t;

/* A chunk handed out by an acquire call. |begin| points at its header. */
typedef struct tg_smb_chunk {
  uint8_t *begin;
  size_t size; /* header + payload */
  uint32_t page_idx;
  uint8_t chunk_idx;
  uint8_t layout;
} tg_smb_chunk_t;

/* True when |page_size| and |size| form a valid SMB geometry: page a power of
 * two multiple of 4 KiB up to 32 KiB, size a non-zero multiple of it up to
 * 32 MiB. */
bool tg_smb_geometry_valid(size_t size, size_t page_size);

/* Returns 0 or -EINVAL (bad geometry, NULL base). Does not touch memory. */
int tg_smb_init(tg_smb_t *smb, void *base, size_t size, size_t page_size);

static inline tg_smb_page_header_t *tg_smb_page(const tg_smb_t *smb,
                                                size_t page_idx) {
  return (tg_smb_page_header_t *)(smb->base + page_idx * smb->page_size);
}

/* Acquire-load of a page's bitmap; pairs with the releasing CAS of whoever
 * changed it last. Caller checks page_idx < num_pages. */
static inline uint32_t tg_smb_page_bitmap(const tg_smb_t *smb,
                                          size_t page_idx) {
  return atomic_load_explicit(&tg_smb_page(smb, page_idx)->bitmap,
                              memory_order_acquire);
}

/* --- producer side ----------------------------------------------------- */

/* Free, unpartitioned page -> |layout| (1..5). Returns 0, -EINVAL (bad
 * arguments) or TG_ECHUNK_STATE (page already partitioned). */
int tg_smb_try_partition_page(tg_smb_t *smb, size_t page_idx, unsigned layout);

/* Free -> BeingWritten, then writes the header (|chunk_id|, |writer_id|, no
 * packets). Returns 0 and fills |out|, or TG_ECHUNK_STATE when the chunk is
 * not free, -EINVAL for an index outside the page's layout. */
int tg_smb_try_acquire_chunk_for_writing(tg_smb_t *smb, size_t page_idx,
                                         unsigned chunk_idx, uint32_t chunk_id,
                                         uint16_t writer_id,
                                         tg_smb_chunk_t *out);

/* Publishes the fragment count and flags of a chunk being written. Release
 * order: a scraping service that reads the count with acquire sees the
 * fragments before it. */
static inline void tg_smb_chunk_set_packets(tg_smb_chunk_t *c, unsigned count,
                                            unsigned flags) {
  tg_smb_chunk_header_t *h = (tg_smb_chunk_header_t *)c->begin;
  atomic_store_explicit(&h->packets, tg_chunk_packets_pack(count, flags),
                        memory_order_release);
}

/* BeingWritten -> Complete (release: the service's acquire of the chunk for
 * reading sees everything written). Returns 0 or TG_ECHUNK_STATE. */
int tg_smb_release_chunk_as_complete(tg_smb_t *smb, const tg_smb_chunk_t *c);

/* --- service side ------------------------------------------------------ */

/* Complete -> BeingRead. Every argument comes from an untrusted CommitData
 * and is checked. Returns 0 and fills |out| (size from the bitmap's layout),
 * -EINVAL for indices out of range or a reserved layout, TG_ECHUNK_STATE when
 * the chunk is not Complete. */
int tg_smb_try_acquire_chunk_for_reading(tg_smb_t *smb, size_t page_idx,
                                         unsigned chunk_idx,
                                         tg_smb_chunk_t *out);

/* BeingRead -> Free; when that frees the page's last chunk, the bitmap
 * becomes 0 (not partitioned). Returns 0, or TG_ECHUNK_STATE / -EINVAL when
 * a producer scribbled on the bitmap meanwhile (state or layout changed):
 * the chunk stays as the producer left it, the service just forgets it. */
int tg_smb_release_chunk_as_free(tg_smb_t *smb, const tg_smb_chunk_t *c);

/* Locates chunk |chunk_idx| of a page for a read that does not take
 * ownership (scraping BeingWritten chunks on flush). Validates indices
 * against the given |bitmap| snapshot. Returns 0 or -EINVAL. */
int tg_smb_chunk_locate(const tg_smb_t *smb, size_t page_idx,
                        unsigned chunk_idx, uint32_t bitmap,
                        tg_smb_chunk_t *out);

/* --- validating a copied chunk --------------------------------------------
 * The service memcpy()s a chunk out of the SMB, then validates the copy. The
 * result says which leading fragments are sound; everything after the first
 * violation is discarded (the earlier fragments are still good data). */

enum tg_chunk_violation {
  TG_CHUNK_V_TOO_SMALL = 1u << 0,          /* shorter than its header */
  TG_CHUNK_V_WRITER_ID_ZERO = 1u << 1,     /* writer 0 is invalid */
  TG_CHUNK_V_UNKNOWN_FLAGS = 1u << 2,      /* flag bits 0x8..0x20 set */
  TG_CHUNK_V_HEADER_TRUNCATED = 1u << 3,   /* size header past the end */
  TG_CHUNK_V_BAD_SIZE_VARINT = 1u << 4,    /* size not a varint of <= 4 B */
  TG_CHUNK_V_FRAGMENT_OVERFLOW = 1u << 5,  /* size past the chunk's end */
  TG_CHUNK_V_DROP_NOT_LAST = 1u << 6,      /* drop marker before the end */
  TG_CHUNK_V_FLAGS_WITHOUT_PACKETS = 1u << 7, /* continuation, 0 fragments */
};

typedef struct tg_chunk_info {
  uint32_t chunk_id;
  uint16_t writer_id;
  uint16_t packet_count;    /* as claimed by the header */
  uint8_t flags;            /* known flags only */
  uint16_t valid_fragments; /* leading fragments that are sound */
  bool ends_with_drop;      /* fragment valid_fragments is a drop marker */
  bool last_fragment_open;  /* incomplete chunk: last fragment size 0 */
  uint32_t violations;      /* TG_CHUNK_V_* bitmask; 0 when clean */
  uint32_t payload_used;    /* bytes covered by the valid fragments */
  /* Payload bytes at or past this offset were never read: a change to
   * them (a patch) cannot change the result, so it need not be redone. */
  uint32_t headers_end;
} tg_chunk_info_t;

/* Validates a private copy of a chunk (header included) of |size| bytes.
 * |complete| is false for chunks scraped while BeingWritten: then a trailing
 * fragment of size 0 (still being written) ends the chunk without violation.
 * Always fills |info|; returns 0 when clean, TG_EABI_VIOLATION otherwise. */
int tg_chunk_validate(const uint8_t *copy, size_t size, bool complete,
                      tg_chunk_info_t *info);

/* Walks the valid fragments of a validated copy. */
typedef struct tg_fragment_iter {
  const uint8_t *cur;
  const uint8_t *end;
  unsigned left;
} tg_fragment_iter_t;

void tg_fragment_iter_init(tg_fragment_iter_t *it, const uint8_t *copy,
                           size_t size, const tg_chunk_info_t *info);
/* Returns 1 with |data|/|len| set to the next fragment's bytes, 0 at the end. */
int tg_fragment_iter_next(tg_fragment_iter_t *it, const uint8_t **data,
                          size_t *len);

#endif /* TRACEGATE_ABI_SMB_H */
