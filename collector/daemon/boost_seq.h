/* A perf boost's packet, before snap.c merges it (boost.h): the boost
 * session's sequences are numbered from 1 by the host's service, as its
 * ring's are, so each boost packet's trusted_packet_sequence_id (10) is
 * moved up by COLL_BOOST_SEQ_BASE: a new field 10 appended to the packet
 * (protobuf's last one wins), the bytes before it left as they came.
 *
 * What coll_boost_seq_scan() decides for one packet:
 *   KEEP      merged as it is: it does not decode (the merge leaves it
 *             out and counts it), or it names no sequence (0 or none);
 *   DROP      the service's ClockSnapshot (sequence 1, field 6): left
 *             out, the host's clocks are tied by its ring's snapshots
 *             (boost.c says why);
 *   MOVE      sequence 1..COLL_BOOST_SEQ_MAX: coll_boost_seq_append()
 *             writes it with its sequence moved;
 *   TOO_HIGH  a sequence past COLL_BOOST_SEQ_MAX: the boost fails.
 *
 *   packet:  [ ...fields as sent... ][ 0x50 varint(seq + BASE) ]
 *                                     '-- appended, <= COLL_BOOST_SEQ_EXTRA
 *
 * Input is a remote host's bytes: only the wire reader touches them,
 * every length checked. Pure: no I/O, no allocation. Unit-tested with
 * golden bytes (test_collector_boost_seq) and fuzzed (fuzz_boost_seq).
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_BOOST_SEQ_H
#define TRACEGATE_COLLECTOR_DAEMON_BOOST_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Added to a boost packet's sequence id: the ring's sequences, numbered
 * from 1 by the service, stay below it, and the boost's, numbered from 1
 * too, land in the upper half of the host's range (merge.h,
 * TG_MERGE_SEQ_SHIFT), which the merge moves without a map. A ring would
 * need half a million writers to meet them; a boost that numbers that
 * many fails. */
#define COLL_BOOST_SEQ_BASE (1u << 19)
#define COLL_BOOST_SEQ_MAX ((1u << 20) - 2 - COLL_BOOST_SEQ_BASE)
/* The bytes coll_boost_seq_append() adds at most: a one-byte tag and a
 * varint of at most 3 bytes (the moved id is below 2^21). */
#define COLL_BOOST_SEQ_EXTRA 4u

typedef enum coll_boost_seq_verdict {
  COLL_BOOST_SEQ_KEEP,
  COLL_BOOST_SEQ_DROP,
  COLL_BOOST_SEQ_MOVE,
  COLL_BOOST_SEQ_TOO_HIGH,
} coll_boost_seq_verdict_t;

typedef struct coll_boost_seq_scan {
  uint64_t seq;  /* the last varint field 10; 0 without one */
  bool sample;   /* a PerfSample (66) is in the packet */
  bool decoded;  /* the packet decoded to its end */
} coll_boost_seq_scan_t;

/* Scans packet |p_untrusted| of |n| bytes into *out and says what to do
 * with it. */
coll_boost_seq_verdict_t coll_boost_seq_scan(const uint8_t *p_untrusted,
                                             size_t n,
                                             coll_boost_seq_scan_t *out);

/* Writes |p| (|n| bytes, scanned MOVE with sequence |seq|) to |dst|,
 * which holds n + COLL_BOOST_SEQ_EXTRA bytes, with field 10 = seq +
 * COLL_BOOST_SEQ_BASE appended; returns the bytes written. |dst| must
 * not overlap |p|. */
size_t coll_boost_seq_append(const uint8_t *p, size_t n, uint64_t seq,
                             uint8_t *dst);

#endif /* TRACEGATE_COLLECTOR_DAEMON_BOOST_SEQ_H */
