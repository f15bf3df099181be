/* /proc/meminfo parser; see meminfo.h. */
#include "agent/probes/meminfo.h"

#include <string.h>

#include "agent/probes/text.h"
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
  const char *line;
  size_t n;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *end = line + n;
    if (tg__only_blanks(line, end)) continue;
    const char *colon = memchr(line, ':', n);
    if (!colon || colon == line) return TG_EPARSE;
    const char *p = colon + 1;
    uint64_t v;
    if (tg__parse_u64(&p, end, &v) < 0) return TG_EPARSE;
    const char *unit;
    size_t un;
    if (tg__next_word(&p, end, &unit, &un) &&
        (!tg__word_is(unit, un, "kB") || !tg__only_blanks(p, end)))
      return TG_EPARSE;
    int id = tg_meminfo_key_id(line, (size_t)(colon - line));
    if (id == 0) continue;
    out->value_kb[id] = v;
    out->present |= UINT64_C(1) << id;
  }
  return out->present ? 0 : TG_EPARSE;
}
