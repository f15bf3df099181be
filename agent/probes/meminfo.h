/* /proc/meminfo: the counters Perfetto's MeminfoCounters enum names.
 *
 * A pure parser over the file's content. Values are in kB as the kernel
 * prints them; index i of |value_kb| is MeminfoCounters value i.
 */
#ifndef TRACEGATE_PROBES_MEMINFO_H
#define TRACEGATE_PROBES_MEMINFO_H

#include <stddef.h>
#include <stdint.h>

/* MEMINFO_CMA_FREE (33) + 1. */
#define TG_MEMINFO_COUNTERS 34

typedef struct tg_meminfo {
  uint64_t value_kb[TG_MEMINFO_COUNTERS];
  uint64_t present; /* bit i: counter i was in the file */
} tg_meminfo_t;

/* The MeminfoCounters value of a /proc/meminfo key ("MemTotal",
 * "Active(anon)"), or 0 if the key has none. */
int tg_meminfo_key_id(const char *key, size_t len);

/* Parses |len| bytes of /proc/meminfo. Lines are "Key: value [kB]"; keys
 * without a counter are skipped. Returns 0, or TG_EPARSE for a line without
 * ':' or with a malformed value, or when no known counter is present. */
int tg_meminfo_parse(const char *text, size_t len, tg_meminfo_t *out);

#endif /* TRACEGATE_PROBES_MEMINFO_H */
