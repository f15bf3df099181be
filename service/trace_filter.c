/* The message filter: one packet in (as slices), its allowed fields out;
 * see trace_filter.h for the output's exact form.
 *
 * A byte-driven state machine, so that slices may cut anything anywhere:
 * a tokenizer turns bytes into fields (tag, then value or length), and a
 * stack of open messages counts each message's bytes until its length is
 * used up, then fills in its length in the output. Bytes of a string or
 * of a dropped field are taken a run at a time. Nothing is allocated per
 * packet: the output buffer grows to the largest packet seen and stays.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/trace_filter.h"

/* Longer length-delimited fields are malformed, as for Perfetto's
 * tokenizer; it also keeps every length within 32 bits. */
#define MAX_FIELD_LEN (256u << 20)

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

typedef enum tok_state {
  TOK_TAG,     /* reading a tag */
  TOK_VARINT,  /* reading a varint field's value */
  TOK_FIXED,   /* reading a fixed32/64 value */
  TOK_LEN,     /* reading a length-delimited field's length */
} tok_state_t;

typedef enum eat_action { EAT_DROP, EAT_PASS, EAT_STRING } eat_action_t;

/* One open message. Offsets are into the output buffer. */
typedef struct level {
  uint32_t in_bytes;   /* input bytes of this message seen */
  uint32_t in_limit;   /* its length: popped when in_bytes reaches it */
  uint32_t eat;        /* bytes of a string/bytes/dropped field still due */
  uint32_t msg_index;  /* its message in the bytecode */
  uint32_t out_start;  /* output length when it opened */
  uint32_t size_at;    /* where its length goes in the output */
  uint32_t string_at;  /* where the string being eaten starts */
  uint8_t size_len;    /* bytes its length takes (0: the root) */
  uint8_t action;      /* eat_action_t of the field being eaten */
} level_t;

struct tg_trace_filter {
  tg_filter_bytecode_t bc;
  tg_string_filter_t *sf;
  uint32_t root;
  uint8_t *out;
  size_t cap;
  /* [0] is a sentinel under the root, which is [1]. */
  level_t stack[TG_TRACE_FILTER_MAX_DEPTH + 1];
  /* Tokenizer. */
  tok_state_t tok;
  uint32_t field_id;
  uint64_t varint;
  unsigned shift;
  unsigned fixed_bits;
};

int tg_trace_filter_new(tg_trace_filter_t **out, tg_filter_bytecode_t *bc,
                        tg_string_filter_t *sf, const uint32_t *root,
                        size_t n_root, char *why, size_t why_len) {
  *out = NULL;
  uint32_t msg = 0;
  for (size_t i = 0; i < n_root; i++) {
    uint32_t q = tg_filter_bytecode_query(bc, msg, root[i]);
    uint32_t idx = q & ~TG_FILTER_ALLOWED;
    if (!(q & TG_FILTER_ALLOWED) || idx >= TG_FILTER_STRING) {
      tg__trace_filter_say(why, why_len, "the filter's root: field %u of message %u is not an "
          "allowed nested message (TracePacket must be Trace's field 1)",
          root[i], msg);
      tg_filter_bytecode_free(bc);
      tg_string_filter_free(sf);
      return -EINVAL;
    }
    msg = idx;
  }
  tg_trace_filter_t *f = calloc(1, sizeof(*f));
  if (!f) {
    tg__trace_filter_say(why, why_len, "out of memory");
    tg_filter_bytecode_free(bc);
    tg_string_filter_free(sf);
    return -ENOMEM;
  }
  f->bc = *bc;
  memset(bc, 0, sizeof(*bc));
  f->sf = sf;
  f->root = msg;
  *out = f;
  return 0;
}

