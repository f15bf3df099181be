/* Protobuf text format parser: a lexer over the caller's bytes and a
 * recursive descent that asks the protobuf-c descriptors what each name is.
 *
 * Encoded bytes go straight into the output buffer in text order. A length
 * prefix precedes content not parsed yet, so len_begin() reserves one byte
 * and len_end() widens it when the content turns out longer.
 *
 * The text is untrusted: the lexer never reads past |len|, recursion is
 * bounded by TG_PBTXT_MAX_DEPTH, and every failure is an error naming a line
 * and column, never an assert.
 */
#include "consumer/pbtxt.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracegate/pb_wire.h"
#include "tracegate/error.h"

enum tok_kind { TOK_EOF, TOK_IDENT, TOK_NUMBER, TOK_STRING, TOK_SYMBOL };

typedef struct tok {
  enum tok_kind kind;
  size_t pos; /* first byte */
  size_t len; /* strings include their quotes */
} tok_t;

typedef struct parser {
  const char *text;
  size_t len;
  size_t next; /* where the lexer resumes, just after |tok| */
  tok_t tok;   /* the current token */
  tg_buf_t *out;
  tg_pbtxt_error_t *err;
} parser_t;

/* --- errors -------------------------------------------------------------- */

static void locate(const parser_t *p, size_t at, unsigned *line,
                   unsigned *col) {
  unsigned l = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < at && i < p->len; i++) {
    if (p->text[i] == '\n') {
      l++;
      line_start = i + 1;
    }
  }
  *line = l;
  *col = (unsigned)(at - line_start + 1);
}

/* Fills the caller's error with the place of |at| and returns TG_EPARSE. */
__attribute__((format(printf, 3, 4))) static int fail(parser_t *p, size_t at,
                                                      const char *fmt, ...) {
  tg_pbtxt_error_t *e = p->err;
  if (!e) return TG_EPARSE;
  locate(p, at, &e->line, &e->column);
  int n = snprintf(e->msg, sizeof(e->msg), "line %u, column %u: ", e->line,
                   e->column);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg + n, sizeof(e->msg) - (size_t)n, fmt, ap);
  va_end(ap);
  return TG_EPARSE;
}

/* How the current token reads in an error message. */
static const char *describe(const parser_t *p, char *buf, size_t n) {
  const tok_t *t = &p->tok;
  int shown = t->len > 40 ? 40 : (int)t->len;
  switch (t->kind) {
    case TOK_EOF:
      return "end of input";
    case TOK_STRING:
      return "a string";
    case TOK_NUMBER:
      snprintf(buf, n, "number %.*s", shown, p->text + t->pos);
      return buf;
    case TOK_IDENT:
    case TOK_SYMBOL:
      snprintf(buf, n, "'%.*s'", shown, p->text + t->pos);
      return buf;
  }
  return "?";
}

static const char *type_name(const ProtobufCFieldDescriptor *f) {
  /* In ProtobufCType order, which is part of protobuf-c's ABI. */
  static const char *const names[] = {
      "int32",  "sint32",  "sfixed32", "int64",   "sint64", "sfixed64",
      "uint32", "fixed32", "uint64",   "fixed64", "float",  "double",
      "bool",   "enum",    "string",   "bytes"};
  _Static_assert(PROTOBUF_C_TYPE_BYTES == 15, "ProtobufCType changed");
  if (f->type == PROTOBUF_C_TYPE_ENUM)
    return ((const ProtobufCEnumDescriptor *)f->descriptor)->name;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    return ((const ProtobufCMessageDescriptor *)f->descriptor)->name;
  if ((unsigned)f->type < sizeof(names) / sizeof(names[0]))
    return names[f->type];
  return "unsupported type";
}

static int mismatch(parser_t *p, const ProtobufCFieldDescriptor *f,
                    const char *want) {
  char buf[64];
  return fail(p, p->tok.pos, "expected %s for field '%s' (%s), got %s", want,
              f->name, type_name(f), describe(p, buf, sizeof(buf)));
}

