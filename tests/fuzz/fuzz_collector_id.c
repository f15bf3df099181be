/* Fuzzes the snapshot id parser (collector/catalog/snapshot_id.h): ids come from
 * outside (HTTP paths, command lines) and name files in the store.
 *
 * Input: the id text, all of it (NULs included: the parser takes a
 * length), then again as a directory entry name cut at its first NUL.
 *
 * Invariants (trap on violation):
 * - an accepted id is exactly 16 bytes of [0-9a-f] and a value
 *   1..TG_COLL_ID_MAX;
 * - formatting the value gives the input back byte for byte (one spelling
 *   per id);
 * - the file names made from the value parse back to it, and a name the
 *   file name parser accepts is exactly the one made from its value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/catalog/snapshot_id.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME_MAX_TEXT 64

static void check_name(const char *name, int partial) {
  uint64_t id;
  if (tg_coll_id_parse_file_name(name, partial, &id) != 0) return;
  if (!tg_coll_id_valid(id)) __builtin_trap();
  char again[TG_COLL_FILE_NAME_MAX];
  tg_coll_id_file_name(id, partial, again);
  if (strcmp(again, name) != 0) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  uint64_t id = 0;
  if (tg_coll_id_parse(text, size, &id) == 0) {
    if (size != TG_COLL_ID_DIGITS || !tg_coll_id_valid(id)) __builtin_trap();
    for (size_t i = 0; i < size; i++)
      if (!((data[i] >= '0' && data[i] <= '9') ||
            (data[i] >= 'a' && data[i] <= 'f')))
        __builtin_trap();
    char back[TG_COLL_ID_STRLEN];
    tg_coll_id_format(id, back);
    if (memcmp(back, text, TG_COLL_ID_DIGITS) != 0) __builtin_trap();
    for (int partial = 0; partial < 2; partial++) {
      char name[TG_COLL_FILE_NAME_MAX];
      uint64_t again;
      tg_coll_id_file_name(id, partial, name);
      if (tg_coll_id_parse_file_name(name, partial, &again) != 0 || again != id)
        __builtin_trap();
    }
  }
  char name[NAME_MAX_TEXT + 1];
  size_t n = size < NAME_MAX_TEXT ? size : NAME_MAX_TEXT;
  memcpy(name, data, n);
  name[n] = 0;
  check_name(name, 0);
  check_name(name, 1);
  return 0;
}