tg_trace_filter_t *tg_trace_filter_dup(const tg_trace_filter_t *src) {
  tg_trace_filter_t *f = calloc(1, sizeof(*f));
  if (!f) return NULL;
  f->root = src->root;
  f->bc.n_words = src->bc.n_words;
  f->bc.n_messages = src->bc.n_messages;
  f->bc.words = malloc((src->bc.n_words + 1) * sizeof(uint32_t));
  f->bc.msg_offset = malloc((src->bc.n_messages + 1) * sizeof(uint32_t));
  f->sf = src->sf ? tg_string_filter_dup(src->sf) : NULL;
  if (!f->bc.words || !f->bc.msg_offset || (src->sf && !f->sf)) {
    tg_trace_filter_free(f);
    return NULL;
  }
  memcpy(f->bc.words, src->bc.words, src->bc.n_words * sizeof(uint32_t));
  memcpy(f->bc.msg_offset, src->bc.msg_offset,
         (src->bc.n_messages + 1) * sizeof(uint32_t));
  return f;
}

void tg_trace_filter_free(tg_trace_filter_t *f) {
  if (!f) return;
  tg_filter_bytecode_free(&f->bc);
  tg_string_filter_free(f->sf);
  free(f->out);
  free(f);
}

/* --- output ------------------------------------------------------------------ */

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* A tag as Perfetto's writer makes it: the shift is 32-bit. */
static uint8_t *put_tag(uint8_t *p, uint32_t id, unsigned wt) {
  return put_varint(p, (uint32_t)(id << 3) | wt);
}

/* |v| in exactly |n| bytes (n >= 1), padded with continuation bits. */
static void put_varint_width(uint8_t *p, uint32_t v, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    p[i] = (uint8_t)((v & 0x7f) | (i + 1 < n ? 0x80 : 0));
    v >>= 7;
  }
}

/* --- the state machine ------------------------------------------------------- */

typedef struct run {
  tg_trace_filter_t *f;
  uint8_t *o;        /* output cursor */
  uint8_t *o_end;    /* the output can not grow past the input: a guard */
  unsigned depth;    /* index of the open message in f->stack */
} run_t;

static uint32_t out_len(const run_t *r) { return (uint32_t)(r->o - r->f->out); }

/* Counts |n| input bytes into the open message and closes every message
 * they complete. -EINVAL when one closes in the middle of a field. */
static int account(run_t *r, uint32_t n) {
  tg_trace_filter_t *f = r->f;
  level_t *top = &f->stack[r->depth];
  top->in_bytes += n;
  while (top->in_bytes >= top->in_limit) {
    if (top->size_len)
      put_varint_width(f->out + top->size_at, out_len(r) - top->out_start,
                       top->size_len);
    uint32_t used = top->in_bytes;
    top = &f->stack[--r->depth];
    top->in_bytes += used;
    if (f->tok != TOK_TAG || f->shift != 0) return -EINVAL;
  }
  return 0;
}

/* A whole field was read: |v| is its value, or its length for WT_LEN. */
static int on_field(run_t *r, unsigned wt, uint64_t v) {
  tg_trace_filter_t *f = r->f;
  level_t *top = &f->stack[r->depth];
  uint32_t id = f->field_id;
  uint32_t q = tg_filter_bytecode_query(&f->bc, top->msg_index, id);
  uint32_t idx = q & ~TG_FILTER_ALLOWED;
  bool allowed = (q & TG_FILTER_ALLOWED) != 0;
  /* Tag + the longest value: never more than the input it came from, but
   * the guard keeps a broken invariant from writing out of bounds. */
  if (r->o_end - r->o < 16) return -EINVAL;
  if (wt != WT_LEN) {
    if (!allowed || idx != TG_FILTER_SIMPLE) return 0;
    r->o = put_tag(r->o, id, wt);
    if (wt == WT_VARINT) {
      r->o = put_varint(r->o, v);
    } else {
      unsigned n = wt == WT_FIXED32 ? 4 : 8;
      for (unsigned i = 0; i < n; i++) *r->o++ = (uint8_t)(v >> (8 * i));
    }
    return 0;
  }
  uint32_t len = (uint32_t)v;
  /* The length byte itself is not yet counted in in_bytes. */
  if (len > top->in_limit - top->in_bytes - 1) return -EINVAL;
  if (allowed && idx < TG_FILTER_STRING && len > 0) {
    if (r->depth + 1 > TG_TRACE_FILTER_MAX_DEPTH) return -EINVAL;
    r->o = put_tag(r->o, id, WT_LEN);
    uint8_t *size_at = r->o;
    r->o = put_varint(r->o, len);
    /* Opened once this byte is counted in the parent (run_byte). */
    level_t *l = &f->stack[r->depth + 1];
    *l = (level_t){.in_limit = len,
                   .msg_index = idx,
                   .out_start = out_len(r),
                   .size_at = (uint32_t)(size_at - f->out),
                   .size_len = (uint8_t)(r->o - size_at)};
    return 1;
  }
  top->eat = len;
  top->action = !allowed                  ? EAT_DROP
                : idx == TG_FILTER_STRING ? EAT_STRING
                                          : EAT_PASS;
  if (allowed) {
    r->o = put_tag(r->o, id, WT_LEN);
    r->o = put_varint(r->o, len);
    top->string_at = out_len(r);
  }
  return 0;
}

