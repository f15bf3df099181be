/* `tracegate snapshot check ID` end to end: two hosts of the fleet
 * harness, the collector as a child (coll_e2e.h), Perfetto's trace
 * processor (PERFETTO_BIN; the test is skipped, saying so, without it).
 *
 * What is asserted: a good snapshot imports whole (exit 0, the parts not
 * checked); a snapshot where one host's part holds a packet trace
 * processor refuses (the stored file and its host index rewritten as the
 * merge would have written them had the packet passed: the packet
 * appended with the host's machine id, the host's extents grown by it)
 * fails whole, and the check names that host and only it, with trace
 * processor's error, as a problem {kind, code, why} (exit 3); a trace
 * processor that cannot be started is exit 1, a bad id exit 2.
 *
 * The collector's own check (check_trace_processor), with a stand-in for
 * trace processor that refuses what holds one host's marker: the problem
 * lands in that host's row alone, as the API shows it, with the uid the
 * check ran as (65534: the collector's check runner switched to it).
 *
 * The collector as another uid than root (setpriv; as root only): with
 * ambient CAP_SETUID and CAP_SETGID (the systemd unit's) the check still
 * runs as 65534, in no group, with no capability, as a stand-in that says
 * its ids and capabilities (capsh) shows in the problem's why; without
 * them it runs as the collector's uid, and the problem's notice (TG-5074)
 * and the log say so.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "collector/store/snap_index.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "test_proc.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("snapcheck");
}

/* `tracegate snapshot check ID` with |extra| args (NULL-terminated): its
 * exit status; stderr into |err|. */
static int cli_check(const collector_t *c, const char *id,
                     const char *const *extra, const char *err) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->port);
  const char *argv[20] = {"snapshot", "check", id, "--collector", addr};
  size_t n = 5;
  for (; *extra && n + 1 < sizeof(argv) / sizeof(argv[0]); extra++)
    argv[n++] = *extra;
  argv[n] = NULL;
  int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(efd >= 0);
  pid_t pid =
      tg_test_spawn_cli(TRACEGATE_CLI_PATH, argv, TG_TEST_FD_DEVNULL, efd);
  close(efd);
  assert_true(pid > 0);
  return tg_test_exit_code(tg_test_reap(pid, 120000));
}

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* One Trace.packet (field 1) holding a TracePacket that trace processor
 * v50.1 refuses the whole file for: an FtraceEventBundle on cpu 0 with
 * ftrace_clock GLOBAL and a previous_bundle_end_timestamp but no
 * ftrace_timestamp ("No path from clock ... to 6"); on sequence 7 of
 * machine |machine|. Returns its length. */
static size_t bad_packet(uint8_t *out, uint32_t machine) {
  uint8_t pk[64], bundle[32];
  size_t b = 0, n = 0;
  bundle[b++] = 0x08; /* cpu */
  bundle[b++] = 0;
  bundle[b++] = 0x28; /* ftrace_clock */
  bundle[b++] = 2;    /* FTRACE_CLOCK_GLOBAL */
  bundle[b++] = 0x50; /* previous_bundle_end_timestamp */
  b += put_varint(bundle + b, 5000);
  pk[n++] = 0x0a; /* ftrace_events */
  pk[n++] = (uint8_t)b;
  memcpy(pk + n, bundle, b);
  n += b;
  pk[n++] = 0x90; /* machine_id (98), varint */
  pk[n++] = 0x06;
  n += put_varint(pk + n, machine);
  pk[n++] = 0x50; /* trusted_packet_sequence_id (10) */
  n += put_varint(pk + n, ((uint64_t)machine << 16) | 7);
  size_t at = 0;
  out[at++] = 0x0a;
  at += put_varint(out + at, n);
  memcpy(out + at, pk, n);
  return at + n;
}

/* The machine id of host |spec|'s packets in snapshot |id| (its part). */
static uint32_t machine_of(const collector_t *c, const char *id,
                           const char *spec) {
  char path[1024];
  const char *part = fleet_in_dir("machine.pftrace");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, spec);
  assert_int_equal(http(c, "GET", path, part), 200);
  fleet_trace_t t;
  fleet_trace_load(part, &t);
  uint32_t m = 0;
  for (size_t i = 0; i < t.n && !m; i++)
    if (t.pk[i]->has_machine_id) m = t.pk[i]->machine_id;
  fleet_trace_free(&t);
  assert_true(m > 0);
  return m;
}

/* Appends |bad|'s bytes to the stored trace of |id| as host |spec|'s, and
 * rewrites the snapshot's host index to say so. */
