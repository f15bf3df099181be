/* The store with its snapshots in a bucket (collector/store/store_s3.h)
 * against a real Ceph gateway (coll_rgw.h): a snapshot streamed in parts and
 * read back through the store, a collector killed (SIGKILL) mid-upload and
 * restarted, orphans and foreign objects at open, delete and retention
 * removing objects, symbols objects beside a snapshot's, a job's files
 * downloaded at get only (never on the store's thread), and, last (it stops
 * the gateway), a bucket gone in the middle of a snapshot. One gateway for
 * the whole executable; each test has its own prefix in one bucket. Skips,
 * saying so, without Ceph. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "coll_fixture.h"
#include "coll_pg.h"
#include "coll_rgw.h"
#include "collector/s3/s3_client.h"
#include "collector/store/snap_meta.h"
#include "collector/store/store.h"

#define BUCKET "tg-store"

static coll_rgw_t gw;
static bool skipped;
static unsigned tests_run;

typedef struct fx {
  char dir[64];
  char prefix[32];
  tg_coll_s3_config_t s3;
  tg_coll_store_config_t cfg;
  tg_coll_store_t *store;
  tg_coll_recovery_t rec;
  tg_s3_client_t *c; /* the test's own look at the bucket */
  int64_t now_ms;
} fx_t;

static int64_t clock_ms(void *ctx) { return ((fx_t *)ctx)->now_ms; }

static tg_s3_client_config_t client_cfg(void) {
  return (tg_s3_client_config_t){
      .endpoint = gw.endpoint,
      .region = "us-east-1",
      .bucket = BUCKET,
      .access_key = gw.access_key,
      .secret_key = gw.secret_key,
      .max_attempts = 2,
      .base_backoff_ms = 20,
      .timeout_ms = 30000,
      .connect_timeout_ms = 2000,
  };
}

static int group_setup(void **state) {
  (void)state;
  int rc = coll_rgw_start(&gw);
  if (rc == 1) {
    fprintf(stderr, "test_collector_s3_store: Ceph (ceph-mon, ceph-osd, "
                    "radosgw) is not installed: skipped (deploy/deps.sh "
                    "installs it)\n");
    skipped = true;
    return 0;
  }
  if (rc) return rc;
  tg_s3_client_config_t cc = client_cfg();
  tg_s3_client_t *c = NULL;
  if (tg_s3_client_new(&cc, &c) || tg_s3_bucket_create(c)) rc = -1;
  tg_s3_client_free(c);
  return rc;
}

static int group_teardown(void **state) {
  (void)state;
  coll_rgw_stop(&gw);
  return 0;
}

static int setup(void **state) {
  fx_t *f = calloc(1, sizeof *f);
  if (!f) return -1;
  *state = f;
  if (skipped) return 0;
  snprintf(f->dir, sizeof f->dir, "/tmp/tg-s3store-XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->prefix, sizeof f->prefix, "t%u/", ++tests_run);
  f->s3 = (tg_coll_s3_config_t){.client = client_cfg(), .prefix = f->prefix,
                                .part_size = TG_S3_PART_MIN};
  f->now_ms = 1700000000000;
  f->cfg = (tg_coll_store_config_t){.dir = f->dir, .s3 = &f->s3,
                                    .now_ms = clock_ms, .clock_ctx = f};
  tg_s3_client_config_t cc = client_cfg();
  return tg_s3_client_new(&cc, &f->c) ? -1 : 0;
}

static int teardown(void **state) {
  fx_t *f = *state;
  tg_coll_store_close(f->store);
  tg_s3_client_free(f->c);
  if (f->dir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->dir);
  }
  free(f);
  return 0;
}

static void open_store(fx_t *f) {
  tg_coll_store_close(f->store);
  f->store = NULL;
  assert_int_equal(tg_coll_store_open(&f->cfg, &f->store, &f->rec), 0);
}

static uint8_t byte_at(uint64_t seed, uint64_t i) {
  return (uint8_t)((i * 2654435761u + seed) >> 7);
}

