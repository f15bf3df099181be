/* The collector as a child of a test, and its API through tg-test-http
 * children (tests/support/http_req.c): see coll_e2e.h. */
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
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "raw_ipc.h"
#include "test_proc.h"
#include "test_wait.h"

/* A host spec, quoted, as a JSON answer spells it. */
#define HOST_ROW_MAX 96

#ifndef TRACEGATE_COLLECTOR_PATH
#error "TRACEGATE_COLLECTOR_PATH must name the tracegate-collector binary"
#endif

static void write_file(const char *path, const char *fmt, ...) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  assert_int_equal(fclose(f), 0);
}

void write_hosts(fleet_host_t *hosts, size_t n) {
  char tmp[256];
  snprintf(tmp, sizeof(tmp), "%s", fleet_in_dir("hosts.txt.new"));
  FILE *f = fopen(tmp, "w");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%s name=relay.test\n", hosts[i].spec);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(tmp, fleet_in_dir("hosts.txt")), 0);
}

void write_config(fleet_host_t *hosts, size_t n, const char *extra) {
  write_config_ca(hosts, n, "pki/ca.pem", extra);
}

void write_config_ca(fleet_host_t *hosts, size_t n, const char *ca,
                     const char *extra) {
  write_hosts(hosts, n);
  write_file(fleet_in_dir("flight.pbtxt"),
             "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"fleet.ds\" } }\n");
  write_file(fleet_in_dir("collector.conf"),
             "# the e2e test's collector\n"
             "hosts = hosts.txt\n"
             "ca = %s\n"
             "cert = pki/alice.pem\n"
             "key = pki/alice.key\n"
             "tls_server_name = relay.test\n"
             "trace_config = flight.pbtxt\n"
             "store = store\n"
             "listen = 127.0.0.1:0\n"
             "session_key = e2e-collector\n"
             "coalesce_window = 0s\n"
             "max_snapshots_per_minute = 100\n"
             "reconnect = 30s\n"
             "trigger = app-hit\n%s",
             ca, extra ? extra : "");
}

void collector_start(collector_t *c) { collector_start_args(c, NULL); }

void collector_start_args(collector_t *c, const char *const *extra) {
  collector_start_wrapped(c, NULL, NULL, extra);
}

