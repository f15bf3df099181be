/* JSON for the CLI's machine-readable output (--summary-json, query
 * --json, stats --json): strings escaped whatever bytes they hold, and any
 * protobuf-c message written whole from its descriptor.
 *
 * A message becomes an object keyed by the .proto field names (Perfetto's,
 * snake_case); fields not set are left out; repeated fields are arrays;
 * enums are their value names (the number where the name is unknown);
 * 64-bit integers are plain JSON numbers (exact in Python and jq 1.7, not
 * above 2^53 in JavaScript); bytes are base64; a float that is not finite
 * is null; unknown fields are left out. Only the file writer allocates. */
#ifndef TRACEGATE_CONSUMER_CLI_JSON_OUT_H
#define TRACEGATE_CONSUMER_CLI_JSON_OUT_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

/* |s| as a JSON string ("null" for NULL): well-formed UTF-8 as it is;
 * quotes, backslashes and control bytes escaped; a byte that is not part
 * of well-formed UTF-8 as \u00XX (the code point of its value), so the
 * output is valid JSON whatever |s| held. */
void cli_json_str(FILE *f, const char *s);

/* |m| as a JSON object ("null" for NULL). Nesting is bounded by the
 * message types themselves (the CLI writes only decoded replies). */
void cli_json_pb(FILE *f, const ProtobufCMessage *m);

/* Writes what |put| prints (given |arg|) to |path|, or to standard
 * output for "-". A file is written beside |path| and renamed over it, so
 * a reader sees the old file or the whole new one. Returns 0, or -errno
 * (the caller says why, naming its flag). */
int cli_json_file_write(const char *path, void (*put)(FILE *f, const void *arg),
                        const void *arg);

#endif /* TRACEGATE_CONSUMER_CLI_JSON_OUT_H */
