/* JSON for the CLI's machine-readable output (--summary-json, query
 * --json, stats --json), built as jansson trees: any protobuf-c message
 * made whole from its descriptor, and a document written to a file whole.
 *
 * A message becomes an object keyed by the .proto field names (Perfetto's,
 * snake_case); fields not set are left out; repeated fields are arrays;
 * enums are their value names (the number where the name is unknown);
 * strings follow common/json.h's rule for bytes that are not UTF-8;
 * 64-bit integers are JSON numbers (exact in Python and jq 1.7, not above
 * 2^53 in JavaScript), an unsigned one above INT64_MAX the string of its
 * digits (common/json.h); bytes are base64; a float that is not finite is
 * null; unknown fields are left out. */
#ifndef TRACEGATE_CLI_JSON_OUT_H
#define TRACEGATE_CLI_JSON_OUT_H

#include <stdio.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* |m| as a JSON object (JSON null for NULL): a new reference the caller
 * owns, or NULL when out of memory. Nesting is bounded by the message
 * types themselves (the CLI writes only decoded replies). */
json_t *cli_json_pb(const ProtobufCMessage *m);

/* Writes |doc| as one line of JSON to standard output. Returns 0, or
 * CLI_EXIT_FAIL after saying why on stderr (|doc| NULL: out of memory). */
int cli_json_stdout(const json_t *doc);

/* Writes |doc| (jansson's |flags|, then a newline) to |path|, or to
 * standard output for "-", as cli_json_file_write does. */
int cli_json_doc_write(const char *path, const json_t *doc, size_t flags);

/* Writes what |put| prints (given |arg|; it returns 0 or -errno) to
 * |path|, or to standard output for "-". A file is written beside |path|
 * and renamed over it, so a reader sees the old file or the whole new
 * one. Returns 0, or -errno (the caller says why, naming its flag). */
int cli_json_file_write(const char *path, int (*put)(FILE *f, const void *arg),
                        const void *arg);

#endif /* TRACEGATE_CLI_JSON_OUT_H */
