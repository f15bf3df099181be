/* SPDX-License-Identifier: Apache-2.0 */
/* From a request's headers and body to a decoder, and to the HTTP status
 * OTLP/HTTP asks for (specification, "OTLP/HTTP Response"). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "agent/otlp/otlp_decode.h"
#include "consumer/packet_inflate.h"
#include "tracegate/error.h"

/* The media type of |ct| (before any ';' parameters, spaces trimmed) is
 * |want|, compared without case as RFC 9110 says. */
static bool media_is(const char *ct, const char *want) {
  size_t n = strcspn(ct, ";");
  while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t')) n--;
  return n == strlen(want) && strncasecmp(ct, want, n) == 0;
}

int otlp_decode_body(const otlp_body_t *body, tg_buf_t *scratch,
                     const otlp_sink_t *sink, otlp_result_t *res,
                     const char **reason, int *err) {
  memset(res, 0, sizeof(*res));
  *err = 0;
  bool json;
  if (media_is(body->content_type, "application/x-protobuf")) {
    json = false;
  } else if (media_is(body->content_type, "application/json")) {
    json = true;
  } else {
    *reason = "Content-Type must be application/x-protobuf or "
              "application/json";
    return 415;
  }
  const uint8_t *data = body->data;
  size_t len = body->len;
  const char *ce = body->content_encoding;
  if (strcasecmp(ce, "gzip") == 0) {
    int rv = tg_inflate_capped(data, len, true, scratch);
    if (rv == -ENOBUFS) {
      *reason = "the gzip body inflates past the receiver's limit";
      return 413;
    }
    if (rv < 0) {
      *err = rv;
      *reason = rv == -ENOMEM ? "out of memory" : "the gzip body is corrupt";
      return rv == -ENOMEM ? 500 : 400;
    }
    data = tg_buf_begin(scratch);
    len = tg_buf_size(scratch);
  } else if (ce[0] != '\0' && strcasecmp(ce, "identity") != 0) {
    *reason = "Content-Encoding must be gzip or none";
    return 415;
  }
  int rv = json ? otlp_decode_json(data, len, sink, res)
                : otlp_decode_pb(data, len, sink, res);
  if (rv == TG_EPARSE) {
    *reason = json ? "the body is not an OTLP/JSON ExportTraceServiceRequest"
                   : "the body is not an OTLP protobuf "
                     "ExportTraceServiceRequest";
    return 400;
  }
  if (rv == -E2BIG) {
    *reason = "the decoded body would exceed the receiver's memory limit";
    return 413;
  }
  if (rv < 0) {
    *err = rv;
    *reason = "the receiver failed";
    return 500;
  }
  return 200;
}
