/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP request bodies for the tests and the bench: one request with a
 * client span of service "alpha" and, in another resource, the server
 * span it called in service "beta" with a child, built with protobuf-c
 * (the generated packer, not bytes by hand) and as OTLP/JSON text. */
#ifndef TRACEGATE_TESTS_OTLP_BODIES_H
#define TRACEGATE_TESTS_OTLP_BODIES_H

#include <stddef.h>
#include <stdint.h>

/* The ids the bodies use (hex in JSON). */
extern const uint8_t otlp_test_trace_id[16];
extern const uint8_t otlp_test_client_span[8]; /* alpha's "GET /a" */
extern const uint8_t otlp_test_server_span[8]; /* beta's "serve /a" */
extern const uint8_t otlp_test_child_span[8];  /* beta's "db.query" */

/* Times: unix ns of |base| + offsets; see otlp_bodies.c. */
/* The protobuf body (malloc'd, caller frees) with |base_unix_ns| as the
 * client's start, and |n_copies| copies of beta's two spans (trace ids
 * varied from the second on) for the bench; *len its size. */
uint8_t *otlp_test_pb_body(uint64_t base_unix_ns, size_t n_copies,
                           size_t *len);
/* The same request as OTLP/JSON text (malloc'd, NUL-terminated). */
char *otlp_test_json_body(uint64_t base_unix_ns);

#endif /* TRACEGATE_TESTS_OTLP_BODIES_H */
