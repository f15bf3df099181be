/* perf ring records: see perf_record.h. */
#include "agent/perf/perf_record.h"

#include <errno.h>
#include <string.h>

/* A cursor over one record's bytes: every read checks what is left. */
typedef struct cur {
  const uint8_t *p, *end;
  bool bad;
} cur_t;

static uint64_t get64(cur_t *c) {
  uint64_t v = 0;
  if (c->bad || (size_t)(c->end - c->p) < 8) {
    c->bad = true;
    return 0;
  }
  memcpy(&v, c->p, 8);
  c->p += 8;
  return v;
}

static uint32_t get32(cur_t *c) {
  uint32_t v = 0;
  if (c->bad || (size_t)(c->end - c->p) < 4) {
    c->bad = true;
    return 0;
  }
  memcpy(&v, c->p, 4);
  c->p += 4;
  return v;
}

/* The size of the sample_id trailer for |sample_type|. */
static size_t id_size(uint64_t sample_type) {
  size_t n = 0;
  if (sample_type & TG_PERF_SAMPLE_TID) n += 8;
  if (sample_type & TG_PERF_SAMPLE_TIME) n += 8;
  if (sample_type & TG_PERF_SAMPLE_CPU) n += 8;
  return n;
}

/* Reads the trailer at the end of the record and shortens |c| to the
 * record's own fields. */
static void read_id(cur_t *c, uint64_t sample_type, tg_perf_record_t *out) {
  size_t n = id_size(sample_type);
  if (c->bad || (size_t)(c->end - c->p) < n) {
    c->bad = true;
    return;
  }
  cur_t t = {c->end - n, c->end, false};
  if (sample_type & TG_PERF_SAMPLE_TID) {
    out->id.pid = get32(&t);
    out->id.tid = get32(&t);
  }
  if (sample_type & TG_PERF_SAMPLE_TIME) out->id.time = get64(&t);
  if (sample_type & TG_PERF_SAMPLE_CPU) {
    out->id.cpu = get32(&t);
    (void)get32(&t);
  }
  out->has_id = true;
  c->end -= n;
}

/* A NUL-padded string that takes the rest of the record: its length is up
 * to the first NUL, or the whole rest. */
static const char *rest_string(cur_t *c, size_t *len) {
  if (c->bad) return NULL;
  size_t n = (size_t)(c->end - c->p);
  const uint8_t *nul = memchr(c->p, 0, n);
  *len = nul ? (size_t)(nul - c->p) : n;
  const char *s = (const char *)c->p;
  c->p = c->end;
  return s;
}

static void parse_sample(cur_t *c, const tg_perf_layout_t *lay,
                         tg_perf_record_t *out) {
  uint64_t st = lay->sample_type;
  if (st & TG_PERF_SAMPLE_IP) out->u.sample.ip = get64(c);
  if (st & TG_PERF_SAMPLE_TID) {
    out->u.sample.pid = get32(c);
    out->u.sample.tid = get32(c);
  }
  if (st & TG_PERF_SAMPLE_TIME) out->u.sample.time = get64(c);
  if (st & TG_PERF_SAMPLE_CPU) {
    out->u.sample.cpu = get32(c);
    (void)get32(c);
  }
  if (st & TG_PERF_SAMPLE_PERIOD) out->u.sample.period = get64(c);
  if ((st & TG_PERF_SAMPLE_READ) && lay->read_group) {
    uint64_t nr = get64(c);
    if (c->bad || nr > (uint64_t)(c->end - c->p) / 8) {
      c->bad = true;
      return;
    }
    out->u.sample.read_nr = nr;
    out->u.sample.read_values = c->p;
    if (nr) memcpy(&out->u.sample.read_value, c->p, 8);
    c->p += nr * 8;
  } else if (st & TG_PERF_SAMPLE_READ) {
    out->u.sample.read_value = get64(c);
  }
  if (st & TG_PERF_SAMPLE_CALLCHAIN) {
    uint64_t nr = get64(c);
    if (c->bad || nr > (uint64_t)(c->end - c->p) / 8) {
      c->bad = true;
      return;
    }
    out->u.sample.nr = nr;
    out->u.sample.ips = c->p;
    c->p += nr * 8;
  }
  if (st & TG_PERF_SAMPLE_REGS_USER) {
    out->u.sample.regs_abi = get64(c);
    if (!c->bad && out->u.sample.regs_abi) {
      size_t n = lay->n_user_regs;
      if (n > TG_PERF_MAX_USER_REGS || n > (size_t)(c->end - c->p) / 8) {
        c->bad = true;
        return;
      }
      out->u.sample.regs = c->p;
      out->u.sample.n_regs = (uint32_t)n;
      c->p += n * 8;
    }
  }
  if (st & TG_PERF_SAMPLE_STACK_USER) {
    uint64_t size = get64(c);
    if (c->bad || size > (uint64_t)(c->end - c->p)) {
      c->bad = true;
      return;
    }
    out->u.sample.stack_size = size;
    out->u.sample.stack = c->p;
    c->p += size;
    if (size) {
      uint64_t dyn = get64(c);
      /* The kernel never copies more than it reserved. */
      out->u.sample.stack_dyn_size = dyn < size ? dyn : size;
    }
  }
}

