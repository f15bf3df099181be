/* AWS Signature Version 4 (collector/s3/s3_sigv4.h) against AWS's published
 * values: the cases of the aws-sig-v4-test-suite (credentials AKIDEXAMPLE,
 * 2015-08-30T12:36:00Z, us-east-1, service "service") and the worked
 * examples of S3's API reference (AKIAIOSFODNN7EXAMPLE, 2013-05-24, "s3"):
 * header-signed GET with Range, PUT with a body, GET ?lifecycle, list with
 * an unsorted query, and the presigned GET URL. The values below are AWS's,
 * written here as data; nothing is computed by another signer. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "collector/config/config.h"
#include "collector/s3/s3_sigv4.h"

#define EMPTY_SHA256 \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const tg_s3_key_t suite_key = {
    .access_key = "AKIDEXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "service",
};

static const tg_s3_key_t s3_key = {
    .access_key = "AKIAIOSFODNN7EXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "s3",
};

/* NUL-terminated copy of a buffer's bytes, for string comparisons. */
static const char *str(tg_buf_t *b) {
  assert_int_equal(tg_buf_append(b, "", 1), 0);
  return (const char *)tg_buf_begin(b);
}

static void expect_authz(const tg_s3_key_t *k, const tg_s3_request_t *r,
                         const char *signed_headers, const char *sig) {
  tg_buf_t a;
  tg_buf_init(&a, 0);
  assert_int_equal(tg_s3_sign(k, r, &a, NULL), 0);
  char want[512];
  snprintf(want, sizeof want,
           "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
           "SignedHeaders=%s, Signature=%s",
           k->access_key, r->amz_date, k->region, k->service, signed_headers,
           sig);
  assert_string_equal(str(&a), want);
  tg_buf_free(&a);
}

static const tg_s3_pair_t suite_headers[] = {
    {"Host", "example.amazonaws.com"},
    {"X-Amz-Date", "20150830T123600Z"},
};

static void suite_case(const char *method, const char *path,
                       const tg_s3_pair_t *params, size_t n_params,
                       const char *sig) {
  tg_s3_request_t r = {
      .method = method,
      .path = path,
      .params = params,
      .n_params = n_params,
      .headers = suite_headers,
      .n_headers = 2,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20150830T123600Z",
  };
  expect_authz(&suite_key, &r, "host;x-amz-date", sig);
}

