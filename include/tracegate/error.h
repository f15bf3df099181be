/* Error codes shared by every tracegate module.
 *
 * Functions return 0 on success and a negative code on failure: either a
 * negated errno value (-ENOMEM, -EINVAL, ...) or a project code from the table
 * below. Project codes live in a reserved range far below any errno so the two
 * never collide (the same trick as libuv's UV__EOF and friends).
 */
#ifndef TRACEGATE_ERROR_H
#define TRACEGATE_ERROR_H

#include "tracegate/export.h"

/* X(name, value, message). Values are negative and stable: they may appear in
 * logs and in the closing status of the CLI. */
#define TG_ERRNO_MAP(X)                                                       \
  X(FRAME_TOO_LARGE, -20001, "IPC frame larger than the 131068-byte cap")     \
  X(FRAME_GARBAGE, -20002, "IPC frame does not decode")                       \
  X(PROTO_ENCODE, -20003, "protobuf encoding failed")                         \
  X(PROTO_DECODE, -20004, "protobuf message does not decode")                 \
  X(NO_SPACE, -20005, "output buffer exhausted")                              \
  X(NESTING_TOO_DEEP, -20006, "protobuf nesting deeper than supported")       \
  X(ABI_VIOLATION, -20007, "shared memory content violates the ABI")          \
  X(BAD_LAYOUT, -20008, "invalid shared memory page layout")                  \
  X(CHUNK_STATE, -20009, "chunk is not in the expected state")                \
  X(UNKNOWN_SERVICE, -20010, "unknown IPC service")                           \
  X(UNKNOWN_METHOD, -20011, "unknown IPC method")                             \
  X(BAD_CONFIG, -20012, "invalid configuration")                              \
  X(NOT_SUPPORTED, -20013, "operation not supported")                         \
  X(PEER_CLOSED, -20014, "peer closed the connection")                        \
  X(DENIED, -20015, "permission denied by policy")                            \
  X(TIMEOUT, -20016, "operation timed out")                                   \
  X(TLS, -20017, "TLS failure")                                               \
  X(TLS_HANDSHAKE, -20030, "TLS handshake failed")                            \
  X(TLS_CERT, -20031, "peer certificate rejected")                            \
  X(TLS_NOT_TLS, -20032, "peer does not speak TLS")                           \
  X(TLS_PEER_ALERT, -20033, "peer aborted the TLS connection with an alert")  \
  X(TLS_TRUNCATED, -20034,                                                    \
    "the peer's TLS stream ended without close_notify (truncated)")           \
  X(BAD_COMPRESSED, -20050,                                                   \
    "the peer sent a corrupt or oversized compressed stream")                 \
  X(PARSE, -20018, "text does not parse")                                     \
  X(REMOTE_FAILED, -20040, "the remote side answered with a failure")         \
  X(NOT_CONNECTED, -20041, "not connected to the service")                   \
  X(TOO_MANY_SEQUENCES, -20060,                                              \
    "more packet sequences than a merged trace maps for one host")

enum {
#define TG__ERR_ENUM(name, value, msg) TG_E##name = (value),
  TG_ERRNO_MAP(TG__ERR_ENUM)
#undef TG__ERR_ENUM
};

/* Returns a static, human-readable description of |err| (a 0, -errno or TG_E*
 * value). Never returns NULL; the string is owned by the library. */
TG_EXPORT const char *tg_strerror(int err);

/* Returns the symbolic name ("ENOMEM", "TG_EFRAME_TOO_LARGE") of |err|. */
TG_EXPORT const char *tg_err_name(int err);

#endif /* TRACEGATE_ERROR_H */
