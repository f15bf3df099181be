/* tg_printable(): see printable.h. */
#include "common/printable.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

size_t tg_utf8_sequence(const char *s_untrusted, uint32_t *cp) {
  const unsigned char *s = (const unsigned char *)s_untrusted;
  size_t n;
  uint32_t c, min;
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    n = 2, c = s[0] & 0x1fu, min = 0x80;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    n = 3, c = s[0] & 0x0fu, min = 0x800;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    n = 4, c = s[0] & 0x07u, min = 0x10000;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
    c = c << 6 | (s[i] & 0x3fu);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  *cp = c;
  return n;
}

/* Code points that are well-formed but act on the terminal or reorder
 * the text around them. */
static bool is_control_point(uint32_t c) {
  return (c >= 0x80 && c <= 0x9f) ||     /* C1: 0x9b is CSI */
         (c >= 0x202a && c <= 0x202e) || /* bidi embeddings, overrides */
         (c >= 0x2066 && c <= 0x2069);   /* bidi isolates */
}

size_t tg_printable(char *dst, size_t cap, const char *src_untrusted) {
  static const char hex[] = "0123456789abcdef";
  if (cap == 0) return 0;
  const unsigned char *s = (const unsigned char *)(src_untrusted ? src_untrusted : "");
  size_t out = 0;
  while (*s) {
    uint32_t cp = 0;
    size_t n = s[0] >= 0x20 && s[0] < 0x7f
                   ? 1
                   : tg_utf8_sequence((const char *)s, &cp);
    if (n > 1 && is_control_point(cp)) n = 0;
    if (n) {
      if (out + n >= cap) break;
      memcpy(dst + out, s, n);
      out += n;
      s += n;
      continue;
    }
    /* One byte, escaped; the rest of a rejected sequence follows byte by
     * byte (each continuation byte is not a sequence start either). */
    if (out + 4 >= cap) break;
    dst[out++] = '\\';
    dst[out++] = 'x';
    dst[out++] = hex[s[0] >> 4];
    dst[out++] = hex[s[0] & 0xf];
    s++;
  }
  dst[out] = 0;
  return out;
}
