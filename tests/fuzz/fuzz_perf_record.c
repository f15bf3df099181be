/* Fuzzes tracegate-perf's perf ring reader and record parser
 * (agent/perf/perf_record.h): the ring is the kernel's memory, shared with
 * whatever else maps the event, so its bytes are anything.
 *
 * Input: a control byte (bit 0: sample_id_all, bit 1: callchains, bit 2:
 * user registers and stack, bit 3: the counter's value, bits 4-7: half
 * the number of registers), two
 * bytes of tail offset (little-endian; the top bit of the second says the
 * counter's value is a group's, PERF_FORMAT_GROUP), then the ring's data
 * area (its largest power-of-two prefix). Every record the reader hands out must lie within the ring
 * (or the scratch copy) and be as long as its header says; every record
 * parsed must keep its callchain, strings and build id inside itself;
 * the reader must end at head. Nothing may crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perf/perf_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *rec, size_t len, const tg_perf_layout_t *lay) {
  tg_perf_record_t r;
  if (tg_perf_record_parse(rec, len, lay, &r) < 0) return;
  const uint8_t *end = rec + len;
  switch (r.type) {
    case TG_PERF_RECORD_SAMPLE:
      if (r.u.sample.nr) {
        if (r.u.sample.ips < rec || r.u.sample.nr > (size_t)(end - r.u.sample.ips) / 8)
          abort();
        uint64_t x = 0;
        for (uint64_t i = 0; i < r.u.sample.nr; i++)
          x ^= tg_perf_callchain_at(&r, (size_t)i);
        (void)x;
      }
      if (r.u.sample.read_nr) {
        if (!lay->read_group || r.u.sample.read_values < rec ||
            r.u.sample.read_nr > (size_t)(end - r.u.sample.read_values) / 8)
          abort();
        uint64_t x = 0;
        for (uint64_t i = 0; i < r.u.sample.read_nr; i++)
          x ^= tg_perf_read_value_at(&r, (size_t)i);
        (void)x;
      }
      if (r.u.sample.n_regs &&
          (r.u.sample.regs < rec || r.u.sample.n_regs != lay->n_user_regs ||
           r.u.sample.n_regs > (size_t)(end - r.u.sample.regs) / 8))
        abort();
      if (r.u.sample.stack_size &&
          (r.u.sample.stack < rec ||
           r.u.sample.stack_size > (size_t)(end - r.u.sample.stack) ||
           r.u.sample.stack_dyn_size > r.u.sample.stack_size))
        abort();
      break;
    case TG_PERF_RECORD_MMAP2:
      if (r.u.mmap2.filename &&
          ((const uint8_t *)r.u.mmap2.filename < rec ||
           r.u.mmap2.filename_len >
               (size_t)(end - (const uint8_t *)r.u.mmap2.filename)))
        abort();
      if (r.u.mmap2.build_id &&
          (r.u.mmap2.build_id_size > TG_PERF_MAX_BUILD_ID ||
           r.u.mmap2.build_id + 20 > end))
        abort();
      break;
    case TG_PERF_RECORD_COMM:
      if (r.u.comm.comm && ((const uint8_t *)r.u.comm.comm < rec ||
                            r.u.comm.comm_len >
                                (size_t)(end - (const uint8_t *)r.u.comm.comm)))
        abort();
      break;
    default:
      break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  tg_perf_layout_t lay = {
      .sample_type = TG_PERF_SAMPLE_IP | TG_PERF_SAMPLE_TID |
                     TG_PERF_SAMPLE_TIME | TG_PERF_SAMPLE_CPU |
                     TG_PERF_SAMPLE_PERIOD,
      .sample_id_all = data[0] & 1,
      /* Bits 4 to 7 of the control byte: half the user registers. */
      .n_user_regs = (uint32_t)(data[0] >> 4) * 2u,
  };
  if (data[0] & 8) lay.sample_type |= TG_PERF_SAMPLE_READ;
  if (data[0] & 2) lay.sample_type |= TG_PERF_SAMPLE_CALLCHAIN;
  if (data[0] & 4)
    lay.sample_type |= TG_PERF_SAMPLE_REGS_USER | TG_PERF_SAMPLE_STACK_USER;
  lay.read_group = (data[2] & 0x80) != 0;
  uint64_t tail = (uint64_t)data[1] | (uint64_t)(data[2] & 0x7f) << 8;
  /* read(2) of a polled group leader, the whole input as its answer. */
  uint64_t values[8];
  size_t nv;
  if (tg_perf_group_read_parse(data + 3, size - 3, values, 8, &nv) == 0 &&
      nv > 8)
    abort();
  const uint8_t *ring = data + 3;
  size_t n = size - 3;
  /* The record parser alone, on the whole input as one record. */
  check(ring, n, &lay);
  uint64_t ring_size = 8;
  while (ring_size * 2 <= n) ring_size *= 2;
  if (n < 8) return 0;
  /* A copy of its own, so that a read past it is caught. */
  uint8_t *copy = malloc(ring_size);
  uint8_t *scratch = malloc(65536);
  if (!copy || !scratch) {
    free(copy);
    free(scratch);
    return 0;
  }
  memcpy(copy, ring, ring_size);
  tg_perf_ring_view_t v = {copy, ring_size, tail + ring_size};
  const uint8_t *rec;
  size_t len;
  int rv;
  size_t records = 0;
  while ((rv = tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len)) == 1) {
    bool in_ring = rec >= copy && rec + len <= copy + ring_size;
    bool in_scratch = rec == scratch && len <= 65536;
    if (!in_ring && !in_scratch) abort();
    uint16_t hdr_size;
    memcpy(&hdr_size, rec + 6, 2);
    if (len < TG_PERF_HEADER_SIZE || hdr_size != len) abort();
    check(rec, len, &lay);
    if (++records > ring_size) abort(); /* each takes at least 8 bytes */
  }
  if (tail != v.head) abort();
  free(copy);
  free(scratch);
  return 0;
}
