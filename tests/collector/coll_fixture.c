/* Shared by the collector's tests (coll_fixture.h). */
#include "coll_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "coll_pg.h"
#include "collector/catalog/catalog_pg.h"
#include "collector/catalog/snapshot_id.h"
#include "test_proc.h"

static int64_t fixture_now(void *ctx) {
  return ((coll_fixture_t *)ctx)->now_ms;
}

int coll_fixture_init(coll_fixture_t *fx, const char *tag) {
  memset(fx, 0, sizeof(*fx));
  int err = tg_test_mkdtemp(fx->dir, sizeof(fx->dir), tag);
  if (err) return err;
  fx->now_ms = 1700000000000;
  fx->cfg.dir = fx->dir;
  fx->cfg.now_ms = fixture_now;
  fx->cfg.clock_ctx = fx;
  return 0;
}

static coll_pg_server_t the_server;

struct coll_pg_server *coll_pg_group_server(void) {
  return the_server.up ? &the_server : NULL;
}

int coll_fixture_init_pg(coll_fixture_t *fx, const char *tag) {
  if (!coll_pg_installed()) {
    memset(fx, 0, sizeof(*fx));
    fx->skip = true;
    return 0;
  }
  if (!the_server.up || coll_fixture_init(fx, tag)) return -1;
  fx->kind = COLL_PG;
  return coll_pg_createdb(&the_server, fx->conninfo, sizeof(fx->conninfo));
}

/* A killed collector's server session ends when the server reads EOF on
 * its socket: each open waits for it up to TG_COLL_PG_BUSY_MS. */
#define MEMBER_WAITS 20

int coll_pg_catalog(const char *conninfo, uint32_t member,
                    tg_coll_catalog_t **out) {
  int err = -EBUSY;
  for (int i = 0; i < MEMBER_WAITS && err == -EBUSY; i++)
    err = tg_coll_catalog_pg_open(conninfo, member, out);
  return err;
}

int coll_fixture_open(coll_fixture_t *fx) {
  if (fx->kind == COLL_PG) {
    int err = coll_pg_catalog(fx->conninfo, fx->member, &fx->cat);
    if (err) return err;
    fx->cfg.catalog = fx->cat;
  }
  int err = tg_coll_store_open(&fx->cfg, &fx->store, &fx->rec);
  if (err && fx->cat) {
    tg_coll_catalog_close(fx->cat);
    fx->cat = fx->cfg.catalog = NULL;
  }
  return err;
}

void coll_fixture_close(coll_fixture_t *fx) {
  tg_coll_store_close(fx->store);
  fx->store = NULL;
  tg_coll_catalog_close(fx->cat);
  fx->cat = fx->cfg.catalog = NULL;
}

void coll_fixture_fini(coll_fixture_t *fx) {
  coll_fixture_close(fx);
  if (fx->dir[0]) tg_test_rm_rf(fx->dir);
}

coll_fixture_t *coll_fx(void **state) {
  coll_fixture_t *fx = *state;
  if (fx->skip) {
    fprintf(stderr, "skipped: PostgreSQL is not installed (deploy/deps.sh)\n");
    skip();
  }
  return fx;
}

static coll_fixture_t the_fixture;

int coll_setup(void **state) {
  if (coll_fixture_init(&the_fixture, "coll")) return -1;
  *state = &the_fixture;
  return 0;
}

int coll_setup_open(void **state) {
  if (coll_setup(state)) return -1;
  return coll_fixture_open(&the_fixture) ? -1 : 0;
}

int coll_pg_setup(void **state) {
  if (coll_fixture_init_pg(&the_fixture, "coll-pg")) return -1;
  *state = &the_fixture;
  return 0;
}

int coll_pg_setup_open(void **state) {
  if (coll_pg_setup(state)) return -1;
  return the_fixture.skip || coll_fixture_open(&the_fixture) == 0 ? 0 : -1;
}

int coll_pg_group_setup(void **state) {
  (void)state;
  if (!coll_pg_installed()) {
    fprintf(stderr, "PostgreSQL is not installed: its tests skip\n");
    return 0;
  }
  return coll_pg_start(&the_server);
}

int coll_pg_group_teardown(void **state) {
  (void)state;
  coll_pg_stop(&the_server);
  return 0;
}

