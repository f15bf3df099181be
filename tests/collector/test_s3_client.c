/* The S3 client (collector/s3/s3_client.h) against a real Ceph gateway
 * (coll_rgw.h): objects in and out, conditional writes, ranges, keys with
 * the characters curl's signer got wrong ('=', ':', spaces, '/' in a query
 * value), listings, multipart uploads whole and aborted, presigned URLs,
 * and the errors: a wrong secret, a missing key, a gateway that is gone.
 * Skips, saying so, when Ceph is not installed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "coll_rgw.h"
#include "collector/s3/s3_client.h"
#include "collector/s3/s3_sigv4.h"
#include "common/buf.h"

static coll_rgw_t gw;
static bool skipped;
static unsigned buckets;

static int group_setup(void **state) {
  (void)state;
  int rc = coll_rgw_start(&gw);
  if (rc == 1) {
    fprintf(stderr, "test_s3_client: Ceph (ceph-mon, ceph-osd, radosgw) is "
                    "not installed: skipped (deploy/deps.sh installs it)\n");
    skipped = true;
    return 0;
  }
  return rc;
}

static int group_teardown(void **state) {
  (void)state;
  coll_rgw_stop(&gw);
  return 0;
}

/* A client of a fresh bucket. */
static tg_s3_client_t *client_payload(const char *secret, const char *endpoint,
                                      bool create, tg_s3_payload_t payload) {
  char bucket[32];
  snprintf(bucket, sizeof bucket, "tg-test-%u", ++buckets);
  tg_s3_client_config_t cfg = {
      .endpoint = endpoint ? endpoint : gw.endpoint,
      .region = "us-east-1",
      .bucket = bucket,
      .access_key = gw.access_key,
      .secret_key = secret ? secret : gw.secret_key,
      .max_attempts = 3,
      .base_backoff_ms = 20,
      .timeout_ms = 30000,
      .payload = payload,
  };
  tg_s3_client_t *c = NULL;
  assert_int_equal(tg_s3_client_new(&cfg, &c), 0);
  if (create) assert_int_equal(tg_s3_bucket_create(c), 0);
  return c;
}

static tg_s3_client_t *client_with(const char *secret, const char *endpoint,
                                   bool create) {
  return client_payload(secret, endpoint, create, TG_S3_PAYLOAD_AUTO);
}

static tg_s3_client_t *client(void) { return client_with(NULL, NULL, true); }

static int collect(void *ctx, const void *p, size_t n) {
  return tg_buf_append(ctx, p, n);
}

static void expect_object(tg_s3_client_t *c, const char *key, const void *want,
                          size_t n) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_s3_get(c, key, 0, 0, collect, &b), 0);
  assert_int_equal(tg_buf_size(&b), n);
  assert_memory_equal(tg_buf_begin(&b), want, n);
  tg_buf_free(&b);
  uint64_t size = 0;
  char etag[TG_S3_ETAG_MAX];
  assert_int_equal(tg_s3_head(c, key, &size, etag), 0);
  assert_int_equal(size, n);
  assert_true(etag[0] == '"');
}

static void put_get_head_delete(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  static const char body[] = "the first object";
  char etag[TG_S3_ETAG_MAX];
  assert_int_equal(tg_s3_put(c, "a/b.txt", body, strlen(body), false, etag), 0);
  assert_true(etag[0] == '"');
  expect_object(c, "a/b.txt", body, strlen(body));
  /* An empty object is an object. */
  assert_int_equal(tg_s3_put(c, "empty", NULL, 0, false, NULL), 0);
  expect_object(c, "empty", "", 0);
  assert_int_equal(tg_s3_delete(c, "a/b.txt"), 0);
  assert_int_equal(tg_s3_head(c, "a/b.txt", NULL, NULL), -ENOENT);
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_s3_get(c, "a/b.txt", 0, 0, collect, &b), -ENOENT);
  assert_int_equal(tg_s3_last_status(c), 404);
  assert_string_equal(tg_s3_last_code(c), "NoSuchKey");
  assert_int_equal(tg_buf_size(&b), 0);
  tg_buf_free(&b);
  /* Deleting what is not there succeeds, as S3 says. */
  assert_int_equal(tg_s3_delete(c, "a/b.txt"), 0);
  /* A second create of the same bucket by its owner: Ceph (like AWS in
   * us-east-1) answers 200; elsewhere AWS answers 409, -EEXIST. */
  int again = tg_s3_bucket_create(c);
  assert_true(again == 0 || again == -EEXIST);
  tg_s3_client_free(c);
}

