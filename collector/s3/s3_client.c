// SPDX-License-Identifier: Apache-2.0
/* S3 requests over libcurl (s3_client.h). One easy handle per client keeps
 * its connection between requests. Each attempt is signed anew (the date
 * moves on), so a retry after a long backoff is not refused as stale. */
#include "collector/s3/s3_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "collector/s3/s3_sigv4.h"
#include "collector/s3/s3_xml.h"
#include "common/buf.h"
#include "common/libcrypto_init.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/error.h"

#define EMPTY_SHA256 \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/* An XML answer larger than this is not S3's: refused (-EIO). */
#define ANSWER_MAX (4u << 20)
#define BACKOFF_CAP_MS 8000u
#define HOST_MAX 300

struct tg_s3_client {
  CURL *curl;
  char *endpoint; /* scheme://host[:port], no trailing '/' */
  char host[HOST_MAX]; /* what curl sends as Host: and what is signed */
  char *region, *bucket, *access_key, *secret_key, *ca_file;
  unsigned max_attempts, base_backoff_ms, timeout_ms, connect_timeout_ms;
  int64_t (*now_s)(void *ctx);
  void *clock_ctx;
  bool unsigned_parts; /* tg_s3_payload_t resolved */
  tg_s3_monitor_t *mon; /* a reference: the config's, or one of its own */
  int last_status;
  char last_code[TG_S3_XML_CODE_MAX];
};

static char *dup_str(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static bool valid_bucket(const char *b) {
  size_t n = b ? strlen(b) : 0;
  if (n < 3 || n > 63) return false;
  for (size_t i = 0; i < n; i++)
    if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
          b[i] == '.' || b[i] == '-'))
      return false;
  return true;
}

/* Splits "http[s]://host[:port]" into the Host header's value; -EINVAL
 * for a path, a user part or anything else. */
static int endpoint_host(const char *ep, char host[HOST_MAX]) {
  const char *h;
  if (strncmp(ep, "http://", 7) == 0) h = ep + 7;
  else if (strncmp(ep, "https://", 8) == 0) h = ep + 8;
  else return -EINVAL;
  size_t n = strlen(h);
  if (n == 0 || n >= HOST_MAX) return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    char c = h[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
          c == '[' || c == ']'))
      return -EINVAL;
  }
  memcpy(host, h, n + 1);
  return 0;
}

/* Counters and health (tg_s3_stats_t) of the clients that share it: one
 * per store, so that two stores (tests open several) do not share one.
 * Each client holds a reference; writers' threads and the loop count
 * into it at once. */
struct tg_s3_monitor {
  atomic_uint refs;
  _Atomic uint64_t requests, retries, throttled, failures;
  pthread_mutex_t mu;
  tg_s3_stats_t health; /* health, since and the last failure, under mu */
};

static tg_s3_monitor_t *monitor_new(void) {
  tg_s3_monitor_t *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  atomic_init(&m->refs, 1);
  pthread_mutex_init(&m->mu, NULL);
  return m;
}

static tg_s3_monitor_t *monitor_ref(tg_s3_monitor_t *m) {
  atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
  return m;
}

