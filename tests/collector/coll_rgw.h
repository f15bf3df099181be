/* A real S3 gateway for the collector's tests: Ceph's radosgw with one
 * monitor and one memstore OSD on loopback, started and stopped by
 * tests/support/ceph_rgw.sh in a temporary directory. One start per test
 * executable (about 360 MB of memory and a few seconds): start it in the
 * group setup, stop it in the group teardown. */
#ifndef TRACEGATE_TESTS_COLL_RGW_H
#define TRACEGATE_TESTS_COLL_RGW_H

#include <stdbool.h>

typedef struct coll_rgw {
  char dir[256];
  char endpoint[128];   /* http://127.0.0.1:PORT */
  char access_key[128];
  char secret_key[128];
  char credentials[300]; /* the credentials file (AWS_ACCESS_KEY_ID=...) */
  bool up;
} coll_rgw_t;

/* Starts a gateway. 0; 1 when Ceph is not installed (the caller skips,
 * saying so); -1 on a failure (why on stderr). */
int coll_rgw_start(coll_rgw_t *g);
/* coll_rgw_start, then creates |bucket| in it: 0; 1 when Ceph is not
 * installed (said on stderr in |test|'s name, the caller skips); -1. */
int coll_rgw_start_bucket(coll_rgw_t *g, const char *bucket, const char *test);
/* A client of |bucket| on the gateway (retrying twice, 20 ms apart), or
 * NULL. The caller frees it (tg_s3_client_free). */
struct tg_s3_client *coll_rgw_client(const coll_rgw_t *g, const char *bucket);
/* Stops it and removes its directory. Idempotent. */
void coll_rgw_stop(coll_rgw_t *g);

#endif /* TRACEGATE_TESTS_COLL_RGW_H */
