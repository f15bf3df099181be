/* Fuzzes common/json.c's handling of bytes from outside: tg_json_text(),
 * which makes any bytes the JSON text of the one rule (U+FFFD per maximal
 * subpart of an ill-formed sequence), and tg_json_get_u64(), which reads
 * a count back from a reply in its two forms.
 *
 * Input: the text, up to its first NUL byte (the texts are C strings).
 *
 * Invariants (trap on violation):
 * - the result is valid UTF-8 (jansson's json_string() takes it) at most
 *   three times as long as the input;
 * - text that was valid UTF-8 is unchanged, and so the rule is idempotent;
 * - a count read from the text as a JSON string is above INT64_MAX and
 *   tg_json_u64() writes it back as the same string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *in = malloc(size + 1);
  if (!in) return 0;
  memcpy(in, data, size);
  in[size] = 0;
  size_t len = strlen(in);
  json_t *out = tg_json_text(in);
  json_t *plain = json_string(in); /* NULL: not valid UTF-8 */
  if (out) {
    const char *o = json_string_value(out);
    size_t olen = json_string_length(out);
    json_t *check = json_string(o);
    if (!check || olen > 3 * len || strlen(o) != olen) __builtin_trap();
    json_decref(check);
    if (plain && strcmp(o, in) != 0) __builtin_trap();
    json_t *again = tg_json_text(o);
    if (again && strcmp(json_string_value(again), o) != 0) __builtin_trap();
    json_decref(again);
  }
  uint64_t v;
  if (plain && tg_json_get_u64(plain, &v) == 0) {
    json_t *back = tg_json_u64(v);
    if (v <= INT64_MAX || !json_is_string(back) ||
        strcmp(json_string_value(back), in) != 0)
      __builtin_trap();
    json_decref(back);
  }
  json_decref(plain);
  json_decref(out);
  free(in);
  return 0;
}
