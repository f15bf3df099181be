/* Fuzzes linux.ftrace's printk_formats parser (agent/probes/ftrace_printk.h):
 * the text is the kernel's, or anything.
 *
 * Input: [chunk size][text]. The text is parsed whole and again in pieces
 * of (chunk size % 64) + 1 bytes, as reads may split it anywhere: both must
 * give the same table, sorted with one entry per address, none at address
 * 0, strings of 1 to TG_PRINTK_STR_MAX bytes, and a lookup of every
 * entry's address must give its own string while the addresses between
 * two entries give none. Nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/probes/ftrace_printk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = (size_t)(data[0] % 64) + 1;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  tg_printk_formats_t whole, parts;
  int n = tg_printk_formats_parse(&whole, text, len);
  tg_printk_formats_init(&parts);
  for (size_t o = 0; o < len; o += chunk)
    if (tg_printk_formats_feed(&parts, text + o,
                               len - o < chunk ? len - o : chunk) < 0)
      abort();
  if (n < 0 || tg_printk_formats_finish(&parts) != n ||
      parts.strs.n != whole.strs.n || (size_t)n != whole.strs.n ||
      parts.bad_lines != whole.bad_lines ||
      parts.zero_addrs != whole.zero_addrs || parts.cut != whole.cut ||
      parts.strs.dropped != whole.strs.dropped ||
      !tg__addr_strs_equal(&whole.strs, &parts.strs))
    abort();
  for (size_t i = 0; i < whole.strs.n; i++) {
    uint64_t addr = tg__addr_strs_addr(&whole.strs, i);
    size_t wl;
    const char *ws = tg__addr_strs_str(&whole.strs, i, &wl);
    if (wl == 0 || wl > TG_PRINTK_STR_MAX || addr == 0) abort();
    if (i && tg__addr_strs_addr(&whole.strs, i - 1) >= addr) abort();
    size_t l;
    const char *s = tg_printk_formats_lookup(&whole, addr, &l);
    if (!s || l != wl || memcmp(s, ws, l) != 0) abort();
    /* Exact addresses only. */
    if ((i == 0 || tg__addr_strs_addr(&whole.strs, i - 1) != addr - 1) &&
        tg_printk_formats_lookup(&whole, addr - 1, &l))
      abort();
  }
  tg_printk_formats_free(&whole);
  tg_printk_formats_free(&parts);
  return 0;
}
