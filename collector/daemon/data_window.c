/* The time a host's ring data covers (data_window.h): trace processor's
 * reading of a packet's clock, kept to what a window needs. */
#include "collector/daemon/data_window.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tracegate/pb_wire.h"

enum {
  PKT_CLOCK_SNAPSHOT = 6,
  PKT_TIMESTAMP = 8,
  PKT_SEQ_ID = 10,
  PKT_SEQUENCE_FLAGS = 13,
  PKT_INCREMENTAL_STATE_CLEARED = 41, /* the older flag, still read */
  PKT_TIMESTAMP_CLOCK_ID = 58,
  PKT_DEFAULTS = 59,
  DEFAULTS_CLOCK_ID = 58,
  SNAP_CLOCKS = 1,
  CLOCK_ID = 1,
  CLOCK_TIMESTAMP = 2,
  CLOCK_IS_INCREMENTAL = 3,
  CLOCK_UNIT_MULTIPLIER_NS = 4,
  SEQ_CLEARED = 1,
  SEQ_NEEDS_STATE = 2,
  CLOCK_BOOTTIME = 6,
  SEQ_CLOCK_FIRST = 64,
  SEQ_CLOCK_LAST = 127,
  SERVICE_SEQ = 1,
};

/* A sequence-scoped clock as the sequence's last ClockSnapshot read it. */
typedef struct seq_clock {
  uint32_t id;
  bool incremental;
  uint64_t mult;    /* ns per unit (unit_multiplier_ns, 1 when unset) */
  uint64_t at;      /* its value at the snapshot, in units */
  uint64_t boot_at; /* BOOTTIME at the snapshot, ns */
  uint64_t cur;     /* incremental: its value now, in units */
} seq_clock_t;

struct coll_window_seq {
  bool valid;             /* its incremental state was cleared in this read */
  uint32_t default_clock; /* TracePacketDefaults.timestamp_clock_id; 0: none */
  size_t n_clocks;
  seq_clock_t clocks[COLL_WINDOW_SEQ_CLOCKS];
};

void coll_window_init(coll_window_t *w) {
  memset(w, 0, sizeof(*w));
  tg_u32_map_init(&w->index, COLL_WINDOW_MAX_SEQS);
}

void coll_window_free(coll_window_t *w) {
  tg_u32_map_free(&w->index);
  free(w->seqs);
  coll_window_init(w);
}

/* The state of sequence |id|; NULL when it has none yet. */
static coll_window_seq_t *seq_find(coll_window_t *w, uint32_t id) {
  uint32_t at;
  return tg_u32_map_get(&w->index, id, &at) ? &w->seqs[at] : NULL;
}

/* The state of sequence |id|, made on the first packet that sets some:
 * NULL past the bound (*err 0) or out of memory (*err -ENOMEM). */
static coll_window_seq_t *seq_of(coll_window_t *w, uint32_t id, int *err) {
  *err = 0;
  coll_window_seq_t *found = seq_find(w, id);
  if (found) return found;
  if (w->n_seqs == COLL_WINDOW_MAX_SEQS) return NULL;
  if (w->n_seqs == w->cap_seqs) {
    size_t cap = w->cap_seqs ? 2 * w->cap_seqs : 16;
    if (cap > COLL_WINDOW_MAX_SEQS) cap = COLL_WINDOW_MAX_SEQS;
    coll_window_seq_t *s = realloc(w->seqs, cap * sizeof(*s));
    if (!s) {
      *err = -ENOMEM;
      return NULL;
    }
    w->seqs = s;
    w->cap_seqs = cap;
  }
  int rv = tg_u32_map_put(&w->index, id, (uint32_t)w->n_seqs);
  if (rv < 0) {
    *err = rv == -ENOSPC ? 0 : rv;
    return NULL;
  }
  coll_window_seq_t *s = &w->seqs[w->n_seqs++];
  memset(s, 0, sizeof(*s));
  return s;
}

static seq_clock_t *clock_of(coll_window_seq_t *s, uint32_t id) {
  for (size_t i = 0; i < s->n_clocks; i++)
    if (s->clocks[i].id == id) return &s->clocks[i];
  return NULL;
}

/* TracePacketDefaults: its timestamp_clock_id, 0 when it has none. */
static uint32_t defaults_clock(const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  uint32_t id = 0;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == DEFAULTS_CLOCK_ID && f.type == TG_PB_WT_VARINT)
      id = (uint32_t)f.value;
  return id;
}

typedef struct clock_read {
  uint32_t id;
  uint64_t ts, mult;
  bool incremental, has_ts;
} clock_read_t;

static bool read_clock(const uint8_t *p, size_t n, clock_read_t *c) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  memset(c, 0, sizeof(*c));
  c->mult = 1;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.type != TG_PB_WT_VARINT) continue;
    if (f.id == CLOCK_ID) {
      c->id = (uint32_t)f.value;
    } else if (f.id == CLOCK_TIMESTAMP) {
      c->ts = f.value;
      c->has_ts = true;
    } else if (f.id == CLOCK_IS_INCREMENTAL) {
      c->incremental = tg_pb_reader_bool(&r);
    } else if (f.id == CLOCK_UNIT_MULTIPLIER_NS && f.value) {
      c->mult = f.value;
    }
  }
  return rv == 0 && c->has_ts;
}