/* acq_rel: the last holder sees every count the others made. */
static void monitor_unref(tg_s3_monitor_t *m) {
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
    return;
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

tg_s3_monitor_t *tg_s3_client_monitor(const tg_s3_client_t *c) {
  return c->mon;
}

void tg_s3_stats_get(tg_s3_monitor_t *m, tg_s3_stats_t *out) {
  pthread_mutex_lock(&m->mu);
  *out = m->health;
  pthread_mutex_unlock(&m->mu);
  out->requests = atomic_load(&m->requests);
  out->retries = atomic_load(&m->retries);
  out->throttled = atomic_load(&m->throttled);
  out->failures = atomic_load(&m->failures);
}

const char *tg_s3_health_name(tg_s3_health_t h) {
  switch (h) {
  case TG_S3_OK: return "ok";
  case TG_S3_RETRYING: return "retrying";
  case TG_S3_FAILING: return "failing";
  }
  return "?";
}

/* Records how a request ended (|h|) and, unless OK, its failure. */
static void status_note(tg_s3_monitor_t *m, tg_s3_health_t h,
                        const char *method, int http, const char *code,
                        int rc) {
  int64_t now = wall_ms();
  tg_s3_stats_t *st = &m->health;
  pthread_mutex_lock(&m->mu);
  if (st->health != h || !st->since_ms) st->since_ms = now;
  st->health = h;
  if (h != TG_S3_OK) {
    st->error_ms = now;
    st->error_status = http;
    snprintf(st->error_method, sizeof st->error_method, "%s", method);
    snprintf(st->error_code, sizeof st->error_code, "%s", code);
    snprintf(st->error_text, sizeof st->error_text, "%s", tg_strerror(rc));
  }
  pthread_mutex_unlock(&m->mu);
}

/* libcurl's global state, once per process, before any handle; libcrypto
 * first, so that libcurl's start of it does not register its exit
 * handler (common/libcrypto_init.h). */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_global;
static void curl_init(void) {
  (void)tg_libcrypto_init();
  curl_global = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int tg_s3_client_new(const tg_s3_client_config_t *cfg, tg_s3_client_t **out) {
  *out = NULL;
  pthread_once(&curl_once, curl_init);
  if (curl_global != CURLE_OK) return -ENOMEM;
  if (!cfg || !cfg->endpoint || !cfg->region || !*cfg->region ||
      !valid_bucket(cfg->bucket) || !cfg->access_key || !*cfg->access_key ||
      !cfg->secret_key || !*cfg->secret_key ||
      cfg->payload > TG_S3_PAYLOAD_UNSIGNED)
    return -EINVAL;
  tg_s3_client_t *c = calloc(1, sizeof *c);
  if (!c) return -ENOMEM;
  if (endpoint_host(cfg->endpoint, c->host)) {
    free(c);
    return -EINVAL;
  }
  c->endpoint = dup_str(cfg->endpoint);
  c->region = dup_str(cfg->region);
  c->bucket = dup_str(cfg->bucket);
  c->access_key = dup_str(cfg->access_key);
  c->secret_key = dup_str(cfg->secret_key);
  c->ca_file = dup_str(cfg->ca_file);
  c->curl = curl_easy_init();
  c->mon = cfg->monitor ? monitor_ref(cfg->monitor) : monitor_new();
  if (!c->mon || !c->endpoint || !c->region || !c->bucket || !c->access_key ||
      !c->secret_key || (cfg->ca_file && !c->ca_file) || !c->curl) {
    tg_s3_client_free(c);
    return -ENOMEM;
  }
  c->max_attempts = cfg->max_attempts ? cfg->max_attempts : 5;
  c->base_backoff_ms = cfg->base_backoff_ms ? cfg->base_backoff_ms : 200;
  c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 120000;
  c->connect_timeout_ms =
      cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 5000;
  c->unsigned_parts =
      cfg->payload == TG_S3_PAYLOAD_UNSIGNED ||
      (cfg->payload == TG_S3_PAYLOAD_AUTO &&
       strncmp(cfg->endpoint, "https://", 8) == 0);
  c->now_s = cfg->now_s;
  c->clock_ctx = cfg->clock_ctx;
  *out = c;
  return 0;
}

void tg_s3_client_free(tg_s3_client_t *c) {
  if (!c) return;
  if (c->curl) curl_easy_cleanup(c->curl);
  if (c->secret_key) OPENSSL_cleanse(c->secret_key, strlen(c->secret_key));
  free(c->endpoint);
  free(c->region);
  free(c->bucket);
  free(c->access_key);
  free(c->secret_key);
  free(c->ca_file);
  monitor_unref(c->mon);
  free(c);
}

int tg_s3_last_status(const tg_s3_client_t *c) { return c->last_status; }
const char *tg_s3_last_code(const tg_s3_client_t *c) { return c->last_code; }

/* One request, as the callers describe it. */
typedef struct req {
  const char *method;
  const char *key; /* NULL: the bucket itself */
  const tg_s3_pair_t *params;
  size_t n_params;
  const tg_s3_pair_t *extra; /* headers to sign and send besides ours */
  size_t n_extra;
  const void *body;
  size_t body_len;
  tg_s3_data_fn data_fn; /* a GET's bytes on 2xx; NULL: into |answer| */
  void *data_ctx;
  tg_buf_t *answer; /* the body of the answer (XML), capped */
  char *etag;       /* the ETag header, when not NULL */
  uint64_t content_length;
  bool head;
  bool unsigned_payload; /* x-amz-content-sha256: UNSIGNED-PAYLOAD */
} req_t;

/* The state of one attempt, for libcurl's callbacks. */
typedef struct attempt {
  tg_s3_client_t *c;
  req_t *r;
  tg_buf_t err; /* a non-2xx answer's body */
  uint64_t delivered;
  int cb_rc;
  bool transport; /* the request or its answer did not get through */
} attempt_t;

static bool ok_status(long st) { return st >= 200 && st < 300; }

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud) {
  attempt_t *a = ud;
  size_t n = size * nmemb;
  long st = 0;
  curl_easy_getinfo(a->c->curl, CURLINFO_RESPONSE_CODE, &st);
  if (!ok_status(st)) {
    if (tg_buf_append(&a->err, p, n)) return 0;
    return n;
  }
  if (a->r->data_fn) {
    int rc = a->r->data_fn(a->r->data_ctx, p, n);
    if (rc) {
      a->cb_rc = rc;
      return 0;
    }
    a->delivered += n;
    return n;
  }
  if (a->r->answer && tg_buf_append(a->r->answer, p, n)) return 0;
  return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud) {
  attempt_t *a = ud;
  size_t n = size * nmemb;
  if (a->r->etag && n > 5 && strncasecmp(p, "ETag:", 5) == 0) {
    const char *v = p + 5;
    size_t vl = n - 5;
    while (vl && (*v == ' ' || *v == '\t')) v++, vl--;
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
      vl--;
    if (vl < TG_S3_ETAG_MAX) {
      memcpy(a->r->etag, v, vl);
      a->r->etag[vl] = '\0';
    }
  }
  return n;
}

static int errno_of_curl(CURLcode cc) {
  switch (cc) {
    case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY: return -ENOMEM;
    default: return -EIO;
  }
}

static int errno_of_status(long st, const char *code) {
  if (st == 404) return -ENOENT;
  if (st == 412) return -EEXIST;
  if (st == 409 && (strcmp(code, "BucketAlreadyOwnedByYou") == 0 ||
                    strcmp(code, "BucketAlreadyExists") == 0))
    return -EEXIST;
  if (st == 401 || st == 403) return -EACCES;
  if (st == 416) return -ERANGE;
  if (st == 503 && strcmp(code, "SlowDown") == 0) return -EAGAIN;
  if (st >= 500) return -EIO;
  return -EINVAL;
}

static int64_t now_s(tg_s3_client_t *c) {
  return c->now_s ? c->now_s(c->clock_ctx) : (int64_t)time(NULL);
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* Builds, signs and performs one attempt. Returns 0 with *status set, or
 * a transport error (*status 0). */
static int attempt_once(tg_s3_client_t *c, req_t *r, attempt_t *a,
                        long *status) {
  *status = 0;
  char date[TG_S3_AMZ_DATE_LEN + 1];
  int rc = tg_s3_amz_date(now_s(c), date);
  if (rc) return rc;
  char hash[TG_S3_SHA256_HEX_LEN + 1];
  if (r->unsigned_payload)
    snprintf(hash, sizeof hash, "%s", TG_S3_UNSIGNED_PAYLOAD);
  else if (r->body_len) tg_s3_sha256_hex(r->body, r->body_len, hash);
  else memcpy(hash, EMPTY_SHA256, sizeof hash);

  tg_s3_pair_t h[TG_S3_MAX_HEADERS];
  size_t nh = 0;
  if (r->n_extra > TG_S3_MAX_HEADERS - 3) return -E2BIG;
  h[nh++] = (tg_s3_pair_t){"host", c->host};
  h[nh++] = (tg_s3_pair_t){"x-amz-content-sha256", hash};
  h[nh++] = (tg_s3_pair_t){"x-amz-date", date};
  for (size_t i = 0; i < r->n_extra; i++) h[nh++] = r->extra[i];

  tg_buf_t path, authz, query, url, line;
  tg_buf_init(&path, 0);
  tg_buf_init(&authz, 0);
  tg_buf_init(&query, 0);
  tg_buf_init(&url, 0);
  tg_buf_init(&line, 0);
  struct curl_slist *hl = NULL;
  if ((rc = tg_buf_append(&path, "/", 1)) ||
      (rc = tg_buf_append(&path, c->bucket, strlen(c->bucket))) ||
      (r->key && ((rc = tg_buf_append(&path, "/", 1)) ||
                  (rc = tg_buf_append(&path, r->key, strlen(r->key))))) ||
      (rc = tg_buf_append(&path, "", 1)))
    goto done;
  tg_s3_key_t k = {c->access_key, c->secret_key, c->region, "s3"};
  tg_s3_request_t sr = {
      .method = r->method,
      .path = (const char *)tg_buf_begin(&path),
      .params = r->params,
      .n_params = r->n_params,
      .headers = h,
      .n_headers = nh,
      .payload_hash = hash,
      .amz_date = date,
  };
  if ((rc = tg_s3_sign(&k, &sr, &authz, &query)) ||
      (rc = tg_buf_append(&authz, "", 1)) ||
      (rc = tg_buf_append(&url, c->endpoint, strlen(c->endpoint))) ||
      (rc = tg_s3_uri_encode(&url, sr.path, strlen(sr.path), true)))
    goto done;
  if (tg_buf_size(&query) &&
      ((rc = tg_buf_append(&url, "?", 1)) ||
       (rc = tg_buf_append(&url, tg_buf_begin(&query), tg_buf_size(&query)))))
    goto done;
  if ((rc = tg_buf_append(&url, "", 1))) goto done;

  /* Every header we signed, as signed; and no Expect or Content-Type of
   * curl's own (neither is signed; a gateway need not see them). */
  for (size_t i = 1; i < nh; i++) {
    tg_buf_reset(&line);
    if ((rc = tg_buf_append(&line, h[i].name, strlen(h[i].name))) ||
        (rc = tg_buf_append(&line, ": ", 2)) ||
        (rc = tg_buf_append(&line, h[i].value, strlen(h[i].value))) ||
        (rc = tg_buf_append(&line, "", 1)))
      goto done;
    struct curl_slist *n = curl_slist_append(hl, (const char *)tg_buf_begin(&line));
    if (!n) {
      rc = -ENOMEM;
      goto done;
    }
    hl = n;
  }
  tg_buf_reset(&line);
  if ((rc = tg_buf_append(&line, "Authorization: ", 15)) ||
      (rc = tg_buf_append(&line, tg_buf_begin(&authz), tg_buf_size(&authz))))
    goto done;
  static const char *const plain[] = {"Expect:", "Content-Type:", "Accept:"};
  struct curl_slist *n = curl_slist_append(hl, (const char *)tg_buf_begin(&line));
  for (size_t i = 0; n && i < sizeof plain / sizeof plain[0]; i++) {
    hl = n;
    n = curl_slist_append(hl, plain[i]);
  }
  if (!n) {
    rc = -ENOMEM;
    goto done;
  }
  hl = n;

  CURL *e = c->curl;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_URL, (const char *)tg_buf_begin(&url));
  curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
  if (c->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
  if (r->head) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (strcmp(r->method, "GET") == 0) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    if (r->body_len || strcmp(r->method, "DELETE") != 0) {
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body_len ? r->body : "");
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                       (curl_off_t)r->body_len);
    }
  }
  CURLcode cc = curl_easy_perform(e);
  long st = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
  if (a->cb_rc) {
    rc = a->cb_rc;
    goto done;
  }
  if (cc != CURLE_OK) {
    /* An answer too large for its buffer is an answer we cannot read, not
     * a transport failure worth another attempt. */
    a->transport = !(cc == CURLE_WRITE_ERROR && st);
    rc = a->transport ? errno_of_curl(cc) : -EIO;
    if (a->transport && rc == -EIO)
      TG_DEBUG("s3: %s %s: curl: %s", r->method, r->key ? r->key : "",
               curl_easy_strerror(cc));
    goto done;
  }
  if (r->head) {
    curl_off_t len = -1;
    curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    r->content_length = len > 0 ? (uint64_t)len : 0;
  }
  *status = st;
