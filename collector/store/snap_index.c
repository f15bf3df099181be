/* A snapshot's host index (snap_index.h): built while the snapshot is
 * written, read when one host's part is asked for. */
#include "collector/store/snap_index.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fd_write.h"
#include "tracegate/error.h"

/* --- little-endian fields ---------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p) {
  return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Every length here is bounded far below UINT_MAX (the table, an extent
 * list of at most TG_COLL_INDEX_MAX_EXTENTS), but crc32() takes a uInt. */
static uint32_t crc(const uint8_t *p, size_t n) {
  uint32_t c = (uint32_t)crc32(0L, Z_NULL, 0);
  while (n) {
    uInt k = n > UINT_MAX ? UINT_MAX : (uInt)n;
    c = (uint32_t)crc32(c, p, k);
    p += k;
    n -= k;
  }
  return c;
}

/* --- the builder --------------------------------------------------------------- */

typedef struct bhost {
  char *name;
  tg_coll_extent_t *ext;
  size_t n, cap;
} bhost_t;

struct tg_coll_index_builder {
  bhost_t *hosts;
  size_t n_hosts;
  uint64_t head;
  uint64_t end; /* the end of the last bytes added */
  size_t extents;
  const char *why; /* set once: the builder gave up */
};

tg_coll_index_builder_t *tg_coll_index_builder_new(size_t n_hosts) {
  if (n_hosts < 1 || n_hosts > TG_COLL_INDEX_MAX_HOSTS) return NULL;
  tg_coll_index_builder_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->hosts = calloc(n_hosts, sizeof(*b->hosts));
  if (!b->hosts) {
    free(b);
    return NULL;
  }
  b->n_hosts = n_hosts;
  return b;
}

void tg_coll_index_builder_free(tg_coll_index_builder_t *b) {
  if (!b) return;
  for (size_t i = 0; i < b->n_hosts; i++) {
    free(b->hosts[i].name);
    free(b->hosts[i].ext);
  }
  free(b->hosts);
  free(b);
}

int tg_coll_index_name(tg_coll_index_builder_t *b, size_t host,
                       const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (host >= b->n_hosts || n < 1 || n > TG_COLL_INDEX_NAME_MAX)
    return -EINVAL;
  char *copy = strdup(name);
  if (!copy) return -ENOMEM;
  free(b->hosts[host].name);
  b->hosts[host].name = copy;
  return 0;
}

void tg_coll_index_head(tg_coll_index_builder_t *b, uint64_t bytes) {
  b->head = bytes;
  if (b->end < bytes) b->end = bytes;
}

void tg_coll_index_add(tg_coll_index_builder_t *b, size_t host, uint64_t off,
                       uint64_t len) {
  if (b->why || !len) return;
  /* The caller adds bytes as it writes them: in file order, after the
   * head. Anything else is a caller's bug the index must not hide. */
  if (host >= b->n_hosts || off < b->end || len > UINT64_MAX - off) {
    b->why = "bytes added out of file order";
    return;
  }
  b->end = off + len;
  bhost_t *h = &b->hosts[host];
  if (h->n && h->ext[h->n - 1].off + h->ext[h->n - 1].len == off) {
    h->ext[h->n - 1].len += len;
    return;
  }
  if (b->extents >= TG_COLL_INDEX_MAX_EXTENTS) {
    b->why = "its hosts' packets are too fragmented (over 2097152 runs)";
    return;
  }
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 16;
    tg_coll_extent_t *e = realloc(h->ext, cap * sizeof(*e));
    if (!e) {
      b->why = "out of memory";
      return;
    }
    h->ext = e;
    h->cap = cap;
  }
  h->ext[h->n++] = (tg_coll_extent_t){off, len};
  b->extents++;
}

const char *tg_coll_index_why(const tg_coll_index_builder_t *b) {
  return b->why;
}

size_t tg_coll_index_extents(const tg_coll_index_builder_t *b) {
  return b->extents;
}

