/* The re-clocking pass's two reads of the merged file (reclock.h): the
 * top-level frames (a packet whole in memory, anything else passed
 * through unread), the requests gathered by the scan, and the rewrite. */
#include "consumer/fleet/reclock.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/reclock_internal.h"
#include "tracegate/pb_wire.h"

enum {
  TRACE_PACKET = 1,
  TE_TYPE = 9,
  TE_TRACK_UUID = 11,
  TE_FLOW_IDS = 47,
  TE_TERMINATING_FLOW_IDS = 48,
  TYPE_SLICE_BEGIN = 1,
  TYPE_SLICE_END = 2,
  PKT_TIMESTAMP = 8,
  PKT_TIMESTAMP_CLOCK_ID = 58,
  PKT_REMOTE_CLOCK_SYNC = 107,
  RCS_SYNCED_CLOCKS = 1,
  SC_CLIENT_CLOCKS = 2,
  SC_HOST_CLOCKS = 3,
  PKT_FTRACE_EVENTS = 1,
  FB_EVENT = 2,
  FE_TIMESTAMP = 1,
  CS_CLOCKS = 1,
  CLK_ID = 1,
  CLK_TIMESTAMP = 2,
  BUILTIN_BOOTTIME = 6,
};

#define READ_CHUNK (1u << 20)
#define WRITE_CHUNK (1u << 20)
#define PROGRESS_EVERY (64ull << 20)
#define NO_HOST UINT32_MAX
#define TRACK_PROBES 8

/* --- reading frames -------------------------------------------------------------- */

typedef struct rd {
  const tg_reclock_io_t *io;
  uint8_t *buf;
  size_t cap, beg, end;
  bool eof;
  int pass;
  uint64_t pos, next_progress;
} rd_t;

/* At least |need| bytes from beg, or all that is left. */
static int rd_fill(rd_t *r, size_t need) {
  if (r->end - r->beg >= need || r->eof) return 0;
  if (r->beg) {
    memmove(r->buf, r->buf + r->beg, r->end - r->beg);
    r->end -= r->beg;
    r->beg = 0;
  }
  if (need > r->cap || r->cap - r->end < READ_CHUNK / 4) {
    size_t cap = r->cap ? r->cap : READ_CHUNK;
    while (cap < need || cap - r->end < READ_CHUNK / 4) cap *= 2;
    uint8_t *b = realloc(r->buf, cap);
    if (!b) return -ENOMEM;
    r->buf = b;
    r->cap = cap;
  }
  while (r->end < need && !r->eof) {
    ssize_t n = r->io->read(r->io->ctx, r->buf + r->end, r->cap - r->end);
    if (n < 0) return (int)n;
    if (n == 0) r->eof = true;
    r->end += (size_t)n;
  }
  return 0;
}

static void rd_take(rd_t *r, size_t n) {
  r->beg += n;
  r->pos += n;
  if (r->io->progress && r->pos >= r->next_progress) {
    r->io->progress(r->io->ctx, r->pass, r->pos);
    r->next_progress = r->pos + PROGRESS_EVERY;
  }
}

typedef struct wr {
  const tg_reclock_io_t *io;
  tg_buf_t buf;
  uint64_t bytes;
} wr_t;

static int wr_flush(wr_t *w) {
  if (!tg_buf_size(&w->buf)) return 0;
  int rv = w->io->write(w->io->ctx, tg_buf_begin(&w->buf), tg_buf_size(&w->buf));
  tg_buf_reset(&w->buf);
  return rv < 0 ? rv : 0;
}

static int wr_put(wr_t *w, const uint8_t *p, size_t n) {
  w->bytes += n;
  if (tg_buf_size(&w->buf) + n > WRITE_CHUNK) {
    int rv = wr_flush(w);
    if (rv < 0) return rv;
    if (n > WRITE_CHUNK) return w->io->write(w->io->ctx, p, n) < 0 ? -EIO : 0;
  }
  return tg_buf_append(&w->buf, p, n);
}

enum { FR_END, FR_PACKET, FR_RAW };

typedef struct frame {
  int kind;
  size_t hdr_n;    /* FR_PACKET: the tag and length, at r->buf + r->beg */
  size_t body_n;   /* FR_PACKET: the packet after them */
  uint64_t raw_n;  /* FR_RAW: bytes to pass; UINT64_MAX: to the end */
} frame_t;

