/* tracegate-emit's request/response protocol (--rpc-server, --rpc-client):
 * one request, then its answer, on a persistent TCP connection; never two
 * requests in flight. Every message is one line:
 *
 *   request  = "traceparent: " VALUE "\n"   a call; VALUE is a W3C
 *                                           traceparent (trace_context.h)
 *            | "ping\n"                     the server's counts; no slice
 *   response = "ok\n"                       the call was served
 *            | "error\n"                    the request was malformed
 *            | "pong recording=R served=N malformed=M\n"
 *                                           R is 0 or 1: whether the
 *                                           server's "rpc" category is on
 *
 * A line, its "\n" included, is at most EMIT_RPC_LINE_MAX bytes. Spaces
 * and tabs after "traceparent:" and before the "\n" (a '\r' too) are
 * skipped; nothing else is lenient.
 *
 * The parsers are pure (no allocation, no I/O) and take any bytes: the
 * server parses what the network sent, the client what the server sent.
 */
#ifndef TRACEGATE_AGENT_EMIT_RPC_WIRE_H
#define TRACEGATE_AGENT_EMIT_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "tracegate/trace_context.h"

#define EMIT_RPC_LINE_MAX 256

typedef enum emit_rpc_req {
  EMIT_RPC_REQ_MORE,     /* no whole line yet: read more */
  EMIT_RPC_REQ_CALL,     /* *ctx holds the caller's context */
  EMIT_RPC_REQ_PING,
  EMIT_RPC_REQ_BAD,      /* a whole line, but no request: answer "error" */
  EMIT_RPC_REQ_OVERLONG, /* no "\n" in EMIT_RPC_LINE_MAX bytes: the framing
                          * is lost, answer "error" and close */
} emit_rpc_req_t;

/* The first request in the |len| bytes at |buf_untrusted| (borrowed for
 * the call). For CALL, PING and BAD, *used is the length of its line
 * ("\n" included), which the caller drops; otherwise 0. *ctx (the
 * caller's) is written only for CALL. */
emit_rpc_req_t emit_rpc_parse_request(const uint8_t *buf_untrusted,
                                      size_t len, size_t *used,
                                      tg_trace_context_t *ctx);

typedef enum emit_rpc_resp {
  EMIT_RPC_RESP_MORE, /* no whole line yet (and fewer than the maximum) */
  EMIT_RPC_RESP_OK,
  EMIT_RPC_RESP_ERROR,
  EMIT_RPC_RESP_PONG, /* *pong holds the counts */
  EMIT_RPC_RESP_BAD,  /* not a response: the connection is unusable */
} emit_rpc_resp_t;

typedef struct emit_rpc_pong {
  unsigned recording; /* 0 or 1 */
  uint64_t served, malformed;
} emit_rpc_pong_t;

/* The first response in |len| bytes at |buf_untrusted|, as
 * emit_rpc_parse_request; *pong (the caller's) is written only for
 * PONG. */
emit_rpc_resp_t emit_rpc_parse_response(const uint8_t *buf_untrusted,
                                        size_t len, size_t *used,
                                        emit_rpc_pong_t *pong);

/* The request line of a call with |ctx| (borrowed) into |out|, NUL after
 * it; returns its length (without the NUL). */
#define EMIT_RPC_CALL_BUF (sizeof("traceparent: \n") + TG_TRACEPARENT_LEN)
size_t emit_rpc_format_call(const tg_trace_context_t *ctx,
                            char out[EMIT_RPC_CALL_BUF]);

/* The pong line into |out| (|cap| bytes, at least EMIT_RPC_LINE_MAX);
 * returns its length. */
size_t emit_rpc_format_pong(const emit_rpc_pong_t *pong, char *out,
                            size_t cap);

#endif /* TRACEGATE_AGENT_EMIT_RPC_WIRE_H */