int tg_perf_record_parse(const uint8_t *p, size_t len,
                         const tg_perf_layout_t *lay, tg_perf_record_t *out) {
  memset(out, 0, sizeof(*out));
  uint64_t sample_type = lay->sample_type;
  bool sample_id_all = lay->sample_id_all;
  if (sample_type & ~(uint64_t)TG_PERF_SAMPLE_KNOWN) return -ENOTSUP;
  if (!p || len < TG_PERF_HEADER_SIZE) return -EBADMSG;
  cur_t c = {p, p + len, false};
  out->type = get32(&c);
  memcpy(&out->misc, c.p, 2);
  memcpy(&out->size, c.p + 2, 2);
  c.p += 4;
  if (out->size != len) return -EBADMSG;
  bool trailer = sample_id_all && out->type != TG_PERF_RECORD_SAMPLE;
  switch (out->type) {
    case TG_PERF_RECORD_SAMPLE:
      parse_sample(&c, lay, out);
      break;
    case TG_PERF_RECORD_LOST:
      if (trailer) read_id(&c, sample_type, out);
      out->u.lost.id = get64(&c);
      out->u.lost.lost = get64(&c);
      break;
    case TG_PERF_RECORD_THROTTLE:
    case TG_PERF_RECORD_UNTHROTTLE:
      if (trailer) read_id(&c, sample_type, out);
      out->u.throttle.time = get64(&c);
      out->u.throttle.id = get64(&c);
      out->u.throttle.stream_id = get64(&c);
      break;
    case TG_PERF_RECORD_COMM:
      if (trailer) read_id(&c, sample_type, out);
      out->u.comm.pid = get32(&c);
      out->u.comm.tid = get32(&c);
      out->u.comm.comm = rest_string(&c, &out->u.comm.comm_len);
      break;
    case TG_PERF_RECORD_MMAP2: {
      if (trailer) read_id(&c, sample_type, out);
      out->u.mmap2.pid = get32(&c);
      out->u.mmap2.tid = get32(&c);
      out->u.mmap2.addr = get64(&c);
      out->u.mmap2.len = get64(&c);
      out->u.mmap2.pgoff = get64(&c);
      if (out->misc & TG_PERF_MISC_MMAP_BUILD_ID) {
        /* u8 size, u8 and u16 reserved, 20 bytes of id: the place of
         * maj, min, ino and ino_generation. */
        if (c.bad || (size_t)(c.end - c.p) < 24) {
          c.bad = true;
          break;
        }
        out->u.mmap2.build_id_size = c.p[0];
        if (out->u.mmap2.build_id_size > TG_PERF_MAX_BUILD_ID) {
          c.bad = true;
          break;
        }
        out->u.mmap2.build_id = c.p + 4;
        c.p += 24;
      } else {
        out->u.mmap2.maj = get32(&c);
        out->u.mmap2.min = get32(&c);
        out->u.mmap2.ino = get64(&c);
        out->u.mmap2.ino_generation = get64(&c);
      }
      out->u.mmap2.prot = get32(&c);
      out->u.mmap2.flags = get32(&c);
      out->u.mmap2.filename = rest_string(&c, &out->u.mmap2.filename_len);
      break;
    }
    default:
      return 0;
  }
  if (c.bad) {
    memset(&out->u, 0, sizeof(out->u));
    return -EBADMSG;
  }
  return 0;
}

uint64_t tg_perf_callchain_at(const tg_perf_record_t *r, size_t i) {
  uint64_t v = 0;
  if (i < r->u.sample.nr) memcpy(&v, r->u.sample.ips + i * 8, 8);
  return v;
}

uint64_t tg_perf_read_value_at(const tg_perf_record_t *r, size_t i) {
  uint64_t v = 0;
  if (i < r->u.sample.read_nr) memcpy(&v, r->u.sample.read_values + i * 8, 8);
  return v;
}

int tg_perf_group_read_parse(const uint8_t *buf, size_t len, uint64_t *values,
                             size_t cap, size_t *n) {
  *n = 0;
  uint64_t nr;
  if (!buf || len < 8) return -EBADMSG;
  memcpy(&nr, buf, 8);
  if (nr > (len - 8) / 8) return -EBADMSG;
  size_t m = nr < cap ? (size_t)nr : cap;
  if (m) memcpy(values, buf + 8, m * 8);
  *n = m;
  return 0;
}

uint64_t tg_perf_user_reg_at(const tg_perf_record_t *r, size_t i) {
  uint64_t v = 0;
  if (i < r->u.sample.n_regs) memcpy(&v, r->u.sample.regs + i * 8, 8);
  return v;
}

/* Copies |n| bytes at ring offset |off| (wrapping) into |dst|. */
static void ring_copy(const tg_perf_ring_view_t *v, uint64_t off, void *dst,
                      size_t n) {
  uint64_t at = off & (v->size - 1);
  size_t first = (size_t)(v->size - at) < n ? (size_t)(v->size - at) : n;
  memcpy(dst, v->data + at, first);
  if (first < n) memcpy((uint8_t *)dst + first, v->data, n - first);
}

int tg_perf_ring_next(const tg_perf_ring_view_t *v, uint64_t *tail,
                      uint8_t *scratch, size_t cap, const uint8_t **rec,
                      size_t *rec_len) {
  if (!v->size || (v->size & (v->size - 1)) || cap < 65536) return -EINVAL;
  uint64_t avail = v->head - *tail;
  if (!avail) return 0;
  if (avail > v->size || avail < TG_PERF_HEADER_SIZE) {
    *tail = v->head;
    return -EBADMSG;
  }
  uint8_t hdr[TG_PERF_HEADER_SIZE];
  ring_copy(v, *tail, hdr, sizeof(hdr));
  uint16_t size;
  memcpy(&size, hdr + 6, 2);
  if (size < TG_PERF_HEADER_SIZE || size > avail) {
    *tail = v->head;
    return -EBADMSG;
  }
  uint64_t at = *tail & (v->size - 1);
  if (at + size <= v->size) {
    *rec = v->data + at;
  } else {
    ring_copy(v, *tail, scratch, size);
    *rec = scratch;
  }
  *rec_len = size;
  *tail += size;
  return 1;
}