static void suite_vanilla(void **state) {
  (void)state;
  suite_case("GET", "/", NULL, 0,
             "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  suite_case("POST", "/", NULL, 0,
             "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
  static const tg_s3_pair_t q[] = {{"Param1", "value1"}};
  suite_case("POST", "/", q, 1,
             "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11");
}

static void suite_query_order_and_encoding(void **state) {
  (void)state;
  /* get-vanilla-query-order-key-case: given unsorted, signed sorted. */
  static const tg_s3_pair_t order[] = {{"Param2", "value2"},
                                       {"Param1", "value1"}};
  suite_case("GET", "/", order, 2,
             "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  static const char u[] =
      "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  static const tg_s3_pair_t unres[] = {{u, u}};
  suite_case("GET", "/", unres, 1,
             "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
  static const tg_s3_pair_t utf8[] = {{"\xe1\x88\xb4", "bar"}};
  suite_case("GET", "/", utf8, 1,
             "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
}

static void suite_paths(void **state) {
  (void)state;
  suite_case("GET", "/\xe1\x88\xb4", NULL, 0,
             "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
  suite_case("GET", "/example space/", NULL, 0,
             "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
  /* S3 keeps a path as it is: no "//" folded (get-slashes-unnormalized). */
  suite_case("GET", "//example//", NULL, 0,
             "87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5");

  tg_s3_request_t r = {
      .method = "GET",
      .path = "/example space/",
      .headers = suite_headers,
      .n_headers = 2,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20150830T123600Z",
  };
  tg_buf_t c;
  tg_buf_init(&c, 0);
  assert_int_equal(tg_s3_canonical_request(&r, &c, NULL), 0);
  assert_string_equal(str(&c),
                      "GET\n/example%20space/\n\n"
                      "host:example.amazonaws.com\n"
                      "x-amz-date:20150830T123600Z\n\n"
                      "host;x-amz-date\n" EMPTY_SHA256);
  tg_buf_free(&c);
}

static void suite_header_value_trim(void **state) {
  (void)state;
  static const tg_s3_pair_t h[] = {
      {"Host", "example.amazonaws.com"},
      {"My-Header1", " value1"},
      {"My-Header2", " \"a   b   c\""},
      {"X-Amz-Date", "20150830T123600Z"},
  };
  tg_s3_request_t r = {
      .method = "GET",
      .path = "/",
      .headers = h,
      .n_headers = 4,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20150830T123600Z",
  };
  expect_authz(&suite_key, &r, "host;my-header1;my-header2;x-amz-date",
               "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736");
}

static void s3_get_object_with_range(void **state) {
  (void)state;
  static const tg_s3_pair_t h[] = {
      {"Host", "examplebucket.s3.amazonaws.com"},
      {"Range", "bytes=0-9"},
      {"x-amz-content-sha256", EMPTY_SHA256},
      {"x-amz-date", "20130524T000000Z"},
  };
  tg_s3_request_t r = {
      .method = "GET",
      .path = "/test.txt",
      .headers = h,
      .n_headers = 4,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20130524T000000Z",
  };
  expect_authz(&s3_key, &r, "host;range;x-amz-content-sha256;x-amz-date",
               "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void s3_put_object(void **state) {
  (void)state;
  static const char body[] = "Welcome to Amazon S3.";
  char hash[TG_S3_SHA256_HEX_LEN + 1];
  tg_s3_sha256_hex(body, strlen(body), hash);
  assert_string_equal(
      hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const tg_s3_pair_t h[] = {
      {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
      {"Host", "examplebucket.s3.amazonaws.com"},
      {"x-amz-content-sha256", hash},
      {"x-amz-date", "20130524T000000Z"},
      {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
  };
  tg_s3_request_t r = {
      .method = "PUT",
      .path = "/test$file.text",
      .headers = h,
      .n_headers = 5,
      .payload_hash = hash,
      .amz_date = "20130524T000000Z",
  };
  expect_authz(&s3_key, &r,
               "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
               "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void s3_bucket_queries(void **state) {
  (void)state;
  static const tg_s3_pair_t h[] = {
      {"Host", "examplebucket.s3.amazonaws.com"},
      {"x-amz-content-sha256", EMPTY_SHA256},
      {"x-amz-date", "20130524T000000Z"},
  };
  /* "?lifecycle": a parameter without a value is signed "lifecycle=". */
  static const tg_s3_pair_t lifecycle[] = {{"lifecycle", NULL}};
  tg_s3_request_t r = {
      .method = "GET",
      .path = "/",
      .params = lifecycle,
      .n_params = 1,
      .headers = h,
      .n_headers = 3,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20130524T000000Z",
  };
  expect_authz(&s3_key, &r, "host;x-amz-content-sha256;x-amz-date",
               "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
  static const tg_s3_pair_t list[] = {{"prefix", "J"}, {"max-keys", "2"}};
  r.params = list;
  r.n_params = 2;
  expect_authz(&s3_key, &r, "host;x-amz-content-sha256;x-amz-date",
               "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
  tg_buf_t q;
  tg_buf_init(&q, 0);
  assert_int_equal(tg_s3_canonical_query(list, 2, &q), 0);
  assert_string_equal(str(&q), "max-keys=2&prefix=J");
  tg_buf_free(&q);
}

static void s3_presigned_get(void **state) {
  (void)state;
  static const tg_s3_pair_t h[] = {{"Host", "examplebucket.s3.amazonaws.com"}};
  tg_s3_request_t r = {
      .method = "GET",
      .path = "/test.txt",
      .headers = h,
      .n_headers = 1,
      .amz_date = "20130524T000000Z",
  };
  tg_buf_t q;
  tg_buf_init(&q, 0);
  assert_int_equal(tg_s3_presign(&s3_key, &r, 86400, &q), 0);
  assert_string_equal(
      str(&q),
      "X-Amz-Algorithm=AWS4-HMAC-SHA256"
      "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
      "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
      "&X-Amz-SignedHeaders=host&X-Amz-Signature="
      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  tg_buf_free(&q);
  /* Out of S3's range, or an X-Amz- parameter of the caller's: refused. */
  tg_buf_init(&q, 0);
  assert_int_equal(tg_s3_presign(&s3_key, &r, 0, &q), -EINVAL);
  assert_int_equal(tg_s3_presign(&s3_key, &r, TG_S3_MAX_EXPIRES + 1, &q),
                   -EINVAL);
  static const tg_s3_pair_t own[] = {{"X-Amz-Expires", "1"}};
  r.params = own;
  r.n_params = 1;
  assert_int_equal(tg_s3_presign(&s3_key, &r, 60, &q), -EINVAL);
  assert_int_equal(tg_buf_size(&q), 0);
  tg_buf_free(&q);
}

/* The lives s3_presign gives a URL (collector/config/config.h): "on"'s short
 * one and the range's edges reach the URL as X-Amz-Expires, and the
 * range's top is what S3 takes. */
static void presigned_url_carries_the_configured_life(void **state) {
  (void)state;
  static const tg_s3_pair_t h[] = {{"Host", "examplebucket.s3.amazonaws.com"}};
  tg_s3_request_t r = {.method = "GET",
                       .path = "/test.txt",
                       .headers = h,
                       .n_headers = 1,
                       .amz_date = "20130524T000000Z"};
  static const struct {
    int64_t ms;
    const char *want;
  } lives[] = {
      {TG_COLL_PRESIGN_DEFAULT_MS, "&X-Amz-Expires=900&"},
      {TG_COLL_PRESIGN_MIN_MS, "&X-Amz-Expires=60&"},
      {TG_COLL_PRESIGN_MAX_MS, "&X-Amz-Expires=604800&"},
  };
  assert_int_equal(TG_COLL_PRESIGN_MAX_MS / 1000, TG_S3_MAX_EXPIRES);
  for (size_t i = 0; i < sizeof lives / sizeof lives[0]; i++) {
    tg_buf_t q;
    tg_buf_init(&q, 0);
    assert_int_equal(tg_s3_presign(&s3_key, &r, (uint32_t)(lives[i].ms / 1000),
                                   &q), 0);
    assert_non_null(strstr(str(&q), lives[i].want));
    tg_buf_free(&q);
  }
}

static void uri_encoding_rules(void **state) {
  (void)state;
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_s3_uri_encode(&b, "a/b c=d:e+f%~", 13, true), 0);
  assert_string_equal(str(&b), "a/b%20c%3Dd%3Ae%2Bf%25~");
  tg_buf_reset(&b);
  assert_int_equal(tg_s3_uri_encode(&b, "a/b", 3, false), 0);
  assert_string_equal(str(&b), "a%2Fb");
  tg_buf_reset(&b);
  assert_int_equal(tg_s3_uri_encode(&b, "\x00\xff", 2, false), 0);
  assert_string_equal(str(&b), "%00%FF");
  tg_buf_free(&b);

  char d[TG_S3_AMZ_DATE_LEN + 1];
  assert_int_equal(tg_s3_amz_date(1440938160, d), 0);
  assert_string_equal(d, "20150830T123600Z");
  assert_int_equal(tg_s3_amz_date(-1, d), -EINVAL);
}

static void malformed_requests_refused(void **state) {
  (void)state;
  tg_s3_request_t r = {
      .method = "GET",
      .path = "/",
      .headers = suite_headers,
      .n_headers = 2,
      .payload_hash = EMPTY_SHA256,
      .amz_date = "20150830T123600Z",
  };
  tg_buf_t a;
  tg_buf_init(&a, 0);
  tg_s3_request_t bad = r;
  bad.path = "no-slash";
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  bad = r;
  bad.amz_date = "2015-08-30";
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  bad = r;
  bad.payload_hash = "E3B0";
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  bad = r;
  bad.method = "get";
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  /* No host; the same header twice; a value that would end the line. */
  bad = r;
  bad.headers = suite_headers + 1;
  bad.n_headers = 1;
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  static const tg_s3_pair_t twice[] = {{"Host", "a"}, {"host", "b"}};
  bad = r;
  bad.headers = twice;
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  static const tg_s3_pair_t crlf[] = {{"Host", "a\r\nX: y"}, {"x-amz-date", "z"}};
  bad = r;
  bad.headers = crlf;
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -EINVAL);
  tg_s3_key_t k = suite_key;
  k.region = "us east";
  assert_int_equal(tg_s3_sign(&k, &r, &a, NULL), -EINVAL);
  tg_s3_pair_t many[TG_S3_MAX_PARAMS + 1];
  for (size_t i = 0; i < TG_S3_MAX_PARAMS + 1; i++) many[i] = (tg_s3_pair_t){"a", "b"};
  bad = r;
  bad.params = many;
  bad.n_params = TG_S3_MAX_PARAMS + 1;
  assert_int_equal(tg_s3_sign(&suite_key, &bad, &a, NULL), -E2BIG);
  assert_int_equal(tg_buf_size(&a), 0);
  tg_buf_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(suite_vanilla),
      cmocka_unit_test(suite_query_order_and_encoding),
      cmocka_unit_test(suite_paths),
      cmocka_unit_test(suite_header_value_trim),
      cmocka_unit_test(s3_get_object_with_range),
      cmocka_unit_test(s3_put_object),
      cmocka_unit_test(s3_bucket_queries),
      cmocka_unit_test(s3_presigned_get),
      cmocka_unit_test(presigned_url_carries_the_configured_life),
      cmocka_unit_test(uri_encoding_rules),
      cmocka_unit_test(malformed_requests_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
