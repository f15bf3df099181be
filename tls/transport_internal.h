/* tls/transport_internal.h: the channel's insides, shared by the two files
 * that build it: tls/transport.c (the channel: handshake, queues, frames,
 * closing) and tls/dial.c (a client channel's way to a connected socket).
 * Nothing outside tls/ includes this. */
#ifndef TRACEGATE_TLS_TRANSPORT_INTERNAL_H
#define TRACEGATE_TLS_TRANSPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "ipc/net_addr_dial.h"
#include "tls/session.h"
#include "tls/transport.h"

enum tg__tls_chan_state {
  ST_DIALING, /* client: resolving and connecting (tls/dial.c) */
  ST_HANDSHAKE,
  ST_OPEN,
  ST_CLOSING,
  ST_CLOSED
};

struct tg_tls_chan {
  tg_transport_t base; /* first: the channel is its transport */
  uv_loop_t *loop;
  uv_tcp_t tcp;     /* client: adopts the dialled socket */
  uv_timer_t timer; /* handshake timeout, then idle timeout */
  uv_idle_t kick;   /* processes buffered input after a resume */
  uv_idle_t flush;  /* writes what this loop iteration sent, once */
  uv_write_t wreq;
  tg_net_dial_t *dial; /* client: until the dial has reported */

  enum tg__tls_chan_state state;
  bool server;
  bool silent;      /* failed inside accept/connect: no owner callbacks */
  bool sniffed;     /* server: first input bytes looked like TLS */
  bool answered;    /* the peer has sent at least one byte */
  bool hs_reported; /* on_handshake has run */
  bool reading;     /* uv_read_start in effect */
  bool reading_paused;
  bool eof_pending; /* peer closed while paused with input left */
  bool writing;     /* wreq in flight over wbuf (the socket was full) */
  bool above_high_water;
  bool resumed;     /* the handshake was resumed from a ticket */
  /* A handshake step runs on the thread pool (opts.threaded_handshake):
   * until its after-callback the session is the worker thread's alone,
   * and the step counts in handles_open. */
  bool hs_working;
  int hs_rv;
  uv_work_t hs_req;
  int handles_open;
  int close_status;

  tg_tls_chan_opts_t opts;
  tg_tls_session_t *tls;
  uint64_t last_activity;

  tg_frame_decoder_t dec;
  uint8_t *plain; /* PLAIN_CAP, allocated after the handshake */
  tg_buf_t ctl;   /* control frames not yet encrypted */
  tg_buf_t bulk;  /* bulk frames not yet encrypted */
  tg_buf_t wbuf;  /* ciphertext owned by the write in flight */

  char peer[320];
  char identity[TG_TLS_IDENTITY_MAX + 1];
  char why[600];
  char suite[64];
};

/* A channel with its session and handles (tcp initialised, not connected),
 * state ST_DIALING. Errors as tg_tls_chan_accept(). */
int tg__tls_chan_new(uv_loop_t *loop, tg_tls_config_t *cfg,
                     const char *hostname, const tg_tls_chan_opts_t *opts,
                     const tg_transport_cbs_t *cbs, void *data,
                     tg_tls_chan_t **out);

/* Undoes tg__tls_chan_new after a synchronous failure: no owner callback
 * runs and the memory goes with the last close callback. */
void tg__tls_chan_abort(tg_tls_chan_t *ch);

/* Arms the handshake timeout (covers dialing for clients). */
void tg__tls_chan_start_timer(tg_tls_chan_t *ch);

/* ch->tcp is connected: start the client handshake (ClientHello). */
void tg__tls_chan_connected(tg_tls_chan_t *ch);

/* Ends the handshake phase with |status|: one log line, on_handshake,
 * then close. */
void tg__tls_chan_fail_handshake(tg_tls_chan_t *ch, int status);

/* Frees what the channel holds once no handle and no dial is left, then
 * runs on_close. */
void tg__tls_chan_finish(tg_tls_chan_t *ch);

/* Sets the failure text returned by tg_tls_chan_error(). */
void tg__tls_chan_set_why(tg_tls_chan_t *ch, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends " (addr)" to the peer name ("host:port (1.2.3.4:port)"),
 * replacing an earlier one; nothing for "". */
void tg__tls_chan_note_addr(tg_tls_chan_t *ch, const char *addr);

#endif /* TRACEGATE_TLS_TRANSPORT_INTERNAL_H */
