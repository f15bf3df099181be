/* Protobuf text format to wire format, for any protobuf-c message type.
 *
 * The CLI reads TraceConfig from the same .pbtxt files that Perfetto's
 * `perfetto --txt -c` takes. The parser is driven by protobuf-c descriptors,
 * so a field added to a .proto needs no change here.
 *
 * Grammar (what Perfetto's configs use): `name: value`, `name { ... }`,
 * `name: { ... }`, `name < ... >`, lists `name: [v, v]` / `name [{...}]`,
 * optional `;` or `,` after a field, `#` comments. Integers in decimal, hex
 * and octal with per-type range checks; floats with exponents, an `f` suffix,
 * inf and nan; bools as true/false/t/f/True/False/1/0; enums by name or
 * (defined) number; strings and bytes in '...' or "..." with C escapes,
 * \u/\U as UTF-8, adjacent literals concatenated. Extension and Any names
 * (`[foo.bar]`) are rejected.
 *
 * The output is written in text order: a field given twice is encoded twice,
 * which decoders merge (last scalar wins, messages merge). Repeated scalars
 * are always encoded unpacked, which every decoder accepts. Required fields
 * are not checked. Nesting is limited to TG_PBTXT_MAX_DEPTH messages.
 * Floats go through strtod(), so LC_NUMERIC must be "C" (the default).
 */
#ifndef TRACEGATE_CONSUMER_PBTXT_H
#define TRACEGATE_CONSUMER_PBTXT_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "common/buf.h"

#define TG_PBTXT_MAX_DEPTH 64

typedef struct tg_pbtxt_error {
  unsigned line;   /* 1-based */
  unsigned column; /* 1-based, in bytes (a tab counts as one) */
  /* "line 3, column 7: unknown field 'duration_msx' in ...". */
  char msg[256];
} tg_pbtxt_error_t;

/* Parses |text| (|len| bytes, need not be NUL-terminated; borrowed for the
 * call) as a message of type |desc| and appends its wire encoding to |out|.
 * Returns 0; TG_EPARSE when the text is wrong, with |err| (may be NULL)
 * naming the place and what was expected; or the tg_buf error (-ENOMEM,
 * -ENOBUFS at the buffer's cap), with |err| filled too. On failure |out| is
 * restored to the size it had on entry. */
int tg_pbtxt_parse(const ProtobufCMessageDescriptor *desc,
                             const char *text, size_t len, tg_buf_t *out,
                             tg_pbtxt_error_t *err);

#endif /* TRACEGATE_CONSUMER_PBTXT_H */
