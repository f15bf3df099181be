/* SPDX-License-Identifier: Apache-2.0 */
/* The collector of a trace's modules and frames, the ModuleSymbols writer
 * and the streaming copy (symbolize.h). The debug files and libdw are in
 * symbolize_dw.c. */
#include "consumer/symbolize/symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "consumer/packet_inflate.h"
#include "consumer/symbolize/symbolize_map.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

/* TracePacket and InternedData field numbers (Perfetto's
 * perfetto_trace.proto). */
enum {
  PKT_SEQ_ID = 10,
  PKT_INTERNED = 12,
  PKT_SEQ_FLAGS = 13,
  PKT_INCR_CLEARED = 41,
  PKT_COMPRESSED = 50,
  PKT_MODULE_SYMBOLS = 61,
  PKT_MACHINE_ID = 98,
  INT_FRAMES = 6,
  INT_BUILD_IDS = 16,
  INT_MAPPING_PATHS = 17,
  INT_MAPPINGS = 19,
  SEQ_INCREMENTAL_STATE_CLEARED = 1,
};

/* --- a sequence's interned state ------------------------------------------ */

/* Strings (build ids, path components) live in |strs|; the maps give their
 * index there, or a module's index for mappings. */
typedef struct sstr {
  uint8_t *p;
  size_t n;
} sstr_t;

struct tg_sym_seq {
  uint64_t key; /* machine_id << 32 | trusted_packet_sequence_id */
  sstr_t *strs;
  size_t n_strs, cap_strs;
  tg__sym_imap_t build_ids, paths, mappings;
};

/* The tables of a tg_sym_t, made with its first packet. */
struct tg__sym_tables {
  uint64_t seed;
  tg__sym_imap_t seqs;   /* tg_sym_seq_t.key -> index in s->seqs */
  tg__sym_index_t mods;  /* s->mods by module_hash() */
};

static void seq_reset(tg_sym_seq_t *q) {
  for (size_t i = 0; i < q->n_strs; i++) free(q->strs[i].p);
  free(q->strs);
  q->strs = NULL;
  q->n_strs = q->cap_strs = 0;
  tg__sym_imap_clear(&q->build_ids);
  tg__sym_imap_clear(&q->paths);
  tg__sym_imap_clear(&q->mappings);
}

void tg_sym_init(tg_sym_t *s) {
  memset(s, 0, sizeof(*s));
  tg_buf_init(&s->inflate, TG_PACKETS_INFLATE_MAX);
}

static struct tg__sym_tables *tables(tg_sym_t *s) {
  if (!s->tables && (s->tables = calloc(1, sizeof(*s->tables)))) {
    s->tables->seed = tg__sym_seed();
    tg__sym_imap_init(&s->tables->seqs, s->tables->seed);
  }
  return s->tables;
}

void tg_sym_module_free(tg_sym_module_t *m) {
  for (size_t a = 0; a < m->n_addrs; a++) {
    for (size_t l = 0; l < m->addrs[a].n_lines; l++) {
      free(m->addrs[a].lines[l].function);
      free(m->addrs[a].lines[l].file);
    }
    free(m->addrs[a].lines);
  }
  free(m->addrs);
  free(m->pcs);
  free(m->path);
  free(m->debug_file);
  memset(m, 0, sizeof(*m));
}

void tg_sym_free(tg_sym_t *s) {
  for (size_t i = 0; i < s->n_seqs; i++) seq_reset(&s->seqs[i]);
  free(s->seqs);
  for (size_t i = 0; i < s->n_mods; i++) tg_sym_module_free(&s->mods[i]);
  free(s->mods);
  if (s->tables) {
    tg__sym_imap_clear(&s->tables->seqs);
    tg__sym_index_clear(&s->tables->mods);
    free(s->tables);
  }
  tg_buf_free(&s->inflate);
  memset(s, 0, sizeof(*s));
}