/* Levenshtein distance, capped for long names (they get no suggestion). */
static unsigned distance(const char *a, size_t na, const char *b) {
  size_t nb = strlen(b);
  unsigned row[64];
  if (na >= 64 || nb >= 64) return UINT_MAX;
  for (size_t j = 0; j <= nb; j++) row[j] = (unsigned)j;
  for (size_t i = 1; i <= na; i++) {
    unsigned diag = row[0];
    row[0] = (unsigned)i;
    for (size_t j = 1; j <= nb; j++) {
      unsigned up = row[j];
      unsigned best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}

/* The valid names for an unknown-name error: the closest one when the input
 * looks like a typo of it, else as many as fit. */
typedef struct names {
  const char *typed;
  size_t typed_len;
  const char *best;
  unsigned best_dist;
  char list[112];
  size_t used;
} names_t;

static void names_add(names_t *h, const char *name) {
  unsigned d = distance(h->typed, h->typed_len, name);
  if (d < h->best_dist) {
    h->best_dist = d;
    h->best = name;
  }
  size_t room = sizeof(h->list) - h->used;
  if (room <= 5) return; /* already ended with "..." */
  int n = snprintf(h->list + h->used, room, "%s%s", h->used ? ", " : "", name);
  if (n > 0 && (size_t)n < room - 5) {
    h->used += (size_t)n;
  } else {
    snprintf(h->list + h->used, room, "%s...", h->used ? ", " : "");
    h->used = sizeof(h->list);
  }
}

static const char *names_hint(const names_t *h, char *buf, size_t n) {
  if (h->best && h->best_dist <= 2 && h->best_dist < h->typed_len)
    snprintf(buf, n, "did you mean '%s'?", h->best);
  else
    snprintf(buf, n, "expected one of: %s", h->used ? h->list : "(none)");
  return buf;
}

/* --- lexer --------------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* Reads the token at p->next into p->tok. */
static int advance(parser_t *p) {
  const char *s = p->text;
  size_t n = p->len, i = p->next;
  for (;;) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
                     s[i] == '\r' || s[i] == '\v' || s[i] == '\f'))
      i++;
    if (i == n || s[i] != '#') break;
    while (i < n && s[i] != '\n') i++;
  }
  tok_t *t = &p->tok;
  t->pos = i;
  if (i == n) {
    t->kind = TOK_EOF;
  } else if (is_alpha(s[i])) {
    t->kind = TOK_IDENT;
    while (++i < n && (is_alpha(s[i]) || is_digit(s[i]))) {
    }
  } else if (is_digit(s[i]) ||
             (s[i] == '.' && i + 1 < n && is_digit(s[i + 1]))) {
    /* Greedy, so "10ms" is one bad number rather than 10 and a field name;
     * signs only inside a decimal exponent ("1e-5"). */
    bool hex = s[i] == '0' && i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X');
    t->kind = TOK_NUMBER;
    for (i++; i < n; i++) {
      char c = s[i];
      if (is_alpha(c) || is_digit(c) || c == '.') continue;
      if ((c == '+' || c == '-') && !hex &&
          (s[i - 1] == 'e' || s[i - 1] == 'E'))
        continue;
      break;
    }
  } else if (s[i] == '"' || s[i] == '\'') {
    char q = s[i];
    size_t j = i + 1;
    /* A backslash protects the next byte unless that is the line's end. */
    while (j < n && s[j] != q && s[j] != '\n') {
      if (s[j] == '\\' && j + 1 < n && s[j + 1] != '\n') j++;
      j++;
    }
    if (j >= n || s[j] != q)
      return fail(p, i,
                  "unterminated string (strings end on the line they start)");
    t->kind = TOK_STRING;
    i = j + 1;
  } else if (s[i] != '\0' && strchr("{}<>[]:;,-", s[i])) {
    t->kind = TOK_SYMBOL;
    i++;
  } else {
    unsigned char c = (unsigned char)s[i];
    if (c > ' ' && c < 0x7f) return fail(p, i, "unexpected character '%c'", c);
    return fail(p, i, "unexpected byte 0x%02x", c);
  }
  t->len = i - t->pos;
  p->next = i;
  return 0;
}

