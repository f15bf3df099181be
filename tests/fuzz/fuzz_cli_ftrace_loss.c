/* Fuzzes the look for linux.ftrace's stats in each recorded packet
 * (client/ftrace_loss.c): a TracePacket's untrusted bytes. The input is
 * scanned as one packet, then read as a Trace whose field 1 entries are
 * scanned as the packets that follow it, so that one input holds START
 * and END pairs on several sequences.
 *
 * Nothing may crash or read outside the input; the phases counted never
 * exceed the ftrace_stats fields the input could hold (each takes at
 * least two bytes, and no byte is in two of them); the table never holds
 * more than its sequences, and what it could not hold was counted.
 */
#include <stddef.h>
#include <stdint.h>

#include "client/ftrace_loss.h"
#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_ftrace_loss_t l = {0};
  tg_ftrace_loss_scan(&l, data, size);
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, data, size);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == 1 && f.type == TG_PB_WT_LEN)
      tg_ftrace_loss_scan(&l, f.data, f.size);
  if (l.starts + l.ends > size / 2) __builtin_trap();
  if (l.n_seqs > TG_FTRACE_LOSS_MAX_SEQS) __builtin_trap();
  if (l.untracked > l.starts + l.ends) __builtin_trap();
  if (l.untracked && l.n_seqs < TG_FTRACE_LOSS_MAX_SEQS) __builtin_trap();
  (void)tg_ftrace_loss_overrun(&l);
  return 0;
}
