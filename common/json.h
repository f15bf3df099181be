/* JSON values every program writes and reads the same way, through
 * jansson (the collector's API, the CLI's --json outputs and its reader
 * of the collector's answers).
 *
 * Text. jansson takes and gives only well-formed UTF-8; text from
 * elsewhere (host names, reasons, errors, names in a service's state) may
 * hold any bytes. tg_json_text() applies the one rule (docs/collector.md,
 * "Text in JSON"): each maximal subpart of an ill-formed sequence becomes
 * one U+FFFD, the Unicode Standard's recommended practice (chapter 3,
 * "U+FFFD Substitution of Maximal Subparts"), which Python's
 * bytes.decode("utf-8", "replace") and the WHATWG decoder (browsers)
 * follow too; well-formed UTF-8, control characters included, is kept
 * (jansson escapes what JSON requires). Any standard reader then reads the
 * text we meant, and the replaced bytes are lost.
 *
 * 64-bit counts. jansson's integers are signed 64-bit: a count up to
 * INT64_MAX is a JSON number; above, the string of its decimal digits
 * (as protobuf's JSON mapping writes 64-bit integers), so no value is
 * clamped or rounded. tg_json_get_u64() reads back exactly those two forms.
 *
 * Documents from outside. jansson's tree of a document takes many times
 * its text (docs/operations.md has figures), so a reader of network input
 * bounds the tree, not only the text: tg_json_load() counts what
 * jansson allocates while it parses, in the calling thread, and stops at
 * the caller's cap. For that this library gives jansson its allocator
 * (json_set_alloc_funcs(), before main() runs, so before any other jansson
 * call as jansson requires): malloc and free, counted in a load only, so
 * what jansson returns (json_dumps()) is still freed with free().
 *
 * A json_t * returned is a new reference the caller owns (json_decref),
 * or NULL when out of memory; no function keeps a pointer to its
 * arguments.
 */
#ifndef TRACEGATE_COMMON_JSON_H
#define TRACEGATE_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* |s_untrusted| (NUL-terminated) as a JSON string under the rule above;
 * NULL is JSON null. */
json_t *tg_json_text(const char *s_untrusted);

/* |v| as a JSON number, or above INT64_MAX as a string of its digits. */
json_t *tg_json_u64(uint64_t v);

/* |v| written by tg_json_u64(): a number in 0..INT64_MAX, or a string of
 * decimal digits (no sign, no leading zero) above INT64_MAX and within
 * 64 bits. 0 with *out set, or -EINVAL for anything else (the caller names
 * the field). */
int tg_json_get_u64(const json_t *v, uint64_t *out);

/* Building a document where any step may run out of memory: each takes
 * |v| (a new reference, or NULL) into |arr| or |obj| under |key| (UTF-8)
 * and returns the container, or on any failure drops both and returns
 * NULL; a NULL container drops |v| and stays NULL. So a loop of them ends
 * with the whole container or NULL. */
json_t *tg_json_push(json_t *arr, json_t *v);
json_t *tg_json_put(json_t *obj, const char *key, json_t *v);

/* json_loadb() of the |len| bytes at |text_untrusted| with |flags|, its
 * tree allowed at most |max_tree| bytes. Returns the tree, or NULL with
 * *rv set: -EINVAL (not JSON as |flags| want: |err| says where and why),
 * -E2BIG (the tree would take more than |max_tree|), -ENOMEM. */
json_t *tg_json_load(const char *text_untrusted, size_t len, size_t flags,
                     size_t max_tree, json_error_t *err, int *rv);

/* Writes |doc| to |f| with jansson's |flags| and a final newline.
 * Returns 0, or -errno of the failed write (-EIO when none is set). */
int tg_json_dumpf_line(const json_t *doc, FILE *f, size_t flags);

#endif /* TRACEGATE_COMMON_JSON_H */
