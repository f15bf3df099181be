/* tracegate-emit's rpc lines (rpc_wire.h). Pure: every length is checked
 * against the bytes given, nothing is read past them. */
#include "agent/emit/rpc_wire.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/decimal.h"

#define CALL_PREFIX "traceparent:"
#define CALL_PREFIX_LEN (sizeof(CALL_PREFIX) - 1)

static bool blank(uint8_t c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The first line of the |len| bytes at |b|: 1, with its length ("\n"
 * included) in *used and that of its text (trailing blanks dropped) in
 * *n; 0 when none has come yet; -1 when none is within EMIT_RPC_LINE_MAX
 * bytes. *used is 0 unless 1 is returned. */
static int first_line(const uint8_t *b, size_t len, size_t *used, size_t *n) {
  size_t scan = len < EMIT_RPC_LINE_MAX ? len : EMIT_RPC_LINE_MAX;
  const uint8_t *nl = memchr(b, '\n', scan);
  *used = 0;
  if (!nl) return len >= EMIT_RPC_LINE_MAX ? -1 : 0;
  *n = (size_t)(nl - b);
  *used = *n + 1;
  while (*n > 0 && blank(b[*n - 1])) (*n)--;
  return 1;
}

static bool is(const uint8_t *b, size_t n, const char *word) {
  size_t w = strlen(word);
  return n == w && memcmp(b, word, w) == 0;
}

emit_rpc_req_t emit_rpc_parse_request(const uint8_t *buf_untrusted,
                                      size_t len, size_t *used,
                                      tg_trace_context_t *ctx) {
  size_t n = 0;
  int found = first_line(buf_untrusted, len, used, &n);
  if (found < 0) return EMIT_RPC_REQ_OVERLONG;
  if (found == 0) return EMIT_RPC_REQ_MORE;
  if (is(buf_untrusted, n, "ping")) return EMIT_RPC_REQ_PING;
  if (n < CALL_PREFIX_LEN ||
      memcmp(buf_untrusted, CALL_PREFIX, CALL_PREFIX_LEN) != 0)
    return EMIT_RPC_REQ_BAD;
  size_t at = CALL_PREFIX_LEN;
  while (at < n && (buf_untrusted[at] == ' ' || buf_untrusted[at] == '\t'))
    at++;
  tg_trace_context_t c;
  if (tg_traceparent_parse((const char *)buf_untrusted + at, n - at, &c) != 0)
    return EMIT_RPC_REQ_BAD;
  *ctx = c;
  return EMIT_RPC_REQ_CALL;
}

/* "<key>=<decimal>" at *at in |b| (|n| bytes), then a space or the end.
 * The value fits 64 bits (common/decimal.h reads it); leading zeros are
 * refused but for "0". */
static bool take_field(const uint8_t *b, size_t n, size_t *at,
                       const char *key, uint64_t *out) {
  size_t k = strlen(key);
  if (n - *at < k + 1 || memcmp(b + *at, key, k) != 0 || b[*at + k] != '=')
    return false;
  size_t start = *at + k + 1, i = start;
  while (i < n && b[i] != ' ') i++;
  /* UINT64_MAX has 20 digits: a longer value is no value. */
  char digits[21];
  size_t len = i - start;
  if (len == 0 || len >= sizeof(digits) || (b[start] == '0' && len > 1))
    return false;
  memcpy(digits, b + start, len);
  digits[len] = 0;
  if (tg_decimal_u64(digits, UINT64_MAX, out) != 0) return false;
  *at = i < n ? i + 1 : i;
  return true;
}

emit_rpc_resp_t emit_rpc_parse_response(const uint8_t *buf_untrusted,
                                        size_t len, size_t *used,
                                        emit_rpc_pong_t *pong) {
  size_t n = 0;
  int found = first_line(buf_untrusted, len, used, &n);
  if (found < 0) return EMIT_RPC_RESP_BAD;
  if (found == 0) return EMIT_RPC_RESP_MORE;
  const uint8_t *b = buf_untrusted;
  if (is(b, n, "ok")) return EMIT_RPC_RESP_OK;
  if (is(b, n, "error")) return EMIT_RPC_RESP_ERROR;
  if (n < 5 || memcmp(b, "pong ", 5) != 0) return EMIT_RPC_RESP_BAD;
  size_t at = 5;
  uint64_t rec, served, malformed;
  if (!take_field(b, n, &at, "recording", &rec) || rec > 1 ||
      !take_field(b, n, &at, "served", &served) ||
      !take_field(b, n, &at, "malformed", &malformed) || at != n)
    return EMIT_RPC_RESP_BAD;
  pong->recording = (unsigned)rec;
  pong->served = served;
  pong->malformed = malformed;
  return EMIT_RPC_RESP_PONG;
}

size_t emit_rpc_format_call(const tg_trace_context_t *ctx,
                            char out[EMIT_RPC_CALL_BUF]) {
  char tp[TG_TRACEPARENT_BUF];
  tg_traceparent_format(ctx, tp);
  int n = snprintf(out, EMIT_RPC_CALL_BUF, CALL_PREFIX " %s\n", tp);
  return (size_t)n;
}

size_t emit_rpc_format_pong(const emit_rpc_pong_t *pong, char *out,
                            size_t cap) {
  int n = snprintf(out, cap, "pong recording=%u served=%llu malformed=%llu\n",
                   pong->recording ? 1u : 0u,
                   (unsigned long long)pong->served,
                   (unsigned long long)pong->malformed);
  return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}
