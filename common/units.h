/* The one grammar of durations and sizes, for every flag and config key.
 *
 * Durations (in milliseconds):
 *   "500ms", "10s", "1.5s", "2m", "1h", "1d", "1m30s": terms of a number
 *   and a unit (ms, s, m or min, h, d; any case) that add up.
 * Sizes (in bytes, binary multiples: 1K = 1024):
 *   "4096", "64k", "64K", "64kb", "64KiB", "1.5G": a number and an
 *   optional unit (B; K, M, G, T, each alone or followed by B or iB; any
 *   case).
 * A number is ASCII digits with an optional fraction ("1.5", ".5"). A
 * number alone is zero, or counts in the caller's unit (|bare|, e.g. the
 * seconds of a flag that always took seconds); where there is none it is
 * refused, as it is as one term among several ("1m30" is ambiguous).
 * Everything is exact integer arithmetic: a value that is not a whole
 * number of milliseconds (bytes) is refused, not rounded, as are signs,
 * blanks, unknown units, trailing bytes and whatever exceeds 64 bits.
 *
 * docs/commands.md ("Durations and sizes") is the user-facing copy of
 * this grammar; keep the two in step.
 */
#ifndef TRACEGATE_COMMON_UNITS_H
#define TRACEGATE_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* The grammar in a few lines, for --help texts. */
#define TG_UNITS_HELP                                                        \
  "durations: 500ms, 10s, 1.5s, 2m (or 2min), 1h, 1d, 1m30s (terms add "   \
  "up)\nsizes: 4096, 64K, 64KB, 64KiB, M, G, T in any case (binary: 1K = "  \
  "1024 bytes)\na number alone counts the unit its flag names (seconds, " \
  "bytes where it names none)\n"

/* Room for any formatted value, NUL included. */
#define TG_UNITS_FORMAT_MAX 48

/* Parses |s_untrusted| (NUL-terminated, read whole) as a duration. A
 * number alone counts |bare_ms| milliseconds per unit (0: only zero may
 * go without a unit). Returns 0 and the value in *ms; -EINVAL (bad
 * syntax, a unit missing, finer than 1 ms) or -ERANGE (above 2^64 - 1
 * ms), with *why set to a static phrase for the error message (*ms is
 * untouched on error). |why| may be NULL. */
int tg_units_parse_duration(const char *s_untrusted, uint64_t bare_ms,
                            uint64_t *ms, const char **why);

/* The same for a size, in bytes; a number alone counts |bare_bytes|
 * bytes per unit (0: only zero may go without a unit). */
int tg_units_parse_size(const char *s_untrusted, uint64_t bare_bytes,
                        uint64_t *bytes, const char **why);

/* Writes |ms| into |out| (|n| bytes, at least TG_UNITS_FORMAT_MAX for any
 * value) in the spelling tg_units_parse_duration() reads back exactly:
 * "0s", "1500ms" as "1s500ms", "90000" as "1m30s". Returns the length, or
 * -ENOSPC (|out| then holds a truncated string when n > 0). */
int tg_units_format_duration(uint64_t ms, char *out, size_t n);

/* The same for a size: the largest of T, G, M, K that divides it exactly
 * ("64M", "1536K"), else bytes alone ("1000"). */
int tg_units_format_size(uint64_t bytes, char *out, size_t n);

#endif /* TRACEGATE_COMMON_UNITS_H */