done:
  curl_slist_free_all(hl);
  tg_buf_free(&path);
  if (tg_buf_size(&authz)) OPENSSL_cleanse(tg_buf_begin(&authz), tg_buf_size(&authz));
  tg_buf_free(&authz);
  tg_buf_free(&query);
  tg_buf_free(&url);
  tg_buf_free(&line);
  return rc;
}

/* Performs |r| with the retries; 0 for a 2xx answer, else the error. */
static int perform(tg_s3_client_t *c, req_t *r) {
  unsigned backoff = c->base_backoff_ms;
  int rc = -EIO;
  for (unsigned i = 0; i < c->max_attempts; i++) {
    attempt_t a = {.c = c, .r = r};
    tg_buf_init(&a.err, 64u << 10);
    if (r->answer) tg_buf_reset(r->answer);
    if (r->etag) r->etag[0] = '\0';
    long st = 0;
    c->last_status = 0;
    c->last_code[0] = '\0';
    atomic_fetch_add(&c->mon->requests, 1);
    rc = attempt_once(c, r, &a, &st);
    tg_s3_xml_t x;
    x.code[0] = x.message[0] = '\0';
    bool retry = false;
    if (rc == 0) {
      c->last_status = (int)st;
      if (!ok_status(st)) {
        if (tg_buf_size(&a.err))
          (void)tg_s3_xml_parse(tg_buf_begin(&a.err), tg_buf_size(&a.err), &x,
                                NULL, NULL);
        snprintf(c->last_code, sizeof c->last_code, "%s", x.code);
        rc = errno_of_status(st, x.code);
        retry = st >= 500;
      }
    } else {
      retry = a.transport;
    }
    tg_buf_free(&a.err);
    if (a.delivered) retry = false; /* bytes already handed on */
    bool last = !retry || i + 1 >= c->max_attempts;
    if (rc == 0 || rc == -ENOENT || rc == -EEXIST)
      status_note(c->mon, TG_S3_OK, r->method, 0, "", 0);
    else
      status_note(c->mon, last ? TG_S3_FAILING : TG_S3_RETRYING, r->method,
                  c->last_status, c->last_code, rc);
    if (rc == 0) return 0;
    /* 404 is an answer, not a failure: callers decide what it means. */
    if (last && rc != -ENOENT && rc != -EEXIST)
      atomic_fetch_add(&c->mon->failures, 1);
    if (last && rc != -ENOENT && rc != -EEXIST)
      TG_WARN("%s s3: %s %s/%s failed: HTTP %d %s %s (%s)",
              TG_NOTE(COLLECTOR_S3_FAILED), r->method, c->bucket,
              r->key ? r->key : "", c->last_status, c->last_code, x.message,
              tg_strerror(rc));
    if (last) return rc;
    TG_INFO("%s s3: %s %s/%s: HTTP %d %s (%s); retrying in %u ms",
            TG_NOTE(COLLECTOR_S3_RETRYING), r->method, c->bucket,
            r->key ? r->key : "", c->last_status, c->last_code,
            tg_strerror(rc), backoff);
    atomic_fetch_add(&c->mon->retries, 1);
    if (rc == -EAGAIN) atomic_fetch_add(&c->mon->throttled, 1);
    sleep_ms(backoff);
    backoff = backoff > BACKOFF_CAP_MS / 2 ? BACKOFF_CAP_MS : backoff * 2;
  }
  return rc;
}

