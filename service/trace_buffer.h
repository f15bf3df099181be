/* The central trace buffer: where committed SMB chunks live until read.
 *
 * One per TraceConfig.buffers entry. Producers' chunks are copied in whole
 * (CommitData moves, or scraping on flush), validated on the copy, indexed
 * by {producer, writer, chunk id}, and read out packet by packet:
 *
 *   ring:  [rec hdr][chunk payload][rec hdr][chunk payload][pad] ...
 *            ^ oldest record                 ^ write position
 *
 * - A sequence is {producer id, writer id}. Its packets come out in chunk id
 *   order (ids wrap at 2^32; "newer" uses serial-number arithmetic), with
 *   fragments reassembled across chunks by the continuation flags. Only
 *   whole packets are returned. A missing next chunk, a chunk that still
 *   needs patching, or an incomplete (scraped) chunk stalls that sequence
 *   only; the others keep flowing.
 * - A complete chunk (not waiting for patches) takes the ring bytes its
 *   fragments were written in, not its size: a chunk committed part full
 *   costs what it holds, so the ring keeps that much more history.
 * - RING_BUFFER overwrites the oldest whole records; DISCARD refuses new
 *   chunks once full. Either makes room for the chunk's whole size before
 *   the copy tells what it holds. Every loss is counted in tg_trace_buffer_stats_t and
 *   flagged on the next packet read from the sequence that lost data
 *   (previous_packet_dropped); so is the first packet of every sequence,
 *   as Perfetto's TraceBuffer does: the stats tell a real loss apart.
 * - A chunk committed again with the same key (scraped first, then complete)
 *   replaces the earlier copy in place; fragments already read from it are
 *   not returned twice.
 * - Reads are destructive.
 *
 * Input is untrusted: the chunk bytes come from a producer's SMB or IPC.
 * The buffer never trusts a size, count or flag it did not validate.
 * Not thread-safe: the service uses it from its event loop only.
 * The fast path (copy_chunk, read_packet) does no allocation.
 */
#ifndef TRACEGATE_SERVICE_TRACE_BUFFER_H
#define TRACEGATE_SERVICE_TRACE_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writer ids are 15 bits, as in Perfetto (kMaxWriterID): a chunk, patch or
 * registration naming writer 0 or one above this is refused. */
#define TG_TRACE_BUFFER_MAX_WRITER_ID 32767u

/* Bytes the buffer keeps beside each chunk it holds (the chunk's own bytes
 * are then rounded up to 8). The ring is the size asked for plus one of
 * these, so that a chunk as large as the buffer fits;
 * tg_trace_buffer_used() counts them too. */
#define TG_TRACE_BUFFER_RECORD_OVERHEAD 48u

typedef enum tg_fill_policy {
  TG_FILL_RING_BUFFER = 1,
  TG_FILL_DISCARD = 2,
} tg_fill_policy_t;

/* Mirrors TraceStats.BufferStats (same names). */
typedef struct tg_trace_buffer_stats {
  uint64_t buffer_size;
  uint64_t bytes_written;
  uint64_t bytes_overwritten;
  uint64_t bytes_read;
  uint64_t padding_bytes_written;
  uint64_t chunks_written;
  uint64_t chunks_rewritten;
  uint64_t chunks_overwritten;
  uint64_t chunks_discarded;
  uint64_t chunks_read;
  uint64_t chunks_committed_out_of_order;
  uint64_t write_wrap_count;
  uint64_t patches_succeeded;
  uint64_t patches_failed;
  uint64_t abi_violations;
  uint64_t trace_writer_packet_loss;
} tg_trace_buffer_stats_t;

typedef struct tg_trace_buffer tg_trace_buffer_t;

/* Trusted facts about a producer, supplied by the service (from SO_PEERCRED
 * and its own numbering), never by the producer. */
typedef struct tg_producer_ident {
  uint16_t producer_id; /* 1..65535, unique while the producer is connected */
  uid_t uid;
  pid_t pid;
} tg_producer_ident_t;

/* A packet returned by tg_trace_buffer_read_packet(): |num_slices| pieces
 * whose concatenation is the TracePacket bytes, one per fragment, however
 * many chunks the packet spans. The arrays and the bytes belong to the
 * buffer and stay valid until the next call that modifies it (copy_chunk,
 * patch, read_packet, free). The arrays have one spare entry at index
 * |num_slices|, for a reader that appends a piece of its own (the
 * service's trusted fields). */
typedef struct tg_packet {
  const uint8_t **slice;
  size_t *slice_len;
  unsigned num_slices;
  size_t size;                  /* sum of slice_len */
  tg_producer_ident_t producer; /* who wrote it */
  uint16_t writer_id;
  /* The sequence's first packet (as Perfetto's TraceBuffer flags it), or
   * data was lost on the sequence before it. */
  bool previous_packet_dropped;
} tg_packet_t;

/* |size| is rounded down to a multiple of 8 and must be at least 4 KiB.
 * Returns NULL on allocation failure or a bad size. Free with
 * tg_trace_buffer_free(). */
