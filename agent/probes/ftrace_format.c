/* Format file parsing; see ftrace_format.h. */
#include "agent/probes/ftrace_format.h"

#include <errno.h>
#include <string.h>

/* One "field:" line split into its parts; pointers into the caller's text. */
typedef struct field_line {
  const char *decl; /* "<type> <name>[<n>]" */
  size_t decl_len;
  unsigned long offset, size;
  bool is_signed, has_offset, has_size;
} field_line_t;

/* Reads the decimal after "|key|:" within [p, end); false if absent. */
static bool read_num(const char *p, const char *end, const char *key,
                     unsigned long *out) {
  size_t klen = strlen(key);
  for (const char *s = p; s + klen < end; s++) {
    if (memcmp(s, key, klen) != 0 || s[klen] != ':') continue;
    s += klen + 1;
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    unsigned long v = 0;
    bool any = false;
    while (s < end && *s >= '0' && *s <= '9') {
      if (v > 100000000ul) return false; /* far past any real layout */
      v = v * 10 + (unsigned long)(*s - '0');
      s++;
      any = true;
    }
    *out = v;
    return any;
  }
  return false;
}

static bool parse_field_line(const char *p, const char *end, field_line_t *fl) {
  memset(fl, 0, sizeof(*fl));
  const char *semi = memchr(p, ';', (size_t)(end - p));
  if (!semi) return false;
  fl->decl = p;
  fl->decl_len = (size_t)(semi - p);
  unsigned long sgn = 0;
  fl->has_offset = read_num(semi, end, "offset", &fl->offset);
  fl->has_size = read_num(semi, end, "size", &fl->size);
  if (read_num(semi, end, "signed", &sgn)) fl->is_signed = sgn != 0;
  return fl->has_offset && fl->has_size;
}

static bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

static bool contains(const char *s, size_t n, const char *word) {
  size_t wl = strlen(word);
  for (size_t i = 0; i + wl <= n; i++)
    if (memcmp(s + i, word, wl) == 0) return true;
  return false;
}

/* The declaration's type (before the name at |name_start|) is |word|,
 * possibly followed by more words. */
static bool type_starts(const char *d, size_t name_start, const char *word) {
  while (name_start && (*d == ' ' || *d == '\t')) d++, name_start--;
  size_t wl = strlen(word);
  return name_start > wl && memcmp(d, word, wl) == 0 &&
         (d[wl] == ' ' || d[wl] == '\t');
}

/* The declaration's type (before the name at |name_start|) is a single
 * pointer to chars: "char *", "const char *", "unsigned char*". */
static bool is_char_ptr(const char *d, size_t name_start) {
  size_t n = name_start;
  while (n && (d[n - 1] == ' ' || d[n - 1] == '\t')) n--;
  if (!n || d[--n] != '*') return false;
  while (n && (d[n - 1] == ' ' || d[n - 1] == '\t')) n--;
  return n >= 4 && memcmp(d + n - 4, "char", 4) == 0 &&
         (n == 4 || !is_ident(d[n - 5]));
}

/* See tg_ftrace_field_role_t. */
static uint8_t role_of(const char *d, size_t name_start, const char *name) {
  if (type_starts(d, name_start, "dev_t")) return TG_FTRACE_ROLE_DEV;
  if (strncmp(name, "cgroup", 6) == 0) return TG_FTRACE_ROLE_NONE;
  if (type_starts(d, name_start, "ino_t") ||
      type_starts(d, name_start, "i_ino") || strcmp(name, "ino") == 0 ||
      strcmp(name, "i_ino") == 0)
    return TG_FTRACE_ROLE_INODE;
  return TG_FTRACE_ROLE_NONE;
}

/* Whether an unsigned integer field named |name| holds a code address:
 * the names the kernel's events give the _RET_IP_ / _THIS_IP_ they record
 * ("unsigned long call_site" of kmem, "ip" of ftrace/print and of ext4's,
 * "caller_ip" of xfs's...). Declared as integers, not pointers, they would
 * otherwise be written as they are, and with them the kernel's KASLR
 * base. */
