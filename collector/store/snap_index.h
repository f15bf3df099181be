/* A snapshot's host index: where each host's packets lie in the merged
 * trace, so that one host's part is served by reading its byte ranges
 * alone, at a cost that follows the host's share and not the snapshot's
 * size (docs/collector.md, "One host's part").
 *
 * The merged file (docs/merge.md) is a head written once (the collector's
 * ClockSnapshot and SystemInfo: machine 0, the timeline every host is
 * aligned to), then each host's packets as they were read, interleaved
 * with the other hosts' a read at a time. Every byte after the head is
 * one host's: its preamble (SystemInfo, ClockSnapshot, RemoteClockSync)
 * and its packets, each with its machine id and sequence ids of its own.
 * So the head followed by one host's ranges, in file order, is a valid
 * trace of that host alone; several hosts' ranges merged in file order are
 * a valid trace of those hosts.
 *
 * The index file, "<id>.index" beside "<id>.pftrace" (all little-endian):
 *
 *   header (48 bytes):
 *     0  magic "TGSIDX01"
 *     8  u64 trace_bytes    the trace file's size: a stale index is seen
 *    16  u64 head_bytes     the head: bytes [0, head_bytes)
 *    24  u32 n_hosts        1..TG_COLL_INDEX_MAX_HOSTS
 *    28  u32 table_bytes    the host table's size, right after the header
 *    32  u32 table_crc      zlib crc32 of the host table
 *    36  u32 0
 *    40  u32 0
 *    44  u32 header_crc     crc32 of bytes 0..43
 *   host table, n_hosts entries, each:
 *     u16 name_len (1..TG_COLL_HOST_MAX), u16 0, u32 n_extents,
 *     u64 extents_at (offset in the index file), u32 extents_crc, name
 *   extent lists, each n_extents x (u64 offset, u64 length) in the trace,
 *     increasing, not touching (coalesced), after the head, inside the file.
 *
 * A reader takes the header and the host table (bounded: at most
 * TG_COLL_INDEX_MAX_TABLE bytes), then only the extent lists of the hosts
 * it serves. The index is read from disk: every count, offset and length
 * is checked against the index's and the trace's sizes before use, and a
 * checksum guards each part read (tests/fuzz/fuzz_snap_index.c).
 *
 * Bounds on the writer: an extent is one run of a host's consecutive
 * bytes, so a host has at most one per packet it sent; a snapshot's index
 * holds at most TG_COLL_INDEX_MAX_EXTENTS of them (16 bytes each). A
 * snapshot whose hosts' packets are more fragmented than that gets no
 * index (said in the log); its host parts are then refused with a clear
 * error, the whole trace still downloads.
 *
 * Not thread-safe; no global state.
 */
#ifndef TRACEGATE_COLLECTOR_STORE_SNAP_INDEX_H
#define TRACEGATE_COLLECTOR_STORE_SNAP_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_COLL_INDEX_MAGIC "TGSIDX01"
#define TG_COLL_INDEX_HEADER 48
#define TG_COLL_INDEX_ENTRY 20 /* a host table entry without its name */
#define TG_COLL_INDEX_EXTENT 16
/* A snapshot's hosts: one collector's (TG_MERGE_MAX_HOSTS). */
#define TG_COLL_INDEX_MAX_HOSTS 1024u
/* A host spec's bytes (TG_COLL_HOST_MAX). */
#define TG_COLL_INDEX_NAME_MAX 320u
#define TG_COLL_INDEX_MAX_TABLE \
  (TG_COLL_INDEX_MAX_HOSTS * (TG_COLL_INDEX_ENTRY + TG_COLL_INDEX_NAME_MAX))
/* Extents of one snapshot, all hosts: 32 MiB of index at most. */
#define TG_COLL_INDEX_MAX_EXTENTS (2u << 20)

typedef struct tg_coll_extent {
  uint64_t off, len;
} tg_coll_extent_t;

/* --- writing -------------------------------------------------------------- */

typedef struct tg_coll_index_builder tg_coll_index_builder_t;

/* A builder for |n_hosts| hosts (1..TG_COLL_INDEX_MAX_HOSTS), named later
 * by tg_coll_index_name. NULL when out of memory or |n_hosts| is out of
 * range. */
tg_coll_index_builder_t *tg_coll_index_builder_new(size_t n_hosts);
void tg_coll_index_builder_free(tg_coll_index_builder_t *b); /* NULL-safe */
/* Host |host|'s name (copied): its spec, as the snapshot's host rows say
 * it. -EINVAL when out of range, empty or longer than
 * TG_COLL_INDEX_NAME_MAX; -ENOMEM. */
int tg_coll_index_name(tg_coll_index_builder_t *b, size_t host,
                       const char *name);
/* The head ends at |bytes| (before any host's bytes). */
void tg_coll_index_head(tg_coll_index_builder_t *b, uint64_t bytes);
/* Bytes [off, off + len) of the trace are host |host|'s, written after
 * everything added so far. Coalesces with the host's last extent when
 * they touch. Past TG_COLL_INDEX_MAX_EXTENTS, or out of memory, the
 * builder gives up (tg_coll_index_why says why) and adds nothing more. */