static bool valid_key(const char *key) {
  size_t n = key ? strlen(key) : 0;
  return n > 0 && n <= TG_S3_KEY_MAX;
}

int tg_s3_bucket_create(tg_s3_client_t *c) {
  req_t r = {.method = "PUT"};
  return perform(c, &r);
}

int tg_s3_put(tg_s3_client_t *c, const char *key, const void *body, size_t n,
              bool if_none_match, char etag[TG_S3_ETAG_MAX]) {
  if (!valid_key(key) || (n && !body)) return -EINVAL;
  static const tg_s3_pair_t inm[] = {{"if-none-match", "*"}};
  req_t r = {.method = "PUT", .key = key, .body = body, .body_len = n,
             .extra = if_none_match ? inm : NULL,
             .n_extra = if_none_match ? 1 : 0, .etag = etag};
  return perform(c, &r);
}

int tg_s3_get(tg_s3_client_t *c, const char *key, uint64_t off, uint64_t len,
              tg_s3_data_fn fn, void *ctx) {
  if (!valid_key(key) || !fn) return -EINVAL;
  char range[64];
  tg_s3_pair_t h[1];
  size_t nh = 0;
  if (off || len) {
    if (len && off > UINT64_MAX - len) return -EINVAL;
    if (len)
      snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)off,
               (unsigned long long)(off + len - 1));
    else
      snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)off);
    h[nh++] = (tg_s3_pair_t){"range", range};
  }
  req_t r = {.method = "GET", .key = key, .extra = h, .n_extra = nh,
             .data_fn = fn, .data_ctx = ctx};
  return perform(c, &r);
}

