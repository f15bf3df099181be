/* tracegate-collector over HTTPS with client certificates, as its users
 * reach it: `tracegate snapshot --collector https://...` end to end (two
 * hosts of the fleet harness, the collector a child with http_cert,
 * http_key, http_ca and authz from the fleet directory's tg-certs CA).
 *
 * What is asserted, from exit statuses and the --json reply: a record
 * identity's snapshot is complete, whether the collector is named by its
 * IP address or by the DNS name its certificate carries
 * (--tls-server-name: then the request's Host is that name); an observe
 * identity is refused (exit 1, no reply written); a CA the collector's
 * certificate does not chain to is refused before any request.
 *
 * A person's browser: headless Chromium with alice's `tg-certs p12`
 * bundle, set up as docs/collector.md says (browser_tls_check.py: its
 * docstring says how, and how it leaves no system file changed), shows
 * the page over HTTPS and pins a snapshot from it. Chromium, chromedriver
 * and pk12util come from Debian (deploy/deps.sh installs them); without
 * them this test fails and says so.
 *
 * health_listen: probes without a certificate get /healthz on a plain
 * port of its own and nothing else; the API's listener still refuses them.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "fleet_harness.h"
#include "test_proc.h"
#include "test_wait.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TG_BROWSER_TLS_CHECK_PATH
#error "TG_BROWSER_TLS_CHECK_PATH must name tests/collector/browser_tls_check.py"
#endif

#define CHROMIUM "/usr/bin/chromium"
#define CHROMEDRIVER "/usr/bin/chromedriver"
#define PK12UTIL "/usr/bin/pk12util"
/* The script's own waits are bounded well inside this. */
#define BROWSER_CHECK_MS 120000

/* The collector's HTTPS keys: the relays' host certificate (relay.test,
 * IP 127.0.0.1) serves it too, clients of the fleet's CA. */
#define HTTPS_CONFIG                                            \
  "http_cert = pki/relay.test.pem\nhttp_key = pki/relay.test.key\n" \
  "http_ca = pki/ca.pem\nauthz = http-authz\n"

static int group_setup(void **state) {
  (void)state;
  if (fleet_dir_create("coll-https") != 0) return -1;
  if (tg_test_certs(fleet_in_dir(""), "client pki olive --role observe") ||
      tg_test_certs(fleet_in_dir(""), "ca other")) {
    fleet_dir_teardown(state);
    return -1;
  }
  FILE *f = fopen(fleet_in_dir("http-authz"), "w");
  if (!f) return -1;
  fputs("alice record\nolive observe\n", f);
  if (fclose(f) != 0) return -1;
  /* alice's browser bundle, its passphrase with a blank in it. */
  f = fopen(fleet_in_dir("p12-pass"), "w");
  if (!f) return -1;
  fputs("correct horse\n", f);
  if (fclose(f) != 0) return -1;
  /* tg-certs refuses a pass file its group or others may read. */
  if (chmod(fleet_in_dir("p12-pass"), 0600) != 0) return -1;
  char args[300];
  snprintf(args, sizeof(args), "p12 pki alice --pass-file %s",
           fleet_in_dir("p12-pass"));
  return tg_test_certs(fleet_in_dir(""), args) ? -1 : 0;
}

static void dump_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- %s\n", path);
  while (fgets(line, sizeof(line), f)) fputs(line, stderr);
  fclose(f);
}

/* Answers |p|'s next flush (the snapshot's clone) as fleet_ack_flush(),
 * but a CLI |pid| that exits before any flush comes (its request refused:
 * no snapshot began) fails the test at once with its stderr |err| and the
 * collector's log, instead of after the flush's whole wait. */
static void ack_flush_unless_exited(raw_producer_t *p, pid_t pid,
                                    const char *err) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, 100);
    if (id > 0) {
      assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
      return;
    }
    siginfo_t si = {0};
    /* WNOWAIT: the child stays to be reaped by the caller. */
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == pid) {
      collector_dump_log();
      dump_file(err);
      fail_msg("tracegate snapshot exited before its snapshot began");
    }
    assert_true(tg_test_now_ms() < end);
  }
}

typedef struct cli_tls {
  const char *who;         /* pki/WHO.pem and .key */
  const char *ca;          /* a path in the fleet directory */
  const char *server_name; /* --tls-server-name, or NULL */
} cli_tls_t;

/* `tracegate snapshot --collector https://127.0.0.1:PORT` as |t| says,
 * --json |json|, its stderr into |err|, while the first |n_ack| hosts'
 * producers answer the clone's flush. Returns its exit status. */
