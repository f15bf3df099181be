/* The DataSourceDescriptor inside a producer's request (ds_descriptor.h). */
#include "service/ds_descriptor.h"

#include <stdbool.h>

#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

enum { REQ_DATA_SOURCE_DESCRIPTOR = 1 }; /* proto/ipc/producer_port.proto */

int tg__ds_descriptor_find(const uint8_t *req_untrusted, size_t len,
                           const uint8_t **desc, size_t *desc_len) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  bool found = false;
  int rv;
  tg_pb_reader_init(&r, req_untrusted, len);
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != REQ_DATA_SOURCE_DESCRIPTOR) continue;
    if (f.type != TG_PB_WT_LEN || found) return TG_EPROTO_DECODE;
    found = true;
    *desc = f.data;
    *desc_len = f.size;
  }
  return rv == 0 && found ? 0 : TG_EPROTO_DECODE;
}
