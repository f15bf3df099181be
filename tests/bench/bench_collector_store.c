/* bench_collector --store [MB]: the two stores side by side, on this
 * machine. A synthetic snapshot of MB megabytes (default 300) is written
 * the way snap.c writes one (64 KiB at a time, then the writer's sync and
 * finish) into a directory store and into a bucket store on a Ceph
 * gateway started here (tests/support/ceph_rgw.sh: one memstore OSD on
 * loopback), and for each:
 *   stored   begin -> finish returned (the row committed): the time the
 *            issue bounds at 1.5x the directory store's for the bucket;
 *   listed   the last byte written -> the row listed (GET-equivalent:
 *            tg_coll_store_list), bounded at 1 s;
 *   MB/s     of stored;
 *   cpu      the CPU time (user + system) over stored of this process
 *            (the writer and the uploaders) and of the gateway's daemons
 *            (radosgw, the OSD, the monitor): what each store costs the
 *            machine's cores, which is steadier than the time on a
 *            shared machine.
 * With a pace, the bytes come at that rate (as hosts' answers do: the
 * upload runs while they come) instead of at once, into each store.
 * The bucket store runs twice: its parts' payload signed (what it does
 * over http://, as here) and unsigned (what it does over https://, where
 * TLS protects the bytes: s3_client.h, tg_s3_payload_t).
 * Beside them, in the same run, the floor: the same bytes sent by one
 * plain PUT (libcurl, a presigned URL, so no hashing of the payload) to
 * the same gateway, the time the gateway itself takes to take them in.
 * The bucket store cannot be faster than that; whatever it takes above
 * the floor is the store's own.
 * Ceph frees the OSD's memory only in its garbage collector (2 h): one run
 * holds MB megabytes of the OSD's memory until the gateway stops at its
 * end. Prints one row per store and the ratio; exits 1 if a store fails.
 */
#include "bench_collector_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "coll_rgw.h"
#include "collector/s3/s3_client.h"
#include "collector/s3/s3_sigv4.h"
#include "collector/store/store.h"
#include "common/buf.h"

#define PIECE (64u << 10)
#define BUCKET "tg-bench"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct figures {
  double stored_s, listed_s;
  double cpu_self_s, cpu_gw_s; /* CPU time over stored_s: ours, Ceph's */
} figures_t;

/* The gateway of this run, whose daemons' CPU time each row reads. */
static const coll_rgw_t *g_gw;

/* This process's CPU time (user + system, every thread). */
static double self_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU time (user + system) of the gateway's daemons, by their pid files:
 * radosgw, the OSD and the monitor. */
static double gw_cpu_s(void) {
  static const char *const names[] = {"rgw", "osd", "mon"};
  long tick = sysconf(_SC_CLK_TCK);
  double sum = 0;
  if (!g_gw || tick <= 0) return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[320], line[1024];
    snprintf(path, sizeof path, "%s/run/%s.pid", g_gw->dir, names[i]);
    FILE *f = fopen(path, "re");
    long pid = 0;
    if (!f) continue;
    if (fscanf(f, "%ld", &pid) != 1) pid = 0;
    fclose(f);
    if (pid <= 0) continue;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "re"))) continue;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    /* Fields after the command's closing parenthesis: state is the 3rd
     * field, utime and stime the 14th and 15th. */
    const char *q = strrchr(line, ')');
    unsigned long long ut = 0, st = 0;
    if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                           "%llu %llu", &ut, &st) == 2)
      sum += (double)(ut + st) / (double)tick;
  }
  return sum;
}