static void spoil_host(const char *id, const char *spec, const uint8_t *bad,
                       size_t bad_n) {
  char trace[512], index[512], tmp[600];
  snprintf(trace, sizeof(trace), "%s/snapshots/%s.pftrace",
           fleet_in_dir("store"), id);
  snprintf(index, sizeof(index), "%s/snapshots/%s.index",
           fleet_in_dir("store"), id);
  snprintf(tmp, sizeof(tmp), "%s.new", index);
  int tfd = open(trace, O_RDWR);
  assert_true(tfd >= 0);
  struct stat st;
  assert_int_equal(fstat(tfd, &st), 0);
  uint64_t size = (uint64_t)st.st_size;
  int ifd = open(index, O_RDONLY);
  assert_true(ifd >= 0);
  tg_coll_index_t ix;
  assert_int_equal(tg_coll_index_read(ifd, size, &ix), 0);
  tg_coll_index_builder_t *b = tg_coll_index_builder_new(ix.n_hosts);
  assert_non_null(b);
  tg_coll_index_head(b, ix.head_bytes);
  size_t spoiled = ix.n_hosts;
  for (size_t h = 0; h < ix.n_hosts; h++) {
    assert_int_equal(tg_coll_index_name(b, h, ix.hosts[h].name), 0);
    if (!strcmp(ix.hosts[h].name, spec)) spoiled = h;
  }
  assert_true(spoiled < ix.n_hosts);
  /* Every host's extents in file order (one host's plan at a time, each
   * in order; the builder takes each host's own in order). */
  for (size_t h = 0; h < ix.n_hosts; h++) {
    tg_coll_extent_t *ext = NULL;
    size_t n_ext = 0;
    uint64_t bytes = 0;
    assert_int_equal(tg_coll_index_plan(&ix, ifd, &h, 1, &ext, &n_ext, &bytes),
                     0);
    /* The plan's first extent is the head. */
    for (size_t k = 0; k < n_ext; k++)
      if (ext[k].off >= ix.head_bytes)
        tg_coll_index_add(b, h, ext[k].off, ext[k].len);
    free(ext);
  }
  close(ifd);
  assert_int_equal(pwrite(tfd, bad, bad_n, (off_t)size), (ssize_t)bad_n);
  close(tfd);
  tg_coll_index_add(b, spoiled, size, bad_n);
  assert_null(tg_coll_index_why(b));
  int nfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0640);
  assert_true(nfd >= 0);
  assert_int_equal(tg_coll_index_write(b, nfd, size + bad_n), 0);
  close(nfd);
  assert_int_equal(rename(tmp, index), 0);
  tg_coll_index_builder_free(b);
  tg_coll_index_free(&ix);
}

/* Until the collector's log holds |text| (bounded). */
static void wait_log(const char *text) {
  for (int i = 0; i < 600; i++) {
    FILE *f = fopen(fleet_in_dir("collector.log"), "r");
    if (f) {
      static char buf[1 << 20];
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      buf[n] = 0;
      if (strstr(buf, text)) return;
    }
    usleep(100 * 1000);
  }
  collector_dump_log();
  fail_msg("the collector's log never said '%s'", text);
}

