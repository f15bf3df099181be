/* tracegate-collector's configuration file (collector/config/config.h): every
 * key read, defaults, each bad value named by its file, line and key,
 * the limits, and what a failed parse leaves (nothing: ASan's leak check
 * sees the rest). Errors are checked by their "FILE:LINE: key:" prefix,
 * not their English. */
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

#include "collector/config/config.h"

#define LABEL "collector.conf"
/* The three required keys: lines 1 to 3 of the files below. */
#define REQUIRED                                          \
  "hosts = fleet.hosts\ntrace_config = /etc/tg/flight.pbtxt\n" \
  "store = /var/tg\n"

typedef struct warnings {
  int n;
  char last[512];
} warnings_t;

static void on_warn(void *ctx, const char *text) {
  warnings_t *w = ctx;
  w->n++;
  snprintf(w->last, sizeof(w->last), "%s", text);
}

static warnings_t warned;
static char err[1024];

static int parse_n(const char *text, size_t len, tg_coll_config_t *c) {
  memset(&warned, 0, sizeof(warned));
  memset(err, 'x', sizeof(err));
  return tg_coll_config_parse(text, len, LABEL, "/etc/tg", c, on_warn, &warned,
                              err, sizeof(err));
}

static int parse(const char *text, tg_coll_config_t *c) {
  return parse_n(text, strlen(text), c);
}

static void assert_prefix(const char *s, const char *prefix) {
  if (strncmp(s, prefix, strlen(prefix)) != 0)
    fail_msg("error '%s' does not start with '%s'", s, prefix);
}

/* |text| fails with -EINVAL and an error starting "collector.conf:LINE:
 * PREFIX" (or "collector.conf: PREFIX" for line 0). */
static void expect_error(const char *text, unsigned line, const char *prefix) {
  tg_coll_config_t *c = malloc(sizeof(*c));
  assert_non_null(c);
  int rv = parse(text, c);
  if (rv != -EINVAL)
    fail_msg("'%s' gave %d, not -EINVAL (err '%s')", text, rv,
             rv == 0 ? "" : err);
  assert_null(c->groups);
  char want[256];
  if (line)
    snprintf(want, sizeof(want), LABEL ":%u: %s", line, prefix);
  else
    snprintf(want, sizeof(want), LABEL ": %s", prefix);
  assert_prefix(err, want);
  tg_coll_config_free(c);
  free(c);
}

/* REQUIRED then |extra|: the extra's first line is line 4. */
static void expect_extra_error(const char *extra, unsigned line,
                               const char *prefix) {
  char text[8192];
  snprintf(text, sizeof(text), REQUIRED "%s", extra);
  expect_error(text, line, prefix);
}

static void expect_extra_ok(const char *extra, tg_coll_config_t *c) {
  char text[8192];
  snprintf(text, sizeof(text), REQUIRED "%s", extra);
  int rv = parse(text, c);
  if (rv != 0) fail_msg("'%s' refused: %s", extra, err);
}

static void config_reads_every_key(void **state) {
  (void)state;
  static const char text[] =
      "# tracegate-collector\n"
      "hosts = fleet.hosts\n"
      "ca = tls/ca.pem\n"
      "cert = /etc/tg/tls/collector.pem\n"
      "key = tls/collector.key   # a trailing comment\n"
      "tls_server_name = relay.example.com\n"
      "trace_config = flight.pbtxt\n"
      "store = /var/lib/tracegate/snapshots\n"
      "catalog = postgresql://coll:pa#ss@db.example/tracegate\n"
      "shard = 3/16\n"
      "retention_max_bytes = 512G\n"
      "retention_max_age = 30d\n"
      "snapshot_host_max_bytes = 3M\n"
      "listen = [::]:0\n"
      "http_cert = https/server.pem\n"
      "http_key = https/server.key\n"
      "http_ca = https/clients.pem\n"
      "http_max_conns_per_source = 8\n"
      "http_min_rate = 16K\n"
      "http_crl = https/crl.pem\n"
      "authz = authz.conf\n"
      "session_key = flight-rec_1.a\n"
      "snapshot_every = 1h\n"
      "coalesce_window = 250ms\n"
      "max_snapshots_per_minute = 600\n"
      "host_snapshots_per_minute = 3\n"
      "operator_snapshots_per_minute = 12\n"
      "schedule_snapshots_per_minute = 60\n"
      "clone_timeout = 2500ms\n"
      "compress_level = 19\n"
      "reconnect = 5m\n"
      "dead_link = 20s\n"
      "ui_url = http://ui.internal:10000/perfetto\n"
      "\n"
      "group = db db1.example:7467 db2.example:7467\n"
      "group\t=\tweb\tssh://admin@web1   10.0.0.5:7467 \n"
      "trigger = oom db\n"
      "trigger = app.crash:v2\n"
      "trigger = slow web\n"
      "clone_min_rate = 1.5M\n";
  tg_coll_config_t c;
  assert_int_equal(parse(text, &c), 0);
  assert_int_equal(warned.n, 0);
  assert_string_equal(c.hosts, "/etc/tg/fleet.hosts");
  assert_string_equal(c.ca, "/etc/tg/tls/ca.pem");
  assert_string_equal(c.cert, "/etc/tg/tls/collector.pem");
  assert_string_equal(c.key, "/etc/tg/tls/collector.key");
  assert_true(c.tls);
  assert_string_equal(c.tls_server_name, "relay.example.com");
  assert_string_equal(c.trace_config, "/etc/tg/flight.pbtxt");
  assert_string_equal(c.store, "/var/lib/tracegate/snapshots");
  assert_string_equal(c.catalog,
                      "postgresql://coll:pa#ss@db.example/tracegate");
  assert_int_equal(c.shard_index, 3);
  assert_int_equal(c.shard_count, 16);
  assert_int_equal(c.retention_max_bytes, 512ull << 30);
  assert_int_equal(c.retention_max_age_ms, 30ll * 86400 * 1000);
  assert_int_equal(c.snapshot_host_max_bytes, 3u << 20);
  assert_string_equal(c.listen_host, "::");
  assert_int_equal(c.listen_port, 0);
  assert_true(c.listen_ipv6);
  assert_false(c.listen_loopback);
  assert_string_equal(c.http_cert, "/etc/tg/https/server.pem");
  assert_string_equal(c.http_key, "/etc/tg/https/server.key");
  assert_string_equal(c.http_ca, "/etc/tg/https/clients.pem");
  assert_true(c.https);
  assert_int_equal(c.http_max_conns_per_source, 8);
  assert_int_equal(c.http_min_rate, 16 * 1024);
  assert_string_equal(c.http_crl, "/etc/tg/https/crl.pem");
  assert_string_equal(c.authz, "/etc/tg/authz.conf");
  assert_string_equal(c.session_key, "flight-rec_1.a");
  assert_int_equal(c.snapshot_every_ms, 3600000);
  assert_int_equal(c.coalesce_window_ms, 250);
  assert_int_equal(c.max_snapshots_per_minute, 600);
  assert_int_equal(c.host_snapshots_per_minute, 3);
  assert_int_equal(c.operator_snapshots_per_minute, 12);
  assert_int_equal(c.schedule_snapshots_per_minute, 60);
  assert_int_equal(c.clone_timeout_ms, 2500);
  assert_int_equal(c.clone_min_rate, 1536 * 1024);
  assert_int_equal(c.compress_level, 19);
  assert_int_equal(c.reconnect_ms, 300000);
  assert_int_equal(c.dead_link_ms, 20000);
  assert_string_equal(c.ui_url, "http://ui.internal:10000/perfetto");

  assert_int_equal(c.n_groups, 2);
  assert_string_equal(c.groups[0].name, "db");
  assert_int_equal(c.groups[0].line, 35);
  assert_int_equal(c.groups[0].n_hosts, 2);
  assert_string_equal(c.groups[0].hosts[0], "db1.example:7467");
  assert_string_equal(c.groups[0].hosts[1], "db2.example:7467");
  assert_string_equal(c.groups[1].name, "web");
  assert_int_equal(c.groups[1].n_hosts, 2);
  assert_string_equal(c.groups[1].hosts[0], "ssh://admin@web1");
  assert_string_equal(c.groups[1].hosts[1], "10.0.0.5:7467");
  assert_ptr_equal(tg_coll_config_group(&c, "web"), &c.groups[1]);
  assert_null(tg_coll_config_group(&c, "all"));

  assert_int_equal(c.n_triggers, 3);
  assert_string_equal(c.triggers[0].name, "oom");
  assert_string_equal(c.triggers[0].group, "db");
  assert_int_equal(c.triggers[0].line, 37);
  assert_string_equal(c.triggers[1].name, "app.crash:v2");
  assert_string_equal(c.triggers[1].group, "all");
  assert_string_equal(c.triggers[2].group, "web");

  assert_true(tg_coll_config_group_has(&c, "db", "db2.example:7467"));
  assert_false(tg_coll_config_group_has(&c, "db", "db2.example"));
  assert_false(tg_coll_config_group_has(&c, "web", "db1.example:7467"));
  assert_true(tg_coll_config_group_has(&c, "all", "anything:1"));
  assert_false(tg_coll_config_group_has(&c, "nope", "db1.example:7467"));
  tg_coll_config_free(&c);
  assert_null(c.groups);
  assert_int_equal(c.n_groups, 0);
  tg_coll_config_free(&c); /* twice: harmless */
  tg_coll_config_free(NULL);
}

