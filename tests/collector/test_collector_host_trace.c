/* One host's part of a snapshot (GET /api/v1/snapshots/ID/trace?host=,
 * `tracegate snapshot get ID --host`), end to end: two hosts of the fleet
 * harness, the collector as a child (coll_e2e.h).
 *
 * What is asserted: a host's part decodes whole and holds that host's
 * packets and none of the other's (machine ids: its own, or the head's
 * none); with Perfetto's trace processor (PERFETTO_BIN) it imports with
 * that host's data alone; both hosts' parts asked together are the whole
 * file byte for byte, and the whole file still downloads; unknown and
 * malformed host lists are refused with JSON errors; the CLI writes the
 * same bytes as the API; a host that delivered nothing gets the head
 * alone; a snapshot whose index is gone or damaged is refused with a
 * clear error while its whole trace still downloads.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "test_proc.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("hosttrace");
}

/* The file at |path|, whole (malloc'ed; *n its size). */
static size_t file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (size_t)st.st_size;
}

/* Every packet of |path| is machine |machine|'s or the head's (none);
 * |tag|'s are all there (first 1, n of them) and |other|'s absent. */
static void assert_part(const char *path, uint32_t machine, const char *tag,
                        size_t n, const char *other) {
  fleet_trace_t t;
  fleet_trace_load(path, &t);
  size_t own = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!t.pk[i]->has_machine_id) continue;
    assert_int_equal(t.pk[i]->machine_id, machine);
    own++;
  }
  if (tag) fleet_trace_assert_values(&t, tag, 1, n);
  if (!tag) assert_int_equal(own, 0);
  assert_int_equal(fleet_trace_count_tag(&t, other), 0);
  fleet_trace_free(&t);
}

/* trace_processor_shell's one-line answer to |sql| over |trace|, into
 * |out|; false when PERFETTO_BIN is not set. */
static bool tp_query(const char *trace, const char *sql, char *out,
                     size_t cap) {
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) return false;
  char cmd[2048];
  snprintf(cmd, sizeof(cmd),
           "'%s/trace_processor_shell' -Q \"%s\" '%s' 2>/dev/null | tail -n 1",
           bin, sql, trace);
  FILE *tp = popen(cmd, "r");
  assert_non_null(tp);
  out[0] = 0;
  assert_non_null(fgets(out, (int)cap, tp));
  assert_int_equal(pclose(tp), 0);
  return true;
}

/* `tracegate snapshot get` with |extra| args (NULL-terminated): its exit
 * status; stderr into |err|. */
static int cli_get(const collector_t *c, const char *id,
                   const char *const *extra, const char *err) {
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", c->port);
  const char *argv[16] = {"snapshot", "get", id, "--collector", addr};
  size_t n = 5;
  for (; *extra && n + 1 < sizeof(argv) / sizeof(argv[0]); extra++)
    argv[n++] = *extra;
  argv[n] = NULL;
  return coll_run_cli(TRACEGATE_CLI_PATH, argv, err);
}

