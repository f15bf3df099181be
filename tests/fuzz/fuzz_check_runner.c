/* Fuzzes the check runner's request decoder (collector/daemon/
 * check_runner.h): its bytes come from the collector's process, which
 * the runner does not trust (a collector a hostile host took over may
 * send anything to the one process that may change its uid).
 *
 * Input: the message's bytes, all of them (any length).
 *
 * Invariants (trap on violation):
 * - an accepted request had exactly one request's size, the magic and
 *   version, limits within range, and a path that is NUL-terminated
 *   inside its field, not empty and free of control characters;
 * - a refusal is BAD_SIZE exactly when the size is wrong, and always
 *   says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/check_runner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  coll_runner_req_t req;
  const char *why = NULL;
  int rv = coll_runner_req_decode(data, size, &req, &why);
  if (!why) __builtin_trap();
  if ((rv == COLL_RUNNER_BAD_SIZE) != (size != sizeof(req))) __builtin_trap();
  if (rv != COLL_RUNNER_ACCEPTED) {
    if (rv != COLL_RUNNER_BAD_SIZE && rv != COLL_RUNNER_BAD_FIELD)
      __builtin_trap();
    if (!why[0]) __builtin_trap();
    return 0;
  }
  if (req.magic != COLL_RUNNER_MAGIC || req.version != COLL_RUNNER_VERSION)
    __builtin_trap();
  if (req.timeout_ms < COLL_RUNNER_TIMEOUT_MIN_MS ||
      req.timeout_ms > COLL_RUNNER_TIMEOUT_MAX_MS ||
      req.memory < COLL_RUNNER_MEMORY_MIN || req.memory > COLL_RUNNER_MEMORY_MAX)
    __builtin_trap();
  size_t len = strnlen(req.tp, sizeof(req.tp));
  if (len == 0 || len >= sizeof(req.tp)) __builtin_trap();
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)req.tp[i] < 0x20 || req.tp[i] == 0x7f) __builtin_trap();
  if (memcmp(&req, data, sizeof(req)) != 0) __builtin_trap();
  return 0;
}