static void config_defaults_fill_what_is_not_set(void **state) {
  (void)state;
  tg_coll_config_t c;
  assert_int_equal(parse(REQUIRED, &c), 0);
  assert_string_equal(c.hosts, "/etc/tg/fleet.hosts");
  assert_string_equal(c.ca, "");
  assert_string_equal(c.cert, "");
  assert_string_equal(c.key, "");
  assert_false(c.tls);
  assert_string_equal(c.tls_server_name, "");
  assert_string_equal(c.catalog, "sqlite");
  assert_int_equal(c.shard_index, 0);
  assert_int_equal(c.shard_count, 1);
  assert_int_equal(c.retention_max_bytes, 0);
  assert_int_equal(c.retention_max_age_ms, 0);
  assert_int_equal(c.snapshot_host_max_bytes, 0);
  assert_string_equal(c.listen_host, "127.0.0.1");
  assert_int_equal(c.listen_port, 7468);
  assert_false(c.listen_ipv6);
  assert_true(c.listen_loopback);
  assert_false(c.https);
  assert_string_equal(c.http_cert, "");
  assert_int_equal(c.http_max_conns_per_source, 0);
  assert_int_equal(c.http_max_conns, 0);
  assert_int_equal(c.http_timeout_ms, 0);
  assert_int_equal(c.http_min_rate, 0);
  assert_string_equal(c.http_crl, "");
  assert_string_equal(c.authz, "");
  assert_string_equal(c.session_key, "collector");
  assert_int_equal(c.snapshot_every_ms, 0);
  assert_int_equal(c.coalesce_window_ms, 10000);
  assert_int_equal(c.max_snapshots_per_minute, 6);
  assert_int_equal(c.host_snapshots_per_minute, 2);
  assert_int_equal(c.operator_snapshots_per_minute, 6);
  assert_int_equal(c.schedule_snapshots_per_minute, 6);
  assert_int_equal(c.clone_timeout_ms, 8000);
  assert_int_equal(c.clone_min_rate, 8 * 1024);
  assert_int_equal(c.ring_clear_period_ms, 1000);
  assert_int_equal(c.compress_level, 1);
  assert_int_equal(c.reconnect_ms, 60000);
  assert_int_equal(c.dead_link_ms, 15000);
  assert_string_equal(c.ui_url, "https://ui.perfetto.dev");
  assert_int_equal(c.n_groups, 0);
  assert_null(c.groups);
  assert_int_equal(c.n_triggers, 0);
  tg_coll_config_free(&c);

  tg_coll_config_t d;
  tg_coll_config_defaults(&d);
  assert_string_equal(d.hosts, "");
}

static void config_names_the_missing_required_keys(void **state) {
  (void)state;
  expect_error("", 0, "missing 'hosts'");
  expect_error("hosts = h\nstore = s\n", 0, "missing 'trace_config'");
  expect_error("hosts = h\ntrace_config = t\n", 0, "missing 'store'");
  expect_error("hosts = h\ntrace_config = t\nstore =\n", 3, "store: expected");
}

