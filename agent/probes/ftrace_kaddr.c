/* Kernel address indices and their interned names; see ftrace_kaddr.h. */
#include "agent/probes/ftrace_kaddr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* InternedString. */
#define ISTR_IID 1
#define ISTR_STR 2

int tg_ftrace_kaddrs_init(tg_ftrace_kaddrs_t *k, uint32_t cap) {
  memset(k, 0, sizeof(*k));
  if (cap == 0 || cap > (1u << 24)) return -EINVAL;
  uint32_t slots = 2;
  while (slots < 2 * cap) slots *= 2;
  k->slots = calloc(slots, sizeof(*k->slots));
  k->addrs = malloc((size_t)cap * sizeof(*k->addrs));
  k->slot_of = malloc((size_t)cap * sizeof(*k->slot_of));
  if (!k->slots || !k->addrs || !k->slot_of) {
    tg_ftrace_kaddrs_free(k);
    return -ENOMEM;
  }
  k->cap = cap;
  k->mask = slots - 1;
  return 0;
}

void tg_ftrace_kaddrs_free(tg_ftrace_kaddrs_t *k) {
  free(k->slots);
  free(k->addrs);
  free(k->slot_of);
  memset(k, 0, sizeof(*k));
}

void tg_ftrace_kaddrs_reset(tg_ftrace_kaddrs_t *k) {
  for (uint32_t i = 0; i < k->n; i++) k->slots[k->slot_of[i]].index = 0;
  k->n = 0;
  k->written = 0;
  k->dropped = 0;
}

uint32_t tg_ftrace_kaddrs_write_interned(tg_ftrace_kaddrs_t *k,
                                         const tg_ksyms_t *ks, tg_pbw_t *w) {
  uint32_t wrote = 0;
  for (uint32_t i = k->written + 1; i <= k->n; i++) {
    size_t len;
    const char *name = tg_ksyms_lookup(ks, k->addrs[i - 1], &len);
    if (!name) continue; /* not in the kernel's text: a data pointer */
    if (wrote == 0) {
      /* The first names since a reset: indices before them meant other
       * addresses, which the reader must forget. */
      if (k->written == 0)
        tg_pbw_append_varint(w, TG_PACKET_SEQUENCE_FLAGS,
                             TG_SEQ_INCREMENTAL_STATE_CLEARED);
      tg_pbw_begin_nested(w, TG_PACKET_INTERNED_DATA);
    }
    tg_pbw_begin_nested(w, TG_INTERNED_KERNEL_SYMBOLS);
    tg_pbw_append_varint(w, ISTR_IID, i);
    tg_pbw_append_bytes(w, ISTR_STR, name, len);
    tg_pbw_end_nested(w);
    wrote++;
  }
  if (wrote) {
    tg_pbw_end_nested(w);
    /* Only then: a packet whose new addresses all lack names leaves the
     * next one to clear the incremental state. */
    k->written = k->n;
  }
  return wrote;
}
