/* tracegate-collector with `bucket` set, against a real Ceph gateway
 * (coll_rgw.h) and the fleet harness's hosts: a snapshot stored in the
 * bucket and read back through the API (/trace from the bucket), the
 * collector SIGKILLed mid-snapshot then restarted (the row FAILED, the
 * upload aborted, nothing visible), two collectors on one PostgreSQL
 * catalog and the bucket serving each other's snapshots, and, last, the
 * gateway gone: the snapshot FAILED with its reason, /api/v1/store saying
 * "failing" with the last error, and the rings still tracing. One gateway
 * for the executable; skips, saying so, without Ceph. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "coll_e2e.h"
#include "coll_pg.h"
#include "coll_rgw.h"
#include "fleet_trace.h"
#include "test_proc.h"
#include "collector/s3/s3_client.h"
#include "collector/config/shard.h"

#define BUCKET "tg-e2e"

static coll_rgw_t gw;
static bool skipped;

static tg_s3_client_t *bucket_client(void) {
  tg_s3_client_t *c = coll_rgw_client(&gw, BUCKET);
  assert_non_null(c);
  return c;
}

static int group_setup(void **state) {
  (void)state;
  int rc = coll_rgw_start_bucket(&gw, BUCKET, "test_collector_s3_e2e");
  if (rc == 1) {
    skipped = true;
    return 0;
  }
  return rc ? rc : fleet_dir_create("colls3");
}

static int group_teardown(void **state) {
  coll_rgw_stop(&gw);
  if (!skipped) return fleet_dir_teardown(state);
  return 0;
}

static const char *bucket_config(void) {
  static char extra[1024];
  snprintf(extra, sizeof extra,
           "bucket = s3://" BUCKET "/fleet\n"
           "s3_endpoint = %s\n"
           "s3_credentials_file = %s\n",
           gw.endpoint, gw.credentials);
  return extra;
}

static int collect(void *ctx, const void *p, size_t n) {
  FILE *f = ctx;
  return fwrite(p, 1, n, f) == n ? 0 : -EIO;
}

static int count_upload(void *ctx, const tg_s3_upload_t *u) {
  (void)u;
  (*(unsigned *)ctx)++;
  return 0;
}

/* The value of counter |name| in the collector's /metrics; -1: absent. */
static long long metric(const collector_t *c, const char *name) {
  const char *out = fleet_in_dir("s3.metrics");
  assert_int_equal(http(c, "GET", "/metrics", out), 200);
  FILE *f = fopen(out, "r");
  assert_non_null(f);
  char line[512];
  long long v = -1;
  size_t n = strlen(name);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, name, n) == 0 && line[n] == ' ') v = atoll(line + n + 1);
  fclose(f);
  return v;
}

