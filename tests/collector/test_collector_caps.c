/* What one hostile host can make tracegate-collector write and hold
 * (issue 59): two hosts of the fleet harness, the first behind the hostile
 * relay (tests/support/hostile_relay.h: a TLS man-in-the-middle with the
 * relay's certificate in front of the host's real relay), the collector
 * as a child (coll_e2e.h), with compress_level = 0 so that the hostile
 * relay can read and rewrite the replies.
 *
 * What is asserted:
 *  - a ReadBuffers stream that never ends fails that host with the
 *    per-host cap named, the other host's packets are stored, the earlier
 *    snapshot is still there, byte for byte;
 *  - a packet that never ends fails that host at the same cap;
 *  - a flood of sequence ids fails that host at the merge's bound, and
 *    the collector's resident memory stays within a generous bound;
 *  - a host that trickles (a small packet every 10 ms after its ring)
 *    fails at clone_min_rate, partial with its ring's packets, the other
 *    host's stored whole, within the test's HTTP wait (90 s: less than
 *    the snapshot's 120 s deadline, which alone ended it before);
 *  - the store's disk full mid-snapshot (a small tmpfs, in a mount
 *    namespace of the test's own, root only) fails that snapshot, leaves
 *    no partial file, keeps the earlier one, and once space is back the
 *    next snapshot is complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "coll_fixture.h"
#include "consumer/fleet/merge.h"
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "hostile_relay.h"
#include "test_notice.h"
#include "test_proc.h"

/* Two hosts, the first behind a hostile relay in |mode|. */
typedef struct caps_fleet {
  fleet_host_t h[2];
  tg_hostile_relay_t *hostile;
  collector_t c;
} caps_fleet_t;

static void caps_up(caps_fleet_t *f, tg_hostile_mode_t mode, const char *extra) {
  start_hosts(f->h, 2);
  f->hostile = fleet_hostile_start(&f->h[0], mode);
  char conf[512];
  snprintf(conf, sizeof(conf), "compress_level = 0\n%s", extra ? extra : "");
  write_config(f->h, 2, conf);
  collector_start(&f->c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&f->h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&f->c, 2, "tracing");
}

static void caps_down(caps_fleet_t *f) {
  collector_stop(&f->c);
  tg_hostile_relay_stop(f->hostile);
  for (size_t i = 0; i < 2; i++) fleet_host_stop(&f->h[i]);
}

static const char *host_field(const char *json, int i, const char *field) {
  char key[64];
  snprintf(key, sizeof(key), "hosts.%d.%s", i, field);
  const char *v = tg_test_json(json, key);
  assert_non_null(v);
  return v;
}

/* |json| is a partial snapshot in which only the host spelt |spec| failed,
 * its error naming |why|; returns that host's index. */
static int one_host_failed(const char *json, const char *spec, const char *why) {
  assert_json(json, "snapshot.state", "\"partial\"");
  assert_json(json, "snapshot.hosts_failed", "1");
  int bad = (int)snapshot_host_row(json, spec, 2);
  assert_string_equal(host_field(json, 1 - bad, "outcome"), "\"ok\"");
  assert_non_null(strstr(host_field(json, bad, "error"), why));
  return bad;
}

/* snapshot() of coll_e2e.h, with the collector's log printed when it
 * does not answer. */
static const char *caps_snapshot(caps_fleet_t *f, const char *json) {
  pid_t pid = http_spawn(&f->c, "POST", "/api/v1/snapshots?wait=1&reason=e2e",
                         json);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&f->h[i].p);
  int status = http_wait(pid, json);
  if (status != 200) collector_dump_log();
  assert_int_equal(status, 200);
  static char id[17];
  const char *v = tg_test_json(json, "snapshot.id");
  assert_non_null(v);
  snprintf(id, sizeof(id), "%.16s", v + 1);
  return id;
}

