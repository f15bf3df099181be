// SPDX-License-Identifier: Apache-2.0
/* AWS Signature Version 4 (s3_sigv4.h). The steps follow AWS's
 * description: canonical request, string to sign, signing key derived from
 * the secret and the scope, signature; every input is checked before it is
 * written into a string that is hashed, so that a request that signs is one
 * a gateway can parse back the same way. */
#include "collector/s3/s3_sigv4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#define ALGORITHM "AWS4-HMAC-SHA256"
/* Bounds on the fields of the scope and the header names and values: far
 * above what S3 uses, low enough that no sum overflows. */
#define NAME_MAX_LEN 128
#define SECRET_MAX_LEN 256
#define VALUE_MAX_LEN 8192

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
         c == '~';
}

int tg_s3_uri_encode(tg_buf_t *out, const void *s, size_t n, bool keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *p = s;
  /* At most three bytes out per byte in: reserve once. */
  if (n > (SIZE_MAX - 1) / 3) return -E2BIG;
  uint8_t *w = tg_buf_reserve(out, n * 3 + 1);
  if (!w) return -ENOMEM;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = p[i];
    if (unreserved(c) || (keep_slash && c == '/')) {
      w[o++] = c;
    } else {
      w[o++] = '%';
      w[o++] = (uint8_t)hex[c >> 4];
      w[o++] = (uint8_t)hex[c & 15];
    }
  }
  tg_buf_commit(out, o);
  return 0;
}

static void to_hex(const unsigned char *d, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[2 * n] = '\0';
}

void tg_s3_sha256_hex(const void *p, size_t n,
                      char out[TG_S3_SHA256_HEX_LEN + 1]) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(p, n, d);
  to_hex(d, sizeof d, out);
}

int tg_s3_amz_date(int64_t unix_s, char out[TG_S3_AMZ_DATE_LEN + 1]) {
  /* 253402300799: 9999-12-31T23:59:59Z. */
  if (unix_s < 0 || unix_s > 253402300799LL) return -EINVAL;
  time_t t = (time_t)unix_s;
  struct tm tm;
  if (!gmtime_r(&t, &tm)) return -EINVAL;
  if (strftime(out, TG_S3_AMZ_DATE_LEN + 1, "%Y%m%dT%H%M%SZ", &tm) !=
      TG_S3_AMZ_DATE_LEN)
    return -EINVAL;
  return 0;
}

static int append(tg_buf_t *b, const char *s) {
  return tg_buf_append(b, s, strlen(s));
}

/* Printable ASCII without blanks or the scope's separator: what an access
 * key, a region and a service name are. */
static bool scope_word(const char *s) {
  if (!s || !*s || strlen(s) > NAME_MAX_LEN) return false;
  for (const char *p = s; *p; p++)
    if (*p <= ' ' || *p >= 0x7f || *p == '/' || *p == ',') return false;
  return true;
}

static bool valid_date(const char *d) {
  if (!d || strlen(d) != TG_S3_AMZ_DATE_LEN || d[8] != 'T' || d[15] != 'Z')
    return false;
  for (int i = 0; i < 15; i++)
    if (i != 8 && (d[i] < '0' || d[i] > '9')) return false;
  return true;
}

