/* Naming -H targets (client/target.c, tg_targets_name): a host's
 * own name when it is alone, host_port (or user@host_sshPORT) when several
 * targets share a host, sanitised for file names, numbered when two names
 * still meet; a target given twice is refused. Also at fleet size, where a
 * pairwise check was quadratic. And a hosts file's lines appended to the
 * -H targets (client/hosts_file.c, tg_hosts_parse), and each target's
 * label: the name it is shown by. */
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

#include <cmocka.h>

#include "client/target.h"

/* Why the last tg_targets_name() refused, as the caller gets it. */
static char g_why[512];

static int name_all(tg_target_t *t, size_t n) {
  g_why[0] = 0;
  return tg_targets_name(t, n, g_why, sizeof(g_why));
}

static void parse_all(tg_target_t *t, const char *const *specs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char err[256];
    assert_int_equal(tg_target_parse(specs[i], &t[i], err, sizeof(err)), 0);
  }
}

static void names_alone_shared_and_sanitised(void **state) {
  (void)state;
  static const char *const specs[] = {
      "alpha.example:7467",      "beta.example:7000", "beta.example:7001",
      "ssh://u@beta.example:22", "[::1]:7467",        "__1:7467",
  };
  enum { N = sizeof(specs) / sizeof(specs[0]) };
  tg_target_t t[N];
  parse_all(t, specs, N);
  assert_int_equal(name_all(t, N), 0);
  assert_string_equal(t[0].name, "alpha.example");
  assert_string_equal(t[1].name, "beta.example_7000");
  assert_string_equal(t[2].name, "beta.example_7001");
  assert_string_equal(t[3].name, "u_beta.example_ssh22");
  assert_string_equal(t[4].name, "__1");
  /* "__1" again once sanitised: the later one is numbered. */
  assert_string_equal(t[5].name, "__1_6");
}

static void refuses_a_target_given_twice(void **state) {
  (void)state;
  static const char *const specs[] = {"a.example:1", "b.example:2",
                                      "a.example:3", "b.example:2"};
  tg_target_t t[4];
  parse_all(t, specs, 4);
  assert_int_equal(name_all(t, 4), -EINVAL);
  assert_non_null(strstr(g_why, "b.example:2")); /* the one given twice */
  /* Another port, or ssh to the same host, is another target. */
  static const char *const ok[] = {"a.example:1", "a.example:2",
                                   "ssh://a.example:1"};
  parse_all(t, ok, 3);
  assert_int_equal(name_all(t, 3), 0);
}

/* 5000 hosts: each named, every name distinct; then the same list with
 * one duplicate at the end is refused. */
static void names_a_big_fleet(void **state) {
  (void)state;
  enum { N = 5000 };
  tg_target_t *t = calloc(N + 1, sizeof(*t));
  assert_non_null(t);
  for (size_t i = 0; i < N; i++) {
    char spec[64], err[128];
    snprintf(spec, sizeof(spec), "host%zu.example:%zu", i % 2500,
             7000 + i / 2500);
    assert_int_equal(tg_target_parse(spec, &t[i], err, sizeof(err)), 0);
  }
  assert_int_equal(name_all(t, N), 0);
  assert_string_equal(t[0].name, "host0.example_7000");
  assert_string_equal(t[N - 1].name, "host2499.example_7001");
  for (size_t i = 1; i < N; i++)
    assert_int_not_equal(strcmp(t[i].name, t[i - 1].name), 0);
  t[N] = t[1234];
  assert_int_equal(name_all(t, N + 1), -EINVAL);
  assert_non_null(strstr(g_why, t[N].spec));
  free(t);
}

/* A hosts file appended to three -H targets held in an exact-size list:
 * all 3000 lines in order behind them, the three untouched; past the cap,
 * -E2BIG with the line that broke it. */
