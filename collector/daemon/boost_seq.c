/* A boost packet's sequence moved (boost_seq.h). */
#include "collector/daemon/boost_seq.h"

#include <assert.h>
#include <string.h>

#include "tracegate/pb_wire.h"

/* TracePacket fields read here. */
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_SEQ_ID 10
#define PKT_PERF_SAMPLE 66
/* The service's own sequence (Perfetto's kServicePacketSequenceID). */
#define SERVICE_SEQ 1

_Static_assert(COLL_BOOST_SEQ_BASE + COLL_BOOST_SEQ_MAX < (1u << 21),
               "a moved id fits a 3-byte varint (COLL_BOOST_SEQ_EXTRA)");
_Static_assert(TG_PB_TAG(PKT_SEQ_ID, TG_PB_WT_VARINT) < 0x80,
               "field 10's tag is one byte (COLL_BOOST_SEQ_EXTRA)");

coll_boost_seq_verdict_t coll_boost_seq_scan(const uint8_t *p_untrusted,
                                             size_t n,
                                             coll_boost_seq_scan_t *out) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  bool clocks = false;
  int rv;
  memset(out, 0, sizeof(*out));
  tg_pb_reader_init(&r, p_untrusted, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == PKT_SEQ_ID && f.type == TG_PB_WT_VARINT) out->seq = f.value;
    if (f.id == PKT_PERF_SAMPLE && f.type == TG_PB_WT_LEN) out->sample = true;
    if (f.id == PKT_CLOCK_SNAPSHOT) clocks = true;
  }
  out->decoded = rv == 0;
  if (!out->decoded || !out->seq) return COLL_BOOST_SEQ_KEEP;
  if (out->seq == SERVICE_SEQ && clocks) return COLL_BOOST_SEQ_DROP;
  if (out->seq > COLL_BOOST_SEQ_MAX) return COLL_BOOST_SEQ_TOO_HIGH;
  return COLL_BOOST_SEQ_MOVE;
}

size_t coll_boost_seq_append(const uint8_t *p, size_t n, uint64_t seq,
                             uint8_t *dst) {
  assert(seq && seq <= COLL_BOOST_SEQ_MAX);
  memcpy(dst, p, n);
  uint8_t *e = tg_pb_write_varint(dst + n, TG_PB_TAG(PKT_SEQ_ID, TG_PB_WT_VARINT));
  e = tg_pb_write_varint(e, seq + COLL_BOOST_SEQ_BASE);
  return (size_t)(e - dst);
}
