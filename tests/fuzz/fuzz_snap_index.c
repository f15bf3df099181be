/* Fuzzes the snapshot host index reader (collector/store/snap_index.h): the
 * index is read back from the store's disk, where anything may have
 * happened to it, and its offsets pick the bytes an HTTP answer sends.
 *
 * Input: one control byte, then an index file. Control bit 0 set: the
 * harness first makes the checksums the file's entries claim right
 * (extent lists, host table, header), so that mutations reach the checks
 * behind them. The trace the index is read against has the size the
 * header says (else every input would be refused at that check) plus
 * control bits 1..2 (0..3 bytes more: a stale index).
 *
 * Invariants (trap on violation): a parsed index has 1..1024 hosts with
 * distinct names of 1..320 bytes and no NUL; every host's accepted extent
 * list is non-empty ranges after the head, increasing, not touching, and
 * inside the trace; find() finds each host by its own name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "collector/store/snap_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INDEX_INPUT_MAX (1u << 20)

static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) {
  return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t sum(const uint8_t *p, size_t n) {
  return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* Walks the table as loosely as the bounds allow, fixing each entry's
 * extent crc, then the table's and the header's. */
static void fix_checksums(uint8_t *f, size_t n) {
  if (n < TG_COLL_INDEX_HEADER) return;
  size_t table = get32(f + 28);
  if (table > n - TG_COLL_INDEX_HEADER) table = n - TG_COLL_INDEX_HEADER;
  uint8_t *t = f + TG_COLL_INDEX_HEADER;
  for (size_t pos = 0; table - pos >= TG_COLL_INDEX_ENTRY;) {
    uint8_t *e = t + pos;
    size_t nl = (size_t)e[0] | (size_t)e[1] << 8;
    uint64_t ne = get32(e + 4), at = get64(e + 8);
    if (at <= n && ne * TG_COLL_INDEX_EXTENT <= n - at)
      put32(e + 16, sum(f + at, (size_t)(ne * TG_COLL_INDEX_EXTENT)));
    if (table - pos - TG_COLL_INDEX_ENTRY < nl) break;
    pos += TG_COLL_INDEX_ENTRY + nl;
  }
  put32(f + 32, sum(t, table));
  put32(f + 44, sum(f, 44));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size - 1 > INDEX_INPUT_MAX) return 0;
  uint8_t ctl = data[0];
  size_t n = size - 1;
  uint8_t *f = malloc(n ? n : 1);
  if (!f) return 0;
  memcpy(f, data + 1, n);
  if (ctl & 1) fix_checksums(f, n);
  uint64_t trace = n >= 16 ? get64(f + 8) : 0;
  trace += (ctl >> 1) & 3;
  tg_coll_index_t ix;
  size_t need;
  if (tg_coll_index_table_bytes(f, n, &need) == 0 &&
      need <= TG_COLL_INDEX_HEADER + TG_COLL_INDEX_MAX_TABLE &&
      tg_coll_index_parse(f, n, n, trace, &ix) == 0) {
    if (ix.n_hosts < 1 || ix.n_hosts > TG_COLL_INDEX_MAX_HOSTS ||
        ix.head_bytes > trace)
      __builtin_trap();
    for (size_t i = 0; i < ix.n_hosts; i++) {
      const tg_coll_index_host_t *h = &ix.hosts[i];
      size_t nl = strlen(h->name), found;
      if (nl < 1 || nl > TG_COLL_INDEX_NAME_MAX) __builtin_trap();
      if (tg_coll_index_find(&ix, h->name, nl, &found) != 0 || found != i)
        __builtin_trap();
      size_t len = (size_t)h->n_extents * TG_COLL_INDEX_EXTENT;
      if (h->extents_at > n || len > n - h->extents_at) __builtin_trap();
      tg_coll_extent_t *e = malloc(h->n_extents ? len : 1);
      if (!e) break;
      if (tg_coll_index_host_extents(&ix, i, f + h->extents_at, len, e) == 0) {
        uint64_t end = ix.head_bytes;
        for (uint32_t k = 0; k < h->n_extents; k++) {
          if (!e[k].len || e[k].off < end || (k && e[k].off == end) ||
              e[k].off > trace || e[k].len > trace - e[k].off)
            __builtin_trap();
          end = e[k].off + e[k].len;
        }
      }
      free(e);
    }
    tg_coll_index_free(&ix);
  }
  free(f);
  return 0;
}