/* Writes the extent list of |h| in LE through |buf| (|cap| bytes, a
 * multiple of TG_COLL_INDEX_EXTENT); its crc into *c. */
static int write_extents(int fd, const bhost_t *h, uint8_t *buf, size_t cap,
                         uint32_t *c) {
  uint32_t sum = (uint32_t)crc32(0L, Z_NULL, 0);
  size_t k = 0;
  for (size_t i = 0; i <= h->n; i++) {
    if (k == cap || (i == h->n && k)) {
      sum = (uint32_t)crc32(sum, buf, (uInt)k);
      if (fd >= 0) {
        int err = tg_write_all(fd, buf, k);
        if (err) return err;
      }
      k = 0;
    }
    if (i == h->n) break;
    put64(buf + k, h->ext[i].off);
    put64(buf + k + 8, h->ext[i].len);
    k += TG_COLL_INDEX_EXTENT;
  }
  *c = sum;
  return 0;
}

/* --- after a rewrite -------------------------------------------------------- */

typedef struct rmark {
  uint64_t off, end;
  size_t host;
} rmark_t;

struct tg_coll_index_remap {
  const tg_coll_index_builder_t *old;
  tg_coll_index_builder_t *nb;
  rmark_t *marks; /* every extent of |old|, in file order */
  size_t n, at;
  uint64_t in_end, out_end; /* where the next piece must start */
  uint64_t head;            /* the new head's end so far */
  bool past_head;
  const char *why;
};

