/* JSON values through jansson: see json.h. */
#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/decimal.h"
#include "common/printable.h"

/* --- jansson's allocator ------------------------------------------------- */

/* A tg_json_load() under way in this thread: what its tree may still
 * take, and whether it asked for more. Other threads are not counted.
 * Blocks are plain malloc ones (malloc_usable_size() says what each
 * takes), so what jansson hands out, json_dumps()'s text included, is
 * freed with free() as its documentation says. */
static _Thread_local struct {
  bool on, over;
  size_t left;
} t_budget;

static void *counted_malloc(size_t n) {
  void *p = malloc(n);
  if (!p || !t_budget.on) return p;
  size_t took = malloc_usable_size(p);
  if (took > t_budget.left) {
    free(p);
    t_budget.over = true;
    return NULL;
  }
  t_budget.left -= took;
  return p;
}

static void counted_free(void *p) {
  /* What this thread frees while it loads goes back to its budget (the
   * parser's buffers grow by allocating anew and freeing the old). */
  if (p && t_budget.on) t_budget.left += malloc_usable_size(p);
  free(p);
}

/* jansson wants its functions set before any other call of it. */
__attribute__((constructor)) static void set_allocator(void) {
  json_set_alloc_funcs(counted_malloc, counted_free);
}

json_t *tg_json_load(const char *text_untrusted, size_t len, size_t flags,
                     size_t max_tree, json_error_t *err, int *rv) {
  t_budget.on = true;
  t_budget.over = false;
  t_budget.left = max_tree;
  json_t *v = json_loadb(text_untrusted, len, flags, err);
  t_budget.on = false;
  if (t_budget.over) {
    /* Even where jansson got past a refused allocation, the tree is not
     * the whole document. */
    json_decref(v);
    v = NULL;
    *rv = -E2BIG;
  } else if (v) {
    *rv = 0;
  } else {
    *rv = json_error_code(err) == json_error_out_of_memory ? -ENOMEM : -EINVAL;
  }
  return v;
}

/* --- text --------------------------------------------------------------------- */

/* The bytes that may follow |lead| as the second byte of a well-formed
 * sequence (Unicode Table 3-7), and how many bytes its sequence has; 0:
 * |lead| starts none. */
static size_t lead_range(unsigned char lead, unsigned char *lo,
                         unsigned char *hi) {
  *lo = 0x80, *hi = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead == 0xe0) *lo = 0xa0;
  if (lead == 0xed) *hi = 0x9f; /* no surrogates */
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead == 0xf0) *lo = 0x90;
  if (lead == 0xf4) *hi = 0x8f; /* at most U+10FFFF */
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/* The length of the maximal subpart of an ill-formed sequence at |s|
 * (the longest prefix of a well-formed sequence, at least one byte):
 * what one U+FFFD replaces. */
static size_t maximal_subpart(const unsigned char *s) {
  unsigned char lo, hi;
  size_t want = lead_range(s[0], &lo, &hi), n = 1;
  while (n < want && s[n] >= lo && s[n] <= hi) {
    n++;
    lo = 0x80, hi = 0xbf; /* third and fourth bytes: any continuation */
  }
  return n;
}

json_t *tg_json_text(const char *s_untrusted) {
  if (!s_untrusted) return json_null();
  const unsigned char *s = (const unsigned char *)s_untrusted;
  size_t len = strlen(s_untrusted);
  /* Each byte becomes at most the three of U+FFFD. */
  char *buf = len <= (SIZE_MAX - 1) / 3 ? malloc(3 * len + 1) : NULL;
  if (!buf) return NULL;
  size_t out = 0;
  while (*s) {
    uint32_t cp;
    size_t n = *s < 0x80 ? 1 : tg_utf8_sequence((const char *)s, &cp);
    if (n) {
      memcpy(buf + out, s, n);
      out += n;
      s += n;
    } else {
      memcpy(buf + out, "\xef\xbf\xbd", 3);
      out += 3;
      s += maximal_subpart(s);
    }
  }
  json_t *v = json_stringn(buf, out);
  free(buf);
  return v;
}

json_t *tg_json_u64(uint64_t v) {
  if (v <= INT64_MAX) return json_integer((json_int_t)v);
  char digits[24];
  snprintf(digits, sizeof(digits), "%" PRIu64, v);
  return json_string(digits);
}

int tg_json_get_u64(const json_t *v, uint64_t *out) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 0) return -EINVAL;
    *out = (uint64_t)i;
    return 0;
  }
  uint64_t u;
  /* The string form only where a number cannot say it, so each value has
   * one spelling. */
  if (!json_is_string(v) ||
      tg_decimal_u64(json_string_value(v), UINT64_MAX, &u) < 0 ||
      u <= INT64_MAX || json_string_value(v)[0] == '0')
    return -EINVAL;
  *out = u;
  return 0;
}

json_t *tg_json_push(json_t *arr, json_t *v) {
  if (arr && json_array_append_new(arr, v) == 0) return arr;
  if (!arr) json_decref(v);
  json_decref(arr);
  return NULL;
}

json_t *tg_json_put(json_t *obj, const char *key, json_t *v) {
  if (obj && json_object_set_new(obj, key, v) == 0) return obj;
  if (!obj) json_decref(v);
  json_decref(obj);
  return NULL;
}

int tg_json_dumpf_line(const json_t *doc, FILE *f, size_t flags) {
  errno = 0;
  if (json_dumpf(doc, f, flags) != 0 || fputc('\n', f) == EOF)
    return errno ? -errno : -EIO;
  return 0;
}
