/* The filter bytecode, parsed once into a lookup table: see trace_filter.h.
 * Everything here reads untrusted words: every index is checked, and a
 * bytecode that fails any check leaves no table behind. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/trace_filter.h"

enum {
  OP_END_OF_MESSAGE = 0,
  OP_SIMPLE_FIELD = 1,
  OP_SIMPLE_FIELD_RANGE = 2,
  OP_NESTED_FIELD = 3,
  OP_FILTER_STRING = 4,
  OP_MASK = 7,
  OP_SHIFT = 3,
};

void tg__trace_filter_say(char *why, size_t n, const char *fmt, ...) {
  if (!why || !n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
}

/* A growable array of words. */
typedef struct wvec {
  uint32_t *v;
  size_t n, cap;
} wvec_t;

static int wvec_reserve(wvec_t *w, size_t n) {
  if (n <= w->cap) return 0;
  size_t cap = w->cap ? w->cap : 64;
  while (cap < n) cap *= 2;
  uint32_t *v = realloc(w->v, cap * sizeof(*v));
  if (!v) return -ENOMEM;
  w->v = v;
  w->cap = cap;
  return 0;
}

static int wvec_push(wvec_t *w, uint32_t x) {
  if (wvec_reserve(w, w->n + 1) < 0) return -ENOMEM;
  w->v[w->n++] = x;
  return 0;
}

/* FNV-1a 64 over a word's 4 little-endian bytes, as Perfetto's hasher
 * updates with a uint32_t on the little-endian hosts it runs on. */
static uint64_t fnv_word(uint64_t h, uint32_t w) {
  for (int i = 0; i < 4; i++) {
    h ^= (uint8_t)(w >> (8 * i));
    h *= 1099511628211ull;
  }
  return h;
}

/* Unpacks the varints of |p| into |out| and checks the final checksum
 * word, which is not kept. Varints wider than 32 bits keep their low 32
 * (as Perfetto's packed uint32 iterator). -EINVAL, -ENOMEM. */
static int unpack_words(const uint8_t *p, size_t len, wvec_t *out,
                        const char *what, char *why, size_t why_len) {
  const uint8_t *end = p + len;
  uint64_t h = 14695981039346656037ull;
  bool have_prev = false;
  uint32_t prev = 0;
  if (len == 0) {
    tg__trace_filter_say(why, why_len, "%s: empty", what);
    return -EINVAL;
  }
  while (p < end) {
    uint64_t v = 0;
    unsigned shift = 0;
    bool done = false;
    while (p < end && shift < 64) {
      uint8_t b = *p++;
      v |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) {
        done = true;
        break;
      }
    }
    if (!done) {
      tg__trace_filter_say(why, why_len, "%s: a varint is cut or longer than 10 bytes", what);
      return -EINVAL;
    }
    if (have_prev) {
      if (wvec_push(out, prev) < 0) return -ENOMEM;
      h = fnv_word(h, prev);
    }
    prev = (uint32_t)v;
    have_prev = true;
  }
  if ((uint32_t)h != prev) {
    tg__trace_filter_say(why, why_len, "%s: checksum mismatch (expected %x, found %x)", what,
        (uint32_t)h, prev);
    return -EINVAL;
  }
  return 0;
}

/* One overlay entry: a field of message |msg| added or upgraded to
 * |state| (TG_FILTER_SIMPLE or TG_FILTER_STRING). */
typedef struct overlay_entry {
  uint32_t msg, field, state;
} overlay_entry_t;

typedef struct builder {
  wvec_t direct; /* state words of the open message, ids < 128 */
  wvec_t ranges; /* [start, end, state] of the open message */
  const overlay_entry_t *ov;
  size_t n_ov, ov_at;
  uint32_t msg; /* index of the open message */
} builder_t;

static int add_field(builder_t *b, uint32_t id, uint32_t state) {
  if (id < TG_FILTER_DIRECT_LIMIT) {
    if (wvec_reserve(&b->direct, (size_t)id + 1) < 0) return -ENOMEM;
    while (b->direct.n <= id) b->direct.v[b->direct.n++] = 0;
    b->direct.v[id] = TG_FILTER_ALLOWED | state;
    return 0;
  }
  /* A large id alone costs a range of one: rare enough. */
  if (wvec_push(&b->ranges, id) < 0 || wvec_push(&b->ranges, id + 1) < 0 ||
      wvec_push(&b->ranges, TG_FILTER_ALLOWED | state) < 0)
    return -ENOMEM;
  return 0;
}