int tg_s3_head(tg_s3_client_t *c, const char *key, uint64_t *size,
               char etag[TG_S3_ETAG_MAX]) {
  if (!valid_key(key)) return -EINVAL;
  char tag[TG_S3_ETAG_MAX];
  req_t r = {.method = "HEAD", .key = key, .head = true, .etag = tag};
  int rc = perform(c, &r);
  if (rc) return rc;
  if (size) *size = r.content_length;
  if (etag) memcpy(etag, tag, sizeof tag);
  return 0;
}

int tg_s3_delete(tg_s3_client_t *c, const char *key) {
  if (!valid_key(key)) return -EINVAL;
  req_t r = {.method = "DELETE", .key = key};
  return perform(c, &r);
}

/* A GET or POST whose XML answer is parsed into *x, items to |fn|. */
static int xml_request(tg_s3_client_t *c, req_t *r, tg_s3_xml_t *x,
                       tg_s3_xml_item_fn fn, void *ctx) {
  tg_buf_t ans;
  tg_buf_init(&ans, ANSWER_MAX);
  r->answer = &ans;
  int rc = perform(c, r);
  if (!rc) {
    rc = tg_s3_xml_parse(tg_buf_begin(&ans), tg_buf_size(&ans), x, fn, ctx);
    if (rc == -EIO)
      TG_WARN("%s s3: %s %s/%s: the answer is not the XML S3 sends",
              TG_NOTE(COLLECTOR_S3_FAILED), r->method, c->bucket,
              r->key ? r->key : "");
  }
  tg_buf_free(&ans);
  return rc;
}

