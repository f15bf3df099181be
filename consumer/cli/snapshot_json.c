/* The collector's snapshot reply, read as hostile JSON: see snapshot_json.h.
 *
 * A recursive-descent checker of the whole grammar whose recursion stops
 * at CLI_SNAP_MAX_DEPTH; the few fields it keeps are copied into fixed
 * buffers as they are decoded, so no input makes it allocate, read past
 * |len| or write past a buffer.
 */
#include "consumer/cli/snapshot_json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct scan {
  const char *begin, *p, *end;
  int depth;
  char *err;
  size_t err_cap;
  bool failed; /* |err| holds the first failure */
} scan_t;

static int fail(scan_t *s, const char *why) {
  if (!s->failed && s->err_cap > 0)
    snprintf(s->err, s->err_cap, "byte %zu: %s", (size_t)(s->p - s->begin), why);
  s->failed = true;
  return -EINVAL;
}

static void skip_ws(scan_t *s) {
  while (s->p < s->end &&
         (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

/* The next non-blank byte, or -1 at the end. */
static int peek(scan_t *s) {
  skip_ws(s);
  return s->p < s->end ? (unsigned char)*s->p : -1;
}

static int expect(scan_t *s, char c, const char *why) {
  if (peek(s) != (unsigned char)c) return fail(s, why);
  s->p++;
  return 0;
}

/* --- strings ---------------------------------------------------------------- */

/* Where a string is decoded to: |cap| bytes (NUL included), or none. */
typedef struct sink {
  char *dst;
  size_t cap, len;
  bool cut;
} sink_t;

static void put(sink_t *k, const char *b, size_t n) {
  if (!k->dst || k->cut) return;
  /* A character goes in whole or not at all, and so does what follows. */
  if (k->len + n >= k->cap) {
    k->cut = true;
    return;
  }
  memcpy(k->dst + k->len, b, n);
  k->len += n;
}

static void put_utf8(sink_t *k, unsigned cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | cp >> 6);
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | cp >> 12);
    b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | cp >> 18);
    b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    b[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  put(k, b, n);
}

/* Raw bytes are copied one by one: a cut may end inside a multi-byte
 * character, which is dropped rather than left half. */
static size_t trim_partial_utf8(const char *s, size_t n) {
  size_t i = n, k = 0;
  while (i > 0 && k < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--, k++;
  if (i == 0) return n;
  unsigned char lead = (unsigned char)s[i - 1];
  size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return want > 1 && k + 1 < want ? i - 1 : n;
}

static int hex4(scan_t *s, unsigned *v) {
  if (s->end - s->p < 4) return fail(s, "\\u needs 4 hex digits");
  unsigned x = 0;
  for (int i = 0; i < 4; i++) {
    char c = s->p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16;
    if (d == 16) return fail(s, "\\u needs 4 hex digits");
    x = x << 4 | d;
  }
  s->p += 4;
  *v = x;
  return 0;
}

/* One escape after its '\\'. The collector writes each byte of its text
 * that is not part of well-formed UTF-8 as \u00XX (cli_json_str), so
 * U+0080..U+00FF are decoded as that byte again; tg_printable() shows a
 * byte that does not make UTF-8 as \xHH. NUL and unpaired surrogates
 * become U+FFFD: the text stays a C string. */
static int escape(scan_t *s, sink_t *k) {
  if (s->p >= s->end) return fail(s, "unterminated string");
  char c = *s->p++;
  const char *plain = NULL;
  switch (c) {
    case '"': plain = "\""; break;
    case '\\': plain = "\\"; break;
    case '/': plain = "/"; break;
    case 'b': plain = "\b"; break;
    case 'f': plain = "\f"; break;
    case 'n': plain = "\n"; break;
    case 'r': plain = "\r"; break;
    case 't': plain = "\t"; break;
    case 'u': break;
    default: return fail(s, "bad escape in a string");
  }
  if (plain) {
    put(k, plain, 1);
    return 0;
  }
  unsigned cp;
  if (hex4(s, &cp) < 0) return -EINVAL;
  if (cp >= 0xD800 && cp <= 0xDBFF && s->end - s->p >= 6 && s->p[0] == '\\' &&
      s->p[1] == 'u') {
    const char *save = s->p;
    unsigned lo;
    s->p += 2;
    if (hex4(s, &lo) < 0) return -EINVAL;
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      put_utf8(k, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
      return 0;
    }
    s->p = save; /* not its pair: read on its own */
  }
  if (cp >= 0x80 && cp <= 0xFF) {
    char byte = (char)cp;
    put(k, &byte, 1);
    return 0;
  }
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  put_utf8(k, cp);
  return 0;
}

/* A string at s->p, decoded into |dst| (|cap| bytes; NULL: checked only).
 * *cut says it did not fit whole. */
static int string(scan_t *s, char *dst, size_t cap, bool *cut) {
  if (expect(s, '"', "expected a string") < 0) return -EINVAL;
  sink_t k = {.dst = dst, .cap = cap};
  for (;;) {
    if (s->p >= s->end) return fail(s, "unterminated string");
    unsigned char c = (unsigned char)*s->p;
    if (c == '"') break;
    if (c < 0x20) return fail(s, "control character in a string");
    s->p++;
    if (c == '\\') {
      if (escape(s, &k) < 0) return -EINVAL;
    } else {
      put(&k, (const char *)&c, 1);
    }
  }
  s->p++;
  if (dst && cap > 0) {
    if (k.cut) k.len = trim_partial_utf8(dst, k.len);
    dst[k.len] = 0;
  }
  if (cut) *cut = k.cut;
  return 0;
}

/* A string or null ("") into |dst|. */
static int string_or_null(scan_t *s, char *dst, size_t cap) {
  if (peek(s) == 'n') {
    if (s->end - s->p < 4 || memcmp(s->p, "null", 4) != 0)
      return fail(s, "expected a string or null");
    s->p += 4;
    dst[0] = 0;
    return 0;
  }
  return string(s, dst, cap, NULL);
}

/* --- numbers and other values ------------------------------------------------ */

static bool digit(scan_t *s) { return s->p < s->end && *s->p >= '0' && *s->p <= '9'; }

/* A number (RFC 8259 grammar). With |count|: it must be a whole number
 * in 0..UINT64_MAX, stored there. */
static int number(scan_t *s, uint64_t *count, const char *what) {
  skip_ws(s);
  bool neg = s->p < s->end && *s->p == '-';
  if (neg) s->p++;
  if (!digit(s)) return fail(s, "bad number");
  uint64_t v = 0;
  bool big = false, whole = true;
  if (*s->p == '0') {
    s->p++;
  } else {
    while (digit(s)) {
      unsigned d = (unsigned)(*s->p++ - '0');
      if (v > (UINT64_MAX - d) / 10) big = true;
      else v = v * 10 + d;
    }
  }
  if (s->p < s->end && *s->p == '.') {
    s->p++;
    whole = false;
    if (!digit(s)) return fail(s, "bad number");
    while (digit(s)) s->p++;
  }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
    s->p++;
    whole = false;
    if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
    if (!digit(s)) return fail(s, "bad number");
    while (digit(s)) s->p++;
  }
  if (!count) return 0;
  if (neg || big || !whole) return fail(s, what);
  *count = v;
  return 0;
}

static int literal(scan_t *s, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
    return fail(s, "not JSON");
  s->p += n;
  return 0;
}

typedef int (*member_fn)(scan_t *s, const char *key, bool key_cut, void *ctx);
typedef int (*element_fn)(scan_t *s, size_t i, void *ctx);

static int value(scan_t *s);

static int enter(scan_t *s) {
  if (++s->depth > CLI_SNAP_MAX_DEPTH) return fail(s, "nested too deep");
  return 0;
}

/* The items of an object or an array, between |open| and |close| and
 * separated by commas, each read by |item|. */
static int items(scan_t *s, char open, char close, element_fn item, void *ctx) {
  if (expect(s, open, open == '{' ? "expected an object" : "expected an array") < 0 ||
      enter(s) < 0)
    return -EINVAL;
  if (peek(s) == (unsigned char)close) {
    s->p++;
    s->depth--;
    return 0;
  }
  for (size_t i = 0;; i++) {
    if (item(s, i, ctx) < 0) return -EINVAL;
    int c = peek(s);
    if (c == -1) return fail(s, "truncated");
    s->p++;
    if (c == (unsigned char)close) break;
    if (c != ',') return fail(s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
  s->depth--;
  return 0;
}

typedef struct members {
  member_fn fn; /* NULL: every value skipped */
  void *ctx;
} members_t;

static int member(scan_t *s, size_t i, void *ctx) {
  (void)i;
  const members_t *m = ctx;
  char key[32];
  bool cut;
  if (string(s, key, sizeof(key), &cut) < 0) return -EINVAL;
  if (expect(s, ':', "expected ':'") < 0) return -EINVAL;
  return m->fn ? m->fn(s, key, cut, m->ctx) : value(s);
}

/* An object: |fn| reads each member's value (NULL: skipped). */
static int object(scan_t *s, member_fn fn, void *ctx) {
  members_t m = {fn, ctx};
  return items(s, '{', '}', member, &m);
}

static int skip_element(scan_t *s, size_t i, void *ctx) {
  (void)i, (void)ctx;
  return value(s);
}

/* An array: |fn| reads each element (NULL: skipped). */
static int array(scan_t *s, element_fn fn, void *ctx) {
  return items(s, '[', ']', fn ? fn : skip_element, ctx);
}

/* Any value, checked and skipped. */
static int value(scan_t *s) {
  switch (peek(s)) {
    case '{': return object(s, NULL, NULL);
    case '[': return array(s, NULL, NULL);
    case '"': return string(s, NULL, 0, NULL);
    case 't': return literal(s, "true");
    case 'f': return literal(s, "false");
    case 'n': return literal(s, "null");
    case -1: return fail(s, "truncated");
    default: return number(s, NULL, NULL);
  }
}

/* --- the reply's fields ------------------------------------------------------ */

/* A field the reply may give once: *|seen| has bit |bit| after it. */
static int once(scan_t *s, unsigned *seen, unsigned bit, const char *what) {
  if (*seen & bit) return fail(s, what);
  *seen |= bit;
  return 0;
}

typedef struct snap_ctx {
  cli_snap_reply_t *out;
  unsigned seen;
  bool has_id;
} snap_ctx_t;

static bool is_id(const char *v) {
  if (strlen(v) != CLI_SNAP_ID_LEN) return false;
  for (size_t i = 0; i < CLI_SNAP_ID_LEN; i++)
    if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'))) return false;
  return true;
}

static int snap_member(scan_t *s, const char *key, bool key_cut, void *ctx) {
  snap_ctx_t *c = ctx;
  cli_snap_reply_t *o = c->out;
  if (key_cut) return value(s);
  if (!strcmp(key, "id")) {
    char id[CLI_SNAP_ID_LEN + 2];
    if (once(s, &c->seen, 1, "snapshot.id twice") < 0 ||
        string(s, id, sizeof(id), NULL) < 0)
      return -EINVAL;
    if (!is_id(id)) return fail(s, "snapshot.id: not 16 hex digits");
    memcpy(o->id, id, sizeof(o->id));
    c->has_id = true;
    return 0;
  }
  if (!strcmp(key, "state")) {
    if (once(s, &c->seen, 2, "snapshot.state twice") < 0) return -EINVAL;
    return string(s, o->state, sizeof(o->state), NULL);
  }
  if (!strcmp(key, "hosts")) {
    if (once(s, &c->seen, 4, "snapshot.hosts twice") < 0) return -EINVAL;
    o->has_hosts = true;
    return number(s, &o->hosts, "snapshot.hosts: not a count");
  }
  if (!strcmp(key, "hosts_failed")) {
    if (once(s, &c->seen, 8, "snapshot.hosts_failed twice") < 0) return -EINVAL;
    o->has_hosts_failed = true;
    return number(s, &o->hosts_failed, "snapshot.hosts_failed: not a count");
  }
  if (!strcmp(key, "bytes")) {
    if (once(s, &c->seen, 16, "snapshot.bytes twice") < 0) return -EINVAL;
    o->has_bytes = true;
    return number(s, &o->bytes, "snapshot.bytes: not a count");
  }
  return value(s);
}

typedef struct host_ctx {
  cli_snap_host_t h;
  char outcome[16];
  unsigned seen;
} host_ctx_t;

static int host_member(scan_t *s, const char *key, bool key_cut, void *ctx) {
  host_ctx_t *c = ctx;
  if (key_cut) return value(s);
  if (!strcmp(key, "host")) {
    if (once(s, &c->seen, 1, "hosts[].host twice") < 0) return -EINVAL;
    return string(s, c->h.host, sizeof(c->h.host), NULL);
  }
  if (!strcmp(key, "outcome")) {
    if (once(s, &c->seen, 2, "hosts[].outcome twice") < 0) return -EINVAL;
    return string(s, c->outcome, sizeof(c->outcome), NULL);
  }
  if (!strcmp(key, "error")) {
    if (once(s, &c->seen, 4, "hosts[].error twice") < 0) return -EINVAL;
    return string_or_null(s, c->h.error, sizeof(c->h.error));
  }
  return value(s);
}

static int host_element(scan_t *s, size_t i, void *ctx) {
  (void)i;
  cli_snap_reply_t *o = ctx;
  host_ctx_t c;
  memset(&c, 0, sizeof(c));
  if (object(s, host_member, &c) < 0) return -EINVAL;
  if (!(c.seen & 2)) return fail(s, "hosts[]: an entry without an outcome");
  o->n_host_entries++;
  if (!strcmp(c.outcome, "ok")) return 0;
  c.h.partial = !strcmp(c.outcome, "partial");
  if (o->n_failed < CLI_SNAP_MAX_FAILED) o->failed[o->n_failed] = c.h;
  o->n_failed++;
  return 0;
}

typedef struct top_ctx {
  cli_snap_reply_t *out;
  unsigned seen;
} top_ctx_t;

static int top_member(scan_t *s, const char *key, bool key_cut, void *ctx) {
  top_ctx_t *c = ctx;
  cli_snap_reply_t *o = c->out;
  if (key_cut) return value(s);
  if (!strcmp(key, "snapshot")) {
    if (once(s, &c->seen, 1, "snapshot twice") < 0) return -EINVAL;
    snap_ctx_t sc = {.out = o};
    if (object(s, snap_member, &sc) < 0) return -EINVAL;
    if (!sc.has_id) return fail(s, "snapshot without an id");
    o->has_snapshot = true;
    return 0;
  }
  if (!strcmp(key, "hosts")) {
    if (once(s, &c->seen, 2, "hosts twice") < 0) return -EINVAL;
    return array(s, host_element, o);
  }
  if (!strcmp(key, "error")) {
    if (once(s, &c->seen, 4, "error twice") < 0) return -EINVAL;
    return string_or_null(s, o->error, sizeof(o->error));
  }
  return value(s);
}

int cli_snap_parse(const char *json_untrusted, size_t len, cli_snap_reply_t *out,
                   char *err, size_t err_cap) {
  memset(out, 0, sizeof(*out));
  if (err_cap > 0) err[0] = 0;
  scan_t s = {.begin = json_untrusted, .p = json_untrusted,
              .end = json_untrusted + len, .err = err, .err_cap = err_cap};
  top_ctx_t c = {.out = out};
  int rv = peek(&s) == '{' ? object(&s, top_member, &c)
                           : fail(&s, "not a JSON object");
  if (rv == 0 && peek(&s) != -1) rv = fail(&s, "more after the JSON object");
  if (rv < 0) {
    memset(out, 0, sizeof(*out));
    return -EINVAL;
  }
  return 0;
}