/* Writes |n| bytes from |seed| in 64 KiB pieces. */
static void write_data(tg_coll_writer_t *w, uint64_t seed, size_t n) {
  uint8_t buf[65536];
  for (size_t off = 0; off < n;) {
    size_t k = n - off < sizeof buf ? n - off : sizeof buf;
    for (size_t i = 0; i < k; i++) buf[i] = byte_at(seed, off + i);
    assert_int_equal(tg_coll_writer_write(w, buf, k), 0);
    off += k;
  }
}

static uint32_t crc_of(uint64_t seed, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t i = 0; i < n; i++) {
    uint8_t b = byte_at(seed, i);
    crc = crc32(crc, &b, 1);
  }
  return (uint32_t)crc;
}

static uint64_t snapshot(fx_t *f, uint64_t seed, size_t n) {
  tg_coll_begin_t b = {.trigger = "test", .reason = "s3", .origin = "h1"};
  tg_coll_writer_t *w = NULL;
  uint64_t id = 0;
  assert_int_equal(tg_coll_store_begin(f->store, &b, &w, &id), 0);
  write_data(w, seed, n);
  tg_coll_host_result_t h = {.host = "h1", .outcome = TG_COLL_HOST_OK,
                             .bytes = n, .packets = 1};
  tg_coll_result_t r = {.packets = 1, .hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(f->store, w, &r), 0);
  f->now_ms += 1000;
  return id;
}

static void object_key(fx_t *f, uint64_t id, char *out, size_t cap) {
  snprintf(out, cap, "%ssnapshots/%016llx.pftrace", f->prefix,
           (unsigned long long)id);
}

static void meta_key(fx_t *f, uint64_t id, char *out, size_t cap) {
  snprintf(out, cap, "%ssnapshots/%016llx.meta", f->prefix,
           (unsigned long long)id);
}

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
  q[t->n] = '\0';
  return 0;
}

/* Snapshot |id|'s sidecar, parsed, into *m (free with tg_coll_meta_free). */
static void read_meta(fx_t *f, uint64_t id, tg_coll_meta_t *m) {
  char key[128], why[256];
  meta_key(f, id, key, sizeof key);
  text_t t = {0};
  assert_int_equal(tg_s3_get(f->c, key, 0, 0, to_text, &t), 0);
  int err = tg_coll_meta_parse(t.p, t.n, m, why, sizeof why);
  if (err) fail_msg("%s: %s", key, why);
  free(t.p);
}

static int count_upload(void *ctx, const tg_s3_upload_t *u) {
  (void)u;
  (*(unsigned *)ctx)++;
  return 0;
}

static unsigned uploads(fx_t *f) {
  unsigned n = 0;
  assert_int_equal(tg_s3_mpu_list(f->c, f->prefix, count_upload, &n), 0);
  return n;
}

static int count_object(void *ctx, const tg_s3_object_t *o) {
  (void)o;
  (*(unsigned *)ctx)++;
  return 0;
}

static unsigned objects(fx_t *f) {
  unsigned n = 0;
  assert_int_equal(tg_s3_list(f->c, f->prefix, count_object, &n), 0);
  return n;
}