static void check_names_the_host_that_fails(void **state) {
  (void)state;
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "[ SKIPPED  ] snapshot check needs Perfetto's trace "
                    "processor: PERFETTO_BIN is not set\n");
    return;
  }
  char tp[1024];
  snprintf(tp, sizeof(tp), "%s/trace_processor_shell", bin);
  fleet_host_t h[2];
  collector_t c;
  /* The collector checks it too, with Perfetto's trace processor. */
  char extra[1100];
  snprintf(extra, sizeof(extra), "check_trace_processor = %s\n", tp);
  fleet_up(h, &c, extra);
  fleet_commit_packets(&h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("snap.json");
  char id[32], a[320], b[320];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 2, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  snprintf(a, sizeof(a), "%s", h[0].spec);
  snprintf(b, sizeof(b), "%s", h[1].spec);
  char out[512], err[512];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("check.json"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("check.err"));

  /* The collector's verdict: it imports (its log, by code and id). */
  char said[64];
  snprintf(said, sizeof(said), "[TG-5073] snapshot %s", id);
  wait_log(said);
  /* A good snapshot imports whole: the parts are not downloaded. */
  const char *args[] = {"--trace-processor", tp, "--json", out, NULL};
  assert_int_equal(cli_check(&c, id, args, err), 0);
  char want[400];
  snprintf(want, sizeof(want), "\"%s\"", id);
  assert_json(out, "id", want);
  assert_json(out, "whole.imports", "true");
  assert_json(out, "parts_checked", "false");
  assert_json(out, "failing", "[]");

  /* Host B's part spoiled: the whole file fails, B's part alone fails,
   * A's imports. */
  uint8_t bad[64];
  spoil_host(id, b, bad, bad_packet(bad, machine_of(&c, id, b)));
  assert_int_equal(cli_check(&c, id, args, err), 3);
  assert_json(out, "whole.imports", "false");
  assert_json(out, "whole.failure", "\"error\"");
  assert_json(out, "parts_checked", "true");
  snprintf(want, sizeof(want), "[\"%s\"]", b);
  assert_json(out, "failing", want);
  snprintf(want, sizeof(want), "\"%s\"", a);
  size_t ia = strcmp(tg_test_json(out, "hosts.0.host"), want) ? 1 : 0;
  char key[64];
  snprintf(key, sizeof(key), "hosts.%zu.host", ia);
  snprintf(want, sizeof(want), "\"%s\"", a);
  assert_json(out, key, want);
  snprintf(key, sizeof(key), "hosts.%zu.imports", ia);
  assert_json(out, key, "true");
  snprintf(key, sizeof(key), "hosts.%zu.host", 1 - ia);
  snprintf(want, sizeof(want), "\"%s\"", b);
  assert_json(out, key, want);
  snprintf(key, sizeof(key), "hosts.%zu.imports", 1 - ia);
  assert_json(out, key, "false");
  snprintf(key, sizeof(key), "hosts.%zu.problem.kind", 1 - ia);
  assert_json(out, key, "\"import\"");
  snprintf(key, sizeof(key), "hosts.%zu.problem.code", 1 - ia);
  assert_json(out, key, "\"TG-2082\"");
  /* trace processor's own words, without the check's temporary path. */
  snprintf(key, sizeof(key), "hosts.%zu.problem.why", 1 - ia);
  const char *why = tg_test_json(out, key);
  assert_non_null(why);
  assert_non_null(strstr(why, "No path from clock"));
  assert_null(strstr(why, "/tmp/"));

  /* No trace processor to run: the check cannot be made. */
  const char *none[] = {"--trace-processor", "/nonexistent/tp", NULL};
  assert_int_equal(cli_check(&c, id, none, err), 1);
  assert_int_equal(cli_check(&c, "42", none, err), 2);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* Writes an executable stand-in for trace_processor_shell to |path|: it
 * refuses, as trace processor words it, any file that holds |marker|, and
 * imports the rest. */
static void fake_tp(const char *path, const char *marker) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n"
             "if grep -q '%s' \"$3\"; then\n"
             "  printf 'Loading trace: 0.00 MBCould not read trace file "
             "(path: %%s): refused for %s\\n' \"$3\" >&2; exit 1\n"
             "fi\n"
             "exit 0\n", marker, marker);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(path, 0755), 0);
}

/* Host row |row|'s first problem in |got|: its |field| is |want| (JSON
 * text), or, with |want| NULL, it has no such field. */
static void assert_problem(const char *got, size_t row, const char *field,
                           const char *want) {
  char key[96];
  if (want) {
    snprintf(key, sizeof(key), "hosts.%zu.problems.0.%s", row, field);
    assert_json(got, key, want);
    return;
  }
  snprintf(key, sizeof(key), "hosts.%zu.problems.0", row);
  char quoted[64];
  snprintf(quoted, sizeof(quoted), "\"%s\"", field);
  const char *p = tg_test_json(got, key);
  assert_non_null(p);
  assert_null(strstr(p, quoted));
}

/* GET /api/v1/snapshots/ID into |out| until host |spec|'s problems are
 * not empty (the check runs after the snapshot is stored); its row's
 * index. */
static size_t wait_problems(const collector_t *c, const char *id,
                            const char *spec, const char *out) {
  char path[128], key[64];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s", id);
  for (int i = 0; i < 600; i++) {
    assert_int_equal(http(c, "GET", path, out), 200);
    size_t row = snapshot_host_row(out, spec, 2);
    snprintf(key, sizeof(key), "hosts.%zu.problems", row);
    const char *got = tg_test_json(out, key);
    if (got && strcmp(got, "[]") && strcmp(got, "null")) return row;
    usleep(100 * 1000);
  }
  fail_msg("host %s of snapshot %s got no problem", spec, id);
  return 0;
}

/* check_trace_processor: the collector imports each stored snapshot and,
 * when it fails, each host's part, and records the problem in the row of
 * the host whose part fails (and only there), for the API and the page. */