typedef struct list_ctx {
  tg_s3_object_fn fn;
  tg_s3_upload_fn ufn;
  void *ctx;
} list_ctx_t;

static int on_item(void *ud, const tg_s3_object_t *o, const tg_s3_upload_t *u) {
  list_ctx_t *l = ud;
  if (o && l->fn) return l->fn(l->ctx, o);
  if (u && l->ufn) return l->ufn(l->ctx, u);
  return 0;
}

int tg_s3_list(tg_s3_client_t *c, const char *prefix, tg_s3_object_fn fn,
               void *ctx) {
  if (!prefix || strlen(prefix) > TG_S3_KEY_MAX || !fn) return -EINVAL;
  list_ctx_t l = {.fn = fn, .ctx = ctx};
  char token[TG_S3_XML_TOKEN_MAX] = "";
  tg_s3_xml_t *x = malloc(sizeof *x);
  if (!x) return -ENOMEM;
  int rc;
  for (;;) {
    tg_s3_pair_t p[3] = {{"list-type", "2"}, {"prefix", prefix}};
    size_t np = 2;
    if (token[0]) p[np++] = (tg_s3_pair_t){"continuation-token", token};
    req_t r = {.method = "GET", .params = p, .n_params = np};
    if ((rc = xml_request(c, &r, x, on_item, &l))) break;
    if (strcmp(x->root, "ListBucketResult") != 0) {
      rc = -EIO;
      break;
    }
    if (!x->truncated) break;
    /* A truncated page must say where the next starts, and move on. */
    if (!x->next_token[0] || strcmp(x->next_token, token) == 0) {
      rc = -EIO;
      break;
    }
    memcpy(token, x->next_token, sizeof token);
  }
  free(x);
  return rc;
}

