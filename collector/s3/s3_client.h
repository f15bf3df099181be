/* A client of S3's API for one bucket: libcurl carries the requests,
 * s3_sigv4.h signs them (every request carries x-amz-content-sha256 and
 * x-amz-date, signed), libexpat reads the XML answers (s3_xml.h).
 *
 * Path-style addressing (ENDPOINT/BUCKET/KEY): what Ceph's gateway, MinIO
 * and AWS all accept for any bucket name, without DNS per bucket.
 *
 * Errors are 0 or negative errno-style codes, the same for every call:
 *   -ENOENT     NoSuchKey, NoSuchBucket, NoSuchUpload (404)
 *   -EEXIST     a conditional write found the object there (412; 409
 *               BucketAlreadyOwnedByYou for a bucket)
 *   -EACCES     AccessDenied, a bad signature or key (401, 403)
 *   -EINVAL     S3 refused the request as malformed (other 4xx), or an
 *               argument was bad before any request was made
 *   -ERANGE     a Range past the object's end (416)
 *   -EAGAIN     still throttled (503 SlowDown) after every attempt
 *   -EIO        still 5xx after every attempt, or an answer we cannot read
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH  the transport, after every
 *               attempt
 * A failed request is logged once with [TG-5080], the method, the object,
 * the HTTP status and S3's error code and message (never a key or a
 * signature); each retry with [TG-5081].
 *
 * Retries: 5xx answers and transport failures are retried up to
 * max_attempts times, sleeping base_backoff_ms, doubled each time, capped
 * at 8 s. A GET that already handed bytes to its callback is not retried.
 *
 * Threads: a client is used by one thread at a time; every call blocks
 * (run them on a worker thread, never on a loop that serves rings).
 */
#ifndef TRACEGATE_COLLECTOR_S3_S3_CLIENT_H
#define TRACEGATE_COLLECTOR_S3_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_S3_ETAG_MAX 128
#define TG_S3_UPLOAD_ID_MAX 256
#define TG_S3_KEY_MAX 1024
/* S3's limits on a multipart upload. */
#define TG_S3_PART_MIN (5u << 20)
#define TG_S3_PARTS_MAX 10000u

typedef struct tg_s3_client tg_s3_client_t;
/* What the clients that share it did (tg_s3_stats_t): the counters and
 * health of one store's bucket. Reference-counted by its clients, so it
 * lives as long as the last of them. */
typedef struct tg_s3_monitor tg_s3_monitor_t;

/* What a part upload's x-amz-content-sha256 carries. The SHA-256 of the
 * payload is signed, so a body altered on its way is refused; it costs a
 * pass over the bytes here and another in the gateway, which checks it.
 * Over HTTPS, TLS already protects the bytes, and AWS's own SDKs then
 * send UNSIGNED-PAYLOAD: so does AUTO. Other requests (index, XML) are
 * small and always signed with their payload. */
typedef enum tg_s3_payload {
  TG_S3_PAYLOAD_AUTO = 0, /* unsigned over https://, signed over http:// */
  TG_S3_PAYLOAD_SIGNED,
  TG_S3_PAYLOAD_UNSIGNED,
} tg_s3_payload_t;

typedef struct tg_s3_client_config {
  /* "http://127.0.0.1:7480" or "https://s3.eu-west-1.amazonaws.com": a
   * scheme, a host, an optional port, no path. Copied. */
  const char *endpoint;
  const char *region;     /* copied */
  const char *bucket;     /* copied; 3..63 of [a-z0-9.-] */
  const char *access_key; /* copied */
  const char *secret_key; /* copied; wiped at free */
  unsigned max_attempts;     /* 0: 5 */
  unsigned base_backoff_ms;  /* 0: 200 */
  unsigned timeout_ms;       /* one request's whole time; 0: 120000 */
  unsigned connect_timeout_ms; /* 0: 5000 */
  const char *ca_file;       /* NULL: the system's CAs (https) */
  tg_s3_payload_t payload;   /* parts' payload hash (above) */
  /* Seconds since the epoch for x-amz-date; NULL: time(). */
  int64_t (*now_s)(void *ctx);
  void *clock_ctx;
  /* Where the client counts its requests: NULL, a monitor of its own;
   * else another client's (tg_s3_client_monitor), which this one then
   * holds a reference to until it is freed. */
  tg_s3_monitor_t *monitor;
} tg_s3_client_config_t;

/* 0 and *out, or -EINVAL (a field missing or malformed), -ENOMEM. */
int tg_s3_client_new(const tg_s3_client_config_t *cfg, tg_s3_client_t **out);
void tg_s3_client_free(tg_s3_client_t *c);

/* The HTTP status and S3 error code of the client's last request (0 and
 * "" before any, or after a transport failure): for messages and tests. */
int tg_s3_last_status(const tg_s3_client_t *c);
const char *tg_s3_last_code(const tg_s3_client_t *c);

/* How the bucket answered a monitor's last request that ended or was
 * retried: OK (an answer, 404 and 412 included), RETRYING (an attempt
 * failed with a 5xx or in the transport and is being made again) or
 * FAILING (a request failed after its retries, or was refused). */
typedef enum tg_s3_health {
  TG_S3_OK = 0,
  TG_S3_RETRYING,
  TG_S3_FAILING,
} tg_s3_health_t;

#define TG_S3_STATUS_TEXT 96

/* What the clients of one monitor did since it was made: for metrics, the
 * API and the page. */
