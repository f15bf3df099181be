/* Snapshot ids: the one parser and formatter.
 *
 * A snapshot id is allocated by the catalog (never reused, increasing) and
 * written everywhere as exactly 16 lowercase hexadecimal digits, the 64-bit
 * value zero-padded: "000000000000002a". The value is 1..2^63-1 (catalogs
 * keep it in a signed 64-bit column), so the first digit is 0..7 and the
 * text is never all zeros. There is one spelling per id: no upper case, no
 * prefix, no sign, no blanks, no shorter or longer form, so that ids
 * compare as strings, sort in allocation order and cannot alias.
 *
 * Ids from outside (an HTTP path, a command line) go through
 * tg_coll_id_parse() before anything else sees them; file names are made
 * by tg_coll_id_file_name() from the parsed value, never from the text.
 */
#ifndef TRACEGATE_COLLECTOR_CATALOG_SNAPSHOT_ID_H
#define TRACEGATE_COLLECTOR_CATALOG_SNAPSHOT_ID_H

#include <stddef.h>
#include <stdint.h>

#define TG_COLL_ID_DIGITS 16
/* Room for the text and its NUL. */
#define TG_COLL_ID_STRLEN (TG_COLL_ID_DIGITS + 1)
#define TG_COLL_ID_MAX ((uint64_t)INT64_MAX)
/* "<id>.pftrace" and "<id>.pftrace.partial", with the NUL. */
#define TG_COLL_FILE_SUFFIX ".pftrace"
#define TG_COLL_PARTIAL_SUFFIX ".pftrace.partial"
#define TG_COLL_FILE_NAME_MAX \
  (TG_COLL_ID_DIGITS + sizeof(TG_COLL_PARTIAL_SUFFIX))
/* The snapshot's host index (snap_index.h) beside its file: "<id>.index",
 * "<id>.index.partial" while written. */
#define TG_COLL_INDEX_SUFFIX ".index"
#define TG_COLL_INDEX_PARTIAL_SUFFIX ".index.partial"
_Static_assert(sizeof(TG_COLL_INDEX_PARTIAL_SUFFIX) <=
                   sizeof(TG_COLL_PARTIAL_SUFFIX),
               "index names fit a file name's room");
/* Its symbols (the collector's `symbolize`, docs/collector.md): the
 * ModuleSymbols packets "<id>.symbols" and their host index "<id>.symidx"
 * (snap_index.h's format over the symbols file), ".partial" in tmp/ while
 * written. */
#define TG_COLL_SYMBOLS_SUFFIX ".symbols"
#define TG_COLL_SYMBOLS_PARTIAL_SUFFIX ".symbols.partial"
#define TG_COLL_SYMIDX_SUFFIX ".symidx"
#define TG_COLL_SYMIDX_PARTIAL_SUFFIX ".symidx.partial"
_Static_assert(sizeof(TG_COLL_SYMBOLS_PARTIAL_SUFFIX) <=
                       sizeof(TG_COLL_PARTIAL_SUFFIX) &&
                   sizeof(TG_COLL_SYMIDX_PARTIAL_SUFFIX) <=
                       sizeof(TG_COLL_PARTIAL_SUFFIX),
               "symbols names fit a file name's room");

/* Parses the |n| bytes at |text_untrusted| (no terminator needed). Returns
 * 0 and the value in *id, or -EINVAL (*id untouched) for anything but the
 * form above. */
int tg_coll_id_parse(const char *text_untrusted, size_t n, uint64_t *id);

/* Writes the 16 digits of |id| and a NUL into |out|. |id| must be valid
 * (1..TG_COLL_ID_MAX): a programmer error otherwise. */
void tg_coll_id_format(uint64_t id, char out[TG_COLL_ID_STRLEN]);

/* Whether |id| is a value a catalog may hand out. */
int tg_coll_id_valid(uint64_t id);

/* The file name of snapshot |id| in the store's snapshots/ directory
 * ("<id>.pftrace"), or, |partial| set, in its tmp/ directory
 * ("<id>.pftrace.partial"), into |out|. */
void tg_coll_id_file_name(uint64_t id, int partial,
                          char out[TG_COLL_FILE_NAME_MAX]);

/* Parses a directory entry name: 0 and *id when |name| is exactly the
 * file name of a snapshot (partial or not, as asked), else -EINVAL. */
int tg_coll_id_parse_file_name(const char *name, int partial, uint64_t *id);

/* The same for the snapshot's index: "<id>.index" in snapshots/, or,
 * |partial| set, "<id>.index.partial" in tmp/. */
void tg_coll_id_index_name(uint64_t id, int partial,
                           char out[TG_COLL_FILE_NAME_MAX]);
int tg_coll_id_parse_index_name(const char *name, int partial, uint64_t *id);

/* The same for its symbols ("<id>.symbols") and their index
 * ("<id>.symidx"). */
void tg_coll_id_symbols_name(uint64_t id, int partial,
                             char out[TG_COLL_FILE_NAME_MAX]);
int tg_coll_id_parse_symbols_name(const char *name, int partial, uint64_t *id);
void tg_coll_id_symidx_name(uint64_t id, int partial,
                            char out[TG_COLL_FILE_NAME_MAX]);
int tg_coll_id_parse_symidx_name(const char *name, int partial, uint64_t *id);

#endif /* TRACEGATE_COLLECTOR_CATALOG_SNAPSHOT_ID_H */
