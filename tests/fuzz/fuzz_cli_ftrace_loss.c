/* Fuzzes the look for linux.ftrace's stats in each recorded packet
 * (consumer/fleet/ftrace_loss.c): a TracePacket's untrusted bytes. The input is
 * scanned as one packet, then read as a Trace whose field 1 entries are
 * scanned as the packets that follow it, so that one input holds START
 * and END pairs on several sequences.
 *
 * Nothing may crash or read outside the input; the phases counted never
 * exceed the ftrace_stats fields the input could hold (each takes at
 * least two bytes, and no byte is in two of them); the table never holds
 * more than its sequences, and what it could not hold was counted. The
 * setup errors' names kept stay within their bounds, the instances found
 * down or partial are among the tracked sequences, and the problems they
 * make (consumer/fleet/ds_problem.c) fit their JSON text with the list cut. The
 * data sources a service event names as not started
 * (slow_starting_data_sources) are kept within their bounds, each pair
 * once.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "consumer/fleet/ds_problem.h"
#include "consumer/fleet/ftrace_loss.h"
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
  if (l.n_names > TG_FTRACE_SETUP_NAMES) __builtin_trap();
  for (size_t i = 0; i < l.n_names; i++)
    if (strlen(l.names[i]) > TG_FTRACE_SETUP_NAME_MAX) __builtin_trap();
  if (l.n_not_started > TG_FTRACE_NOT_STARTED_MAX) __builtin_trap();
  if (l.not_started_omitted && l.n_not_started < TG_FTRACE_NOT_STARTED_MAX)
    __builtin_trap();
  for (size_t i = 0; i < l.n_not_started; i++) {
    if (strlen(l.not_started[i].producer) > TG_FTRACE_SETUP_NAME_MAX ||
        strlen(l.not_started[i].data_source) > TG_FTRACE_SETUP_NAME_MAX)
      __builtin_trap();
    for (size_t j = 0; j < i; j++)
      if (!strcmp(l.not_started[i].producer, l.not_started[j].producer) &&
          !strcmp(l.not_started[i].data_source, l.not_started[j].data_source))
        __builtin_trap();
  }
  tg_ftrace_setup_t su;
  tg_ftrace_setup_summary(&l, &su);
  if (su.down + su.partial > l.n_seqs) __builtin_trap();
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  if (ps.n > 2 + l.n_not_started) __builtin_trap();
  char text[512];
  int kept = tg_ds_problems_text(&ps, text, sizeof(text));
  if (kept < 0 && kept != -12 /* ENOMEM */) __builtin_trap();
  if (kept >= 0 && (size_t)kept > ps.n) __builtin_trap();
  return 0;
}