static void config_refuses_bad_values_with_their_key_and_line(void **state) {
  (void)state;
  static const struct {
    const char *line;
    const char *key;
  } bad[] = {
      {"shard = 1/1", "shard"},
      {"shard = 0/0", "shard"},
      {"shard = 0/65537", "shard"},
      {"shard = 01/4", "shard"},
      {"shard = +1/4", "shard"},
      {"shard = -1/4", "shard"},
      {"shard = 1", "shard"},
      {"shard = 1/2/3", "shard"},
      {"shard = 1 / 2", "shard"},
      {"shard = 0x1/4", "shard"},
      {"retention_max_bytes = -1", "retention_max_bytes"},
      {"retention_max_bytes = G", "retention_max_bytes"},
      {"snapshot_host_max_bytes = -1", "snapshot_host_max_bytes"},
      {"retention_max_age = 10", "retention_max_age"},
      {"retention_max_age = 1w", "retention_max_age"},
      {"retention_max_age = s", "retention_max_age"},
      {"retention_max_age = 1 d", "retention_max_age"},
      {"retention_max_bytes = 1.1k", "retention_max_bytes"},
      {"retention_max_bytes = 1kk", "retention_max_bytes"},
      {"retention_max_bytes = 1e3", "retention_max_bytes"},
      {"retention_max_age = 1.0005s", "retention_max_age"},
      {"retention_max_age = 1m30", "retention_max_age"},
      {"retention_max_age = -1s", "retention_max_age"},
      {"retention_max_age = 1s,", "retention_max_age"},
      {"dead_link = 0", "dead_link"},
      {"dead_link = 999ms", "dead_link"},
      {"snapshot_every = 999ms", "snapshot_every"},
      {"dead_link = 0s", "dead_link"},
      {"max_snapshots_per_minute = 0", "max_snapshots_per_minute"},
      {"max_snapshots_per_minute = 601", "max_snapshots_per_minute"},
      {"host_snapshots_per_minute = 0", "host_snapshots_per_minute"},
      {"operator_snapshots_per_minute = 601", "operator_snapshots_per_minute"},
      {"schedule_snapshots_per_minute = 0", "schedule_snapshots_per_minute"},
      {"clone_timeout = 0", "clone_timeout"},
      {"clone_timeout = 99ms", "clone_timeout"},
      {"clone_timeout = 121s", "clone_timeout"},
      {"clone_min_rate = 1025M", "clone_min_rate"},
      {"clone_min_rate = -1", "clone_min_rate"},
      {"clone_min_rate = 1s", "clone_min_rate"},
      {"ring_clear_period = 99ms", "ring_clear_period"},
      {"ring_clear_period = 61m", "ring_clear_period"},
      {"compress_level = 20", "compress_level"},
      {"compress_level = -1", "compress_level"},
      {"compress_level = 1.0", "compress_level"},
      {"http_max_conns_per_source = 0", "http_max_conns_per_source"},
      {"http_max_conns_per_source = 65536", "http_max_conns_per_source"},
      {"http_max_conns_per_source = -1", "http_max_conns_per_source"},
      {"http_max_conns_per_source = 016", "http_max_conns_per_source"},
      {"http_max_conns_per_source = 4294967312", "http_max_conns_per_source"},
      {"http_max_conns = 0", "http_max_conns"},
      {"http_max_conns = 65536", "http_max_conns"},
      {"http_timeout = 999ms", "http_timeout"},
      {"http_timeout = 0", "http_timeout"},
      {"http_timeout = 86401s", "http_timeout"},
      {"listen = 127.0.0.1", "listen"},
      {"listen = 127.0.0.1:65536", "listen"},
      {"listen = 127.0.0.1:-1", "listen"},
      {"listen = :7468", "listen"},
      {"listen = ::1:7468", "listen"},
      {"listen = [::1]7468", "listen"},
      {"listen = [127.0.0.1]:7468", "listen"},
      {"listen = [::1:7468", "listen"},
      {"listen = bad_host:7468", "listen"},
      {"listen = -host:7468", "listen"},
      {"health_listen = 127.0.0.1", "health_listen"},
      {"health_listen = [::1]:70000", "health_listen"},
      {"session_key = .hidden", "session_key"},
      {"session_key = a/b", "session_key"},
      {"session_key = has space", "session_key"},
      {"session_key = "
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
       "session_key"},
      {"tls_server_name = -relay.example", "tls_server_name"},
      {"tls_server_name = relay..example", "tls_server_name"},
      {"tls_server_name = *.example", "tls_server_name"},
      {"tls_server_name = relay.example.", "tls_server_name"},
      {"ui_url = ftp://ui", "ui_url"},
      {"ui_url = https://", "ui_url"},
      {"ui_url = https://ui/a b", "ui_url"},
      {"ui_url = https://ui/\"onload", "ui_url"},
      {"ui_url = https://ui/<x>", "ui_url"},
      {"catalog = mysql://db", "catalog"},
      {"catalog = SQLITE", "catalog"},
      {"ca = a\tb\x01", "ca"},
      {"authz =", "authz"},
      {"group = db", "group"},
      {"group = .db h1", "group"},
      {"group = db/x h1", "group"},
      {"group =", "group"},
      {"trigger =", "trigger"},
      {"trigger = a b c", "trigger"},
      {"trigger = bad/name", "trigger"},
      {"trigger = ok .group", "trigger"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char extra[256], prefix[128];
    snprintf(extra, sizeof(extra), "\n%s\n", bad[i].line);
    snprintf(prefix, sizeof(prefix), "%s: expected", bad[i].key);
    expect_extra_error(extra, 5, prefix);
  }
  /* A line without '=' names no key. */
  expect_extra_error("just words\n", 4, "expected key = value");
  expect_extra_error("= value\n", 4, "expected key = value");
}

static void config_accepts_the_edges_of_each_range(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("shard = 65535/65536\nretention_max_bytes = 0\n"
                  "retention_max_age = 0\nsnapshot_every = 1s\n"
                  "dead_link = 1000ms\ncoalesce_window = 0ms\nreconnect = 0\n"
                  "max_snapshots_per_minute = 1\ncompress_level = 0\n"
                  "http_max_conns_per_source = 1\nclone_timeout = 100ms\n"
                  "host_snapshots_per_minute = 600\n"
                  "ring_clear_period = 0\nclone_min_rate = 0\n",
                  &c);
  assert_int_equal(c.clone_min_rate, 0);
  assert_int_equal(c.shard_index, 65535);
  assert_int_equal(c.shard_count, 65536);
  assert_int_equal(c.snapshot_every_ms, 1000);
  assert_int_equal(c.dead_link_ms, 1000);
  assert_int_equal(c.coalesce_window_ms, 0);
  assert_int_equal(c.reconnect_ms, 0);
  assert_int_equal(c.max_snapshots_per_minute, 1);
  assert_int_equal(c.clone_timeout_ms, 100);
  assert_int_equal(c.host_snapshots_per_minute, 600);
  assert_int_equal(c.compress_level, 0);
  assert_int_equal(c.http_max_conns_per_source, 1);
  assert_int_equal(c.ring_clear_period_ms, 0);
  tg_coll_config_free(&c);
  expect_extra_ok("ring_clear_period = 100ms\n", &c);
  assert_int_equal(c.ring_clear_period_ms, 100);
  tg_coll_config_free(&c);
  expect_extra_ok("ring_clear_period = 1h\n", &c);
  assert_int_equal(c.ring_clear_period_ms, 3600000);
  tg_coll_config_free(&c);
  expect_extra_ok("clone_min_rate = 1G\n", &c);
  assert_int_equal(c.clone_min_rate, 1u << 30);
  tg_coll_config_free(&c);

  expect_extra_ok("retention_max_bytes = 16777215T\n"
                  "retention_max_age = 106751991167d\n"
                  "coalesce_window = 9223372036854775807ms\n",
                  &c);
  assert_int_equal(c.retention_max_bytes, 16777215ull << 40);
  assert_int_equal(c.retention_max_age_ms, 106751991167ll * 86400000);
  assert_int_equal(c.coalesce_window_ms, INT64_MAX);
  tg_coll_config_free(&c);

  expect_extra_ok("retention_max_bytes = 18446744073709551615\n", &c);
  assert_int_equal(c.retention_max_bytes, UINT64_MAX);
  tg_coll_config_free(&c);

  expect_extra_ok("http_max_conns_per_source = 65535\n", &c);
  assert_int_equal(c.http_max_conns_per_source, 65535);
  tg_coll_config_free(&c);

  expect_extra_ok("http_max_conns = 1\nhttp_timeout = 1s\n", &c);
  assert_int_equal(c.http_max_conns, 1);
  assert_int_equal(c.http_timeout_ms, 1000);
  tg_coll_config_free(&c);
  expect_extra_ok("http_max_conns = 65535\nhttp_timeout = 1d\n", &c);
  assert_int_equal(c.http_max_conns, 65535);
  assert_int_equal(c.http_timeout_ms, 86400000);
  tg_coll_config_free(&c);
  /* The whole error, as for every K_UINT key. */
  expect_extra_error("\nhttp_max_conns_per_source = 65536\n", 5,
                     "http_max_conns_per_source: expected an integer "
                     "1..65535, not '65536'");
}

/* common/units.h: the spellings the CLI's flags take, here too. */
static void config_takes_the_cli_spellings(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("retention_max_bytes = 10KB\nsnapshot_host_max_bytes = 1MiB\n"
                  "http_min_rate = 1.5k\nretention_max_age = 1.5d\n"
                  "coalesce_window = 10S\nreconnect = 1h30m\n"
                  "dead_link = 1.5s\nclone_timeout = 2min\n",
                  &c);
  assert_int_equal(c.retention_max_bytes, 10240);
  assert_int_equal(c.snapshot_host_max_bytes, 1048576);
  assert_int_equal(c.http_min_rate, 1536);
  assert_int_equal(c.retention_max_age_ms, 36 * 3600000ll);
  assert_int_equal(c.coalesce_window_ms, 10000);
  assert_int_equal(c.reconnect_ms, 5400000);
  assert_int_equal(c.dead_link_ms, 1500);
  assert_int_equal(c.clone_timeout_ms, 120000);
  tg_coll_config_free(&c);
  expect_extra_ok("retention_max_bytes = 1.5G\nhttp_min_rate = 64kb\n", &c);
  assert_int_equal(c.retention_max_bytes, 3ull << 29);
  assert_int_equal(c.http_min_rate, 65536);
  tg_coll_config_free(&c);
  /* A number alone has no unit to count in a duration key: 0 only; the
   * error says why. */
  expect_extra_error("\nretention_max_age = 10\n", 5,
                     "retention_max_age: expected a duration like 500ms, "
                     "1.5s, 1m30s or 1d, not '10': a number without a unit");
  expect_extra_error("\ndead_link = 0.5s\n", 5,
                     "dead_link: expected a duration of at least 1s, not "
                     "'0.5s': out of range");
}

static void config_refuses_overflowing_sizes_and_durations(void **state) {
  (void)state;
  const char *bad[] = {
      "retention_max_bytes = 99999999999999999999G",
      "retention_max_bytes = 18446744073709551616",
      "retention_max_bytes = 16777216T",
      "retention_max_bytes = 17179869184G",
      "retention_max_age = 300000000000d",
      "retention_max_age = 106751991168d",
      "coalesce_window = 9223372036854775808ms",
      "reconnect = 2562047788016h",
      "coalesce_window = 153722867280913m",
      "dead_link = 9223372036854776s",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char extra[128], prefix[64];
    snprintf(extra, sizeof(extra), "%s\n", bad[i]);
    snprintf(prefix, sizeof(prefix), "%.*s: expected",
             (int)strcspn(bad[i], " "), bad[i]);
    expect_extra_error(extra, 4, prefix);
  }
}

static void config_refuses_a_scalar_key_twice(void **state) {
  (void)state;
  expect_extra_error("shard = 0/2\n\nshard = 1/2\n", 6, "shard: expected once");
  tg_coll_config_t *c = malloc(sizeof(*c));
  assert_int_equal(parse(REQUIRED "store = /other\n", c), -EINVAL);
  assert_prefix(err, LABEL ":4: store:");
  /* The error names the first line. */
  assert_non_null(strstr(err, "line 3"));
  free(c);
}

static void config_warns_of_unknown_keys_and_goes_on(void **state) {
  (void)state;
  tg_coll_config_t c;
  assert_int_equal(parse("hosts = h\ncolour = blue\n"
                         "trace_config = t\nstore = s\n",
                         &c),
                   0);
  assert_int_equal(warned.n, 1);
  assert_string_equal(warned.last,
                      LABEL ":2: unknown key 'colour' (ignored)");
  assert_string_equal(c.store, "/etc/tg/s");
  tg_coll_config_free(&c);

  /* Echoed sanitised, and at most 64 bytes of it. */
  char text[512];
  snprintf(text, sizeof(text),
           REQUIRED "\x1b[31m%s = 1\n",
           "0123456789012345678901234567890123456789012345678901234567890123"
           "456789");
  assert_int_equal(parse(text, &c), 0);
  assert_int_equal(warned.n, 1);
  assert_string_equal(warned.last,
                      LABEL ":4: unknown key '?[31m012345678901234567890123456"
                      "78901234567890123456789012345678' (ignored)");
  tg_coll_config_free(&c);

  /* No callback: still fine. */
  assert_int_equal(tg_coll_config_parse(REQUIRED "x = y\n",
                                        strlen(REQUIRED "x = y\n"), LABEL,
                                        NULL, &c, NULL, NULL, err, sizeof(err)),
                   0);
  tg_coll_config_free(&c);
}

/* merge_allow_fields: field names of Perfetto's schema, kept as given;
 * a name it does not have is refused with the key. */
static void config_takes_merge_allow_fields(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("merge_allow_fields = android_log, "
                  "interned_data.v8_isolate\n", &c);
  assert_string_equal(c.merge_allow_fields,
                      "android_log, interned_data.v8_isolate");
  tg_coll_config_free(&c);
  expect_extra_error("merge_allow_fields = android_log,no_such_field\n", 4,
                     "merge_allow_fields: expected");
}

/* merge_app_tracks: joined by default, or machines; nothing else. */
static void config_takes_merge_app_tracks(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("", &c);
  assert_int_equal(c.merge_app_tracks, TG_COLL_APP_TRACKS_JOINED);
  tg_coll_config_free(&c);
  expect_extra_ok("merge_app_tracks = machines\n", &c);
  assert_int_equal(c.merge_app_tracks, TG_COLL_APP_TRACKS_MACHINES);
  tg_coll_config_free(&c);
  expect_extra_ok("merge_app_tracks = joined\n", &c);
  assert_int_equal(c.merge_app_tracks, TG_COLL_APP_TRACKS_JOINED);
  tg_coll_config_free(&c);
  expect_extra_error("merge_app_tracks = both\n", 4,
                     "merge_app_tracks: expected");
}

/* merge_clock_from_requests: true by default, or false; nothing else. */
static void config_takes_merge_clock_from_requests(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("", &c);
  assert_true(c.merge_clock_from_requests);
  tg_coll_config_free(&c);
  expect_extra_ok("merge_clock_from_requests = false\n", &c);
  assert_false(c.merge_clock_from_requests);
  tg_coll_config_free(&c);
  expect_extra_ok("merge_clock_from_requests = true\n", &c);
  assert_true(c.merge_clock_from_requests);
  tg_coll_config_free(&c);
  expect_extra_error("merge_clock_from_requests = on\n", 4,
                     "merge_clock_from_requests: expected");
}

static void config_comments_need_a_blank_before_their_hash(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("   # indented comment\n#catalog = mysql://x\n"
                  "catalog = postgres://u:p#w@db#x # the catalog\n"
                  "ui_url = https://ui/#!/viewer\t# tab before the hash\n",
                  &c);
  assert_string_equal(c.catalog, "postgres://u:p#w@db#x");
  assert_string_equal(c.ui_url, "https://ui/#!/viewer");
  tg_coll_config_free(&c);
}

static void config_resolves_relative_paths(void **state) {
  (void)state;
  tg_coll_config_t c;
  static const char text[] = "hosts = h\ntrace_config = ./t.pbtxt\n"
                             "store = /abs/store\n";
  const size_t len = strlen(text);
  char e[256];
  assert_int_equal(tg_coll_config_parse(text, len, LABEL, "/etc/tg/", &c, NULL,
                                        NULL, e, sizeof(e)),
                   0);
  assert_string_equal(c.hosts, "/etc/tg/h");
  assert_string_equal(c.trace_config, "/etc/tg/./t.pbtxt");
  assert_string_equal(c.store, "/abs/store");
  tg_coll_config_free(&c);
  assert_int_equal(tg_coll_config_parse(text, len, LABEL, "/", &c, NULL, NULL,
                                        e, sizeof(e)),
                   0);
  assert_string_equal(c.hosts, "/h");
  tg_coll_config_free(&c);
  assert_int_equal(tg_coll_config_parse(text, len, LABEL, "conf.d", &c, NULL,
                                        NULL, e, sizeof(e)),
                   0);
  assert_string_equal(c.hosts, "conf.d/h");
  tg_coll_config_free(&c);
  assert_int_equal(tg_coll_config_parse(text, len, LABEL, NULL, &c, NULL, NULL,
                                        e, sizeof(e)),
                   0);
  assert_string_equal(c.hosts, "h");
  tg_coll_config_free(&c);

  /* 1024 bytes once resolved, not one more: "/etc/tg/" is 8 of them. */
  char name[1100], line[1200];
  memset(name, 'p', 1016);
  name[1016] = 0;
  snprintf(line, sizeof(line), "ca = %s\ncert = c\nkey = k\n", name);
  expect_extra_ok(line, &c);
  assert_int_equal(strlen(c.ca), 1024);
  tg_coll_config_free(&c);
  name[1016] = 'p';
  name[1017] = 0;
  snprintf(line, sizeof(line), "ca = %s\n", name);
  expect_extra_error(line, 4, "ca: expected");
}

static void config_listen_beyond_loopback_needs_https(void **state) {
  (void)state;
  static const struct {
    const char *listen;
    const char *host;
    bool loopback;
  } ok[] = {
      {"127.0.0.1:7468", "127.0.0.1", true},
      {"127.8.9.10:1", "127.8.9.10", true},
      {"localhost:0", "localhost", true},
      {"LocalHost:80", "LocalHost", true},
      {"[::1]:65535", "::1", true},
      {"[::ffff:127.0.0.2]:7468", "::ffff:127.0.0.2", true},
  };
  tg_coll_config_t c;
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    char extra[128];
    snprintf(extra, sizeof(extra), "listen = %s\n", ok[i].listen);
    expect_extra_ok(extra, &c);
    assert_string_equal(c.listen_host, ok[i].host);
    assert_true(c.listen_loopback);
    tg_coll_config_free(&c);
  }
  const char *outside[] = {"0.0.0.0:7468", "[::]:7468", "10.1.2.3:7468",
                           "collector.example:443", "128.0.0.1:1",
                           "localhost.example:1"};
  for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
    char extra[256];
    snprintf(extra, sizeof(extra), "\nlisten = %s\n", outside[i]);
    expect_extra_error(extra, 5, "listen: expected");
    snprintf(extra, sizeof(extra),
             "listen = %s\nhttp_cert = c\nhttp_key = k\nhttp_ca = a\n",
             outside[i]);
    expect_extra_ok(extra, &c);
    assert_false(c.listen_loopback);
    assert_true(c.https);
    tg_coll_config_free(&c);
  }
}