static void the_collector_records_the_host_that_fails(void **state) {
  (void)state;
  char tp[512], extra[700], tp_dir[256];
  /* The check runs as another user (tp_import.h): its program lies in a
   * directory that user may enter. */
  assert_int_equal(tg_test_mkdtemp(tp_dir, sizeof(tp_dir), "faketp"), 0);
  assert_int_equal(tg_test_other_user_dir(tp_dir, 0755), 0);
  snprintf(tp, sizeof(tp), "%s/fake_tp.sh", tp_dir);
  fake_tp(tp, "spoilB");
  snprintf(extra, sizeof(extra), "check_trace_processor = %s\n"
           "check_timeout = 60s\ncheck_memory = 1G\n", tp);
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, extra);
  fleet_commit_packets(&h[0].p, 0, "goodA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "spoilB", 1, 7);
  const char *json = fleet_in_dir("snap.json");
  char id[32], b[320], key[64];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 2, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  snprintf(b, sizeof(b), "%s", h[1].spec);
  const char *got = fleet_in_dir("got.json");
  size_t rb = wait_problems(&c, id, b, got);
  assert_problem(got, rb, "kind", "\"import\"");
  assert_problem(got, rb, "code", "\"TG-5070\"");
  assert_problem(got, rb, "why", "\"trace processor: refused for spoilB\"");
  /* Root's check runner switched to 65534: nothing to notice. */
  if (!tg_test_other_user_unavailable()) {
    assert_problem(got, rb, "uid", "65534");
    assert_problem(got, rb, "notice", NULL);
  }
  snprintf(key, sizeof(key), "hosts.%zu.problems", 1 - rb);
  assert_json(got, key, "[]");
  /* The state is the hosts' delivery's: the check adds a problem only. */
  assert_json(got, "snapshot.state", "\"complete\"");
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
  tg_test_rm_rf(tp_dir);
}

/* The uid the collector runs as in the tests below: not root, not 65534. */
#define COLLECTOR_UID 4243

static uid_t g_owner;

static int chown_one(const char *path, const struct stat *st, int flag,
                     struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return lchown(path, g_owner, g_owner) == 0 ? 0 : -1;
}

/* The fleet directory and all below it to |uid| (the collector's files
 * are its own; the test, root, reaches them still). */
static void fleet_dir_owner(uid_t uid) {
  g_owner = uid;
  assert_int_equal(nftw(fleet_in_dir("."), chown_one, 16, FTW_PHYS), 0);
}

/* Process |pid|'s capability set |which| ("CapEff: ..."), as /proc shows
 * it (16 hex digits), into |out|; "" when there is no such line. */
static void cap_set_of(pid_t pid, const char *which, char *out, size_t cap) {
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
  out[0] = 0;
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = strlen(which);
  while (fgets(line, sizeof(line), f))
    if (!strncmp(line, which, n) && line[n] == ':')
      snprintf(out, cap, "%.16s", line + n + 2);
  fclose(f);
}

/* The collector gave up every capability; its one child, the check
 * runner, kept CAP_SETUID and CAP_SETGID (0xc0) alone, none to pass on. */
static void assert_caps_split(pid_t collector) {
  static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapAmb"};
  char got[32];
  for (size_t i = 0; i < 4; i++) {
    cap_set_of(collector, sets[i], got, sizeof(got));
    assert_string_equal(got, "0000000000000000");
  }
  char path[96], kids[64] = "";
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)collector,
           (int)collector);
  FILE *f = fopen(path, "r");
  if (!f) {
    print_message("note: no %s (CONFIG_PROC_CHILDREN): the runner's "
                  "capabilities are not looked at\n", path);
    return;
  }
  size_t n = fread(kids, 1, sizeof(kids) - 1, f);
  fclose(f);
  kids[n] = 0;
  pid_t runner = (pid_t)atoi(kids);
  assert_true(runner > 0);
  static const char *const want[] = {"0000000000000000", "00000000000000c0",
                                     "00000000000000c0", "0000000000000000"};
  for (size_t i = 0; i < 4; i++) {
    cap_set_of(runner, sets[i], got, sizeof(got));
    assert_string_equal(got, want[i]);
  }
}

static const char *first_program(const char *a, const char *b) {
  return access(a, X_OK) == 0 ? a : access(b, X_OK) == 0 ? b : NULL;
}

/* The collector as COLLECTOR_UID, started by setpriv with ambient
 * CAP_SETUID and CAP_SETGID when |caps|, and a stand-in for trace
 * processor that refuses every file saying its ids and capabilities: the
 * first host's problem, in |got|; its row's index. */