static void conditional_put(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  assert_int_equal(tg_s3_put(c, "once", "1", 1, true, NULL), 0);
  assert_int_equal(tg_s3_put(c, "once", "2", 1, true, NULL), -EEXIST);
  assert_int_equal(tg_s3_last_status(c), 412);
  expect_object(c, "once", "1", 1);
  tg_s3_client_free(c);
}

static void ranges(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  static const char body[] = "0123456789abcdef";
  assert_int_equal(tg_s3_put(c, "r", body, 16, false, NULL), 0);
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_s3_get(c, "r", 3, 4, collect, &b), 0);
  assert_int_equal(tg_buf_size(&b), 4);
  assert_memory_equal(tg_buf_begin(&b), "3456", 4);
  tg_buf_reset(&b);
  assert_int_equal(tg_s3_get(c, "r", 10, 0, collect, &b), 0);
  assert_int_equal(tg_buf_size(&b), 6);
  assert_memory_equal(tg_buf_begin(&b), "abcdef", 6);
  tg_buf_reset(&b);
  assert_int_equal(tg_s3_get(c, "r", 16, 0, collect, &b), -ERANGE);
  assert_int_equal(tg_buf_size(&b), 0);
  tg_buf_free(&b);
  tg_s3_client_free(c);
}

typedef struct listed {
  char keys[16][TG_S3_KEY_MAX + 1];
  uint64_t sizes[16];
  size_t n;
} listed_t;

static int on_object(void *ctx, const tg_s3_object_t *o) {
  listed_t *l = ctx;
  if (l->n >= 16) return -E2BIG;
  snprintf(l->keys[l->n], sizeof l->keys[0], "%s", o->key);
  l->sizes[l->n++] = o->size;
  return 0;
}

/* The keys curl's signer could not sign for this gateway, and others. */
static void awkward_keys_and_prefixes(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  static const char *const keys[] = {
      "p/a=b",       "p/c:d",         "p/with space",  "p/plus+sign",
      "p/per%cent",  "p/\xe1\x88\xb4", "p/q?x&y#z",    "p/semi;colon,comma",
      "p/~tilde!*'()",
  };
  size_t n = sizeof keys / sizeof keys[0];
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(tg_s3_put(c, keys[i], keys[i], strlen(keys[i]), true, NULL),
                     0);
    expect_object(c, keys[i], keys[i], strlen(keys[i]));
  }
  assert_int_equal(tg_s3_put(c, "other", "x", 1, false, NULL), 0);
  /* The prefix "p/" is a query value with a '/'. */
  listed_t l = {0};
  assert_int_equal(tg_s3_list(c, "p/", on_object, &l), 0);
  assert_int_equal(l.n, n);
  for (size_t i = 0; i < n; i++) {
    bool found = false;
    for (size_t j = 0; j < l.n; j++)
      if (strcmp(l.keys[j], keys[i]) == 0) {
        found = true;
        assert_int_equal(l.sizes[j], strlen(keys[i]));
      }
    assert_true(found);
  }
  /* Listed in key order. */
  for (size_t j = 1; j < l.n; j++) assert_true(strcmp(l.keys[j - 1], l.keys[j]) < 0);
  /* Prefixes with the awkward characters themselves. */
  memset(&l, 0, sizeof l);
  assert_int_equal(tg_s3_list(c, "p/a=", on_object, &l), 0);
  assert_int_equal(l.n, 1);
  assert_string_equal(l.keys[0], "p/a=b");
  memset(&l, 0, sizeof l);
  assert_int_equal(tg_s3_list(c, "p/with sp", on_object, &l), 0);
  assert_int_equal(l.n, 1);
  memset(&l, 0, sizeof l);
  assert_int_equal(tg_s3_list(c, "nothing/", on_object, &l), 0);
  assert_int_equal(l.n, 0);
  tg_s3_client_free(c);
}