static bool at_symbol(const parser_t *p, char c) {
  return p->tok.kind == TOK_SYMBOL && p->text[p->tok.pos] == c;
}

/* Consumes the symbol |c| if it is next: 1 if it was, 0 if not, or error. */
static int accept(parser_t *p, char c) {
  if (!at_symbol(p, c)) return 0;
  int rc = advance(p);
  return rc < 0 ? rc : 1;
}

/* --- output -------------------------------------------------------------- */

static int emit(parser_t *p, const void *data, size_t n) {
  int rc = tg_buf_append(p->out, data, n);
  if (rc < 0) /* the buffer's error, not TG_EPARSE: the text may be fine */
    fail(p, p->tok.pos, "cannot grow the output: %s", tg_strerror(rc));
  return rc;
}

static int emit_byte(parser_t *p, uint32_t v) {
  uint8_t b = (uint8_t)v;
  return emit(p, &b, 1);
}

static int emit_varint(parser_t *p, uint64_t v) {
  uint8_t b[TG_PB_MAX_VARINT_SIZE];
  return emit(p, b, (size_t)(tg_pb_write_varint(b, v) - b));
}

static int emit_tag(parser_t *p, const ProtobufCFieldDescriptor *f,
                    enum tg_pb_wire_type wt) {
  return emit_varint(p, TG_PB_TAG(f->id, wt));
}

static int emit_fixed(parser_t *p, const ProtobufCFieldDescriptor *f,
                      uint64_t v, size_t size) {
  uint8_t b[8];
  for (size_t i = 0; i < size; i++) b[i] = (uint8_t)(v >> (8 * i));
  int rc = emit_tag(p, f, size == 4 ? TG_PB_WT_FIXED32 : TG_PB_WT_FIXED64);
  return rc < 0 ? rc : emit(p, b, size);
}

static int len_begin(parser_t *p, const ProtobufCFieldDescriptor *f,
                     size_t *mark) {
  int rc = emit_tag(p, f, TG_PB_WT_LEN);
  if (rc < 0) return rc;
  *mark = tg_buf_size(p->out); /* relative to the start: survives compaction */
  return emit(p, "", 1);
}

static int len_end(parser_t *p, size_t mark) {
  static const uint8_t zeros[TG_PB_MAX_VARINT_SIZE];
  size_t n = tg_buf_size(p->out) - mark - 1;
  size_t width = tg_pb_varint_size(n);
  if (width > 1) {
    int rc = emit(p, zeros, width - 1);
    if (rc < 0) return rc;
    uint8_t *content = tg_buf_begin(p->out) + mark + 1;
    memmove(content + width - 1, content, n);
  }
  tg_pb_write_varint(tg_buf_begin(p->out) + mark, n);
  return 0;
}

/* --- scalars ------------------------------------------------------------- */

static unsigned digit_value(char c) {
  if (is_digit(c)) return (unsigned)(c - '0');
  if (c >= 'a' && c <= 'f') return (unsigned)(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return (unsigned)(c - 'A' + 10);
  return 99;
}

/* Hex "0x..", octal "0..", or decimal. -EINVAL if not an integer literal,
 * -ERANGE past 2^64 - 1. */
static int parse_uint(const char *s, size_t n, uint64_t *out) {
  unsigned base = 10;
  size_t i = 0;
  bool overflow = false;
  uint64_t v = 0;
  if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  } else if (n > 1 && s[0] == '0') {
    base = 8;
    i = 1;
  }
  for (; i < n; i++) {
    unsigned d = digit_value(s[i]);
    if (d >= base) return -EINVAL;
    if (v > (UINT64_MAX - d) / base)
      overflow = true;
    else
      v = v * base + d;
  }
  *out = v;
  return overflow ? -ERANGE : 0;
}