int tg_s3_presign_get(tg_s3_client_t *c, const char *key, int64_t now_s,
                      uint32_t expires_s, char *url, size_t cap) {
  if (!valid_key(key)) return -EINVAL;
  char date[TG_S3_AMZ_DATE_LEN + 1];
  int rc = tg_s3_amz_date(now_s, date);
  if (rc) return rc;
  tg_buf_t path, u;
  tg_buf_init(&path, 0);
  tg_buf_init(&u, 0);
  tg_s3_key_t k = {c->access_key, c->secret_key, c->region, "s3"};
  tg_s3_pair_t h[] = {{"host", c->host}};
  if ((rc = tg_buf_append(&path, "/", 1)) ||
      (rc = tg_buf_append(&path, c->bucket, strlen(c->bucket))) ||
      (rc = tg_buf_append(&path, "/", 1)) ||
      (rc = tg_buf_append(&path, key, strlen(key))) ||
      (rc = tg_buf_append(&path, "", 1)))
    goto done;
  tg_s3_request_t r = {.method = "GET",
                       .path = (const char *)tg_buf_begin(&path),
                       .headers = h,
                       .n_headers = 1,
                       .amz_date = date};
  if ((rc = tg_buf_append(&u, c->endpoint, strlen(c->endpoint))) ||
      (rc = tg_s3_uri_encode(&u, r.path, strlen(r.path), true)) ||
      (rc = tg_buf_append(&u, "?", 1)) ||
      (rc = tg_s3_presign(&k, &r, expires_s, &u)))
    goto done;
  if (tg_buf_size(&u) >= cap) {
    rc = -ENAMETOOLONG;
    goto done;
  }
  memcpy(url, tg_buf_begin(&u), tg_buf_size(&u));
  url[tg_buf_size(&u)] = '\0';
done:
  tg_buf_free(&path);
  tg_buf_free(&u);
  return rc;
}

int tg_s3_mpu_create(tg_s3_client_t *c, const char *key,
                     char upload_id[TG_S3_UPLOAD_ID_MAX]) {
  if (!valid_key(key)) return -EINVAL;
  static const tg_s3_pair_t p[] = {{"uploads", NULL}};
  req_t r = {.method = "POST", .key = key, .params = p, .n_params = 1};
  tg_s3_xml_t *x = malloc(sizeof *x);
  if (!x) return -ENOMEM;
  int rc = xml_request(c, &r, x, NULL, NULL);
  if (!rc && (strcmp(x->root, "InitiateMultipartUploadResult") != 0 ||
              !x->upload_id[0]))
    rc = -EIO;
  if (!rc) memcpy(upload_id, x->upload_id, TG_S3_UPLOAD_ID_MAX);
  free(x);
  return rc;
}

static bool valid_upload_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  return n > 0 && n < TG_S3_UPLOAD_ID_MAX;
}

int tg_s3_mpu_part(tg_s3_client_t *c, const char *key, const char *upload_id,
                   unsigned part_no, const void *body, size_t n,
                   char etag[TG_S3_ETAG_MAX]) {
  if (!valid_key(key) || !valid_upload_id(upload_id) || part_no == 0 ||
      part_no > TG_S3_PARTS_MAX || !n || !body || !etag)
    return -EINVAL;
  char num[16];
  snprintf(num, sizeof num, "%u", part_no);
  tg_s3_pair_t p[] = {{"partNumber", num}, {"uploadId", upload_id}};
  req_t r = {.method = "PUT", .key = key, .params = p, .n_params = 2,
             .body = body, .body_len = n, .etag = etag,
             .unsigned_payload = c->unsigned_parts};
  int rc = perform(c, &r);
  if (!rc && !etag[0]) rc = -EIO; /* a part without an ETag cannot be named */
  return rc;
}

/* Appends |s| with XML's five special characters escaped. */
static int xml_escape(tg_buf_t *b, const char *s) {
  for (; *s; s++) {
    const char *e = NULL;
    switch (*s) {
      case '&': e = "&amp;"; break;
      case '<': e = "&lt;"; break;
      case '>': e = "&gt;"; break;
      case '"': e = "&quot;"; break;
      case '\'': e = "&apos;"; break;
      default: break;
    }
    int rc = e ? tg_buf_append(b, e, strlen(e)) : tg_buf_append(b, s, 1);
    if (rc) return rc;
  }
  return 0;
}