/* health_listen: any address (it serves /healthz only), HTTPS or not;
 * not listen's own address. */
static void config_health_listen(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("", &c);
  assert_string_equal(c.health_host, "");
  tg_coll_config_free(&c);
  expect_extra_ok("health_listen = 0.0.0.0:8080\n", &c);
  assert_string_equal(c.health_host, "0.0.0.0");
  assert_int_equal(c.health_port, 8080);
  tg_coll_config_free(&c);
  expect_extra_ok("listen = [::]:7468\nhttp_cert = c\nhttp_key = k\n"
                  "http_ca = a\nhealth_listen = [::]:7469\n", &c);
  assert_string_equal(c.health_host, "::");
  assert_int_equal(c.health_port, 7469);
  tg_coll_config_free(&c);
  expect_extra_error("listen = 127.0.0.1:7468\nhealth_listen = 127.0.0.1:7468\n",
                     5, "health_listen: expected another address");
}

/* The import check's keys: off by default, each value within its range. */
static void config_check_trace_processor(void **state) {
  (void)state;
  tg_coll_config_t *c = malloc(sizeof(*c));
  assert_non_null(c);
  expect_extra_ok("", c);
  assert_string_equal(c->check_trace_processor, "");
  assert_int_equal(c->check_timeout_ms, 600000);
  assert_int_equal(c->check_memory, 4ull << 30);
  tg_coll_config_free(c);
  expect_extra_ok("check_trace_processor = /opt/perfetto/trace_processor_shell\n"
                  "check_timeout = 90s\ncheck_memory = 2G\n", c);
  assert_string_equal(c->check_trace_processor,
                      "/opt/perfetto/trace_processor_shell");
  assert_int_equal(c->check_timeout_ms, 90000);
  assert_int_equal(c->check_memory, 2ull << 30);
  tg_coll_config_free(c);
  free(c);
  expect_extra_error("check_timeout = 500ms\n", 4, "check_timeout: expected");
  expect_extra_error("check_timeout = 2h\n", 4, "check_timeout: expected");
  expect_extra_error("check_memory = 1M\n", 4, "check_memory: expected");
}