static void stored_and_read_back(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  /* Three parts: two whole, one short. */
  size_t n = 2 * TG_S3_PART_MIN + 12345;
  uint64_t id = snapshot(f, 7, n);
  tg_coll_snapshot_t row;
  assert_int_equal(tg_coll_store_get(f->store, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_int_equal(row.bytes, n);
  assert_int_equal(row.crc32, crc_of(7, n));
  char key[128];
  object_key(f, id, key, sizeof key);
  uint64_t size = 0;
  char etag[TG_S3_ETAG_MAX];
  assert_int_equal(tg_s3_head(f->c, key, &size, etag), 0);
  assert_int_equal(size, n);
  assert_non_null(strstr(etag, "-3\""));
  assert_int_equal(uploads(f), 0);
  /* Its sidecar says what its row says, and the object's ETag. */
  tg_coll_meta_t m;
  read_meta(f, id, &m);
  assert_int_equal(m.id, id);
  assert_int_equal(m.state, TG_COLL_COMPLETE);
  assert_int_equal(m.bytes, row.bytes);
  assert_int_equal(m.crc32, row.crc32);
  assert_int_equal(m.started_ms, row.started_ms);
  assert_int_equal(m.finished_ms, row.finished_ms);
  assert_string_equal(m.trigger, "test");
  assert_string_equal(m.reason, "s3");
  assert_string_equal(m.origin, "h1");
  assert_string_equal(m.etag, etag);
  assert_false(m.pinned);
  assert_int_equal(m.n_hosts, 1);
  assert_string_equal(m.hosts[0].host, "h1");
  tg_coll_meta_free(&m);
  /* A pin is written into it too. */
  assert_int_equal(tg_coll_store_pin(f->store, id, true), 0);
  read_meta(f, id, &m);
  assert_true(m.pinned);
  assert_string_equal(m.etag, etag);
  tg_coll_meta_free(&m);

  int fd = -1;
  assert_int_equal(tg_coll_store_open_file(f->store, id, &fd), 0);
  uint8_t buf[65536];
  uint64_t off = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++)
      if (buf[i] != byte_at(7, off + (uint64_t)i)) fail_msg("byte %llu differs",
                                                          (unsigned long long)(off + (uint64_t)i));
    off += (uint64_t)got;
  }
  close(fd);
  assert_int_equal(off, n);

  /* A presigned URL of the object, made without a request; a directory
   * store has none to give. */
  char url[2048];
  assert_int_equal(tg_coll_store_presign(f->store, id, 60, url, sizeof url), 0);
  assert_int_equal(strncmp(url, gw.endpoint, strlen(gw.endpoint)), 0);
  assert_non_null(strstr(url, "X-Amz-Expires=60&"));
  assert_int_equal(tg_coll_store_presign(f->store, id + 100, 60, url,
                                         sizeof url), -ENOENT);
  assert_int_equal(tg_coll_store_presign(f->store, id, 60, url, 16),
                   -ENAMETOOLONG);
  char plain[96];
  snprintf(plain, sizeof plain, "%s/plain", f->dir);
  tg_coll_store_config_t pc = {.dir = plain};
  tg_coll_store_t *ps = NULL;
  assert_int_equal(tg_coll_store_open(&pc, &ps, NULL), 0);
  assert_int_equal(tg_coll_store_presign(ps, 1, 60, url, sizeof url),
                   -EOPNOTSUPP);
  tg_coll_store_close(ps);

  /* An empty snapshot is an empty object. */
  uint64_t empty = snapshot(f, 1, 0);
  assert_int_equal(tg_coll_store_get(f->store, empty, &row), 0);
  assert_int_equal(row.bytes, 0);
  object_key(f, empty, key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, &size, NULL), 0);
  assert_int_equal(size, 0);

  /* Reopened: nothing to repair. */
  open_store(f);
  assert_int_equal(f->rec.interrupted, 0);
  assert_int_equal(f->rec.lost, 0);
  assert_int_equal(f->rec.orphans_removed, 0);
  assert_int_equal(f->rec.uploads_aborted, 0);
}

static void killed_mid_upload(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  uint64_t kept = snapshot(f, 3, 1000);
  tg_coll_store_close(f->store);
  f->store = NULL;

  /* One part in flight at most: the child's second part waits for the
   * first to be uploaded, so the upload exists when it dies. */
  f->s3.queue_parts = 1;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    tg_coll_store_t *s = NULL;
    if (tg_coll_store_open(&f->cfg, &s, NULL)) _exit(2);
    tg_coll_begin_t b = {.trigger = "test"};
    tg_coll_writer_t *w = NULL;
    uint64_t id;
    if (tg_coll_store_begin(s, &b, &w, &id)) _exit(3);
    /* Two parts and a half: the first uploaded, the second queued. */
    size_t n = 2 * TG_S3_PART_MIN + TG_S3_PART_MIN / 2;
    uint8_t *buf = malloc(n);
    if (!buf) _exit(4);
    memset(buf, 0x5a, n);
    if (tg_coll_writer_write(w, buf, n)) _exit(5);
    raise(SIGKILL);
    _exit(6);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  assert_int_equal(uploads(f), 1);

  open_store(f);
  assert_int_equal(f->rec.interrupted, 1);
  assert_int_equal(f->rec.uploads_aborted, 1);
  assert_int_equal(uploads(f), 0);
  /* Only the finished snapshot's objects are there (its trace and its
   * sidecar), and its row is live. */
  assert_int_equal(objects(f), 2);
  tg_coll_snapshot_t rows[4];
  size_t n = 0;
  tg_coll_filter_t all = TG_COLL_FILTER_INIT;
  assert_int_equal(tg_coll_store_list(f->store, &all, rows, 4, &n), 0);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(rows[i].state,
                     rows[i].id == kept ? TG_COLL_COMPLETE : TG_COLL_FAILED);
}

