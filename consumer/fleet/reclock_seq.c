/* Host sequences on machine 0 followed to their packets' times, as trace
 * processor v50.1 reads them (reclock_internal.h): the sequence's packet
 * defaults (a clock and a track for its events), its sequence-scoped
 * clocks (64..127, tied to BOOTTIME by the sequence's ClockSnapshots,
 * incremental ones advanced by each timed packet), a clear that drops the
 * defaults. Both reads of the file follow the same way, so that the
 * rewrite re-times exactly what the scan measured. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/fleet/reclock_internal.h"
#include "tracegate/pb_wire.h"

enum {
  PKT_CLOCK_SNAPSHOT = 6,
  PKT_TIMESTAMP = 8,
  PKT_SEQ_ID = 10,
  PKT_TRACK_EVENT = 11,
  PKT_SEQUENCE_FLAGS = 13,
  PKT_STATE_CLEARED = 41,
  PKT_TIMESTAMP_CLOCK_ID = 58,
  PKT_DEFAULTS = 59,
  PKT_MACHINE_ID = 98,
  PKT_REMOTE_CLOCK_SYNC = 107,
  DEF_CLOCK_ID = 58,
  DEF_TRACK_EVENT = 11,
  TED_TRACK_UUID = 11,
  CS_CLOCKS = 1,
  CLK_ID = 1,
  CLK_TIMESTAMP = 2,
  CLK_INCREMENTAL = 3,
  CLK_UNIT = 4,
  SEQ_INCREMENTAL_STATE_CLEARED = 1,
  BUILTIN_REALTIME = 1,
  BUILTIN_MONOTONIC = 3,
  BUILTIN_BOOTTIME = 6,
};

#define NS_PER_S 1000000000ull

static bool want(const tg_pb_field_t *f, uint8_t type) { return f->type == type; }

bool tg__rc_packet(const uint8_t *p, size_t n, tg__rc_pkt_t *k) {
  memset(k, 0, sizeof(*k));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    switch (f.id) {
      case PKT_TIMESTAMP:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        k->has_ts = true, k->ts = f.value;
        break;
      case PKT_TIMESTAMP_CLOCK_ID:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        k->has_clock = true, k->clock = f.value;
        break;
      case PKT_SEQ_ID:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        k->has_seq = true, k->seq = f.value;
        break;
      case PKT_MACHINE_ID:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        k->has_machine = true, k->machine = f.value;
        break;
      case PKT_SEQUENCE_FLAGS:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        if (f.value & SEQ_INCREMENTAL_STATE_CLEARED) k->cleared = true;
        break;
      case PKT_STATE_CLEARED:
        if (!want(&f, TG_PB_WT_VARINT)) return false;
        if (f.value) k->cleared = true;
        break;
      case PKT_TRACK_EVENT:
      case PKT_DEFAULTS:
      case PKT_CLOCK_SNAPSHOT:
      case PKT_REMOTE_CLOCK_SYNC:
        if (!want(&f, TG_PB_WT_LEN)) return false;
        if (f.id == PKT_TRACK_EVENT) k->te = f.data, k->te_n = f.size;
        if (f.id == PKT_DEFAULTS) k->defaults = f.data, k->defaults_n = f.size;
        if (f.id == PKT_CLOCK_SNAPSHOT) k->snap = f.data, k->snap_n = f.size;
        if (f.id == PKT_REMOTE_CLOCK_SYNC) k->rcs = f.data, k->rcs_n = f.size;
        break;
      default:
        break;
    }
  }
  return rv == 0;
}

void tg__rc_seqs_reset(tg_reclock_t *rc) {
  tg_u64_map_free(&rc->seq_map);
  rc->n_seqs = 0;
  rc->last_seq = 0;
  rc->has_head = false;
  rc->last_sync = 0;
}

/* One clock of a ClockSnapshot: false when it does not parse. */
typedef struct snap_clock {
  uint64_t id, ts, unit;
  bool incremental;
} snap_clock_t;