/* symbolize and its keys: off by default; the debug dirs in the file's
 * order, relative ones against its directory, at most eight; the other
 * keys only with symbolize on; with a bucket too. */
static void config_symbolize(void **state) {
  (void)state;
  tg_coll_config_t *c = malloc(sizeof(*c));
  assert_non_null(c);
  expect_extra_ok("", c);
  assert_int_equal(c->symbolize, TG_COLL_SYMBOLIZE_OFF);
  assert_int_equal(c->n_symbolize_debug_dirs, 0);
  assert_int_equal(c->symbolize_timeout_ms, 600000);
  tg_coll_config_free(c);
  expect_extra_ok("symbolize = local\nsymbolize_debug_dir = /srv/dbg\n"
                  "symbolize_debug_dir = dbg\nsymbolize_timeout = 90s\n", c);
  assert_int_equal(c->symbolize, TG_COLL_SYMBOLIZE_LOCAL);
  assert_int_equal(c->n_symbolize_debug_dirs, 2);
  assert_string_equal(c->symbolize_debug_dirs[0], "/srv/dbg");
  assert_string_equal(c->symbolize_debug_dirs[1], "/etc/tg/dbg");
  assert_int_equal(c->symbolize_timeout_ms, 90000);
  tg_coll_config_free(c);
  expect_extra_ok("symbolize = debuginfod\n", c);
  assert_int_equal(c->symbolize, TG_COLL_SYMBOLIZE_DEBUGINFOD);
  assert_int_equal(c->symbolize_debuginfod_lookups, 256);
  assert_int_equal(c->symbolize_debuginfod_bytes, 1ull << 30);
  assert_int_equal(c->symbolize_debuginfod_time_ms, 120000);
  tg_coll_config_free(c);
  expect_extra_ok("symbolize = debuginfod\nsymbolize_debuginfod_lookups = 8\n"
                  "symbolize_debuginfod_bytes = 64M\n"
                  "symbolize_debuginfod_time = 30s\n", c);
  assert_int_equal(c->symbolize_debuginfod_lookups, 8);
  assert_int_equal(c->symbolize_debuginfod_bytes, 64u << 20);
  assert_int_equal(c->symbolize_debuginfod_time_ms, 30000);
  tg_coll_config_free(c);
  expect_extra_ok("symbolize = off\n", c);
  assert_int_equal(c->symbolize, TG_COLL_SYMBOLIZE_OFF);
  tg_coll_config_free(c);
  char nine[512] = "symbolize = local\n";
  for (int i = 0; i < 9; i++)
    strcat(nine, "symbolize_debug_dir = /d\n");
  expect_extra_error(nine, 13, "symbolize_debug_dir: expected at most 8");
  free(c);
  expect_extra_error("symbolize = on\n", 4, "symbolize: expected off, local");
  expect_extra_error("symbolize_debug_dir = /d\n", 4,
                     "symbolize_debug_dir: expected symbolize = local");
  expect_extra_error("symbolize_timeout = 1m\n", 4,
                     "symbolize_timeout: expected symbolize = local");
  expect_extra_error("symbolize = local\nsymbolize_timeout = 500ms\n", 5,
                     "symbolize_timeout: expected");
  expect_extra_error("symbolize = local\nsymbolize_timeout = 2h\n", 5,
                     "symbolize_timeout: expected");
  expect_extra_error("symbolize = local\nsymbolize_debuginfod_lookups = 8\n",
                     5, "symbolize_debuginfod_lookups: expected symbolize = "
                     "debuginfod");
  expect_extra_error("symbolize = debuginfod\n"
                     "symbolize_debuginfod_lookups = 0\n", 5,
                     "symbolize_debuginfod_lookups: expected");
  expect_extra_error("symbolize = debuginfod\n"
                     "symbolize_debuginfod_time = 2h\n", 5,
                     "symbolize_debuginfod_time: expected");
  c = malloc(sizeof(*c));
  assert_non_null(c);
  expect_extra_ok("symbolize = local\nbucket = s3://bkt\n", c);
  assert_int_equal(c->symbolize, TG_COLL_SYMBOLIZE_LOCAL);
  assert_string_equal(c->s3_bucket, "bkt");
  tg_coll_config_free(c);
  free(c);
}


static void config_key_triples_go_together(void **state) {
  (void)state;
  expect_extra_error("\ncert = c\nca = a\n", 5, "cert: expected");
  expect_extra_error("http_ca = a\nhttp_key = k\n", 4, "http_ca: expected");
  expect_extra_error("authz = authz.conf\n", 4, "authz: expected");
  expect_extra_error("http_crl = crl.pem\n", 4, "http_crl: expected");
  tg_coll_config_t c;
  expect_extra_ok("key = k\ncert = c\nca = a\n", &c);
  assert_true(c.tls);
  assert_false(c.https);
  tg_coll_config_free(&c);
}

static void config_never_echoes_the_catalog(void **state) {
  (void)state;
  const char *bad[] = {"mysql://user:hunter2@db",
                       "postgres://user:hunter2 @db",
                       "postgresql://user:hunter2\x7f@db", "hunter2"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char extra[256];
    snprintf(extra, sizeof(extra), "catalog = %s\n", bad[i]);
    expect_extra_error(extra, 4, "catalog: expected");
    assert_null(strstr(err, "hunter2"));
  }
  /* Twice: the error is about the key, not the value. */
  expect_extra_error("catalog = sqlite\ncatalog = postgres://u:hunter2@db\n", 5,
                     "catalog: expected once");
  assert_null(strstr(err, "hunter2"));
}

static void config_triggers_name_groups_defined_anywhere(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("trigger = early db\ngroup = db h1 h2\n", &c);
  assert_string_equal(c.triggers[0].group, "db");
  tg_coll_config_free(&c);
  expect_extra_error("group = db h1\n\ntrigger = t1 db\ntrigger = t2 web\n", 7,
                     "trigger: expected");
  expect_extra_error("trigger = t1\ntrigger = t1 all\n", 5,
                     "trigger: expected a new name");
  expect_extra_error("group = db h1\ngroup = db h2\n", 5,
                     "group: expected a new name");
}