static void a_hosts_file_appends_to_the_targets_given(void **state) {
  (void)state;
  enum { GIVEN = 3, LINES = 3000 };
  size_t cap = 64 * LINES, len = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  for (size_t i = 0; i < LINES; i++)
    len += (size_t)snprintf(text + len, cap - len, "h%zu.example:%zu # x\n", i,
                            7000 + i % 7);
  for (size_t max = GIVEN + LINES; max >= GIVEN + LINES - 1; max--) {
    tg_target_t *t = calloc(GIVEN, sizeof(*t));
    assert_non_null(t);
    static const char *const given[] = {"a.example:1", "b.example:2",
                                        "ssh://c.example"};
    parse_all(t, given, GIVEN);
    size_t n = GIVEN;
    unsigned line = 0;
    char err[256];
    int rv = tg_hosts_parse(text, len, &t, &n, max, &line, err, sizeof(err));
    if (max == GIVEN + LINES) {
      assert_int_equal(rv, 0);
      assert_int_equal(n, GIVEN + LINES);
      assert_string_equal(t[0].host, "a.example");
      assert_string_equal(t[2].host, "c.example");
      for (size_t i = 0; i < LINES; i++) {
        char host[32];
        snprintf(host, sizeof(host), "h%zu.example", i);
        assert_string_equal(t[GIVEN + i].host, host);
      }
    } else {
      assert_int_equal(rv, -E2BIG);
      assert_int_equal(n, max);
      assert_int_equal(line, LINES);
      char limit[32];
      snprintf(limit, sizeof(limit), " %zu ", max);
      assert_non_null(strstr(err, limit)); /* the limit is named */
    }
    free(t);
  }
  free(text);
}

/* A hosts file that is a FIFO (the collector's inventory, the CLI's -f)
 * is refused at once, with or without a writer holding it open: reading
 * it would block the collector's loop for good. alarm() bounds the test
 * if it does block. */
