/* Fuzzes the CLI's session cache file parser (client/session_cache.c,
 * tg_session_cache_parse): `tracegate record --session-cache` reads a
 * file that may be truncated by a crash, damaged, or written by another
 * version.
 *
 * The bytes are parsed from an exact-size copy, so reads past the end show
 * up under ASan.
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL or -ENOMEM, and a failure leaves no entry;
 * - at most TG_SC_MAX_ENTRIES entries;
 * - what parsed serialises and parses back to the same number of entries,
 *   and serialising that again gives the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/session_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1700000000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint8_t own[TG_SC_FP_SIZE], ca[TG_SC_FP_SIZE];
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  tg_session_cache_t *a = NULL, *b = NULL;
  if (tg_session_cache_new(own, ca, &a) || tg_session_cache_new(own, ca, &b))
    __builtin_trap();
  int rv = tg_session_cache_parse(a, copy, size, NOW);
  if (rv != 0 && rv != -EINVAL && rv != -ENOMEM) __builtin_trap();
  if (rv != 0 && tg_session_cache_count(a) != 0) __builtin_trap();
  if (tg_session_cache_count(a) > TG_SC_MAX_ENTRIES) __builtin_trap();
  if (rv == 0) {
    tg_buf_t s1, s2;
    tg_buf_init(&s1, 0);
    tg_buf_init(&s2, 0);
    if (tg_session_cache_serialize(a, NOW, &s1) != 0) __builtin_trap();
    if (tg_session_cache_parse(b, tg_buf_begin(&s1), tg_buf_size(&s1), NOW))
      __builtin_trap();
    if (tg_session_cache_count(b) != tg_session_cache_count(a))
      __builtin_trap();
    if (tg_session_cache_serialize(b, NOW, &s2) != 0) __builtin_trap();
    if (tg_buf_size(&s1) != tg_buf_size(&s2) ||
        memcmp(tg_buf_begin(&s1), tg_buf_begin(&s2), tg_buf_size(&s1)))
      __builtin_trap();
    tg_buf_free(&s1);
    tg_buf_free(&s2);
  }
  tg_session_cache_free(a);
  tg_session_cache_free(b);
  free(copy);
  return 0;
}
