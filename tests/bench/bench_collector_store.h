/* bench_collector --store: the directory and the bucket store side by
 * side (bench_collector_store.c). */
#ifndef TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H
#define TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H

#include <stdint.h>

/* Writes an |mb| MB snapshot into each store (the bucket's in parts of
 * |part_mb| MiB sent by |uploaders| threads), at once or, with |pace_mbps|
 * not 0, at that many MB/s; prints the figures; 0, or 1 when a store (or
 * the gateway) failed. */
int bench_store_run(uint64_t mb, unsigned part_mb, unsigned uploaders,
                    unsigned pace_mbps);

#endif /* TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H */