static tg_sym_seq_t *seq_get(tg_sym_t *s, uint64_t key, int *err) {
  struct tg__sym_tables *t = tables(s);
  uint32_t at;
  if (!t) {
    *err = -ENOMEM;
    return NULL;
  }
  if (tg__sym_imap_get(&t->seqs, key, &at)) return &s->seqs[at];
  if (s->n_seqs >= TG_SYM_MAX_SEQS) {
    *err = -E2BIG;
    return NULL;
  }
  if (s->n_seqs == s->cap_seqs) {
    size_t cap = s->cap_seqs ? s->cap_seqs * 2 : 16;
    tg_sym_seq_t *n = realloc(s->seqs, cap * sizeof(*n));
    if (!n) {
      *err = -ENOMEM;
      return NULL;
    }
    s->seqs = n;
    s->cap_seqs = cap;
  }
  if ((*err = tg__sym_imap_put(&t->seqs, key, (uint32_t)s->n_seqs,
                               TG_SYM_MAX_SEQS)))
    return NULL;
  tg_sym_seq_t *q = &s->seqs[s->n_seqs++];
  memset(q, 0, sizeof(*q));
  q->key = key;
  tg__sym_imap_init(&q->build_ids, t->seed);
  tg__sym_imap_init(&q->paths, t->seed);
  tg__sym_imap_init(&q->mappings, t->seed);
  return q;
}

static int seq_add_str(tg_sym_seq_t *q, tg__sym_imap_t *m, const uint8_t *body,
                       size_t len) {
  uint64_t iid = 0;
  const uint8_t *str = NULL;
  size_t n = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, body, len);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_VARINT) iid = f.value;
    if (f.id == 2 && f.type == TG_PB_WT_LEN) {
      str = f.data;
      n = f.size;
    }
  }
  if (rv < 0) return TG_EPARSE;
  if (!iid || !str || n > TG_SYM_MAX_PATH) return 0;
  if (q->n_strs >= TG_SYM_MAX_SEQ_ENTRIES) return -E2BIG;
  if (q->n_strs == q->cap_strs) {
    size_t cap = q->cap_strs ? q->cap_strs * 2 : 64;
    sstr_t *g = realloc(q->strs, cap * sizeof(*g));
    if (!g) return -ENOMEM;
    q->strs = g;
    q->cap_strs = cap;
  }
  uint8_t *c = malloc(n ? n : 1);
  if (!c) return -ENOMEM;
  if (n) memcpy(c, str, n);
  q->strs[q->n_strs] = (sstr_t){c, n};
  int err = tg__sym_imap_put(m, iid, (uint32_t)q->n_strs,
                             TG_SYM_MAX_SEQ_ENTRIES);
  if (err) {
    free(c);
    return err;
  }
  q->n_strs++;
  return 0;
}

/* A module's key (machine, build id, path) under the run's seed. */
static uint64_t module_hash(uint64_t seed, uint32_t machine, const char *path,
                            size_t path_len, const uint8_t *id,
                            size_t id_len) {
  uint64_t h = tg__sym_mix(seed ^ machine);
  h = tg__sym_hash(h, id, id_len);
  return tg__sym_hash(h, path, path_len);
}

static int module_get(tg_sym_t *s, uint32_t machine, const char *path,
                      size_t path_len, const uint8_t *id, size_t id_len,
                      uint32_t *idx) {
  struct tg__sym_tables *t = tables(s);
  if (!t) return -ENOMEM;
  uint64_t h = module_hash(t->seed, machine, path, path_len, id, id_len);
  if (t->mods.cap) {
    size_t at = tg__sym_index_start(&t->mods, h);
    uint32_t i;
    while (tg__sym_index_next(&t->mods, h, &at, &i)) {
      const tg_sym_module_t *m = &s->mods[i];
      if (m->machine_id == machine && m->build_id_len == id_len &&
          (!id_len || !memcmp(m->build_id, id, id_len)) &&
          !strcmp(m->path, path)) {
        *idx = i;
        return 0;
      }
    }
  }
  if (s->n_mods >= TG_SYM_MAX_MODULES) return -E2BIG;
  if (s->n_mods == s->cap_mods) {
    size_t cap = s->cap_mods ? s->cap_mods * 2 : 16;
    tg_sym_module_t *g = realloc(s->mods, cap * sizeof(*g));
    if (!g) return -ENOMEM;
    s->mods = g;
    s->cap_mods = cap;
  }
  tg_sym_module_t *m = &s->mods[s->n_mods];
  memset(m, 0, sizeof(*m));
  if (!(m->path = strdup(path))) return -ENOMEM;
  int err = tg__sym_index_add(&t->mods, h, (uint32_t)s->n_mods);
  if (err) {
    free(m->path);
    m->path = NULL;
    return err;
  }
  m->machine_id = machine;
  if (id_len) memcpy(m->build_id, id, id_len);
  m->build_id_len = id_len;
  *idx = (uint32_t)s->n_mods++;
  return 0;
}

