/* Where a merged fleet trace names its hosts (docs/merge.md, "Host
 * names"): the uuids of machine |mid|'s name track (k = 0) and of the
 * "clock sync" track under it (k = 1): "traceg" then 16 bits. Written by
 * the merge (merge.h), read by whatever names a trace's hosts (the
 * profiles, consumer/profile/). Trace processor scopes uuids by machine
 * and takes the last name a uuid's descriptors give, so the merge leaves
 * out a host's TrackDescriptor of this range: no host renames itself (a
 * producer's random uuid falls in it once in 2^48). Macros only: a
 * reader needs no library for them. */
#ifndef TRACEGATE_CONSUMER_FLEET_MERGE_NAMES_H
#define TRACEGATE_CONSUMER_FLEET_MERGE_NAMES_H

#include <stdint.h>

#define TG_MERGE_NAME_UUID_BASE 0x7472616365670000ull
#define TG_MERGE_NAME_UUID(mid, k) \
  (TG_MERGE_NAME_UUID_BASE | ((uint64_t)(mid) << 1) | (uint64_t)(k))
#define TG_MERGE_NAME_UUID_RESERVED(u) \
  (((u) & ~0xFFFFull) == TG_MERGE_NAME_UUID_BASE)

#endif /* TRACEGATE_CONSUMER_FLEET_MERGE_NAMES_H */