static bool valid_payload_hash(const char *h) {
  if (!h) return false;
  if (strcmp(h, TG_S3_UNSIGNED_PAYLOAD) == 0) return true;
  if (strlen(h) != TG_S3_SHA256_HEX_LEN) return false;
  for (const char *p = h; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  return true;
}

static bool valid_method(const char *m) {
  if (!m || !*m || strlen(m) > 16) return false;
  for (const char *p = m; *p; p++)
    if (*p < 'A' || *p > 'Z') return false;
  return true;
}

/* An HTTP token (RFC 9110): what a header name may be. */
static bool valid_header_name(const char *n) {
  if (!n || !*n || strlen(n) > NAME_MAX_LEN) return false;
  for (const unsigned char *p = (const unsigned char *)n; *p; p++) {
    if (*p <= ' ' || *p >= 0x7f) return false;
    if (strchr("\"(),/:;<=>?@[\\]{}", *p)) return false;
  }
  return true;
}

/* A header value without CR, LF or other control bytes but tab: nothing
 * that could end the header early on the wire. */
static bool valid_header_value(const char *v) {
  if (!v || strlen(v) > VALUE_MAX_LEN) return false;
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if ((*p < ' ' && *p != '\t') || *p == 0x7f) return false;
  return true;
}

typedef struct span {
  size_t off, len;
} span_t;

typedef struct canon_item {
  span_t name, value;
} canon_item_t;

static int cmp_span(const uint8_t *base, span_t a, span_t b) {
  size_t n = a.len < b.len ? a.len : b.len;
  int c = memcmp(base + a.off, base + b.off, n);
  if (c) return c;
  return (a.len > b.len) - (a.len < b.len);
}

/* Insertion sort: at most TG_S3_MAX_* items, and no qsort context pointer
 * in C11. Sorts by name, then value (equal names are S3's to order so). */
static void sort_items(const uint8_t *base, canon_item_t *it, size_t n) {
  for (size_t i = 1; i < n; i++) {
    canon_item_t x = it[i];
    size_t j = i;
    while (j > 0) {
      int c = cmp_span(base, it[j - 1].name, x.name);
      if (c == 0) c = cmp_span(base, it[j - 1].value, x.value);
      if (c <= 0) break;
      it[j] = it[j - 1];
      j--;
    }
    it[j] = x;
  }
}

int tg_s3_canonical_query(const tg_s3_pair_t *params, size_t n, tg_buf_t *out) {
  if (n > TG_S3_MAX_PARAMS) return -E2BIG;
  if (n && !params) return -EINVAL;
  canon_item_t it[TG_S3_MAX_PARAMS];
  tg_buf_t enc;
  tg_buf_init(&enc, 0);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = params[i].name;
    const char *value = params[i].value ? params[i].value : "";
    if (!name || !*name || strlen(name) > VALUE_MAX_LEN ||
        strlen(value) > VALUE_MAX_LEN) {
      rc = -EINVAL;
      goto done;
    }
    it[i].name.off = tg_buf_size(&enc);
    if ((rc = tg_s3_uri_encode(&enc, name, strlen(name), false))) goto done;
    it[i].name.len = tg_buf_size(&enc) - it[i].name.off;
    it[i].value.off = tg_buf_size(&enc);
    if ((rc = tg_s3_uri_encode(&enc, value, strlen(value), false))) goto done;
    it[i].value.len = tg_buf_size(&enc) - it[i].value.off;
  }
  const uint8_t *base = tg_buf_begin(&enc);
  sort_items(base, it, n);
  for (size_t i = 0; i < n; i++) {
    if ((i && (rc = tg_buf_append(out, "&", 1))) ||
        (rc = tg_buf_append(out, base + it[i].name.off, it[i].name.len)) ||
        (rc = tg_buf_append(out, "=", 1)) ||
        (rc = tg_buf_append(out, base + it[i].value.off, it[i].value.len)))
      goto done;
  }
done:
  tg_buf_free(&enc);
  return rc;
}

/* Appends "name:value\n" for each header, sorted by lower case name, to
 * |canon| and "name;name" to |signed_h|. */
