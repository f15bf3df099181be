/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes tracegate-otlp's OTLP/JSON decoder
 * (agent/otlp/otlp_decode_json.c) and its span writer: the input is a
 * POST /v1/traces body any local process may send. Invariants:
 * fuzz_otlp_decode.h. */
#include "fuzz_otlp_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_run(otlp_decode_json, data, size);
  return 0;
}
