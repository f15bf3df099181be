/* Fuzzes the grammar of durations and sizes (common/units.c): every flag
 * and config key that takes one reads it from outside (argv, config
 * files).
 *
 * Input: the text, up to its first NUL byte (a C string cannot hold one;
 * the config parser refuses files with NUL bytes before this is reached).
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL or -ERANGE; an error gives a reason and
 *   leaves the output alone;
 * - the value formats (tg_units_format_*) and the text parses back to
 *   the same value (a size of bytes alone formats as a number alone);
 * - the unit of a number alone matters only to input without a unit: a
 *   value that parses without one parses the same with any, and one that
 *   parses with bare 1000 but not with bare 0 is a number alone, x1000 of
 *   its bare-1 value when that parses;
 * - parsing is deterministic.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef int (*parse_fn)(const char *, uint64_t, uint64_t *, const char **);
typedef int (*format_fn)(uint64_t, char *, size_t);

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

static int checked(parse_fn parse, const char *s, uint64_t bare, uint64_t *v) {
  const char *why = NULL;
  *v = UNTOUCHED;
  int rv = parse(s, bare, v, &why);
  if (rv != 0 && rv != -EINVAL && rv != -ERANGE) __builtin_trap();
  if (rv != 0 && (!why || !*why || *v != UNTOUCHED)) __builtin_trap();
  uint64_t again = UNTOUCHED;
  if (parse(s, bare, &again, NULL) != rv || (rv == 0 && again != *v))
    __builtin_trap();
  return rv;
}

static void one(parse_fn parse, format_fn format, const char *s) {
  uint64_t v0, v1, v1000;
  int r0 = checked(parse, s, 0, &v0);
  int r1 = checked(parse, s, 1, &v1);
  int r1000 = checked(parse, s, 1000, &v1000);
  /* With units (or zero) the bare unit is not consulted. */
  if (r0 == 0 && (r1 != 0 || r1000 != 0 || v1 != v0 || v1000 != v0))
    __builtin_trap();
  /* A number alone, exactly scaled (bare 1 refuses fractions bare 1000
   * may take, so only that direction holds). */
  if (r1 == 0 && r0 != 0) {
    if (v1 <= UINT64_MAX / 1000 ? (r1000 != 0 || v1000 != v1 * 1000)
                                : r1000 != -ERANGE)
      __builtin_trap();
  }
  if (r1 == 0) {
    char out[TG_UNITS_FORMAT_MAX];
    uint64_t back;
    if (format(v1, out, sizeof(out)) <= 0) __builtin_trap();
    if (parse(out, 1, &back, NULL) != 0 || back != v1) __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = 0;
  one(tg_units_parse_duration, tg_units_format_duration, s);
  one(tg_units_parse_size, tg_units_format_size, s);
  free(s);
  return 0;
}