static bool snap_clock(const uint8_t *p, size_t n, snap_clock_t *c) {
  memset(c, 0, sizeof(*c));
  c->unit = 1;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id > CLK_UNIT) continue;
    if (!want(&f, TG_PB_WT_VARINT)) return false;
    if (f.id == CLK_ID) c->id = f.value;
    if (f.id == CLK_TIMESTAMP) c->ts = f.value;
    if (f.id == CLK_INCREMENTAL) c->incremental = f.value != 0;
    if (f.id == CLK_UNIT) c->unit = f.value;
  }
  return rv == 0;
}

/* Machine 0's BOOTTIME for a reading |ts| of builtin clock |id| by the
 * head snapshot: false when it cannot say. */
static bool builtin_boot(const tg_reclock_t *rc, uint64_t id, uint64_t ts,
                         int64_t *boot) {
  if (ts > (uint64_t)INT64_MAX) return false;
  int64_t v = (int64_t)ts, base;
  if (id == 0 || id == BUILTIN_BOOTTIME) {
    *boot = v;
    return true;
  }
  if (!rc->has_head) return false;
  if (id == BUILTIN_MONOTONIC) base = rc->head_mono;
  else if (id == BUILTIN_REALTIME) base = rc->head_real;
  else return false;
  int64_t d;
  if (__builtin_sub_overflow(v, base, &d) ||
      __builtin_add_overflow(rc->head_boot, d, boot) || *boot < 0)
    return false;
  return true;
}

void tg__rc_machine0(tg_reclock_t *rc, const tg__rc_pkt_t *k) {
  if (rc->has_head || !k->snap) return;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  snap_clock_t c;
  bool boot = false, mono = false, real = false;
  int64_t b = 0, m = 0, re = 0;
  tg_pb_reader_init(&r, k->snap, k->snap_n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    if (!snap_clock(f.data, f.size, &c) || c.ts > (uint64_t)INT64_MAX) return;
    if (c.id == BUILTIN_BOOTTIME) boot = true, b = (int64_t)c.ts;
    if (c.id == BUILTIN_MONOTONIC) mono = true, m = (int64_t)c.ts;
    if (c.id == BUILTIN_REALTIME) real = true, re = (int64_t)c.ts;
  }
  if (!boot) return;
  rc->has_head = true;
  rc->head_boot = b;
  /* A clock it does not name converts to nothing: INT64_MIN is no base
   * any sum can come back from (builtin_boot refuses the overflow). */
  rc->head_mono = mono ? m : INT64_MIN;
  rc->head_real = real ? re : INT64_MIN;
}

static tg__rc_seq_t *seq_find(tg_reclock_t *rc, uint32_t seq, uint32_t host) {
  if (rc->last_seq && rc->seqs[rc->last_seq - 1].seq == seq)
    return &rc->seqs[rc->last_seq - 1];
  uint32_t i = tg_u64_map_get(&rc->seq_map, seq);
  if (!i) {
    if (rc->n_seqs >= TG_RECLOCK_MAX_SEQS) return NULL;
    if (rc->n_seqs == rc->cap_seqs) {
      size_t cap = rc->cap_seqs ? rc->cap_seqs * 2 : 64;
      tg__rc_seq_t *m = realloc(rc->seqs, cap * sizeof(*m));
      if (!m) return NULL;
      rc->seqs = m;
      rc->cap_seqs = cap;
    }
    if (tg_u64_map_put(&rc->seq_map, seq, (uint32_t)rc->n_seqs + 1) < 0)
      return NULL;
    tg__rc_seq_t *s = &rc->seqs[rc->n_seqs++];
    memset(s, 0, sizeof(*s));
    s->seq = seq;
    s->host = host;
    i = (uint32_t)rc->n_seqs;
  }
  rc->last_seq = i;
  return &rc->seqs[i - 1];
}