/* Sleeps until |t| on the monotonic clock. */
static void sleep_until(double t) {
  struct timespec ts = {.tv_sec = (time_t)t,
                        .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* |pace| bytes a second, 0: at once. */
static int run_one(const tg_coll_store_config_t *cfg, uint64_t bytes,
                   double pace, figures_t *f) {
  tg_coll_store_t *s = NULL;
  int rc = tg_coll_store_open(cfg, &s, NULL);
  if (rc) return rc;
  uint8_t *piece = malloc(PIECE);
  if (!piece) {
    tg_coll_store_close(s);
    return -ENOMEM;
  }
  /* Bytes that no layer can shrink: a xorshift stream. */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  tg_coll_begin_t b = {.trigger = "bench"};
  tg_coll_writer_t *w = NULL;
  uint64_t id = 0;
  double c0 = self_cpu_s(), g0 = gw_cpu_s();
  double t0 = now_s();
  if ((rc = tg_coll_store_begin(s, &b, &w, &id))) goto out;
  for (uint64_t off = 0; off < bytes && !rc; off += PIECE) {
    for (size_t i = 0; i < PIECE; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      memcpy(piece + i, &x, 8);
    }
    size_t n = bytes - off < PIECE ? (size_t)(bytes - off) : PIECE;
    /* A piece is written once the source has made all of it. */
    if (pace > 0) sleep_until(t0 + (double)(off + n) / pace);
    rc = tg_coll_writer_write(w, piece, n);
  }
  double t_last = now_s();
  if (!rc) rc = tg_coll_writer_sync(w);
  tg_coll_host_result_t h = {.host = "bench", .outcome = TG_COLL_HOST_OK,
                             .bytes = bytes, .packets = 1};
  tg_coll_result_t r = {.packets = 1, .hosts = &h, .n_hosts = 1};
  if (rc) {
    tg_coll_store_abort(s, w, "bench: write failed");
    goto out;
  }
  if ((rc = tg_coll_store_finish(s, w, &r))) goto out;
  double t_stored = now_s();
  f->cpu_self_s = self_cpu_s() - c0;
  f->cpu_gw_s = gw_cpu_s() - g0;
  tg_coll_snapshot_t row;
  size_t n = 0;
  tg_coll_filter_t all = TG_COLL_FILTER_INIT;
  if ((rc = tg_coll_store_list(s, &all, &row, 1, &n))) goto out;
  if (n != 1 || row.id != id || row.bytes != bytes) {
    rc = -EIO;
    goto out;
  }
  f->stored_s = t_stored - t0;
  f->listed_s = now_s() - t_last;
out:
  free(piece);
  tg_coll_store_close(s);
  return rc;
}

/* Fills |p| with the xorshift stream run_one writes. */
static void fill_stream(uint8_t *p, uint64_t bytes) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
}

static size_t sink(char *p, size_t sz, size_t n, void *ctx) {
  (void)p, (void)ctx;
  return sz * n;
}

/* One PUT of |bytes| to a presigned URL: the gateway's own time. */
static int floor_put(const coll_rgw_t *gw, uint64_t bytes, figures_t *f) {
  uint8_t *p = malloc(bytes ? bytes : 1);
  if (!p) return -ENOMEM;
  fill_stream(p, bytes);
  const char *host = strstr(gw->endpoint, "://");
  host = host ? host + 3 : gw->endpoint;
  char date[TG_S3_AMZ_DATE_LEN + 1];
  int rc = tg_s3_amz_date((int64_t)time(NULL), date);
  tg_buf_t u;
  tg_buf_init(&u, 0);
  tg_s3_key_t k = {gw->access_key, gw->secret_key, "us-east-1", "s3"};
  tg_s3_pair_t h[] = {{"host", host}};
  const char *path = "/" BUCKET "/floor/put.bin";
  tg_s3_request_t r = {.method = "PUT", .path = path, .headers = h,
                       .n_headers = 1, .amz_date = date};
  if (!rc && ((rc = tg_buf_append(&u, gw->endpoint, strlen(gw->endpoint))) ||
              (rc = tg_buf_append(&u, path, strlen(path))) ||
              (rc = tg_buf_append(&u, "?", 1)) ||
              (rc = tg_s3_presign(&k, &r, 600, &u)) ||
              (rc = tg_buf_append(&u, "", 1))))
    goto out;
  CURL *e = curl_easy_init();
  struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
  if (!e || !hl) {
    rc = -ENOMEM;
  } else {
    curl_easy_setopt(e, CURLOPT_URL, (const char *)tg_buf_begin(&u));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)p);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)bytes);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
    double c0 = self_cpu_s(), g0 = gw_cpu_s();
    double t0 = now_s();
    CURLcode cc = curl_easy_perform(e);
    f->stored_s = now_s() - t0;
    f->cpu_self_s = self_cpu_s() - c0;
    f->cpu_gw_s = gw_cpu_s() - g0;
    long st = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
    if (cc != CURLE_OK || st != 200) {
      fprintf(stderr, "bench_collector: floor PUT: %s, HTTP %ld\n",
              curl_easy_strerror(cc), st);
      rc = -EIO;
    }
  }
  curl_slist_free_all(hl);
  curl_easy_cleanup(e);
out:
  tg_buf_free(&u);
  free(p);
  return rc;
}

static void print_row(const char *name, uint64_t mb, int rc,
                      const figures_t *f, const char *note) {
  if (rc) {
    printf("%-10s %-4" PRIu64 " failed: %s\n", name, mb, strerror(-rc));
    return;
  }
  char listed[16] = "-";
  if (f->listed_s >= 0) snprintf(listed, sizeof listed, "%.3f", f->listed_s);
  printf("%-10s %-4" PRIu64 " %8.2f %7.1f %9s %11.2f %11.2f  %s\n", name, mb,
         f->stored_s, (double)mb / f->stored_s, listed, f->cpu_self_s,
         f->cpu_gw_s, note);
}