static int rd_next(rd_t *r, frame_t *fr) {
  memset(fr, 0, sizeof(*fr));
  int rv = rd_fill(r, 2 * TG_PB_MAX_VARINT_SIZE);
  if (rv < 0) return rv;
  const uint8_t *p = r->buf + r->beg, *e = r->buf + r->end;
  if (p == e) return 0;
  fr->kind = FR_RAW;
  fr->raw_n = UINT64_MAX; /* what does not frame: the rest, as it is */
  uint64_t tag, v;
  size_t t = tg_pb_read_varint(p, e, &tag);
  if (!t) return 0;
  switch (tag & 7) {
    case TG_PB_WT_VARINT: {
      size_t m = tg_pb_read_varint(p + t, e, &v);
      if (m) fr->raw_n = t + m;
      return 0;
    }
    case TG_PB_WT_FIXED64: fr->raw_n = t + 8; return 0;
    case TG_PB_WT_FIXED32: fr->raw_n = t + 4; return 0;
    case TG_PB_WT_LEN: break;
    default: return 0;
  }
  size_t m = tg_pb_read_varint(p + t, e, &v);
  if (!m || v > UINT64_MAX - t - m) return 0;
  fr->raw_n = t + m + v;
  if ((tag >> 3) != TRACE_PACKET || v > TG_RECLOCK_MAX_PACKET) return 0;
  rv = rd_fill(r, t + m + (size_t)v);
  if (rv < 0) return rv;
  if (r->end - r->beg < t + m + v) {
    fr->raw_n = UINT64_MAX; /* cut short: the rest as it is */
    return 0;
  }
  fr->kind = FR_PACKET;
  fr->hdr_n = t + m;
  fr->body_n = (size_t)v;
  return 0;
}

/* Passes |n| bytes (UINT64_MAX: to the end) to |w| (NULL: skipped). */
static int rd_pass(rd_t *r, uint64_t n, wr_t *w) {
  while (n) {
    int rv = rd_fill(r, 1);
    if (rv < 0) return rv;
    size_t have = r->end - r->beg;
    if (!have) return 0;
    size_t take = n < have ? (size_t)n : have;
    if (w && (rv = wr_put(w, r->buf + r->beg, take)) < 0) return rv;
    rd_take(r, take);
    if (n != UINT64_MAX) n -= take;
  }
  return 0;
}

/* --- which host a machine-0 packet belongs to ----------------------------------- */

/* Host k's sequence ids are (k + 1) << 20 | s; the collector's own
 * packets about a host (its low value TG_MERGE_SEQ_COLLECTOR) carry the
 * host's machine id and are not app packets. The overflow range's
 * mapping is not in the file: its sequences stay unplaced. */
enum { SEQ_MACHINE0 = -1, SEQ_OVERFLOW = -2, SEQ_OTHER = -3 };

static int64_t seq_host(const tg_reclock_t *rc, const tg__rc_pkt_t *k) {
  if (!k->has_seq) return SEQ_OTHER;
  uint64_t s = k->seq;
  if (s > TG_MERGE_SEQ_OVERFLOW_BASE) return SEQ_OVERFLOW;
  uint64_t m = s >> TG_MERGE_SEQ_SHIFT;
  if (m == 0) return SEQ_MACHINE0;
  if (m - 1 >= rc->n_hosts ||
      (s & TG_MERGE_SEQ_COLLECTOR) == TG_MERGE_SEQ_COLLECTOR)
    return SEQ_OTHER;
  return (int64_t)(m - 1);
}

/* --- the scan: slices and their flows ---------------------------------------------- */

typedef struct te_info {
  uint64_t type, uuid, flow_out, flow_in;
  bool has_uuid;
} te_info_t;

static uint64_t first_flow(const tg_pb_field_t *f, uint64_t cur) {
  if (cur) return cur;
  if (f->type == TG_PB_WT_FIXED64) return f->value;
  if (f->type == TG_PB_WT_LEN && f->size >= 8) { /* packed */
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | f->data[i];
    return v;
  }
  return 0;
}

static void te_read(const uint8_t *p, size_t n, te_info_t *te) {
  memset(te, 0, sizeof(*te));
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id == TE_TYPE && f.type == TG_PB_WT_VARINT) te->type = f.value;
    if (f.id == TE_TRACK_UUID && f.type == TG_PB_WT_VARINT)
      te->uuid = f.value, te->has_uuid = true;
    if (f.id == TE_FLOW_IDS) te->flow_out = first_flow(&f, te->flow_out);
    if (f.id == TE_TERMINATING_FLOW_IDS) te->flow_in = first_flow(&f, te->flow_in);
  }
}

static tg__rc_track_t *track_find(tg_reclock_t *rc, uint32_t seq, uint64_t uuid) {
  uint64_t base = (uuid * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)seq << 7);
  for (unsigned i = 0; i < TRACK_PROBES; i++) {
    uint64_t key = base + i;
    uint32_t v = tg_u64_map_get(&rc->track_map, key);
    if (v) {
      tg__rc_track_t *t = &rc->tracks[v - 1];
      if (t->seq == seq && t->uuid == uuid) return t;
      continue;
    }
    if (rc->n_tracks >= TG_RECLOCK_MAX_TRACKS) return NULL;
    if (!rc->tracks) {
      rc->tracks = calloc(TG_RECLOCK_MAX_TRACKS, sizeof(*rc->tracks));
      if (!rc->tracks) return NULL;
    }
    if (tg_u64_map_put(&rc->track_map, key, (uint32_t)rc->n_tracks + 1) < 0)
      return NULL;
    tg__rc_track_t *t = &rc->tracks[rc->n_tracks++];
    t->seq = seq;
    t->uuid = uuid;
    return t;
  }
  return NULL;
}