/* Whether two files hold the same bytes. */
static bool same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) same = false;
    if (ca == EOF || cb == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

static void a_snapshot_in_the_bucket_read_through_the_api(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, bucket_config());
  fleet_commit_packets(&h[0].p, 0, "s3A", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "s3B", 1, 7);
  const char *json = fleet_in_dir("s3snap.json");
  char id[32];
  snprintf(id, sizeof id, "%s", snapshot(&c, h, 2, json));
  const char *trace = fleet_in_dir("s3.pftrace");
  download(&c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "s3A", 1, 5);
  fleet_trace_assert_values(&t, "s3B", 1, 7);
  fleet_trace_free(&t);

  /* One host's part, through the host index object: that host's packets
   * and not the other's. */
  char path[1024];
  const char *part = fleet_in_dir("s3a.pftrace");
  snprintf(path, sizeof path, "/api/v1/snapshots/%s/trace?host=%s", id,
           h[0].spec);
  assert_int_equal(http(&c, "GET", path, part), 200);
  fleet_trace_load(part, &t);
  fleet_trace_assert_values(&t, "s3A", 1, 5);
  fleet_trace_assert_values(&t, "s3B", 0, 0);
  fleet_trace_free(&t);

  /* The bucket's requests counted, none failed. */
  assert_true(metric(&c, "tracegate_collector_bucket_requests_total") > 0);
  assert_int_equal(metric(&c, "tracegate_collector_bucket_failures_total"), 0);
  /* The API's store status: the bucket, answering. */
  const char *st = fleet_in_dir("s3store.json");
  assert_int_equal(http(&c, "GET", "/api/v1/store", st), 200);
  assert_json(st, "kind", "\"bucket\"");
  assert_json(st, "bucket", "\"s3://" BUCKET "/fleet/\"");
  assert_json(st, "state", "\"ok\"");
  assert_json(st, "failures", "0");

  /* The bytes the API served are the object's. */
  tg_s3_client_t *b = bucket_client();
  char key[128];
  snprintf(key, sizeof key, "fleet/snapshots/%s.pftrace", id);
  const char *obj = fleet_in_dir("s3.object");
  FILE *f = fopen(obj, "wb");
  assert_non_null(f);
  assert_int_equal(tg_s3_get(b, key, 0, 0, collect, f), 0);
  fclose(f);
  assert_true(same_file(trace, obj));
  unsigned n = 0;
  assert_int_equal(tg_s3_mpu_list(b, "fleet/", count_upload, &n), 0);
  assert_int_equal(n, 0);
  tg_s3_client_free(b);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

static void a_collector_killed_mid_upload_aborts_it_at_restart(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, bucket_config());
  fleet_commit_packets(&h[0].p, 0, "killA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "killB", 1, 3);
  const char *json = fleet_in_dir("s3mid.json");
  char id[32];
  snprintf(id, sizeof id, "%s",
           snapshot_killed_under_way(&c, h, "mid", json));
  /* Its upload may or may not have been initiated by then (a thread of
   * the snapshot's does it): either way nothing of it stays. */
  tg_s3_client_t *b = bucket_client();
  unsigned n = 0;
  collector_start(&c);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/snapshots/%s", id);
  assert_int_equal(http(&c, "GET", path, json), 200);
  assert_json(json, "snapshot.state", "\"failed\"");
  n = 0;
  assert_int_equal(tg_s3_mpu_list(b, "fleet/", count_upload, &n), 0);
  assert_int_equal(n, 0);
  char key[128];
  snprintf(key, sizeof key, "fleet/snapshots/%s.pftrace", id);
  assert_int_equal(tg_s3_head(b, key, NULL, NULL), -ENOENT);
  snprintf(path, sizeof path, "/api/v1/snapshots/%s/trace", id);
  assert_int_equal(http(&c, "GET", path, fleet_in_dir("s3mid.trace")), 404);
  tg_s3_client_free(b);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

static size_t to_file(char *p, size_t size, size_t nmemb, void *ud) {
  return fwrite(p, size, nmemb, ud) * size;
}

/* GET |url| without following redirects, the body into |out|; the status
 * and, for a redirect, its Location into |loc|. */
static long raw_get(const char *url, const char *out, char *loc, size_t cap) {
  CURL *e = curl_easy_init();
  assert_non_null(e);
  FILE *f = fopen(out, "wb");
  assert_non_null(f);
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, to_file);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
  assert_int_equal(curl_easy_perform(e), CURLE_OK);
  long st = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
  char *r = NULL;
  curl_easy_getinfo(e, CURLINFO_REDIRECT_URL, &r);
  if (loc) snprintf(loc, cap, "%s", r ? r : "");
  curl_easy_cleanup(e);
  fclose(f);
  return st;
}

/* s3_presign: a whole trace's download goes to the bucket by a presigned
 * URL, the collector out of the path; a host's part is still served.
 * "on" gives the URL a short life (15m): no revocation reaches it. */
static void presigned_downloads_skip_the_collector(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  collector_t c;
  char extra[1200];
  snprintf(extra, sizeof extra, "%ss3_presign = on\n", bucket_config());
  fleet_up(h, &c, extra);
  fleet_commit_packets(&h[0].p, 0, "preA", 1, 4);
  fleet_commit_packets(&h[1].p, 0, "preB", 1, 4);
  const char *json = fleet_in_dir("s3pre.json");
  char id[32];
  snprintf(id, sizeof id, "%s", snapshot(&c, h, 2, json));
  char url[256], loc[4096];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/api/v1/snapshots/%s/trace",
           c.port, id);
  assert_int_equal(raw_get(url, fleet_in_dir("s3pre.302"), loc, sizeof loc),
                   302);
  assert_int_equal(strncmp(loc, gw.endpoint, strlen(gw.endpoint)), 0);
  assert_non_null(strstr(loc, "X-Amz-Signature="));
  assert_non_null(strstr(loc, "&X-Amz-Expires=900&"));
  assert_json(fleet_in_dir("s3pre.302"), "expires_s", "900");
  const char *got = fleet_in_dir("s3pre.pftrace");
  assert_int_equal(raw_get(loc, got, NULL, 0), 200);
  fleet_trace_t t;
  fleet_trace_load(got, &t);
  fleet_trace_assert_values(&t, "preA", 1, 4);
  fleet_trace_assert_values(&t, "preB", 1, 4);
  fleet_trace_free(&t);
  /* A host's part: the collector's, from the index. */
  char path[1024];
  snprintf(path, sizeof path, "/api/v1/snapshots/%s/trace?host=%s", id,
           h[1].spec);
  assert_int_equal(http(&c, "GET", path, fleet_in_dir("s3pre.b")), 200);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Last: it stops the gateway mid-snapshot (after the collector started,
 * before the snapshot's upload). */
/* Two collectors, shards of one inventory, on one PostgreSQL catalog and
 * one bucket, each with its own empty working directory (no shared file
 * system): either lists both snapshots and serves the other's trace,
 * byte for byte what its writer serves, out of the bucket. */
static void two_collectors_one_catalog_one_bucket(void **state) {
  (void)state;
  if (skipped) skip();
  assert_true(coll_pg_installed()); /* deploy/deps.sh installs postgresql */
  coll_pg_server_t pg = {0};
  assert_int_equal(coll_pg_start(&pg), 0);
  char uri[512], extra[2048];
  assert_int_equal(coll_pg_createdb(&pg, uri, sizeof uri), 0);
  snprintf(extra, sizeof extra,
           "catalog = %s\n"
           "bucket = s3://" BUCKET "/shared\n"
           "s3_endpoint = %s\n"
           "s3_credentials_file = %s\n",
           uri, gw.endpoint, gw.credentials);
  enum { N = 4 };
  fleet_host_t h[N];
  start_hosts(h, N);
  write_config(h, N, extra);
  collector_t c[2];
  const char *shard0[] = {"--shard", "0/2", NULL};
  const char *shard1[] = {"--shard", "1/2", NULL};
  collector_start_args(&c[0], shard0);
  /* The second one's working directory is another, empty one. */
  const char *conf = fleet_in_dir("collector.conf");
  FILE *f = fopen(conf, "r");
  assert_non_null(f);
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char *at = strstr(text, "store = store\n");
  assert_non_null(at);
  f = fopen(conf, "w");
  assert_non_null(f);
  fprintf(f, "%.*sstore = store-b\n%s", (int)(at - text), text,
          at + strlen("store = store\n"));
  fclose(f);
  collector_start_args(&c[1], shard1);

  char tag[N][16];
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
    snprintf(tag[i], sizeof tag[i], "bk%zu", i);
    fleet_commit_packets(&h[i].p, 0, tag[i], 1, 3);
  }
  /* Each collector's hosts are tracing before its snapshot. */
  const char *json = fleet_in_dir("bk-hosts.json");
  for (uint32_t k = 0; k < 2; k++) {
    int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
    size_t mine = 0;
    for (size_t i = 0; i < N; i++)
      mine += tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == k;
    for (;;) {
      assert_int_equal(http(&c[k], "GET", "/api/v1/hosts", json), 200);
      size_t tracing = 0;
      for (size_t i = 0; i < mine; i++) {
        char key[48];
        snprintf(key, sizeof key, "hosts.%zu.state", i);
        const char *st = tg_test_json(json, key);
        tracing += st && strcmp(st, "\"tracing\"") == 0;
      }
      if (tracing == mine) break;
      assert_true(tg_test_now_ms() < end);
      usleep(100 * 1000);
    }
  }
  char ids[2][32];
  bool live[2];
  for (uint32_t k = 0; k < 2; k++) {
    char out[64];
    snprintf(out, sizeof out, "bk-snap%u.json", k);
    const char *path = fleet_in_dir(out);
    pid_t pid = http_spawn(&c[k], "POST", "/api/v1/snapshots?wait=1", path);
    size_t mine = 0;
    for (size_t i = 0; i < N; i++)
      if (tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == k) {
        fleet_ack_flush(&h[i].p);
        mine++;
      }
    assert_int_equal(http_wait(pid, path), 200);
    snprintf(ids[k], sizeof ids[k], "%.16s",
             tg_test_json(path, "snapshot.id") + 1);
    live[k] = mine > 0;
    assert_json(path, "snapshot.state", mine ? "\"complete\"" : "\"failed\"");
  }
  assert_string_not_equal(ids[0], ids[1]);
  assert_true(live[0] || live[1]);

  for (uint32_t k = 0; k < 2; k++) {
    uint32_t other = 1 - k;
    char path[96];
    snprintf(path, sizeof path, "/api/v1/snapshots/%s", ids[other]);
    const char *mine_json = fleet_in_dir("bk-own.json");
    const char *theirs_json = fleet_in_dir("bk-other.json");
    assert_int_equal(http(&c[other], "GET", path, mine_json), 200);
    assert_int_equal(http(&c[k], "GET", path, theirs_json), 200);
    assert_string_equal(tg_test_json(mine_json, "snapshot.bytes"),
                        tg_test_json(theirs_json, "snapshot.bytes"));
    assert_string_equal(tg_test_json(mine_json, "hosts"),
                        tg_test_json(theirs_json, "hosts"));
    if (!live[other]) continue;
    const char *own = fleet_in_dir("bk-own.pftrace");
    const char *got = fleet_in_dir("bk-other.pftrace");
    download(&c[other], ids[other], own);
    download(&c[k], ids[other], got);
    assert_true(same_file(own, got));
    fleet_trace_t t;
    fleet_trace_load(got, &t);
    for (size_t i = 0; i < N; i++) {
      if (tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == other)
        fleet_trace_assert_values(&t, tag[i], 1, 3);
      else
        assert_int_equal(fleet_trace_count_tag(&t, tag[i]), 0);
    }
    fleet_trace_free(&t);
  }
  collector_stop(&c[0]);
  collector_stop(&c[1]);
  for (size_t i = 0; i < N; i++) fleet_host_stop(&h[i]);
  coll_pg_stop(&pg);
}

static void the_bucket_gone_fails_the_snapshot_not_the_rings(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, bucket_config());
  const char *json = fleet_in_dir("s3gone.json");
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots?state=complete", json),
                   200);
  char before[4096];
  snprintf(before, sizeof before, "%s", tg_test_json(json, "snapshots"));
  coll_rgw_stop(&gw);
  /* The hosts deliver; the bucket is gone: the snapshot is FAILED with
   * the reason, and no snapshot became complete. */
  fleet_commit_packets(&h[0].p, 0, "goneA", 1, 2);
  fleet_commit_packets(&h[1].p, 0, "goneB", 1, 2);
  pid_t pid = http_spawn(&c, "POST", "/api/v1/snapshots?wait=1&reason=gone",
                         json);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  assert_int_equal(http_wait(pid, json), 200);
  assert_json(json, "snapshot.state", "\"failed\"");
  assert_json(json, "snapshot.reason", "\"gone\"");
  const char *why = tg_test_json(json, "snapshot.failure");
  assert_non_null(why);
  assert_true(strlen(why) > 2);
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots?state=complete", json),
                   200);
  assert_json(json, "snapshots", before);
  assert_true(metric(&c, "tracegate_collector_bucket_failures_total") >= 1);
  assert_true(metric(&c, "tracegate_collector_bucket_retries_total") >= 1);
  /* The API says so: failing since the first failed attempt, the last
   * error a transport one (no HTTP status), with its method. */
  const char *st = fleet_in_dir("s3gone-store.json");
  assert_int_equal(http(&c, "GET", "/api/v1/store", st), 200);
  assert_json(st, "state", "\"failing\"");
  assert_json(st, "last_error.status", "0");
  assert_non_null(tg_test_json(st, "last_error.method"));
  assert_true(strlen(tg_test_json(st, "last_error.error")) > 2);
  assert_true(atoll(tg_test_json(st, "since_ms")) > 0);
  assert_true(atoll(tg_test_json(st, "last_error.at_ms")) >=
              atoll(tg_test_json(st, "since_ms")));
  assert_true(atoll(tg_test_json(st, "retries")) >= 1);
  /* The rings run on. */
  wait_hosts(&c, 2, "tracing");
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_snapshot_in_the_bucket_read_through_the_api),
      cmocka_unit_test(a_collector_killed_mid_upload_aborts_it_at_restart),
      cmocka_unit_test(presigned_downloads_skip_the_collector),
      cmocka_unit_test(two_collectors_one_catalog_one_bucket),
      cmocka_unit_test(the_bucket_gone_fails_the_snapshot_not_the_rings),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