/* Feeds one byte of a tag, value or length to the tokenizer. Returns 1
 * when a nested message opens after it, 0, or -EINVAL. */
static int tokenize(run_t *r, uint8_t b) {
  tg_trace_filter_t *f = r->f;
  if (f->tok == TOK_FIXED) {
    f->varint |= (uint64_t)b << f->shift;
    f->shift += 8;
    if (f->shift < f->fixed_bits) return 0;
    uint64_t v = f->varint;
    unsigned wt = f->fixed_bits == 32 ? WT_FIXED32 : WT_FIXED64;
    f->varint = 0;
    f->shift = 0;
    f->tok = TOK_TAG;
    return f->field_id ? on_field(r, wt, v) : 0;
  }
  f->varint |= (uint64_t)(b & 0x7f) << f->shift;
  if (b & 0x80) {
    f->shift += 7;
    return f->shift >= 64 ? -EINVAL : 0;
  }
  uint64_t v = f->varint;
  f->varint = 0;
  f->shift = 0;
  switch (f->tok) {
    case TOK_TAG:
      f->field_id = (uint32_t)(v >> 3);
      switch (v & 7) {
        case WT_VARINT: f->tok = TOK_VARINT; return 0;
        case WT_FIXED32: f->tok = TOK_FIXED; f->fixed_bits = 32; return 0;
        case WT_FIXED64: f->tok = TOK_FIXED; f->fixed_bits = 64; return 0;
        case WT_LEN: f->tok = TOK_LEN; return 0;
        default: return -EINVAL;
      }
    case TOK_VARINT:
      f->tok = TOK_TAG;
      return f->field_id ? on_field(r, WT_VARINT, v) : 0;
    case TOK_LEN:
      if (v > MAX_FIELD_LEN) return -EINVAL;
      f->tok = TOK_TAG;
      /* A field id 0 is no field: its payload is read as fields. */
      return f->field_id ? on_field(r, WT_LEN, v) : 0;
    case TOK_FIXED:
      break;
  }
  return -EINVAL;
}

/* A varint of at most 10 bytes at |p| (|n| bytes there): its length, or 0
 * when it is cut or longer (the byte path then decides). */
static size_t read_varint(const uint8_t *p, size_t n, uint64_t *v) {
  uint64_t x = 0;
  for (size_t i = 0; i < n && i < 10; i++) {
    x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = x;
      return i + 1;
    }
  }
  return 0;
}

/* The byte path's steps for one whole field at |p|, when the slice holds
 * it and it ends within the open message: the same calls in the same
 * order, without a tokenizer state per byte. Returns the bytes taken (0:
 * leave it to the byte path, which also finds every malformed form), or
 * -EINVAL. */
