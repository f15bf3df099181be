/* bench_collector --store: the directory and the bucket store side by
 * side (bench_collector_store.c). */
#ifndef TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H
#define TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H

#include <stdint.h>

/* Writes an |mb| MB snapshot into each store, prints the figures; 0, or
 * 1 when a store (or the gateway) failed. */
int bench_store_run(uint64_t mb);

#endif /* TRACEGATE_TESTS_BENCH_COLLECTOR_STORE_H */