static bool in_range(ProtobufCType type, bool neg, uint64_t mag) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
      return mag <= (neg ? 0x80000000u : 0x7fffffffu);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      return mag <= (neg ? (uint64_t)1 << 63 : (uint64_t)INT64_MAX);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      return (!neg || mag == 0) && mag <= UINT32_MAX;
    default:
      return !neg || mag == 0;
  }
}

/* For a number token, optionally after a '-' at |at|. */
static int out_of_range(parser_t *p, size_t at, bool neg,
                        const ProtobufCFieldDescriptor *f) {
  int shown = p->tok.len > 40 ? 40 : (int)p->tok.len;
  return fail(p, at, "value %s%.*s is out of range for field '%s' (%s)",
              neg ? "-" : "", shown, p->text + p->tok.pos, f->name,
              type_name(f));
}

/* Reads [-]integer within the range of |f|'s type; |*v| is the value as a
 * two's complement 64-bit pattern. Leaves the number as the current token,
 * for error messages. */
static int read_integer(parser_t *p, const ProtobufCFieldDescriptor *f,
                        uint64_t *v) {
  size_t at = p->tok.pos;
  int neg = accept(p, '-');
  if (neg < 0) return neg;
  if (p->tok.kind != TOK_NUMBER) return mismatch(p, f, "an integer");
  uint64_t mag = 0;
  int rc = parse_uint(p->text + p->tok.pos, p->tok.len, &mag);
  if (rc == -EINVAL) return mismatch(p, f, "an integer");
  if (rc == -ERANGE || !in_range(f->type, neg, mag))
    return out_of_range(p, at, neg, f);
  *v = neg ? 0 - mag : mag;
  return 0;
}

static int parse_int_field(parser_t *p, const ProtobufCFieldDescriptor *f) {
  uint64_t v;
  int rc = read_integer(p, f, &v);
  if (rc < 0) return rc;
  switch (f->type) {
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SINT64:
      v = tg_pb_zigzag64((int64_t)v); /* equals zigzag32 in range */
      break;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
      rc = emit_fixed(p, f, v, 4);
      return rc < 0 ? rc : advance(p);
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
      rc = emit_fixed(p, f, v, 8);
      return rc < 0 ? rc : advance(p);
    default:
      break; /* int32 keeps its sign extension: 10 bytes when negative */
  }
  rc = emit_tag(p, f, TG_PB_WT_VARINT);
  if (rc == 0) rc = emit_varint(p, v);
  return rc < 0 ? rc : advance(p);
}

static bool ident_is(const parser_t *p, const char *word, bool any_case) {
  const char *s = p->text + p->tok.pos;
  if (p->tok.kind != TOK_IDENT || strlen(word) != p->tok.len) return false;
  for (size_t i = 0; i < p->tok.len; i++) {
    char c = s[i];
    if (any_case && c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != word[i]) return false;
  }
  return true;
}

/* Whether all |n| bytes of |s| (not NUL-terminated) are in |set|. */
static bool all_in(const char *s, size_t n, const char *set) {
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\0' || !strchr(set, s[i])) return false;
  return true;
}

