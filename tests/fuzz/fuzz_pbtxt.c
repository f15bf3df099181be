/* Fuzzes the text-format parser (consumer/pbtxt.h) as TraceConfig.
 *
 * A success must produce bytes protobuf-c decodes as TraceConfig; a failure
 * must be TG_EPARSE with a located, NUL-terminated message and must leave
 * the output buffer as it was. The input is parsed in place, without a NUL
 * after it, so reads past |size| show up under ASan.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pb/config/trace_config.pb-c.h"
#include "consumer/pbtxt.h"
#include "tracegate/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_buf_t out;
  tg_pbtxt_error_t err;
  tg_buf_init(&out, 0);
  if (tg_buf_append(&out, "pre", 3) != 0) __builtin_trap();
  int rc = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                          (const char *)data, size, &out, &err);
  if (rc == 0) {
    Perfetto__Protos__TraceConfig *cfg = perfetto__protos__trace_config__unpack(
        NULL, tg_buf_size(&out) - 3, tg_buf_begin(&out) + 3);
    if (!cfg) __builtin_trap();
    perfetto__protos__trace_config__free_unpacked(cfg, NULL);
  } else {
    if (rc != TG_EPARSE) __builtin_trap();
    if (err.line < 1 || err.column < 1) __builtin_trap();
    if (!memchr(err.msg, '\0', sizeof(err.msg))) __builtin_trap();
    if (strncmp(err.msg, "line ", 5) != 0) __builtin_trap();
    if (tg_buf_size(&out) != 3) __builtin_trap();
  }
  if (memcmp(tg_buf_begin(&out), "pre", 3) != 0) __builtin_trap();
  tg_buf_free(&out);
  return 0;
}
