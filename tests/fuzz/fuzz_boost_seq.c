/* Fuzzes a perf boost's packet scan and sequence move (collector/daemon/
 * boost_seq.c): the input is one packet of the boost session, as a
 * remote host's service sends it, untrusted.
 *
 * Nothing may crash or read outside the input. Invariants (trap on
 * violation): a packet that does not decode, or names no sequence, is
 * kept; a sequence past COLL_BOOST_SEQ_MAX is too high and never moved;
 * a moved packet starts with the input's bytes, grows by at most
 * COLL_BOOST_SEQ_EXTRA, decodes whole and reads back with its sequence
 * plus COLL_BOOST_SEQ_BASE and the same sample flag.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/boost_seq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  coll_boost_seq_scan_t sc;
  coll_boost_seq_verdict_t v = coll_boost_seq_scan(data, size, &sc);
  if ((!sc.decoded || !sc.seq) && v != COLL_BOOST_SEQ_KEEP) __builtin_trap();
  if (v == COLL_BOOST_SEQ_TOO_HIGH && sc.seq <= COLL_BOOST_SEQ_MAX)
    __builtin_trap();
  if (v == COLL_BOOST_SEQ_MOVE && sc.seq > COLL_BOOST_SEQ_MAX)
    __builtin_trap();
  if (v != COLL_BOOST_SEQ_MOVE) return 0;
  uint8_t *out = malloc(size + COLL_BOOST_SEQ_EXTRA);
  if (!out) return 0;
  size_t n = coll_boost_seq_append(data, size, sc.seq, out);
  if (n <= size || n > size + COLL_BOOST_SEQ_EXTRA) __builtin_trap();
  if (size && memcmp(out, data, size)) __builtin_trap();
  coll_boost_seq_scan_t back;
  coll_boost_seq_scan(out, n, &back);
  if (!back.decoded || back.seq != sc.seq + COLL_BOOST_SEQ_BASE ||
      back.sample != sc.sample)
    __builtin_trap();
  free(out);
  return 0;
}