/* A Mapping: its path is "/" + each component, as trace_processor names
 * the mapping (and as ModuleSymbols.path must say it). */
static int seq_add_mapping(tg_sym_t *s, tg_sym_seq_t *q, uint32_t machine,
                           const uint8_t *body, size_t len) {
  uint64_t iid = 0, build = 0;
  char path[TG_SYM_MAX_PATH + 1];
  size_t plen = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  /* path_string_ids (7) come unpacked or packed. */
  tg_pb_reader_init(&r, body, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_VARINT) iid = f.value;
    if (f.id == 2 && f.type == TG_PB_WT_VARINT) build = f.value;
    if (f.id != 7) continue;
    uint64_t ids[256];
    size_t n_ids = 0;
    if (f.type == TG_PB_WT_VARINT) {
      ids[n_ids++] = f.value;
    } else if (f.type == TG_PB_WT_LEN) {
      const uint8_t *p = f.data, *end = f.data + f.size;
      while (p < end) {
        size_t k = tg_pb_read_varint(p, end, &ids[n_ids]);
        if (!k) return TG_EPARSE;
        p += k;
        if (++n_ids == 256) break;
      }
    }
    for (size_t i = 0; i < n_ids; i++) {
      uint32_t si;
      if (!tg__sym_imap_get(&q->paths, ids[i], &si)) return 0; /* unknown: skip */
      const sstr_t *c = &q->strs[si];
      if (plen + 1 + c->n > TG_SYM_MAX_PATH) return 0;
      path[plen++] = '/';
      memcpy(path + plen, c->p, c->n);
      plen += c->n;
    }
  }
  if (rv < 0) return TG_EPARSE;
  path[plen] = '\0';
  if (!iid || memchr(path, '\0', plen)) return 0;
  const uint8_t *id = NULL;
  size_t id_len = 0;
  uint32_t bi;
  if (build && tg__sym_imap_get(&q->build_ids, build, &bi) &&
      q->strs[bi].n <= TG_SYM_MAX_BUILD_ID) {
    id = q->strs[bi].p;
    id_len = q->strs[bi].n;
  }
  uint32_t mi;
  int err = module_get(s, machine, path, plen, id, id_len, &mi);
  if (err) return err;
  return tg__sym_imap_put(&q->mappings, iid, mi, TG_SYM_MAX_SEQ_ENTRIES);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts and dedups |m|'s addresses; returns how many went. A sequence
 * interns its frames again after each clear (every second in the
 * collector's rings), so a long trace repeats them many times over. */
static size_t compact(tg_sym_module_t *m) {
  if (m->n_pcs < 2) return 0;
  qsort(m->pcs, m->n_pcs, sizeof(*m->pcs), cmp_u64);
  size_t k = 1;
  for (size_t j = 1; j < m->n_pcs; j++)
    if (m->pcs[j] != m->pcs[k - 1]) m->pcs[k++] = m->pcs[j];
  size_t gone = m->n_pcs - k;
  m->n_pcs = k;
  return gone;
}

static int seq_add_frame(tg_sym_t *s, tg_sym_seq_t *q, const uint8_t *body,
                         size_t len) {
  uint64_t mapping = 0, rel_pc = 0;
  bool has_pc = false;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, body, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 3 && f.type == TG_PB_WT_VARINT) mapping = f.value;
    if (f.id == 4 && f.type == TG_PB_WT_VARINT) {
      rel_pc = f.value;
      has_pc = true;
    }
  }
  if (rv < 0) return TG_EPARSE;
  uint32_t mi;
  if (!has_pc || !tg__sym_imap_get(&q->mappings, mapping, &mi)) return 0;
  tg_sym_module_t *m = &s->mods[mi];
  if (m->n_pcs && m->pcs[m->n_pcs - 1] == rel_pc) return 0;
  if (m->n_pcs == m->cap_pcs) {
    s->n_pcs -= compact(m);
    /* Grown only when compacting freed less than half of it. */
    if (!m->cap_pcs || m->n_pcs * 2 > m->cap_pcs) {
      size_t cap = m->cap_pcs ? m->cap_pcs * 2 : 64;
      uint64_t *g = realloc(m->pcs, cap * sizeof(*g));
      if (!g) return -ENOMEM;
      m->pcs = g;
      m->cap_pcs = cap;
    }
  }
  if (s->n_pcs >= TG_SYM_MAX_PCS) return -E2BIG;
  m->pcs[m->n_pcs++] = rel_pc;
  s->n_pcs++;
  return 0;
}

