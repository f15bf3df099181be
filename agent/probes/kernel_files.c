/* /proc/vmstat, buddyinfo, diskstats, pressure parsers; see kernel_files.h. */
#include "agent/probes/kernel_files.h"

#include <string.h>

#include "agent/sys/text.h"
#include "pb/common/sys_stats_counters.pb-c.h"
#include "tracegate/error.h"

/* "VMSTAT_" + the longest key we look up; longer keys have no counter. */
#define VMSTAT_NAME_MAX 96

unsigned tg_vmstat_key_id(const char *key, size_t len) {
  static const char prefix[] = "VMSTAT_";
  char name[VMSTAT_NAME_MAX];
  if (len == 0 || len + sizeof(prefix) > sizeof(name)) return 0;
  memcpy(name, prefix, sizeof(prefix) - 1);
  for (size_t i = 0; i < len; i++) {
    char c = key[i];
    if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
    else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return 0;
    name[sizeof(prefix) - 1 + i] = c;
  }
  name[sizeof(prefix) - 1 + len] = '\0';
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(
      &perfetto__protos__vmstat_counters__descriptor, name);
  return v && v->value > 0 && v->value < TG_VMSTAT_IDS ? (unsigned)v->value : 0;
}

int tg_vmstat_parse(const char *text, size_t len, tg_vmstat_t *out) {
  memset(out->present, 0, sizeof(out->present));
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  bool any = false;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n, *key;
    size_t key_len;
    if (!tg__next_word(&p, end, &key, &key_len)) continue; /* blank line */
    uint64_t v;
    if (tg__parse_u64(&p, end, &v) < 0 || !tg__only_blanks(p, end))
      return TG_EPARSE;
    unsigned id = tg_vmstat_key_id(key, key_len);
    if (!id) continue;
    out->value[id] = v;
    tg_vmstat_set(out->present, id);
    any = true;
  }
  return any ? 0 : TG_EPARSE;
}

/* Copies the word [w, w + n) into |dst| of |cap| bytes, truncating. */
static void copy_word(char *dst, size_t cap, const char *w, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, w, n);
  dst[n] = '\0';
}

int tg_buddyinfo_parse(const char *text, size_t len, tg_buddyinfo_t *out) {
  out->n_zones = 0;
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n, *w;
    size_t wn;
    if (!tg__next_word(&p, end, &w, &wn)) continue;
    /* "Node" "0," "zone" "Normal" counts... */
    if (!tg__word_is(w, wn, "Node")) return TG_EPARSE;
    const char *node, *zone;
    size_t node_len, zone_len;
    if (!tg__next_word(&p, end, &node, &node_len) || node_len < 2 ||
        node[node_len - 1] != ',' ||
        !tg__next_word(&p, end, &w, &wn) || !tg__word_is(w, wn, "zone") ||
        !tg__next_word(&p, end, &zone, &zone_len))
      return TG_EPARSE;
    tg_buddy_zone_t z = {.n_orders = 0};
    copy_word(z.node, sizeof(z.node), node, node_len - 1);
    copy_word(z.zone, sizeof(z.zone), zone, zone_len);
    while (!tg__only_blanks(p, end)) {
      uint64_t v;
      if (tg__parse_u64(&p, end, &v) < 0 || v > UINT32_MAX) return TG_EPARSE;
      if (z.n_orders < TG_BUDDY_MAX_ORDERS) z.order_pages[z.n_orders++] = (uint32_t)v;
    }
    if (out->n_zones < TG_BUDDY_MAX_ZONES) out->zones[out->n_zones++] = z;
  }
  return out->n_zones ? 0 : TG_EPARSE;
}

int tg_diskstats_parse(const char *text, size_t len, tg_diskstats_t *out) {
  out->n_disks = 0;
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n, *name;
    size_t name_len;
    uint64_t major, minor, f[17];
    if (tg__only_blanks(p, end)) continue;
    if (tg__parse_u64(&p, end, &major) < 0 ||
        tg__parse_u64(&p, end, &minor) < 0 ||
        !tg__next_word(&p, end, &name, &name_len))
      return TG_EPARSE;
    /* 11 counters since 2.6, 15 since 4.18 (discards), 17 since 5.5
     * (flushes); later kernels may add more, which we skip. */
    unsigned nf = 0;
    while (!tg__only_blanks(p, end)) {
      uint64_t v;
      if (tg__parse_u64(&p, end, &v) < 0) return TG_EPARSE;
      if (nf < 17) f[nf] = v;
      nf++;
    }
    if (nf < 11) return TG_EPARSE;
    if (out->n_disks >= TG_DISK_MAX) continue;
    tg_disk_t *d = &out->disks[out->n_disks++];
    memset(d, 0, sizeof(*d));
    copy_word(d->name, sizeof(d->name), name, name_len);
    /* proc(5) numbering from 1 after the name: 3 sectors read, 4 ms
     * reading, 7 sectors written, 8 ms writing, 14 sectors discarded,
     * 15 ms discarding, 16 flushes, 17 ms flushing. */
    d->read_sectors = f[2];
    d->read_time_ms = f[3];
    d->write_sectors = f[6];
    d->write_time_ms = f[7];
    if (nf >= 15) {
      d->discard_sectors = f[13];
      d->discard_time_ms = f[14];
    }
    if (nf >= 17) {
      d->flush_count = f[15];
      d->flush_time_ms = f[16];
    }
  }
  return 0;
}

int tg_psi_parse(const char *text, size_t len, tg_psi_t *out) {
  memset(out, 0, sizeof(*out));
  tg__text_t t;
  tg__text_init(&t, text, len);
  const char *line;
  size_t n;
  while (tg__text_next_line(&t, &line, &n)) {
    const char *p = line, *end = line + n, *w;
    size_t wn;
    if (!tg__next_word(&p, end, &w, &wn)) continue;
    bool some = tg__word_is(w, wn, "some");
    if (!some && !tg__word_is(w, wn, "full")) return TG_EPARSE;
    /* "avg10=0.00 avg60=0.00 avg300=0.00 total=123": only total counts. */
    bool found = false;
    uint64_t total = 0;
    while (tg__next_word(&p, end, &w, &wn)) {
      if (wn > 6 && memcmp(w, "total=", 6) == 0) {
        const char *q = w + 6;
        if (tg__parse_u64(&q, w + wn, &total) < 0 || q != w + wn)
          return TG_EPARSE;
        found = true;
      }
    }
    if (!found) return TG_EPARSE;
    if (some) {
      out->has_some = true;
      out->some_total_us = total;
    } else {
      out->has_full = true;
      out->full_total_us = total;
    }
  }
  return out->has_some ? 0 : TG_EPARSE;
}