int bench_store_run(uint64_t mb, unsigned part_mb, unsigned uploaders,
                    unsigned pace_mbps) {
  uint64_t bytes = mb << 20;
  char dir[] = "/tmp/tg-bench-store-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("bench_collector: mkdtemp");
    return 1;
  }
  char ddir[64], sdir[64];
  snprintf(ddir, sizeof ddir, "%s/dir", dir);
  snprintf(sdir, sizeof sdir, "%s/s3", dir);
  coll_rgw_t gw;
  int g = coll_rgw_start(&gw);
  if (g == 1) {
    fprintf(stderr, "bench_collector: Ceph is not installed (deploy/deps.sh "
                    "installs ceph-mon, ceph-osd, radosgw): no bucket row\n");
    return 1;
  }
  if (g) return 1;
  int ret = 1;
  tg_s3_client_config_t cc = {.endpoint = gw.endpoint, .region = "us-east-1",
                              .bucket = BUCKET, .access_key = gw.access_key,
                              .secret_key = gw.secret_key};
  tg_s3_client_t *c = NULL;
  if (tg_s3_client_new(&cc, &c) || tg_s3_bucket_create(c)) {
    fprintf(stderr, "bench_collector: cannot create the bucket\n");
    tg_s3_client_free(c);
    goto out;
  }
  tg_s3_client_free(c);
  tg_coll_s3_config_t s3 = {.client = cc, .prefix = "bench/",
                            .part_size = (size_t)part_mb << 20,
                            .queue_parts = uploaders};
  s3.client.payload = TG_S3_PAYLOAD_SIGNED;
  tg_coll_s3_config_t s3u = s3;
  s3u.client.payload = TG_S3_PAYLOAD_UNSIGNED;
  s3u.prefix = "bench-unsigned/";
  char udir[64];
  snprintf(udir, sizeof udir, "%s/s3u", dir);
  tg_coll_store_config_t dcfg = {.dir = ddir};
  tg_coll_store_config_t scfg = {.dir = sdir, .s3 = &s3};
  tg_coll_store_config_t ucfg = {.dir = udir, .s3 = &s3u};
  figures_t fd = {0}, fs = {0}, fu = {0}, ff = {0};
  g_gw = &gw;
  double pace = (double)pace_mbps * (double)(1u << 20);
  int rd = run_one(&dcfg, bytes, pace, &fd);
  /* Paced, the floor would measure the pace: no plain PUT. */
  int rf = pace > 0 ? 0 : floor_put(&gw, bytes, &ff);
  int rs = run_one(&scfg, bytes, pace, &fs);
  int ru = run_one(&ucfg, bytes, pace, &fu);
  if (pace > 0)
    printf("paced: the bytes come at %u MB/s (the last at %.2f s), as hosts'"
           " answers do\n", pace_mbps, (double)bytes / pace);
  printf("store      MB   stored_s   MB/s  listed_s  cpu_ours_s  cpu_ceph_s"
         "  (bucket: parts of %u MiB, %u uploaders; listed_s: last byte ->"
         " row listed)\n", part_mb, uploaders);
  print_row("directory", mb, rd, &fd, "");
  print_row("bucket", mb, rs, &fs, "(parts' payload signed: over http)");
  print_row("bucket", mb, ru, &fu, "(parts' payload unsigned: over https)");
  ff.listed_s = -1;
  if (pace <= 0)
    print_row("one PUT", mb, rf, &ff,
              "(the gateway's floor: one plain PUT of the same bytes)");
  if (!rd && !rs && !ru)
    printf("bucket/directory stored time: %.2fx signed, %.2fx unsigned (goal "
           "<= 1.5x); listed within %.3f s, %.3f s of the last byte (goal "
           "<= 1 s)\n",
           fs.stored_s / fd.stored_s, fu.stored_s / fd.stored_s, fs.listed_s,
           fu.listed_s);
  if (pace <= 0 && !rd && !rf && !rs && !ru)
    printf("bucket/one PUT: %.2fx signed, %.2fx unsigned; one PUT/directory: "
           "%.2fx\n", fs.stored_s / ff.stored_s, fu.stored_s / ff.stored_s,
           ff.stored_s / fd.stored_s);
  ret = rd || rs || rf || ru;
out:
  coll_rgw_stop(&gw);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_collector: cannot remove %s\n", dir);
  return ret;
}
