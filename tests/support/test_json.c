/* SPDX-License-Identifier: Apache-2.0 */
/* tg_test_json_get (test_proc.h): a JSON file read with jansson in the
 * test's own process, the value at a dotted key written back as Python's
 * json.dumps(v, sort_keys=True) writes it, the form the tests' expected
 * texts were written in (they were read by a python3 child per value
 * until the children cost a third of the collector tests' CPU:
 * docs/operations.md, "CI's time"). */
#include "test_proc.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* A JSON string as Python writes it (ensure_ascii): \" \\ \n \r \t \b \f,
 * other controls and every non-ASCII code point as \uxxxx (lowercase, a
 * surrogate pair past U+FFFF). jansson gives valid UTF-8. */
static void put_string(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                                  : NULL;
    if (esc) {
      fputs(esc, f);
      i++;
      continue;
    }
    if (c >= 0x20 && c < 0x80) {
      fputc(c, f);
      i++;
      continue;
    }
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0xF0) cp = c & 0x07, len = 4;
    else if (c >= 0xE0) cp = c & 0x0F, len = 3;
    else if (c >= 0xC0) cp = c & 0x1F, len = 2;
    for (size_t k = 1; k < len && i + k < n; k++)
      cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      fprintf(f, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      fprintf(f, "\\u%04x", cp);
    }
  }
  fputc('"', f);
}

/* A double as Python's repr: the fewest digits that read back as it, in
 * fixed notation for exponents -4 to 15 (with ".0" when integral), else
 * d.ddde+XX. */
static void put_real(FILE *f, double v) {
  if (!isfinite(v)) {
    fputs(isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity", f);
    return;
  }
  char e[40];
  for (int prec = 0; prec < 17; prec++) {
    snprintf(e, sizeof(e), "%.*e", prec, v);
    if (strtod(e, NULL) == v) break;
  }
  /* e: [-]d[.ddd]e[+-]XX */
  char *x = strchr(e, 'e');
  int exp = atoi(x + 1);
  *x = 0;
  bool neg = e[0] == '-';
  char digits[24];
  size_t nd = 0;
  for (const char *p = e + neg; *p; p++)
    if (*p != '.') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = 0;
  if (neg) fputc('-', f);
  if (exp < -4 || exp >= 16) {
    fprintf(f, "%c", digits[0]);
    if (nd > 1) fprintf(f, ".%s", digits + 1);
    fprintf(f, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return;
  }
  if (exp < 0) {
    fputs("0.", f);
    for (int k = -1; k > exp; k--) fputc('0', f);
    fputs(digits, f);
    return;
  }
  for (int k = 0; k <= exp; k++) fputc((size_t)k < nd ? digits[k] : '0', f);
  fputc('.', f);
  fputs((size_t)exp + 1 < nd ? digits + exp + 1 : "0", f);
}

static int by_key(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* |v| as json.dumps(v, sort_keys=True): ", " and ": " between items. */
static int put_value(FILE *f, json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    size_t n = json_object_size(v), i = 0;
    const char **keys = calloc(n ? n : 1, sizeof(*keys));
    if (!keys) return -1;
    const char *k;
    json_t *item;
    json_object_foreach(v, k, item) keys[i++] = k;
    qsort(keys, n, sizeof(*keys), by_key);
    fputc('{', f);
    int rv = 0;
    for (i = 0; i < n && !rv; i++) {
      if (i) fputs(", ", f);
      put_string(f, keys[i], strlen(keys[i]));
      fputs(": ", f);
      rv = put_value(f, json_object_get(v, keys[i]));
    }
    fputc('}', f);
    free(keys);
    return rv;
  }
  case JSON_ARRAY:
    fputc('[', f);
    for (size_t i = 0; i < json_array_size(v); i++) {
      if (i) fputs(", ", f);
      if (put_value(f, json_array_get(v, i))) return -1;
    }
    fputc(']', f);
    return 0;
  case JSON_STRING:
    put_string(f, json_string_value(v), json_string_length(v));
    return 0;
  case JSON_INTEGER:
    fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    return 0;
  case JSON_REAL:
    put_real(f, json_real_value(v));
    return 0;
  case JSON_TRUE:
    fputs("true", f);
    return 0;
  case JSON_FALSE:
    fputs("false", f);
    return 0;
  case JSON_NULL:
    fputs("null", f);
    return 0;
  }
  return -1;
}

/* The value at dotted |key| in |root|: an index into an array, a name
 * into an object. NULL (said on stderr) when there is none. */
static json_t *walk(json_t *root, const char *path, const char *key) {
  json_t *v = root;
  for (const char *p = key; v;) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    char part[256];
    if (len >= sizeof(part)) return NULL;
    memcpy(part, p, len);
    part[len] = 0;
    if (json_is_array(v)) {
      char *end;
      errno = 0;
      long long i = strtoll(part, &end, 10);
      v = !*part || *end || errno || i < 0 ? NULL
                                           : json_array_get(v, (size_t)i);
    } else {
      v = json_is_object(v) ? json_object_get(v, part) : NULL;
    }
    if (!v) fprintf(stderr, "json_get %s: no %s (at %s)\n", path, key, part);
    if (!dot) break;
    p = dot + 1;
  }
  return v;
}

int tg_test_json_get(const char *path, const char *key, char *out,
                     size_t cap) {
  json_error_t err;
  json_t *root = json_load_file(path, JSON_DECODE_ANY, &err);
  if (!root) {
    fprintf(stderr, "json_get %s: not JSON: %s (line %d)\n", path, err.text,
            err.line);
    return -1;
  }
  json_t *v = walk(root, path, key);
  int rv = -1;
  FILE *f = v ? fmemopen(out, cap, "w") : NULL;
  if (f) {
    /* fmemopen keeps a NUL after what was written, within |cap|. */
    rv = put_value(f, v) == 0 && !ferror(f) ? 0 : -1;
    if (fclose(f) != 0) rv = -1;
    if (!rv && strlen(out) + 1 >= cap) {
      fprintf(stderr, "json_get %s %s: the value takes more than %zu bytes\n",
              path, key, cap);
      rv = -1;
    }
  }
  json_decref(root);
  return rv;
}