/* InternedData in three walks: strings, then mappings, then frames, so
 * that the order of the fields within one message does not matter. */
static int interned(tg_sym_t *s, tg_sym_seq_t *q, uint32_t machine,
                    const uint8_t *body, size_t len) {
  for (int walk = 0; walk < 3; walk++) {
    tg_pb_reader_t r;
    tg_pb_field_t f;
    int rv;
    tg_pb_reader_init(&r, body, len);
    while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
      if (f.type != TG_PB_WT_LEN) continue;
      int err = 0;
      if (walk == 0 && f.id == INT_BUILD_IDS)
        err = seq_add_str(q, &q->build_ids, f.data, f.size);
      else if (walk == 0 && f.id == INT_MAPPING_PATHS)
        err = seq_add_str(q, &q->paths, f.data, f.size);
      else if (walk == 1 && f.id == INT_MAPPINGS)
        err = seq_add_mapping(s, q, machine, f.data, f.size);
      else if (walk == 2 && f.id == INT_FRAMES)
        err = seq_add_frame(s, q, f.data, f.size);
      if (err) return err;
    }
    if (rv < 0) return TG_EPARSE;
  }
  return 0;
}

typedef struct inner_ctx {
  tg_sym_t *s;
  uint32_t machine;
} inner_ctx_t;

static int packet(tg_sym_t *s, const uint8_t *pkt, size_t len,
                  uint32_t outer_machine, int depth);

static int on_inner(void *ctx, const uint8_t *pkt, size_t len) {
  inner_ctx_t *c = ctx;
  return packet(c->s, pkt, len, c->machine, 1);
}