static int mark_cmp(const void *a, const void *b) {
  const rmark_t *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

void tg_coll_index_remap_free(tg_coll_index_remap_t *r) {
  if (!r) return;
  tg_coll_index_builder_free(r->nb);
  free(r->marks);
  free(r);
}

tg_coll_index_remap_t *tg_coll_index_remap_new(
    const tg_coll_index_builder_t *old) {
  tg_coll_index_remap_t *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->old = old;
  r->nb = tg_coll_index_builder_new(old->n_hosts);
  r->marks = calloc(old->extents ? old->extents : 1, sizeof(*r->marks));
  if (!r->nb || !r->marks) goto fail;
  for (size_t h = 0; h < old->n_hosts; h++) {
    const bhost_t *bh = &old->hosts[h];
    if (bh->name && tg_coll_index_name(r->nb, h, bh->name) < 0) goto fail;
    for (size_t i = 0; i < bh->n && r->n < old->extents; i++)
      r->marks[r->n++] =
          (rmark_t){bh->ext[i].off, bh->ext[i].off + bh->ext[i].len, h};
  }
  qsort(r->marks, r->n, sizeof(*r->marks), mark_cmp);
  if (old->why) r->why = old->why;
  return r;
fail:
  tg_coll_index_remap_free(r);
  return NULL;
}

void tg_coll_index_remap_span(tg_coll_index_remap_t *r, uint64_t in,
                              uint64_t in_n, uint64_t out, uint64_t out_n) {
  if (r->why || (!in_n && !out_n)) return;
  if (in != r->in_end || out != r->out_end || in_n > UINT64_MAX - in ||
      out_n > UINT64_MAX - out) {
    r->why = "the rewrite named its bytes out of order";
    return;
  }
  r->in_end = in + in_n;
  r->out_end = out + out_n;
  uint64_t head = r->old->head;
  if (!r->past_head) {
    if (in + in_n <= head) {
      r->head = out + out_n;
      return;
    }
    if (in < head) {
      r->why = "a rewritten packet crosses the head's end";
      return;
    }
    r->past_head = true;
    tg_coll_index_head(r->nb, out);
  }
  while (r->at < r->n && r->marks[r->at].end <= in) r->at++;
  if (r->at == r->n || r->marks[r->at].off >= in + in_n) return; /* nobody's */
  const rmark_t *m = &r->marks[r->at];
  if (m->off > in || in + in_n > m->end) {
    r->why = "a rewritten packet crosses two hosts' bytes";
    return;
  }
  tg_coll_index_add(r->nb, m->host, out, out_n);
}

tg_coll_index_builder_t *tg_coll_index_remap_end(tg_coll_index_remap_t *r,
                                                 const char **why) {
  if (!r->why && !r->past_head) tg_coll_index_head(r->nb, r->head);
  if (!r->why) r->why = tg_coll_index_why(r->nb);
  tg_coll_index_builder_t *nb = NULL;
  if (!r->why) {
    nb = r->nb;
    r->nb = NULL;
  }
  *why = r->why;
  tg_coll_index_remap_free(r);
  return nb;
}

int tg_coll_index_write(const tg_coll_index_builder_t *b, int fd,
                        uint64_t trace_bytes) {
  if (b->why) return -ENOSPC;
  if (b->head > trace_bytes || b->end > trace_bytes) return -EINVAL;
  size_t table = 0;
  for (size_t i = 0; i < b->n_hosts; i++) {
    if (!b->hosts[i].name) return -EINVAL;
    table += TG_COLL_INDEX_ENTRY + strlen(b->hosts[i].name);
  }
  enum { CHUNK = 4096 * TG_COLL_INDEX_EXTENT };
  uint8_t *t = malloc(TG_COLL_INDEX_HEADER + table), *buf = malloc(CHUNK);
  if (!t || !buf) {
    free(t);
    free(buf);
    return -ENOMEM;
  }
  uint8_t *p = t + TG_COLL_INDEX_HEADER;
  uint64_t at = TG_COLL_INDEX_HEADER + table;
  int err = 0;
  for (size_t i = 0; i < b->n_hosts && !err; i++) {
    const bhost_t *h = &b->hosts[i];
    size_t nl = strlen(h->name);
    uint32_t c;
    err = write_extents(-1, h, buf, CHUNK, &c); /* the crc only */
    put16(p, (uint16_t)nl);
    put16(p + 2, 0);
    put32(p + 4, (uint32_t)h->n);
    put64(p + 8, at);
    put32(p + 16, c);
    memcpy(p + TG_COLL_INDEX_ENTRY, h->name, nl);
    p += TG_COLL_INDEX_ENTRY + nl;
    at += (uint64_t)h->n * TG_COLL_INDEX_EXTENT;
  }
  memcpy(t, TG_COLL_INDEX_MAGIC, 8);
  put64(t + 8, trace_bytes);
  put64(t + 16, b->head);
  put32(t + 24, (uint32_t)b->n_hosts);
  put32(t + 28, (uint32_t)table);
  put32(t + 32, crc(t + TG_COLL_INDEX_HEADER, table));
  put32(t + 36, 0);
  put32(t + 40, 0);
  put32(t + 44, crc(t, 44));
  if (!err) err = tg_write_all(fd, t, TG_COLL_INDEX_HEADER + table);
  for (size_t i = 0; i < b->n_hosts && !err; i++) {
    uint32_t c;
    err = write_extents(fd, &b->hosts[i], buf, CHUNK, &c);
  }
  free(t);
  free(buf);
  return err;
}

/* --- the reader ---------------------------------------------------------------- */

int tg_coll_index_table_bytes(const uint8_t *untrusted, size_t n,
                              size_t *need) {
  if (n < TG_COLL_INDEX_HEADER ||
      memcmp(untrusted, TG_COLL_INDEX_MAGIC, 8) != 0 ||
      get32(untrusted + 44) != crc(untrusted, 44))
    return TG_EPARSE;
  uint32_t table = get32(untrusted + 28);
  if (table > TG_COLL_INDEX_MAX_TABLE) return TG_EPARSE;
  *need = TG_COLL_INDEX_HEADER + (size_t)table;
  return 0;
}

void tg_coll_index_free(tg_coll_index_t *ix) {
  free(ix->hosts);
  free(ix->names);
  memset(ix, 0, sizeof(*ix));
}

int tg_coll_index_parse(const uint8_t *untrusted, size_t n,
                        uint64_t index_bytes, uint64_t trace_bytes,
                        tg_coll_index_t *out) {
  memset(out, 0, sizeof(*out));
  size_t need;
  if (tg_coll_index_table_bytes(untrusted, n, &need) || n < need ||
      need > index_bytes)
    return TG_EPARSE;
  const uint8_t *h = untrusted;
  uint64_t head = get64(h + 16);
  uint32_t n_hosts = get32(h + 24);
  size_t table = need - TG_COLL_INDEX_HEADER;
  const uint8_t *t = untrusted + TG_COLL_INDEX_HEADER;
  if (get64(h + 8) != trace_bytes || head > trace_bytes || n_hosts < 1 ||
      n_hosts > TG_COLL_INDEX_MAX_HOSTS || get32(h + 36) || get32(h + 40) ||
      get32(h + 32) != crc(t, table))
    return TG_EPARSE;
  out->hosts = calloc(n_hosts, sizeof(*out->hosts));
  /* Each name's bytes and a NUL: never more than the table. */
  out->names = malloc(table + 1);
  if (!out->hosts || !out->names) {
    tg_coll_index_free(out);
    return -ENOMEM;
  }
  out->trace_bytes = trace_bytes;
  out->head_bytes = head;
  size_t pos = 0, np = 0;
  /* Extent lists follow the table, one after another, in host order:
   * nothing else is accepted, so no two lists overlap. */
  uint64_t at = need;
  for (uint32_t i = 0; i < n_hosts; i++) {
    if (table - pos < TG_COLL_INDEX_ENTRY) goto bad;
    const uint8_t *e = t + pos;
    size_t nl = get16(e);
    uint32_t ne = get32(e + 4);
    if (nl < 1 || nl > TG_COLL_INDEX_NAME_MAX || get16(e + 2) ||
        table - pos - TG_COLL_INDEX_ENTRY < nl || ne > TG_COLL_INDEX_MAX_EXTENTS ||
        get64(e + 8) != at ||
        (uint64_t)ne * TG_COLL_INDEX_EXTENT > index_bytes - at)
      goto bad;
    const char *name = (const char *)e + TG_COLL_INDEX_ENTRY;
    if (memchr(name, 0, nl)) goto bad;
    memcpy(out->names + np, name, nl);
    out->names[np + nl] = 0;
    out->hosts[i] = (tg_coll_index_host_t){.name = out->names + np,
                                           .n_extents = ne,
                                           .extents_at = at,
                                           .extents_crc = get32(e + 16)};
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(out->hosts[j].name, out->hosts[i].name)) goto bad;
    np += nl + 1;
    pos += TG_COLL_INDEX_ENTRY + nl;
    at += (uint64_t)ne * TG_COLL_INDEX_EXTENT;
  }
  if (pos != table || at != index_bytes) goto bad;
  out->n_hosts = n_hosts;
  return 0;
bad:
  tg_coll_index_free(out);
  return TG_EPARSE;
}