static void half(tg_reclock_t *rc, tg_reclock_stats_t *st, uint64_t id,
                 uint32_t host, bool client, int64_t begin, int64_t end) {
  uint32_t i = tg_u64_map_get(&rc->flow_map, id);
  if (!i) {
    if (rc->n_flows >= TG_RECLOCK_MAX_FLOWS) {
      st->flows_unfollowed++;
      return;
    }
    if (rc->n_flows == rc->cap_flows) {
      size_t cap = rc->cap_flows ? rc->cap_flows * 2 : 1024;
      tg__rc_flow_t *f = realloc(rc->flows, cap * sizeof(*f));
      if (!f) {
        st->flows_unfollowed++;
        return;
      }
      rc->flows = f;
      rc->cap_flows = cap;
    }
    if (tg_u64_map_put(&rc->flow_map, id, (uint32_t)rc->n_flows + 1) < 0) {
      st->flows_unfollowed++;
      return;
    }
    tg__rc_flow_t *f = &rc->flows[rc->n_flows++];
    memset(f, 0, sizeof(*f));
    f->id = id;
    f->c_host = f->s_host = NO_HOST;
    i = (uint32_t)rc->n_flows;
  }
  tg__rc_flow_t *f = &rc->flows[i - 1];
  uint32_t *h = client ? &f->c_host : &f->s_host;
  if (*h != NO_HOST) {
    st->flows_duplicate++;
    return;
  }
  *h = host;
  if (client) {
    f->c1 = begin, f->c2 = end;
    st->halves_client++;
  } else {
    f->s1 = begin, f->s2 = end;
    st->halves_server++;
  }
}

static void on_event(tg_reclock_t *rc, tg_reclock_stats_t *st, uint32_t host,
                     const tg__rc_seq_t *s, int64_t t, const uint8_t *p,
                     size_t n) {
  te_info_t te;
  te_read(p, n, &te);
  if (te.type != TYPE_SLICE_BEGIN && te.type != TYPE_SLICE_END) return;
  tg__rc_track_t *tr = track_find(rc, s->seq, te.has_uuid ? te.uuid : s->def_track);
  if (!tr) {
    st->tracks_untracked++;
    return;
  }
  if (te.type == TYPE_SLICE_BEGIN) {
    if (tr->depth >= TG_RECLOCK_MAX_DEPTH) {
      st->too_deep++;
      tr->depth++;
      return;
    }
    if (tr->depth == tr->cap) {
      uint32_t cap = tr->cap ? tr->cap * 2 : 4;
      tg__rc_open_t *o = realloc(tr->open, cap * sizeof(*o));
      if (!o) {
        st->too_deep++;
        tr->depth++;
        return;
      }
      tr->open = o;
      tr->cap = cap;
    }
    tr->open[tr->depth++] = (tg__rc_open_t){t, te.flow_out, te.flow_in};
    return;
  }
  if (!tr->depth) {
    st->ends_unmatched++;
    return;
  }
  if (--tr->depth >= TG_RECLOCK_MAX_DEPTH) return;
  const tg__rc_open_t *o = &tr->open[tr->depth];
  if (o->flow_out) half(rc, st, o->flow_out, host, true, o->begin, t);
  if (o->flow_in) half(rc, st, o->flow_in, host, false, o->begin, t);
}

static int edge_add(tg_reclock_t *rc, const tg__rc_flow_t *f) {
  uint64_t key = (uint64_t)f->c_host * rc->n_hosts + f->s_host;
  uint32_t i = tg_u64_map_get(&rc->edge_map, key);
  if (!i) {
    if (rc->n_edges == rc->cap_edges) {
      size_t cap = rc->cap_edges ? rc->cap_edges * 2 : 8;
      tg__rc_edge_t *e = realloc(rc->edges, cap * sizeof(*e));
      if (!e) return -ENOMEM;
      rc->edges = e;
      rc->cap_edges = cap;
    }
    if (tg_u64_map_put(&rc->edge_map, key, (uint32_t)rc->n_edges + 1) < 0)
      return -ENOMEM;
    tg__rc_edge_t *e = &rc->edges[rc->n_edges++];
    memset(e, 0, sizeof(*e));
    e->a = f->c_host;
    e->b = f->s_host;
    i = (uint32_t)rc->n_edges;
  }
  tg__rc_edge_t *e = &rc->edges[i - 1];
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 64;
    tg_pair_sample_t *s = realloc(e->s, cap * sizeof(*s));
    if (!s) return -ENOMEM;
    e->s = s;
    e->cap = cap;
  }
  e->s[e->n++] = (tg_pair_sample_t){f->c1, f->c2, f->s1, f->s2};
  return 0;
}