static int parse_float_field(parser_t *p, const ProtobufCFieldDescriptor *f) {
  size_t at = p->tok.pos;
  int neg = accept(p, '-');
  if (neg < 0) return neg;
  const char *s = p->text + p->tok.pos;
  size_t n = p->tok.len;
  double d;
  if (ident_is(p, "inf", true) || ident_is(p, "infinity", true)) {
    d = INFINITY;
  } else if (ident_is(p, "nan", true)) {
    d = NAN;
  } else if (p->tok.kind != TOK_NUMBER) {
    return mismatch(p, f, "a number");
  } else if (n > 1 && s[0] == '0' &&
             (s[1] == 'x' || s[1] == 'X' || all_in(s, n, "0123456789"))) {
    /* Hex and octal integers are valid floats too. */
    uint64_t mag;
    if (parse_uint(s, n, &mag) < 0) return mismatch(p, f, "a number");
    d = (double)mag;
  } else {
    /* strtod() needs a NUL and would also take hex floats: copy what text
     * format allows (decimal, exponent, 'f' suffix). */
    char buf[128];
    if (n > 1 && (s[n - 1] == 'f' || s[n - 1] == 'F')) n--;
    if (n >= sizeof(buf) || !all_in(s, n, "0123456789.eE+-"))
      return mismatch(p, f, "a number");
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    d = strtod(buf, &end);
    if (end != buf + n) return mismatch(p, f, "a number");
    if (errno == ERANGE && isinf(d)) return out_of_range(p, at, neg, f);
  }
  if (neg) d = -d;
  int rc;
  if (f->type == PROTOBUF_C_TYPE_FLOAT) {
    /* Converting an out-of-range double to float is undefined behaviour. */
    if (isfinite(d) && fabs(d) > FLT_MAX) return out_of_range(p, at, neg, f);
    float fl = (float)d;
    uint32_t bits;
    memcpy(&bits, &fl, sizeof(bits));
    rc = emit_fixed(p, f, bits, 4);
  } else {
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    rc = emit_fixed(p, f, bits, 8);
  }
  return rc < 0 ? rc : advance(p);
}

static int parse_bool_field(parser_t *p, const ProtobufCFieldDescriptor *f) {
  uint64_t v;
  if (ident_is(p, "true", false) || ident_is(p, "True", false) ||
      ident_is(p, "t", false)) {
    v = 1;
  } else if (ident_is(p, "false", false) || ident_is(p, "False", false) ||
             ident_is(p, "f", false)) {
    v = 0;
  } else if (p->tok.kind != TOK_NUMBER ||
             parse_uint(p->text + p->tok.pos, p->tok.len, &v) < 0 || v > 1) {
    return mismatch(p, f, "true or false");
  }
  int rc = emit_tag(p, f, TG_PB_WT_VARINT);
  if (rc == 0) rc = emit_varint(p, v);
  return rc < 0 ? rc : advance(p);
}

static int parse_enum_field(parser_t *p, const ProtobufCFieldDescriptor *f) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  size_t at = p->tok.pos;
  const ProtobufCEnumValue *found = NULL;
  bool by_name = p->tok.kind == TOK_IDENT;
  if (by_name) {
    for (unsigned i = 0; i < ed->n_values && !found; i++)
      if (ident_is(p, ed->values[i].name, false)) found = &ed->values[i];
  } else if (p->tok.kind == TOK_NUMBER || at_symbol(p, '-')) {
    /* A number must name a defined value, as protobuf's own parser wants
     * for proto2 enums: an undefined one is likelier a typo than intent. */
    uint64_t v;
    int rc = read_integer(p, f, &v);
    if (rc < 0) return rc;
    for (unsigned i = 0; i < ed->n_values && !found; i++)
      if ((uint64_t)(int64_t)ed->values[i].value == v) found = &ed->values[i];
  } else {
    return mismatch(p, f, "an enum value name or number");
  }
  if (!found) {
    size_t end = p->tok.pos + p->tok.len;
    int shown = end - at > 40 ? 40 : (int)(end - at);
    names_t h = {.typed = p->text + at,
                 .typed_len = by_name ? end - at : 0,
                 .best_dist = UINT_MAX};
    for (unsigned i = 0; i < ed->n_values; i++)
      names_add(&h, ed->values[i].name);
    char hint[160];
    return fail(p, at, "unknown value %s%.*s%s for enum field '%s'; %s",
                by_name ? "'" : "", shown, p->text + at, by_name ? "'" : "",
                f->name, names_hint(&h, hint, sizeof(hint)));
  }
  int rc = emit_tag(p, f, TG_PB_WT_VARINT);
  if (rc == 0) rc = emit_varint(p, (uint64_t)(int64_t)found->value);
  return rc < 0 ? rc : advance(p);
}

