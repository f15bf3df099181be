/* /proc/vmstat, /proc/buddyinfo, /proc/diskstats and /proc/pressure/<res>:
 * the sys_stats groups beyond meminfo and stat.
 *
 * Pure parsers over a file's content, as meminfo.h and proc_stat.h: tests
 * and the fuzz target feed them fixtures and hostile bytes. Every array has
 * a fixed bound, so a garbled file can neither grow memory nor overrun.
 */
#ifndef TRACEGATE_PROBES_KERNEL_FILES_H
#define TRACEGATE_PROBES_KERNEL_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* VmstatCounters values below this are kept (ours end at 95). */
#define TG_VMSTAT_IDS 256

typedef struct tg_vmstat {
  uint64_t value[TG_VMSTAT_IDS];
  uint64_t present[TG_VMSTAT_IDS / 64]; /* bit i: counter i was read */
} tg_vmstat_t;

static inline bool tg_vmstat_has(const uint64_t *bits, unsigned id) {
  return id < TG_VMSTAT_IDS && (bits[id / 64] >> (id % 64)) & 1;
}
static inline void tg_vmstat_set(uint64_t *bits, unsigned id) {
  if (id < TG_VMSTAT_IDS) bits[id / 64] |= UINT64_C(1) << (id % 64);
}

/* The VmstatCounters value of a /proc/vmstat key ("nr_free_pages" is
 * VMSTAT_NR_FREE_PAGES), from the enum's own descriptor, or 0. */
unsigned tg_vmstat_key_id(const char *key, size_t len);

/* "key value" lines. Keys without a counter are skipped. Returns 0, or
 * TG_EPARSE for a malformed line or when no known counter is present. */
int tg_vmstat_parse(const char *text, size_t len, tg_vmstat_t *out);

/* One "Node N, zone NAME c0 c1 ..." line of /proc/buddyinfo. */
#define TG_BUDDY_MAX_ZONES 64
#define TG_BUDDY_MAX_ORDERS 16
#define TG_BUDDY_NAME_MAX 16
typedef struct tg_buddy_zone {
  char node[TG_BUDDY_NAME_MAX];
  char zone[TG_BUDDY_NAME_MAX];
  uint32_t order_pages[TG_BUDDY_MAX_ORDERS];
  unsigned n_orders;
} tg_buddy_zone_t;
typedef struct tg_buddyinfo {
  tg_buddy_zone_t zones[TG_BUDDY_MAX_ZONES];
  unsigned n_zones;
} tg_buddyinfo_t;

/* Returns 0 or TG_EPARSE (a line of another shape; no zone). Zones past
 * TG_BUDDY_MAX_ZONES and orders past TG_BUDDY_MAX_ORDERS are dropped. */
int tg_buddyinfo_parse(const char *text, size_t len, tg_buddyinfo_t *out);

/* One line of /proc/diskstats, the fields SysStats.DiskStat keeps. */
#define TG_DISK_MAX 256
#define TG_DISK_NAME_MAX 32
typedef struct tg_disk {
  char name[TG_DISK_NAME_MAX];
  uint64_t read_sectors, read_time_ms, write_sectors, write_time_ms;
  uint64_t discard_sectors, discard_time_ms; /* kernel 4.18+ */
  uint64_t flush_count, flush_time_ms;       /* kernel 5.5+ */
} tg_disk_t;
typedef struct tg_diskstats {
  tg_disk_t disks[TG_DISK_MAX];
  unsigned n_disks;
} tg_diskstats_t;

/* Returns 0 or TG_EPARSE (fewer than the 14 fields of old kernels, a
 * non-numeric field). Devices past TG_DISK_MAX are dropped. */
int tg_diskstats_parse(const char *text, size_t len, tg_diskstats_t *out);

/* /proc/pressure/<resource>: the cumulative stall times, in microseconds
 * as the kernel prints them. "full" is absent for cpu on older kernels. */
typedef struct tg_psi {
  bool has_some, has_full;
  uint64_t some_total_us, full_total_us;
} tg_psi_t;

/* Returns 0 or TG_EPARSE (no "some" line, a line without total=). */
int tg_psi_parse(const char *text, size_t len, tg_psi_t *out);

#endif /* TRACEGATE_PROBES_KERNEL_FILES_H */
