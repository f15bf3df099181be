/* Untrusted text made safe to print.
 *
 * Strings from a peer (a service's error, a relay's host name, an ssh
 * child's stderr) go to a terminal; a terminal obeys escape sequences, so
 * such a string could move the cursor, rewrite earlier lines or retitle
 * the window. tg_printable() copies it for display: printable ASCII and
 * well-formed UTF-8 pass, anything else (control bytes, DEL, C1 controls,
 * the bidirectional overrides that reorder a line, malformed UTF-8) is
 * shown as \xHH per byte. The copy is bounded and never cuts an escape or
 * a multi-byte character in half.
 */
#ifndef TRACEGATE_COMMON_PRINTABLE_H
#define TRACEGATE_COMMON_PRINTABLE_H

#include <stddef.h>
#include <stdint.h>

/* The length of the well-formed UTF-8 sequence (RFC 3629: shortest form,
 * no surrogates, at most U+10FFFF) that |s_untrusted| starts with, its
 * code point in *cp; 0 if it starts none (an ASCII byte included). Reads
 * stop at a NUL. */
size_t tg_utf8_sequence(const char *s_untrusted, uint32_t *cp);

/* Copies |src_untrusted| (NUL-terminated; NULL reads as "") into |dst|
 * (|cap| bytes, always NUL-terminated when |cap| > 0), truncated to fit.
 * Returns the length written, without the NUL. */
size_t tg_printable(char *dst, size_t cap, const char *src_untrusted);

#endif /* TRACEGATE_COMMON_PRINTABLE_H */
