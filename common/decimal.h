/* Decimal numbers from outside: digits and nothing else.
 *
 * strtoul() and its kin also take leading blanks and a sign (a '-' in front
 * of an unsigned conversion wraps: "-65535" reads as 2^64 - 65535), so a
 * number from a flag, a config file, an HTTP header or a query string
 * passed through them says more than it was checked for. These take
 * ASCII digits only (leading zeros allowed), all of the string, and
 * refuse what does not fit instead of saturating.
 */
#ifndef TRACEGATE_COMMON_DECIMAL_H
#define TRACEGATE_COMMON_DECIMAL_H

#include <stdint.h>

/* Parses |s_untrusted| (NUL-terminated) whole as a decimal in [0, max].
 * Returns 0 and the value in *out; -EINVAL when it is empty or holds
 * anything but digits, -ERANGE when it is above |max| (*out untouched
 * either way). */
int tg_decimal_u64(const char *s_untrusted, uint64_t max, uint64_t *out);

/* The same with one optional leading '-', for a value in [min, max]. */
int tg_decimal_i64(const char *s_untrusted, int64_t min, int64_t max,
                   int64_t *out);

#endif /* TRACEGATE_COMMON_DECIMAL_H */