static size_t check_as_another_uid(bool caps, char *id, size_t id_cap,
                                   const char *got) {
  const char *setpriv = first_program("/usr/bin/setpriv", "/bin/setpriv");
  const char *capsh = first_program("/usr/sbin/capsh", "/sbin/capsh");
  if (!setpriv || !capsh) {
    print_message("skipped: the collector as another uid needs setpriv "
                  "(util-linux) and capsh (libcap2-bin): %s is missing\n",
                  setpriv ? "capsh" : "setpriv");
    skip();
  }
  char tp_dir[256], tp[512], bin[512], extra[800], body[600];
  assert_int_equal(tg_test_mkdtemp(tp_dir, sizeof(tp_dir), "faketp"), 0);
  assert_int_equal(tg_test_other_user_dir(tp_dir, 0755), 0);
  /* In trace processor's sandbox /proc is out of reach: capsh asks the
   * kernel (capget) for the capabilities ("=" for none). */
  snprintf(body, sizeof(body),
           "printf 'ids %%s:%%s:%%s caps %%s\\n' \"$(id -u)\" \"$(id -g)\" "
           "\"$(id -G)\" \"$(%s --print | sed -n 's/^Current: *//p')\" >&2\n"
           "exit 1", capsh);
  assert_int_equal(tg_test_write_script(tp_dir, "ids_tp.sh", body, tp,
                                        sizeof(tp)), 0);
  /* The build tree may lie where that uid cannot go. */
  assert_int_equal(tg_test_copy_program(TRACEGATE_COLLECTOR_PATH, tp_dir, bin,
                                        sizeof(bin)), 0);
  snprintf(extra, sizeof(extra), "check_trace_processor = %s\n"
           "check_timeout = 60s\ncheck_memory = 1G\n", tp);
  fleet_host_t h[2];
  collector_t c;
  start_hosts(h, 2);
  write_config(h, 2, extra);
  fleet_dir_owner(COLLECTOR_UID);
  char uid[32];
  snprintf(uid, sizeof(uid), "%d", COLLECTOR_UID);
  const char *with_caps[] = {setpriv, "--reuid", uid, "--regid", uid,
                             "--clear-groups", "--inh-caps=+setuid,+setgid",
                             "--ambient-caps=+setuid,+setgid", "--", NULL};
  const char *without[] = {setpriv, "--reuid", uid, "--regid", uid,
                           "--clear-groups", "--inh-caps=-all", "--", NULL};
  collector_start_wrapped(&c, caps ? with_caps : without, bin, NULL);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(&c, 2, "tracing");
  if (caps) assert_caps_split(c.pid);
  fleet_commit_packets(&h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("snap.json");
  snprintf(id, id_cap, "%s", snapshot(&c, h, 2, json));
  size_t row = wait_problems(&c, id, h[0].spec, got);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
  fleet_dir_owner(0);
  tg_test_rm_rf(tp_dir);
  return row;
}

static void a_collector_not_root_checks_as_nobody(void **state) {
  (void)state;
  TG_TEST_REQUIRE_OTHER_USER();
  char got[512], id[32];
  snprintf(got, sizeof(got), "%s", fleet_in_dir("got.json"));
  size_t row = check_as_another_uid(true, id, sizeof(id), got);
  assert_problem(got, row, "code", "\"TG-5070\"");
  assert_problem(got, row, "uid", "65534");
  /* Its own ids, no group, no capability. */
  assert_problem(got, row, "why",
                 "\"trace processor: ids 65534:65534:65534 caps =\"");
  assert_problem(got, row, "notice", NULL);
}

static void a_collector_without_setuid_says_it_kept_its_uid(void **state) {
  (void)state;
  TG_TEST_REQUIRE_OTHER_USER();
  char got[512], id[32], want[128];
  snprintf(got, sizeof(got), "%s", fleet_in_dir("got.json"));
  size_t row = check_as_another_uid(false, id, sizeof(id), got);
  snprintf(want, sizeof(want), "%d", COLLECTOR_UID);
  assert_problem(got, row, "uid", want);
  assert_problem(got, row, "notice", "\"TG-5074\"");
  /* It ran all the same, sandboxed, as the collector's uid. */
  snprintf(want, sizeof(want), "\"trace processor: ids %d:%d:%d caps =\"",
           COLLECTOR_UID, COLLECTOR_UID, COLLECTOR_UID);
  assert_problem(got, row, "why", want);
  char said[64];
  snprintf(said, sizeof(said), "[TG-5074] snapshot %s", id);
  wait_log(said);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(check_names_the_host_that_fails),
      FLEET_TEST(the_collector_records_the_host_that_fails),
      FLEET_TEST(a_collector_not_root_checks_as_nobody),
      FLEET_TEST(a_collector_without_setuid_says_it_kept_its_uid),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