static int packet(tg_sym_t *s, const uint8_t *pkt, size_t len,
                  uint32_t outer_machine, int depth) {
  /* At every packet, inner ones included: a compressed packet may hold
   * thousands, and one read of the file many more. */
  int stop = s->stop ? tg_sym_should_stop(s->stop) : 0;
  if (stop) return stop;
  s->packets++;
  uint64_t seq = 0, flags = 0, machine = outer_machine;
  bool cleared = false;
  const uint8_t *intern = NULL, *z = NULL;
  size_t intern_len = 0, z_len = 0;
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int rv;
  tg_pb_reader_init(&r, pkt, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    switch (f.id) {
      case PKT_SEQ_ID:
        if (f.type == TG_PB_WT_VARINT) seq = f.value;
        break;
      case PKT_SEQ_FLAGS:
        if (f.type == TG_PB_WT_VARINT) flags = f.value;
        break;
      case PKT_INCR_CLEARED:
        if (f.type == TG_PB_WT_VARINT) cleared = tg_pb_reader_bool(&r);
        break;
      case PKT_MACHINE_ID:
        if (f.type == TG_PB_WT_VARINT) machine = f.value;
        break;
      case PKT_INTERNED:
        if (f.type == TG_PB_WT_LEN) {
          intern = f.data;
          intern_len = f.size;
        }
        break;
      case PKT_COMPRESSED:
        if (f.type == TG_PB_WT_LEN) {
          z = f.data;
          z_len = f.size;
        }
        break;
      case PKT_MODULE_SYMBOLS:
        s->module_symbols_in++;
        break;
      default:
        break;
    }
  }
  if (rv < 0) return TG_EPARSE;
  if (machine > UINT32_MAX) return TG_EPARSE;
  if (z && depth == 0) {
    int err = tg_packets_inflate(z, z_len, &s->inflate);
    if (err) return err == -ENOMEM ? err : TG_EPARSE;
    /* The inflated bytes live in s->inflate until the next wrapper, which
     * cannot come from inside (depth 1 does not inflate). */
    inner_ctx_t c = {s, (uint32_t)machine};
    return tg_packets_each(tg_buf_begin(&s->inflate),
                           tg_buf_size(&s->inflate), on_inner, &c);
  }
  int err = 0;
  uint64_t key = machine << 32 | (seq & 0xFFFFFFFFu);
  tg_sym_seq_t *q = NULL;
  if ((flags & SEQ_INCREMENTAL_STATE_CLEARED) || cleared) {
    if (!(q = seq_get(s, key, &err))) return err;
    seq_reset(q);
  }
  if (!intern) return 0;
  if (!q && !(q = seq_get(s, key, &err))) return err;
  return interned(s, q, (uint32_t)machine, intern, intern_len);
}

int tg_sym_packet(tg_sym_t *s, const uint8_t *pkt, size_t len) {
  return packet(s, pkt, len, 0, 0);
}

void tg_sym_finish_collect(tg_sym_t *s) {
  for (size_t i = 0; i < s->n_mods; i++) s->n_pcs -= compact(&s->mods[i]);
}

/* --- the ModuleSymbols writer: exact (shortest) varints, messages built
 * inside out ---------------------------------------------------------------- */

static int put_varint(tg_buf_t *b, uint64_t v) {
  uint8_t t[TG_PB_MAX_VARINT_SIZE];
  return tg_buf_append(b, t, (size_t)(tg_pb_write_varint(t, v) - t));
}

static int put_tag(tg_buf_t *b, uint32_t field, unsigned type) {
  return put_varint(b, (uint64_t)field << 3 | type);
}

static int put_bytes(tg_buf_t *b, uint32_t field, const void *p, size_t n) {
  int rv = put_tag(b, field, TG_PB_WT_LEN);
  if (!rv) rv = put_varint(b, n);
  if (!rv && n) rv = tg_buf_append(b, p, n);
  return rv;
}

static int put_uint(tg_buf_t *b, uint32_t field, uint64_t v) {
  int rv = put_tag(b, field, TG_PB_WT_VARINT);
  return rv ? rv : put_varint(b, v);
}

/* Appends |inner| as field |field| of |outer|. */
static int put_msg(tg_buf_t *outer, uint32_t field, const tg_buf_t *inner) {
  return put_bytes(outer, field, tg_buf_begin(inner), tg_buf_size(inner));
}

static int write_addr(const tg_sym_addr_t *a, tg_buf_t *out, tg_buf_t *tmp,
                      tg_buf_t *tmp2) {
  tg_buf_reset(tmp);
  int rv = put_uint(tmp, 1, a->rel_pc);
  for (size_t i = 0; i < a->n_lines && !rv; i++) {
    const tg_sym_line_t *l = &a->lines[i];
    tg_buf_reset(tmp2);
    if (l->function)
      rv = put_bytes(tmp2, 1, l->function, strlen(l->function));
    if (!rv && l->file) rv = put_bytes(tmp2, 2, l->file, strlen(l->file));
    if (!rv && l->line) rv = put_uint(tmp2, 3, l->line);
    if (!rv) rv = put_msg(tmp, 2, tmp2);
  }
  return rv ? rv : put_msg(out, 3, tmp);
}

