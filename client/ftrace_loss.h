/* The kernel's ftrace losses the packets of a trace carry: the CPUs' ring
 * buffer overruns in linux.ftrace's start and end FtraceStats. Pure: no
 * I/O, no allocation but protobuf-c's while a stats message is decoded. */
#ifndef TRACEGATE_CLIENT_FTRACE_LOSS_H
#define TRACEGATE_CLIENT_FTRACE_LOSS_H

#include <stddef.h>
#include <stdint.h>

/* Overruns summed over CPUs and instances. Zeroed to begin. */
typedef struct tg_ftrace_loss {
  uint64_t overrun_start, overrun_end;
  uint64_t starts, ends; /* FtraceStats packets of each phase seen */
} tg_ftrace_loss_t;

/* Looks at one TracePacket's bytes (|packet|, borrowed, untrusted). */
void tg_ftrace_loss_scan(tg_ftrace_loss_t *l, const uint8_t *packet,
                         size_t n);

/* The overrun between the start and end stats: 0 until end stats were
 * seen (the loss is not known, nothing is claimed) or when the counters
 * did not grow. */
uint64_t tg_ftrace_loss_overrun(const tg_ftrace_loss_t *l);

#endif /* TRACEGATE_CLIENT_FTRACE_LOSS_H */
