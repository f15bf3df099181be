/* Fuzzes the central trace buffer (service/trace_buffer.h) with a program.
 *
 * Input: [config byte] then ops, each [op byte][arguments...]:
 *   0 raw chunk:    [producer|complete][len lo][len hi][len bytes]
 *   1 built chunk:  [producer|complete][id][writer|flags][n][sizes...][pad]
 *                   (a well-formed-ish chunk, so that reading goes deep)
 *   2 patch:        [producer][writer][id][n|has_more][n x (off2, data4)]
 *   3 read:         [count]
 *   4 producer gone:[producer]
 *   5 clone:        (read out at once, then freed)
 * The buffer is small (4..16 KiB) so that it wraps all the time. Every
 * packet read must add up, lie in readable memory (ASan probes each byte),
 * and once every producer is gone the buffer must drain to empty. A
 * complete chunk that needs no patches takes no more of the ring than the
 * bytes its fragments were written in (a record header, 8-byte aligned),
 * however large the chunk. A clone reads out and discards nothing.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/smb.h"
#include "service/trace_buffer.h"
#include "tracegate/error.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tg_producer_ident_t kProducers[3] = {
    {1, 1000, 100}, {2, 1001, 200}, {3, 0, 300}};

static const tg_producer_ident_t *producer_of(uint8_t b) {
  return &kProducers[(b & 0x7F) % 3];
}

static void check_stats(const tg_trace_buffer_t *tb) {
  const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(tb);
  if (tg_trace_buffer_used(tb) >
      tg_trace_buffer_size(tb) + TG_TRACE_BUFFER_RECORD_OVERHEAD)
    __builtin_trap();
  if (st->chunks_read + st->chunks_overwritten > st->chunks_written)
    __builtin_trap();
  if (st->bytes_read + st->bytes_overwritten > st->bytes_written)
    __builtin_trap();
}

/* After a copy that added one record and overwrote nothing: the record
 * takes at most |written| chunk bytes when the chunk was complete and
 * needed no patches (|trimmable|), its whole size otherwise. */
static void check_record_room(const tg_trace_buffer_t *tb,
                              const tg_trace_buffer_stats_t *before,
                              size_t used_before, size_t written,
                              bool trimmable) {
  const tg_trace_buffer_stats_t *st = tg_trace_buffer_stats(tb);
  if (!trimmable || st->chunks_written != before->chunks_written + 1 ||
      st->chunks_overwritten != before->chunks_overwritten)
    return;
  size_t room = TG_TRACE_BUFFER_RECORD_OVERHEAD + ((written + 7u) & ~(size_t)7u);
  if (tg_trace_buffer_used(tb) > used_before + room) __builtin_trap();
}

static int read_some(tg_trace_buffer_t *tb, unsigned count);

/* A clone reads out on its own, discards nothing, and keeps its counters
 * consistent. */
static void check_clone(const tg_trace_buffer_t *tb) {
  tg_trace_buffer_t *cl = tg_trace_buffer_clone(tb);
  if (!cl) return;
  uint64_t discarded = tg_trace_buffer_stats(cl)->chunks_discarded;
  if (discarded != tg_trace_buffer_stats(tb)->chunks_discarded) __builtin_trap();
  for (unsigned guard = 0; read_some(cl, 64) > 0; guard++)
    if (guard > 100000) __builtin_trap();
  tg_trace_buffer_producer_gone(cl, 1);
  if (read_some(cl, 1) != 0) __builtin_trap(); /* a snapshot stays as it is */
  if (tg_trace_buffer_stats(cl)->chunks_discarded != discarded) __builtin_trap();
  check_stats(cl);
  tg_trace_buffer_free(cl);
}

static int read_some(tg_trace_buffer_t *tb, unsigned count) {
  int got = 0;
  for (unsigned i = 0; i < count; i++) {
    tg_packet_t pkt;
    memset(&pkt, 0, sizeof(pkt));
    int rv = tg_trace_buffer_read_packet(tb, &pkt);
    if (rv == 0) break;
    if (rv != 1) __builtin_trap();
    if (pkt.num_slices == 0 || !pkt.slice || !pkt.slice_len) __builtin_trap();
    if (pkt.writer_id == 0 || pkt.producer.producer_id == 0 ||
        pkt.producer.producer_id > 3)
      __builtin_trap();
    size_t sum = 0;
    volatile uint8_t sink = 0;
    for (unsigned k = 0; k < pkt.num_slices; k++) {
      if (!pkt.slice[k] || pkt.slice_len[k] == 0) __builtin_trap();
      for (size_t j = 0; j < pkt.slice_len[k]; j++) sink ^= pkt.slice[k][j];
      sum += pkt.slice_len[k];
    }
    (void)sink;
    if (sum != pkt.size || sum == 0) __builtin_trap();
    got++;
  }
  return got;
}

static void put_size(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)((v & 0x7F) | 0x80);
  p[1] = (uint8_t)(((v >> 7) & 0x7F) | 0x80);
  p[2] = (uint8_t)(((v >> 14) & 0x7F) | 0x80);
  p[3] = (uint8_t)((v >> 21) & 0x7F);
}

/* Builds a chunk from a few bytes: ids near 0 (both sides of the wrap),
 * writers 1..3, any flags, fragments of the given sizes (0xFF: a drop
 * marker, 0xFE: a size running past the end), then zero padding. |*written|
 * is where the fragments end, or the padded size when fewer fragments fit
 * than the header claims (the reader then takes padding for fragments). */
