/* Fuzzes linux.ftrace's /proc/kallsyms parser (agent/sys/ftrace_ksyms.h):
 * the text is the kernel's, or anything.
 *
 * Input: [chunk size][text]. The text is parsed whole and again in pieces
 * of (chunk size % 64) + 1 bytes, as reads may split it anywhere: both must
 * give the same table, sorted with one symbol per address, names within
 * TG_KSYMS_NAME_MAX, and a lookup of every symbol's address must give its
 * own name. Nothing may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sys/ftrace_ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = (size_t)(data[0] % 64) + 1;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  tg_ksyms_t whole, parts;
  int n = tg_ksyms_parse(&whole, text, len);
  tg_ksyms_init(&parts);
  for (size_t o = 0; o < len; o += chunk)
    if (tg_ksyms_feed(&parts, text + o, len - o < chunk ? len - o : chunk) < 0)
      abort();
  if (n < 0 || tg_ksyms_finish(&parts) != n || parts.syms.n != whole.syms.n ||
      (size_t)n != whole.syms.n || parts.bad_lines != whole.bad_lines ||
      parts.zero_addrs != whole.zero_addrs ||
      parts.syms.dropped != whole.syms.dropped ||
      !tg__addr_strs_equal(&whole.syms, &parts.syms))
    abort();
  for (size_t i = 0; i < whole.syms.n; i++) {
    uint64_t addr = tg__addr_strs_addr(&whole.syms, i);
    size_t wl;
    const char *ws = tg__addr_strs_str(&whole.syms, i, &wl);
    if (wl == 0 || wl > TG_KSYMS_NAME_MAX) abort();
    if (i && tg__addr_strs_addr(&whole.syms, i - 1) >= addr) abort();
    size_t l;
    const char *s = tg_ksyms_lookup(&whole, addr, &l);
    if (!s || l != wl || memcmp(s, ws, l) != 0) abort();
    /* Just below a symbol: the one before, or none. */
    s = tg_ksyms_lookup(&whole, addr - 1, &l);
    if (i == 0 && s) abort();
  }
  tg_ksyms_free(&whole);
  tg_ksyms_free(&parts);
  return 0;
}