static bool snapshot_boot(const uint8_t *p, size_t n, int64_t *boot);

/* The collector times host |k|'s RemoteClockSync |p| names (its
 * host_clocks' BOOTTIME): the recording lasts at least that long. */
static void note_sync(tg_reclock_t *rc, const uint8_t *p, size_t n) {
  tg_pb_reader_t r, rp;
  tg_pb_field_t f, g;
  int64_t boot;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != RCS_SYNCED_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&rp, f.data, f.size);
    while (tg_pb_reader_next(&rp, &g) == 1)
      if (g.id == SC_HOST_CLOCKS && g.type == TG_PB_WT_LEN &&
          snapshot_boot(g.data, g.size, &boot) && boot > rc->last_sync)
        rc->last_sync = boot;
  }
}

/* Whether every time of |f| is within the recording (|lo|, |hi|). */
static bool inside(const tg__rc_flow_t *f, int64_t lo, int64_t hi) {
  return f->c1 >= lo && f->c2 <= hi && f->s1 >= lo && f->s2 <= hi &&
         f->c1 <= hi && f->s1 <= hi && f->c2 >= lo && f->s2 >= lo;
}

/* --- the unit ------------------------------------------------------------------------- */

tg_reclock_t *tg_reclock_new(size_t n_hosts) {
  if (n_hosts == 0 || n_hosts > TG_MERGE_MAX_HOSTS) return NULL;
  tg_reclock_t *rc = calloc(1, sizeof(*rc));
  if (!rc) return NULL;
  rc->n_hosts = n_hosts;
  rc->corr = calloc(n_hosts, sizeof(*rc->corr));
  rc->constant = calloc(n_hosts, sizeof(*rc->constant));
  rc->has_constant = calloc(n_hosts, sizeof(*rc->has_constant));
  rc->hsync = calloc(n_hosts, sizeof(*rc->hsync));
  if (!rc->corr || !rc->constant || !rc->has_constant || !rc->hsync) {
    tg_reclock_free(rc);
    return NULL;
  }
  tg_u64_map_init(&rc->seq_map, TG_RECLOCK_MAX_SEQS);
  tg_u64_map_init(&rc->track_map, TG_RECLOCK_MAX_TRACKS);
  tg_u64_map_init(&rc->flow_map, TG_RECLOCK_MAX_FLOWS);
  tg_u64_map_init(&rc->edge_map, TG_RECLOCK_MAX_FLOWS);
  tg_buf_init(&rc->scratch[0], 0);
  tg_buf_init(&rc->scratch[1], 0);
  tg_buf_init(&rc->scratch[2], 0);
  for (size_t i = 0; i < n_hosts; i++) tg_buf_init(&rc->hsync[i].last, 0);
  return rc;
}

void tg_reclock_free(tg_reclock_t *rc) {
  if (!rc) return;
  tg_u64_map_free(&rc->seq_map);
  tg_u64_map_free(&rc->track_map);
  tg_u64_map_free(&rc->flow_map);
  tg_u64_map_free(&rc->edge_map);
  free(rc->seqs);
  for (size_t i = 0; i < rc->n_tracks; i++) free(rc->tracks[i].open);
  free(rc->tracks);
  free(rc->flows);
  for (size_t i = 0; i < rc->n_edges; i++) {
    free(rc->edges[i].s);
    free(rc->edges[i].win);
  }
  free(rc->edges);
  free(rc->corr);
  free(rc->constant);
  free(rc->has_constant);
  for (size_t i = 0; rc->hsync && i < rc->n_hosts; i++)
    tg_buf_free(&rc->hsync[i].last);
  free(rc->hsync);
  for (int i = 0; i < 3; i++) tg_buf_free(&rc->scratch[i]);
  free(rc);
}

void tg_reclock_set_constant(tg_reclock_t *rc, size_t k, int64_t ns) {
  if (k >= rc->n_hosts) return;
  rc->constant[k] = ns;
  rc->has_constant[k] = true;
}