static void config_reserves_group_all(void **state) {
  (void)state;
  expect_extra_error("group = all h1\n", 4, "group: expected");
  tg_coll_config_t c;
  expect_extra_ok("group = All h1\ntrigger = t all\n", &c);
  assert_string_equal(c.triggers[0].group, "all");
  assert_true(tg_coll_config_group_has(&c, "all", "h9"));
  assert_false(tg_coll_config_group_has(&c, "All", "h9"));
  tg_coll_config_free(&c);
}

/* REQUIRED and |n| lines from |line(i)|, in a heap buffer. */
static char *many(size_t n, void (*line)(char *, size_t, size_t)) {
  size_t cap = strlen(REQUIRED) + n * 64 + 1;
  char *text = malloc(cap);
  assert_non_null(text);
  size_t off = (size_t)snprintf(text, cap, REQUIRED);
  for (size_t i = 0; i < n; i++) {
    line(text + off, cap - off, i);
    off += strlen(text + off);
  }
  return text;
}

static void group_line(char *out, size_t cap, size_t i) {
  snprintf(out, cap, "group = g%zu h%zu\n", i, i);
}
static void trigger_line(char *out, size_t cap, size_t i) {
  snprintf(out, cap, "trigger = t%zu\n", i);
}
static void hosts_line(char *out, size_t cap, size_t i) {
  /* 16 hosts a group. */
  snprintf(out, cap, "group = g%zu a b c d e f g h i j k l m n o p\n", i);
}

static void config_enforces_its_limits(void **state) {
  (void)state;
  tg_coll_config_t c;
  char *text = many(TG_COLL_CONFIG_GROUPS_MAX, group_line);
  assert_int_equal(parse(text, &c), 0);
  assert_int_equal(c.n_groups, TG_COLL_CONFIG_GROUPS_MAX);
  tg_coll_config_free(&c);
  free(text);
  text = many(TG_COLL_CONFIG_GROUPS_MAX + 1, group_line);
  expect_error(text, 3 + TG_COLL_CONFIG_GROUPS_MAX + 1, "group: expected");
  free(text);

  text = many(TG_COLL_CONFIG_TRIGGERS_MAX, trigger_line);
  assert_int_equal(parse(text, &c), 0);
  tg_coll_config_free(&c);
  free(text);
  text = many(TG_COLL_CONFIG_TRIGGERS_MAX + 1, trigger_line);
  expect_error(text, 3 + TG_COLL_CONFIG_TRIGGERS_MAX + 1, "trigger: expected");
  free(text);

  /* 4096 hosts are 256 groups of 16; one host more is refused. */
  text = many(TG_COLL_CONFIG_GROUP_HOSTS_MAX / 16, hosts_line);
  assert_int_equal(parse(text, &c), 0);
  tg_coll_config_free(&c);
  strcpy(strrchr(text, '\n'), " q\n");
  expect_error(text, 3 + TG_COLL_CONFIG_GROUP_HOSTS_MAX / 16,
               "group: expected");
  free(text);

  /* A host of 320 bytes, and of 321. */
  char line[700];
  int w = snprintf(line, sizeof(line), "group = g %0320d\n", 7);
  assert_int_equal(w, 331);
  expect_extra_ok(line, &c);
  assert_int_equal(strlen(c.groups[0].hosts[0]), 320);
  tg_coll_config_free(&c);
  snprintf(line, sizeof(line), "group = g %0321d\n", 7);
  expect_extra_error(line, 4, "group: expected");

  /* A line of 4096 bytes is fine (with its CRLF too), one of 4097 not. */
  char *big = malloc(8192);
  assert_non_null(big);
  int pre = snprintf(big, 8192, REQUIRED "x = ");
  memset(big + pre, 'v', 4092);
  memcpy(big + pre + 4092, "\r\n", 3);
  assert_int_equal(parse(big, &c), 0);
  tg_coll_config_free(&c);
  memcpy(big + pre + 4092, "v\n", 3);
  expect_error(big, 4, "line longer");
  free(big);

  static const char nul[] = REQUIRED "shard = 0/1\0\n";
  assert_int_equal(parse_n(nul, sizeof(nul) - 1, &c), -EINVAL);
  assert_prefix(err, LABEL ":4: a NUL byte");

  size_t huge = TG_COLL_CONFIG_FILE_MAX + 1;
  char *blank_lines = malloc(huge);
  assert_non_null(blank_lines);
  memset(blank_lines, '\n', huge);
  assert_int_equal(parse_n(blank_lines, huge, &c), -EFBIG);
  assert_prefix(err, LABEL ": ");
  free(blank_lines);
}

static void config_reads_crlf_files(void **state) {
  (void)state;
  static const char text[] = "\xef\xbb\xbfhosts = h\r\n\r\n# c\r\n"
                             "trace_config = t # x\r\nstore = s\r\n"
                             "group = db a b\r\ntrigger = t db\r\n";
  tg_coll_config_t c;
  assert_int_equal(parse(text, &c), 0);
  assert_int_equal(warned.n, 0);
  assert_string_equal(c.hosts, "/etc/tg/h");
  assert_string_equal(c.trace_config, "/etc/tg/t");
  assert_string_equal(c.store, "/etc/tg/s");
  assert_string_equal(c.groups[0].hosts[1], "b");
  assert_string_equal(c.triggers[0].group, "db");
  tg_coll_config_free(&c);
  /* A bare CR inside a line is data, and no path's. */
  expect_extra_error("ca = a\rb\n", 4, "ca: expected");
}

static void config_truncates_errors_to_the_buffer(void **state) {
  (void)state;
  tg_coll_config_t c;
  char small[12];
  assert_int_equal(tg_coll_config_parse("shard = x\n", 10, LABEL, NULL, &c,
                                        NULL, NULL, small, sizeof(small)),
                   -EINVAL);
  assert_string_equal(small, "collector.c");
  assert_int_equal(tg_coll_config_parse("shard = x\n", 10, LABEL, NULL, &c,
                                        NULL, NULL, NULL, 0),
                   -EINVAL);
}

static void config_loads_a_file_relative_to_its_directory(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_config_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof(path), "%s/collector.conf", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(REQUIRED "group = db h1\nunknown = 1\n", f);
  fclose(f);
  tg_coll_config_t c;
  char e[512];
  memset(&warned, 0, sizeof(warned));
  assert_int_equal(
      tg_coll_config_load(path, &c, on_warn, &warned, e, sizeof(e)), 0);
  char want[256];
  snprintf(want, sizeof(want), "%s/fleet.hosts", dir);
  assert_string_equal(c.hosts, want);
  snprintf(want, sizeof(want), "%s:5: unknown key 'unknown' (ignored)", path);
  assert_string_equal(warned.last, want);
  tg_coll_config_free(&c);

  f = fopen(path, "w");
  assert_non_null(f);
  fputs("hosts = h\nshard = 2/2\n", f);
  fclose(f);
  assert_int_equal(tg_coll_config_load(path, &c, NULL, NULL, e, sizeof(e)),
                   -EINVAL);
  snprintf(want, sizeof(want), "%s:2: shard: expected", path);
  assert_prefix(e, want);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(tg_coll_config_load(path, &c, NULL, NULL, e, sizeof(e)),
                   -ENOENT);
  assert_prefix(e, path);
  assert_int_equal(rmdir(dir), 0);
}

/* A FIFO (or any file but a regular one) named as the config is refused
 * at once, without a writer and without waiting for one: opening or
 * reading it would block the daemon for good. alarm() bounds the test if
 * it does block. */