/* A ClockSnapshot on sequence |s|: its sequence-scoped clocks, tied to
 * the BOOTTIME it read at the same instant (none: nothing to tie). */
static void take_snapshot(coll_window_seq_t *s, const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  clock_read_t c;
  uint64_t boot = 0;
  bool has_boot = false;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == SNAP_CLOCKS && f.type == TG_PB_WT_LEN &&
        read_clock(f.data, f.size, &c) && c.id == CLOCK_BOOTTIME &&
        c.mult == 1) {
      boot = c.ts;
      has_boot = true;
    }
  if (!has_boot) return;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != SNAP_CLOCKS || f.type != TG_PB_WT_LEN ||
        !read_clock(f.data, f.size, &c) || c.id < SEQ_CLOCK_FIRST ||
        c.id > SEQ_CLOCK_LAST)
      continue;
    seq_clock_t *k = clock_of(s, c.id);
    if (!k && s->n_clocks == COLL_WINDOW_SEQ_CLOCKS) continue;
    if (!k) k = &s->clocks[s->n_clocks++];
    *k = (seq_clock_t){.id = c.id, .incremental = c.incremental,
                       .mult = c.mult, .at = c.ts, .boot_at = boot,
                       .cur = c.ts};
  }
}

/* BOOTTIME of a value |v| (units) of clock |k|; false when it does not
 * fit in 64 bits or falls before 0. */
static bool to_boot(const seq_clock_t *k, uint64_t v, uint64_t *out) {
  uint64_t d;
  if (v >= k->at) {
    if (__builtin_mul_overflow(v - k->at, k->mult, &d) ||
        __builtin_add_overflow(k->boot_at, d, out))
      return false;
    return true;
  }
  if (__builtin_mul_overflow(k->at - v, k->mult, &d) || d > k->boot_at)
    return false;
  *out = k->boot_at - d;
  return true;
}

int coll_window_packet(coll_window_t *w, const uint8_t *p, size_t n) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  uint64_t ts = 0, flags = 0;
  uint32_t seq_id = 0, clock = 0;
  bool has_ts = false, has_clock = false, cleared = false;
  const uint8_t *defaults = NULL, *snapshot = NULL;
  size_t defaults_n = 0, snapshot_n = 0;
  int rv;
  tg_pb_reader_init(&r, p, n);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.type == TG_PB_WT_VARINT) {
      switch (f.id) {
        case PKT_TIMESTAMP:
          ts = f.value;
          has_ts = true;
          break;
        case PKT_SEQ_ID: seq_id = (uint32_t)f.value; break;
        case PKT_SEQUENCE_FLAGS: flags = f.value; break;
        case PKT_INCREMENTAL_STATE_CLEARED:
          cleared = cleared || tg_pb_reader_bool(&r);
          break;
        case PKT_TIMESTAMP_CLOCK_ID:
          clock = (uint32_t)f.value;
          has_clock = true;
          break;
        default: break;
      }
    } else if (f.type == TG_PB_WT_LEN && f.id == PKT_DEFAULTS) {
      defaults = f.data;
      defaults_n = f.size;
    } else if (f.type == TG_PB_WT_LEN && f.id == PKT_CLOCK_SNAPSHOT) {
      snapshot = f.data;
      snapshot_n = f.size;
    }
  }
  if (rv < 0 || seq_id == SERVICE_SEQ) return 0;
  cleared = cleared || (flags & SEQ_CLEARED);
  /* State is kept for the sequences that set some; the others read as
   * one that never had any. */
  coll_window_seq_t none = {.valid = false};
  coll_window_seq_t *s = seq_find(w, seq_id);
  if (!s && (cleared || defaults || snapshot)) {
    int err;
    s = seq_of(w, seq_id, &err);
    if (err < 0) return err;
  }
  if (!s) s = &none; /* past the bound: what it sets is not kept */
  if (cleared) {
    memset(s, 0, sizeof(*s));
    s->valid = true;
  }
  if (defaults) s->default_clock = defaults_clock(defaults, defaults_n);
  /* What trace processor skips: state it was never given. */
  bool skip = (flags & SEQ_NEEDS_STATE) && !s->valid;
  if (!has_clock) clock = s->default_clock ? s->default_clock : CLOCK_BOOTTIME;
  uint64_t boot = 0;
  bool known = false;
  if (has_ts && !skip) {
    if (clock == CLOCK_BOOTTIME) {
      boot = ts;
      known = true;
    } else if (clock >= SEQ_CLOCK_FIRST && clock <= SEQ_CLOCK_LAST) {
      seq_clock_t *k = clock_of(s, clock);
      if (k && k->incremental) {
        /* Each packet's value moves the clock, counted or not. */
        known = !__builtin_add_overflow(k->cur, ts, &k->cur) &&
                to_boot(k, k->cur, &boot);
      } else if (k) {
        known = to_boot(k, ts, &boot);
      }
    }
  }
  if (snapshot) take_snapshot(s, snapshot, snapshot_n);
  if (!known || !boot) return 0;
  if (!w->first_ns || boot < w->first_ns) w->first_ns = boot;
  if (boot > w->last_ns) w->last_ns = boot;
  w->packets++;
  return 0;
}