tg_trace_buffer_t *tg_trace_buffer_new(size_t size, tg_fill_policy_t policy);
void tg_trace_buffer_free(tg_trace_buffer_t *tb);

/* Copies one chunk (8-byte header + payload, exactly as in the SMB) from
 * |chunk_untrusted|, which the caller has already copied out of shared
 * memory (the buffer reads it once, but makes no other assumption).
 * |complete| is false for chunks scraped while BeingWritten. Returns 0 if
 * stored, TG_EABI_VIOLATION if the chunk was malformed or its writer id is
 * outside 1..TG_TRACE_BUFFER_MAX_WRITER_ID (counted; the sound
 * leading fragments are still stored when there are any), TG_ENO_SPACE when
 * DISCARD refused it or it can never fit (counted as chunks_discarded). */
int tg_trace_buffer_copy_chunk(tg_trace_buffer_t *tb,
                               const tg_producer_ident_t *producer,
                               const uint8_t *chunk_untrusted, size_t size,
                               bool complete);

/* The same for a chunk scraped from the SMB (|complete|: it was Complete,
 * its CommitData still to come; else BeingWritten). A Complete chunk
 * whose scraped copy was read whole is not stored again when its
 * CommitData (or another scrape) brings it: the reader has its packets,
 * and it is neither a loss nor read twice (chunks_rewritten). */
int tg_trace_buffer_scrape_chunk(tg_trace_buffer_t *tb,
                                 const tg_producer_ident_t *producer,
                                 const uint8_t *chunk_untrusted, size_t size,
                                 bool complete);

/* The producer unregistered writer |writer_id|: its id may come back for
 * a new writer whose chunk ids start again, so what was read of its
 * scraped chunks is forgotten. */
void tg_trace_buffer_writer_gone(tg_trace_buffer_t *tb, uint16_t producer_id,
                                 uint16_t writer_id);

/* Applies 4-byte patches to a stored chunk. |offsets[i]| is from the start
 * of the chunk payload (after the 8-byte chunk header); each patch must lie
 * entirely within the chunk's payload. Returns 0 if the chunk was found and
 * every patch applied (patches_succeeded), TG_EABI_VIOLATION / -ENOENT
 * otherwise (patches_failed; nothing applied). The part of a patch past
 * the bytes a complete chunk's fragments cover is not kept: nothing reads
 * there. |has_more| false clears the
 * chunk's needs-patching flag so its sequence can be read past it. */
int tg_trace_buffer_patch(tg_trace_buffer_t *tb, uint16_t producer_id,
                          uint16_t writer_id, uint32_t chunk_id,
                          const uint32_t *offsets, const uint8_t (*data)[4],
                          size_t n, bool has_more);

/* Reads the next complete packet of any sequence. Returns 1 with |out|
 * filled, 0 when nothing is readable now. A packet whose slice table
 * cannot grow (out of memory) is dropped and counted
 * (trace_writer_packet_loss) rather than returned. */
int tg_trace_buffer_read_packet(tg_trace_buffer_t *tb, tg_packet_t *out);

/* Marks every chunk of |producer_id| as complete-and-final for reading:
 * called when the producer disconnects, so that what it committed can be
 * read out to the end and its incomplete trailing packet is counted as lost
 * instead of stalling the sequence forever. A chunk still waiting for
 * patches is never read as it is (its unpatched bytes are not what the
 * producer meant): it is dropped whole and counted in chunks_discarded,
 * and the sequence's next packet is flagged previous_packet_dropped. */
void tg_trace_buffer_producer_gone(tg_trace_buffer_t *tb, uint16_t producer_id);

/* A read-only snapshot of |src| (ConsumerPort.CloneSession): its unread
 * records, index and counters, copied. |src| is not changed and producers
 * keep writing into it. The copy takes no more chunks or patches, and
 * tg_trace_buffer_producer_gone() leaves it as it is. Each of its
 * sequences reads out what it had committed and ends, without a loss
 * counted, where data was still in flight (as Perfetto's CloneReadOnly):
 * the last fragment of a scraped chunk, a packet continuing into a chunk
 * not committed yet, a chunk still waiting for patches. The original
 * keeps that data. Returns NULL when out of memory. Free with
 * tg_trace_buffer_free(). */
tg_trace_buffer_t *tg_trace_buffer_clone(const tg_trace_buffer_t *src);

/* Counts an ABI violation found outside the buffer but aimed at it (e.g. a
 * CommitData for a chunk the producer does not have Complete). */
void tg_trace_buffer_note_abi_violation(tg_trace_buffer_t *tb);

const tg_trace_buffer_stats_t *tg_trace_buffer_stats(const tg_trace_buffer_t *tb);
size_t tg_trace_buffer_size(const tg_trace_buffer_t *tb);
/* Bytes of records (chunks and their TG_TRACE_BUFFER_RECORD_OVERHEAD) not
 * yet fully read: 0 when everything was read, at most
 * tg_trace_buffer_size() + TG_TRACE_BUFFER_RECORD_OVERHEAD. */
size_t tg_trace_buffer_used(const tg_trace_buffer_t *tb);

#endif /* TRACEGATE_SERVICE_TRACE_BUFFER_H */
