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
 *
 * And a host against its peers (GET .../profile/diff?host=H, `tracegate
 * snapshot ID --diff H`): host A (hot x3, idle x1) against host B (hot,
 * idle x2, other): hot first, at A's 75% against B's 25%, with both
 * sample counts; under the default minimum (100 samples) A is marked too
 * few and B left out; pprof and its base; the CLI writes the API's bytes;
 * bad arguments are refused. Against its history (against=history&n=N):
 * host A in a second snapshot against itself in the first.
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
#include "common/json.h"
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

/* The gzipped profile.proto at |path|, unpacked (the caller frees it with
 * perftools__profiles__profile__free_unpacked). */
static Perftools__Profiles__Profile *read_profile(const char *path) {
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
  free(raw);
  free(gz);
  return p;
}

/* The profile at |path| with |types| sample types: its samples' first
 * values summed, and whether a function is named |fn|. */
static int64_t profile_total(const char *path, size_t types, const char *fn,
                             bool *named) {
  Perftools__Profiles__Profile *p = read_profile(path);
  assert_int_equal(p->n_sample_type, types);
  int64_t total = 0;
  for (size_t i = 0; i < p->n_sample; i++) total += p->sample[i]->value[0];
  *named = false;
  for (size_t i = 0; i < p->n_function; i++) {
    int64_t s = p->function[i]->name;
    assert_true(s >= 0 && (size_t)s < p->n_string_table);
    if (!strcmp(p->string_table[s], fn)) *named = true;
  }
  perftools__profiles__profile__free_unpacked(p, NULL);
  return total;
}

/* A host's /profile: samples/count first, then cpu/nanoseconds. */
static int64_t profile_samples(const char *path, const char *fn, bool *named) {
  return profile_total(path, 2, fn, named);
}

/* A diff's pprof: one sample type, the host's CPU ns. */
static int64_t diff_profile_total(const char *path, const char *fn,
                                  bool *named) {
  return profile_total(path, 1, fn, named);
}

/* tracegate-perf's packets of a host, committed as one chunk of |writer|
 * (a sequence of its own): a defaults packet, then |hot| samples
 * main>work>hot, |idle| main>idle and |other| main>other. */
static void commit_perf_on(raw_producer_t *p, uint16_t writer, int hot,
                           int idle, int other) {
  static const tg_perf_emit_mapping_t app = {
      .start = 0x400000, .end = 0x500000, .path = "/usr/bin/app"};
  const tg_perf_emit_frame_t st_hot[] = {
      {&app, 0x100, "main", 0}, {&app, 0x200, "work", 0}, {&app, 0x300, "hot", 0}};
  const tg_perf_emit_frame_t st_idle[] = {
      {&app, 0x100, "main", 0}, {&app, 0x400, "idle", 0}};
  const tg_perf_emit_frame_t st_other[] = {
      {&app, 0x100, "main", 0}, {&app, 0x500, "other", 0}};
  static uint8_t pk[8][512];
  int n = 1 + hot + idle + other;
  assert_true(n <= 8);
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  const uint8_t *frags[8];
  size_t lens[8];
  for (int i = 0; i < n; i++) {
    tg_pbw_t w;
    tg_pbw_init(&w, pk[i], sizeof(pk[i]), NULL, NULL);
    if (i == 0) {
      tg_perf_timebase_desc_t tb = {.frequency = 100, .counter = 1,
                                    .builtin_clock = 6};
      tg_perf_emit_defaults(&w, 1000, &tb);
    } else {
      bool is_hot = i <= hot, is_idle = !is_hot && i <= hot + idle;
      tg_perf_emit_sample_t s = {
          .ts = 2000 + (uint64_t)i, .pid = 7, .tid = 7, .cpu_mode = 2,
          .timebase_count = 1,
          .frames = is_hot ? st_hot : is_idle ? st_idle : st_other,
          .n_frames = is_hot ? 3 : 2};
      assert_int_equal(tg_perf_emit_sample(e, &w, &s), 0);
    }
    assert_int_equal(tg_pbw_error(&w), 0);
    frags[i] = pk[i];
    lens[i] = (size_t)tg_pbw_written(&w);
  }
  tg_perf_emitter_free(e);
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_1, writer, 0,
                                            0, frags, lens, (unsigned)n),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