static size_t build_chunk(input_t *in, uint8_t *c, size_t cap,
                          size_t *written, unsigned *flags_out) {
  uint32_t id = (uint32_t)(int32_t)(int8_t)take(in);
  uint8_t wf = take(in);
  uint16_t writer = (uint16_t)(1 + (wf & 3) % 3);
  unsigned flags = wf >> 2;
  unsigned n = take(in) % 12;
  size_t len = TG_SMB_CHUNK_HEADER_SIZE;
  unsigned i = 0;
  for (; i < n && len + 4 <= cap; i++) {
    uint8_t s = take(in);
    if (s == 0xFF) {
      put_size(c + len, TG_PACKET_SIZE_DROP);
      len += 4;
      continue;
    }
    uint32_t fsize = s == 0xFE ? 5000 : s;
    size_t body = fsize < cap - len - 4 ? fsize : cap - len - 4;
    put_size(c + len, fsize);
    memset(c + len + 4, s, body);
    len += 4 + body;
  }
  uint8_t pad = take(in);
  size_t padded = len + (size_t)pad * 4;
  if (padded > cap) padded = cap;
  memset(c + len, 0, padded - len);
  *written = i == n ? len : padded;
  *flags_out = flags;
  c[0] = (uint8_t)id;
  c[1] = (uint8_t)(id >> 8);
  c[2] = (uint8_t)(id >> 16);
  c[3] = (uint8_t)(id >> 24);
  c[4] = (uint8_t)writer;
  c[5] = 0;
  uint16_t packets = tg_chunk_packets_pack(n, flags);
  c[6] = (uint8_t)packets;
  c[7] = (uint8_t)(packets >> 8);
  return padded;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  uint8_t cfg = take(&in);
  tg_fill_policy_t policy = cfg & 1 ? TG_FILL_DISCARD : TG_FILL_RING_BUFFER;
  size_t buf_size = 4096u * (1u + ((cfg >> 1) & 3u));
  tg_trace_buffer_t *tb = tg_trace_buffer_new(buf_size, policy);
  if (!tb) return 0;
  static uint8_t chunk[20000];

  while (in.left) {
    uint8_t op = take(&in);
    switch (op % 6) {
      case 0: {
        uint8_t pc = take(&in);
        size_t len = take(&in);
        len |= (size_t)take(&in) << 8;
        if (len > in.left) len = in.left;
        /* An exact-size heap copy: over-reads of the source show. */
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy) break;
        memcpy(copy, in.p, len);
        int rv = tg_trace_buffer_copy_chunk(tb, producer_of(pc), copy, len,
                                            !(pc & 0x80));
        free(copy);
        if (rv != 0 && rv != TG_EABI_VIOLATION && rv != TG_ENO_SPACE &&
            rv != -ENOMEM)
          __builtin_trap();
        in.p += len;
        in.left -= len;
        break;
      }
      case 1: {
        uint8_t pc = take(&in);
        size_t written;
        unsigned flags;
        size_t len = build_chunk(&in, chunk, 4200, &written, &flags);
        tg_trace_buffer_stats_t before = *tg_trace_buffer_stats(tb);
        size_t used = tg_trace_buffer_used(tb);
        /* 0x40 on a complete chunk: a flush's scrape of it, whose
         * CommitData may come again later. */
        bool complete = !(pc & 0x80);
        int rv = complete && (pc & 0x40)
                     ? tg_trace_buffer_scrape_chunk(tb, producer_of(pc), chunk,
                                                    len, true)
                     : tg_trace_buffer_copy_chunk(tb, producer_of(pc), chunk,
                                                  len, complete);
        if (rv != 0 && rv != TG_EABI_VIOLATION && rv != TG_ENO_SPACE &&
            rv != -ENOMEM)
          __builtin_trap();
        check_record_room(tb, &before, used, written,
                          !(pc & 0x80) && !(flags & TG_CHUNK_NEEDS_PATCHING));
        break;
      }
      case 2: {
        uint16_t producer = (uint16_t)(1 + take(&in) % 3);
        uint16_t writer = (uint16_t)(take(&in) % 4);
        uint32_t id = (uint32_t)(int32_t)(int8_t)take(&in);
        uint8_t nb = take(&in);
        size_t n = nb % 4;
        uint32_t offsets[3];
        uint8_t bytes[3][4];
        for (size_t i = 0; i < n; i++) {
          offsets[i] = take(&in);
          offsets[i] |= (uint32_t)take(&in) << 8;
          if (offsets[i] & 0x8000) offsets[i] |= 0xFFFF0000u; /* huge */
          for (int k = 0; k < 4; k++) bytes[i][k] = take(&in);
        }
        int rv = tg_trace_buffer_patch(tb, producer, writer, id, offsets,
                                       (const uint8_t(*)[4])bytes, n,
                                       (nb & 0x80) != 0);
        if (rv != 0 && rv != TG_EABI_VIOLATION && rv != -ENOENT)
          __builtin_trap();
        break;
      }
      case 3:
        read_some(tb, 1u + take(&in) % 16);
        break;
      case 4:
        tg_trace_buffer_producer_gone(tb, (uint16_t)(1 + take(&in) % 3));
        break;
      case 5:
        check_clone(tb);
        break;
    }
    check_stats(tb);
  }

  /* With every producer gone nothing can stall: the buffer drains. */
  for (uint16_t p = 1; p <= 3; p++) tg_trace_buffer_producer_gone(tb, p);
  for (unsigned guard = 0; read_some(tb, 64) > 0; guard++)
    if (guard > 100000) __builtin_trap();
  if (tg_trace_buffer_used(tb) != 0) __builtin_trap();
  check_stats(tb);
  tg_trace_buffer_free(tb);
  return 0;
}