/* Adds the overlay's fields of the open message that come before |id|;
 * returns in |*upgrade| the overlay's state for |id| itself (0: none).
 * Both inputs are sorted, so this is a merge. */
static int merge_overlay(builder_t *b, uint32_t id, uint32_t *upgrade) {
  *upgrade = 0;
  while (b->ov_at < b->n_ov) {
    const overlay_entry_t *e = &b->ov[b->ov_at];
    if (e->msg > b->msg || (e->msg == b->msg && e->field > id)) break;
    b->ov_at++;
    if (e->msg < b->msg) continue; /* cannot happen: messages come in order */
    if (e->field == id) {
      *upgrade = e->state;
      return 0;
    }
    if (add_field(b, e->field, e->state) < 0) return -ENOMEM;
  }
  return 0;
}

static int parse_overlay(const uint32_t *w, size_t n, overlay_entry_t **out,
                         size_t *n_out, char *why, size_t why_len) {
  *out = NULL;
  *n_out = 0;
  if (n % 3) {
    tg__trace_filter_say(why, why_len, "overlay: %zu words, not a multiple of 3", n);
    return -EINVAL;
  }
  overlay_entry_t *e = calloc(n / 3 + 1, sizeof(*e));
  if (!e) return -ENOMEM;
  for (size_t i = 0; i < n / 3; i++) {
    uint32_t op = w[3 * i + 1] & OP_MASK;
    e[i].msg = w[3 * i];
    e[i].field = w[3 * i + 1] >> OP_SHIFT;
    e[i].state = op == OP_SIMPLE_FIELD   ? TG_FILTER_SIMPLE
                 : op == OP_FILTER_STRING ? TG_FILTER_STRING
                                          : 0;
    if (!e[i].state) {
      tg__trace_filter_say(why, why_len, "overlay: entry %zu has opcode %u (only 1 and 4)", i,
          op);
      free(e);
      return -EINVAL;
    }
    if (i > 0 && (e[i].msg < e[i - 1].msg ||
                  (e[i].msg == e[i - 1].msg && e[i].field <= e[i - 1].field))) {
      tg__trace_filter_say(why, why_len, "overlay: entry %zu (message %u, field %u) is not "
          "after (message %u, field %u)", i, e[i].msg, e[i].field,
          e[i - 1].msg, e[i - 1].field);
      free(e);
      return -EINVAL;
    }
  }
  *out = e;
  *n_out = n / 3;
  return 0;
}

/* Closes the open message: its ranges must not overlap; its words go to
 * the table. */
static int end_message(builder_t *b, wvec_t *table, wvec_t *offsets,
                       char *why, size_t why_len) {
  uint32_t none;
  if (merge_overlay(b, UINT32_MAX, &none) < 0) return -ENOMEM;
  const uint32_t *r = b->ranges.v;
  for (size_t i = 3; i < b->ranges.n; i += 3) {
    if (r[i] < r[i - 2]) {
      tg__trace_filter_say(why, why_len, "message %u: range [%u, ...) overlaps [%u, %u)",
          b->msg, r[i], r[i - 3], r[i - 2]);
      return -EINVAL;
    }
  }
  if (wvec_push(offsets, (uint32_t)table->n) < 0 ||
      wvec_reserve(table, table->n + 1 + b->direct.n + b->ranges.n) < 0)
    return -ENOMEM;
  table->v[table->n++] = (uint32_t)b->direct.n;
  if (b->direct.n) memcpy(table->v + table->n, b->direct.v, b->direct.n * 4);
  table->n += b->direct.n;
  if (b->ranges.n) memcpy(table->v + table->n, b->ranges.v, b->ranges.n * 4);
  table->n += b->ranges.n;
  b->direct.n = 0;
  b->ranges.n = 0;
  b->msg++;
  return 0;
}

