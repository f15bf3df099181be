/* Which producer name patterns tracegated hands to the C library's regex
 * compiler.
 *
 * A TraceConfig's producer_name_regex_filter and a trigger's
 * producer_name_regex come from consumers: local ones, and remote clients
 * with the record role through a relay. glibc's regcomp() and regexec()
 * have no limits of their own: nested bounds and repetitions cost them
 * time and memory exponentially, and deep parentheses their stack
 * (docs/security.md, Limits, has what was measured). So a pattern is
 * compiled only if it stays within what is measured to be cheap:
 *
 * - at most TG_NAME_REGEX_MAX_LEN bytes and TG_NAME_REGEX_MAX_DEPTH levels
 *   of parentheses, balanced (tracegated compiles "^(PAT)$" to match whole
 *   names: a stray ')' would close that group);
 * - a bound ({m}, {m,}, {m,n}) or a "+" (which glibc compiles as a copy
 *   and a "*") applies to a character, a bracket expression or a group
 *   without repetition inside, and a bound is at most
 *   TG_NAME_REGEX_MAX_BOUND; "{" starts a bound only in those three forms
 *   (a literal brace is "\{");
 * - repetitions nest at most TG_NAME_REGEX_MAX_HEIGHT deep ("(ab*)*": 2),
 *   none comes right after another ("a*+", "()++"), and none repeats
 *   what can match nothing ("(a*)*", "(a|)+", "()*");
 * - no back-reference (\1 .. \9: glibc's extension to EREs, whose matching
 *   is exponential);
 * - its cost at most TG_NAME_REGEX_MAX_POSITIONS: each character or
 *   bracket expression counts 1, or TG_NAME_REGEX_LOOSE under a
 *   repetition (regexec() keeps those live at once), a bound multiplies
 *   what it applies to by its most copies and a "+" by 2.
 *
 * What such a pattern matches is what regcomp(REG_EXTENDED) makes of it;
 * these rules only refuse. A config's patterns together are held to
 * TG_NAME_REGEX_MAX_CONFIG_POSITIONS by the session (session_config.c).
 */
#ifndef TRACEGATE_SERVICE_NAME_REGEX_H
#define TRACEGATE_SERVICE_NAME_REGEX_H

#include <stddef.h>

#define TG_NAME_REGEX_MAX_LEN 1024
#define TG_NAME_REGEX_MAX_DEPTH 16
#define TG_NAME_REGEX_MAX_BOUND 255
#define TG_NAME_REGEX_MAX_HEIGHT 2
#define TG_NAME_REGEX_LOOSE 4
#define TG_NAME_REGEX_MAX_POSITIONS 1024
#define TG_NAME_REGEX_MAX_CONFIG_POSITIONS 4096

/* Checks |pat| (NUL-terminated) against the rules above. Returns its
 * cost (at least 1, so that a config's sum also bounds how many patterns
 * it compiles), or -E2BIG with why it is refused in |why| (|n|
 * bytes, NUL-terminated). A pattern regcomp() would refuse as malformed
 * may pass: regcomp() still decides that. */
long tg_name_regex_check(const char *pat, char *why, size_t n);

#endif /* TRACEGATE_SERVICE_NAME_REGEX_H */
