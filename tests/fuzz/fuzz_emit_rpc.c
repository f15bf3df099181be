/* Fuzzes tracegate-emit's rpc lines (agent/emit/rpc_wire.c): the server
 * parses requests from whoever connects to --rpc-server, the client the
 * answers of whatever it connected to.
 *
 * Input: the bytes of a connection, fed to the request parser the way the
 * server feeds it (a buffer of EMIT_RPC_LINE_MAX bytes, each whole line
 * dropped once handled), and whole to the response parser.
 *
 * Invariants (trap on violation):
 * - a line handled is whole: at most EMIT_RPC_LINE_MAX bytes, its last
 *   one '\n', none before it; MORE and OVERLONG consume nothing, MORE
 *   only below the maximum and OVERLONG only at it, each with no '\n';
 * - a call's context is valid (version not ff, non-zero ids), and the
 *   call line formatted from it parses back whole to the same context at
 *   version 0;
 * - the same bytes delivered one at a time give the same requests;
 * - a pong formats back to a line that parses to the same counts.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "agent/emit/rpc_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool nonzero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return true;
  return false;
}

/* What a connection's bytes came to, request by request. */
#define MAX_EVENTS 512
typedef struct events {
  size_t n;
  emit_rpc_req_t kind[MAX_EVENTS];
  tg_trace_context_t ctx[MAX_EVENTS];
} events_t;

static void check_line(const uint8_t *b, size_t len, size_t used,
                       emit_rpc_req_t k) {
  switch (k) {
    case EMIT_RPC_REQ_MORE:
      if (used != 0 || len >= EMIT_RPC_LINE_MAX || memchr(b, '\n', len))
        __builtin_trap();
      return;
    case EMIT_RPC_REQ_OVERLONG:
      if (used != 0 || len < EMIT_RPC_LINE_MAX ||
          memchr(b, '\n', EMIT_RPC_LINE_MAX))
        __builtin_trap();
      return;
    default:
      if (used == 0 || used > len || used > EMIT_RPC_LINE_MAX ||
          b[used - 1] != '\n' || memchr(b, '\n', used - 1))
        __builtin_trap();
  }
}

static void check_call(const tg_trace_context_t *c) {
  if (c->version == 0xff || !nonzero(c->trace_id, 16) ||
      !nonzero(c->parent_id, 8))
    __builtin_trap();
  char line[EMIT_RPC_CALL_BUF];
  size_t n = emit_rpc_format_call(c, line);
  size_t used;
  tg_trace_context_t back, want = *c;
  want.version = 0;
  if (emit_rpc_parse_request((const uint8_t *)line, n, &used, &back) !=
          EMIT_RPC_REQ_CALL ||
      used != n || memcmp(&back, &want, sizeof(back)) != 0)
    __builtin_trap();
}

/* Feeds |data| to the parser |step| bytes at a time through a server's
 * buffer, recording what came out; stops at OVERLONG (the server closes). */
static void feed(const uint8_t *data, size_t size, size_t step,
                 events_t *ev) {
  uint8_t buf[EMIT_RPC_LINE_MAX];
  size_t have = 0, at = 0;
  ev->n = 0;
  while (at < size && ev->n < MAX_EVENTS) {
    size_t room = sizeof(buf) - have, take = size - at;
    if (take > step) take = step;
    if (take > room) take = room;
    memcpy(buf + have, data + at, take);
    have += take;
    at += take;
    for (;;) {
      size_t used = 0;
      tg_trace_context_t c;
      memset(&c, 0, sizeof(c));
      emit_rpc_req_t k = emit_rpc_parse_request(buf, have, &used, &c);
      check_line(buf, have, used, k);
      if (k == EMIT_RPC_REQ_MORE) break;
      if (ev->n == MAX_EVENTS) return;
      ev->kind[ev->n] = k;
      ev->ctx[ev->n] = c;
      ev->n++;
      if (k == EMIT_RPC_REQ_OVERLONG) return;
      if (k == EMIT_RPC_REQ_CALL) check_call(&c);
      memmove(buf, buf + used, have - used);
      have -= used;
    }
  }
}

static void check_response(const uint8_t *data, size_t size) {
  size_t used;
  emit_rpc_pong_t p;
  emit_rpc_resp_t k = emit_rpc_parse_response(data, size, &used, &p);
  if (used > size || used > EMIT_RPC_LINE_MAX) __builtin_trap();
  if (k == EMIT_RPC_RESP_MORE &&
      (used || size >= EMIT_RPC_LINE_MAX || memchr(data, '\n', size)))
    __builtin_trap();
  if (k != EMIT_RPC_RESP_PONG) return;
  if (p.recording > 1) __builtin_trap();
  char line[EMIT_RPC_LINE_MAX];
  size_t n = emit_rpc_format_pong(&p, line, sizeof(line));
  emit_rpc_pong_t back;
  if (emit_rpc_parse_response((const uint8_t *)line, n, &used, &back) !=
          EMIT_RPC_RESP_PONG ||
      used != n || back.recording != p.recording || back.served != p.served ||
      back.malformed != p.malformed)
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static events_t whole, bytes;
  feed(data, size, EMIT_RPC_LINE_MAX, &whole);
  feed(data, size, 1, &bytes);
  if (whole.n != bytes.n) __builtin_trap();
  for (size_t i = 0; i < whole.n; i++)
    if (whole.kind[i] != bytes.kind[i] ||
        (whole.kind[i] == EMIT_RPC_REQ_CALL &&
         memcmp(&whole.ctx[i], &bytes.ctx[i], sizeof(whole.ctx[i])) != 0))
      __builtin_trap();
  check_response(data, size);
  return 0;
}