static int cli_snapshot_https(const collector_t *c, fleet_host_t *hosts,
                              size_t n_ack, const cli_tls_t *t,
                              const char *json, const char *err) {
  char addr[64], ca[256], cert[256], key[256], name[64];
  snprintf(addr, sizeof(addr), "https://127.0.0.1:%d", c->port);
  snprintf(ca, sizeof(ca), "%s", fleet_in_dir(t->ca));
  snprintf(name, sizeof(name), "pki/%s.pem", t->who);
  snprintf(cert, sizeof(cert), "%s", fleet_in_dir(name));
  snprintf(name, sizeof(name), "pki/%s.key", t->who);
  snprintf(key, sizeof(key), "%s", fleet_in_dir(name));
  const char *argv[20] = {"snapshot", "--collector", addr, "--reason", "https",
                          "--json", json, "--ca", ca, "--cert", cert,
                          "--key", key, "--timeout", "60s"};
  size_t n = 15;
  if (t->server_name) {
    argv[n++] = "--tls-server-name";
    argv[n++] = t->server_name;
  }
  argv[n] = NULL;
  int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(efd >= 0);
  pid_t pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, argv, TG_TEST_FD_DEVNULL, efd);
  close(efd);
  assert_true(pid > 0);
  for (size_t i = 0; i < n_ack; i++) ack_flush_unless_exited(&hosts[i].p, pid, err);
  return tg_test_exit_code(tg_test_reap(pid, 90000));
}

