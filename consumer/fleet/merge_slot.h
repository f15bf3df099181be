/* A host's per-sequence slots, shared by the merge's incremental state
 * (merge.c) and the joined mode's sequences (merge_links.c): below both,
 * so that neither calls into the other's file for it. */
#ifndef TRACEGATE_CONSUMER_FLEET_MERGE_SLOT_H
#define TRACEGATE_CONSUMER_FLEET_MERGE_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/u32_map.h"

/* A host's per-sequence slot of |size| bytes for |seq|: found
 * through |map| (producer id -> index) in the array *|items| of *|n|
 * used of *|cap|, or added zeroed when |add| (the array grown, at most
 * TG_MERGE_HOST_MAX_STATE_SEQS slots). NULL when it has none and |add| is
 * false, past the bound, or short of memory (*err = -ENOMEM). A pointer
 * into the array holds until the next addition. */
void *tg__merge_slot(tg_u32_map_t *map, void **items, uint32_t *n,
                     uint32_t *cap, size_t size, uint32_t seq, bool add,
                     int *err);

#endif /* TRACEGATE_CONSUMER_FLEET_MERGE_SLOT_H */
