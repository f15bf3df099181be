/* /proc/meminfo parser; see meminfo.h. */
#include "agent/probes/meminfo.h"

#include <string.h>

#include "agent/sys/text.h"
#include "tracegate/error.h"

/* Index = MeminfoCounters value (proto/common/sys_stats_counters.proto). */
static const char *const keys[TG_MEMINFO_COUNTERS] = {
    NULL,            "MemTotal",      "MemFree",        "MemAvailable",
    "Buffers",       "Cached",        "SwapCached",     "Active",
    "Inactive",      "Active(anon)",  "Inactive(anon)", "Active(file)",
    "Inactive(file)", "Unevictable",  "Mlocked",        "SwapTotal",
    "SwapFree",      "Dirty",         "Writeback",      "AnonPages",
    "Mapped",        "Shmem",         "Slab",           "SReclaimable",
    "SUnreclaim",    "KernelStack",   "PageTables",     "CommitLimit",
    "Committed_AS",  "VmallocTotal",  "VmallocUsed",    "VmallocChunk",
    "CmaTotal",      "CmaFree",
};

int tg_meminfo_key_id(const char *key, size_t len) {
  for (int i = 1; i < TG_MEMINFO_COUNTERS; i++)
    if (tg__word_is(key, len, keys[i])) return i;
  return 0;
}

int tg_meminfo_parse(const char *text, size_t len, tg_meminfo_t *out) {
  memset(out, 0, sizeof(*out));
  tg__text_t t;
  tg__text_init(&t, text, len);
  tg__text_field_t f;
  int rv;
  while ((rv = tg__text_next_field(&t, &f)) == 1) {
    uint64_t v;
    bool kb; /* optional: HugePages_* are counts */
    if (tg__parse_kb(f.value, f.end, &v, &kb) < 0) return TG_EPARSE;
    int id = tg_meminfo_key_id(f.key, f.key_len);
    if (id == 0) continue;
    out->value_kb[id] = v;
    out->present |= UINT64_C(1) << id;
  }
  if (rv < 0) return rv;
  return out->present ? 0 : TG_EPARSE;
}