static int emit_utf8(parser_t *p, uint32_t cp) {
  static const uint8_t lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  uint8_t b[4];
  size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  for (size_t i = n - 1; i > 0; i--, cp >>= 6)
    b[i] = (uint8_t)(0x80 | (cp & 0x3F));
  b[0] = (uint8_t)(lead[n] | cp);
  return emit(p, b, n);
}

/* Reads up to |max| digits of |base| from s[*i] (bounded by |end|). */
static unsigned read_digits(const char *s, size_t *i, size_t end, unsigned base,
                            unsigned max, uint32_t *v) {
  unsigned count = 0;
  *v = 0;
  while (count < max && *i < end && digit_value(s[*i]) < base) {
    *v = *v * base + digit_value(s[*i]);
    (*i)++;
    count++;
  }
  return count;
}

/* The byte an escape like \n stands for, or -1. */
static int simple_escape(char c) {
  static const char pairs[] = "n\nt\tr\ra\ab\bf\fv\v\\\\''\"\"??";
  for (const char *e = pairs; *e; e += 2)
    if (*e == c) return (unsigned char)e[1];
  return -1;
}

/* A string field is a C string once protobuf-c decodes it, so a NUL in it
 * would silently cut the value short: refuse it where it was written. */
static int nul_in_string(parser_t *p, const ProtobufCFieldDescriptor *f,
                         size_t at) {
  return fail(p, at,
              "NUL byte in string field '%s' (strings cannot hold NULs; use a "
              "bytes field for binary data)",
              f->name);
}

/* Decodes the body of the current string token and appends it. Escapes are
 * checked here rather than in the lexer so the error points at the
 * backslash. NULs, raw or escaped, are refused unless |f| is a bytes
 * field. */
static int emit_unescaped(parser_t *p, const ProtobufCFieldDescriptor *f) {
  const char *s = p->text;
  size_t i = p->tok.pos + 1, end = p->tok.pos + p->tok.len - 1;
  bool nul_ok = f->type == PROTOBUF_C_TYPE_BYTES;
  while (i < end) {
    size_t esc = i;
    while (esc < end && s[esc] != '\\') esc++;
    const char *nul = nul_ok ? NULL : memchr(s + i, '\0', esc - i);
    if (nul) return nul_in_string(p, f, (size_t)(nul - s));
    int rc = emit(p, s + i, esc - i);
    if (rc < 0 || esc == end) return rc;
    char c = s[esc + 1]; /* the lexer keeps a byte after every backslash */
    int simple = simple_escape(c);
    uint32_t v;
    i = esc + 2;
    if (simple >= 0) {
      /* No simple escape stands for NUL. */
      rc = emit_byte(p, (uint32_t)simple);
    } else if (c >= '0' && c <= '7') {
      i = esc + 1;
      read_digits(s, &i, end, 8, 3, &v);
      if (v > 0xFF)
        return fail(
            p, esc,
            "bad escape '\\%.3s' in string: octal escapes stop at \\377",
            s + esc + 1);
      if (v == 0 && !nul_ok) return nul_in_string(p, f, esc);
      rc = emit_byte(p, v);
    } else if (c == 'x' || c == 'X') {
      if (!read_digits(s, &i, end, 16, 2, &v))
        return fail(p, esc, "bad escape '\\%c' in string: expected hex digits",
                    c);
      if (v == 0 && !nul_ok) return nul_in_string(p, f, esc);
      rc = emit_byte(p, v);
    } else if (c == 'u' || c == 'U') {
      unsigned want = c == 'u' ? 4 : 8;
      if (read_digits(s, &i, end, 16, want, &v) != want)
        return fail(p, esc,
                    "bad escape '\\%c' in string: expected %u hex digits", c,
                    want);
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail(
            p, esc,
            "bad escape in string: U+%04X is not a Unicode scalar value",
            (unsigned)v);
      if (v == 0 && !nul_ok) return nul_in_string(p, f, esc);
      rc = emit_utf8(p, v);
    } else if (c > ' ' && c < 0x7f) {
      return fail(p, esc, "bad escape '\\%c' in string", c);
    } else {
      return fail(p, esc, "bad escape (backslash, byte 0x%02x) in string",
                  (unsigned char)c);
    }
    if (rc < 0) return rc;
  }
  return 0;
}

