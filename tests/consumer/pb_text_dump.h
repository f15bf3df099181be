/* Canonical text dump of a decoded protobuf-c message, for test fixtures.
 *
 * Fields come out in descriptor order, one per line, nested messages
 * indented by two spaces, only the fields that are present: what a test
 * would otherwise assert field by field. The dump is itself valid protobuf
 * text format, so the pbtxt fixtures can also check that it parses back to
 * the same message.
 */
#ifndef TRACEGATE_TESTS_CONSUMER_PB_TEXT_DUMP_H
#define TRACEGATE_TESTS_CONSUMER_PB_TEXT_DUMP_H

#include <protobuf-c/protobuf-c.h>

#include "common/buf.h"

/* Appends the dump of |msg| (borrowed) to |out|. Returns 0 or -ENOMEM, or
 * -EINVAL for a field type it does not know. */
int tg_test_pb_text_dump(const ProtobufCMessage *msg, tg_buf_t *out);

#endif /* TRACEGATE_TESTS_CONSUMER_PB_TEXT_DUMP_H */
