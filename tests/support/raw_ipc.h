/* A blocking IPC client for tests, built on abi/ only (no libuv): it speaks
 * the wire by hand so tests can also speak it wrongly on purpose. Replies
 * that arrive while waiting for another request are queued, not lost. */
#ifndef TRACEGATE_TESTS_RAW_IPC_H
#define TRACEGATE_TESTS_RAW_IPC_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/ipc_frame.h"

#define RAW_MAX_QUEUED 256
#define RAW_MAX_METHODS 32

typedef struct raw_frame {
  tg_ipc_frame_t *frame; /* owned */
  int fd;                /* always -1: see raw_take_fd */
} raw_frame_t;

typedef struct raw_conn {
  int fd;
  tg_frame_decoder_t dec;
  uint64_t next_request;
  uint32_t service_id;
  char *method_names[RAW_MAX_METHODS];
  uint32_t method_ids[RAW_MAX_METHODS];
  size_t n_methods;
  raw_frame_t queue[RAW_MAX_QUEUED];
  size_t n_queued;
  int pending_fds[8];
  size_t n_pending_fds;
} raw_conn_t;

/* Returns 0 or -errno. */
int raw_connect(raw_conn_t *c, const char *path);
void raw_close(raw_conn_t *c);
/* Binds |service| and records its method table. Returns 0, or -1 if the
 * service refused the bind. */
int raw_bind(raw_conn_t *c, const char *service);
uint32_t raw_method_id(const raw_conn_t *c, const char *name);
/* Sends an InvokeMethod; returns its request id (> 0) or a negative error. */
int64_t raw_invoke(raw_conn_t *c, const char *method, const ProtobufCMessage *args,
                   int fd, bool drop_reply);
/* The same with a method id as given (0 or unknown ids for error tests). */
int64_t raw_invoke_id(raw_conn_t *c, uint32_t method_id,
                      const ProtobufCMessage *args, int fd, bool drop_reply);
/* Sends one frame as given (any kind, for protocol error tests). */
int raw_send_frame(raw_conn_t *c, const tg_ipc_frame_t *f);
/* Sends raw bytes as they are (for garbage tests). */
int raw_send_bytes(raw_conn_t *c, const void *p, size_t n);
/* One sendmsg() of |n| bytes on |sock|, |fd| (when >= 0) attached to the
 * first: the bytes taken, or -errno. */
ssize_t raw_sendmsg_fd(int sock, const void *p, size_t n, int fd);
/* Waits up to |timeout_ms| for the next reply to |request_id| (0: any
 * frame). Returns 1 with |out| filled (caller frees out->frame with
 * tg_ipc_frame_free and closes out->fd), 0 on timeout, -1 on EOF/error. */
int raw_wait(raw_conn_t *c, uint64_t request_id, int timeout_ms, raw_frame_t *out);
/* Invoke + wait for the reply; unpacks reply_proto with |desc| into
 * |*reply| (may be NULL). Returns 1 success, 0 success=false, -1 error. */
int raw_call(raw_conn_t *c, const char *method, const ProtobufCMessage *args,
             int fd, const ProtobufCMessageDescriptor *desc,
             ProtobufCMessage **reply, int timeout_ms);
/* Waits for the reply to |request_id|, like raw_call. */
int raw_wait_reply(raw_conn_t *c, uint64_t request_id,
                   const ProtobufCMessageDescriptor *desc,
                   ProtobufCMessage **reply, int timeout_ms);
/* Half-closes the connection, waits (bounded) until the peer closed its
 * side too, then raw_close()s. True if the peer saw the hang-up: from then
 * on it has processed the disconnect. */
bool raw_hangup(raw_conn_t *c, int timeout_ms);
/* The oldest file descriptor received and not yet taken (the caller owns
 * it), or -1. A frame's fd has arrived by the time the frame is decoded. */
int raw_take_fd(raw_conn_t *c);
/* True if the peer closed the connection within |timeout_ms|. */
bool raw_wait_closed(raw_conn_t *c, int timeout_ms);

#endif /* TRACEGATE_TESTS_RAW_IPC_H */