typedef struct uploads {
  char keys[8][TG_S3_KEY_MAX + 1];
  char ids[8][TG_S3_UPLOAD_ID_MAX];
  size_t n;
} uploads_t;

static int on_upload(void *ctx, const tg_s3_upload_t *u) {
  uploads_t *l = ctx;
  if (l->n >= 8) return -E2BIG;
  snprintf(l->keys[l->n], sizeof l->keys[0], "%s", u->key);
  snprintf(l->ids[l->n++], sizeof l->ids[0], "%s", u->upload_id);
  return 0;
}

static void multipart_complete_and_abort(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  size_t n1 = TG_S3_PART_MIN, n2 = 1000;
  uint8_t *data = malloc(n1 + n2);
  assert_non_null(data);
  for (size_t i = 0; i < n1 + n2; i++) data[i] = (uint8_t)(i * 131 + (i >> 12));

  const char *key = "snap/0000000000000001 k=v:w";
  char id[TG_S3_UPLOAD_ID_MAX], other[TG_S3_UPLOAD_ID_MAX];
  assert_int_equal(tg_s3_mpu_create(c, key, id), 0);
  assert_int_equal(tg_s3_mpu_create(c, "snap/other", other), 0);
  uploads_t u = {0};
  assert_int_equal(tg_s3_mpu_list(c, "snap/", on_upload, &u), 0);
  assert_int_equal(u.n, 2);

  tg_s3_part_t parts[2] = {{.part_no = 1}, {.part_no = 2}};
  assert_int_equal(tg_s3_mpu_part(c, key, id, 1, data, n1, parts[0].etag), 0);
  assert_int_equal(tg_s3_mpu_part(c, key, id, 2, data + n1, n2, parts[1].etag),
                   0);
  /* Not visible before the completion. */
  assert_int_equal(tg_s3_head(c, key, NULL, NULL), -ENOENT);
  char etag[TG_S3_ETAG_MAX];
  assert_int_equal(tg_s3_mpu_complete(c, key, id, parts, 2, etag), 0);
  expect_object(c, key, data, n1 + n2);
  /* A multipart object's ETag ends in "-<parts>\"". */
  assert_int_equal(tg_s3_head(c, key, NULL, etag), 0);
  assert_non_null(strstr(etag, "-2\""));

  /* A completed upload is gone; aborting one that is not there is
   * -ENOENT; the other is aborted and leaves nothing. */
  assert_int_equal(tg_s3_mpu_abort(c, key, id), -ENOENT);
  assert_int_equal(tg_s3_mpu_abort(c, "snap/other", other), 0);
  memset(&u, 0, sizeof u);
  assert_int_equal(tg_s3_mpu_list(c, "snap/", on_upload, &u), 0);
  assert_int_equal(u.n, 0);
  assert_int_equal(tg_s3_head(c, "snap/other", NULL, NULL), -ENOENT);

  /* A part under S3's minimum but the last: the completion is refused. */
  char small[TG_S3_UPLOAD_ID_MAX];
  assert_int_equal(tg_s3_mpu_create(c, "snap/small", small), 0);
  tg_s3_part_t sp[2] = {{.part_no = 1}, {.part_no = 2}};
  assert_int_equal(tg_s3_mpu_part(c, "snap/small", small, 1, data, 10, sp[0].etag), 0);
  assert_int_equal(tg_s3_mpu_part(c, "snap/small", small, 2, data, 10, sp[1].etag), 0);
  assert_int_equal(tg_s3_mpu_complete(c, "snap/small", small, sp, 2, NULL),
                   -EINVAL);
  assert_int_equal(tg_s3_mpu_abort(c, "snap/small", small), 0);
  free(data);
  tg_s3_client_free(c);
}

/* Parts sent with UNSIGNED-PAYLOAD (what AUTO does over https) make the
 * same object; the request itself is still signed, so a wrong secret is
 * still refused. */
