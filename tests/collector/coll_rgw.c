/* tests/support/ceph_rgw.sh driven from C (coll_rgw.h): fork and exec, no
 * shell string, so that the directory's name is never parsed. */
#include "coll_rgw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collector/s3/s3_client.h"

static int run(const char *cmd, const char *dir) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    char owner[32];
    snprintf(owner, sizeof owner, "%ld", (long)getppid());
    setenv("CEPH_RGW_OWNER", owner, 1);
    execl("/bin/sh", "sh", TG_CEPH_RGW_SH, cmd, dir, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int read_line(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  int rc = fgets(out, (int)cap, f) ? 0 : -1;
  fclose(f);
  if (!rc) out[strcspn(out, "\n")] = '\0';
  return rc;
}

static int read_keys(coll_rgw_t *g) {
  FILE *f = fopen(g->credentials, "re");
  if (!f) return -1;
  char line[300];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    /* A key longer than its field is refused, not cut. */
    const char *v = NULL;
    char *to = NULL;
    size_t cap = 0;
    if (strncmp(line, "AWS_ACCESS_KEY_ID=", 18) == 0)
      v = line + 18, to = g->access_key, cap = sizeof g->access_key;
    else if (strncmp(line, "AWS_SECRET_ACCESS_KEY=", 22) == 0)
      v = line + 22, to = g->secret_key, cap = sizeof g->secret_key;
    if (!v) continue;
    size_t n = strlen(v);
    if (n >= cap) {
      fclose(f);
      return -1;
    }
    memcpy(to, v, n + 1);
  }
  fclose(f);
  return g->access_key[0] && g->secret_key[0] ? 0 : -1;
}

int coll_rgw_start(coll_rgw_t *g) {
  memset(g, 0, sizeof *g);
  snprintf(g->dir, sizeof g->dir, "/tmp/tg-rgw-XXXXXX");
  if (!mkdtemp(g->dir)) {
    perror("mkdtemp");
    return -1;
  }
  g->up = true;
  int rc = run("start", g->dir);
  if (rc == 77) {
    coll_rgw_stop(g);
    return 1;
  }
  char path[320];
  snprintf(path, sizeof path, "%s/endpoint", g->dir);
  snprintf(g->credentials, sizeof g->credentials, "%s/credentials", g->dir);
  if (rc != 0 || read_line(path, g->endpoint, sizeof g->endpoint) ||
      read_keys(g)) {
    fprintf(stderr, "coll_rgw: the gateway did not start (exit %d)\n", rc);
    coll_rgw_stop(g);
    return -1;
  }
  return 0;
}

void coll_rgw_stop(coll_rgw_t *g) {
  if (!g->up) return;
  g->up = false;
  if (run("stop", g->dir) != 0)
    fprintf(stderr, "coll_rgw: stopping the gateway in %s failed\n", g->dir);
}

int coll_rgw_start_bucket(coll_rgw_t *g, const char *bucket, const char *test) {
  int rc = coll_rgw_start(g);
  if (rc == 1)
    fprintf(stderr, "%s: Ceph (ceph-mon, ceph-osd, radosgw) is not "
                    "installed: skipped (deploy/deps.sh installs it)\n", test);
  if (rc) return rc;
  tg_s3_client_config_t cc = {
      .endpoint = g->endpoint, .region = "us-east-1", .bucket = bucket,
      .access_key = g->access_key, .secret_key = g->secret_key,
  };
  tg_s3_client_t *c = NULL;
  if (tg_s3_client_new(&cc, &c) || tg_s3_bucket_create(c)) rc = -1;
  tg_s3_client_free(c);
  return rc;
}

tg_s3_client_t *coll_rgw_client(const coll_rgw_t *g, const char *bucket) {
  tg_s3_client_config_t cc = {
      .endpoint = g->endpoint, .region = "us-east-1", .bucket = bucket,
      .access_key = g->access_key, .secret_key = g->secret_key,
      .max_attempts = 2, .base_backoff_ms = 20,
  };
  tg_s3_client_t *c = NULL;
  return tg_s3_client_new(&cc, &c) == 0 ? c : NULL;
}