static void a_hosts_file_must_be_a_regular_file(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_hosts_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof(path), "%s/fleet.hosts", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  tg_target_t *t = NULL;
  size_t n = 0;
  alarm(10);
  char err[256];
  int rv = tg_targets_load(path, &t, &n, 16, err, sizeof(err));
  int w = open(path, O_RDWR | O_CLOEXEC);
  assert_true(w >= 0);
  int rv_open = tg_targets_load(path, &t, &n, 16, err, sizeof(err));
  alarm(0);
  close(w);
  assert_int_equal(rv, -EINVAL);
  assert_int_equal(rv_open, -EINVAL);
  assert_int_equal(tg_targets_load(dir, &t, &n, 16, err, sizeof(err)), -EINVAL);
  assert_int_equal(n, 0);
  free(t);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* A host's label (what the merged trace and the collector show it by):
 * the hosts file's label=, else its name= unless a wildcard, else the
 * spec as given; a name= that two hosts share gives way to their specs. */
static void labels_from_label_name_or_spec(void **state) {
  (void)state;
  static const char text[] =
      "10.0.0.5:7467 name=host5.example label=db-primary\n"
      "10.0.0.6:7467 label=web-1 name=host6.example\n"
      "10.0.0.7 name=host7.example\n"
      "10.0.0.8 name=*.fleet.example\n"
      "10.0.0.9 name=shared.example\n"
      "10.0.0.10:7000 name=shared.example\n"
      "ssh://admin@db1 label=db1\n"
      "ssh://admin@db2\n";
  tg_target_t *t = NULL;
  size_t n = 0;
  unsigned line = 0;
  char err[256];
  assert_int_equal(tg_hosts_parse(text, sizeof(text) - 1, &t, &n, 16, &line,
                                  err, sizeof(err)),
                   0);
  assert_int_equal(n, 8);
  assert_int_equal(name_all(t, n), 0);
  static const char *const want[] = {
      "db-primary", "web-1", "host7.example", "10.0.0.8",
      "10.0.0.9",   "10.0.0.10:7000", "db1", "ssh://admin@db2"};
  for (size_t i = 0; i < n; i++) assert_string_equal(t[i].label, want[i]);
  /* The certificate's name stays what it was. */
  assert_string_equal(t[0].server_name, "host5.example");
  free(t);
}

/* A hosts file in the shared line grammar (common/config_text.h): a BOM,
 * CRLF, comments from a '#' at the start or after a blank; a '#' inside a
 * word is the word's. Errors give the line apart, without the file. */
static void a_hosts_file_reads_the_shared_grammar(void **state) {
  (void)state;
  static const char text[] = "\xef\xbb\xbf# fleet\r\n"
                             "  a.example:7467\tlabel=db#1 # primary\r\n"
                             "\n"
                             "ssh://u@b.example  #label=x\n";
  tg_target_t *t = NULL;
  size_t n = 0;
  unsigned line = 0;
  char err[256];
  assert_int_equal(tg_hosts_parse(text, sizeof(text) - 1, &t, &n, 4, &line,
                                  err, sizeof(err)),
                   0);
  assert_int_equal(n, 2);
  assert_string_equal(t[0].host, "a.example");
  assert_string_equal(t[0].given_label, "db#1");
  assert_string_equal(t[1].host, "b.example");
  assert_string_equal(t[1].given_label, "");
  free(t);
  t = NULL;
  n = 0;
  static const char nul[] = "a.example\nb\0\n";
  assert_int_equal(tg_hosts_parse(nul, sizeof(nul) - 1, &t, &n, 4, &line, err,
                                  sizeof(err)),
                   -EINVAL);
  assert_int_equal(line, 2);
  assert_string_equal(err, "a NUL byte (is this a hosts file?)");
  free(t);
}

/* A label= that is not printable ASCII, too long, given twice on a line,
 * given to two hosts, or that is another host's spec, is refused. */
static void refuses_a_bad_or_shared_label(void **state) {
  (void)state;
  static const char *const bad_lines[] = {
      "a label=\n", "a label=x label=y\n", "a label=caf\xc3\xa9\n",
      "a label=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
      "a label=\x01\n"};
  for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++) {
    tg_target_t *t = NULL;
    size_t n = 0;
    unsigned line = 0;
    char err[256];
    assert_int_equal(tg_hosts_parse(bad_lines[i], strlen(bad_lines[i]), &t, &n,
                                    4, &line, err, sizeof(err)),
                     -EINVAL);
    free(t);
  }
  static const char *const shared[] = {"a label=x\nb label=x\n",
                                       "a label=b:7467\nb:7467\n"};
  for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
    tg_target_t *t = NULL;
    size_t n = 0;
    unsigned line = 0;
    char err[256];
    assert_int_equal(tg_hosts_parse(shared[i], strlen(shared[i]), &t, &n, 4,
                                    &line, err, sizeof(err)),
                     0);
    assert_int_equal(name_all(t, n), -EINVAL);
    assert_non_null(strstr(g_why, "label="));
    free(t);
  }
  /* -H specs alone are their labels. */
  tg_target_t h[2];
  static const char *const specs[] = {"alpha.example", "ssh://u@alpha.example"};
  parse_all(h, specs, 2);
  assert_int_equal(name_all(h, 2), 0);
  assert_string_equal(h[0].label, "alpha.example");
  assert_string_equal(h[1].label, "ssh://u@alpha.example");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(names_alone_shared_and_sanitised),
      cmocka_unit_test(refuses_a_target_given_twice),
      cmocka_unit_test(names_a_big_fleet),
      cmocka_unit_test(a_hosts_file_appends_to_the_targets_given),
      cmocka_unit_test(a_hosts_file_must_be_a_regular_file),
      cmocka_unit_test(labels_from_label_name_or_spec),
      cmocka_unit_test(refuses_a_bad_or_shared_label),
      cmocka_unit_test(a_hosts_file_reads_the_shared_grammar),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