static void commit_perf_mix(raw_producer_t *p, int hot, int idle, int other) {
  commit_perf_on(p, 1, hot, idle, other);
}

/* Host A's: main>work>hot x3, main>idle x1. */
static void commit_perf(raw_producer_t *p) { commit_perf_mix(p, 3, 1, 0); }

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

static json_t *load(const char *path) {
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) fail_msg("%s: %s", path, err.text);
  return j;
}

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  assert_true(json_is_number(v));
  return json_number_value(v);
}

static void a_host_against_its_peers(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  commit_perf_mix(&h[0].p, 3, 1, 0);
  commit_perf_mix(&h[1].p, 1, 2, 1);
  const char *json = fleet_in_dir("snap.json");
  char id[32], a[320], path[1024], dj[512], few[512], hp[512], bp[512];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 2, json));
  snprintf(a, sizeof(a), "%s", h[0].spec);
  snprintf(dj, sizeof(dj), "%s", fleet_in_dir("diff.json"));
  snprintf(few, sizeof(few), "%s", fleet_in_dir("few.json"));
  snprintf(hp, sizeof(hp), "%s", fleet_in_dir("diff.pb.gz"));
  snprintf(bp, sizeof(bp), "%s", fleet_in_dir("peers.pb.gz"));

  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile/diff?host=%s&min_samples=1", id, a);
  assert_int_equal(http(&c, "GET", path, dj), 200);
  json_t *d = load(dj);
  json_t *f0 = json_array_get(json_object_get(d, "functions"), 0);
  assert_string_equal(json_string_value(json_object_get(f0, "name")), "hot");
  assert_true(num(f0, "host_share") == 0.75);
  assert_true(num(f0, "peers_median_share") == 0.25);
  assert_true(num(f0, "diff") == 0.5);
  assert_true(num(f0, "host_samples") == 3);
  assert_true(num(f0, "peers_samples") == 1);
  assert_true(num(json_object_get(d, "peers"), "count") == 1);
  assert_true(json_is_false(
      json_object_get(json_object_get(d, "host"), "too_few_samples")));
  assert_true(json_array_size(json_object_get(d, "tree")) >= 6);
  json_decref(d);

  /* Under the default minimum: A marked, B left out of the median. */
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile/diff?host=%s",
           id, a);
  assert_int_equal(http(&c, "GET", path, few), 200);
  d = load(few);
  assert_true(json_is_true(
      json_object_get(json_object_get(d, "host"), "too_few_samples")));
  assert_true(num(json_object_get(d, "peers"), "count") == 0);
  assert_true(num(json_object_get(d, "peers"), "too_few_samples") == 1);
  json_decref(d);

  /* pprof: A's call tree (4 samples at 100 Hz: 40 ms) and the base. */
  bool named;
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile/diff?host=%s&min_samples=1&"
           "format=pprof", id, a);
  assert_int_equal(http(&c, "GET", path, hp), 200);
  assert_int_equal(diff_profile_total(hp, "hot", &named), 40000000);
  assert_true(named);
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile/diff?host=%s&min_samples=1&"
           "format=pprof&base=1", id, a);
  assert_int_equal(http(&c, "GET", path, bp), 200);
  assert_int_equal(diff_profile_total(bp, "other", &named), 40000000);
  assert_true(named);

  /* The CLI writes the API's bytes. */
  char addr[64], cli_j[512];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
  snprintf(cli_j, sizeof(cli_j), "%s", fleet_in_dir("cli-diff.json"));
  const char *err = fleet_in_dir("cli.err");
  const char *diff_argv[] = {"snapshot", id, "--diff", a, "--min-samples",
                             "1", "--collector", addr, "-o", cli_j, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, diff_argv, err), 0);
  assert_same_file(cli_j, dj);
  const char *both[] = {"snapshot", id, "--diff", a, "--host", a,
                        "--collector", addr, "-o", cli_j, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, both, err), 2);

  /* Refused. */
  const char *bad = fleet_in_dir("bad.json");
  const char *refused[][2] = {
      {"?host=nope", "404"},
      {"", "400"},
      {"?host=%s&base=1", "400"},
      {"?host=%s&format=xml", "400"},
      {"?host=%s&min_samples=0", "400"},
      {"?host=%s&min_samples=x1", "400"},
      {"?host=%s&base=2&format=pprof", "400"},
      {"?host=%s&what=1", "400"},
  };
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    char q[512];
    snprintf(q, sizeof(q), refused[i][0], a);
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile/diff%s", id, q);
    assert_int_equal(http(&c, "GET", path, bad), atoi(refused[i][1]));
  }
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

