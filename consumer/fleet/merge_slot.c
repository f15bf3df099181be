/* A host's per-sequence slots (merge_slot.h). */
#include "consumer/fleet/merge_slot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/fleet/merge.h"

void *tg__merge_slot(tg_u32_map_t *map, void **items, uint32_t *n,
                     uint32_t *cap, size_t size, uint32_t seq, bool add,
                     int *err) {
  uint32_t ix;
  if (!tg_u32_map_get(map, seq, &ix)) {
    if (!add || *n >= TG_MERGE_HOST_MAX_STATE_SEQS) return NULL;
    if (*n == *cap) {
      uint32_t c = *cap ? *cap * 2 : 16;
      if (c > TG_MERGE_HOST_MAX_STATE_SEQS) c = TG_MERGE_HOST_MAX_STATE_SEQS;
      void *a = realloc(*items, (size_t)c * size);
      if (!a) {
        *err = -ENOMEM;
        return NULL;
      }
      *items = a;
      *cap = c;
    }
    ix = *n;
    int rv = tg_u32_map_put(map, seq, ix);
    if (rv < 0) {
      if (rv == -ENOMEM) *err = rv;
      return NULL;
    }
    memset((uint8_t *)*items + (size_t)ix * size, 0, size);
    (*n)++;
  }
  return (uint8_t *)*items + (size_t)ix * size;
}