void collector_start_wrapped(collector_t *c, const char *const *wrapper,
                             const char *collector, const char *const *extra) {
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", p[1]);
  int log = open(fleet_in_dir("collector.log"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(log >= 0);
  if (!collector) collector = TRACEGATE_COLLECTOR_PATH;
  const char *argv[32];
  size_t n = 0;
  for (size_t i = 0; wrapper && wrapper[i]; i++) {
    assert_true(n < 12);
    argv[n++] = wrapper[i];
  }
  argv[n++] = wrapper ? collector : "tracegate-collector";
  const char *own[] = {"--config", fleet_in_dir("collector.conf"),
                       "--ready-fd", fd, "--log-level", "debug"};
  for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) argv[n++] = own[i];
  for (size_t i = 0; extra && extra[i]; i++) {
    assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
    argv[n++] = extra[i];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = wrapper ? wrapper[0] : collector;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = log;
  s.stderr_fd = log;
  s.keep_fd = p[1];
  c->pid = tg_test_spawn(&s);
  assert_true(c->pid > 0);
  close(p[1]);
  close(log);
  char line[64];
  assert_int_equal(tg_test_wait_line(p[0], "ready ", FLEET_WAIT_MS, line, sizeof(line)), 1);
  close(p[0]);
  c->port = atoi(line + strlen("ready "));
  assert_true(c->port > 0);
  const char *health = strstr(line, " health ");
  c->health_port = health ? atoi(health + strlen(" health ")) : 0;
}

void collector_stop(collector_t *c) {
  int st = tg_test_stop(c->pid, SIGTERM, FLEET_WAIT_MS);
  int code = tg_test_exit_code(st);
  c->pid = 0;
  if (code != 0) {
    /* -1: still running FLEET_WAIT_MS after SIGTERM (then killed); its
     * log says what it was waiting for. */
    fprintf(stderr, "collector: %s %d after SIGTERM\n",
            code < 0 ? "killed, still running" : "exit", code);
    collector_dump_log();
  }
  assert_int_equal(code, 0);
}

pid_t http_spawn(const collector_t *c, const char *method,
                 const char *path, const char *out) {
  return http_spawn_as(c, NULL, method, path, out);
}

pid_t http_spawn_as(const collector_t *c, const char *who, const char *method,
                    const char *path, const char *out) {
  /* With a client (|who| not "-"): HTTPS, verified against the test CA,
   * presenting pki/WHO.pem. */
  char url[512], ca[256] = "-", cert[256] = "-", key[256] = "-";
  snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", who ? "https" : "http",
           c->port, path);
  if (who) {
    snprintf(ca, sizeof(ca), "%s", fleet_in_dir("pki/ca.pem"));
    if (strcmp(who, "-") != 0) {
      char name[64];
      snprintf(name, sizeof(name), "pki/%s.pem", who);
      snprintf(cert, sizeof(cert), "%s", fleet_in_dir(name));
      snprintf(name, sizeof(name), "pki/%s.key", who);
      snprintf(key, sizeof(key), "%s", fleet_in_dir(name));
    }
  }
  const char *argv[] = {"tg-test-http", url, method, out, ca, cert, key,
                        NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TG_TEST_HTTP_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  return pid;
}

void collector_dump_log(void) {
  FILE *f = fopen(fleet_in_dir("collector.log"), "r");
  if (!f) return;
  char line[1024];
  fprintf(stderr, "--- collector.log\n");
  while (fgets(line, sizeof(line), f)) fputs(line, stderr);
  fclose(f);
}

/* The number the request's script wrote to |out| + |suffix|. */
static long long answer_number(const char *out, const char *suffix) {
  char path[512], text[32] = "";
  snprintf(path, sizeof(path), "%s%s", out, suffix);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(text, sizeof(text), f));
  fclose(f);
  return atoll(text);
}

int http_wait(pid_t pid, const char *out) {
  int code = tg_test_exit_code(tg_test_reap(pid, 90000));
  if (code != 0) collector_dump_log();
  assert_int_equal(code, 0);
  return (int)answer_number(out, ".status");
}

long long http_length(const char *out) { return answer_number(out, ".length"); }

int https_as(const collector_t *c, const char *who, const char *method,
             const char *path, const char *out) {
  return http_wait(http_spawn_as(c, who, method, path, out), out);
}

int http(const collector_t *c, const char *method, const char *path,
                const char *out) {
  return http_wait(http_spawn(c, method, path, out), out);
}

void wait_hosts(const collector_t *c, size_t n, const char *state) {
  const char *out = fleet_in_dir("hosts.json");
  char want[64], key[64];
  snprintf(want, sizeof(want), "\"%s\"", state);
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", "/api/v1/hosts", out), 200);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
      snprintf(key, sizeof(key), "hosts.%zu.state", i);
      const char *v = tg_test_json(out, key);
      if (v && !strcmp(v, want)) ok++;
    }
    if (ok == n) return;
    assert_true(tg_test_now_ms() < end);
    usleep(100 * 1000);
  }
}

const char *snapshot(const collector_t *c, fleet_host_t *hosts,
                            size_t n_ack, const char *json) {
  pid_t pid = http_spawn(c, "POST", "/api/v1/snapshots?wait=1&reason=e2e", json);
  for (size_t i = 0; i < n_ack; i++) fleet_ack_flush(&hosts[i].p);
  assert_int_equal(http_wait(pid, json), 200);
  static char id[64];
  const char *v = tg_test_json(json, "snapshot.id");
  assert_non_null(v);
  assert_int_equal(strlen(v), 18); /* "0123456789abcdef" quoted */
  snprintf(id, sizeof(id), "%.16s", v + 1);
  return id;
}

const char *snapshot_killed_under_way(collector_t *c, fleet_host_t h[2],
                                      const char *reason, const char *json) {
  char path[128];
  snprintf(path, sizeof(path), "/api/v1/snapshots?reason=%s", reason);
  assert_int_equal(http(c, "POST", path, json), 202);
  static char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(json, "id") + 1);
  uint64_t flush[2];
  for (size_t i = 0; i < 2; i++) {
    flush[i] = raw_producer_wait_flush(&h[i].p, h[i].p.last_flush_id, FLEET_WAIT_MS);
    assert_true(flush[i] > 0);
  }
  assert_int_equal(tg_test_exit_code(tg_test_stop(c->pid, SIGKILL, FLEET_WAIT_MS)),
                   128 + SIGKILL);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_commit(&h[i].p, NULL, NULL, 0, flush[i]), 0);
  return id;
}

