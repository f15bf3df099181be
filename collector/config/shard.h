/* Sharding the inventory among collectors: collector i of N (`shard =
 * i/N`) snapshots the hosts this function gives to i. Pure and stable: the
 * same host spec goes to the same shard in every build, on every machine,
 * forever (tests/collector/test_collector_shard.c pins its values); change
 * it and every fleet reshuffles its hosts at upgrade.
 *
 * The key is FNV-1a 64 of the host spec's bytes, exactly as the inventory
 * spells it ("db1.example:7467"; no case folding or defaulting: keep the
 * inventory canonical). The shard is Lamping and Veach's jump consistent
 * hash of the key, in integer arithmetic (no floating point): when N grows
 * to N + 1, only the hosts that move to the new shard N move, about 1/(N+1)
 * of them, and none moves between old shards.
 */
#ifndef TRACEGATE_COLLECTOR_CONFIG_SHARD_H
#define TRACEGATE_COLLECTOR_CONFIG_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most collectors sharing an inventory. */
#define TG_COLL_SHARD_COUNT_MAX 65536u

typedef struct tg_coll_shard {
  uint32_t index; /* 0..count-1 */
  uint32_t count; /* 1..TG_COLL_SHARD_COUNT_MAX */
} tg_coll_shard_t;

/* FNV-1a 64 of the |n| bytes at |host|. */
uint64_t tg_coll_shard_key(const char *host, size_t n);

/* The shard (0..count-1) of the |n| bytes at |host|. |count| must be
 * 1..TG_COLL_SHARD_COUNT_MAX: a programmer error otherwise. */
uint32_t tg_coll_shard_of(const char *host, size_t n, uint32_t count);

/* Whether shard |s| (valid, as above) takes |host|. */
bool tg_coll_shard_owns(const tg_coll_shard_t *s, const char *host, size_t n);

#endif /* TRACEGATE_COLLECTOR_CONFIG_SHARD_H */