static void orphans_and_foreign_objects_at_open(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  uint64_t id = snapshot(f, 5, 100);
  char key[128], orphan[128], foreign[128];
  object_key(f, id, key, sizeof key);
  /* An object no row names (a lost or replaced catalog; a delete cut
   * short between its row and its objects), and one not ours: both kept,
   * for no catalog may cost the bucket its snapshots. */
  object_key(f, id + 1000, orphan, sizeof orphan);
  snprintf(foreign, sizeof foreign, "%ssnapshots/README", f->prefix);
  assert_int_equal(tg_s3_put(f->c, orphan, "x", 1, true, NULL), 0);
  assert_int_equal(tg_s3_put(f->c, foreign, "y", 1, true, NULL), 0);
  open_store(f);
  assert_int_equal(f->rec.orphans_removed, 0);
  assert_int_equal(f->rec.unrowed_kept, 1);
  assert_int_equal(f->rec.foreign, 1);
  assert_int_equal(tg_s3_head(f->c, orphan, NULL, NULL), 0);
  assert_int_equal(tg_s3_head(f->c, foreign, NULL, NULL), 0);
  assert_int_equal(tg_s3_delete(f->c, orphan), 0);

  /* A live row whose object went (deleted by hand): FAILED at open. */
  assert_int_equal(tg_s3_delete(f->c, key), 0);
  open_store(f);
  assert_int_equal(f->rec.lost, 1);
  tg_coll_snapshot_t row;
  assert_int_equal(tg_coll_store_get(f->store, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_FAILED);
  /* Its sidecar goes with it: a FAILED row keeps no object. */
  meta_key(f, id, key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  assert_int_equal(objects(f), 1); /* the foreign one */
}

/* The sidecar is written (If-None-Match: *) before the row commits: one
 * already at the snapshot's key (another writer's) fails the snapshot,
 * and nothing of it stays but the other writer's object; so does a trace
 * already at its key, which is never replaced. */
static void a_sidecar_already_there_fails_the_snapshot(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  uint64_t first = snapshot(f, 1, 100);
  char key[128];
  meta_key(f, first + 1, key, sizeof key);
  assert_int_equal(tg_s3_put(f->c, key, "{}", 2, true, NULL), 0);
  tg_coll_begin_t b = {.trigger = "test"};
  tg_coll_writer_t *w = NULL;
  uint64_t id = 0;
  assert_int_equal(tg_coll_store_begin(f->store, &b, &w, &id), 0);
  assert_int_equal(id, first + 1);
  write_data(w, 2, 100);
  tg_coll_host_result_t h = {.host = "h1", .outcome = TG_COLL_HOST_OK,
                             .bytes = 100, .packets = 1};
  tg_coll_result_t r = {.packets = 1, .hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(f->store, w, &r), -EEXIST);
  tg_coll_snapshot_t row;
  assert_int_equal(tg_coll_store_get(f->store, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_FAILED);
  assert_non_null(strstr(row.failure, "sidecar"));
  char trace[128];
  object_key(f, id, trace, sizeof trace);
  assert_int_equal(tg_s3_head(f->c, trace, NULL, NULL), -ENOENT);
  text_t t = {0};
  assert_int_equal(tg_s3_get(f->c, key, 0, 0, to_text, &t), 0);
  assert_string_equal(t.p, "{}");
  free(t.p);

  /* A trace already at the next id's key (a catalog behind the bucket):
   * the snapshot fails before its upload, the object stays whole. */
  object_key(f, id + 1, trace, sizeof trace);
  assert_int_equal(tg_s3_put(f->c, trace, "old", 3, true, NULL), 0);
  assert_int_equal(tg_coll_store_begin(f->store, &b, &w, &id), 0);
  /* The upload's thread may find the object before this write comes (the
   * write then says so) or after it: either way the finish fails. */
  uint8_t some[100];
  for (size_t i = 0; i < sizeof some; i++) some[i] = byte_at(3, i);
  int wr = tg_coll_writer_write(w, some, sizeof some);
  assert_true(wr == 0 || wr == -EEXIST);
  assert_int_equal(tg_coll_store_finish(f->store, w, &r), -EEXIST);
  assert_int_equal(tg_coll_store_get(f->store, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_FAILED);
  t = (text_t){0};
  assert_int_equal(tg_s3_get(f->c, trace, 0, 0, to_text, &t), 0);
  assert_string_equal(t.p, "old");
  free(t.p);
  assert_int_equal(uploads(f), 0);
}

static void delete_and_retention_remove_objects(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  f->cfg.retention.max_bytes = 2500;
  open_store(f);
  uint64_t a = snapshot(f, 1, 1000);
  uint64_t b = snapshot(f, 2, 1000);
  uint64_t c = snapshot(f, 3, 1000);
  assert_int_equal(objects(f), 6); /* traces and sidecars */
  /* Over max_bytes: retention deletes one (which one is the policy's,
   * retention.h), and its object goes with its row. */
  tg_coll_retained_t r;
  assert_int_equal(tg_coll_store_retain(f->store, &r), 1);
  assert_int_equal(tg_coll_store_retain(f->store, &r), 0);
  uint64_t gone = 0, rem[3];
  size_t n_rem = 0;
  tg_coll_snapshot_t row;
  const uint64_t ids[] = {a, b, c};
  for (size_t i = 0; i < 3; i++) {
    if (tg_coll_store_get(f->store, ids[i], &row) == -ENOENT) gone = ids[i];
    else rem[n_rem++] = ids[i];
  }
  assert_true(gone != 0);
  assert_int_equal(n_rem, 2);
  char key[128];
  object_key(f, gone, key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  meta_key(f, gone, key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  assert_int_equal(objects(f), 4);
  /* A delete takes the object with the row. */
  uint64_t del = rem[0], left = rem[1];
  assert_int_equal(tg_coll_store_delete(f->store, del), 0);
  object_key(f, del, key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  assert_int_equal(objects(f), 2);
  int fd = -1;
  assert_int_equal(tg_coll_store_open_file(f->store, del, &fd), -ENOENT);
  assert_int_equal(tg_coll_store_open_file(f->store, left, &fd), 0);
  close(fd);
}

static void sym_key(fx_t *f, uint64_t id, const char *ext, char *out,
                    size_t cap) {
  snprintf(out, cap, "%ssnapshots/%016llx.%s", f->prefix,
           (unsigned long long)id, ext);
}

/* Snapshot |id|'s symbols written (|text|, and "IDX" as their index) and
 * PUT as symbolize does: begin, the upload, then commit's result. */
static int store_symbols(fx_t *f, uint64_t id, const char *text,
                         void (*between)(fx_t *f, uint64_t id)) {
  int sfd = -1, sifd = -1;
  assert_int_equal(tg_coll_store_symbols_begin(f->store, id, &sfd, &sifd), 0);
  assert_int_equal(write(sfd, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(write(sifd, "IDX", 3), 3);
  tg_coll_symput_t *p = NULL;
  assert_int_equal(tg_coll_store_symput_new(f->store, id, &p), 0);
  assert_int_equal(tg_coll_symput_run(p, sfd, sifd, true), 0);
  /* Again (an attempt repeated after a restart): they stand. */
  assert_int_equal(tg_coll_symput_run(p, sfd, sifd, true), -EEXIST);
  tg_coll_symput_free(p);
  close(sfd);
  close(sifd);
  if (between) between(f, id);
  return tg_coll_store_symbols_commit(f->store, id, true);
}

static void delete_it(fx_t *f, uint64_t id) {
  assert_int_equal(tg_coll_store_delete(f->store, id), 0);
}

/* The symbols as two objects beside the trace: found by HEAD, read back,
 * kept by the sweep at open (also without a row: counted as a
 * snapshot's, never foreign), removed by delete and by retention, and by
 * commit when the snapshot went during the upload. */
static void symbols_live_and_die_with_their_snapshot(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  uint64_t a = snapshot(f, 1, 1000);
  assert_int_equal(tg_coll_store_has_symbols(f->store, a), -ENOENT);
  assert_int_equal(store_symbols(f, a, "SYMBOLS", NULL), 0);
  assert_int_equal(tg_coll_store_has_symbols(f->store, a), 0);
  int sfd = -1, sifd = -1;
  assert_int_equal(tg_coll_store_open_symbols(f->store, a, &sfd, &sifd), 0);
  char buf[16] = {0};
  assert_int_equal(read(sfd, buf, sizeof buf), 7);
  assert_string_equal(buf, "SYMBOLS");
  assert_true(sifd >= 0);
  close(sfd);
  close(sifd);
  assert_int_equal(objects(f), 4); /* trace, sidecar, symbols, index */

  /* Symbols with no row at all: kept and said, as a trace would be. */
  char key[128], orphan[128];
  sym_key(f, a + 1000, "symbols", orphan, sizeof orphan);
  assert_int_equal(tg_s3_put(f->c, orphan, "x", 1, true, NULL), 0);
  open_store(f);
  assert_int_equal(f->rec.orphans_removed, 0);
  assert_int_equal(f->rec.foreign, 0);
  assert_int_equal(f->rec.unrowed_kept, 1);
  assert_int_equal(tg_coll_store_has_symbols(f->store, a), 0);
  assert_int_equal(tg_s3_delete(f->c, orphan), 0);

  /* Deleted after the upload, before the commit: commit removes them. */
  uint64_t b = snapshot(f, 2, 1000);
  assert_int_equal(store_symbols(f, b, "B", delete_it), -ENOENT);
  sym_key(f, b, "symbols", key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  sym_key(f, b, "symidx", key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);

  /* The delete takes them with the snapshot. */
  assert_int_equal(tg_coll_store_delete(f->store, a), 0);
  assert_int_equal(objects(f), 0);

  /* So does retention. */
  f->cfg.retention.max_bytes = 1500;
  open_store(f);
  uint64_t c = snapshot(f, 3, 1000);
  assert_int_equal(store_symbols(f, c, "C", NULL), 0);
  uint64_t d = snapshot(f, 4, 1000);
  assert_int_equal(store_symbols(f, d, "D", NULL), 0);
  tg_coll_retained_t r;
  /* Which one goes is the policy's (retention.h). */
  assert_int_equal(tg_coll_store_retain(f->store, &r), 1);
  assert_true(r.id == c || r.id == d);
  sym_key(f, r.id, "symbols", key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  sym_key(f, r.id, "symidx", key, sizeof key);
  assert_int_equal(tg_s3_head(f->c, key, NULL, NULL), -ENOENT);
  assert_int_equal(tg_coll_store_has_symbols(f->store, r.id == c ? d : c), 0);
  assert_int_equal(objects(f), 4); /* the other snapshot's */
}

static uint64_t requests(fx_t *f) {
  tg_coll_store_desc_t d;
  tg_coll_store_describe(f->store, &d);
  assert_true(d.has_stats);
  return d.stats.requests;
}

/* All |n| bytes of |fd| are |seed|'s, and no more. */
static void assert_data(int fd, uint64_t seed, size_t n) {
  uint8_t buf[4096];
  size_t off = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++)
      assert_int_equal(buf[i], byte_at(seed, off + (size_t)i));
    off += (size_t)got;
  }
  assert_int_equal(off, n);
}

/* A job's files (tg_coll_store_files_*): made on the store's thread
 * without a request to the bucket, so that the collector's loop never
 * waits on one; downloaded at get. A part the snapshot lacks is -1, a
 * part it has comes whole, and a snapshot that is not live gives
 * nothing to get. */
static void files_are_downloaded_at_get_only(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  uint64_t a = snapshot(f, 5, TG_S3_PART_MIN + 99);
  uint64_t b = snapshot(f, 6, 1000);
  assert_int_equal(store_symbols(f, b, "SYMS", NULL), 0);

  uint64_t before = requests(f);
  tg_coll_files_t *fa = NULL, *fb = NULL;
  assert_int_equal(tg_coll_store_files_new(f->store, a, TG_COLL_FILES_INDEX |
                                           TG_COLL_FILES_SYMBOLS, &fa), 0);
  assert_int_equal(tg_coll_store_files_new(f->store, b, TG_COLL_FILES_SYMBOLS,
                                           &fb), 0);
  assert_int_equal(requests(f), before);
  /* Nothing to take before get. */
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_TRACE), -1);

  assert_int_equal(tg_coll_files_get(fa), 0);
  assert_true(requests(f) > before);
  int fd = tg_coll_files_take(fa, TG_COLL_FILE_TRACE);
  assert_true(fd >= 0);
  assert_data(fd, 5, TG_S3_PART_MIN + 99);
  close(fd);
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_TRACE), -1);
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_INDEX), -1);
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_SYMBOLS), -1);
  assert_int_equal(tg_coll_files_get(fa), -EALREADY);
  tg_coll_files_free(fa);

  assert_int_equal(tg_coll_files_get(fb), 0);
  fd = tg_coll_files_take(fb, TG_COLL_FILE_TRACE);
  assert_data(fd, 6, 1000);
  close(fd);
  fd = tg_coll_files_take(fb, TG_COLL_FILE_SYMBOLS);
  char text[8] = {0};
  assert_int_equal(read(fd, text, sizeof text), 4);
  assert_string_equal(text, "SYMS");
  close(fd);
  /* Not taken: freed with it. */
  tg_coll_files_free(fb);

  /* Deleted between new and get: the download says so. */
  assert_int_equal(tg_coll_store_files_new(f->store, a, 0, &fa), 0);
  assert_int_equal(tg_coll_store_live(f->store, a), 0);
  assert_int_equal(tg_coll_store_delete(f->store, a), 0);
  assert_int_equal(tg_coll_store_live(f->store, a), -ENOENT);
  assert_int_equal(tg_coll_files_get(fa), -ENOENT);
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_TRACE), -1);
  tg_coll_files_free(fa);
  /* Gone, or never there: nothing is made. */
  fa = NULL;
  assert_int_equal(tg_coll_store_files_new(f->store, a, 0, &fa), -ENOENT);
  assert_int_equal(tg_coll_store_files_new(f->store, b + 1000, 0, &fa),
                   -ENOENT);
  assert_null(fa);

  /* A directory's: opened at new, the same answers at get. */
  char plain[96];
  snprintf(plain, sizeof plain, "%s/plain", f->dir);
  tg_coll_store_config_t pc = {.dir = plain};
  tg_coll_store_t *ps = NULL;
  assert_int_equal(tg_coll_store_open(&pc, &ps, NULL), 0);
  tg_coll_store_t *bucket = f->store;
  f->store = ps;
  uint64_t c = snapshot(f, 7, 5000);
  f->store = bucket;
  assert_int_equal(tg_coll_store_files_new(ps, c, TG_COLL_FILES_INDEX, &fa), 0);
  /* Its file stays readable once deleted. */
  assert_int_equal(tg_coll_store_delete(ps, c), 0);
  assert_int_equal(tg_coll_files_get(fa), 0);
  fd = tg_coll_files_take(fa, TG_COLL_FILE_TRACE);
  assert_data(fd, 7, 5000);
  close(fd);
  assert_int_equal(tg_coll_files_take(fa, TG_COLL_FILE_INDEX), -1);
  tg_coll_files_free(fa);
  tg_coll_store_close(ps);
}

