/* Fuzzes the limits on producer name patterns (service/name_regex.h), and
 * through them what glibc's regex does with every pattern they let pass:
 * patterns come from consumers, remote ones included, and the limits are
 * all that stands between them and regcomp().
 *
 * The input is the pattern, from an exact-size copy (no NUL inside is
 * kept: the first one ends it, as a C string from protobuf-c would).
 *
 * Invariants (trap on violation):
 * - the result is -E2BIG with a NUL-terminated, non-empty reason, or the
 *   pattern's positions in [1, TG_NAME_REGEX_MAX_POSITIONS];
 * - the same pattern gives the same result;
 * - a pattern that passes compiles anchored, as tracegated compiles it,
 *   and is matched against a 256-byte name (a producer's longest) and an
 *   empty one. What that costs is held by libFuzzer's -timeout and
 *   -rss_limit_mb: a pattern that passes and takes seconds or gigabytes
 *   is a finding.
 */
#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/name_regex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *pat = malloc(size + 1);
  if (!pat) return 0;
  memcpy(pat, data, size);
  pat[size] = 0;
  char why[256], why2[256];
  memset(why, 0x55, sizeof(why));
  long rv = tg_name_regex_check(pat, why, sizeof(why));
  long again = tg_name_regex_check(pat, why2, sizeof(why2));
  if (rv != again) __builtin_trap();
  if (rv < 0) {
    if (rv != -E2BIG || !memchr(why, 0, sizeof(why)) || !why[0])
      __builtin_trap();
    free(pat);
    return 0;
  }
  if (rv < 1 || rv > TG_NAME_REGEX_MAX_POSITIONS) __builtin_trap();
  size_t n = strlen(pat);
  char *anchored = malloc(n + 5);
  if (!anchored) {
    free(pat);
    return 0;
  }
  snprintf(anchored, n + 5, "^(%s)$", pat);
  regex_t re;
  if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) == 0) {
    char name[257];
    memset(name, 'a', 128);
    memset(name + 128, '.', 127);
    name[255] = 'b';
    name[256] = 0;
    (void)regexec(&re, name, 0, NULL, 0);
    (void)regexec(&re, "", 0, NULL, 0);
    regfree(&re);
  }
  free(anchored);
  free(pat);
  return 0;
}