void download(const collector_t *c, const char *id, const char *out) {
  char path[128];
  snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace", id);
  assert_int_equal(http(c, "GET", path, out), 200);
}

void start_hosts(fleet_host_t *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay%zu.log", i);
    fleet_host_start(&h[i], fleet_in_dir(log), NULL);
    fleet_host_connect_producer(&h[i], "coll.producer", "fleet.ds", 4, 64, false);
  }
}

void fleet_up(fleet_host_t h[2], collector_t *c, const char *extra_config) {
  start_hosts(h, 2);
  write_config(h, 2, extra_config);
  collector_start(c);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&h[i].p, FLEET_WAIT_MS), 0);
  wait_hosts(c, 2, "tracing");
}


void edit_config(const char *from, const char *to) {
  const char *path = fleet_in_dir("collector.conf");
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char text[4096];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = 0;
  char *at = strstr(text, from);
  assert_non_null(at);
  char out[4200];
  snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - text), text, to,
           at + strlen(from));
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(out, f);
  assert_int_equal(fclose(f), 0);
}

void host_fire_trigger(fleet_host_t *h, const char *name) {
  char *names[1] = {(char *)name};
  Perfetto__Protos__ActivateTriggersRequest at =
      PERFETTO__PROTOS__ACTIVATE_TRIGGERS_REQUEST__INIT;
  at.n_trigger_names = 1;
  at.trigger_names = names;
  assert_int_equal(raw_call(&h->p.conn, "ActivateTriggers", &at.base, -1,
                            NULL, NULL, FLEET_WAIT_MS), 1);
}

void wait_snapshot_stored(const collector_t *c, const char *path,
                          const char *out) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", path, out), 200);
    const char *v = tg_test_json(out, "snapshot.state");
    assert_non_null(v);
    if (strcmp(v, "\"pending\"") != 0) return;
    if (tg_test_now_ms() >= end) collector_dump_log();
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
}

void wait_metric(const collector_t *c, const char *line, const char *out) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", "/metrics", out), 200);
    if (tg_test_wait_file_text(out, line, 0)) return;
    if (tg_test_now_ms() >= end) collector_dump_log();
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
}

const char *wait_listed(const collector_t *c, const char *query,
                        const char *out) {
  int64_t end = tg_test_now_ms() + FLEET_WAIT_MS;
  for (;;) {
    assert_int_equal(http(c, "GET", query, out), 200);
    const char *v = tg_test_json(out, "snapshots.0.id");
    if (v && strcmp(v, "null") != 0) break;
    if (tg_test_now_ms() >= end) collector_dump_log();
    assert_true(tg_test_now_ms() < end);
    usleep(50 * 1000);
  }
  static char id[32];
  snprintf(id, sizeof(id), "%.16s", tg_test_json(out, "snapshots.0.id") + 1);
  return id;
}

long long snapshot_row_link(const char *json, size_t row, const char *field) {
  char key[96];
  snprintf(key, sizeof(key), "hosts.%zu.links.%s", row, field);
  const char *v = tg_test_json(json, key);
  if (!v) fail_msg("%s: no %s", json, key);
  return atoll(v);
}

size_t snapshot_host_row(const char *json, const char *spec, size_t n) {
  char want[HOST_ROW_MAX], key[48];
  snprintf(want, sizeof(want), "\"%s\"", spec);
  for (size_t i = 0; i < n; i++) {
    snprintf(key, sizeof(key), "hosts.%zu.host", i);
    const char *v = tg_test_json(json, key);
    if (v && !strcmp(v, want)) return i;
  }
  fail_msg("%s: no host %s", json, spec);
  return 0;
}

uint8_t *coll_slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long len = ftell(f);
  assert_true(len >= 0);
  rewind(f);
  uint8_t *p = malloc((size_t)len + 1);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

void assert_same_file(const char *a, const char *b) {
  size_t na, nb;
  uint8_t *pa = coll_slurp(a, &na), *pb = coll_slurp(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(pa, pb, na);
  free(pa);
  free(pb);
}

int coll_run_cli(const char *bin, const char *const *argv, const char *err) {
  int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(efd >= 0);
  pid_t pid = tg_test_spawn_cli(bin, argv, TG_TEST_FD_DEVNULL, efd);
  close(efd);
  assert_true(pid > 0);
  return tg_test_exit_code(tg_test_reap(pid, 90000));
}
