/* Fuzzes the authorization file parser (auth/authz.h).
 *
 * The text is parsed from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan. A failure must be TG_EPARSE with a
 * NUL-terminated message naming the file; a success must give every
 * "identity role" line its role, as a plain reading of the line says, and
 * parsing the same text again must give the same table.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/authz.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Every line of a parsed file: its first word has its second word's role.
 * The lines as common/config_text.h reads them: a leading BOM skipped, a
 * comment from a '#' at the start or after a blank. */
static void check_lines(const tg_authz_t *a, const char *text, size_t len) {
  size_t off = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
  while (off < len) {
    const char *line = text + off;
    const char *nl = memchr(line, '\n', len - off);
    size_t n = nl ? (size_t)(nl - line) : len - off;
    off += n + (nl ? 1 : 0);
    for (size_t h = 0; h < n; h++)
      if (line[h] == '#' && (h == 0 || blank(line[h - 1]))) {
        n = h;
        break;
      }
    size_t i = 0;
    while (i < n && blank(line[i])) i++;
    if (i == n) continue;
    size_t id0 = i;
    while (i < n && !blank(line[i])) i++;
    size_t idlen = i - id0;
    while (i < n && blank(line[i])) i++;
    size_t r0 = i;
    while (i < n && !blank(line[i])) i++;
    size_t rlen = i - r0;
    tg_authz_role_t want = rlen == 6 && !memcmp(line + r0, "record", 6)
                               ? TG_ROLE_RECORD
                               : rlen == 7 && !memcmp(line + r0, "observe", 7)
                                     ? TG_ROLE_OBSERVE
                                     : TG_ROLE_NONE;
    /* A parsed file has only well-formed lines. */
    if (want == TG_ROLE_NONE || idlen == 0 || idlen > TG_AUTHZ_IDENTITY_MAX ||
        !tg_identity_valid_listed(line + id0, idlen, NULL))
      __builtin_trap();
    char id[TG_AUTHZ_IDENTITY_MAX + 1];
    memcpy(id, line + id0, idlen);
    id[idlen] = 0;
    if (tg_authz_role(a, id) != want) __builtin_trap();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  tg_authz_t *a = NULL;
  char err[256];
  memset(err, 'x', sizeof(err));
  int rv = tg_authz_parse(text, size, "fuzz", &a, err, sizeof(err));
  if (rv == 0) {
    if (!a) __builtin_trap();
    check_lines(a, text, size);
    if (tg_authz_role(a, "") != TG_ROLE_NONE) __builtin_trap();
    tg_authz_t *again = NULL;
    if (tg_authz_parse(text, size, "fuzz", &again, err, sizeof(err)) != 0 ||
        tg_authz_count(again) != tg_authz_count(a))
      __builtin_trap();
    tg_authz_free(again);
    tg_authz_free(a);
  } else {
    if (a) __builtin_trap();
    if (rv != TG_EPARSE && rv != -ENOMEM) __builtin_trap();
    if (!memchr(err, 0, sizeof(err)) || strncmp(err, "fuzz", 4) != 0)
      __builtin_trap();
  }
  free(text);
  return 0;
}
