/* SPDX-License-Identifier: Apache-2.0 */
/* One host's CPU profile of a snapshot (GET
 * /api/v1/snapshots/ID/profile?host=H&format=pprof, `tracegate snapshot
 * ID --pprof --host H`), end to end: two hosts of the fleet harness, host
 * A's producer committing tracegate-perf's own packets (a defaults packet,
 * main>work>hot x3, main>idle x1), the collector as a child (coll_e2e.h).
 *
 * What is asserted: the answer is gzipped profile.proto whose samples add
 * up to host A's 4 and name hot; it is byte for byte what `tracegate
 * profile --pprof` makes of host A's part (/trace?host=A) and what
 * `tracegate snapshot ID --pprof` writes; host B (no samples) gets a
 * profile without samples; unknown hosts, host lists, another format and
 * no host are refused with JSON errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/perf/perf_emit.h"
#include "coll_e2e.h"
#include "fleet_harness.h"
#include "pb/pprof/profile.pb-c.h"
#include "test_proc.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("profile");
}

/* The profile at |path| (gzipped profile.proto): its samples' first
 * values summed, and whether a function is named |fn|. */
static int64_t profile_samples(const char *path, const char *fn, bool *named) {
  size_t n;
  uint8_t *gz = coll_slurp(path, &n);
  uint8_t *raw = malloc(1 << 20);
  assert_non_null(raw);
  uLongf rn = 1 << 20;
  z_stream z;
  memset(&z, 0, sizeof(z));
  assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = gz;
  z.avail_in = (uInt)n;
  z.next_out = raw;
  z.avail_out = (uInt)rn;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  rn -= z.avail_out;
  inflateEnd(&z);
  Perftools__Profiles__Profile *p =
      perftools__profiles__profile__unpack(NULL, rn, raw);
  assert_non_null(p);
  assert_int_equal(p->n_sample_type, 2);
  int64_t total = 0;
  for (size_t i = 0; i < p->n_sample; i++) total += p->sample[i]->value[0];
  *named = false;
  for (size_t i = 0; i < p->n_function; i++) {
    int64_t s = p->function[i]->name;
    assert_true(s >= 0 && (size_t)s < p->n_string_table);
    if (!strcmp(p->string_table[s], fn)) *named = true;
  }
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(raw);
  free(gz);
  return total;
}