int tg_sym_write_module(const tg_sym_module_t *m, tg_buf_t *out) {
  tg_buf_t ms, pkt, t1, t2;
  tg_buf_init(&ms, 0);
  tg_buf_init(&pkt, 0);
  tg_buf_init(&t1, 0);
  tg_buf_init(&t2, 0);
  int rv = 0;
  for (size_t at = 0; at < m->n_addrs && !rv; at += TG_SYM_ADDRS_PER_PACKET) {
    size_t end = at + TG_SYM_ADDRS_PER_PACKET;
    if (end > m->n_addrs) end = m->n_addrs;
    tg_buf_reset(&ms);
    tg_buf_reset(&pkt);
    rv = put_bytes(&ms, 1, m->path, strlen(m->path));
    if (!rv && m->build_id_len)
      rv = put_bytes(&ms, 2, m->build_id, m->build_id_len);
    for (size_t i = at; i < end && !rv; i++)
      rv = write_addr(&m->addrs[i], &ms, &t1, &t2);
    if (!rv) rv = put_msg(&pkt, PKT_MODULE_SYMBOLS, &ms);
    if (!rv && m->machine_id) rv = put_uint(&pkt, PKT_MACHINE_ID, m->machine_id);
    if (!rv) rv = put_msg(out, 1, &pkt); /* Trace.packet */
  }
  tg_buf_free(&ms);
  tg_buf_free(&pkt);
  tg_buf_free(&t1);
  tg_buf_free(&t2);
  return rv;
}

/* --- the streaming copy ------------------------------------------------------ */

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return -errno;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Walks the Trace framing of |b|'s complete packets and consumes them;
 * what remains is the start of a packet not yet read whole. */
static int walk_buffered(tg_sym_t *s, tg_buf_t *b, bool at_eof) {
  for (;;) {
    const uint8_t *p = tg_buf_begin(b), *end = p + tg_buf_size(b);
    if (p == end) return 0;
    uint64_t tag, len;
    size_t k = tg_pb_read_varint(p, end, &tag);
    if (!k) return at_eof || end - p >= 10 ? TG_EPARSE : 0;
    size_t k2 = tg_pb_read_varint(p + k, end, &len);
    if (!k2) return at_eof || end - p - k >= 10 ? TG_EPARSE : 0;
    if ((tag & 7) != TG_PB_WT_LEN) return TG_EPARSE;
    if (len > TG_PACKETS_INFLATE_MAX) return TG_EPARSE;
    if ((uint64_t)(end - p - k - k2) < len) return at_eof ? TG_EPARSE : 0;
    if (tag >> 3 == 1) {
      int rv = tg_sym_packet(s, p + k + k2, (size_t)len);
      if (rv) return rv;
    }
    tg_buf_consume(b, k + k2 + (size_t)len);
  }
}


int tg_sym_collect_fd(tg_sym_t *s, int fd, int copy_fd, const tg_sym_opts_t *o,
                      char *why, size_t why_size) {
  tg_buf_t b;
  tg_buf_init(&b, TG_PACKETS_INFLATE_MAX + 64);
  int rv = 0;
  s->stop = o;
  for (;;) {
    if ((rv = tg_sym_should_stop(o))) {
      snprintf(why, why_size, "%s", rv == -ETIMEDOUT ? "out of time"
                                                     : "stopped");
      break;
    }
    uint8_t *p = tg_buf_reserve(&b, 1 << 16);
    if (!p) {
      rv = -ENOMEM;
      snprintf(why, why_size, "out of memory");
      break;
    }
    ssize_t n = read(fd, p, 1 << 16);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      rv = -errno;
      snprintf(why, why_size, "cannot read the trace: %s", strerror(-rv));
      break;
    }
    if (copy_fd >= 0 && (rv = write_all(copy_fd, p, (size_t)n))) {
      snprintf(why, why_size, "cannot write the copy: %s", strerror(-rv));
      break;
    }
    tg_buf_commit(&b, (size_t)n);
    if ((rv = walk_buffered(s, &b, n == 0))) {
      if (rv == -ETIMEDOUT || rv == -ECANCELED)
        snprintf(why, why_size, "%s",
                 rv == -ETIMEDOUT ? "out of time" : "stopped");
      else
        snprintf(why, why_size, "the trace is damaged or too large (%s)",
                 rv == -ENOMEM ? "out of memory" : tg_strerror(rv));
      break;
    }
    if (n == 0) break;
  }
  tg_buf_free(&b);
  s->stop = NULL;
  if (!rv) tg_sym_finish_collect(s);
  return rv;
}