void tg_coll_index_add(tg_coll_index_builder_t *b, size_t host, uint64_t off,
                       uint64_t len);
/* NULL while the builder can write an index; else why it cannot. */
const char *tg_coll_index_why(const tg_coll_index_builder_t *b);
/* Extents held so far, all hosts. */
size_t tg_coll_index_extents(const tg_coll_index_builder_t *b);

/* Writes the index of a trace of |trace_bytes| to |fd| (from its current
 * position). 0, -ENOSPC when the builder gave up, -EINVAL when a host has
 * no name or an extent passes |trace_bytes|, -errno. */
int tg_coll_index_write(const tg_coll_index_builder_t *b, int fd,
                        uint64_t trace_bytes);

/* --- after a rewrite ------------------------------------------------------ */

/* A second pass that writes the trace anew (reclock.h: some packets grow
 * by a few bytes, none is split, merged or reordered) moves every byte
 * after the first packet it changes; the index follows the packets to
 * their new places. The rewrite names each piece it wrote, in file
 * order: a piece of the old head is the new head's, a piece inside one
 * host's extent is that host's, a piece in no extent is nobody's (as it
 * was); a piece across two extents, or pieces out of order, make the
 * remap give up (the snapshot is then stored without an index, as when
 * its builder gives up). */
typedef struct tg_coll_index_remap tg_coll_index_remap_t;

/* A remap of the index |old| describes (borrowed until remap_end or
 * remap_free; no more bytes are added to it). NULL out of memory. */
tg_coll_index_remap_t *tg_coll_index_remap_new(
    const tg_coll_index_builder_t *old);
/* Bytes [in, in + in_n) of the old trace were written as [out, out +
 * out_n) of the new one. */
void tg_coll_index_remap_span(tg_coll_index_remap_t *r, uint64_t in,
                              uint64_t in_n, uint64_t out, uint64_t out_n);
/* The new index's builder (the caller's; its hosts named as |old|'s), or
 * NULL with *why: the remap gave up, or out of memory. Frees |r|. */
tg_coll_index_builder_t *tg_coll_index_remap_end(tg_coll_index_remap_t *r,
                                                 const char **why);
void tg_coll_index_remap_free(tg_coll_index_remap_t *r); /* NULL-safe */

/* --- reading -------------------------------------------------------------- */

typedef struct tg_coll_index_host {
  const char *name; /* into the index's table: NUL-terminated copy */
  uint32_t n_extents;
  uint64_t extents_at;
  uint32_t extents_crc;
} tg_coll_index_host_t;

typedef struct tg_coll_index {
  uint64_t trace_bytes, head_bytes;
  size_t n_hosts;
  tg_coll_index_host_t *hosts;
  char *names; /* the hosts' names, each NUL-terminated */
} tg_coll_index_t;

/* Parses the header and host table in the first |n| bytes of an index
 * file of |index_bytes| bytes (at least TG_COLL_INDEX_HEADER bytes, and
 * the whole table: tg_coll_index_table_bytes), for a trace of
 * |trace_bytes|. 0 and *out (free with tg_coll_index_free), or TG_EPARSE
 * (any check fails: the index does not describe this trace), -ENOMEM. */
int tg_coll_index_parse(const uint8_t *untrusted, size_t n,
                        uint64_t index_bytes, uint64_t trace_bytes,
                        tg_coll_index_t *out);
/* From a header's TG_COLL_INDEX_HEADER bytes, how many bytes the reader
 * must hand tg_coll_index_parse (header and table); TG_EPARSE when the
 * header is not an index's or its table is over TG_COLL_INDEX_MAX_TABLE. */
int tg_coll_index_table_bytes(const uint8_t *untrusted, size_t n,
                              size_t *need);
void tg_coll_index_free(tg_coll_index_t *ix); /* zeroed; safe twice */
/* The host named |name| (|len| bytes), or -ENOENT. */
int tg_coll_index_find(const tg_coll_index_t *ix, const char *name,
                       size_t len, size_t *host);
/* Checks host |host|'s extent list, the n_extents * 16 bytes at
 * |untrusted| read from its extents_at, and decodes it into |out| (room
 * for n_extents). 0 or TG_EPARSE. */
int tg_coll_index_host_extents(const tg_coll_index_t *ix, size_t host,
                               const uint8_t *untrusted, size_t n,
                               tg_coll_extent_t *out);

/* Reads the index of the trace of |trace_bytes| from |fd| (pread). 0 and
 * *out, TG_EPARSE, -ENOMEM, -errno. */
int tg_coll_index_read(int fd, uint64_t trace_bytes, tg_coll_index_t *out);

/* What to send for |hosts| (|n| indexes into ix->hosts, each once): the
 * head, then their extents merged in file order and coalesced. Reads
 * their extent lists from |fd|. 0, *out (malloc'ed, the caller's), *n_out
 * and *bytes (their sum); TG_EPARSE, -ENOMEM, -errno. */
int tg_coll_index_plan(const tg_coll_index_t *ix, int fd, const size_t *hosts,
                       size_t n, tg_coll_extent_t **out, size_t *n_out,
                       uint64_t *bytes);

#endif /* TRACEGATE_COLLECTOR_STORE_SNAP_INDEX_H */
