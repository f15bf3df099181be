/* A producer's DataSourceDescriptor, kept as the bytes it sent.
 *
 * QueryServiceState gives every consumer each registered descriptor whole,
 * as Perfetto's service does: the fields we read (name, notify flags, id)
 * and those we do not (track_event_descriptor, gpu_counter_descriptor,
 * ftrace_descriptor, fields newer than our .proto). Keeping the request's
 * own bytes returns them byte for byte, with no decode/re-encode round
 * that could reorder or drop any of it.
 *
 * Owns: nothing; it finds the descriptor inside a request. Must never
 * decide whether a descriptor is accepted (producer_port.c does, against
 * the limits below).
 */
#ifndef TRACEGATE_SERVICE_DS_DESCRIPTOR_H
#define TRACEGATE_SERVICE_DS_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#include "abi/ipc_frame.h"

/* Room that one QueryServiceState reply frame needs around a descriptor:
 * IPCFrame.request_id (tag + up to 10 bytes), msg_invoke_method_reply (tag +
 * 3-byte length), success and has_more (2 each), reply_proto (tag + 3),
 * QueryServiceStateResponse.service_state (tag + 3),
 * TracingServiceState.data_sources (tag + 3), DataSource.ds_descriptor
 * (tag + 3), DataSource.producer_id (tag + 3: ids are 16-bit). */
#define TG_DS_DESCRIPTOR_REPLY_OVERHEAD (11u + 4 + 2 + 2 + 4 + 4 + 4 + 4 + 4)

/* The largest descriptor a producer may register: one whose
 * QueryServiceState entry still fits a frame by itself (131029 bytes;
 * Perfetto's own QueryServiceStateLargeResponse test registers 131022). */
#define TG_DS_DESCRIPTOR_MAX_BYTES \
  (TG_IPC_FRAME_MAX_PAYLOAD - TG_DS_DESCRIPTOR_REPLY_OVERHEAD)

/* Finds the data_source_descriptor (field 1) of a RegisterDataSourceRequest
 * or an UpdateDataSourceRequest (same layout). On 0, |*desc| points into
 * |req_untrusted| (which must outlive its use) for |*desc_len| bytes.
 * Returns TG_EPROTO_DECODE when the request is malformed, has no
 * descriptor, or has it more than once (protobuf would merge the copies;
 * no producer sends them). The descriptor's own content is not checked:
 * the caller has protobuf-c unpack the request for the fields it reads. */
int tg__ds_descriptor_find(const uint8_t *req_untrusted, size_t len,
                           const uint8_t **desc, size_t *desc_len);

#endif /* TRACEGATE_SERVICE_DS_DESCRIPTOR_H */
