/* Fuzzes the finder of a producer's DataSourceDescriptor in its
 * RegisterDataSource / UpdateDataSource request (service/ds_descriptor.h),
 * differentially against protobuf-c's unpack, which tracegated runs first:
 * of a request protobuf-c takes, the finder returns exactly the bytes
 * protobuf-c decoded as the descriptor (they decode to the same message on
 * their own), and refuses it only when the descriptor is given more than
 * once (protobuf-c merges the copies; tracegated does not keep them) or
 * the request is not valid protobuf to the field reader (pb_wire.h: it
 * refuses field numbers above 2^29 - 1, which protobuf-c truncates).
 *
 * Seeds (corpus/fuzz_ds_descriptor/): a plain descriptor, one with typed
 * sub-descriptors and unknown fields, the descriptor twice, a wrong wire
 * type, truncated bytes, a request without a descriptor.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pb/ipc/producer_port.pb-c.h"
#include "service/ds_descriptor.h"
#include "tracegate/pb_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Occurrences of field 1, or -1 if the field reader refuses the bytes. */
static int descriptor_fields(const uint8_t *data, size_t size) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  int n = 0, rv;
  tg_pb_reader_init(&r, data, size);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) n += f.id == 1;
  return rv == 0 ? n : -1;
}

static uint8_t *packed(const Perfetto__Protos__DataSourceDescriptor *d, size_t *n) {
  *n = perfetto__protos__data_source_descriptor__get_packed_size(d);
  uint8_t *p = malloc(*n ? *n : 1);
  if (!p) __builtin_trap();
  perfetto__protos__data_source_descriptor__pack(d, p);
  return p;
}

static void same_descriptor(const Perfetto__Protos__DataSourceDescriptor *want,
                            const uint8_t *found, size_t len) {
  Perfetto__Protos__DataSourceDescriptor *got =
      perfetto__protos__data_source_descriptor__unpack(NULL, len, found);
  if (!got) __builtin_trap();
  size_t nw, ng;
  uint8_t *pw = packed(want, &nw), *pg = packed(got, &ng);
  if (nw != ng || memcmp(pw, pg, nw) != 0) __builtin_trap();
  free(pw);
  free(pg);
  perfetto__protos__data_source_descriptor__free_unpacked(got, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *found = NULL;
  size_t len = 0;
  int rv = tg__ds_descriptor_find(data, size, &found, &len);
  if (rv == 0 && (found < data || len > size || found + len > data + size))
    __builtin_trap();
  Perfetto__Protos__RegisterDataSourceRequest *req =
      perfetto__protos__register_data_source_request__unpack(NULL, size, data);
  if (!req) return 0; /* tracegated refuses it before looking */
  const Perfetto__Protos__DataSourceDescriptor *want = req->data_source_descriptor;
  if (rv == 0) {
    if (!want) __builtin_trap();
    same_descriptor(want, found, len);
  } else if (want && descriptor_fields(data, size) == 1) {
    __builtin_trap();
  }
  perfetto__protos__register_data_source_request__free_unpacked(req, NULL);
  return 0;
}
