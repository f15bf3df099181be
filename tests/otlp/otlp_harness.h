/* SPDX-License-Identifier: Apache-2.0 */
/* What the tracegate-otlp end-to-end tests share: the receiver started
 * against a test tracegated (its port from --ready-fd), requests through
 * libcurl, its GET /metrics read, and `tracegate record` of the data
 * source "tracegate.otlp". Failures fail the running cmocka test. */
#ifndef TRACEGATE_TESTS_OTLP_HARNESS_H
#define TRACEGATE_TESTS_OTLP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "test_service.h"

#define OTLP_WAIT_MS 30000

typedef struct receiver {
  pid_t pid;
  int port;
} receiver_t;

/* tracegate-otlp (|otlp_path|) on producer socket |sock| with |extra|
 * flags (NULL-terminated, may be NULL), once it said it listens. */
void receiver_spawn(const char *otlp_path, const char *sock,
                    const char *const *extra, receiver_t *r);
/* SIGTERM; it must exit 0. */
void receiver_stop(receiver_t *r);

typedef struct answer {
  long status;
  char body[8192];
  size_t len;
  bool retry_after;
} answer_t;

/* |method| |path| on |r| with |body| (NULL: none) and the Content-Type and
 * Content-Encoding headers (NULL: not sent). */
answer_t otlp_http(const receiver_t *r, const char *method, const char *path,
                   const char *ct, const char *ce, const void *body,
                   size_t len);
/* POST /v1/traces. */
answer_t otlp_post(const receiver_t *r, const char *ct, const char *ce,
                   const void *body, size_t len);
/* POST /v1/traces with the body framed by chunks (Transfer-Encoding:
 * chunked, no Content-Length), as OTel's JavaScript exporters send. */
answer_t otlp_post_chunked(const receiver_t *r, const char *ct,
                           const void *body, size_t len);
/* The value of the metrics line |series| (its name and labels), or -1. */
long long otlp_metric(const receiver_t *r, const char *series);
/* tracegate_otlp_spans_total of |service| with |outcome| ("accepted",
 * "refused", ...), or -1 when |r| has no such line. */
long long otlp_spans(const receiver_t *r, const char *service,
                     const char *outcome);

/* Until |r| says a session records into its ring. */
void otlp_wait_recording(const receiver_t *r);

/* `tracegate record` (|cli_path|) of tracegate.otlp into |trace|, and
 * waits until |r| says a session records. Returns the recorder's pid. */
pid_t otlp_record_start(const char *cli_path, const test_service_t *ts,
                        const receiver_t *r, const char *trace);

/* SIGINT to the recorder: it must exit 0, its file written. */
void otlp_record_stop(pid_t rec);

/* After an SDK's client exported its request (front.handle, front.call,
 * back.serve: otlp_js_client.js and go_client alike): |r| took |n_front|
 * spans of service |front| and |n_back| of |back| and refused no
 * request; then the recorder |rec| and |r| stop. */
void otlp_sdk_took(receiver_t *r, pid_t rec, const char *front,
                   long long n_front, const char *back, long long n_back);
/* The columns both SDK tests read, each a count, in order: front.call in
 * front.handle, back.serve's event cache.miss, its error status,
 * front.call's attribute peer=back, the two services' processes (SQL
 * literals |front| and |back|), flows from front.call to back.serve. */
#define OTLP_SQL_SDK_REQUEST(front, back)                                 \
  OTLP_SQL_NESTED("front.call", "front.handle") " as nested, "            \
  "(select count(*) from slice where name = 'cache.miss') as event, "     \
  OTLP_SQL_ARG("back.serve", "debug.otel_status_code", "display_value",  \
               "'error'") " as status, "                                  \
  OTLP_SQL_ARG("front.call", "debug.peer", "display_value", "'back'")    \
  " as peer, (select count(*) from process where name in (" front ", "   \
  back ")) as procs, "                                                    \
  OTLP_SQL_FLOWS("front.call", "back.serve") " as flows"

uint64_t otlp_unix_now_ns(void);

/* The Go SDK's client (tests/otlp/go_client: OpenTelemetry's Go SDK from
 * Debian's golang-opentelemetry-otel-dev, built by `go build` in GOPATH
 * mode, its cache in the build tree) into the program |out|. Returns
 * false, having said why on stderr, when go or the SDK's sources are
 * missing (deploy/deps.sh installs both); a failed build fails the test. */
bool otlp_go_client_build(const char *out);
/* Runs it (|out| of otlp_go_client_build) with go-front exporting to
 * |front_port|'s receiver and go-back to |back_port|'s; it must exit 0.
 * Its JSON line (the ids) goes to |line|. */
void otlp_go_client_run(const char *client, int front_port, int back_port,
                        char *line, size_t cap);

/* Trace processor subqueries the tests' checks are made of, each a count:
 * slices named |child| whose parent is named |parent|; slices named
 * |slice| with the arg |key| (a debug annotation: debug.<name>, dots as
 * '_') whose |column| = |value| (an SQL literal); flows from a slice
 * named |from| to one named |to|. */
#define OTLP_SQL_NESTED(child, parent)                                 \
  "(select count(*) from slice c join slice p on c.parent_id = p.id " \
  "where c.name = '" child "' and p.name = '" parent "')"
#define OTLP_SQL_ARG(slice, key, column, value)                          \
  "(select count(*) from slice s join args a using(arg_set_id) "        \
  "where s.name = '" slice "' and a.key = '" key "' and a." column " = " \
  value ")"
#define OTLP_SQL_FLOWS(from, to)                                        \
  "(select count(*) from flow f join slice o on f.slice_out = o.id "   \
  "join slice i on f.slice_in = i.id where o.name = '" from "' and "   \
  "i.name = '" to "')"

#endif /* TRACEGATE_TESTS_OTLP_HARNESS_H */
