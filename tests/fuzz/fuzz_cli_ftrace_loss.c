/* Fuzzes the CLI's look for linux.ftrace's stats in each recorded packet
 * (client/ftrace_loss.c): a TracePacket's untrusted bytes.
 *
 * Nothing may crash or read outside the input; the phases counted never
 * exceed the ftrace_stats fields the input could hold (each takes at
 * least two bytes).
 */
#include <stddef.h>
#include <stdint.h>

#include "client/ftrace_loss.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_ftrace_loss_t l = {0};
  tg_ftrace_loss_scan(&l, data, size);
  if (l.starts + l.ends > size / 2) __builtin_trap();
  return 0;
}