int tg_reclock_scan(tg_reclock_t *rc, const tg_reclock_io_t *io,
                    tg_reclock_stats_t *st) {
  rd_t r = {.io = io, .pass = 1, .next_progress = PROGRESS_EVERY};
  frame_t fr;
  int rv;
  tg__rc_seqs_reset(rc);
  while ((rv = rd_next(&r, &fr)) == 0 && fr.kind != FR_END) {
    if (fr.kind == FR_RAW) {
      if ((rv = rd_pass(&r, fr.raw_n, NULL)) < 0) break;
      continue;
    }
    const uint8_t *body = r.buf + r.beg + fr.hdr_n;
    st->packets++;
    tg__rc_pkt_t k;
    if (!tg__rc_packet(body, fr.body_n, &k)) {
      st->unparsed++;
    } else if (k.has_machine && k.machine != 0) {
      /* Only the collector writes RemoteClockSync (a host's is off the
       * merge's allowlist). */
      if (k.rcs) note_sync(rc, k.rcs, k.rcs_n);
    } else {
      int64_t host = seq_host(rc, &k), t;
      tg__rc_seq_t *s;
      if (host == SEQ_MACHINE0) tg__rc_machine0(rc, &k);
      if (host == SEQ_OVERFLOW) st->overflow_seqs++;
      if (host >= 0) {
        int f = tg__rc_follow(rc, (uint32_t)host, &k, &t, &s);
        if (f == -2) st->seqs_untracked++;
        if (f == -1) st->time_unknown++;
        if (f == 1 && k.te) on_event(rc, st, (uint32_t)host, s, t, k.te, k.te_n);
      }
    }
    rd_take(&r, fr.hdr_n + fr.body_n);
  }
  st->bytes_in = r.pos;
  free(r.buf);
  if (rv < 0) return rv;
  /* Without the collector's head the recording's span is not known:
   * every time is taken. */
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  if (rc->has_head) {
    int64_t end = rc->last_sync > rc->head_boot ? rc->last_sync : rc->head_boot;
    if (__builtin_sub_overflow(rc->head_boot, TG_RECLOCK_RECORDING_SLACK_NS, &lo))
      lo = INT64_MIN;
    if (__builtin_add_overflow(end, TG_RECLOCK_RECORDING_SLACK_NS, &hi))
      hi = INT64_MAX;
  }
  for (size_t i = 0; i < rc->n_flows; i++) {
    const tg__rc_flow_t *f = &rc->flows[i];
    if (f->c_host == NO_HOST || f->s_host == NO_HOST || f->c_host == f->s_host)
      continue;
    st->pairs++;
    if (!inside(f, lo, hi)) {
      st->pairs_outside++;
      continue;
    }
    if (edge_add(rc, f) < 0) return -ENOMEM;
  }
  return 0;
}

/* --- the rewrite --------------------------------------------------------------------- */

/* Appends to a scratch buffer; a failure (no memory) is kept in *failed,
 * and the packet then passes unchanged. */
static void put(tg_buf_t *b, const void *p, size_t n, bool *failed) {
  if (tg_buf_append(b, p, n) < 0) *failed = true;
}

static void put_len(tg_buf_t *b, uint32_t id, const uint8_t *p, size_t n,
                    bool *failed) {
  uint8_t hdr[2 * TG_PB_MAX_VARINT_SIZE];
  uint8_t *h = tg_pb_write_varint(hdr, TG_PB_TAG(id, TG_PB_WT_LEN));
  h = tg_pb_write_varint(h, n);
  put(b, hdr, (size_t)(h - hdr), failed);
  put(b, p, n, failed);
}

/* |p| (|n| bytes, a ClockSnapshot) into |out| with each clock's reading
 * moved by |d| ns: false when a reading would not stay in range. */
static bool move_snapshot(const uint8_t *p, size_t n, int64_t d, tg_buf_t *out,
                          bool *failed) {
  tg_pb_reader_t r, rc;
  tg_pb_field_t f, g;
  const uint8_t *at = p;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) {
      put(out, at, (size_t)(r.cur - at), failed);
      at = r.cur;
      continue;
    }
    uint8_t clock[64];
    uint8_t *w = clock;
    const uint8_t *cat = f.data;
    tg_pb_reader_init(&rc, f.data, f.size);
    if (f.size > sizeof(clock) - TG_PB_MAX_VARINT_SIZE - 1) return false;
    while (tg_pb_reader_next(&rc, &g) == 1) {
      if (g.id == CLK_TIMESTAMP && g.type == TG_PB_WT_VARINT) {
        int64_t v;
        if (g.value > (uint64_t)INT64_MAX ||
            __builtin_add_overflow((int64_t)g.value, d, &v) || v < 0)
          return false;
        *w++ = TG_PB_TAG(CLK_TIMESTAMP, TG_PB_WT_VARINT);
        w = tg_pb_write_varint(w, (uint64_t)v);
      } else {
        memcpy(w, cat, (size_t)(rc.cur - cat));
        w += rc.cur - cat;
      }
      cat = rc.cur;
      /* A varint grows by at most 10 - 1 bytes: room checked per field. */
      if ((size_t)(w - clock) > sizeof(clock) - TG_PB_MAX_VARINT_SIZE - 1)
        return false;
    }
    put_len(out, CS_CLOCKS, clock, (size_t)(w - clock), failed);
    at = r.cur;
  }
  return r.cur == r.end;
}

