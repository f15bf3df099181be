/* AWS Signature Version 4 for S3's API: the canonical request, the string
 * to sign, the signing key, the Authorization header and presigned URLs.
 * Pure functions over their arguments (OpenSSL's libcrypto for SHA-256 and
 * HMAC-SHA256); no I/O, no clock: the caller passes the request's time.
 *
 * The caller gives paths, query names and values decoded (the bytes S3
 * stores); this module encodes them once, the way S3 compares them: every
 * byte but the unreserved A-Z a-z 0-9 - . _ ~ becomes %XX (upper case
 * hex), a path keeps its '/', a query name or value does not. The query
 * string a request must carry on the wire is the canonical one this module
 * returns (sorted, encoded), so what is signed is what is sent: libcurl's
 * own signer was refused by Ceph's gateway for unsorted parameters, a raw
 * '/' in a value and "?uploads" without '=' (docs/collector.md).
 */
#ifndef TRACEGATE_COLLECTOR_S3_S3_SIGV4_H
#define TRACEGATE_COLLECTOR_S3_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define TG_S3_SHA256_HEX_LEN 64
/* "YYYYMMDDTHHMMSSZ" */
#define TG_S3_AMZ_DATE_LEN 16
#define TG_S3_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
/* What one request may carry: more is -E2BIG. */
#define TG_S3_MAX_PARAMS 32
#define TG_S3_MAX_HEADERS 32
/* S3 caps a presigned URL's lifetime at seven days. */
#define TG_S3_MAX_EXPIRES 604800u

/* A query parameter or header: borrowed strings. A parameter's value NULL
 * is written "name=" (S3's "?uploads" is "uploads="). */
typedef struct tg_s3_pair {
  const char *name;
  const char *value;
} tg_s3_pair_t;

/* Who signs and for what scope: borrowed strings. The secret never leaves
 * this module but as HMAC output. */
typedef struct tg_s3_key {
  const char *access_key;
  const char *secret_key;
  const char *region;  /* "us-east-1", or what the gateway's zonegroup says */
  const char *service; /* "s3" */
} tg_s3_key_t;

typedef struct tg_s3_request {
  const char *method; /* "GET", "PUT", ... */
  const char *path;   /* decoded, starting with '/': "/bucket/a b" */
  const tg_s3_pair_t *params;
  size_t n_params;
  /* Every header to sign, "host" among them (-EINVAL without); names in any
   * case, each at most once (-EINVAL). Values are trimmed and inner runs
   * of blanks folded, as the canonical form wants. */
  const tg_s3_pair_t *headers;
  size_t n_headers;
  /* Lower case hex SHA-256 of the body, or TG_S3_UNSIGNED_PAYLOAD. The
   * caller also sends it as x-amz-content-sha256 (and lists that header
   * here) for S3; the generic test suite's requests do not. */
  const char *payload_hash;
  const char *amz_date; /* TG_S3_AMZ_DATE_LEN characters */
} tg_s3_request_t;

/* Appends |s| (|n| bytes) URI-encoded to |out|, '/' kept when
 * |keep_slash|. 0 or the buffer's error. */
int tg_s3_uri_encode(tg_buf_t *out, const void *s, size_t n, bool keep_slash);

/* |out| gets 64 lower case hex digits and a NUL. */
void tg_s3_sha256_hex(const void *p, size_t n,
                      char out[TG_S3_SHA256_HEX_LEN + 1]);

/* |out| gets "YYYYMMDDTHHMMSSZ" for |unix_s| (UTC) and a NUL; -EINVAL for a
 * time before 1970 or past 9999. */
int tg_s3_amz_date(int64_t unix_s, char out[TG_S3_AMZ_DATE_LEN + 1]);

/* The canonical query string alone (sorted, encoded; "" when none): what
 * the URL carries after its '?'. Appended to |out|. */
int tg_s3_canonical_query(const tg_s3_pair_t *params, size_t n, tg_buf_t *out);

/* The canonical request (appended to |creq|) and its signed header list
 * (appended to |signed_headers| when not NULL). 0, -EINVAL (a field
 * missing or malformed), -E2BIG, or the buffer's error. */
int tg_s3_canonical_request(const tg_s3_request_t *r, tg_buf_t *creq,
                            tg_buf_t *signed_headers);

/* Signs |r|: appends the Authorization header's value to |authz| and the
 * canonical query string to |query| (when not NULL). Errors as above. */
int tg_s3_sign(const tg_s3_key_t *k, const tg_s3_request_t *r, tg_buf_t *authz,
               tg_buf_t *query);

/* A presigned URL's query string for |r| (its params plus X-Amz-Algorithm,
 * -Credential, -Date, -Expires, -SignedHeaders, then -Signature), appended
 * to |query|. r->payload_hash NULL means UNSIGNED-PAYLOAD, as S3 wants for
 * a URL. |expires_s| in 1..TG_S3_MAX_EXPIRES (-EINVAL). r->params must not
 * hold X-Amz-* names already (-EINVAL). */
int tg_s3_presign(const tg_s3_key_t *k, const tg_s3_request_t *r,
                  uint32_t expires_s, tg_buf_t *query);

#endif /* TRACEGATE_COLLECTOR_S3_S3_SIGV4_H */