int coll_teardown(void **state) {
  coll_fixture_fini(*state);
  return 0;
}

void coll_fill(uint8_t *buf, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (uint8_t)x;
  }
}

#define MAX_HOSTS 16

int coll_snapshot(tg_coll_store_t *s, const char *trigger,
                  const char *const *hosts, size_t bytes, uint64_t seed,
                  uint64_t *id) {
  tg_coll_begin_t b = {.trigger = trigger, .reason = "r", .origin = "o"};
  tg_coll_writer_t *w;
  int err = tg_coll_store_begin(s, &b, &w, id);
  if (err) return err;
  uint8_t piece[4096];
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < sizeof(piece) ? bytes - done : sizeof(piece);
    coll_fill(piece, n, seed + done);
    if ((err = tg_coll_writer_write(w, piece, n))) {
      tg_coll_store_abort(s, w, "test write failed");
      return err;
    }
    done += n;
  }
  tg_coll_host_result_t h[MAX_HOSTS];
  size_t n = 0;
  for (; hosts && hosts[n] && n < MAX_HOSTS; n++) {
    bool failed = hosts[n][0] == '!', partial = hosts[n][0] == '~';
    h[n] = (tg_coll_host_result_t){
        .host = hosts[n] + (failed || partial),
        .outcome = failed    ? TG_COLL_HOST_FAILED
                   : partial ? TG_COLL_HOST_PARTIAL
                             : TG_COLL_HOST_OK,
        .name = partial ? COLL_FX_PARTIAL_NAME : NULL,
        .error = failed ? "unreachable" : partial ? "link lost" : NULL,
        .problems = partial ? COLL_FX_PARTIAL_PROBLEMS : NULL,
        .boost = partial ? COLL_FX_PARTIAL_BOOST : NULL,
        .links = partial ? COLL_FX_PARTIAL_LINKS : NULL,
        .bytes = failed ? 0 : bytes,
        .packets = failed ? 0 : 10 + n,
        .loss = n,
        .window_first_ms = 1000 * (int64_t)n,
        .window_last_ms = 1000 * (int64_t)n + 500,
    };
  }
  tg_coll_result_t r = {.packets = 10 * n, .hosts = h, .n_hosts = n};
  return tg_coll_store_finish(s, w, &r);
}

int coll_file_crc(const char *dir, uint64_t id, bool partial, uint64_t *size,
                  uint32_t *crc) {
  char name[TG_COLL_FILE_NAME_MAX], path[512];
  tg_coll_id_file_name(id, partial, name);
  snprintf(path, sizeof(path), "%s/%s/%s", dir,
           partial ? TG_COLL_TMP_DIR : TG_COLL_SNAPSHOT_DIR, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  uLong c = crc32(0L, Z_NULL, 0);
  uint64_t total = 0;
  unsigned char buf[65536];
  ssize_t got;
  while ((got = read(fd, buf, sizeof(buf))) > 0) {
    c = crc32(c, buf, (uInt)got);
    total += (uint64_t)got;
  }
  int err = got < 0 ? -errno : 0;
  close(fd);
  *size = total;
  *crc = (uint32_t)c;
  return err;
}

int coll_count_entries(const char *dir, const char *sub) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, sub);
  DIR *d = opendir(path);
  if (!d) return -errno;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

void coll_fx_check_links_migration(coll_fixture_t *fx,
                                   void (*to_schema_4)(coll_fixture_t *fx)) {
  static const char *const cut[] = {"~alpha", NULL};
  uint64_t old_id, id;
  assert_int_equal(coll_snapshot(fx->store, "t", cut, 100, 1, &old_id), 0);
  coll_fixture_close(fx);
  to_schema_4(fx);
  assert_int_equal(coll_fixture_open(fx), 0);
  tg_coll_host_t h[1];
  size_t n;
  assert_int_equal(tg_coll_store_hosts(fx->store, old_id, h, 1, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(h[0].boost, COLL_FX_PARTIAL_BOOST);
  assert_string_equal(h[0].links, "");
  assert_int_equal(coll_snapshot(fx->store, "t", cut, 100, 2, &id), 0);
  assert_int_equal(tg_coll_store_hosts(fx->store, id, h, 1, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(h[0].links, COLL_FX_PARTIAL_LINKS);
}