static int build(const wvec_t *code, builder_t *b, wvec_t *table,
                 wvec_t *offsets, char *why, size_t why_len) {
  const uint32_t *w = code->v;
  size_t n = code->n;
  uint32_t max_index = 0;
  bool at_eom = true;
  for (size_t i = 0; i < n; i++) {
    uint32_t op = w[i] & OP_MASK, id = w[i] >> OP_SHIFT;
    at_eom = op == OP_END_OF_MESSAGE;
    if (id == 0 && op != OP_END_OF_MESSAGE) {
      tg__trace_filter_say(why, why_len, "word %zu: field id 0", i);
      return -EINVAL;
    }
    int rv = 0;
    switch (op) {
      case OP_SIMPLE_FIELD:
      case OP_FILTER_STRING:
      case OP_NESTED_FIELD: {
        uint32_t state = op == OP_SIMPLE_FIELD   ? TG_FILTER_SIMPLE
                         : op == OP_FILTER_STRING ? TG_FILTER_STRING
                                                  : 0;
        if (op == OP_NESTED_FIELD) {
          if (i + 1 >= n) {
            tg__trace_filter_say(why, why_len, "word %zu: nested field without its message", i);
            return -EINVAL;
          }
          state = w[++i];
          if (state > max_index) max_index = state;
        }
        uint32_t up;
        if (merge_overlay(b, id, &up) < 0) return -ENOMEM;
        rv = add_field(b, id, up ? up : state);
        break;
      }
      case OP_SIMPLE_FIELD_RANGE: {
        if (i + 1 >= n) {
          tg__trace_filter_say(why, why_len, "word %zu: range without its length", i);
          return -EINVAL;
        }
        /* 32-bit arithmetic, as the format's: an end that wraps makes an
         * empty range. */
        uint32_t end = id + w[++i], f = id;
        for (; f < end && f < TG_FILTER_DIRECT_LIMIT && rv == 0; f++)
          rv = add_field(b, f, TG_FILTER_SIMPLE);
        if (rv == 0 && f < end) {
          if (wvec_push(&b->ranges, f) < 0 || wvec_push(&b->ranges, end) < 0 ||
              wvec_push(&b->ranges, TG_FILTER_ALLOWED | TG_FILTER_SIMPLE) < 0)
            rv = -ENOMEM;
        }
        break;
      }
      case OP_END_OF_MESSAGE:
        rv = end_message(b, table, offsets, why, why_len);
        break;
      default:
        tg__trace_filter_say(why, why_len, "word %zu: unknown opcode %u", i, op);
        return -EINVAL;
    }
    if (rv < 0) return rv;
  }
  if (!at_eom) {
    tg__trace_filter_say(why, why_len, "the last message is not closed (END_OF_MESSAGE)");
    return -EINVAL;
  }
  if (max_index > 0 && max_index >= offsets->n) {
    tg__trace_filter_say(why, why_len, "a nested field names message %u of %zu", max_index,
        offsets->n);
    return -EINVAL;
  }
  return wvec_push(offsets, (uint32_t)table->n);
}

int tg_filter_bytecode_load(tg_filter_bytecode_t *bc,
                            const uint8_t *code_untrusted, size_t len,
                            const uint8_t *overlay_untrusted,
                            size_t overlay_len, char *why, size_t why_len) {
  memset(bc, 0, sizeof(*bc));
  wvec_t code = {0}, ovw = {0}, table = {0}, offsets = {0};
  builder_t b = {0};
  overlay_entry_t *ov = NULL;
  int rv = unpack_words(code_untrusted, len, &code, "bytecode", why, why_len);
  if (rv == 0 && overlay_untrusted && overlay_len > 0) {
    rv = unpack_words(overlay_untrusted, overlay_len, &ovw, "overlay", why,
                      why_len);
    if (rv == 0) rv = parse_overlay(ovw.v, ovw.n, &ov, &b.n_ov, why, why_len);
  }
  b.ov = ov;
  if (rv == 0) rv = build(&code, &b, &table, &offsets, why, why_len);
  if (rv == -ENOMEM) tg__trace_filter_say(why, why_len, "out of memory");
  if (rv == 0) {
    bc->words = table.v;
    bc->n_words = table.n;
    bc->msg_offset = offsets.v;
    bc->n_messages = offsets.n - 1;
  } else {
    free(table.v);
    free(offsets.v);
  }
  free(code.v);
  free(ovw.v);
  free(ov);
  free(b.direct.v);
  free(b.ranges.v);
  return rv;
}

void tg_filter_bytecode_free(tg_filter_bytecode_t *bc) {
  free(bc->words);
  free(bc->msg_offset);
  memset(bc, 0, sizeof(*bc));
}

uint32_t tg_filter_bytecode_query(const tg_filter_bytecode_t *bc,
                                  uint32_t msg_index, uint32_t field_id) {
  if (msg_index >= bc->n_messages) return 0;
  /* Offsets were written by the loader: [start, end) lies in |words|. */
  const uint32_t *w = bc->words + bc->msg_offset[msg_index];
  const uint32_t *end = bc->words + bc->msg_offset[msg_index + 1];
  uint32_t n_direct = *w++;
  if (field_id < n_direct) return w[field_id];
  for (w += n_direct; w + 2 < end; w += 3)
    if (field_id >= w[0] && field_id < w[1]) return w[2];
  return 0;
}