/* The BOOTTIME reading of ClockSnapshot |p|. */
static bool snapshot_boot(const uint8_t *p, size_t n, int64_t *boot) {
  tg_pb_reader_t r, rc;
  tg_pb_field_t f, g;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != CS_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    uint64_t id = 0, ts = 0;
    tg_pb_reader_init(&rc, f.data, f.size);
    while (tg_pb_reader_next(&rc, &g) == 1) {
      if (g.id == CLK_ID && g.type == TG_PB_WT_VARINT) id = g.value;
      if (g.id == CLK_TIMESTAMP && g.type == TG_PB_WT_VARINT) ts = g.value;
    }
    if (id == BUILTIN_BOOTTIME && ts <= (uint64_t)INT64_MAX) {
      *boot = (int64_t)ts;
      return true;
    }
  }
  return false;
}

/* Host |k|'s RemoteClockSync packet |p| into rc->scratch[0] with every
 * host_clocks reading (the collector's) moved by the host's correction at
 * that reading (|at| INT64_MIN), or at collector time |at|: trace
 * processor then places the host's own machine as its app packets were
 * moved. False: passed unchanged. */
static bool move_sync(tg_reclock_t *rc, size_t k, const uint8_t *p, size_t n,
                      int64_t at_time) {
  tg_buf_t *out = &rc->scratch[0], *sync = &rc->scratch[1],
           *pair = &rc->scratch[2];
  tg_buf_reset(out);
  tg_buf_reset(sync);
  bool *failed = &rc->enc_failed;
  *failed = false;
  tg_pb_reader_t r, rs, rp;
  tg_pb_field_t f, g, h;
  const uint8_t *at = p;
  tg_pb_reader_init(&r, p, n);
  bool moved = false;
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != PKT_REMOTE_CLOCK_SYNC || f.type != TG_PB_WT_LEN) {
      put(out, at, (size_t)(r.cur - at), failed);
      at = r.cur;
      continue;
    }
    tg_buf_reset(sync);
    const uint8_t *sat = f.data;
    tg_pb_reader_init(&rs, f.data, f.size);
    while (tg_pb_reader_next(&rs, &g) == 1) {
      if (g.id != RCS_SYNCED_CLOCKS || g.type != TG_PB_WT_LEN) {
        put(sync, sat, (size_t)(rs.cur - sat), failed);
        sat = rs.cur;
        continue;
      }
      tg_buf_reset(pair);
      const uint8_t *pat = g.data;
      tg_pb_reader_init(&rp, g.data, g.size);
      while (tg_pb_reader_next(&rp, &h) == 1) {
        int64_t boot;
        if (h.id == SC_HOST_CLOCKS && h.type == TG_PB_WT_LEN &&
            snapshot_boot(h.data, h.size, &boot)) {
          tg_buf_t snap;
          tg_buf_init(&snap, 0);
          double c =
              tg__rc_corr_at(rc, k, at_time == INT64_MIN ? boot : at_time);
          bool ok = isfinite(c) && fabs(c) < 1e15 &&
                    move_snapshot(h.data, h.size, (int64_t)llround(c), &snap,
                                  failed);
          if (ok)
            put_len(pair, SC_HOST_CLOCKS, tg_buf_begin(&snap),
                    tg_buf_size(&snap), failed);
          tg_buf_free(&snap);
          if (!ok) return false;
          moved = true;
        } else {
          put(pair, pat, (size_t)(rp.cur - pat), failed);
        }
        pat = rp.cur;
      }
      if (rp.cur != rp.end) return false;
      put_len(sync, RCS_SYNCED_CLOCKS, tg_buf_begin(pair), tg_buf_size(pair),
              failed);
      sat = rs.cur;
    }
    if (rs.cur != rs.end) return false;
    put_len(out, PKT_REMOTE_CLOCK_SYNC, tg_buf_begin(sync), tg_buf_size(sync),
            failed);
    at = r.cur;
  }
  return moved && r.cur == r.end && !*failed;
}

static int put_frame(wr_t *w, const uint8_t *body, size_t n,
                     const uint8_t *tail, size_t tail_n) {
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE] = {TG_PB_TAG(TRACE_PACKET, TG_PB_WT_LEN)};
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, n + tail_n) - hdr);
  int rv = wr_put(w, hdr, h);
  if (rv == 0) rv = wr_put(w, body, n);
  if (rv == 0 && tail_n) rv = wr_put(w, tail, tail_n);
  return rv;
}

/* The first pair of RemoteClockSync |p| (its body): the host's BOOTTIME
 * minus the collector's, and the collector's. */