/* tracegate-perf's packets of host A, committed as one chunk. */
static void commit_perf(raw_producer_t *p) {
  static const tg_perf_emit_mapping_t app = {
      .start = 0x400000, .end = 0x500000, .path = "/usr/bin/app"};
  const tg_perf_emit_frame_t hot[] = {
      {&app, 0x100, "main", 0}, {&app, 0x200, "work", 0}, {&app, 0x300, "hot", 0}};
  const tg_perf_emit_frame_t idle[] = {
      {&app, 0x100, "main", 0}, {&app, 0x400, "idle", 0}};
  static uint8_t pk[5][512];
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  const uint8_t *frags[5];
  size_t lens[5];
  for (int i = 0; i < 5; i++) {
    tg_pbw_t w;
    tg_pbw_init(&w, pk[i], sizeof(pk[i]), NULL, NULL);
    if (i == 0) {
      tg_perf_timebase_desc_t tb = {.frequency = 100, .counter = 1,
                                    .builtin_clock = 6};
      tg_perf_emit_defaults(&w, 1000, &tb);
    } else {
      tg_perf_emit_sample_t s = {.ts = 2000 + (uint64_t)i, .pid = 7, .tid = 7,
                                 .cpu_mode = 2, .timebase_count = 1,
                                 .frames = i < 4 ? hot : idle,
                                 .n_frames = i < 4 ? 3 : 2};
      assert_int_equal(tg_perf_emit_sample(e, &w, &s), 0);
    }
    assert_int_equal(tg_pbw_error(&w), 0);
    frags[i] = pk[i];
    lens[i] = (size_t)tg_pbw_written(&w);
  }
  tg_perf_emitter_free(e);
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_1, 1, 0, 0,
                                            frags, lens, 5),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* Hosts A (tracegate-perf's packets) and B (3 packets, no samples) and
 * the collector (|extra| config lines), a snapshot of both stored: its
 * id and the hosts' specs into |id|, |a|, |b| (32, 320, 320 bytes). */
static void snapshot_of_two(fleet_host_t h[2], collector_t *c,
                            const char *extra, char *id, char *a, char *b) {
  fleet_up(h, c, extra);
  commit_perf(&h[0].p);
  fleet_commit_packets(&h[1].p, 0, "hostB", 1, 3);
  snprintf(id, 32, "%s", snapshot(c, h, 2, fleet_in_dir("snap.json")));
  snprintf(a, 320, "%s", h[0].spec);
  snprintf(b, 320, "%s", h[1].spec);
}

static void a_hosts_profile_of_a_snapshot(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  char id[32], a[320], b[320], path[1024];
  snapshot_of_two(h, &c, NULL, id, a, b);

  char prof_a[512], part_a[512], cli_a[512], snap_a[512], prof_b[512];
  snprintf(prof_a, sizeof(prof_a), "%s", fleet_in_dir("a.pb.gz"));
  snprintf(part_a, sizeof(part_a), "%s", fleet_in_dir("a.pftrace"));
  snprintf(cli_a, sizeof(cli_a), "%s", fleet_in_dir("cli-a.pb.gz"));
  snprintf(snap_a, sizeof(snap_a), "%s", fleet_in_dir("snap-a.pb.gz"));
  snprintf(prof_b, sizeof(prof_b), "%s", fleet_in_dir("b.pb.gz"));
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile?host=%s&format=pprof", id, a);
  assert_int_equal(http(&c, "GET", path, prof_a), 200);
  bool named;
  assert_int_equal(profile_samples(prof_a, "hot", &named), 4);
  assert_true(named);

  /* The same bytes as the CLI makes of the host's part. */
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, a);
  assert_int_equal(http(&c, "GET", path, part_a), 200);
  const char *err = fleet_in_dir("cli.err");
  const char *prof_argv[] = {"profile", part_a, "--pprof", "-o", cli_a, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, prof_argv, err), 0);
  assert_same_file(cli_a, prof_a);
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
  const char *snap_argv[] = {"snapshot", id, "--pprof", "--host", a,
                             "--collector", addr, "-o", snap_a, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, snap_argv, err), 0);
  assert_same_file(snap_a, prof_a);
  const char *no_host[] = {"snapshot", id, "--pprof", "--collector", addr,
                           "-o", snap_a, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, no_host, err), 2);

  /* Host B has no samples: a profile without any. */
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile?host=%s", id, b);
  assert_int_equal(http(&c, "GET", path, prof_b), 200);
  assert_int_equal(profile_samples(prof_b, "hot", &named), 0);
  assert_false(named);

  /* Refused. */
  const char *bad = fleet_in_dir("bad.json");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile?host=nope", id);
  assert_int_equal(http(&c, "GET", path, bad), 404);
  assert_json(bad, "host", "\"nope\"");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile?host=%s,%s", id,
           a, b);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile?host=%s&format=json", id, a);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile", id);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots/7fffffffffffffff/profile"
                                   "?host=x", bad), 404);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* The shares of a stored snapshot (collector/daemon/shares.h) reach the
 * catalog and GET /api/v1/functions: host A's hot is 3 of its 4 samples
 * (anywhere and as leaf), main all 4; host B (no samples) has no rows;
 * `tracegate functions` answers the same. */
