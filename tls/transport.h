/* tls/transport.h: tg_tls_chan, framed IPC over mutual TLS over TCP, on
 * libuv.
 *
 * The network transport of tracegate-relay (server side) and of the remote
 * consumer (client side). It implements tg_transport_t (ipc/transport.h):
 * [u32 LE len][IPCFrame] frames in both directions, carried inside TLS 1.2
 * (tls/session.h). There is no plain-TCP mode: a channel delivers nothing
 * until the handshake has completed and the peer's certificate is verified.
 *
 *   socket -> ciphertext -> records -> plaintext -> frame decoder -> on_frame
 *                                  \-> the rest of a large frame, decrypted
 *                                      into the decoder's room (no copy)
 *   send() -> [control queue] \
 *   send() -> [bulk queue]    -+-> encrypt (16 KiB records) -> uv_write
 *
 * Lifecycle, one enum state per channel:
 *   (client) DIALING -> HANDSHAKE -> OPEN -> CLOSING -> CLOSED
 *   (server)            HANDSHAKE -> OPEN -> CLOSING -> CLOSED
 * Clients are made by tg_tls_chan_connect() (tls/dial.h).
 * opts->on_handshake(ch, status) runs once when the handshake ends: 0 when
 * the peer is verified (read its identity now and decide), or why it
 * failed: TG_ETLS_CERT, TG_ETLS_NOT_TLS, TG_ETLS_PEER_ALERT,
 * TG_ETLS_HANDSHAKE, TG_ETIMEOUT, TG_EPEER_CLOSED, or a -errno / UV_E*
 * from resolving or connecting. A failure is followed by on_close with the
 * same status. A channel closed locally before its handshake ended gets
 * only on_close.
 *
 * Output: two plaintext queues, encrypted lazily when the socket can take
 * more (one uv_write in flight, up to ~256 KiB of records per write).
 * Control frames (tg_tls_chan_send_priority) go out before bulk frames
 * that are queued but not yet encrypted; bulk frames keep their order and
 * are never split by a control frame. Frames may be queued before the
 * handshake completes; they are sent after it. Through the transport
 * interface, tg_transport_send_frame()'s TG_FRAME_CONTROL is the control
 * queue, TG_FRAME_BARRIER tg_tls_chan_send_barrier() and TG_FRAME_BULK
 * send()'s bulk queue.
 *
 * Input: reading stops while paused (tg_transport_pause_reading); frames
 * already decrypted in the current batch (at most 256 KiB) are still
 * delivered, the rest waits for the resume.
 *
 * A failed handshake is the owner's to report: on_handshake gets its
 * status, tg_tls_chan_error() why and tg_tls_chan_peer_addr() who (the
 * channel logs it at debug level only, so that a server can hold a flood
 * of failing peers to a budget of lines). Other refusals, of a verified
 * peer, are logged once (TG_LOG) with the peer address and why.
 * Callbacks never run inside a call made by the owner (send, close,
 * pause_reading, accept, connect); they run from the loop.
 */
#ifndef TRACEGATE_TLS_TRANSPORT_H
#define TRACEGATE_TLS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ipc/transport.h"
#include "tls/session.h"

typedef struct tg_tls_chan tg_tls_chan_t;

typedef void (*tg_tls_chan_handshake_cb)(tg_tls_chan_t *ch, int status);

typedef struct tg_tls_chan_opts {
  /* From accept (server) or from the connect call (client: covers resolving
   * and connecting too) to a verified peer. 0: 10 s. */
  uint32_t handshake_timeout_ms;
  /* After the handshake: close with TG_ETIMEOUT when nothing was received
   * and no write completed for this long. 0: never. */
  uint32_t idle_timeout_ms;
  /* TCP keepalive and user timeout (tg_net_set_dead_link_timeout): the
   * kernel declares a silent peer dead within about this many seconds.
   * 0: the system's defaults (no keepalive). */
  uint32_t dead_link_timeout_s;
  /* congested() turns true above this many queued bytes and on_drain fires
   * once it falls to a quarter of it. 0: 4 MiB. */
  size_t high_water;
  /* Hard cap on queued output; send() beyond it fails with -ENOBUFS.
   * 0: 16 x high_water. */
  size_t max_queued;
  tg_tls_chan_handshake_cb on_handshake; /* required */
  /* The owner's pointer, for on_handshake: tg_tls_chan_owner(). */
  void *owner;
  /* Client: a session saved by tg_tls_chan_save_session() from an earlier
   * connection to the same server, offered for resumption (the server may
   * decline: then a full handshake). Borrowed during the connect call
   * only; NULL/0: none. */
  const uint8_t *resume_session;
  size_t resume_session_len;
  /* Run each handshake step that has input to process (the public-key
   * work) on libuv's thread pool instead of the loop's thread, so that
   * many handshakes at once use every core. The session is touched by one
   * thread at a time (the channel stops reading during a step), and the
   * config by several (tls/session.h says what that allows: no CRL
   * reload meanwhile). */
  bool threaded_handshake;
} tg_tls_chan_opts_t;

