/* Fuzzes the reader of trace processor's standard error
 * (common/tp_import.c, tg_tp_why_of): `tracegate snapshot check` and the
 * collector's check_trace_processor pick the line that says why a file
 * does not import out of it, and trace processor's words can hold bytes
 * of the hostile trace it read.
 *
 * The text is read from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan.
 *
 * Invariants (trap on violation):
 * - the line is NUL-terminated within its buffer, not empty, and holds
 *   no control byte (tg_printable's promise);
 * - reading the same text again gives the same line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/tp_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  char a[TG_TP_WHY_MAX], b[TG_TP_WHY_MAX];
  memset(a, 'x', sizeof(a));
  tg_tp_why_of(text, size, a, sizeof(a));
  if (!memchr(a, 0, sizeof(a)) || !a[0]) __builtin_trap();
  for (const unsigned char *p = (const unsigned char *)a; *p; p++)
    if (*p < 0x20 || *p == 0x7f) __builtin_trap();
  tg_tp_why_of(text, size, b, sizeof(b));
  if (strcmp(a, b)) __builtin_trap();
  free(text);
  return 0;
}