static bool sync_first_pair(const uint8_t *p, size_t n, int64_t *off,
                            int64_t *coll) {
  tg_pb_reader_t r, rp;
  tg_pb_field_t f, g;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != RCS_SYNCED_CLOCKS || f.type != TG_PB_WT_LEN) continue;
    int64_t client = 0, host = 0;
    bool has_client = false, has_host = false;
    tg_pb_reader_init(&rp, f.data, f.size);
    while (tg_pb_reader_next(&rp, &g) == 1) {
      if (g.type != TG_PB_WT_LEN) continue;
      if (g.id == SC_CLIENT_CLOCKS)
        has_client = snapshot_boot(g.data, g.size, &client);
      if (g.id == SC_HOST_CLOCKS)
        has_host = snapshot_boot(g.data, g.size, &host);
    }
    if (has_client && has_host) {
      *off = client - host; /* both within 0..INT64_MAX: no overflow */
      *coll = host;
      return true;
    }
  }
  return false;
}

/* The host time of a packet of a host's own machine that trace processor
 * converts by its RemoteClockSync: its own timestamp on BOOTTIME (or the
 * trace's default clock), else an ftrace bundle's first event's. */
static bool host_time(const uint8_t *p, size_t n, const tg__rc_pkt_t *k,
                      int64_t *t) {
  if (k->has_ts && (!k->has_clock || k->clock == BUILTIN_BOOTTIME)) {
    if (k->ts > (uint64_t)INT64_MAX) return false;
    *t = (int64_t)k->ts;
    return true;
  }
  tg_pb_reader_t r, rb, re;
  tg_pb_field_t f, g, h;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &f) == 1) {
    if (f.id != PKT_FTRACE_EVENTS || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&rb, f.data, f.size);
    while (tg_pb_reader_next(&rb, &g) == 1) {
      if (g.id != FB_EVENT || g.type != TG_PB_WT_LEN) continue;
      tg_pb_reader_init(&re, g.data, g.size);
      while (tg_pb_reader_next(&re, &h) == 1)
        if (h.id == FE_TIMESTAMP && h.type == TG_PB_WT_VARINT &&
            h.value <= (uint64_t)INT64_MAX) {
          *t = (int64_t)h.value;
          return true;
        }
      return false;
    }
  }
  return false;
}

/* Host |h|'s RemoteClockSync (packet |body|) as the rewrite writes it:
 * moved by the correction at its own time, and kept as the host's last,
 * which follow_drift copies. */
static int rewrite_sync(tg_reclock_t *rc, tg_reclock_host_t *hosts, wr_t *w,
                        size_t h, const uint8_t *body, size_t n,
                        const tg__rc_pkt_t *k) {
  tg__rc_hsync_t *hs = &rc->hsync[h];
  int64_t off, coll;
  hs->has = false;
  if (!move_sync(rc, h, body, n, INT64_MIN)) return 0;
  hosts[h].syncs_moved++;
  if (sync_first_pair(k->rcs, k->rcs_n, &off, &coll)) {
    tg_buf_reset(&hs->last);
    hs->has = tg_buf_append(&hs->last, body, n) == 0;
    hs->host_minus_coll = off;
    hs->corr = tg__rc_corr_at(rc, h, coll); /* what the moved sync carries */
  }
  const tg_buf_t *b = &rc->scratch[0];
  int rv = put_frame(w, tg_buf_begin(b), tg_buf_size(b), NULL, 0);
  return rv < 0 ? rv : 1;
}

/* Before a packet of moved host |h|'s own machine: where the correction
 * at its time has moved past TG_RECLOCK_SYNC_STEP_NS from the last sync
 * written for the host, a copy of the host's last sync carrying the
 * correction at that time. 0 or a negative error (the packet itself then
 * passes as it is). */
static int follow_drift(tg_reclock_t *rc, tg_reclock_host_t *hosts, wr_t *w,
                        size_t h, const uint8_t *body, size_t n,
                        const tg__rc_pkt_t *k) {
  tg__rc_hsync_t *hs = &rc->hsync[h];
  int64_t th, at;
  if (!hs->has || !host_time(body, n, k, &th) ||
      __builtin_sub_overflow(th, hs->host_minus_coll, &at))
    return 0;
  double c = tg__rc_corr_at(rc, h, at);
  if (!isfinite(c) || fabs(c - hs->corr) <= TG_RECLOCK_SYNC_STEP_NS ||
      !move_sync(rc, h, tg_buf_begin(&hs->last), tg_buf_size(&hs->last), at))
    return 0;
  const tg_buf_t *b = &rc->scratch[0];
  int rv = put_frame(w, tg_buf_begin(b), tg_buf_size(b), NULL, 0);
  if (rv < 0) return rv;
  hs->corr = c;
  hosts[h].syncs_added++;
  return 0;
}