static void unsigned_payload_parts(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client_payload(NULL, NULL, true, TG_S3_PAYLOAD_UNSIGNED);
  size_t n1 = TG_S3_PART_MIN, n2 = 4321;
  uint8_t *data = malloc(n1 + n2);
  assert_non_null(data);
  for (size_t i = 0; i < n1 + n2; i++) data[i] = (uint8_t)(i * 7 + (i >> 9));
  const char *key = "snap/unsigned";
  char id[TG_S3_UPLOAD_ID_MAX];
  assert_int_equal(tg_s3_mpu_create(c, key, id), 0);
  tg_s3_part_t parts[2] = {{.part_no = 1}, {.part_no = 2}};
  assert_int_equal(tg_s3_mpu_part(c, key, id, 1, data, n1, parts[0].etag), 0);
  assert_int_equal(tg_s3_mpu_part(c, key, id, 2, data + n1, n2, parts[1].etag),
                   0);
  assert_int_equal(tg_s3_mpu_complete(c, key, id, parts, 2, NULL), 0);
  expect_object(c, key, data, n1 + n2);

  char bad[160];
  snprintf(bad, sizeof bad, "%sX", gw.secret_key);
  tg_s3_client_t *w = client_payload(bad, NULL, false, TG_S3_PAYLOAD_UNSIGNED);
  assert_int_equal(tg_s3_mpu_part(w, key, id, 1, data, 10, parts[0].etag),
                   -EACCES);
  tg_s3_client_free(w);

  tg_s3_client_config_t cfg = {.endpoint = gw.endpoint, .region = "us-east-1",
                               .bucket = "tg-test-x", .access_key = "a",
                               .secret_key = "s",
                               .payload = (tg_s3_payload_t)7};
  tg_s3_client_t *none = NULL;
  assert_int_equal(tg_s3_client_new(&cfg, &none), -EINVAL);
  free(data);
  tg_s3_client_free(c);
}

static void wrong_secret_refused(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *good = client();
  char bucket_secret[160];
  snprintf(bucket_secret, sizeof bucket_secret, "%sX", gw.secret_key);
  tg_s3_client_t *c = client_with(bucket_secret, NULL, false);
  assert_int_equal(tg_s3_put(c, "k", "v", 1, false, NULL), -EACCES);
  assert_int_equal(tg_s3_last_status(c), 403);
  assert_string_equal(tg_s3_last_code(c), "SignatureDoesNotMatch");
  tg_s3_client_free(c);
  tg_s3_client_free(good);
}

static void gateway_gone(void **state) {
  (void)state;
  if (skipped) skip();
  /* Port 1 of loopback: nothing listens there, so every attempt is
   * refused and the retries run out. */
  tg_s3_client_t *c = client_with(NULL, "http://127.0.0.1:1", false);
  assert_int_equal(tg_s3_put(c, "k", "v", 1, false, NULL), -ECONNREFUSED);
  assert_int_equal(tg_s3_last_status(c), 0);
  tg_s3_client_free(c);
}

/* Each client counts into its monitor: a second one given it shares it,
 * a client of its own does not see the other's failures (two stores,
 * two healths). */
static void health_is_per_monitor(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *good = client();
  tg_s3_client_t *gone = client_with(NULL, "http://127.0.0.1:1", false);
  tg_s3_client_config_t cfg = {.endpoint = "http://127.0.0.1:1",
                               .region = "us-east-1",
                               .bucket = "tg-test-shared",
                               .access_key = gw.access_key,
                               .secret_key = gw.secret_key,
                               .max_attempts = 1,
                               .monitor = tg_s3_client_monitor(gone)};
  tg_s3_client_t *also = NULL;
  assert_int_equal(tg_s3_client_new(&cfg, &also), 0);
  assert_ptr_equal(tg_s3_client_monitor(also), tg_s3_client_monitor(gone));
  assert_int_equal(tg_s3_put(good, "k", "v", 1, false, NULL), 0);
  assert_int_equal(tg_s3_put(gone, "k", "v", 1, false, NULL), -ECONNREFUSED);
  tg_s3_client_free(gone); /* |also| keeps the monitor */
  assert_int_equal(tg_s3_put(also, "k", "v", 1, false, NULL), -ECONNREFUSED);
  tg_s3_stats_t g, b;
  tg_s3_stats_get(tg_s3_client_monitor(good), &g);
  tg_s3_stats_get(tg_s3_client_monitor(also), &b);
  assert_int_equal(g.health, TG_S3_OK);
  assert_int_equal(g.failures, 0);
  assert_int_equal(g.error_ms, 0);
  assert_int_equal(b.health, TG_S3_FAILING);
  assert_int_equal(b.failures, 2);
  assert_int_equal(b.requests, 3 + 1); /* |gone|'s 3 attempts, |also|'s 1 */
  assert_string_equal(b.error_method, "PUT");
  tg_s3_client_free(also);
  tg_s3_client_free(good);
}