int tg_coll_index_find(const tg_coll_index_t *ix, const char *name,
                       size_t len, size_t *host) {
  for (size_t i = 0; i < ix->n_hosts; i++) {
    if (strlen(ix->hosts[i].name) == len &&
        !memcmp(ix->hosts[i].name, name, len)) {
      *host = i;
      return 0;
    }
  }
  return -ENOENT;
}

int tg_coll_index_host_extents(const tg_coll_index_t *ix, size_t host,
                               const uint8_t *untrusted, size_t n,
                               tg_coll_extent_t *out) {
  if (host >= ix->n_hosts) return TG_EPARSE;
  const tg_coll_index_host_t *h = &ix->hosts[host];
  if (n != (size_t)h->n_extents * TG_COLL_INDEX_EXTENT ||
      crc(untrusted, n) != h->extents_crc)
    return TG_EPARSE;
  /* After the head, increasing, not touching, inside the trace. */
  uint64_t end = ix->head_bytes;
  for (uint32_t i = 0; i < h->n_extents; i++) {
    uint64_t off = get64(untrusted + (size_t)i * TG_COLL_INDEX_EXTENT);
    uint64_t len = get64(untrusted + (size_t)i * TG_COLL_INDEX_EXTENT + 8);
    if (len == 0 || off < end || (i && off == end) ||
        off > ix->trace_bytes || len > ix->trace_bytes - off)
      return TG_EPARSE;
    out[i] = (tg_coll_extent_t){off, len};
    end = off + len;
  }
  return 0;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) return TG_EPARSE; /* shorter than its header says */
    got += (size_t)r;
  }
  return 0;
}