/* Two collectors on one PostgreSQL catalog and one bucket prefix, each
 * with a working directory of its own: one's restart leaves the other's
 * upload in flight alone; each serves and deletes the other's snapshots. */
static void two_collectors_share_the_bucket(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  if (!coll_pg_installed()) {
    fprintf(stderr, "PostgreSQL is not installed: skipped\n");
    skip();
  }
  coll_pg_server_t pg;
  assert_int_equal(coll_pg_start(&pg), 0);
  char conninfo[512];
  assert_int_equal(coll_pg_createdb(&pg, conninfo, sizeof conninfo), 0);
  tg_coll_catalog_t *ca = NULL, *cb = NULL;
  assert_int_equal(coll_pg_catalog(conninfo, 0, &ca), 0);
  assert_int_equal(coll_pg_catalog(conninfo, 1, &cb), 0);
  char da[96], db[96];
  snprintf(da, sizeof da, "%s/a", f->dir);
  snprintf(db, sizeof db, "%s/b", f->dir);
  tg_coll_store_config_t cfa = f->cfg, cfb = f->cfg;
  cfa.dir = da;
  cfa.catalog = ca;
  cfb.dir = db;
  cfb.catalog = cb;
  tg_coll_store_t *a = NULL, *b = NULL;
  tg_coll_recovery_t rec;
  assert_int_equal(tg_coll_store_open(&cfa, &a, &rec), 0);
  assert_int_equal(tg_coll_store_open(&cfb, &b, &rec), 0);

  /* A writes: one part uploaded, the upload open. */
  tg_coll_begin_t bg = {.trigger = "test"};
  tg_coll_writer_t *w = NULL;
  uint64_t id = 0;
  assert_int_equal(tg_coll_store_begin(a, &bg, &w, &id), 0);
  size_t n = TG_S3_PART_MIN + 777;
  write_data(w, 11, n);
  /* B restarts meanwhile: A's row is PENDING and A runs, so its upload
   * stays. */
  tg_coll_store_close(b);
  assert_int_equal(tg_coll_store_open(&cfb, &b, &rec), 0);
  assert_int_equal(rec.uploads_aborted, 0);
  assert_int_equal(rec.interrupted, 0);
  assert_int_equal(uploads(f), 1);

  tg_coll_host_result_t h = {.host = "h1", .outcome = TG_COLL_HOST_OK,
                             .bytes = n, .packets = 1};
  tg_coll_result_t r = {.packets = 1, .hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(a, w, &r), 0);

  /* B serves A's snapshot from the bucket, whole. */
  tg_coll_snapshot_t row;
  assert_int_equal(tg_coll_store_get(b, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_COMPLETE);
  assert_int_equal(row.crc32, crc_of(11, n));
  int fd = -1;
  assert_int_equal(tg_coll_store_open_file(b, id, &fd), 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_int_equal((uint64_t)st.st_size, n);
  close(fd);
  /* B deletes it: the object goes, A no longer serves it. */
  assert_int_equal(tg_coll_store_delete(b, id), 0);
  assert_int_equal(objects(f), 0);
  assert_int_equal(tg_coll_store_open_file(a, id, &fd), -ENOENT);

  tg_coll_store_close(a);
  tg_coll_store_close(b);
  tg_coll_catalog_close(ca);
  tg_coll_catalog_close(cb);
  coll_pg_stop(&pg);
}

/* Last: it stops the gateway. */
static void bucket_gone_mid_snapshot(void **state) {
  if (skipped) skip();
  fx_t *f = *state;
  open_store(f);
  tg_coll_begin_t b = {.trigger = "test"};
  tg_coll_writer_t *w = NULL;
  uint64_t id = 0;
  assert_int_equal(tg_coll_store_begin(f->store, &b, &w, &id), 0);
  write_data(w, 9, 1000);
  coll_rgw_stop(&gw);
  /* The last part cannot go: the writer's sync fails, finish fails and
   * the row says why. */
  int err = tg_coll_writer_sync(w);
  assert_true(err < 0);
  tg_coll_host_result_t h = {.host = "h1", .outcome = TG_COLL_HOST_OK,
                             .bytes = 1000, .packets = 1};
  tg_coll_result_t r = {.packets = 1, .hosts = &h, .n_hosts = 1};
  assert_int_equal(tg_coll_store_finish(f->store, w, &r), err);
  tg_coll_snapshot_t row;
  assert_int_equal(tg_coll_store_get(f->store, id, &row), 0);
  assert_int_equal(row.state, TG_COLL_FAILED);
  assert_true(row.failure[0] != '\0');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(stored_and_read_back, setup, teardown),
      cmocka_unit_test_setup_teardown(files_are_downloaded_at_get_only, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(killed_mid_upload, setup, teardown),
      cmocka_unit_test_setup_teardown(orphans_and_foreign_objects_at_open,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(delete_and_retention_remove_objects,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(two_collectors_share_the_bucket, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          a_sidecar_already_there_fails_the_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(
          symbols_live_and_die_with_their_snapshot, setup, teardown),
      cmocka_unit_test_setup_teardown(bucket_gone_mid_snapshot, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
