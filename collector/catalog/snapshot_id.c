/* Snapshot ids (snapshot_id.h): text in, value out, and back. */
#include "collector/catalog/snapshot_id.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

int tg_coll_id_valid(uint64_t id) { return id >= 1 && id <= TG_COLL_ID_MAX; }

int tg_coll_id_parse(const char *text_untrusted, size_t n, uint64_t *id) {
  if (!text_untrusted || n != TG_COLL_ID_DIGITS) return -EINVAL;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text_untrusted[i];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return -EINVAL;
    v = v << 4 | d;
  }
  /* 16 digits fill 64 bits exactly, so the range check sees every bit. */
  if (!tg_coll_id_valid(v)) return -EINVAL;
  *id = v;
  return 0;
}

void tg_coll_id_format(uint64_t id, char out[TG_COLL_ID_STRLEN]) {
  assert(tg_coll_id_valid(id));
  static const char digits[] = "0123456789abcdef";
  for (int i = TG_COLL_ID_DIGITS - 1; i >= 0; i--) {
    out[i] = digits[id & 0xf];
    id >>= 4;
  }
  out[TG_COLL_ID_DIGITS] = 0;
}

static void name_of(uint64_t id, const char *suffix,
                    char out[TG_COLL_FILE_NAME_MAX]) {
  tg_coll_id_format(id, out);
  memcpy(out + TG_COLL_ID_DIGITS, suffix, strlen(suffix) + 1);
}

static int parse_name(const char *name, const char *suffix, uint64_t *id) {
  size_t n = strlen(name);
  if (n != TG_COLL_ID_DIGITS + strlen(suffix) ||
      strcmp(name + TG_COLL_ID_DIGITS, suffix) != 0)
    return -EINVAL;
  return tg_coll_id_parse(name, TG_COLL_ID_DIGITS, id);
}

void tg_coll_id_file_name(uint64_t id, int partial,
                          char out[TG_COLL_FILE_NAME_MAX]) {
  name_of(id, partial ? TG_COLL_PARTIAL_SUFFIX : TG_COLL_FILE_SUFFIX, out);
}

int tg_coll_id_parse_file_name(const char *name, int partial, uint64_t *id) {
  return parse_name(name, partial ? TG_COLL_PARTIAL_SUFFIX : TG_COLL_FILE_SUFFIX,
                    id);
}

void tg_coll_id_index_name(uint64_t id, int partial,
                           char out[TG_COLL_FILE_NAME_MAX]) {
  name_of(id, partial ? TG_COLL_INDEX_PARTIAL_SUFFIX : TG_COLL_INDEX_SUFFIX,
          out);
}

int tg_coll_id_parse_index_name(const char *name, int partial, uint64_t *id) {
  return parse_name(name,
                    partial ? TG_COLL_INDEX_PARTIAL_SUFFIX : TG_COLL_INDEX_SUFFIX,
                    id);
}

void tg_coll_id_symbols_name(uint64_t id, int partial,
                             char out[TG_COLL_FILE_NAME_MAX]) {
  name_of(id,
          partial ? TG_COLL_SYMBOLS_PARTIAL_SUFFIX : TG_COLL_SYMBOLS_SUFFIX,
          out);
}

int tg_coll_id_parse_symbols_name(const char *name, int partial, uint64_t *id) {
  return parse_name(
      name, partial ? TG_COLL_SYMBOLS_PARTIAL_SUFFIX : TG_COLL_SYMBOLS_SUFFIX,
      id);
}

void tg_coll_id_symidx_name(uint64_t id, int partial,
                            char out[TG_COLL_FILE_NAME_MAX]) {
  name_of(id, partial ? TG_COLL_SYMIDX_PARTIAL_SUFFIX : TG_COLL_SYMIDX_SUFFIX,
          out);
}

int tg_coll_id_parse_symidx_name(const char *name, int partial, uint64_t *id) {
  return parse_name(
      name, partial ? TG_COLL_SYMIDX_PARTIAL_SUFFIX : TG_COLL_SYMIDX_SUFFIX,
      id);
}