static void read_defaults(tg__rc_seq_t *s, const uint8_t *p, size_t n) {
  tg_pb_reader_t r, rt;
  tg_pb_field_t f, g;
  /* A new defaults message replaces the old whole. */
  s->def_clock = 0;
  s->def_track = 0;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id == DEF_CLOCK_ID && f.type == TG_PB_WT_VARINT) s->def_clock = f.value;
    if (f.id != DEF_TRACK_EVENT || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&rt, f.data, f.size);
    while (tg_pb_reader_next(&rt, &g) == 1)
      if (g.id == TED_TRACK_UUID && g.type == TG_PB_WT_VARINT)
        s->def_track = g.value;
  }
}

static tg__rc_clock_t *seq_clock(tg__rc_seq_t *s, uint64_t id, bool add) {
  for (uint32_t i = 0; i < s->n_clocks; i++)
    if (s->clocks[i].id == id) return &s->clocks[i];
  if (!add || s->n_clocks == TG_RECLOCK_SEQ_CLOCKS) return NULL;
  tg__rc_clock_t *c = &s->clocks[s->n_clocks++];
  memset(c, 0, sizeof(*c));
  c->id = (uint32_t)id;
  c->unit = 1;
  return c;
}

/* A ClockSnapshot on the sequence: its clocks from 64 tied to the
 * BOOTTIME it names (a snapshot without one leaves them untied). */
static void read_snapshot(const tg_reclock_t *rc, tg__rc_seq_t *s,
                          const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  snap_clock_t c;
  int64_t boot = 0;
  bool has_boot = false;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    if (!snap_clock(f.data, f.size, &c)) return;
    if (c.id < 64 && !has_boot) has_boot = builtin_boot(rc, c.id, c.ts, &boot);
  }
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    if (!snap_clock(f.data, f.size, &c) || c.id < 64 || c.id > 127) continue;
    tg__rc_clock_t *k = seq_clock(s, c.id, true);
    if (!k) continue;
    k->incremental = c.incremental;
    k->unit = c.unit;
    k->tied = has_boot && c.unit >= 1 && c.unit <= NS_PER_S &&
              c.ts <= (uint64_t)INT64_MAX;
    k->value = (int64_t)c.ts;
    k->snap_value = k->value;
    k->snap_boot = boot;
  }
}

/* The BOOTTIME of reading |ts| of the sequence's clock |c| (advancing an
 * incremental one, as trace processor does for every timed packet). */
static bool seq_time(tg__rc_clock_t *c, uint64_t ts, int64_t *boot) {
  uint64_t v = c->incremental ? (uint64_t)c->value + ts : ts;
  c->value = (int64_t)v;
  if (!c->tied) return false;
  int64_t d, ns;
  if (__builtin_sub_overflow(c->value, c->snap_value, &d) ||
      __builtin_mul_overflow(d, (int64_t)c->unit, &ns) ||
      __builtin_add_overflow(c->snap_boot, ns, boot) || *boot < 0)
    return false;
  return true;
}

int tg__rc_follow(tg_reclock_t *rc, uint32_t host, const tg__rc_pkt_t *k,
                  int64_t *t, tg__rc_seq_t **seq_out) {
  tg__rc_seq_t *s = seq_find(rc, (uint32_t)k->seq, host);
  *seq_out = s;
  if (!s) return -2;
  if (k->cleared) {
    s->def_clock = 0;
    s->def_track = 0;
  }
  if (k->defaults) read_defaults(s, k->defaults, k->defaults_n);
  if (k->snap) {
    /* Trace processor reads the snapshot and nothing else of the packet. */
    read_snapshot(rc, s, k->snap, k->snap_n);
    return 0;
  }
  if (!k->has_ts) return 0;
  uint64_t clock = k->has_clock ? k->clock : s->def_clock;
  if (clock >= 64 && clock <= 127) {
    tg__rc_clock_t *c = seq_clock(s, clock, false);
    return c && seq_time(c, k->ts, t) ? 1 : -1;
  }
  return builtin_boot(rc, clock, k->ts, t) ? 1 : -1;
}