int tg_s3_mpu_complete(tg_s3_client_t *c, const char *key,
                       const char *upload_id, const tg_s3_part_t *parts,
                       size_t n, char etag[TG_S3_ETAG_MAX]) {
  if (!valid_key(key) || !valid_upload_id(upload_id) || !parts || n == 0 ||
      n > TG_S3_PARTS_MAX)
    return -EINVAL;
  tg_buf_t body;
  tg_buf_init(&body, 0);
  int rc = tg_buf_append(&body, "<CompleteMultipartUpload>", 25);
  char num[16];
  for (size_t i = 0; !rc && i < n; i++) {
    if ((i && parts[i].part_no <= parts[i - 1].part_no) || !parts[i].part_no ||
        memchr(parts[i].etag, '\0', TG_S3_ETAG_MAX) == NULL) {
      rc = -EINVAL;
      break;
    }
    snprintf(num, sizeof num, "%u", parts[i].part_no);
    if ((rc = tg_buf_append(&body, "<Part><PartNumber>", 18)) ||
        (rc = tg_buf_append(&body, num, strlen(num))) ||
        (rc = tg_buf_append(&body, "</PartNumber><ETag>", 19)) ||
        (rc = xml_escape(&body, parts[i].etag)) ||
        (rc = tg_buf_append(&body, "</ETag></Part>", 14)))
      break;
  }
  if (!rc) rc = tg_buf_append(&body, "</CompleteMultipartUpload>", 26);
  tg_s3_xml_t *x = rc ? NULL : malloc(sizeof *x);
  if (!rc && !x) rc = -ENOMEM;
  if (!rc) {
    tg_s3_pair_t p[] = {{"uploadId", upload_id}};
    req_t r = {.method = "POST", .key = key, .params = p, .n_params = 1,
               .body = tg_buf_begin(&body), .body_len = tg_buf_size(&body)};
    rc = xml_request(c, &r, x, NULL, NULL);
    if (!rc && strcmp(x->root, "Error") == 0) {
      snprintf(c->last_code, sizeof c->last_code, "%s", x->code);
      TG_WARN("%s s3: completing %s/%s failed after its answer began: "
              "%s %s",
              TG_NOTE(COLLECTOR_S3_FAILED), c->bucket, key, x->code,
              x->message);
      rc = strcmp(x->code, "NoSuchUpload") == 0 ? -ENOENT
           : strcmp(x->code, "InvalidPart") == 0 ||
                   strcmp(x->code, "InvalidPartOrder") == 0 ||
                   strcmp(x->code, "EntityTooSmall") == 0
               ? -EINVAL
               : -EIO;
    } else if (!rc && strcmp(x->root, "CompleteMultipartUploadResult") != 0) {
      rc = -EIO;
    }
    if (!rc && etag) memcpy(etag, x->etag, TG_S3_ETAG_MAX);
  }
  free(x);
  tg_buf_free(&body);
  return rc;
}

int tg_s3_mpu_abort(tg_s3_client_t *c, const char *key, const char *upload_id) {
  if (!valid_key(key) || !valid_upload_id(upload_id)) return -EINVAL;
  tg_s3_pair_t p[] = {{"uploadId", upload_id}};
  req_t r = {.method = "DELETE", .key = key, .params = p, .n_params = 1};
  return perform(c, &r);
}

int tg_s3_mpu_list(tg_s3_client_t *c, const char *prefix, tg_s3_upload_fn fn,
                   void *ctx) {
  if (!prefix || strlen(prefix) > TG_S3_KEY_MAX || !fn) return -EINVAL;
  list_ctx_t l = {.ufn = fn, .ctx = ctx};
  char key_marker[TG_S3_KEY_MAX + 1] = "";
  char id_marker[TG_S3_UPLOAD_ID_MAX] = "";
  tg_s3_xml_t *x = malloc(sizeof *x);
  if (!x) return -ENOMEM;
  int rc;
  for (;;) {
    tg_s3_pair_t p[4] = {{"uploads", NULL}, {"prefix", prefix}};
    size_t np = 2;
    if (key_marker[0]) p[np++] = (tg_s3_pair_t){"key-marker", key_marker};
    if (id_marker[0]) p[np++] = (tg_s3_pair_t){"upload-id-marker", id_marker};
    req_t r = {.method = "GET", .params = p, .n_params = np};
    if ((rc = xml_request(c, &r, x, on_item, &l))) break;
    if (strcmp(x->root, "ListMultipartUploadsResult") != 0) {
      rc = -EIO;
      break;
    }
    if (!x->truncated) break;
    if (!x->next_key_marker[0] ||
        (strcmp(x->next_key_marker, key_marker) == 0 &&
         strcmp(x->next_upload_marker, id_marker) == 0)) {
      rc = -EIO;
      break;
    }
    memcpy(key_marker, x->next_key_marker, sizeof key_marker);
    memcpy(id_marker, x->next_upload_marker, sizeof id_marker);
  }
  free(x);
  return rc;
}