/* The whole of file |path| into a malloc'd buffer (*n bytes). */
/* Snapshot |id| downloads as the bytes of file |path|. */
static void assert_same_download(const collector_t *c, const char *id,
                                 const char *path) {
  char again[256];
  snprintf(again, sizeof(again), "%s", fleet_in_dir("again.pftrace"));
  download(c, id, again);
  size_t n1, n2;
  uint8_t *a = coll_slurp(path, &n1), *b = coll_slurp(again, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(a, b, n1);
  free(a);
  free(b);
}

/* A snapshot in PASS mode: complete, with both hosts' packets; its id
 * into |id| and its trace into fleet_in_dir(|trace|). */
static void first_snapshot(caps_fleet_t *f, char id[17], const char *trace) {
  fleet_commit_packets(&f->h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&f->h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("first.json");
  snprintf(id, 17, "%s", caps_snapshot(f, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  download(&f->c, id, fleet_in_dir(trace));
}

/* Snapshot |id|, downloaded into fleet_in_dir(|file|), holds values
 * |first|.. |first| + |n| - 1 of |tag|. */
static void assert_download_values(const collector_t *c, const char *id,
                                   const char *file, const char *tag,
                                   uint32_t first, size_t n) {
  const char *trace = fleet_in_dir(file);
  download(c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, tag, first, n);
  fleet_trace_free(&t);
}

/* VmRSS of |pid| in bytes. */
static uint64_t rss_bytes(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  uint64_t kb = 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1) break;
  fclose(f);
  assert_true(kb > 0);
  return kb * 1024;
}

static int group_setup(void **state) {
  (void)state;
  /* The collector's freed memory is not held back in ASan's quarantine
   * (256 MiB by default), so that its resident size is its live memory. */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[512];
  snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16", asan ? asan : "",
           asan && asan[0] ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  return fleet_dir_create("caps");
}

/* --- the per-host byte cap ---------------------------------------------- */

static void an_endless_read_fails_the_host_at_its_cap(void **state) {
  (void)state;
  caps_fleet_t f;
  /* Retention as tight as the issue's: a snapshot of the cap's size fits,
   * the earlier one beside it. */
  caps_up(&f, TG_HOSTILE_PASS, "retention_max_bytes = 16M\n");
  char id1[17], trace1[256];
  first_snapshot(&f, id1, "caps1.pftrace");
  snprintf(trace1, sizeof(trace1), "%s", fleet_in_dir("caps1.pftrace"));

  tg_hostile_relay_set_mode(f.hostile, TG_HOSTILE_ENDLESS_READ);
  fleet_commit_packets(&f.h[0].p, 1, "hostA", 6, 3);
  fleet_commit_packets(&f.h[1].p, 1, "hostB", 8, 2);
  const char *json = fleet_in_dir("endless.json");
  const char *id2 = caps_snapshot(&f, json);
  int bad = one_host_failed(json, f.h[0].spec, "snapshot_host_max_bytes");
  /* Its share stopped at the cap: 4 x the 1 MiB ring + 1 MiB. */
  assert_true(strtoull(host_field(json, bad, "bytes"), NULL, 10) <= 5u << 20);
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(f.hostile, &st);
  assert_true(st.endless_reads >= 1);

  /* The other host's packets are in it, and only the cap's worth of the
   * hostile one's. */
  const char *trace2 = fleet_in_dir("caps2.pftrace");
  download(&f.c, id2, trace2);
  fleet_trace_t t;
  fleet_trace_load(trace2, &t);
  fleet_trace_assert_values(&t, "hostB", 1, 9);
  assert_true(fleet_trace_count_tag(&t, "hostile") > 0);
  assert_true(fleet_trace_count_tag(&t, "hostile") * TG_HOSTILE_ENDLESS_PAD <=
              5u << 20);
  fleet_trace_free(&t);

  /* The earlier snapshot is still listed, and still the same bytes. */
  char path[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id1);
  const char *row = fleet_in_dir("row1.json");
  assert_int_equal(http(&f.c, "GET", path, row), 200);
  assert_json(row, "snapshot.state", "\"complete\"");
  assert_same_download(&f.c, id1, trace1);
  caps_down(&f);
}

/* A packet that never ends: the clone's reassembly stops at the cap, not
 * at the consumer's 64 MiB default. */
static void an_endless_packet_fails_the_host_at_its_cap(void **state) {
  (void)state;
  caps_fleet_t f;
  caps_up(&f, TG_HOSTILE_ENDLESS_PACKET, NULL);
  fleet_commit_packets(&f.h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&f.h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("packet.json");
  const char *id = caps_snapshot(&f, json);
  char cap[32];
  snprintf(cap, sizeof(cap), "%u", 5u << 20);
  one_host_failed(json, f.h[0].spec, cap);
  assert_download_values(&f.c, id, "packet.pftrace", "hostB", 1, 7);
  caps_down(&f);
}

/* --- the merge's bound on sequences -------------------------------------- */

static void a_sequence_flood_fails_the_host_and_memory_stays_bounded(
    void **state) {
  (void)state;
  caps_fleet_t f;
  /* A byte cap far away: the sequences' bound is what must stop it. */
  caps_up(&f, TG_HOSTILE_SEQ_FLOOD, "snapshot_host_max_bytes = 4G\n");
  uint64_t before = rss_bytes(f.c.pid);
  fleet_commit_packets(&f.h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&f.h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("flood.json");
  const char *id = caps_snapshot(&f, json);
  char bound[32];
  snprintf(bound, sizeof(bound), "%u", TG_MERGE_HOST_MAX_SEQS);
  one_host_failed(json, f.h[0].spec, bound);
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(f.hostile, &st);
  assert_true(st.forged_packets > TG_MERGE_HOST_MAX_SEQS);
  /* Generous: the snapshot's buffers and a host's map are a few MiB. */
  uint64_t after = rss_bytes(f.c.pid);
  if (after > before + (128u << 20))
    fail_msg("the collector grew from %" PRIu64 " to %" PRIu64 " bytes",
             before, after);
  assert_download_values(&f.c, id, "flood.pftrace", "hostB", 1, 7);
  caps_down(&f);
}

/* --- the rate floor ------------------------------------------------------------- */

/* On the collector's real clock: its clone_timeout of 6 s is the
 * window. A's ring is read, then its relay trickles; A fails with the
 * floor's code, partial with its ring's packets; B's are all stored. */
static void a_trickle_fails_the_host_at_the_rate_floor(void **state) {
  (void)state;
  caps_fleet_t f;
  caps_up(&f, TG_HOSTILE_TRICKLE, "clone_timeout = 6s\nclone_min_rate = 1M\n");
  fleet_commit_packets(&f.h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&f.h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("trickle.json");
  const char *id = caps_snapshot(&f, json);
  int bad = one_host_failed(json, f.h[0].spec,
                            tg_notice_tag(TG_N_COLLECTOR_HOST_TOO_SLOW));
  assert_string_equal(host_field(json, bad, "outcome"), "\"partial\"");
  assert_true(strtoull(host_field(json, bad, "bytes"), NULL, 10) > 0);
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(f.hostile, &st);
  assert_true(st.endless_reads >= 1);
  assert_true(st.forged_packets > 0); /* it trickled, it was not silent */
  const char *trace = fleet_in_dir("trickle.pftrace");
  download(&f.c, id, trace);
  fleet_trace_t t;
  fleet_trace_load(trace, &t);
  fleet_trace_assert_values(&t, "hostB", 1, 7);
  fleet_trace_assert_values(&t, "hostA", 1, 5);
  fleet_trace_free(&t);
  caps_down(&f);
}

/* --- a full disk --------------------------------------------------------------- */

/* Fills the file system of |dir| with |dir|/filler, but |keep| bytes. */
static void fill_disk(const char *dir, size_t keep) {
  char pad[512], filler[512];
  snprintf(pad, sizeof(pad), "%s/pad", dir);
  snprintf(filler, sizeof(filler), "%s/filler", dir);
  static uint8_t block[64 * 1024];
  int fd = open(pad, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  for (size_t n = 0; n < keep; n += sizeof(block))
    assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
  close(fd);
  fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  ssize_t w;
  while ((w = write(fd, block, sizeof(block))) > 0) {
  }
  assert_int_equal(errno, ENOSPC);
  close(fd);
  assert_int_equal(unlink(pad), 0);
}

static void a_full_disk_fails_the_snapshot_and_keeps_the_others(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("skipped: a tmpfs in a mount namespace of its own needs "
                  "root\n");
    skip();
  }
  /* The store on a small tmpfs, seen by this process and its children. */
  char store[256];
  snprintf(store, sizeof(store), "%s", fleet_in_dir("store"));
  assert_int_equal(mkdir(store, 0755) == 0 || errno == EEXIST, 1);
  if (unshare(CLONE_NEWNS) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", store, "tmpfs", 0, "size=16m") != 0) {
    /* Root without CAP_SYS_ADMIN (a container): no mounts. */
    print_message("skipped: cannot mount a tmpfs in a mount namespace of "
                  "its own: %s\n", strerror(errno));
    skip();
  }

  caps_fleet_t f;
  caps_up(&f, TG_HOSTILE_PASS, NULL);
  char id1[17], trace1[256];
  first_snapshot(&f, id1, "disk1.pftrace");
  snprintf(trace1, sizeof(trace1), "%s", fleet_in_dir("disk1.pftrace"));

  /* Room for the catalog's rows, not for the next file: a host whose
   * read never ends writes past it long before its cap (5 MiB). */
  fill_disk(store, 256 * 1024);
  tg_hostile_relay_set_mode(f.hostile, TG_HOSTILE_ENDLESS_READ);
  const char *json = fleet_in_dir("full.json");
  caps_snapshot(&f, json);
  assert_json(json, "snapshot.state", "\"failed\"");
  assert_int_equal(coll_count_entries(store, "tmp"), 0);

  /* The earlier snapshot is intact; once there is room again, the next
   * one is complete. */
  assert_same_download(&f.c, id1, trace1);
  char filler[512];
  snprintf(filler, sizeof(filler), "%s/filler", store);
  assert_int_equal(unlink(filler), 0);
  tg_hostile_relay_set_mode(f.hostile, TG_HOSTILE_PASS);
  fleet_commit_packets(&f.h[0].p, 1, "hostA", 6, 2);
  json = fleet_in_dir("after.json");
  const char *id3 = caps_snapshot(&f, json);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_download_values(&f.c, id3, "disk3.pftrace", "hostA", 1, 7);
  caps_down(&f);
  assert_int_equal(umount2(store, MNT_DETACH), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(an_endless_read_fails_the_host_at_its_cap),
      FLEET_TEST(an_endless_packet_fails_the_host_at_its_cap),
      FLEET_TEST(a_sequence_flood_fails_the_host_and_memory_stays_bounded),
      FLEET_TEST(a_trickle_fails_the_host_at_the_rate_floor),
      FLEET_TEST(a_full_disk_fails_the_snapshot_and_keeps_the_others),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