static int canonical_headers(const tg_s3_pair_t *h, size_t n, tg_buf_t *canon,
                             tg_buf_t *signed_h) {
  if (n > TG_S3_MAX_HEADERS) return -E2BIG;
  if (!h) return -EINVAL;
  canon_item_t it[TG_S3_MAX_HEADERS];
  tg_buf_t tmp;
  tg_buf_init(&tmp, 0);
  int rc = 0;
  bool host = false;
  for (size_t i = 0; i < n; i++) {
    if (!valid_header_name(h[i].name) || !valid_header_value(h[i].value)) {
      rc = -EINVAL;
      goto done;
    }
    size_t nl = strlen(h[i].name);
    it[i].name.off = tg_buf_size(&tmp);
    uint8_t *w = tg_buf_reserve(&tmp, nl);
    if (!w) {
      rc = -ENOMEM;
      goto done;
    }
    for (size_t j = 0; j < nl; j++) {
      char c = h[i].name[j];
      w[j] = (uint8_t)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    tg_buf_commit(&tmp, nl);
    it[i].name.len = nl;
    if (nl == 4 && memcmp(w, "host", 4) == 0) host = true;
    /* Trimmed, inner runs of blanks folded into one space. */
    const char *v = h[i].value;
    size_t vl = strlen(v);
    while (vl && (*v == ' ' || *v == '\t')) v++, vl--;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) vl--;
    it[i].value.off = tg_buf_size(&tmp);
    w = tg_buf_reserve(&tmp, vl);
    if (!w && vl) {
      rc = -ENOMEM;
      goto done;
    }
    size_t o = 0;
    for (size_t j = 0; j < vl; j++) {
      bool blank = v[j] == ' ' || v[j] == '\t';
      if (blank && o && w[o - 1] == ' ') continue;
      w[o++] = blank ? ' ' : (uint8_t)v[j];
    }
    tg_buf_commit(&tmp, o);
    it[i].value.len = o;
  }
  if (!host) {
    rc = -EINVAL;
    goto done;
  }
  const uint8_t *base = tg_buf_begin(&tmp);
  sort_items(base, it, n);
  for (size_t i = 0; i < n; i++) {
    if (i && cmp_span(base, it[i - 1].name, it[i].name) == 0) {
      rc = -EINVAL; /* the same header twice */
      goto done;
    }
    if ((rc = tg_buf_append(canon, base + it[i].name.off, it[i].name.len)) ||
        (rc = tg_buf_append(canon, ":", 1)) ||
        (rc = tg_buf_append(canon, base + it[i].value.off, it[i].value.len)) ||
        (rc = tg_buf_append(canon, "\n", 1)) ||
        (i && (rc = tg_buf_append(signed_h, ";", 1))) ||
        (rc = tg_buf_append(signed_h, base + it[i].name.off, it[i].name.len)))
      goto done;
  }
done:
  tg_buf_free(&tmp);
  return rc;
}

static int check_request(const tg_s3_request_t *r) {
  if (!r || !valid_method(r->method) || !r->path || r->path[0] != '/' ||
      strlen(r->path) > VALUE_MAX_LEN || !valid_date(r->amz_date) ||
      !valid_payload_hash(r->payload_hash))
    return -EINVAL;
  return 0;
}

/* The canonical request from its parts: |query| is the canonical query
 * string (the caller's params, or those of a presigned URL). */
static int build_creq(const tg_s3_request_t *r, const tg_s3_pair_t *params,
                      size_t n_params, tg_buf_t *creq, tg_buf_t *signed_h) {
  tg_buf_t hdrs;
  tg_buf_init(&hdrs, 0);
  int rc;
  if ((rc = append(creq, r->method)) || (rc = append(creq, "\n")) ||
      (rc = tg_s3_uri_encode(creq, r->path, strlen(r->path), true)) ||
      (rc = append(creq, "\n")) ||
      (rc = tg_s3_canonical_query(params, n_params, creq)) ||
      (rc = append(creq, "\n")) ||
      (rc = canonical_headers(r->headers, r->n_headers, &hdrs, signed_h)) ||
      (rc = tg_buf_append(creq, tg_buf_begin(&hdrs), tg_buf_size(&hdrs))) ||
      (rc = append(creq, "\n")) ||
      (rc = tg_buf_append(creq, tg_buf_begin(signed_h), tg_buf_size(signed_h))) ||
      (rc = append(creq, "\n")) || (rc = append(creq, r->payload_hash)))
    goto done;
done:
  tg_buf_free(&hdrs);
  return rc;
}