static long fast_field(run_t *r, const uint8_t *p, size_t n) {
  tg_trace_filter_t *f = r->f;
  level_t *top = &f->stack[r->depth];
  uint64_t tag, v = 0;
  size_t k = read_varint(p, n, &tag);
  if (!k) return 0;
  unsigned wt = (unsigned)(tag & 7);
  size_t vk;
  switch (wt) {
    case WT_VARINT:
    case WT_LEN:
      vk = read_varint(p + k, n - k, &v);
      if (!vk || (wt == WT_LEN && v > MAX_FIELD_LEN)) return 0;
      break;
    case WT_FIXED32:
    case WT_FIXED64:
      vk = wt == WT_FIXED32 ? 4 : 8;
      if (n - k < vk) return 0;
      for (size_t i = 0; i < vk; i++) v |= (uint64_t)p[k + i] << (8 * i);
      break;
    default:
      return 0;
  }
  size_t used = k + vk;
  if (used > top->in_limit - top->in_bytes) return 0;
  /* All but the last byte: no message can end there. */
  top->in_bytes += (uint32_t)(used - 1);
  f->field_id = (uint32_t)(tag >> 3);
  int opened = f->field_id ? on_field(r, wt, v) : 0;
  if (opened < 0) return opened;
  int rv = account(r, 1);
  if (rv < 0) return rv;
  if (opened) r->depth++;
  return (long)used;
}

/* Consumes the bytes of |p| (|n| of them). */
static int run_slice(run_t *r, const uint8_t *p, size_t n) {
  tg_trace_filter_t *f = r->f;
  while (n > 0) {
    level_t *top = &f->stack[r->depth];
    if (top->eat > 0) {
      uint32_t k = top->eat < n ? top->eat : (uint32_t)n;
      if (top->action != EAT_DROP) {
        memcpy(r->o, p, k);
        r->o += k;
      }
      top->eat -= k;
      if (top->eat == 0 && top->action == EAT_STRING)
        tg_string_filter_apply(f->sf, (char *)f->out + top->string_at,
                               out_len(r) - top->string_at);
      p += k;
      n -= k;
      int rv = account(r, k);
      if (rv < 0) return rv;
      continue;
    }
    if (f->tok == TOK_TAG && f->shift == 0) {
      long used = fast_field(r, p, n);
      if (used < 0) return (int)used;
      if (used > 0) {
        p += used;
        n -= (size_t)used;
        continue;
      }
    }
    int opened = tokenize(r, *p++);
    n--;
    if (opened < 0) return opened;
    int rv = account(r, 1);
    if (rv < 0) return rv;
    if (opened) r->depth++;
  }
  return 0;
}

long tg_trace_filter_run(tg_trace_filter_t *f, const uint8_t *const *slices,
                         const size_t *lens, unsigned n, const uint8_t **out) {
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += lens[i];
  *out = NULL;
  if (total == 0 || total > MAX_FIELD_LEN) return -EINVAL;
  /* Room for the whole input plus the guard's slack of on_field. */
  if (f->cap < total + 16) {
    size_t cap = f->cap ? f->cap : 4096;
    while (cap < total + 16) cap *= 2;
    uint8_t *b = realloc(f->out, cap);
    if (!b) return -ENOMEM;
    f->out = b;
    f->cap = cap;
  }
  f->tok = TOK_TAG;
  f->varint = 0;
  f->shift = 0;
  f->field_id = 0;
  f->stack[0] = (level_t){.in_limit = UINT32_MAX, .eat = UINT32_MAX};
  f->stack[1] = (level_t){.in_limit = (uint32_t)total, .msg_index = f->root};
  run_t r = {f, f->out, f->out + total + 16, 1};
  for (unsigned i = 0; i < n; i++) {
    int rv = run_slice(&r, slices[i], lens[i]);
    if (rv < 0) return rv;
  }
  /* Every message closed exactly at its end, no field left half read. */
  if (r.depth != 0 || f->tok != TOK_TAG || f->shift != 0 ||
      f->stack[0].in_bytes != total)
    return -EINVAL;
  *out = f->out;
  return (long)out_len(&r);
}