int tg_coll_index_read(int fd, uint64_t trace_bytes, tg_coll_index_t *out) {
  memset(out, 0, sizeof(*out));
  off_t size = lseek(fd, 0, SEEK_END);
  if (size < 0) return -errno;
  uint8_t head[TG_COLL_INDEX_HEADER];
  if ((uint64_t)size < TG_COLL_INDEX_HEADER) return TG_EPARSE;
  int err = pread_all(fd, head, sizeof(head), 0);
  size_t need;
  if (err || (err = tg_coll_index_table_bytes(head, sizeof(head), &need)))
    return err;
  if (need > (uint64_t)size) return TG_EPARSE;
  uint8_t *t = malloc(need);
  if (!t) return -ENOMEM;
  err = pread_all(fd, t, need, 0);
  if (!err) err = tg_coll_index_parse(t, need, (uint64_t)size, trace_bytes, out);
  free(t);
  return err;
}

static int by_offset(const void *a, const void *b) {
  const tg_coll_extent_t *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

int tg_coll_index_plan(const tg_coll_index_t *ix, int fd, const size_t *hosts,
                       size_t n, tg_coll_extent_t **out, size_t *n_out,
                       uint64_t *bytes) {
  size_t total = 1; /* the head */
  for (size_t i = 0; i < n; i++) {
    if (hosts[i] >= ix->n_hosts) return -EINVAL;
    total += ix->hosts[hosts[i]].n_extents;
  }
  tg_coll_extent_t *e = malloc(total * sizeof(*e));
  uint8_t *raw = NULL;
  if (!e) return -ENOMEM;
  size_t k = 0;
  int err = 0;
  if (ix->head_bytes) e[k++] = (tg_coll_extent_t){0, ix->head_bytes};
  for (size_t i = 0; i < n && !err; i++) {
    const tg_coll_index_host_t *h = &ix->hosts[hosts[i]];
    size_t len = (size_t)h->n_extents * TG_COLL_INDEX_EXTENT;
    if (!len) continue;
    uint8_t *r = realloc(raw, len);
    if (!r) {
      err = -ENOMEM;
      break;
    }
    raw = r;
    if (!(err = pread_all(fd, raw, len, h->extents_at)))
      err = tg_coll_index_host_extents(ix, hosts[i], raw, len, e + k);
    k += h->n_extents;
  }
  free(raw);
  if (err) {
    free(e);
    return err;
  }
  /* Hosts' extents never overlap one another (each byte is one host's):
   * sorted, they are the file's order; touching ones join. */
  qsort(e, k, sizeof(*e), by_offset);
  size_t m = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < k; i++) {
    if (m && e[m - 1].off + e[m - 1].len > e[i].off) {
      free(e);
      return TG_EPARSE; /* two hosts claim the same bytes */
    }
    if (m && e[m - 1].off + e[m - 1].len == e[i].off)
      e[m - 1].len += e[i].len;
    else
      e[m++] = e[i];
    sum += e[i].len;
  }
  *out = e;
  *n_out = m;
  *bytes = sum;
  return 0;
}
