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
 *   MB/s     of stored.
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
#include <time.h>
#include <unistd.h>

#include "coll_rgw.h"
#include "collector/s3_client.h"
#include "collector/store.h"

#define PIECE (64u << 10)
#define BUCKET "tg-bench"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct figures {
  double stored_s, listed_s;
} figures_t;

static int run_one(const tg_coll_store_config_t *cfg, uint64_t bytes,
                   figures_t *f) {
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
  double t0 = now_s();
  if ((rc = tg_coll_store_begin(s, &b, &w, &id))) goto out;
  for (uint64_t off = 0; off < bytes && !rc; off += PIECE) {
    for (size_t i = 0; i < PIECE; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      memcpy(piece + i, &x, 8);
    }
    size_t n = bytes - off < PIECE ? (size_t)(bytes - off) : PIECE;
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

int bench_store_run(uint64_t mb) {
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
  tg_coll_s3_config_t s3 = {.client = cc, .prefix = "bench/"};
  tg_coll_store_config_t dcfg = {.dir = ddir};
  tg_coll_store_config_t scfg = {.dir = sdir, .s3 = &s3};
  figures_t fd = {0}, fs = {0};
  int rd = run_one(&dcfg, bytes, &fd);
  int rs = run_one(&scfg, bytes, &fs);
  printf("store      MB   stored_s   MB/s  listed_after_last_byte_s\n");
  if (rd)
    printf("directory  %-4" PRIu64 " failed: %s\n", mb, strerror(-rd));
  else
    printf("directory  %-4" PRIu64 " %8.2f %7.1f %9.3f\n", mb, fd.stored_s,
           (double)mb / fd.stored_s, fd.listed_s);
  if (rs)
    printf("bucket     %-4" PRIu64 " failed: %s\n", mb, strerror(-rs));
  else
    printf("bucket     %-4" PRIu64 " %8.2f %7.1f %9.3f\n", mb, fs.stored_s,
           (double)mb / fs.stored_s, fs.listed_s);
  if (!rd && !rs)
    printf("bucket/directory stored time: %.2fx (goal <= 1.5x); listed "
           "within %.3f s of the last byte (goal <= 1 s)\n",
           fs.stored_s / fd.stored_s, fs.listed_s);
  ret = rd || rs;
out:
  coll_rgw_stop(&gw);
  char cmd[96];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_collector: cannot remove %s\n", dir);
  return ret;
}
