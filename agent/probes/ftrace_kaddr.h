/* Kernel addresses in records -> small indices, and their names.
 *
 * A field that holds a kernel address (TG_FTRACE_FIELD_SYMADDR: a function
 * pointer, a work item) is never written as its value, which would disclose
 * where the kernel lies in memory (KASLR). It is written as an index: 1, 2,
 * 3... in order of first appearance, the same index for the same address
 * until the table is reset. As Perfetto's probes do, the table is reset
 * after every drain: indices stay small, and a trace whose older packets
 * were overwritten in a ring buffer loses at most one drain's names.
 *
 * With symbolize_ksyms, after each bundle the packet also carries the names
 * of the indices added since the last write (InternedData.kernel_symbols,
 * iid = index), and the first such packet after a reset says
 * SEQ_INCREMENTAL_STATE_CLEARED so that trace_processor drops the previous
 * indices. An address without a name (a heap pointer) gets no entry.
 *
 * Open addressing with linear probing over at least twice as many slots as
 * members, sized at init: adding allocates nothing and makes no system
 * call. Past the capacity an address is written as 0, never as itself, and
 * counted in |dropped|.
 */
#ifndef TRACEGATE_PROBES_FTRACE_KADDR_H
#define TRACEGATE_PROBES_FTRACE_KADDR_H

#include <stdint.h>

#include "agent/sys/ftrace_ksyms.h"
#include "tracegate/pb_writer.h"

/* Distinct addresses between two resets (one drain). */
#define TG_FTRACE_KADDRS_CAP 4096

typedef struct tg_ftrace_kaddr_slot {
  uint64_t addr;
  uint32_t index; /* 0: empty */
} tg_ftrace_kaddr_slot_t;

typedef struct tg_ftrace_kaddrs {
  tg_ftrace_kaddr_slot_t *slots;
  uint64_t *addrs;   /* addrs[i - 1]: the address of index i */
  uint32_t *slot_of; /* slot_of[i - 1]: its slot, to clear only those */
  uint32_t n, cap, mask;
  /* Indices up to here had their names written (or were tried in a packet
   * that wrote some). */
  uint32_t written;
  uint64_t dropped; /* addresses written as 0 for want of room */
} tg_ftrace_kaddrs_t;

/* Room for |cap| (>= 1) addresses. Returns 0, -EINVAL, -ENOMEM. */
int tg_ftrace_kaddrs_init(tg_ftrace_kaddrs_t *k, uint32_t cap);
void tg_ftrace_kaddrs_free(tg_ftrace_kaddrs_t *k);
/* Forgets every index (the next one is 1 again) and the drop count. */
void tg_ftrace_kaddrs_reset(tg_ftrace_kaddrs_t *k);

/* The index of |addr|, added if new; 0 when the table is full. */
static inline uint32_t tg_ftrace_kaddrs_index(tg_ftrace_kaddrs_t *k,
                                              uint64_t addr) {
  uint32_t h = (uint32_t)((addr * UINT64_C(0x9e3779b97f4a7c15)) >> 32);
  for (uint32_t s = h & k->mask;; s = (s + 1) & k->mask) {
    tg_ftrace_kaddr_slot_t *slot = &k->slots[s];
    if (slot->index == 0) {
      if (k->n == k->cap) {
        k->dropped++;
        return 0;
      }
      slot->addr = addr;
      slot->index = ++k->n;
      k->addrs[k->n - 1] = addr;
      k->slot_of[k->n - 1] = s;
      return k->n;
    }
    if (slot->addr == addr) return slot->index;
  }
}

/* TracePacket fields written next to ftrace_events. */
#define TG_PACKET_INTERNED_DATA 12
#define TG_PACKET_SEQUENCE_FLAGS 13
#define TG_SEQ_INCREMENTAL_STATE_CLEARED 1
/* InternedData.kernel_symbols, of InternedString { iid, str }. */
#define TG_INTERNED_KERNEL_SYMBOLS 26

/* Writes into the TracePacket |w| is in (after its ftrace_events) the
 * kernel_symbols of the indices added since the last write that |ks|
 * names, with sequence_flags when they are the first since a reset.
 * Returns the symbols written. |ks| is borrowed for the call. */
uint32_t tg_ftrace_kaddrs_write_interned(tg_ftrace_kaddrs_t *k,
                                         const tg_ksyms_t *ks, tg_pbw_t *w);

#endif /* TRACEGATE_PROBES_FTRACE_KADDR_H */