static void config_refuses_a_fifo_without_blocking(void **state) {
  (void)state;
  char dir[] = "/tmp/tg_config_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof(path), "%s/collector.conf", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  tg_coll_config_t c;
  char e[512];
  alarm(10);
  int rv = tg_coll_config_load(path, &c, NULL, NULL, e, sizeof(e));
  /* And with a writer that never closes: read() would wait for it. */
  int w = open(path, O_RDWR | O_CLOEXEC);
  assert_true(w >= 0);
  int rv_open = tg_coll_config_load(path, &c, NULL, NULL, e, sizeof(e));
  alarm(0);
  close(w);
  assert_int_equal(rv, -EINVAL);
  assert_int_equal(rv_open, -EINVAL);
  assert_prefix(e, path);
  /* A directory too. */
  assert_int_equal(tg_coll_config_load(dir, &c, NULL, NULL, e, sizeof(e)),
                   -EINVAL);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* --shard overrides the file's shard with the same syntax and range. */
static void config_shard_can_be_set_from_a_command_line(void **state) {
  (void)state;
  tg_coll_config_t c;
  tg_coll_config_defaults(&c);
  assert_int_equal(tg_coll_config_set_shard(&c, "2/3"), 0);
  assert_int_equal(c.shard_index, 2);
  assert_int_equal(c.shard_count, 3);
  const char *bad[] = {"3/3", "1/0", "01/3", "-1/3", "1/65537", "1", "1/2/3",
                       " 1/2", "1/2 ", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(tg_coll_config_set_shard(&c, bad[i]), -EINVAL);
    assert_int_equal(c.shard_index, 2); /* unchanged */
    assert_int_equal(c.shard_count, 3);
  }
  assert_int_equal(tg_coll_config_set_shard(&c, NULL), -EINVAL);
}

/* The bucket store's keys: the bucket and its prefix, the S3 ones only
 * with a bucket. */
static void config_bucket_and_its_keys(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("bucket = s3://tg-snaps/fleet/a\n"
                  "s3_endpoint = http://127.0.0.1:7480\n"
                  "s3_region = eu-west-1\n"
                  "s3_credentials_file = s3.keys\n"
                  "s3_presign = 15m\n",
                  &c);
  assert_int_equal(c.s3_presign_ms, 15 * 60 * 1000);
  assert_string_equal(c.s3_bucket, "tg-snaps");
  assert_string_equal(c.s3_prefix, "fleet/a/");
  assert_string_equal(c.s3_endpoint, "http://127.0.0.1:7480");
  assert_string_equal(c.s3_region, "eu-west-1");
  assert_string_equal(c.s3_credentials_file, "/etc/tg/s3.keys");
  tg_coll_config_free(&c);
  expect_extra_ok("bucket = s3://b.c-d\n", &c);
  assert_string_equal(c.s3_bucket, "b.c-d");
  assert_string_equal(c.s3_prefix, "");
  assert_string_equal(c.s3_region, "us-east-1");
  assert_string_equal(c.s3_endpoint, "");
  tg_coll_config_free(&c);
  expect_extra_ok("bucket = s3://bkt/p/\n", &c);
  assert_string_equal(c.s3_prefix, "p/");
  tg_coll_config_free(&c);
  /* Not set: no bucket. */
  expect_extra_ok("", &c);
  assert_string_equal(c.s3_bucket, "");
  tg_coll_config_free(&c);

  static const char *const bad[] = {
      "bucket = /var/lib/x\n",       "bucket = s3://\n",
      "bucket = s3://ab\n",          "bucket = s3://Upper\n",
      "bucket = s3://b_c\n",         "bucket = s3://bkt//p\n",
      "bucket = s3://bkt/a//b\n",    "s3_region = us east\n",
      "s3_endpoint = ftp://x\n",     "s3_presign = 8d\n",
      "s3_presign = 500ms\n",       "s3_presign = 59s\n",
      "s3_presign = 7d1s\n",        "s3_presign = yes\n",
      "s3_allow_plain_http = yes\n", "s3_allow_plain_http = 1\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char key[32];
    snprintf(key, sizeof key, "%.*s: expected", (int)strcspn(bad[i], " "),
             bad[i]);
    char text[128];
    snprintf(text, sizeof text, "bucket = s3://bkt\n%s", bad[i]);
    /* A bad bucket on line 4 itself, the others on line 5. */
    if (strncmp(bad[i], "bucket", 6) == 0) expect_extra_error(bad[i], 4, key);
    else expect_extra_error(text, 5, key);
  }
  expect_extra_error("bucket = s3://bkt\ns3_endpoint = http://h:1/path\n", 5,
                     "s3_endpoint: expected");
  /* The S3 keys without a bucket. */
  expect_extra_error("s3_region = eu-west-1\n", 4, "s3_region: expected bucket");
  expect_extra_error("s3_credentials_file = k\n", 4,
                     "s3_credentials_file: expected bucket");
  expect_extra_error("s3_presign = 1m\n", 4, "s3_presign: expected bucket");
  expect_extra_error("s3_allow_plain_http = true\n", 4,
                     "s3_allow_plain_http: expected bucket");
}

/* s3_presign: off unless asked; "on" is a short life, since no revocation
 * reaches a URL already handed out; a duration from 60s to 7d. */
static void config_presign_default_and_range(void **state) {
  (void)state;
  static const struct {
    const char *v;
    int64_t ms;
  } ok[] = {
      {"off", 0},
      {"0", 0},
      {"on", 15 * 60 * 1000},
      {"60s", 60 * 1000},
      {"1m", 60 * 1000},
      {"7d", 7LL * 24 * 3600 * 1000},
  };
  tg_coll_config_t c;
  expect_extra_ok("bucket = s3://bkt\n", &c);
  assert_int_equal(c.s3_presign_ms, 0);
  tg_coll_config_free(&c);
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "bucket = s3://bkt\ns3_presign = %s\n",
             ok[i].v);
    expect_extra_ok(text, &c);
    assert_int_equal(c.s3_presign_ms, ok[i].ms);
    tg_coll_config_free(&c);
  }
  assert_int_equal(TG_COLL_PRESIGN_DEFAULT_MS, 15 * 60 * 1000);
}

/* s3_endpoint over plain http: loopback only, unless the file says so;
 * https to anywhere. */
static void config_s3_plain_http_only_to_loopback(void **state) {
  (void)state;
  static const char *const ok[] = {
      "s3_endpoint = http://127.0.0.1:7480\n",
      "s3_endpoint = http://127.9.8.7\n",
      "s3_endpoint = http://[::1]:7480\n",
      "s3_endpoint = http://localhost:9000\n",
      "s3_endpoint = http://LOCALHOST\n",
      "s3_endpoint = https://s3.example.com\n",
      "s3_endpoint = https://10.0.0.5:7480\n",
      "s3_endpoint = https://[2001:db8::1]\n",
      "s3_endpoint = http://rgw.example.com:7480\n"
      "s3_allow_plain_http = true\n",
      "s3_allow_plain_http = true\n"
      "s3_endpoint = http://10.0.0.5\n",
  };
  static const char *const refused[] = {
      "s3_endpoint = http://rgw.example.com:7480\n",
      "s3_endpoint = http://10.0.0.5\n",
      "s3_endpoint = http://[2001:db8::1]:7480\n",
      "s3_endpoint = http://128.0.0.1\n",
      "s3_endpoint = http://localhost.evil.example\n",
      /* Not taken apart, so not loopback: a user part, a bad port. */
      "s3_endpoint = http://127.0.0.1@rgw.example.com\n",
      "s3_endpoint = http://127.0.0.1:x\n",
      "s3_endpoint = http://[::1\n",
      "s3_endpoint = http://10.0.0.5\n"
      "s3_allow_plain_http = false\n",
  };
  tg_coll_config_t c;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "bucket = s3://bkt\n%s", ok[i]);
    expect_extra_ok(text, &c);
    assert_int_equal(c.s3_allow_plain_http,
                     strstr(ok[i], "plain_http = true") != NULL);
    tg_coll_config_free(&c);
  }
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "bucket = s3://bkt\n%s", refused[i]);
    /* Named by the endpoint's key and line, whatever the order. */
    expect_extra_error(text, 5, "s3_endpoint: expected https://");
  }
}

/* perf_boost_*: off by default, read with their ranges, and the two
 * tuning keys refused without the window they tune. */