static void one_host_of_a_snapshot(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "hostA", 1, 5);
  fleet_commit_packets(&h[1].p, 0, "hostB", 1, 7);
  const char *json = fleet_in_dir("snap.json");
  char id[32], a[320], b[320], path[1024];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 2, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  /* The rows name the hosts by their specs, as ?host= takes them. */
  snprintf(a, sizeof(a), "%s", h[0].spec);
  snprintf(b, sizeof(b), "%s", h[1].spec);
  char key[64], want[400];
  snprintf(key, sizeof(key), "hosts.%zu.host", snapshot_host_row(json, a, 2));
  snprintf(want, sizeof(want), "\"%s\"", a);
  assert_json(json, key, want);

  char whole[512], part_a[512], part_b[512], both[512];
  snprintf(whole, sizeof(whole), "%s", fleet_in_dir("whole.pftrace"));
  snprintf(part_a, sizeof(part_a), "%s", fleet_in_dir("a.pftrace"));
  snprintf(part_b, sizeof(part_b), "%s", fleet_in_dir("b.pftrace"));
  snprintf(both, sizeof(both), "%s", fleet_in_dir("both.pftrace"));
  download(&c, id, whole);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, a);
  assert_int_equal(http(&c, "GET", path, part_a), 200);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, b);
  assert_int_equal(http(&c, "GET", path, part_b), 200);
  assert_part(part_a, 1, "hostA", 5, "hostB");
  assert_part(part_b, 2, "hostB", 7, "hostA");
  /* Each part is the head and the host's bytes: together, with the head
   * once, they are the whole file; asked together (in either order, a
   * host twice), they are it byte for byte. */
  size_t head = file_size(part_a) + file_size(part_b) - file_size(whole);
  assert_true(head > 0 && head < file_size(part_a));
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s,%s,%s", id,
           b, a, b);
  assert_int_equal(http(&c, "GET", path, both), 200);
  assert_same_file(both, whole);
  /* HEAD: the part's length, without its body. */
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, a);
  const char *hd = fleet_in_dir("head.out");
  assert_int_equal(http(&c, "HEAD", path, hd), 200);
  assert_int_equal(http_length(hd), (long long)file_size(part_a));

  /* Perfetto's trace processor takes the part alone: host A's data, a
   * machine for it beside the collector's head, nothing of host B. */
  char out[256];
  if (tp_query(part_a, "select count(*) from machine where raw_id = 2", out,
               sizeof(out))) {
    assert_string_equal(out, "0\n");
    assert_true(tp_query(part_a, "select count(*) from machine where raw_id = 1",
                         out, sizeof(out)));
    assert_string_equal(out, "1\n");
    assert_true(tp_query(part_a, "select count(*) from stats where name = "
                         "'tokenizer_skipped_packets' and value > 0", out,
                         sizeof(out)));
    assert_string_equal(out, "0\n");
  } else {
    fprintf(stderr, "[ SKIPPED  ] the trace processor import: PERFETTO_BIN "
                    "is not set\n");
  }

  /* Refused: a host not in the snapshot (404, named), an empty name, an
   * empty list, an argument of another name. */
  const char *bad = fleet_in_dir("bad.json");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s,nope", id,
           a);
  assert_int_equal(http(&c, "GET", path, bad), 404);
  assert_json(bad, "host", "\"nope\"");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s,,%s", id, a,
           b);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=", id);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?hosts=%s", id, a);
  assert_int_equal(http(&c, "GET", path, bad), 400);
  assert_int_equal(http(&c, "GET", "/api/v1/snapshots/7fffffffffffffff/trace"
                                   "?host=x", bad), 404);

  /* The CLI writes the API's bytes, the whole file without --host; an
   * unknown host is exit 1, and no file. */
  char cli_a[512], cli_whole[512], err[512];
  snprintf(cli_a, sizeof(cli_a), "%s", fleet_in_dir("cli-a.pftrace"));
  snprintf(cli_whole, sizeof(cli_whole), "%s", fleet_in_dir("cli.pftrace"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("cli.err"));
  const char *args_a[] = {"--host", a, "--output", cli_a, NULL};
  assert_int_equal(cli_get(&c, id, args_a, err), 0);
  assert_same_file(cli_a, part_a);
  const char *args_whole[] = {"-o", cli_whole, NULL};
  assert_int_equal(cli_get(&c, id, args_whole, err), 0);
  assert_same_file(cli_whole, whole);
  char cli_none[512];
  snprintf(cli_none, sizeof(cli_none), "%s", fleet_in_dir("cli-none.pftrace"));
  const char *args_none[] = {"--host", "nope", "--output", cli_none, NULL};
  assert_int_equal(cli_get(&c, id, args_none, err), 1);
  struct stat st;
  assert_int_equal(stat(cli_none, &st), -1);
  char partial[600];
  snprintf(partial, sizeof(partial), "%s.partial", cli_none);
  assert_int_equal(stat(partial, &st), -1);
  const char *args_bad_id[] = {"--output", cli_none, NULL};
  assert_int_equal(cli_get(&c, "42", args_bad_id, err), 2);

  /* A host that delivered nothing: its part is the head, a valid trace
   * with no host's packets. */
  fleet_relay_stop(&h[1].relay, SIGKILL);
  const char *json2 = fleet_in_dir("snap2.json");
  char id2[32];
  snprintf(id2, sizeof(id2), "%s", snapshot(&c, h, 1, json2));
  assert_json(json2, "snapshot.state", "\"partial\"");
  snprintf(key, sizeof(key), "hosts.%zu.outcome",
           snapshot_host_row(json2, b, 2));
  assert_json(json2, key, "\"failed\"");
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id2, b);
  assert_int_equal(http(&c, "GET", path, part_b), 200);
  assert_int_equal(file_size(part_b), head);
  assert_part(part_b, 2, NULL, 0, "hostA");

  /* The index damaged, then gone: its hosts' parts are refused (500,
   * 409), the whole trace still downloads. */
  char index[512];
  snprintf(index, sizeof(index), "%s/snapshots/%s.index",
           fleet_in_dir("store"), id);
  int fd = open(index, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, "X", 1, 60), 1);
  close(fd);
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id, a);
  assert_int_equal(http(&c, "GET", path, bad), 500);
  assert_int_equal(unlink(index), 0);
  assert_int_equal(http(&c, "GET", path, bad), 409);
  download(&c, id, both);
  assert_same_file(both, whole);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(one_host_of_a_snapshot),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