static size_t to_buf(char *p, size_t size, size_t nmemb, void *ud) {
  return tg_buf_append(ud, p, size * nmemb) ? 0 : size * nmemb;
}

/* GETs |url| with no credentials of its own; the HTTP status. */
static long plain_get(const char *url, tg_buf_t *body) {
  CURL *e = curl_easy_init();
  assert_non_null(e);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, to_buf);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, body);
  assert_int_equal(curl_easy_perform(e), CURLE_OK);
  long st = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
  curl_easy_cleanup(e);
  return st;
}

static void presigned_get(void **state) {
  (void)state;
  if (skipped) skip();
  tg_s3_client_t *c = client();
  char bucket[32];
  snprintf(bucket, sizeof bucket, "tg-test-%u", buckets);
  static const char body[] = "fetched without the collector";
  const char *key = "snap/x y=z";
  assert_int_equal(tg_s3_put(c, key, body, strlen(body), false, NULL), 0);

  const char *host = gw.endpoint + strlen("http://");
  tg_s3_key_t k = {gw.access_key, gw.secret_key, "us-east-1", "s3"};
  tg_s3_pair_t h[] = {{"host", host}};
  char path[256], date[TG_S3_AMZ_DATE_LEN + 1];
  snprintf(path, sizeof path, "/%s/%s", bucket, key);
  assert_int_equal(tg_s3_amz_date((int64_t)time(NULL), date), 0);
  tg_s3_request_t r = {.method = "GET", .path = path, .headers = h,
                       .n_headers = 1, .amz_date = date};
  tg_buf_t url, got;
  tg_buf_init(&url, 0);
  tg_buf_init(&got, 0);
  assert_int_equal(tg_buf_append(&url, gw.endpoint, strlen(gw.endpoint)), 0);
  assert_int_equal(tg_s3_uri_encode(&url, path, strlen(path), true), 0);
  assert_int_equal(tg_buf_append(&url, "?", 1), 0);
  assert_int_equal(tg_s3_presign(&k, &r, 300, &url), 0);
  assert_int_equal(tg_buf_append(&url, "", 1), 0);
  assert_int_equal(plain_get((const char *)tg_buf_begin(&url), &got), 200);
  assert_int_equal(tg_buf_size(&got), strlen(body));
  assert_memory_equal(tg_buf_begin(&got), body, strlen(body));

  /* One changed digit of the signature: refused. */
  char *u = (char *)tg_buf_begin(&url);
  size_t len = strlen(u);
  u[len - 1] = u[len - 1] == '0' ? '1' : '0';
  tg_buf_reset(&got);
  assert_int_equal(plain_get(u, &got), 403);

  /* Signed an hour ago for a minute: expired. */
  tg_buf_reset(&url);
  assert_int_equal(tg_s3_amz_date((int64_t)time(NULL) - 3600, date), 0);
  assert_int_equal(tg_buf_append(&url, gw.endpoint, strlen(gw.endpoint)), 0);
  assert_int_equal(tg_s3_uri_encode(&url, path, strlen(path), true), 0);
  assert_int_equal(tg_buf_append(&url, "?", 1), 0);
  assert_int_equal(tg_s3_presign(&k, &r, 60, &url), 0);
  assert_int_equal(tg_buf_append(&url, "", 1), 0);
  tg_buf_reset(&got);
  assert_int_equal(plain_get((const char *)tg_buf_begin(&url), &got), 403);
  tg_buf_free(&url);
  tg_buf_free(&got);
  tg_s3_client_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(put_get_head_delete),
      cmocka_unit_test(conditional_put),
      cmocka_unit_test(ranges),
      cmocka_unit_test(awkward_keys_and_prefixes),
      cmocka_unit_test(multipart_complete_and_abort),
      cmocka_unit_test(unsigned_payload_parts),
      cmocka_unit_test(wrong_secret_refused),
      cmocka_unit_test(gateway_gone),
      cmocka_unit_test(health_is_per_monitor),
      cmocka_unit_test(presigned_get),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