int tg_sym_resolve_all(tg_sym_t *s, const tg_sym_opts_t *o,
                       tg_sym_result_t *res) {
  memset(res, 0, sizeof(*res));
  res->packets = s->packets;
  res->modules = s->n_mods;
  tg_sym_opts_t lo = *o;
  if (!lo.stats) lo.stats = &res->stats;
  int rv = 0;
  for (size_t i = 0; i < s->n_mods && !rv; i++) {
    tg_sym_module_t *m = &s->mods[i];
    res->frames += m->n_pcs;
    if (!m->n_pcs) continue;
    rv = tg_sym_resolve(m, &lo);
    if (m->source != TG_SYM_SRC_NONE) res->modules_found++;
    res->frames_plt += m->n_plt;
    for (size_t a = 0; a < m->n_addrs; a++) {
      bool named = false, line = false;
      for (size_t l = 0; l < m->addrs[a].n_lines; l++) {
        named = named || m->addrs[a].lines[l].function;
        line = line || m->addrs[a].lines[l].line;
      }
      res->frames_named += named;
      res->frames_with_line += named && line;
    }
  }
  if (o->stats) res->stats = *o->stats;
  return rv;
}

int tg_sym_file(tg_sym_t *s, const char *in, const char *out,
                const tg_sym_opts_t *o, tg_sym_result_t *res, char *why,
                size_t why_size) {
  memset(res, 0, sizeof(*res));
  int ifd = open(in, O_RDONLY | O_CLOEXEC);
  if (ifd < 0) {
    int e = -errno;
    snprintf(why, why_size, "cannot open %s: %s", in, strerror(-e));
    return e;
  }
  size_t tl = strlen(out) + 16;
  char *tmp = malloc(tl);
  if (!tmp) {
    close(ifd);
    return -ENOMEM;
  }
  /* A name of this process's own next to OUT (so that rename() stays on
   * one file system), created with the umask's mode as OUT would be. */
  snprintf(tmp, tl, "%s.tmp.%ld", out, (long)getpid());
  int ofd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (ofd < 0) {
    int e = -errno;
    snprintf(why, why_size, "cannot create %s: %s", tmp, strerror(-e));
    close(ifd);
    free(tmp);
    return e;
  }
  char what[400] = "";
  int rv = tg_sym_collect_fd(s, ifd, ofd, o, what, sizeof(what));
  if (rv) snprintf(why, why_size, "%s: %s", in, what);
  tg_buf_t syms;
  tg_buf_init(&syms, 0);
  if (!rv && (rv = tg_sym_resolve_all(s, o, res)) == -ENOMEM)
    snprintf(why, why_size, "out of memory");
  for (size_t i = 0; i < s->n_mods && !rv; i++) {
    tg_buf_reset(&syms);
    if ((rv = tg_sym_write_module(&s->mods[i], &syms)) == -ENOMEM)
      snprintf(why, why_size, "out of memory");
    else if ((rv = write_all(ofd, tg_buf_begin(&syms), tg_buf_size(&syms))))
      snprintf(why, why_size, "cannot write %s: %s", tmp, strerror(-rv));
  }
  tg_buf_free(&syms);
  close(ifd);
  if (!rv && fsync(ofd) < 0) {
    rv = -errno;
    snprintf(why, why_size, "cannot write %s: %s", tmp, strerror(-rv));
  }
  if (close(ofd) < 0 && !rv) {
    rv = -errno;
    snprintf(why, why_size, "cannot write %s: %s", tmp, strerror(-rv));
  }
  if (!rv && rename(tmp, out) < 0) {
    rv = -errno;
    snprintf(why, why_size, "cannot rename %s to %s: %s", tmp, out,
             strerror(-rv));
  }
  if (rv) unlink(tmp);
  free(tmp);
  return rv;
}