static bool is_code_addr_name(const char *name) {
  static const char *const names[] = {
      "ip",       "parent_ip", "call_site", "caller", "caller_ip",
      "ret_ip",   "function",  "func",      "location",
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(name, names[i]) == 0) return true;
  return false;
}

/* Fills name/kind of |f| from the declaration. Arrays: "type name[N]";
 * dynamic: "__data_loc char[] name". */
static void classify(const field_line_t *fl, tg_ftrace_field_t *f) {
  const char *d = fl->decl;
  size_t n = fl->decl_len;
  while (n && (d[n - 1] == ' ' || d[n - 1] == '\t')) n--;
  size_t name_end = n;
  long count = -1; /* -1: not an array */
  if (n && d[n - 1] == ']') {
    size_t open = n - 1;
    while (open > 0 && d[open] != '[') open--;
    if (d[open] != '[') return;
    count = 0;
    for (size_t i = open + 1; i < n - 1; i++) {
      if (d[i] < '0' || d[i] > '9') {
        count = 0;
        break;
      }
      if (count > 65535) return;
      count = count * 10 + (d[i] - '0');
    }
    name_end = open;
  }
  size_t name_start = name_end;
  while (name_start > 0 && is_ident(d[name_start - 1])) name_start--;
  size_t name_len = name_end - name_start;
  if (name_len == 0 || name_len >= sizeof(f->name)) return;
  memcpy(f->name, d + name_start, name_len);
  f->name[name_len] = 0;
  f->offset = (uint16_t)fl->offset;
  f->size = (uint16_t)fl->size;
  f->is_signed = fl->is_signed;

  bool is_char = contains(d, name_start, "char");
  /* Any pointer (void *, const char *, struct page *...) holds a kernel
   * address; an array of them is not decoded at all. */
  bool is_ptr = contains(d, name_start, "*");
  if (is_ptr && (count >= 0 || (fl->size != 4 && fl->size != 8))) {
    f->kind = TG_FTRACE_FIELD_SKIP;
  } else if (is_ptr) {
    f->kind = is_char_ptr(d, name_start) ? TG_FTRACE_FIELD_STRPTR
                                         : TG_FTRACE_FIELD_SYMADDR;
    f->is_signed = false;
  } else if (contains(d, name_start, "__data_loc")) {
    f->kind = fl->size == 4 ? TG_FTRACE_FIELD_DATA_LOC : TG_FTRACE_FIELD_SKIP;
  } else if (contains(d, name_start, "__rel_loc")) {
    f->kind = fl->size == 4 ? TG_FTRACE_FIELD_REL_LOC : TG_FTRACE_FIELD_SKIP;
  } else if (count >= 0 && is_char) {
    f->kind = fl->size == 0 ? TG_FTRACE_FIELD_TAIL : TG_FTRACE_FIELD_CHARS;
  } else if (count > 0) {
    unsigned long elem = fl->size / (unsigned long)count;
    if ((elem == 1 || elem == 2 || elem == 4 || elem == 8) &&
        elem * (unsigned long)count == fl->size) {
      f->kind = TG_FTRACE_FIELD_INT_ARRAY;
      f->elem_size = (uint16_t)elem;
    }
  } else if (count < 0 && (fl->size == 1 || fl->size == 2 || fl->size == 4 ||
                           fl->size == 8)) {
    f->kind = TG_FTRACE_FIELD_INT;
    if (fl->size >= 4) f->role = role_of(d, name_start, f->name);
    /* Pointer-sized: 8 bytes, or a long of a 32-bit kernel. */
    if (!f->is_signed && (fl->size == 8 || contains(d, name_start, "long")) &&
        fl->size >= 4 && is_code_addr_name(f->name))
      f->kind = TG_FTRACE_FIELD_SYMADDR;
  }
}