typedef struct tg_s3_stats {
  uint64_t requests;  /* attempts sent (or tried: a refused connection) */
  uint64_t retries;   /* attempts made again after a 5xx or the transport */
  uint64_t throttled; /* of those, after 503 SlowDown */
  uint64_t failures;  /* requests failed after their retries ([TG-5080]) */
  tg_s3_health_t health;
  /* Epoch ms (CLOCK_REALTIME): when |health| last changed (0: never). */
  int64_t since_ms;
  /* The last failed attempt (0 and "": none since the monitor was made):
   * when, its method, its HTTP status (0: the transport), S3's error
   * code and the error's text. No key, no signature. */
  int64_t error_ms;
  int error_status;
  char error_method[8];
  char error_code[TG_S3_STATUS_TEXT];
  char error_text[TG_S3_STATUS_TEXT];
} tg_s3_stats_t;
/* The client's monitor: borrowed, valid while the client is (pass it in
 * another client's config to share it). */
tg_s3_monitor_t *tg_s3_client_monitor(const tg_s3_client_t *c);
/* A snapshot of |m|'s counters and health into *out (the caller's); any
 * thread. */
void tg_s3_stats_get(tg_s3_monitor_t *m, tg_s3_stats_t *out);
const char *tg_s3_health_name(tg_s3_health_t h);

/* Creates the client's bucket; -EEXIST if this user already has it. */
int tg_s3_bucket_create(tg_s3_client_t *c);

/* Stores |n| bytes of |body| (borrowed) at |key|. |if_none_match|: only if
 * no object is there (If-None-Match: *), else -EEXIST. |etag| (may be
 * NULL) gets the object's ETag, quotes included. */
int tg_s3_put(tg_s3_client_t *c, const char *key, const void *body, size_t n,
              bool if_none_match, char etag[TG_S3_ETAG_MAX]);

/* Receives the bytes of a GET, in order; nonzero stops the transfer, and
 * the GET returns it. */
typedef int (*tg_s3_data_fn)(void *ctx, const void *p, size_t n);

/* Reads |key| from byte |off|: |len| bytes (0: to the end). */
int tg_s3_get(tg_s3_client_t *c, const char *key, uint64_t off, uint64_t len,
              tg_s3_data_fn fn, void *ctx);

/* The object's size and ETag (|etag| may be NULL). */
int tg_s3_head(tg_s3_client_t *c, const char *key, uint64_t *size,
               char etag[TG_S3_ETAG_MAX]);

/* Deletes |key|; deleting a missing key succeeds (S3 answers 204). */
int tg_s3_delete(tg_s3_client_t *c, const char *key);

typedef struct tg_s3_object {
  const char *key; /* borrowed for the callback */
  uint64_t size;
  const char *etag;
} tg_s3_object_t;
/* Nonzero stops the listing and is returned. */
typedef int (*tg_s3_object_fn)(void *ctx, const tg_s3_object_t *o);

/* Every object whose key starts with |prefix| (ListObjectsV2, all pages),
 * in key order. */
int tg_s3_list(tg_s3_client_t *c, const char *prefix, tg_s3_object_fn fn,
               void *ctx);

/* A presigned GET URL of |key| (s3_sigv4.h, tg_s3_presign), signed at
 * |now_s| for |expires_s| seconds (1..TG_S3_MAX_EXPIRES), into |url|
 * (|cap| bytes). Whoever holds it reads the object without a key until it
 * expires: give it only to who may read the snapshot. No request is
 * made. 0, -EINVAL, -ENAMETOOLONG. */
int tg_s3_presign_get(tg_s3_client_t *c, const char *key, int64_t now_s,
                      uint32_t expires_s, char *url, size_t cap);

/* Multipart uploads. A part but the last is at least TG_S3_PART_MIN. */
int tg_s3_mpu_create(tg_s3_client_t *c, const char *key,
                     char upload_id[TG_S3_UPLOAD_ID_MAX]);
int tg_s3_mpu_part(tg_s3_client_t *c, const char *key, const char *upload_id,
                   unsigned part_no, const void *body, size_t n,
                   char etag[TG_S3_ETAG_MAX]);

typedef struct tg_s3_part {
  unsigned part_no;
  char etag[TG_S3_ETAG_MAX];
} tg_s3_part_t;

/* Completes the upload with |n| parts in ascending part number; |etag|
 * (may be NULL) gets the object's as the answer gives it, which may be ""
 * (Ceph 16's gateway sends an empty ETag there; HEAD has it). A 200 answer whose body is an Error
 * (S3 may fail a completion after its first byte) is that error. */
int tg_s3_mpu_complete(tg_s3_client_t *c, const char *key,
                       const char *upload_id, const tg_s3_part_t *parts,
                       size_t n, char etag[TG_S3_ETAG_MAX]);
int tg_s3_mpu_abort(tg_s3_client_t *c, const char *key, const char *upload_id);

typedef struct tg_s3_upload {
  const char *key;       /* borrowed for the callback */
  const char *upload_id; /* borrowed for the callback */
} tg_s3_upload_t;
typedef int (*tg_s3_upload_fn)(void *ctx, const tg_s3_upload_t *u);

/* Every multipart upload in progress under |prefix| (all pages). */
int tg_s3_mpu_list(tg_s3_client_t *c, const char *prefix, tg_s3_upload_fn fn,
                   void *ctx);

#endif /* TRACEGATE_COLLECTOR_S3_S3_CLIENT_H */