int tg_s3_canonical_request(const tg_s3_request_t *r, tg_buf_t *creq,
                            tg_buf_t *signed_headers) {
  int rc = check_request(r);
  if (rc) return rc;
  tg_buf_t sh;
  tg_buf_init(&sh, 0);
  rc = build_creq(r, r->params, r->n_params, creq, &sh);
  if (!rc && signed_headers)
    rc = tg_buf_append(signed_headers, tg_buf_begin(&sh), tg_buf_size(&sh));
  tg_buf_free(&sh);
  return rc;
}

static int hmac(const void *key, size_t kn, const void *msg, size_t mn,
                unsigned char out[SHA256_DIGEST_LENGTH]) {
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key, (int)kn, msg, mn, out, &len) ||
      len != SHA256_DIGEST_LENGTH)
    return -EIO;
  return 0;
}

static int check_key(const tg_s3_key_t *k) {
  if (!k || !scope_word(k->access_key) || !scope_word(k->region) ||
      !scope_word(k->service) || !k->secret_key || !*k->secret_key ||
      strlen(k->secret_key) > SECRET_MAX_LEN)
    return -EINVAL;
  return 0;
}

/* "YYYYMMDD/region/service/aws4_request" into |out| (NUL-terminated). */
static void scope_of(const tg_s3_key_t *k, const char *amz_date, char *out,
                     size_t cap) {
  snprintf(out, cap, "%.8s/%s/%s/aws4_request", amz_date, k->region,
           k->service);
}

/* The signature (64 hex digits and NUL) of canonical request |creq|. */
static int signature(const tg_s3_key_t *k, const char *amz_date,
                     const tg_buf_t *creq, char out[TG_S3_SHA256_HEX_LEN + 1]) {
  char scope[4 * NAME_MAX_LEN];
  scope_of(k, amz_date, scope, sizeof scope);
  char creq_hash[TG_S3_SHA256_HEX_LEN + 1];
  tg_s3_sha256_hex(tg_buf_begin(creq), tg_buf_size(creq), creq_hash);
  char sts[sizeof ALGORITHM + TG_S3_AMZ_DATE_LEN + sizeof scope +
           TG_S3_SHA256_HEX_LEN + 8];
  int sn = snprintf(sts, sizeof sts, "%s\n%s\n%s\n%s", ALGORITHM, amz_date,
                    scope, creq_hash);
  if (sn < 0 || (size_t)sn >= sizeof sts) return -EINVAL;

  char k0[4 + SECRET_MAX_LEN + 1];
  int kn = snprintf(k0, sizeof k0, "AWS4%s", k->secret_key);
  unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];
  int rc;
  if ((rc = hmac(k0, (size_t)kn, amz_date, 8, a)) ||
      (rc = hmac(a, sizeof a, k->region, strlen(k->region), b)) ||
      (rc = hmac(b, sizeof b, k->service, strlen(k->service), a)) ||
      (rc = hmac(a, sizeof a, "aws4_request", 12, b)) ||
      (rc = hmac(b, sizeof b, sts, (size_t)sn, a)))
    goto done;
  to_hex(a, sizeof a, out);
done:
  OPENSSL_cleanse(k0, sizeof k0);
  OPENSSL_cleanse(b, sizeof b);
  return rc;
}