/* Two hosts tracing and the collector on HTTPS. */
static void https_fleet_up(fleet_host_t h[2], collector_t *c,
                           const char *extra) {
  char config[1024];
  snprintf(config, sizeof(config), "%s%s", HTTPS_CONFIG, extra ? extra : "");
  start_hosts(h, 2);
  write_config(h, 2, config);
  collector_start(c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  char out[512];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("https-hosts.json"));
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(https_as(c, "alice", "GET", "/api/v1/hosts", out), 200);
    const char *a = tg_test_json(out, "hosts.0.state");
    const char *b = tg_test_json(out, "hosts.1.state");
    if (a && b && !strcmp(a, "\"tracing\"") && !strcmp(b, "\"tracing\"")) break;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

/* The CLI's snapshot over HTTPS: by address and by name a record
 * identity's is complete; an observe identity's and one that does not
 * trust the collector's CA are refused, nothing written. */
static void the_cli_snapshots_over_https(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  https_fleet_up(h, &c, NULL);
  fleet_commit_packets(&h[0].p, 0, "tlsA", 1, 3);
  fleet_commit_packets(&h[1].p, 0, "tlsB", 1, 2);

  char json[256], err[256];
  snprintf(json, sizeof(json), "%s", fleet_in_dir("https1.json"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("https1.err"));
  const cli_tls_t by_ip = {"alice", "pki/ca.pem", NULL};
  int code = cli_snapshot_https(&c, h, 2, &by_ip, json, err);
  if (code != 0) collector_dump_log(), dump_file(err);
  assert_int_equal(code, 0);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.trigger", "\"operator\"");
  assert_json(json, "snapshot.reason", "\"https\"");
  assert_json(json, "snapshot.hosts", "2");
  assert_json(json, "snapshot.hosts_failed", "0");

  /* By the name the certificate carries: the Host is relay.test. */
  snprintf(json, sizeof(json), "%s", fleet_in_dir("https2.json"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("https2.err"));
  const cli_tls_t by_name = {"alice", "pki/ca.pem", "relay.test"};
  code = cli_snapshot_https(&c, h, 2, &by_name, json, err);
  if (code != 0) collector_dump_log(), dump_file(err);
  assert_int_equal(code, 0);
  assert_json(json, "snapshot.state", "\"complete\"");
  assert_json(json, "snapshot.hosts", "2");

  /* observe may read, not trigger: the collector's 403, exit 1. */
  snprintf(json, sizeof(json), "%s", fleet_in_dir("https3.json"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("https3.err"));
  const cli_tls_t observer = {"olive", "pki/ca.pem", NULL};
  assert_int_equal(cli_snapshot_https(&c, h, 0, &observer, json, err), 1);
  assert_int_equal(access(json, F_OK), -1);

  /* The collector's certificate checked against another CA: refused in
   * the handshake, exit 1, no request made. */
  snprintf(json, sizeof(json), "%s", fleet_in_dir("https4.json"));
  snprintf(err, sizeof(err), "%s", fleet_in_dir("https4.err"));
  const cli_tls_t wrong_ca = {"alice", "other/ca.pem", NULL};
  assert_int_equal(cli_snapshot_https(&c, h, 0, &wrong_ca, json, err), 1);
  assert_int_equal(access(json, F_OK), -1);

  /* The two complete snapshots are the CLI's, the refused made none. */
  char metrics[256];
  snprintf(metrics, sizeof(metrics), "%s", fleet_in_dir("https-metrics.txt"));
  assert_int_equal(https_as(&c, "alice", "GET", "/metrics", metrics), 200);
  assert_true(tg_test_wait_file_text(
      metrics, "tracegate_collector_snapshots_total{outcome=\"complete\"} 2\n", 0));
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* A person's browser with the tg-certs bundle: the page over HTTPS lists
 * a snapshot taken through the API, and a POST from the page pins it. */
static void a_browser_with_the_p12_bundle_uses_the_page(void **state) {
  (void)state;
  if (access(CHROMIUM, X_OK) != 0 || access(CHROMEDRIVER, X_OK) != 0 ||
      access(PK12UTIL, X_OK) != 0)
    fail_msg("%s, %s and %s are needed (Debian's chromium, chromium-driver "
             "and libnss3-tools): run deploy/deps.sh, which installs them",
             CHROMIUM, CHROMEDRIVER, PK12UTIL);
  fleet_host_t h[2];
  collector_t c;
  https_fleet_up(h, &c, NULL);
  char json[256];
  snprintf(json, sizeof(json), "%s", fleet_in_dir("browser-snap.json"));
  pid_t pid = http_spawn_as(&c, "alice", "POST", "/api/v1/snapshots?wait=1", json);
  for (size_t i = 0; i < 2; i++) fleet_ack_flush(&h[i].p);
  assert_int_equal(http_wait(pid, json), 200);
  assert_json(json, "snapshot.state", "\"complete\"");
  char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(json, "snapshot.id") + 1);

  char url[64], p12[256], pass[256], dir[256];
  snprintf(url, sizeof(url), "https://127.0.0.1:%d", c.port);
  snprintf(p12, sizeof(p12), "%s", fleet_in_dir("pki/alice.p12"));
  snprintf(pass, sizeof(pass), "%s", fleet_in_dir("p12-pass"));
  snprintf(dir, sizeof(dir), "%s", fleet_in_dir("browser-tls"));
  assert_int_equal(mkdir(dir, 0700), 0);
  const char *argv[] = {"/usr/bin/python3", TG_BROWSER_TLS_CHECK_PATH,
                        "--chromium", CHROMIUM, "--chromedriver", CHROMEDRIVER,
                        "--url", url, "--p12", p12, "--pass-file", pass,
                        "--issuer-cn", "tracegate CA pki", "--snapshot", id,
                        "--dir", dir, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = "/usr/bin/python3";
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  int code = tg_test_exit_code(tg_test_reap(pid, BROWSER_CHECK_MS));
  if (code != 0) collector_dump_log();
  assert_int_equal(code, 0);
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

/* health_listen: /healthz answered to a client without a certificate on
 * a plain port of its own, and nothing else there (404, 405); the API's
 * listener still refuses every client without one, /healthz included. */
static void the_health_listener_needs_no_certificate(void **state) {
  (void)state;
  fleet_host_t h[2];
  collector_t c;
  https_fleet_up(h, &c, "health_listen = 127.0.0.1:0\n");
  assert_true(c.health_port > 0);
  assert_int_not_equal(c.health_port, c.port);
  collector_t health = {.pid = c.pid, .port = c.health_port};
  char out[256];
  snprintf(out, sizeof(out), "%s", fleet_in_dir("health.json"));
  assert_int_equal(http(&health, "GET", "/healthz", out), 200);
  assert_json(out, "status", "\"ok\"");
  static const char *const others[] = {
      "/", "/index.html", "/app.js", "/metrics", "/api/v1/hosts",
      "/api/v1/snapshots", "/healthz/", "/healthz/../api/v1/hosts"};
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
    assert_int_equal(http(&health, "GET", others[i], out), 404);
  assert_int_equal(http(&health, "POST", "/api/v1/snapshots", out), 404);
  assert_int_equal(http(&health, "POST", "/healthz", out), 405);

  /* The API's listener: no certificate, no answer (the handshake is
   * refused), whatever the path; with one, /healthz as ever. */
  assert_int_equal(https_as(&c, "-", "GET", "/healthz", out), 0);
  assert_int_equal(https_as(&c, "-", "GET", "/api/v1/hosts", out), 0);
  assert_int_equal(http(&c, "GET", "/healthz", out), 0);
  assert_int_equal(https_as(&c, "olive", "GET", "/healthz", out), 200);
  /* The POST on the health port triggered nothing. */
  assert_int_equal(https_as(&c, "alice", "GET", "/metrics", out), 200);
  assert_true(tg_test_wait_file_text(out, "tracegate_collector_trigger_hits_total 0\n", 0));
  collector_stop(&c);
  fleet_host_stop(&h[0]);
  fleet_host_stop(&h[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(the_cli_snapshots_over_https),
      FLEET_TEST(a_browser_with_the_p12_bundle_uses_the_page),
      FLEET_TEST(the_health_listener_needs_no_certificate),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