static int parse_string_field(parser_t *p, const ProtobufCFieldDescriptor *f) {
  if (p->tok.kind != TOK_STRING) return mismatch(p, f, "a quoted string");
  size_t mark;
  int rc = len_begin(p, f, &mark);
  /* Adjacent literals are one value: "a" "b" is "ab". */
  while (rc == 0 && p->tok.kind == TOK_STRING) {
    rc = emit_unescaped(p, f);
    if (rc == 0) rc = advance(p);
  }
  return rc < 0 ? rc : len_end(p, mark);
}

/* --- messages ------------------------------------------------------------ */

/* The message whose fields are being read. */
typedef struct scope {
  const ProtobufCMessageDescriptor *desc;
  unsigned depth;    /* 0 for the top-level message */
  char closer;       /* '}' or '>'; 0 at top level (ends at end of input) */
  size_t open_at;    /* where its '{' or '<' is */
  const char *field; /* the field it is the value of */
} scope_t;

static int parse_fields(parser_t *p, const scope_t *sc);

/* The current token is '{' or '<'. */
static int parse_message_field(parser_t *p, const ProtobufCFieldDescriptor *f,
                               unsigned depth) {
  size_t open_at = p->tok.pos;
  if (depth >= TG_PBTXT_MAX_DEPTH)
    return fail(p, open_at, "messages nested deeper than %d levels",
                TG_PBTXT_MAX_DEPTH);
  scope_t sc = {.desc = f->descriptor,
                .depth = depth + 1,
                .closer = at_symbol(p, '{') ? '}' : '>',
                .open_at = open_at,
                .field = f->name};
  size_t mark;
  int rc = len_begin(p, f, &mark);
  if (rc == 0) rc = advance(p);
  if (rc == 0) rc = parse_fields(p, &sc);
  return rc < 0 ? rc : len_end(p, mark);
}

static int parse_value(parser_t *p, const ProtobufCFieldDescriptor *f,
                       unsigned depth) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
      if (!at_symbol(p, '{') && !at_symbol(p, '<'))
        return mismatch(p, f, "'{' or '<'");
      return parse_message_field(p, f, depth);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
      return parse_float_field(p, f);
    case PROTOBUF_C_TYPE_BOOL:
      return parse_bool_field(p, f);
    case PROTOBUF_C_TYPE_ENUM:
      return parse_enum_field(p, f);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
      return parse_string_field(p, f);
    default:
      if ((unsigned)f->type > PROTOBUF_C_TYPE_FIXED64)
        return fail(p, p->tok.pos,
                    "field '%s' has a type this parser does not know", f->name);
      return parse_int_field(p, f);
  }
}

/* `[v, v, ...]`: the current token is '['. */
static int parse_list(parser_t *p, const ProtobufCFieldDescriptor *f,
                      unsigned depth) {
  char buf[64];
  if (f->label != PROTOBUF_C_LABEL_REPEATED)
    return fail(
        p, p->tok.pos,
        "field '%s' is not repeated; a list '[...]' needs a repeated field",
        f->name);
  int rc = advance(p);
  if (rc == 0) rc = accept(p, ']');
  if (rc != 0) return rc < 0 ? rc : 0; /* an error, or the empty list */
  for (;;) {
    if ((rc = parse_value(p, f, depth)) < 0) return rc;
    if ((rc = accept(p, ',')) < 0) return rc;
    if (rc == 1) continue;
    if ((rc = accept(p, ']')) != 0) return rc < 0 ? rc : 0;
    return fail(p, p->tok.pos,
                "expected ',' or ']' in the list of field '%s', got %s",
                f->name, describe(p, buf, sizeof(buf)));
  }
}