int tg_s3_sign(const tg_s3_key_t *k, const tg_s3_request_t *r, tg_buf_t *authz,
               tg_buf_t *query) {
  int rc;
  if ((rc = check_key(k)) || (rc = check_request(r))) return rc;
  tg_buf_t creq, sh;
  tg_buf_init(&creq, 0);
  tg_buf_init(&sh, 0);
  char sig[TG_S3_SHA256_HEX_LEN + 1];
  char scope[4 * NAME_MAX_LEN];
  if ((rc = build_creq(r, r->params, r->n_params, &creq, &sh)) ||
      (rc = signature(k, r->amz_date, &creq, sig)))
    goto done;
  scope_of(k, r->amz_date, scope, sizeof scope);
  if ((rc = append(authz, ALGORITHM " Credential=")) ||
      (rc = append(authz, k->access_key)) || (rc = append(authz, "/")) ||
      (rc = append(authz, scope)) || (rc = append(authz, ", SignedHeaders=")) ||
      (rc = tg_buf_append(authz, tg_buf_begin(&sh), tg_buf_size(&sh))) ||
      (rc = append(authz, ", Signature=")) || (rc = append(authz, sig)))
    goto done;
  if (query) rc = tg_s3_canonical_query(r->params, r->n_params, query);
done:
  tg_buf_free(&creq);
  tg_buf_free(&sh);
  return rc;
}

int tg_s3_presign(const tg_s3_key_t *k, const tg_s3_request_t *r,
                  uint32_t expires_s, tg_buf_t *query) {
  int rc;
  if ((rc = check_key(k))) return rc;
  if (!r || expires_s == 0 || expires_s > TG_S3_MAX_EXPIRES) return -EINVAL;
  tg_s3_request_t q = *r;
  if (!q.payload_hash) q.payload_hash = TG_S3_UNSIGNED_PAYLOAD;
  if ((rc = check_request(&q))) return rc;
  if (q.n_params > TG_S3_MAX_PARAMS - 5) return -E2BIG;
  if (q.n_params && !q.params) return -EINVAL;
  tg_s3_pair_t p[TG_S3_MAX_PARAMS];
  for (size_t i = 0; i < q.n_params; i++) {
    if (!q.params[i].name || strncasecmp(q.params[i].name, "X-Amz-", 6) == 0)
      return -EINVAL;
    p[i] = q.params[i];
  }
  /* The signed header list goes into the query, so compute it first. */
  tg_buf_t hdrs, sh, sh2, creq;
  tg_buf_init(&hdrs, 0);
  tg_buf_init(&sh, 0);
  tg_buf_init(&sh2, 0);
  tg_buf_init(&creq, 0);
  char scope[4 * NAME_MAX_LEN], cred[6 * NAME_MAX_LEN], expires[16];
  char sig[TG_S3_SHA256_HEX_LEN + 1];
  if ((rc = canonical_headers(q.headers, q.n_headers, &hdrs, &sh)) ||
      (rc = tg_buf_append(&sh, "", 1)))
    goto done;
  scope_of(k, q.amz_date, scope, sizeof scope);
  snprintf(cred, sizeof cred, "%s/%s", k->access_key, scope);
  snprintf(expires, sizeof expires, "%u", (unsigned)expires_s);
  size_t n = q.n_params;
  p[n++] = (tg_s3_pair_t){"X-Amz-Algorithm", ALGORITHM};
  p[n++] = (tg_s3_pair_t){"X-Amz-Credential", cred};
  p[n++] = (tg_s3_pair_t){"X-Amz-Date", q.amz_date};
  p[n++] = (tg_s3_pair_t){"X-Amz-Expires", expires};
  p[n++] = (tg_s3_pair_t){"X-Amz-SignedHeaders", (const char *)tg_buf_begin(&sh)};
  if ((rc = build_creq(&q, p, n, &creq, &sh2)) ||
      (rc = signature(k, q.amz_date, &creq, sig)) ||
      (rc = tg_s3_canonical_query(p, n, query)) ||
      (rc = append(query, "&X-Amz-Signature=")) || (rc = append(query, sig)))
    goto done;
done:
  tg_buf_free(&hdrs);
  tg_buf_free(&sh);
  tg_buf_free(&sh2);
  tg_buf_free(&creq);
  return rc;
}