/* Accepts a pending connection on |server| (a listening uv_tcp_t) and
 * starts a server-side handshake. |cfg| (a server config), |cbs| and |data|
 * are borrowed and must outlive the channel; |opts| is copied. On success
 * *out is the new channel, owned by the caller: free it with
 * tg_tls_chan_free() after (or inside) its on_close. On failure (-EINVAL,
 * -ENOMEM, a UV_E* from uv_accept) no callback runs and nothing is left to
 * free. */
int tg_tls_chan_accept(uv_stream_t *server, tg_tls_config_t *cfg,
                       const tg_tls_chan_opts_t *opts,
                       const tg_transport_cbs_t *cbs, void *data,
                       tg_tls_chan_t **out);

/* Releases a channel whose on_close has run (may be called inside it). */
void tg_tls_chan_free(tg_tls_chan_t *ch);

/* The channel as a tg_transport_t (same object), and back. */
tg_transport_t *tg_tls_chan_transport(tg_tls_chan_t *ch);
tg_tls_chan_t *tg_tls_chan_from_transport(tg_transport_t *t);

/* Like tg_transport_send() without fd, but the frame overtakes bulk frames
 * not yet encrypted (RELAY.md: control replies are not stuck behind
 * ReadBuffers data). For small frames. Returns 0, -EINVAL (not one whole
 * frame of at most TG_IPC_FRAME_BUFFER_SIZE bytes), -EPIPE (closing),
 * -ENOBUFS (over max_queued), -ENOMEM. */
int tg_tls_chan_send_priority(tg_tls_chan_t *ch, const uint8_t *frame,
                              size_t len);

/* Queues |frame| behind every frame queued before it, control or bulk,
 * and ahead of every frame queued after (a control frame sent later does
 * not overtake it): what is queued is encrypted now. For a frame that
 * changes how the peer reads what follows (the relay's grant of
 * compression). Returns as tg_tls_chan_send_priority(), -ENOTCONN before
 * the handshake has ended, or an encryption failure (the channel closes). */
int tg_tls_chan_send_barrier(tg_tls_chan_t *ch, const uint8_t *frame,
                             size_t len);

/* Queues one frame given as its payload (an IPCFrame of at most
 * TG_IPC_FRAME_MAX_PAYLOAD bytes): the length prefix is added while the
 * payload is copied into the output queue, so a forwarder (the relay) copies
 * each frame once. |priority| as tg_tls_chan_send_priority(). Returns as
 * that, -EINVAL for an oversized payload. */
int tg_tls_chan_send_payload(tg_tls_chan_t *ch, const uint8_t *payload,
                             size_t len, bool priority);

/* Changes the idle timeout of an open channel (0: none) from now on. */
void tg_tls_chan_set_idle_timeout(tg_tls_chan_t *ch, uint32_t ms);

/* Once the handshake succeeded: whether it was resumed from a session
 * ticket (tg_tls_session_resumed()). */
bool tg_tls_chan_resumed(const tg_tls_chan_t *ch);

/* opts->owner as given. */
void *tg_tls_chan_owner(const tg_tls_chan_t *ch);

/* Client, inside on_handshake(ch, 0) or later while the channel is open:
 * tg_tls_session_save() of its session (the caller owns *out and wipes
 * it). -EINVAL when not open. */
int tg_tls_chan_save_session(const tg_tls_chan_t *ch, uint8_t **out,
                             size_t *len, uint64_t *expires);

/* The peer's identity (certificate CN, else first DNS SAN) once the
 * handshake succeeded, else NULL. Owned by the channel, valid until
 * tg_tls_chan_free(). */
const char *tg_tls_chan_peer_identity(const tg_tls_chan_t *ch);

/* The peer's address for logs: "1.2.3.4:5678" or "[::1]:5678" (clients:
 * "name:port (address)"; tg_net_sockaddr_format() in ipc/net_addr.h
 * formats an address the same way). Owned by the channel. */
const char *tg_tls_chan_peer_addr(const tg_tls_chan_t *ch);

/* Why the handshake or connection failed, in words (certificate
 * verification details included), or "". Owned by the channel. */
const char *tg_tls_chan_error(const tg_tls_chan_t *ch);

/* Negotiated ciphersuite name, or "none". */
const char *tg_tls_chan_ciphersuite(const tg_tls_chan_t *ch);

#endif /* TRACEGATE_TLS_TRANSPORT_H */