static const ProtobufCFieldDescriptor *find_field(
    const parser_t *p, const ProtobufCMessageDescriptor *d) {
  for (unsigned i = 0; i < d->n_fields; i++)
    if (ident_is(p, d->fields[i].name, false)) return &d->fields[i];
  return NULL;
}

/* The current token is the field name. */
static int parse_field(parser_t *p, const ProtobufCMessageDescriptor *d,
                       unsigned depth) {
  char buf[64], hint[160];
  const ProtobufCFieldDescriptor *f = find_field(p, d);
  if (!f) {
    names_t h = {.typed = p->text + p->tok.pos,
                 .typed_len = p->tok.len,
                 .best_dist = UINT_MAX};
    for (unsigned i = 0; i < d->n_fields; i++) names_add(&h, d->fields[i].name);
    int shown = p->tok.len > 40 ? 40 : (int)p->tok.len;
    return fail(p, p->tok.pos, "unknown field '%.*s' in %s; %s", shown,
                p->text + p->tok.pos, d->name,
                names_hint(&h, hint, sizeof(hint)));
  }
  int rc = advance(p);
  int colon = rc < 0 ? rc : accept(p, ':');
  if (colon < 0) return colon;
  bool is_msg = f->type == PROTOBUF_C_TYPE_MESSAGE;
  if (!is_msg && (at_symbol(p, '{') || at_symbol(p, '<')))
    return fail(
        p, p->tok.pos,
        "field '%s' (%s) is not a message; expected %sa value, got '%c'",
        f->name, type_name(f), colon ? "" : "':' and ", p->text[p->tok.pos]);
  if (!is_msg && !colon)
    return fail(p, p->tok.pos, "expected ':' after field '%s', got %s", f->name,
                describe(p, buf, sizeof(buf)));
  rc = at_symbol(p, '[') ? parse_list(p, f, depth) : parse_value(p, f, depth);
  if (rc < 0) return rc;
  /* Fields may end with ';' or ','. */
  rc = accept(p, ';');
  if (rc == 0) rc = accept(p, ',');
  return rc < 0 ? rc : 0;
}

/* Fields up to the scope's closer, or to the end of input at top level. */
static int parse_fields(parser_t *p, const scope_t *sc) {
  char buf[64];
  char closer = sc->closer;
  unsigned line, col;
  for (;;) {
    if (p->tok.kind == TOK_IDENT) {
      int rc = parse_field(p, sc->desc, sc->depth);
      if (rc < 0) return rc;
      continue;
    }
    if (closer && at_symbol(p, closer)) return advance(p);
    if (!closer && p->tok.kind == TOK_EOF) return 0;
    locate(p, sc->open_at, &line, &col);
    if (p->tok.kind == TOK_EOF)
      return fail(p, p->tok.pos,
                  "missing '%c' at end of input (to close '%s' opened at line "
                  "%u, column %u)",
                  closer, sc->field, line, col);
    if (at_symbol(p, '['))
      return fail(p, p->tok.pos,
                  "extension and Any names ('[...]') are not supported");
    if (at_symbol(p, '}') || at_symbol(p, '>')) {
      if (!closer)
        return fail(p, p->tok.pos, "unexpected '%c': no message is open",
                    p->text[p->tok.pos]);
      return fail(
          p, p->tok.pos,
          "expected '%c' to close '%s' opened at line %u, column %u, got '%c'",
          closer, sc->field, line, col, p->text[p->tok.pos]);
    }
    return fail(p, p->tok.pos, "expected a field name of %s, got %s",
                sc->desc->name, describe(p, buf, sizeof(buf)));
  }
}

int tg_pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text,
                   size_t len, tg_buf_t *out, tg_pbtxt_error_t *err) {
  parser_t p = {.text = text, .len = len, .out = out, .err = err};
  scope_t top = {.desc = desc};
  size_t start = tg_buf_size(out);
  if (err) memset(err, 0, sizeof(*err));
  int rc = advance(&p);
  if (rc == 0) rc = parse_fields(&p, &top);
  if (rc < 0) out->len = out->off + start; /* drop the partial message */
  return rc;
}