static void config_perf_boost_keys(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("", &c);
  assert_int_equal(c.perf_boost_window_ms, 0);
  assert_int_equal(c.perf_boost_frequency, 499);
  assert_int_equal(c.perf_boost_buffer, 8u << 20);
  tg_coll_config_free(&c);
  expect_extra_ok("perf_boost_window = 2s\nperf_boost_frequency = 20\n"
                  "perf_boost_buffer = 64K\n", &c);
  assert_int_equal(c.perf_boost_window_ms, 2000);
  assert_int_equal(c.perf_boost_frequency, 20);
  assert_int_equal(c.perf_boost_buffer, 64u << 10);
  tg_coll_config_free(&c);
  expect_extra_ok("perf_boost_window = 1m\nperf_boost_frequency = 4000\n"
                  "perf_boost_buffer = 1G\n", &c);
  assert_int_equal(c.perf_boost_window_ms, 60000);
  assert_int_equal(c.perf_boost_frequency, 4000);
  assert_int_equal(c.perf_boost_buffer, 1u << 30);
  tg_coll_config_free(&c);
  /* Off again, with its tuning kept. */
  expect_extra_ok("perf_boost_window = 0\nperf_boost_frequency = 999\n", &c);
  assert_int_equal(c.perf_boost_window_ms, 0);
  tg_coll_config_free(&c);

  static const char *const bad[] = {
      "perf_boost_window = 999ms",    "perf_boost_window = 61s",
      "perf_boost_window = 2",        "perf_boost_window = -1s",
      "perf_boost_frequency = 19",    "perf_boost_frequency = 4001",
      "perf_boost_frequency = 1.5",   "perf_boost_frequency = 0499",
      "perf_boost_buffer = 63K",      "perf_boost_buffer = 1025M",
      "perf_boost_buffer = 2s",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char key[48], text[128];
    snprintf(key, sizeof key, "%.*s: expected", (int)strcspn(bad[i], " "),
             bad[i]);
    snprintf(text, sizeof text, "perf_boost_window = 3s\n%s\n", bad[i]);
    /* A bad window on line 4 itself, the others on line 5. */
    if (strncmp(bad[i], "perf_boost_window", 17) == 0) {
      snprintf(text, sizeof text, "%s\n", bad[i]);
      expect_extra_error(text, 4, key);
    } else {
      expect_extra_error(text, 5, key);
    }
  }
  /* Not a whole KiB: the line that set it. */
  expect_extra_error("perf_boost_window = 3s\nperf_boost_buffer = 65537\n", 5,
                     "perf_boost_buffer: expected");
  /* Tuning without a window. */
  expect_extra_error("perf_boost_frequency = 999\n", 4,
                     "perf_boost_frequency: expected perf_boost_window");
  expect_extra_error("\nperf_boost_buffer = 16M\n", 5,
                     "perf_boost_buffer: expected perf_boost_window");
  expect_extra_error("perf_boost_window = 2s\nperf_boost_window = 3s\n", 5,
                     "perf_boost_window: expected once");
}

/* The boosts' budget: an hour, 10% a host and 5% the fleet by default,
 * read with their ranges; refused without perf_boost_window, and when a
 * share of the window cannot hold one boost (on the line that set it). */
static void config_perf_boost_budget_keys(void **state) {
  (void)state;
  tg_coll_config_t c;
  expect_extra_ok("perf_boost_window = 10s\n", &c);
  assert_int_equal(c.perf_boost_budget_window_ms, 3600 * 1000);
  assert_int_equal(c.perf_boost_host_percent, 10);
  assert_int_equal(c.perf_boost_fleet_percent, 5);
  tg_coll_config_free(&c);
  expect_extra_ok("perf_boost_window = 1s\nperf_boost_budget_window = 1m\n"
                  "perf_boost_host_percent = 2\n"
                  "perf_boost_fleet_percent = 100\n", &c);
  assert_int_equal(c.perf_boost_budget_window_ms, 60 * 1000);
  assert_int_equal(c.perf_boost_host_percent, 2);
  assert_int_equal(c.perf_boost_fleet_percent, 100);
  tg_coll_config_free(&c);
  /* Exactly one window: 1% of 1d is 864 s, 60 s fits; 1m at 100%. */
  expect_extra_ok("perf_boost_window = 1m\nperf_boost_budget_window = 1d\n"
                  "perf_boost_host_percent = 1\nperf_boost_fleet_percent = 1\n",
                  &c);
  tg_coll_config_free(&c);
  expect_extra_ok("perf_boost_window = 1m\nperf_boost_budget_window = 1m\n"
                  "perf_boost_host_percent = 100\n"
                  "perf_boost_fleet_percent = 100\n", &c);
  tg_coll_config_free(&c);

  static const char *const bad[] = {
      "perf_boost_budget_window = 59s", "perf_boost_budget_window = 2d",
      "perf_boost_budget_window = 0",   "perf_boost_host_percent = 0",
      "perf_boost_host_percent = 101",  "perf_boost_host_percent = 5%",
      "perf_boost_fleet_percent = 0",   "perf_boost_fleet_percent = 101",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char key[48], text[128];
    snprintf(key, sizeof key, "%.*s: expected", (int)strcspn(bad[i], " "),
             bad[i]);
    snprintf(text, sizeof text, "perf_boost_window = 3s\n%s\n", bad[i]);
    expect_extra_error(text, 5, key);
  }
  /* Without a boost to budget. */
  expect_extra_error("perf_boost_host_percent = 20\n", 4,
                     "perf_boost_host_percent: expected perf_boost_window");
  expect_extra_error("perf_boost_budget_window = 2h\n", 4,
                     "perf_boost_budget_window: expected perf_boost_window");
  /* A share that holds no boost: 1% of 1h is 36 s, under 60 s; 10% of
   * 1m is 6 s, under 10 s (the window's line: the shares are defaults). */
  expect_extra_error("perf_boost_window = 1m\nperf_boost_fleet_percent = 1\n",
                     5, "perf_boost_fleet_percent: expected 1%");
  expect_extra_error("perf_boost_window = 10s\nperf_boost_budget_window = 1m\n",
                     5, "perf_boost_host_percent: expected 10%");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_shard_can_be_set_from_a_command_line),
      cmocka_unit_test(config_reads_every_key),
      cmocka_unit_test(config_bucket_and_its_keys),
      cmocka_unit_test(config_presign_default_and_range),
      cmocka_unit_test(config_s3_plain_http_only_to_loopback),
      cmocka_unit_test(config_defaults_fill_what_is_not_set),
      cmocka_unit_test(config_names_the_missing_required_keys),
      cmocka_unit_test(config_refuses_bad_values_with_their_key_and_line),
      cmocka_unit_test(config_accepts_the_edges_of_each_range),
      cmocka_unit_test(config_takes_the_cli_spellings),
      cmocka_unit_test(config_refuses_overflowing_sizes_and_durations),
      cmocka_unit_test(config_refuses_a_scalar_key_twice),
      cmocka_unit_test(config_warns_of_unknown_keys_and_goes_on),
      cmocka_unit_test(config_comments_need_a_blank_before_their_hash),
      cmocka_unit_test(config_resolves_relative_paths),
      cmocka_unit_test(config_listen_beyond_loopback_needs_https),
      cmocka_unit_test(config_key_triples_go_together),
      cmocka_unit_test(config_health_listen),
      cmocka_unit_test(config_check_trace_processor),
      cmocka_unit_test(config_symbolize),
      cmocka_unit_test(config_never_echoes_the_catalog),
      cmocka_unit_test(config_triggers_name_groups_defined_anywhere),
      cmocka_unit_test(config_reserves_group_all),
      cmocka_unit_test(config_enforces_its_limits),
      cmocka_unit_test(config_reads_crlf_files),
      cmocka_unit_test(config_refuses_a_fifo_without_blocking),
      cmocka_unit_test(config_truncates_errors_to_the_buffer),
      cmocka_unit_test(config_loads_a_file_relative_to_its_directory),
      cmocka_unit_test(config_takes_merge_allow_fields),
      cmocka_unit_test(config_takes_merge_app_tracks),
      cmocka_unit_test(config_takes_merge_clock_from_requests),
      cmocka_unit_test(config_perf_boost_keys),
      cmocka_unit_test(config_perf_boost_budget_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
