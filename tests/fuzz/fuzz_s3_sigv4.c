/* Fuzzes SigV4's canonical forms (collector/s3/s3_sigv4.h): object keys,
 * prefixes and upload ids come from callers and from a bucket's listings.
 *
 * Input: NUL-separated fields: the method, the path, then pairs of query
 * name and value (an empty value field is a NULL value) until a field
 * "--", then pairs of header name and value.
 *
 * Invariants (trap on violation):
 * - URI encoding writes only unreserved bytes, '%' with two upper case hex
 *   digits (and '/' when kept), and decodes back to its input;
 * - a canonical query holds only encoded bytes, '=' and '&', one '=' per
 *   parameter, and is sorted;
 * - a request that signs gives an Authorization value with the scope and a
 *   64 hex digit signature, and signs the same twice.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/s3/s3_sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FIELDS 80

static int hexval(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool unreserved(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Checks |enc| decodes to |raw|; '/' allowed raw when |slash|. */
static void round_trip(const uint8_t *raw, size_t n, const uint8_t *enc,
                       size_t m, bool slash) {
  size_t j = 0;
  for (size_t i = 0; i < m; i++) {
    uint8_t c = enc[i];
    if (c == '%') {
      if (i + 2 >= m) __builtin_trap();
      int h = hexval(enc[i + 1]), l = hexval(enc[i + 2]);
      if (h < 0 || l < 0) __builtin_trap();
      uint8_t d = (uint8_t)(h * 16 + l);
      if (unreserved(d) || (slash && d == '/')) __builtin_trap();
      if (j >= n || raw[j++] != d) __builtin_trap();
      i += 2;
    } else {
      if (!unreserved(c) && !(slash && c == '/')) __builtin_trap();
      if (j >= n || raw[j++] != c) __builtin_trap();
    }
  }
  if (j != n) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  for (int slash = 0; slash < 2; slash++) {
    tg_buf_reset(&b);
    if (tg_s3_uri_encode(&b, data, size, slash) != 0) __builtin_trap();
    round_trip(data, size, tg_buf_begin(&b), tg_buf_size(&b), slash);
  }

  /* Fields: copies, NUL-terminated. */
  char *copy = malloc(size + 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  const char *f[MAX_FIELDS];
  size_t nf = 0;
  for (char *p = copy; nf < MAX_FIELDS && p <= copy + size;) {
    f[nf++] = p;
    p += strlen(p) + 1;
  }
  tg_s3_pair_t params[TG_S3_MAX_PARAMS + 2], headers[TG_S3_MAX_HEADERS + 2];
  size_t np = 0, nh = 0, i = 2;
  for (; i + 1 < nf && strcmp(f[i], "--") != 0 && np < TG_S3_MAX_PARAMS + 2;
       i += 2)
    params[np++] = (tg_s3_pair_t){f[i], f[i + 1][0] ? f[i + 1] : NULL};
  if (i < nf && strcmp(f[i], "--") == 0) i++;
  for (; i + 1 < nf && nh < TG_S3_MAX_HEADERS + 2; i += 2)
    headers[nh++] = (tg_s3_pair_t){f[i], f[i + 1]};

  tg_buf_reset(&b);
  if (tg_s3_canonical_query(params, np, &b) == 0) {
    const uint8_t *q = tg_buf_begin(&b);
    size_t m = tg_buf_size(&b), eq = 0, amp = 0;
    for (size_t k = 0; k < m; k++) {
      if (q[k] == '=') eq++;
      else if (q[k] == '&') amp++;
      else if (q[k] != '%' && !unreserved(q[k]))
        __builtin_trap();
    }
    if (np && (eq != np || amp != np - 1)) __builtin_trap();
    if (!np && m) __builtin_trap();
  }

  tg_s3_request_t r = {
      .method = nf > 0 ? f[0] : "",
      .path = nf > 1 ? f[1] : "",
      .params = params,
      .n_params = np,
      .headers = headers,
      .n_headers = nh,
      .payload_hash = TG_S3_UNSIGNED_PAYLOAD,
      .amz_date = "20150830T123600Z",
  };
  tg_s3_key_t k = {"AKIDEXAMPLE", "secret", "us-east-1", "s3"};
  tg_buf_t a1, a2;
  tg_buf_init(&a1, 0);
  tg_buf_init(&a2, 0);
  int rc1 = tg_s3_sign(&k, &r, &a1, NULL);
  int rc2 = tg_s3_sign(&k, &r, &a2, NULL);
  if (rc1 != rc2) __builtin_trap();
  if (rc1 == 0) {
    static const char head[] =
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/"
        "aws4_request, SignedHeaders=";
    size_t m = tg_buf_size(&a1);
    const char *s = (const char *)tg_buf_begin(&a1);
    if (m != tg_buf_size(&a2) || memcmp(s, tg_buf_begin(&a2), m) != 0)
      __builtin_trap();
    if (m < sizeof head - 1 + 64 || memcmp(s, head, sizeof head - 1) != 0)
      __builtin_trap();
    for (size_t j = m - 64; j < m; j++)
      if (!((s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'f')))
        __builtin_trap();
  } else if (tg_buf_size(&a1) != 0) {
    __builtin_trap();
  }
  tg_buf_free(&a1);
  tg_buf_free(&a2);
  tg_buf_free(&b);
  free(copy);
  return 0;
}
