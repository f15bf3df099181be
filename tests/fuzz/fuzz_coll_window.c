/* Fuzzes what time a host's ring data covers (collector/daemon/
 * data_window.c): the packets of a remote host's clone, untrusted. The
 * input is read as a Trace whose field 1 entries are the packets, in
 * order, so that one input holds a sequence's clear, its defaults, its
 * ClockSnapshot and its events.
 *
 * Nothing may crash or read outside the input. Invariants (trap on
 * violation): the packets counted are at most the packets given; a window
 * with a packet has 0 < first <= last, one without has neither; the
 * sequences kept never pass COLL_WINDOW_MAX_SEQS, nor the packets given.
 */
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/data_window.h"
#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  coll_window_t w;
  coll_window_init(&w);
  tg_pb_reader_t r;
  tg_pb_field_t f;
  uint64_t given = 0;
  tg_pb_reader_init(&r, data, size);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != 1 || f.type != TG_PB_WT_LEN) continue;
    given++;
    if (coll_window_packet(&w, f.data, f.size) < 0) break; /* -ENOMEM */
  }
  if (w.packets > given) __builtin_trap();
  if (w.packets && !(w.first_ns && w.first_ns <= w.last_ns)) __builtin_trap();
  if (!w.packets && (w.first_ns || w.last_ns)) __builtin_trap();
  if (w.n_seqs > COLL_WINDOW_MAX_SEQS || w.n_seqs > given) __builtin_trap();
  coll_window_free(&w);
  return 0;
}