/* One packet of the second read: 1 when written re-timed, 0 when it is to
 * pass as it is, or a negative error. */
static int rewrite_packet(tg_reclock_t *rc, tg_reclock_host_t *hosts, wr_t *w,
                          const uint8_t *body, size_t n) {
  tg__rc_pkt_t k;
  if (!tg__rc_packet(body, n, &k)) return 0;
  if (k.has_machine && k.machine != 0) {
    size_t h = (size_t)k.machine - 1;
    if (k.machine > rc->n_hosts || !tg__rc_moved(rc, h)) return 0;
    if (k.rcs) return rewrite_sync(rc, hosts, w, h, body, n, &k);
    int rv = follow_drift(rc, hosts, w, h, body, n, &k);
    return rv < 0 ? rv : 0;
  }
  int64_t host = seq_host(rc, &k), t;
  if (host == SEQ_MACHINE0) tg__rc_machine0(rc, &k);
  if (host < 0) return 0;
  tg__rc_seq_t *s;
  if (tg__rc_follow(rc, (uint32_t)host, &k, &t, &s) != 1 ||
      !tg__rc_moved(rc, (size_t)host))
    return 0;
  int64_t moved;
  double c = tg__rc_corr_at(rc, (size_t)host, t);
  if (!isfinite(c) || fabs(c) > 1e15 ||
      __builtin_add_overflow(t, (int64_t)llround(c), &moved) || moved < 0)
    return 0;
  /* Last field wins: an absolute time on machine 0's BOOTTIME, whatever
   * clock the packet or its defaults named. */
  uint8_t tail[2 + 2 * TG_PB_MAX_VARINT_SIZE], *p = tail;
  *p++ = TG_PB_TAG(PKT_TIMESTAMP, TG_PB_WT_VARINT);
  p = tg_pb_write_varint(p, (uint64_t)moved);
  p = tg_pb_write_varint(p, TG_PB_TAG(PKT_TIMESTAMP_CLOCK_ID, TG_PB_WT_VARINT));
  *p++ = BUILTIN_BOOTTIME;
  int rv = put_frame(w, body, n, tail, (size_t)(p - tail));
  if (rv < 0) return rv;
  hosts[host].packets_moved++;
  return 1;
}

int tg_reclock_rewrite(tg_reclock_t *rc, const tg_reclock_io_t *io,
                       tg_reclock_host_t *hosts, tg_reclock_stats_t *st) {
  int rv = io->rewind(io->ctx);
  if (rv < 0) return rv;
  rd_t r = {.io = io, .pass = 2, .next_progress = PROGRESS_EVERY};
  wr_t w = {.io = io};
  tg_buf_init(&w.buf, 0);
  frame_t fr;
  for (size_t h = 0; h < rc->n_hosts; h++) rc->hsync[h].has = false;
  tg__rc_seqs_reset(rc);
  while ((rv = rd_next(&r, &fr)) == 0 && fr.kind != FR_END) {
    uint64_t in = r.pos, out = w.bytes;
    if (fr.kind == FR_RAW) {
      if ((rv = rd_pass(&r, fr.raw_n, &w)) < 0) break;
    } else {
      const uint8_t *frame = r.buf + r.beg;
      rv = rewrite_packet(rc, hosts, &w, frame + fr.hdr_n, fr.body_n);
      if (rv == 0) rv = wr_put(&w, frame, fr.hdr_n + fr.body_n);
      if (rv < 0) break;
      rd_take(&r, fr.hdr_n + fr.body_n);
    }
    if (io->span) io->span(io->ctx, in, r.pos - in, out, w.bytes - out);
  }
  if (rv >= 0) rv = wr_flush(&w);
  st->bytes_out = w.bytes;
  st->rewritten = rv >= 0;
  tg_buf_free(&w.buf);
  free(r.buf);
  return rv < 0 ? rv : 0;
}

uint64_t tg_reclock_bound(const tg_clock_sync_t *c) {
  uint64_t best = 0, first = 0;
  if (!c->estimates) return 0;
  (void)tg_clock_offset(&c->best, &best);
  (void)tg_clock_offset(&c->first, &first);
  return best > first ? best : first;
}

int tg_reclock_run(const tg_reclock_io_t *io, tg_reclock_host_t *hosts,
                   size_t n_hosts, tg_reclock_stats_t *st) {
  memset(st, 0, sizeof(*st));
  tg_reclock_t *rc = tg_reclock_new(n_hosts);
  if (!rc) return -ENOMEM;
  int rv = tg_reclock_scan(rc, io, st);
  if (rv == 0) rv = tg_reclock_place(rc, hosts, st);
  if (rv > 0) rv = tg_reclock_rewrite(rc, io, hosts, st);
  tg_reclock_free(rc);
  return rv < 0 ? rv : 0;
}
