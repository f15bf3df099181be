/* A framed transport: whatever carries [u32 len][IPCFrame] frames between
 * two peers. The IPC client (ipc/client.h) and the relay speak to a
 * transport, not to a socket, so the same protocol code runs over a UNIX
 * channel (ipc/channel.h, with fd passing), TLS over TCP (tls/transport.h)
 * or a pipe pair (the relay's --stdio mode).
 *
 * An implementation embeds tg_transport_t as its first member and fills
 * |ops|; the owner sets |cbs| and |data| before the first callback can run
 * (i.e. before returning to the loop). Callback rules are those of
 * tg_ipc_chan_t: never run inside send(); on_close runs once, from the loop,
 * after which the owner may free the transport's memory.
 */
#ifndef TRACEGATE_IPC_TRANSPORT_H
#define TRACEGATE_IPC_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_transport tg_transport_t;

typedef struct tg_transport_cbs {
  /* One complete frame payload (an IPCFrame, without the length prefix),
   * valid during the call. Return non-zero to stop reading further frames
   * from the current input (e.g. after closing the transport). */
  int (*on_frame)(tg_transport_t *t, const uint8_t *payload, size_t len);
  /* Queued output fell below the low-water mark after having been above
   * the high-water mark. Optional. */
  void (*on_drain)(tg_transport_t *t);
  /* Closed and released; |status| says why (0 for a local close,
   * TG_EPEER_CLOSED, a TLS or frame error, -errno). Required. */
  void (*on_close)(tg_transport_t *t, int status);
} tg_transport_cbs_t;

/* Where a frame given to send_frame() goes among the frames queued before
 * and after it. A transport with one queue sends every class in order,
 * which satisfies all three. */
typedef enum tg_frame_class {
  /* In order with every other bulk frame (what send() queues); a
   * compressing transport takes it into its stream. ReadBuffers data. */
  TG_FRAME_BULK,
  /* May go ahead of bulk frames queued and not yet on their way, in order
   * with other control frames, never splitting a bulk frame: small replies
   * that must not wait behind trace data. */
  TG_FRAME_CONTROL,
  /* Behind every frame queued before it, control or bulk, and ahead of
   * every frame queued after it: a frame that changes how the peer reads
   * what follows (the relay's grant of compression). */
  TG_FRAME_BARRIER,
} tg_frame_class_t;

typedef struct tg_transport_ops {
  /* Queues one whole frame ([len][IPCFrame]) and copies it. |fd| >= 0 rides
   * with the frame (ownership passes to the transport); transports that
   * cannot carry fds close it and return -EOPNOTSUPP. Returns 0, -EPIPE when
   * closing, -ENOMEM. */
  int (*send)(tg_transport_t *t, const uint8_t *frame, size_t len, int fd);
  /* Removes and returns the oldest fd received with the current frame, or
   * -1. Transports without fd passing always return -1. */
  int (*take_fd)(tg_transport_t *t);
  /* True while queued output is above the high-water mark. */
  bool (*congested)(const tg_transport_t *t);
  /* Bytes queued and not yet written. */
  size_t (*pending)(const tg_transport_t *t);
  void (*pause_reading)(tg_transport_t *t, bool paused);
  /* Idempotent; on_close follows from the loop. */
  void (*close)(tg_transport_t *t, int status);
  /* Optional. From on_frame: hands over the buffer the frame |payload| was
   * assembled in, so that a caller that keeps the frame need not copy it.
   * The caller frees the result with free(); |payload| stays where it was
   * in it. NULL when the frame is not in a buffer of its own (then copy
   * it) or the transport cannot tell. */
  uint8_t *(*adopt_frame)(tg_transport_t *t, const uint8_t *payload);
  /* Optional. Queues one whole frame ([len][IPCFrame], at most
   * TG_IPC_FRAME_BUFFER_SIZE bytes) as |cls| says, and copies it once.
   * NULL: the transport has one queue and send() is every class. Returns
   * as send(), -EINVAL when the length prefix is not |len| - 4, and for
   * TG_FRAME_BARRIER -ENOTCONN while the transport cannot order frames
   * yet (a TLS handshake in progress). */
  int (*send_frame)(tg_transport_t *t, const uint8_t *frame, size_t len,
                    tg_frame_class_t cls);
  /* Optional. From now on, closes with TG_ETIMEOUT after |ms| of silence
   * (0: never). NULL: the transport has no idle timeout (a pipe learns of
   * its peer's end from the pipe). */
  void (*set_idle_timeout)(tg_transport_t *t, uint32_t ms);
  /* Optional. Why the transport failed, in words, beyond its close status
   * (a certificate's verification details), or "". Owned by the
   * transport, valid until its memory is freed. NULL: it never has more
   * to say than the status. */
  const char *(*error)(const tg_transport_t *t);
} tg_transport_ops_t;

struct tg_transport {
  const tg_transport_ops_t *ops;
  const tg_transport_cbs_t *cbs; /* set by the owner; must outlive it */
  void *data;                    /* owner's */
};

static inline int tg_transport_send(tg_transport_t *t, const uint8_t *frame,
                                    size_t len, int fd) {
  return t->ops->send(t, frame, len, fd);
}
static inline int tg_transport_take_fd(tg_transport_t *t) {
  return t->ops->take_fd(t);
}
static inline bool tg_transport_congested(const tg_transport_t *t) {
  return t->ops->congested(t);
}
static inline size_t tg_transport_pending(const tg_transport_t *t) {
  return t->ops->pending(t);
}
static inline void tg_transport_pause_reading(tg_transport_t *t, bool p) {
  t->ops->pause_reading(t, p);
}
static inline void tg_transport_close(tg_transport_t *t, int status) {
  t->ops->close(t, status);
}
static inline uint8_t *tg_transport_adopt_frame(tg_transport_t *t,
                                                const uint8_t *payload) {
  return t->ops->adopt_frame ? t->ops->adopt_frame(t, payload) : NULL;
}

static inline int tg_transport_send_frame(tg_transport_t *t,
                                          const uint8_t *frame, size_t len,
                                          tg_frame_class_t cls) {
  return t->ops->send_frame ? t->ops->send_frame(t, frame, len, cls)
                            : t->ops->send(t, frame, len, -1);
}
/* Returns 0, or -EOPNOTSUPP when the transport has no idle timeout. */
static inline int tg_transport_set_idle_timeout(tg_transport_t *t,
                                                uint32_t ms) {
  if (!t->ops->set_idle_timeout) return -EOPNOTSUPP;
  t->ops->set_idle_timeout(t, ms);
  return 0;
}
static inline const char *tg_transport_error(const tg_transport_t *t) {
  return t->ops->error ? t->ops->error(t) : "";
}

#endif /* TRACEGATE_IPC_TRANSPORT_H */
