/* The trace files the CLI writes in the fleet tests, decoded whole, and
 * the checks on their test packets (for_testing, str "tag" or "tag:...",
 * seq_value counting up from a first value; fleet_harness.h's producer
 * steps write them). Failures fail the running cmocka test. Path and
 * tag arguments are borrowed for the call only.
 */
#ifndef TRACEGATE_TESTS_CONSUMER_FLEET_TRACE_H
#define TRACEGATE_TESTS_CONSUMER_FLEET_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb/trace/trace_packet.pb-c.h"

/* The packets of one file, in order. Owned by the caller between
 * fleet_trace_load() and fleet_trace_free(), which frees every packet and
 * the array. */
typedef struct fleet_trace {
  Perfetto__Protos__TracePacket **pk;
  size_t n;
} fleet_trace_t;

/* Decodes |path|: it must exist, be non-empty, and every byte must belong
 * to a whole Trace.packet. Overwrites |t|. */
void fleet_trace_load(const char *path, fleet_trace_t *t);
void fleet_trace_free(fleet_trace_t *t);

/* A test packet whose str is |tag|, or starts with |tag| and ':'. */
bool fleet_has_tag(const Perfetto__Protos__TracePacket *pk, const char *tag);
/* How many of |t|'s packets are |tag|'s. */
size_t fleet_trace_count_tag(const fleet_trace_t *t, const char *tag);
/* |tag|'s packets are exactly first, first + 1, ... (n of them), in order:
 * no gap, no duplicate, nothing more. */
void fleet_trace_assert_values(const fleet_trace_t *t, const char *tag,
                               uint32_t first, size_t n);

#endif /* TRACEGATE_TESTS_CONSUMER_FLEET_TRACE_H */
