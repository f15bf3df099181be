/* Two tracegate-collectors sharing a PostgreSQL catalog and one store
 * directory, each taking its shard of one inventory (`--shard i/2`): a
 * real PostgreSQL server (coll_pg.h), hosts of the fleet harness, the
 * collectors as children (coll_e2e.h).
 *
 * Asserted whatever way the hosts fall (their ports are the kernel's):
 * each collector holds exactly the hosts tg_coll_shard_of() gives it; a
 * snapshot of each holds its own hosts' packets and nobody else's; both
 * are listed by either collector (one catalog, distinct ids) and either
 * serves the other's trace (one store).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "coll_pg.h"
#include "collector/config/shard.h"
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "test_proc.h"

#define N_HOSTS 3

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("coll-shards");
}

/* Whether |json|'s hosts list (GET /api/v1/hosts) is exactly the hosts of
 * |h| in |shard|, all in |state|. */
static bool shard_listed(const char *json, fleet_host_t *h, uint32_t shard,
                         const char *state) {
  size_t want = 0, seen = 0;
  for (size_t i = 0; i < N_HOSTS; i++)
    if (tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == shard) want++;
  for (size_t k = 0;; k++) {
    char key[48], spec[96];
    snprintf(key, sizeof(key), "hosts.%zu.host", k);
    const char *v = tg_test_json(json, key);
    if (!v || !strcmp(v, "null")) break;
    snprintf(spec, sizeof(spec), "%.*s", (int)strlen(v) - 2, v + 1);
    if (tg_coll_shard_of(spec, strlen(spec), 2) != shard) return false;
    snprintf(key, sizeof(key), "hosts.%zu.state", k);
    char st[48];
    snprintf(st, sizeof(st), "\"%s\"", state);
    if (strcmp(tg_test_json(json, key), st) != 0) return false;
    seen++;
  }
  return seen == want;
}

static void two_sharded_collectors_share_a_postgresql_catalog(void **state) {
  (void)state;
  assert_true(coll_pg_installed()); /* deploy/deps.sh installs postgresql */
  coll_pg_server_t pg = {0};
  assert_int_equal(coll_pg_start(&pg), 0);
  char uri[512], extra[600];
  assert_int_equal(coll_pg_createdb(&pg, uri, sizeof(uri)), 0);
  snprintf(extra, sizeof(extra), "catalog = %s\n", uri);

  fleet_host_t h[N_HOSTS];
  start_hosts(h, N_HOSTS);
  write_config(h, N_HOSTS, extra);
  collector_t c[2];
  const char *shard0[] = {"--shard", "0/2", NULL};
  const char *shard1[] = {"--shard", "1/2", NULL};
  collector_start_args(&c[0], shard0);
  collector_start_args(&c[1], shard1);
  for (size_t i = 0; i < N_HOSTS; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  const char *json = fleet_in_dir("shard-hosts.json");
  for (uint32_t k = 0; k < 2; k++) {
    int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
    for (;;) {
      assert_int_equal(http(&c[k], "GET", "/api/v1/hosts", json), 200);
      if (shard_listed(json, h, k, "tracing")) break;
      assert_true(tg_test_now_ms() < end);
      usleep(100 * 1000);
    }
  }
  char tag[N_HOSTS][16];
  for (size_t i = 0; i < N_HOSTS; i++) {
    snprintf(tag[i], sizeof(tag[i]), "shard%zu", i);
    fleet_commit_packets(&h[i].p, 0, tag[i], 1, 4);
  }

  /* A snapshot on each: its own hosts' flushes answered. */
  char ids[2][32];
  for (uint32_t k = 0; k < 2; k++) {
    char out[64];
    snprintf(out, sizeof(out), "shard-snap%u.json", k);
    const char *path = fleet_in_dir(out);
    pid_t pid = http_spawn(&c[k], "POST", "/api/v1/snapshots?wait=1", path);
    size_t mine = 0;
    for (size_t i = 0; i < N_HOSTS; i++)
      if (tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == k) {
        fleet_ack_flush(&h[i].p);
        mine++;
      }
    assert_int_equal(http_wait(pid, path), 200);
    snprintf(ids[k], sizeof(ids[k]), "%.16s", tg_test_json(path, "snapshot.id") + 1);
    char want[16];
    snprintf(want, sizeof(want), "%zu", mine);
    assert_json(path, "snapshot.hosts", want);
    /* No host: nothing delivered, so a failed row and no file. */
    assert_json(path, "snapshot.state", mine ? "\"complete\"" : "\"failed\"");
  }
  assert_string_not_equal(ids[0], ids[1]);

  /* One catalog: either collector lists both; one store: either serves
   * the other's trace, which holds exactly its shard's packets. */
  for (uint32_t k = 0; k < 2; k++) {
    assert_int_equal(http(&c[k], "GET", "/api/v1/snapshots", json), 200);
    for (uint32_t j = 0; j < 2; j++) {
      char path[96];
      snprintf(path, sizeof(path), "/api/v1/snapshots/%s", ids[j]);
      assert_int_equal(http(&c[k], "GET", path, fleet_in_dir("one.json")), 200);
    }
    uint32_t other = 1 - k;
    bool has_hosts = false;
    for (size_t i = 0; i < N_HOSTS; i++)
      has_hosts |= tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == other;
    if (!has_hosts) continue;
    const char *trace = fleet_in_dir("shard.pftrace");
    download(&c[k], ids[other], trace);
    fleet_trace_t t;
    fleet_trace_load(trace, &t);
    for (size_t i = 0; i < N_HOSTS; i++) {
      bool in = tg_coll_shard_of(h[i].spec, strlen(h[i].spec), 2) == other;
      if (in) fleet_trace_assert_values(&t, tag[i], 1, 4);
      else assert_int_equal(fleet_trace_count_tag(&t, tag[i]), 0);
    }
    fleet_trace_free(&t);
  }
  collector_stop(&c[0]);
  collector_stop(&c[1]);
  for (size_t i = 0; i < N_HOSTS; i++) fleet_host_stop(&h[i]);
  coll_pg_stop(&pg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(two_sharded_collectors_share_a_postgresql_catalog),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
