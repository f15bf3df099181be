/* tracegate-collector --rebuild-catalog against a real Ceph gateway
 * (coll_rgw.h) and the fleet harness's hosts: three snapshots stored in
 * the bucket, the catalog lost (a new, empty SQLite file; or a new
 * PostgreSQL database), the catalog rebuilt from the bucket's sidecars:
 * the API lists the same snapshots with the same ids, rows, hosts and
 * pins, /trace serves the same bytes, a new snapshot gets a higher id, and
 * a second rebuild inserts nothing. Then a bucket with a sidecar edited
 * (its crc32), a trace deleted, a sidecar that is not JSON, a trace with
 * no sidecar and a lone index whose key claims a huge id: FAILED rows
 * saying why, refused and reported ones, and ids past the verified ones
 * only (a key's name moves no id). One gateway for the executable; skips,
 * saying so, without Ceph. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "coll_pg.h"
#include "coll_rgw.h"
#include "collector/s3/s3_client.h"
#include "test_proc.h"

#define BUCKET "tg-rebuild"

static coll_rgw_t gw;
static bool skipped;

static tg_s3_client_t *bucket_client(void) {
  tg_s3_client_t *c = coll_rgw_client(&gw, BUCKET);
  assert_non_null(c);
  return c;
}

static int group_setup(void **state) {
  (void)state;
  int rc = coll_rgw_start_bucket(&gw, BUCKET, "test_collector_s3_rebuild");
  if (rc == 1) {
    skipped = true;
    return 0;
  }
  return rc ? rc : fleet_dir_create("colrb");
}

static int group_teardown(void **state) {
  coll_rgw_stop(&gw);
  if (!skipped) return fleet_dir_teardown(state);
  return 0;
}

/* The config's bucket lines, under |prefix|, and |catalog| if not NULL. */
static const char *bucket_config(const char *prefix, const char *catalog) {
  static char extra[2048];
  snprintf(extra, sizeof extra,
           "%s%s%s"
           "bucket = s3://" BUCKET "/%s\n"
           "s3_endpoint = %s\n"
           "s3_credentials_file = %s\n",
           catalog ? "catalog = " : "", catalog ? catalog : "",
           catalog ? "\n" : "", prefix, gw.endpoint, gw.credentials);
  return extra;
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

/* tracegate-collector --rebuild-catalog on the test's config: its JSON
 * line into |out|; returns its exit status. */
static int rebuild(const char *out) {
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  int log = open(fleet_in_dir("rebuild.log"),
                 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(log >= 0);
  const char *argv[] = {"tracegate-collector", "--config",
                        fleet_in_dir("collector.conf"), "--rebuild-catalog",
                        NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_COLLECTOR_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = fd;
  s.stderr_fd = log;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  close(fd);
  close(log);
  int st = tg_test_reap(pid, FLEET_WAIT_MS * 4);
  assert_true(st >= 0);
  return tg_test_exit_code(st);
}

/* The SQLite catalog of the store gone: the next open makes an empty one. */
static void lose_sqlite_catalog(void) {
  static const char *const names[] = {"store/catalog.sqlite",
                                      "store/catalog.sqlite-wal",
                                      "store/catalog.sqlite-shm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (unlink(fleet_in_dir(names[i])) != 0) assert_int_equal(errno, ENOENT);
}

/* The answer about snapshot |id| into |out| (GET /api/v1/snapshots/ID). */
static void get_snapshot(const collector_t *c, const char *id,
                         const char *out) {
  char path[64];
  snprintf(path, sizeof path, "/api/v1/snapshots/%s", id);
  assert_int_equal(http(c, "GET", path, out), 200);
}

enum { N = 3 };

/* Three snapshots, the catalog lost (|pg|: a new database; else a new
 * SQLite file), rebuilt twice, checked through the API. */
static void rebuilt_catalog_serves_the_same_snapshots(bool pg,
                                                      const char *prefix) {
  coll_pg_server_t srv = {0};
  char uri[2][512];
  if (pg) {
    assert_true(coll_pg_installed()); /* deploy/deps.sh installs it */
    assert_int_equal(coll_pg_start(&srv), 0);
    assert_int_equal(coll_pg_createdb(&srv, uri[0], sizeof uri[0]), 0);
    assert_int_equal(coll_pg_createdb(&srv, uri[1], sizeof uri[1]), 0);
  }
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, bucket_config(prefix, pg ? uri[0] : NULL));
  char ids[N][32], before[N][64], trace[N][64];
  for (size_t i = 0; i < N; i++) {
    char tag[16];
    snprintf(tag, sizeof tag, "rb%zu", i);
    fleet_commit_packets(&h[0].p, 0, tag, 1, 3 + (int)i);
    fleet_commit_packets(&h[1].p, 0, tag, 1, 2);
    const char *json = fleet_in_dir("rb-snap.json");
    snprintf(ids[i], sizeof ids[i], "%s", snapshot(&c, h, 2, json));
    snprintf(trace[i], sizeof trace[i], "rb-%zu.pftrace", i);
    download(&c, ids[i], fleet_in_dir(trace[i]));
  }
  /* A pin after the commit: the sidecar says it too. */
  char path[128];
  snprintf(path, sizeof path, "/api/v1/snapshots/%s/pin?pinned=1", ids[1]);
  assert_int_equal(http(&c, "POST", path, fleet_in_dir("rb-pin.json")), 200);
  for (size_t i = 0; i < N; i++) {
    snprintf(before[i], sizeof before[i], "rb-before-%zu.json", i);
    get_snapshot(&c, ids[i], fleet_in_dir(before[i]));
  }
  assert_json(fleet_in_dir(before[1]), "snapshot.pinned", "true");
  /* Each host row has its links (the merge's flows), which the sidecar
   * carries, the pinned one's rewritten sidecar too. */
  for (size_t i = 0; i < N; i++) {
    assert_json(fleet_in_dir(before[i]), "hosts.0.links.mode", "\"joined\"");
    assert_json(fleet_in_dir(before[i]), "snapshot.links.flows_across", "0");
  }
  collector_stop(&c);

  /* Symbols beside the first (symbolize's objects; empty: a snapshot
   * with no module to name): no row field, not a snapshot of their own,
   * kept and found after the rebuild. */
  tg_s3_client_t *b = bucket_client();
  char skey[2][128];
  snprintf(skey[0], sizeof skey[0], "%ssnapshots/%s.symbols", prefix, ids[0]);
  snprintf(skey[1], sizeof skey[1], "%ssnapshots/%s.symidx", prefix, ids[0]);
  for (size_t k = 0; k < 2; k++)
    assert_int_equal(tg_s3_put(b, skey[k], NULL, 0, true, NULL), 0);
  if (pg) edit_config(uri[0], uri[1]);
  else lose_sqlite_catalog();
  char sum[512];
  snprintf(sum, sizeof sum, "%s", fleet_in_dir("rb-sum.json"));
  assert_int_equal(rebuild(sum), 0);
  assert_json(sum, "rebuild", "\"done\"");
  assert_json(sum, "total", "3");
  assert_json(sum, "inserted", "3");
  assert_json(sum, "present", "0");
  assert_json(sum, "failed", "0");
  assert_json(sum, "refused", "0");
  assert_json(sum, "no_sidecar", "0");
  assert_json(sum, "problems", "[]");
  char want[128];
  snprintf(want, sizeof want, "\"%s\"", ids[N - 1]);
  assert_json(sum, "max_id", want);
  assert_json(sum, "unreserved", "0");
  assert_json(sum, "max_unreserved_id", "\"\"");
  /* Again: nothing new. */
  assert_int_equal(rebuild(sum), 0);
  assert_json(sum, "inserted", "0");
  assert_json(sum, "present", "3");

  collector_start(&c);
  for (size_t i = 0; i < N; i++) {
    const char *after = fleet_in_dir("rb-after.json");
    get_snapshot(&c, ids[i], after);
    /* The row and its hosts as they were, field for field. */
    const char *a = fleet_in_dir(before[i]);
    assert_string_equal(tg_test_json(a, "snapshot"),
                        tg_test_json(after, "snapshot"));
    assert_string_equal(tg_test_json(a, "hosts"),
                        tg_test_json(after, "hosts"));
    const char *got = fleet_in_dir("rb-again.pftrace");
    download(&c, ids[i], got);
    assert_true(same_file(fleet_in_dir(trace[i]), got));
  }
  for (size_t k = 0; k < 2; k++)
    assert_int_equal(tg_s3_head(b, skey[k], NULL, NULL), 0);
  tg_s3_client_free(b);
  /* A new snapshot's id is above the rebuilt ones. */
  fleet_commit_packets(&h[0].p, 0, "rbnew", 1, 2);
  fleet_commit_packets(&h[1].p, 0, "rbnew", 1, 2);
  const char *json = fleet_in_dir("rb-new.json");
  const char *id = snapshot(&c, h, 2, json);
  assert_true(strcmp(id, ids[N - 1]) > 0);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
  if (pg) coll_pg_stop(&srv);
}

static void a_lost_sqlite_catalog_is_rebuilt_from_the_bucket(void **state) {
  (void)state;
  if (skipped) skip();
  rebuilt_catalog_serves_the_same_snapshots(false, "sq/");
}

static void a_lost_postgresql_catalog_is_rebuilt_from_the_bucket(
    void **state) {
  (void)state;
  if (skipped) skip();
  rebuilt_catalog_serves_the_same_snapshots(true, "pg/");
}

/* The bytes of |key| into a malloc()ed string. */
typedef struct text {
  char *p;
  size_t n;
} text_t;

static int to_text(void *ctx, const void *p, size_t n) {
  text_t *t = ctx;
  char *q = realloc(t->p, t->n + n + 1);
  if (!q) return -ENOMEM;
  memcpy(q + t->n, p, n);
  t->p = q;
  t->n += n;
  t->p[t->n] = '\0';
  return 0;
}

static void damaged_bucket_gives_failed_and_reported_rows(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, bucket_config("bad/", NULL));
  char ids[N][32];
  for (size_t i = 0; i < N; i++) {
    fleet_commit_packets(&h[0].p, 0, "bad", 1, 3);
    fleet_commit_packets(&h[1].p, 0, "bad", 1, 3);
    snprintf(ids[i], sizeof ids[i], "%s",
             snapshot(&c, h, 2, fleet_in_dir("bad-snap.json")));
  }
  collector_stop(&c);
  lose_sqlite_catalog();

  tg_s3_client_t *b = bucket_client();
  char key[128];
  /* 0: its sidecar's crc32 edited (still a well-formed sidecar). */
  snprintf(key, sizeof key, "bad/snapshots/%s.meta", ids[0]);
  text_t t = {0};
  assert_int_equal(tg_s3_get(b, key, 0, 0, to_text, &t), 0);
  char *crc = strstr(t.p, "\"crc32\":");
  assert_non_null(crc);
  char *digits = crc + strlen("\"crc32\":");
  /* Its last digit made 0, or 1 if it was 0: still under 2^32. */
  size_t nd = strspn(digits, "0123456789");
  assert_true(nd >= 1);
  char *d = digits + nd - 1;
  *d = *d == '0' ? '1' : '0';
  assert_int_equal(tg_s3_put(b, key, t.p, t.n, false, NULL), 0);
  free(t.p);
  /* 1: its trace gone. */
  snprintf(key, sizeof key, "bad/snapshots/%s.pftrace", ids[1]);
  assert_int_equal(tg_s3_delete(b, key), 0);
  /* 2: its sidecar not JSON. */
  snprintf(key, sizeof key, "bad/snapshots/%s.meta", ids[2]);
  assert_int_equal(tg_s3_put(b, key, "{\"version\":", 11, false, NULL), 0);
  /* An older snapshot's trace, with no sidecar, above them all. */
  assert_int_equal(tg_s3_put(b, "bad/snapshots/0000000000000100.pftrace",
                             "old", 3, false, NULL),
                   0);
  /* A key no collector wrote, claiming an id near the top of the id
   * space: were it reserved, the catalog would run out of ids. */
  static const char huge[] = "7fffffffffffff00";
  assert_int_equal(tg_s3_put(b, "bad/snapshots/7fffffffffffff00.index",
                             "x", 1, false, NULL),
                   0);

  char sum[512];
  snprintf(sum, sizeof sum, "%s", fleet_in_dir("bad-sum.json"));
  assert_int_equal(rebuild(sum), 3);
  assert_json(sum, "rebuild", "\"done\"");
  assert_json(sum, "total", "4");
  assert_json(sum, "inserted", "0");
  assert_json(sum, "failed", "2");
  assert_json(sum, "refused", "1");
  assert_json(sum, "no_sidecar", "1");
  /* Only the verified ids (the FAILED rows' sidecars parsed and named
   * their keys) are reserved; the refused one, the trace without a
   * sidecar and the lone index are counted, not reserved. */
  char want[128];
  snprintf(want, sizeof want, "\"%s\"", ids[1]);
  assert_json(sum, "max_id", want);
  assert_json(sum, "unreserved", "3");
  snprintf(want, sizeof want, "\"%s\"", huge);
  assert_json(sum, "max_unreserved_id", want);
  for (size_t i = 0; i < N; i++) {
    char k[32];
    snprintf(k, sizeof k, "problems.%zu.id", i);
    snprintf(want, sizeof want, "\"%s\"", ids[i]);
    assert_json(sum, k, want);
  }
  assert_json(sum, "problems.0.what", "\"failed\"");
  assert_non_null(strstr(tg_test_json(sum, "problems.0.why"), "crc32"));
  assert_json(sum, "problems.1.what", "\"failed\"");
  assert_non_null(strstr(tg_test_json(sum, "problems.1.why"), "missing"));
  assert_json(sum, "problems.2.what", "\"refused\"");
  assert_non_null(strstr(tg_test_json(sum, "problems.2.why"), "not JSON"));
  assert_json(sum, "problems.3.id", "\"0000000000000100\"");
  assert_json(sum, "problems.3.what", "\"no_sidecar\"");

  collector_start(&c);
  const char *json = fleet_in_dir("bad-get.json");
  get_snapshot(&c, ids[0], json);
  assert_json(json, "snapshot.state", "\"failed\"");
  assert_non_null(strstr(tg_test_json(json, "snapshot.failure"), "crc32"));
  get_snapshot(&c, ids[1], json);
  assert_json(json, "snapshot.state", "\"failed\"");
  assert_non_null(strstr(tg_test_json(json, "snapshot.failure"), "missing"));
  char path[64];
  snprintf(path, sizeof path, "/api/v1/snapshots/%s", ids[2]);
  assert_int_equal(http(&c, "GET", path, json), 404);
  /* The refused sidecar's objects and the old trace are kept. */
  snprintf(key, sizeof key, "bad/snapshots/%s.pftrace", ids[2]);
  assert_int_equal(tg_s3_head(b, key, NULL, NULL), 0);
  assert_int_equal(
      tg_s3_head(b, "bad/snapshots/0000000000000100.pftrace", NULL, NULL), 0);
  /* The operator moves the refused snapshot's objects out of the prefix,
   * as the report asks of unreserved ids above max_id; the trace without
   * a sidecar, far above, stays. A new snapshot lands right above the
   * verified ids, far below the huge key. */
  static const char *const suffix[] = {".pftrace", ".meta", ".index"};
  for (size_t k = 0; k < 3; k++) {
    snprintf(key, sizeof key, "bad/snapshots/%s%s", ids[2], suffix[k]);
    int rv = tg_s3_delete(b, key);
    assert_true(rv == 0 || rv == -ENOENT);
  }
  fleet_commit_packets(&h[0].p, 0, "bad2", 1, 2);
  fleet_commit_packets(&h[1].p, 0, "bad2", 1, 2);
  const char *id = snapshot(&c, h, 2, fleet_in_dir("bad-new.json"));
  assert_true(strcmp(id, ids[1]) > 0);
  assert_true(strcmp(id, "0000000000000100") < 0);
  assert_json(fleet_in_dir("bad-new.json"), "snapshot.state",
              "\"complete\"");
  collector_stop(&c);

  /* Again: nothing inserted; what has no row is reported again. */
  assert_int_equal(rebuild(sum), 3);
  assert_json(sum, "inserted", "0");
  assert_json(sum, "failed", "0");
  assert_json(sum, "refused", "0");
  assert_json(sum, "no_sidecar", "1");
  assert_json(sum, "unreserved", "2");
  tg_s3_client_free(b);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

static void a_directory_store_has_nothing_to_rebuild_from(void **state) {
  (void)state;
  if (skipped) skip();
  fleet_host_t h[2];
  start_hosts(h, 2);
  write_config(h, 2, NULL);
  assert_int_equal(rebuild(fleet_in_dir("dir-sum.json")), 1);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_lost_sqlite_catalog_is_rebuilt_from_the_bucket),
      cmocka_unit_test(a_lost_postgresql_catalog_is_rebuilt_from_the_bucket),
      cmocka_unit_test(damaged_bucket_gives_failed_and_reported_rows),
      cmocka_unit_test(a_directory_store_has_nothing_to_rebuild_from),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