int tg_ftrace_format_parse(const char *text, size_t len,
                           tg_ftrace_format_t *out) {
  memset(out, 0, sizeof(*out));
  out->pid_offset = UINT16_MAX;
  out->flags_offset = UINT16_MAX;
  bool has_id = false, any_field = false;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *s = p;
    while (s < le && (*s == ' ' || *s == '\t')) s++;
    size_t n = (size_t)(le - s);
    if (n > 5 && memcmp(s, "name:", 5) == 0) {
      const char *v = s + 5;
      while (v < le && *v == ' ') v++;
      size_t vl = (size_t)(le - v);
      if (vl >= sizeof(out->name)) vl = sizeof(out->name) - 1;
      memcpy(out->name, v, vl);
      out->name[vl] = 0;
    } else if (n > 3 && memcmp(s, "ID:", 3) == 0) {
      unsigned long id;
      if (read_num(s, le, "ID", &id) && id <= UINT16_MAX) {
        out->id = (uint32_t)id;
        has_id = true;
      }
    } else if (n > 6 && memcmp(s, "field:", 6) == 0) {
      field_line_t fl;
      if (parse_field_line(s + 6, le, &fl) && fl.offset <= UINT16_MAX &&
          fl.size <= UINT16_MAX) {
        tg_ftrace_field_t f;
        memset(&f, 0, sizeof(f));
        classify(&fl, &f);
        if (f.name[0]) {
          any_field = true;
          if (strncmp(f.name, "common_", 7) == 0) {
            if (strcmp(f.name, "common_pid") == 0 && f.size == 4)
              out->pid_offset = f.offset;
            else if (strcmp(f.name, "common_flags") == 0 && f.size == 1)
              out->flags_offset = f.offset;
          } else if (out->n_fields < TG_FTRACE_MAX_FIELDS) {
            out->fields[out->n_fields++] = f;
          }
        }
      }
    }
    p = nl ? nl + 1 : end;
  }
  return has_id && any_field ? 0 : -EINVAL;
}

const tg_ftrace_field_t *tg_ftrace_format_field(const tg_ftrace_format_t *f,
                                                const char *name) {
  for (unsigned i = 0; i < f->n_fields; i++)
    if (strcmp(f->fields[i].name, name) == 0) return &f->fields[i];
  return NULL;
}

int tg_ftrace_header_page_parse(const char *text, size_t len,
                                tg_ftrace_page_layout_t *out) {
  memset(out, 0, sizeof(*out));
  bool ts = false, commit = false, data = false;
  unsigned long data_off = 0, data_size = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *s = p;
    while (s < le && (*s == ' ' || *s == '\t')) s++;
    field_line_t fl;
    if ((size_t)(le - s) > 6 && memcmp(s, "field:", 6) == 0 &&
        parse_field_line(s + 6, le, &fl)) {
      tg_ftrace_field_t f;
      memset(&f, 0, sizeof(f));
      classify(&fl, &f);
      if (strcmp(f.name, "timestamp") == 0) {
        ts = fl.offset == 0 && fl.size == 8;
      } else if (strcmp(f.name, "commit") == 0) {
        commit = fl.offset == 8 && (fl.size == 4 || fl.size == 8);
        out->commit_size = (uint16_t)fl.size;
      } else if (strcmp(f.name, "data") == 0) {
        data = true;
        data_off = fl.offset;
        data_size = fl.size;
      }
    }
    p = nl ? nl + 1 : end;
  }
  /* Sub-buffers are 4 KiB to 1 MiB (buffer_subbuf_size_kb). */
  if (!ts || !commit || !data || data_off != 8u + out->commit_size ||
      data_size == 0 || data_off + data_size > (1u << 20))
    return -EINVAL;
  out->data_offset = (uint16_t)data_off;
  out->page_size = (uint32_t)(data_off + data_size);
  return 0;
}