static void function_shares_of_a_snapshot(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  char id[32], a[320], b[320], path[1024];
  snapshot_of_two(h, &c, "function_shares_top = 2\n", id, a, b);
  const char *out = fleet_in_dir("functions.json");
  wait_metric(&c,
              "tracegate_collector_function_shares_total{outcome=\"stored\"}"
              " 1\n",
              out);

  /* hot above 50%: host A's, in CPU time (100 Hz: 10 ms a sample). */
  assert_int_equal(
      http(&c, "GET", "/api/v1/functions?name=hot&min_share=0.5", out), 200);
  char want[400];
  snprintf(want, sizeof(want), "\"%s\"", id);
  assert_json(out, "rows.0.snapshot", want);
  snprintf(want, sizeof(want), "\"%s\"", a);
  assert_json(out, "rows.0.host", want);
  assert_json(out, "rows.0.kind", "\"function\"");
  assert_json(out, "rows.0.total_samples", "3");
  assert_json(out, "rows.0.self_samples", "3");
  assert_json(out, "rows.0.host_samples", "4");
  assert_json(out, "rows.0.total_ns", "30000000");
  assert_json(out, "rows.0.host_cpu_ns", "40000000");
  assert_json(out, "rows.0.total_share", "0.75");
  assert_json(out, "rows.0.basis", "\"cpu\"");
  assert_null(tg_test_json(out, "rows.1"));
  assert_json(out, "next_after", "null");
  /* Not above 75%. */
  assert_int_equal(
      http(&c, "GET", "/api/v1/functions?name=hot&min_share=0.75", out), 200);
  assert_null(tg_test_json(out, "rows.0"));

  /* main on host A over time: everywhere in its stacks, never a leaf. */
  snprintf(path, sizeof(path), "/api/v1/functions?name=main&host=%s", a);
  assert_int_equal(http(&c, "GET", path, out), 200);
  assert_json(out, "rows.0.total_share", "1.0");
  assert_json(out, "rows.0.self_share", "0.0");
  assert_json(out, "rows.0.rank", "0");
  /* The top 2 (main, hot) and the rest: idle's one sample as leaf. */
  snprintf(path, sizeof(path), "/api/v1/functions?name=%%5Brest%%5D&host=%s",
           a);
  assert_int_equal(http(&c, "GET", path, out), 200);
  assert_json(out, "rows.0.kind", "\"rest\"");
  assert_json(out, "rows.0.rank", "2");
  assert_json(out, "rows.0.self_samples", "1");
  snprintf(path, sizeof(path), "/api/v1/functions?name=idle&host=%s", a);
  assert_int_equal(http(&c, "GET", path, out), 200);
  assert_null(tg_test_json(out, "rows.0"));
  /* Host B sampled nothing. */
  snprintf(path, sizeof(path), "/api/v1/functions?name=%%5Brest%%5D&host=%s",
           b);
  assert_int_equal(http(&c, "GET", path, out), 200);
  assert_null(tg_test_json(out, "rows.0"));

  /* The CLI asks the same. */
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
  const char *err = fleet_in_dir("cli.err");
  const char *cli_out = fleet_in_dir("cli.json");
  const char *argv[] = {"functions", "hot", "--min-share", "50%",
                        "--collector", addr, "--json", cli_out, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, argv, err), 0);
  snprintf(want, sizeof(want), "\"%s\"", a);
  assert_json(cli_out, "rows.0.host", want);
  assert_json(cli_out, "rows.0.total_share", "0.75");
  assert_null(tg_test_json(cli_out, "rows.1"));
  const char *bad_share[] = {"functions", "hot", "--min-share", "150%",
                             "--collector", addr, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, bad_share, err), 2);

  /* Refused. */
  const char *bad = fleet_in_dir("bad.json");
  assert_int_equal(http(&c, "GET", "/api/v1/functions", bad), 400);
  assert_int_equal(
      http(&c, "GET", "/api/v1/functions?name=hot&min_share=2", bad), 400);
  assert_int_equal(
      http(&c, "GET", "/api/v1/functions?name=hot&min_share=nan", bad), 400);
  assert_int_equal(http(&c, "GET", "/api/v1/functions?name=hot&by=x", bad),
                   400);
  assert_int_equal(
      http(&c, "GET", "/api/v1/functions?name=hot&after=zz.1.a", bad), 400);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A store of its own: no snapshot of the test before in its answers. */
static int shares_group_setup(void **state) {
  (void)state;
  return fleet_dir_create("shares");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(a_hosts_profile_of_a_snapshot),
  };
  const struct CMUnitTest shares_tests[] = {
      FLEET_TEST(function_shares_of_a_snapshot),
  };
  int failed = cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
  return failed + cmocka_run_group_tests_name("shares", shares_tests,
                                              shares_group_setup,
                                              fleet_dir_teardown);
}