/* against=history: host A in snapshot 2 against itself in snapshot 1
 * (hot x3, idle x1: 75% hot), after a second sequence of hot x0, idle x1,
 * other x2 (whatever snapshot 2 keeps of the first, hot's share falls). */
static void a_host_against_its_history(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  commit_perf_mix(&h[0].p, 3, 1, 0);
  char id1[32], id2[32], a[320], path[1024], hj[512], bad[512];
  snprintf(id1, sizeof(id1), "%s", snapshot(&c, h, 2, fleet_in_dir("s1.json")));
  commit_perf_on(&h[0].p, 2, 0, 1, 2);
  snprintf(id2, sizeof(id2), "%s", snapshot(&c, h, 2, fleet_in_dir("s2.json")));
  snprintf(a, sizeof(a), "%s", h[0].spec);
  snprintf(hj, sizeof(hj), "%s", fleet_in_dir("history.json"));
  snprintf(bad, sizeof(bad), "%s", fleet_in_dir("bad.json"));
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile/diff?host=%s&against=history&n=5&"
           "min_samples=1", id2, a);
  assert_int_equal(http(&c, "GET", path, hj), 200);
  json_t *d = load(hj);
  assert_string_equal(json_string_value(json_object_get(d, "against")),
                      "history");
  json_t *ids = json_object_get(d, "snapshots");
  assert_int_equal(json_array_size(ids), 1);
  assert_string_equal(json_string_value(json_array_get(ids, 0)), id1);
  assert_true(num(d, "snapshots_skipped") == 0);
  assert_true(num(json_object_get(d, "peers"), "count") == 1);
  json_t *f0 = json_array_get(json_object_get(d, "functions"), 0);
  assert_string_equal(json_string_value(json_object_get(f0, "name")), "hot");
  assert_true(num(f0, "peers_median_share") == 0.75);
  assert_true(num(f0, "peers_samples") == 3);
  assert_true(num(f0, "diff") < -0.3);
  json_decref(d);
  /* `snapshot ID --diff H --history N` writes the same bytes. */
  char addr[64], cli_h[512];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.port);
  snprintf(cli_h, sizeof(cli_h), "%s", fleet_in_dir("cli-history.json"));
  const char *argv[] = {"snapshot", id2, "--diff", a, "--history", "5",
                        "--min-samples", "1", "--collector", addr, "-o",
                        cli_h, NULL};
  assert_int_equal(coll_run_cli(TRACEGATE_CLI_PATH, argv,
                                fleet_in_dir("cli.err")), 0);
  assert_same_file(cli_h, hj);
  /* The first snapshot has no history: nothing to compare with. */
  snprintf(path, sizeof(path),
           "/api/v1/snapshots/%s/profile/diff?host=%s&against=history", id1,
           a);
  assert_int_equal(http(&c, "GET", path, hj), 200);
  d = load(hj);
  assert_int_equal(json_array_size(json_object_get(d, "snapshots")), 0);
  assert_true(num(json_object_get(d, "peers"), "count") == 0);
  json_decref(d);
  const char *refused[] = {"against=history&n=0", "against=history&n=21",
                           "n=2", "against=yesterday", "against=history&n=x"};
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/profile/diff?host=%s&%s",
             id2, a, refused[i]);
    assert_int_equal(http(&c, "GET", path, bad), 400);
  }
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
      FLEET_TEST(a_host_against_its_peers),
      FLEET_TEST(a_host_against_its_history),
  };
  const struct CMUnitTest shares_tests[] = {
      FLEET_TEST(function_shares_of_a_snapshot),
  };
  int failed = cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
  return failed + cmocka_run_group_tests_name("shares", shares_tests,
                                              shares_group_setup,
                                              fleet_dir_teardown);
}
