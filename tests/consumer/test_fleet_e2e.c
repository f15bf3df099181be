/* Remote and fleet recording end to end: real tracegated services (with a
 * raw producer each, tests/support), real tracegate-relay processes in
 * front of them on loopback TLS ports, and the tracegate CLI as a child.
 *
 * Certificates are made at test time with deploy/certs/tg-certs: a CA, a
 * relay certificate for "relay.test" (every relay uses it; the CLI connects
 * to 127.0.0.1 with --tls-server-name relay.test) and a client "alice"
 * with the record role. A link cut goes through a TCP proxy in a thread of
 * this process; ssh is a script that runs the relay in --stdio mode.
 *
 * Every wait is on an event (a line from a child, a command from the
 * service, bytes through the proxy, a child's exit) with a deadline, and
 * every child is stopped at the end of its test. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_wait.h"
#include "tracegate/pb_wire.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_RELAY_PATH
#error "TRACEGATE_RELAY_PATH must name the tracegate-relay binary"
#endif

#define WAIT_MS 30000
#define MAX_HOSTS 3
#define BIG 1000 /* payload bytes of the packets of the link-cut test */

static char g_dir[128];

static const char *in_dir(const char *name) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

/* --- relays -------------------------------------------------------------------- */

typedef struct relay {
  pid_t pid;
  int port;
} relay_t;

/* Starts tracegate-relay on 127.0.0.1:0 for |consumer_sock| and waits for
 * its "ready PORT" line. Its log goes to |log|. */
static void relay_start(relay_t *r, const char *consumer_sock, const char *log) {
  int pfd[2];
  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(lfd >= 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  const char *argv[] = {
      "tracegate-relay", "--listen", "127.0.0.1:0", "--consumer-socket",
      consumer_sock, "--cert", in_dir("pki/relay.test.pem"), "--key",
      in_dir("pki/relay.test.key"), "--ca", in_dir("pki/ca.pem"), "--authz",
      in_dir("pki/authz"), "--ready-fd", fd, "--log-level", "info", NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stderr_fd = lfd;
  s.keep_fd = pfd[1];
  r->pid = tg_test_spawn(&s);
  close(lfd);
  close(pfd[1]);
  assert_true(r->pid > 0);
  char line[64] = "";
  int got = tg_test_wait_line(pfd[0], "ready", WAIT_MS, line, sizeof(line));
  close(pfd[0]);
  assert_int_equal(got, 1);
  assert_int_equal(sscanf(line, "ready %d", &r->port), 1);
}

static void relay_stop(relay_t *r) {
  if (r->pid <= 0) return;
  /* SIGTERM; the exit is an event (a pidfd), SIGKILL after 10 s. */
  tg_test_stop(r->pid, SIGTERM, 10000);
  r->pid = 0;
}

/* A host: a service, its relay, a producer. */
typedef struct host {
  test_service_t ts;
  relay_t relay;
  raw_producer_t p;
  bool has_p;
  char spec[64];
} host_t;

static void host_start(host_t *h, int i) {
  memset(h, 0, sizeof(*h));
  assert_int_equal(test_service_start(&h->ts), 0);
  char log[64];
  snprintf(log, sizeof(log), "relay%d.log", i);
  relay_start(&h->relay, h->ts.consumer_sock, in_dir(log));
  snprintf(h->spec, sizeof(h->spec), "127.0.0.1:%d", h->relay.port);
}

static void host_connect_producer(host_t *h, uint32_t page_kb, uint32_t smb_kb) {
  assert_int_equal(raw_producer_connect(&h->p, &h->ts, "fleet.producer",
                                        "fleet.ds", page_kb, smb_kb, false), 0);
  h->has_p = true;
}

static void host_drop_producer(host_t *h) {
  if (h->has_p) raw_producer_close(&h->p);
  h->has_p = false;
}

static void host_stop(host_t *h) {
  host_drop_producer(h);
  relay_stop(&h->relay);
  assert_int_equal(test_service_stop(&h->ts), 0);
}

/* --- the CLI as a child ----------------------------------------------------------- */

typedef struct child {
  pid_t pid;
  int err_fd;
  char err[32768];
  size_t n_err;
} child_t;

static void spawn_cli(child_t *c, const char *const *args) {
  memset(c, 0, sizeof(*c));
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  const char *argv[48] = {"tracegate"};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    assert_true(n < 47);
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_CLI_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = TG_TEST_FD_DEVNULL;
  s.stderr_fd = pe[1];
  s.default_sigint = true;
  c->pid = tg_test_spawn(&s);
  assert_true(c->pid > 0);
  close(pe[1]);
  c->err_fd = pe[0];
}

/* Collects stderr until the child closes it, then reaps it. Returns the
 * exit code, or -1 (after killing it) past the deadline. */
static int wait_cli(child_t *c) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  bool killed = false;
  while (c->err_fd >= 0) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) {
      killed = true;
      break;
    }
    struct pollfd p = {c->err_fd, POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = read(c->err_fd, c->err + c->n_err, sizeof(c->err) - 1 - c->n_err);
    if (r > 0) {
      c->n_err += (size_t)r;
      c->err[c->n_err] = 0;
      if (c->n_err + 1 < sizeof(c->err)) continue;
    }
    if (r < 0 && errno == EINTR) continue;
    close(c->err_fd);
    c->err_fd = -1;
  }
  if (c->err_fd >= 0) close(c->err_fd);
  c->err_fd = -1;
  /* stderr closed: the exit follows (at least a second's grace); after a
   * timeout it is killed at once. */
  int64_t left = deadline - tg_test_now_ms();
  int status = tg_test_reap(c->pid, killed ? 0 : left > 1000 ? (int)left : 1000);
  if (status == -1) killed = true;
  print_message("--- tracegate stderr ---\n%s------------------------\n", c->err);
  if (killed) return -1;
  assert_null(strstr(c->err, "Sanitizer"));
  assert_null(strstr(c->err, "runtime error"));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The TLS arguments every remote record takes. */
#define TLS_ARGS                                                         \
  "--tls-server-name", "relay.test", "--cert", in_dir("pki/alice.pem"), \
      "--key", in_dir("pki/alice.key"), "--ca", in_dir("pki/ca.pem")

/* --- producer steps ------------------------------------------------------------------ */

/* |n| test packets "tag" (values first..) in one chunk, committed. */
static void commit_packets(host_t *h, uint32_t chunk_id, const char *tag,
                           uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(&h->p, 0, 0, 1, chunk_id, tag, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&h->p, &page, &chunk, 1, 0), 0);
}

/* |n| packets of BIG payload bytes ("tag:" padded with 'x'), one chunk of a
 * page of at least 32 KiB. */
static void commit_big(host_t *h, uint32_t chunk_id, const char *tag,
                       uint32_t first, unsigned n) {
  enum { MAX = 24 };
  assert_true(n <= MAX);
  static uint8_t pk[MAX][BIG + 64];
  const uint8_t *frags[MAX];
  size_t lens[MAX];
  char str[BIG + 1];
  memset(str, 'x', BIG);
  str[BIG] = 0;
  memcpy(str, tag, strlen(tag));
  str[strlen(tag)] = ':';
  for (unsigned i = 0; i < n; i++) {
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), str, first + i);
    assert_true(lens[i] > 0);
    frags[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&h->p, 0, 0, TG_PAGE_DIV_1, 1, chunk_id,
                                            0, frags, lens, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&h->p, &page, &chunk, 1, 0), 0);
}

static void ack_flush(host_t *h) {
  uint64_t id = raw_producer_wait_flush(&h->p, h->p.last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(&h->p, NULL, NULL, 0, id), 0);
}

/* --- trace files ----------------------------------------------------------------------- */

typedef struct trace {
  Perfetto__Protos__TracePacket **pk;
  size_t n;
} trace_t;

/* Decodes |path|: every byte must belong to a whole Trace.packet. */
static void load_trace(const char *path, trace_t *t) {
  memset(t, 0, sizeof(*t));
  int fd = open(path, O_RDONLY);
  if (fd < 0) fail_msg("cannot open %s: %s", path, strerror(errno));
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(st.st_size > 0);
  uint8_t *buf = malloc((size_t)st.st_size);
  assert_non_null(buf);
  assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
  size_t cap = 0;
  const uint8_t *p = buf, *end = buf + st.st_size;
  while (p < end) {
    assert_int_equal(p[0], 0x0A);
    uint64_t len = 0;
    size_t k = tg_pb_read_varint(p + 1, end, &len);
    assert_true(k > 0);
    assert_true(len <= (uint64_t)(end - p - 1 - (ptrdiff_t)k));
    Perfetto__Protos__TracePacket *pk =
        perfetto__protos__trace_packet__unpack(NULL, (size_t)len, p + 1 + k);
    assert_non_null(pk);
    if (t->n == cap) {
      cap = cap ? cap * 2 : 256;
      t->pk = realloc(t->pk, cap * sizeof(*t->pk));
      assert_non_null(t->pk);
    }
    t->pk[t->n++] = pk;
    p += 1 + k + len;
  }
  free(buf);
}

static void free_trace(trace_t *t) { free_packets(t->pk, t->n); }

/* The test packets whose str starts with |tag| followed by ':' or the end. */
static bool has_tag(const Perfetto__Protos__TracePacket *pk, const char *tag) {
  if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING ||
      !pk->for_testing->str)
    return false;
  size_t l = strlen(tag);
  const char *s = pk->for_testing->str;
  return !strncmp(s, tag, l) && (s[l] == 0 || s[l] == ':');
}

static size_t count_tag(const trace_t *t, const char *tag) {
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) n += has_tag(t->pk[i], tag);
  return n;
}

/* The values of the |tag| packets are first, first + 1, ... in order. */
static void assert_values(const trace_t *t, const char *tag, uint32_t first,
                          size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (!has_tag(t->pk[i], tag)) continue;
    assert_true(k < n);
    assert_int_equal(t->pk[i]->for_testing->seq_value, first + k);
    k++;
  }
  assert_int_equal(k, n);
}

static bool has_unknown_field(const Perfetto__Protos__TracePacket *pk, uint32_t id) {
  for (size_t i = 0; i < pk->base.n_unknown_fields; i++)
    if (pk->base.unknown_fields[i].tag == id) return true;
  return false;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* --- fixtures ----------------------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "fleet") < 0) return -1;
  if (tg_test_certs(g_dir, "ca pki") ||
      tg_test_certs(g_dir, "host pki relay.test --ip 127.0.0.1") ||
      tg_test_certs(g_dir, "client pki alice --role record"))
    return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

/* --- (a) one remote host over TLS --------------------------------------------------------- */

static void remote_record_through_one_relay_over_tls(void **state) {
  (void)state;
  host_t h;
  host_start(&h, 0);
  host_connect_producer(&h, 4, 64);
  const char *out = in_dir("one.pftrace");
  const char *args[] = {"record", "-H", h.spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "1mb", "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  commit_packets(&h, 0, "one", 10, 6);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "ok,"));
  assert_non_null(strstr(c.err, "no data loss"));
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "one", 10, 6);
  /* One host and -o FILE: the packets as the service wrote them. */
  for (size_t i = 0; i < t.n; i++) assert_false(t.pk[i]->has_machine_id);
  free_trace(&t);
  unlink(out);

  /* The same relay answers query too. */
  const char *query[] = {"query", "-H", h.spec, TLS_ARGS, NULL};
  spawn_cli(&c, query);
  assert_int_equal(wait_cli(&c), 0);
  host_stop(&h);
}

/* Issue 15.8: no TLS flags. The files come from the environment, then
 * from the per-user config file; the hosts file names each relay's
 * certificate (the host is an IP address). */
static void tls_files_from_the_environment_and_a_name_per_host(void **state) {
  (void)state;
  host_t h;
  host_start(&h, 0);
  host_connect_producer(&h, 4, 64);
  char hosts[128], pki[3][256];
  snprintf(hosts, sizeof(hosts), "%s   name=relay.test  # by IP\n", h.spec);
  FILE *f = fopen(in_dir("named-hosts.txt"), "w");
  assert_non_null(f);
  fputs(hosts, f);
  fclose(f);
  snprintf(pki[0], sizeof(pki[0]), "%s", in_dir("pki/alice.pem"));
  snprintf(pki[1], sizeof(pki[1]), "%s", in_dir("pki/alice.key"));
  snprintf(pki[2], sizeof(pki[2]), "%s", in_dir("pki/ca.pem"));
  setenv("TRACEGATE_CERT", pki[0], 1);
  setenv("TRACEGATE_KEY", pki[1], 1);
  setenv("TRACEGATE_CA", pki[2], 1);
  char out[256];
  snprintf(out, sizeof(out), "%s", in_dir("env.pftrace"));
  const char *args[] = {"record", "--hosts", in_dir("named-hosts.txt"), "-o",
                        out, "-t", "0", "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  commit_packets(&h, 0, "env", 1, 3);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "env", 1, 3);
  free_trace(&t);
  unlink(out);
  unsetenv("TRACEGATE_CERT");
  unsetenv("TRACEGATE_KEY");
  unsetenv("TRACEGATE_CA");

  /* The config file: query needs only -H and the name. */
  char cfg_dir[256], cfg[1024];
  snprintf(cfg_dir, sizeof(cfg_dir), "%s", in_dir("xdg"));
  mkdir(cfg_dir, 0700);
  snprintf(cfg, sizeof(cfg), "%s/tracegate", cfg_dir);
  mkdir(cfg, 0700);
  snprintf(cfg, sizeof(cfg), "%s/tracegate/config", cfg_dir);
  f = fopen(cfg, "w");
  assert_non_null(f);
  fprintf(f, "# test\ncert = %s\nkey=%s\n  ca =  %s  \n", pki[0], pki[1], pki[2]);
  fclose(f);
  setenv("XDG_CONFIG_HOME", cfg_dir, 1);
  const char *query[] = {"query", "-H", h.spec, "--tls-server-name",
                         "relay.test", NULL};
  spawn_cli(&c, query);
  assert_int_equal(wait_cli(&c), 0);
  /* A typo in it is named, not ignored. */
  f = fopen(cfg, "w");
  assert_non_null(f);
  fprintf(f, "certt = %s\n", pki[0]);
  fclose(f);
  spawn_cli(&c, query);
  assert_int_not_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "config:1: unknown setting"));
  unsetenv("XDG_CONFIG_HOME");
  unlink(cfg);
  host_stop(&h);
}

/* --- (b) three hosts, merged and per host -------------------------------------------------- */

static const char *const tags[MAX_HOSTS] = {"h1", "h2", "h3"};

/* Starts a session on all three hosts, commits 4 + k packets on host k,
 * stops with Ctrl-C. */
static void record_three(host_t *hs, const char *const *args, int want_rc,
                         child_t *c) {
  for (int i = 0; i < MAX_HOSTS; i++) host_connect_producer(&hs[i], 4, 64);
  spawn_cli(c, args);
  for (int i = 0; i < MAX_HOSTS; i++) {
    assert_int_equal(raw_producer_wait_started(&hs[i].p, WAIT_MS), 0);
    commit_packets(&hs[i], 0, tags[i], 100 * (uint32_t)i, 4 + (unsigned)i);
  }
  kill(c->pid, SIGINT);
  for (int i = 0; i < MAX_HOSTS; i++) ack_flush(&hs[i]);
  assert_int_equal(wait_cli(c), want_rc);
  for (int i = 0; i < MAX_HOSTS; i++) host_drop_producer(&hs[i]);
}

static void check_merged(const char *path) {
  trace_t t;
  load_trace(path, &t);
  uint32_t mid_of[MAX_HOSTS] = {0};
  bool sysinfo[MAX_HOSTS + 1] = {0}, clock[MAX_HOSTS + 1] = {0},
       rcs[MAX_HOSTS + 1] = {0};
  /* sequence id -> machine id: no id may appear on two machines. */
  enum { MAXSEQ = 512 };
  uint32_t seq[MAXSEQ], seq_mid[MAXSEQ];
  size_t nseq = 0;
  for (size_t i = 0; i < t.n; i++) {
    Perfetto__Protos__TracePacket *pk = t.pk[i];
    uint32_t mid = pk->has_machine_id ? pk->machine_id : 0;
    /* Only the collector's own first packets are machine 0. */
    if (i >= 2) assert_true(mid >= 1 && mid <= MAX_HOSTS);
    for (int k = 0; k < MAX_HOSTS; k++) {
      if (!has_tag(pk, tags[k])) continue;
      if (!mid_of[k]) mid_of[k] = mid;
      assert_int_equal(mid_of[k], mid);
    }
    if (pk->optional_trusted_packet_sequence_id_case ==
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID) {
      uint32_t s = pk->trusted_packet_sequence_id;
      if (mid) assert_int_equal(s >> 20, mid);
      size_t j = 0;
      for (; j < nseq && seq[j] != s; j++) {
      }
      if (j == nseq) {
        assert_true(nseq < MAXSEQ);
        seq[nseq] = s;
        seq_mid[nseq++] = mid;
      }
      assert_int_equal(seq_mid[j], mid);
    }
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO &&
        pk->system_info->tracegate_hostname && mid <= MAX_HOSTS)
      sysinfo[mid] = true;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT &&
        mid <= MAX_HOSTS)
      clock[mid] = true;
    if (has_unknown_field(pk, 107) && mid <= MAX_HOSTS) rcs[mid] = true;
  }
  for (int k = 0; k < MAX_HOSTS; k++) {
    assert_int_equal(count_tag(&t, tags[k]), 4 + (size_t)k);
    assert_values(&t, tags[k], 100 * (uint32_t)k, 4 + (size_t)k);
    for (int j = 0; j < k; j++) assert_int_not_equal(mid_of[j], mid_of[k]);
  }
  /* The collector (machine 0) and every host have system info and clocks;
   * every host a RemoteClockSync (field 107) against the collector. */
  for (int m = 0; m <= MAX_HOSTS; m++) {
    assert_true(sysinfo[m]);
    assert_true(clock[m]);
    if (m) assert_true(rcs[m]);
  }
  free_trace(&t);
}

static void three_hosts_merged_and_one_file_each(void **state) {
  (void)state;
  host_t hs[MAX_HOSTS];
  for (int i = 0; i < MAX_HOSTS; i++) host_start(&hs[i], i);
  const char *merged = in_dir("merged.pftrace");
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, "-H",
                        hs[2].spec, TLS_ARGS, "-o", merged, "--merge", "-t", "0",
                        "-b", "1mb", "fleet.ds", NULL};
  child_t c;
  record_three(hs, args, 0, &c);
  assert_non_null(strstr(c.err, "from 3 hosts"));
  check_merged(merged);
  unlink(merged);

  /* -o DIR: one file per host, named after it, each with its own packets
   * as the service wrote them. Hosts from a file this time. */
  const char *dir = in_dir("per-host");
  char hosts[512];
  snprintf(hosts, sizeof(hosts), "# the fleet\n%s\n\n%s   # second\n%s\n",
           hs[0].spec, hs[1].spec, hs[2].spec);
  FILE *f = fopen(in_dir("hosts.txt"), "w");
  assert_non_null(f);
  fputs(hosts, f);
  fclose(f);
  const char *dargs[] = {"record", "--hosts", in_dir("hosts.txt"), TLS_ARGS,
                         "-o", dir, "-t", "0", "fleet.ds", NULL};
  record_three(hs, dargs, 0, &c);
  for (int k = 0; k < MAX_HOSTS; k++) {
    char path[256];
    snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[k].relay.port);
    trace_t t;
    load_trace(path, &t);
    for (int j = 0; j < MAX_HOSTS; j++)
      assert_int_equal(count_tag(&t, tags[j]), j == k ? 4 + (size_t)k : 0);
    free_trace(&t);
    unlink(path);
  }
  rmdir(dir);
  for (int i = 0; i < MAX_HOSTS; i++) host_stop(&hs[i]);
}

/* --- (c) one host down ------------------------------------------------------------------------- */

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t l = sizeof(a);
  assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
  close(s); /* nothing listens there now */
  return ntohs(a.sin_port);
}

static void a_host_down_fails_the_run_but_not_the_others(void **state) {
  (void)state;
  host_t hs[2];
  for (int i = 0; i < 2; i++) host_start(&hs[i], i);
  char down[64];
  snprintf(down, sizeof(down), "127.0.0.1:%d", free_port());
  const char *dir = in_dir("partial");
  const char *args[] = {"record", "-H", hs[0].spec, "-H", down, "-H", hs[1].spec,
                        TLS_ARGS, "-o", dir, "-t", "0", "fleet.ds", NULL};
  for (int i = 0; i < 2; i++) host_connect_producer(&hs[i], 4, 64);
  child_t c;
  spawn_cli(&c, args);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(raw_producer_wait_started(&hs[i].p, WAIT_MS), 0);
    commit_packets(&hs[i], 0, tags[i], 0, 3);
  }
  kill(c.pid, SIGINT);
  for (int i = 0; i < 2; i++) ack_flush(&hs[i]);
  assert_int_not_equal(wait_cli(&c), 0);
  /* The failed host is named, with the reason. */
  char want[128];
  snprintf(want, sizeof(want), "%s: FAILED: cannot connect", down);
  assert_non_null(strstr(c.err, want));
  assert_non_null(strstr(c.err, "1 of 3 hosts failed"));
  for (int i = 0; i < 2; i++) {
    char path[256];
    snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[i].relay.port);
    trace_t t;
    load_trace(path, &t);
    assert_values(&t, tags[i], 0, 3);
    free_trace(&t);
    unlink(path);
  }
  char dead[256];
  snprintf(dead, sizeof(dead), "%s/127.0.0.1_%s.pftrace", dir, strchr(down, ':') + 1);
  assert_false(exists(dead));
  rmdir(dir);
  for (int i = 0; i < 2; i++) host_stop(&hs[i]);
}

/* --- (d) a link cut mid-session ------------------------------------------------------------------ */

/* A TCP proxy in a thread: forwards every accepted connection to the
 * relay, counts the bytes going to the client, and on request cuts every
 * connection (it keeps accepting). */
typedef struct proxy {
  int listen_fd, port, target_port;
  int ctl[2];    /* 'c': cut, 'q': quit */
  int notify[2]; /* a byte after each accept and each forward to the client */
  pthread_t thread;
  atomic_ullong down_bytes;
  atomic_int accepted;
  int cli[8], up[8];
  int n;
} proxy_t;

static void proxy_cut_all(proxy_t *p) {
  for (int i = 0; i < p->n; i++) {
    close(p->cli[i]);
    close(p->up[i]);
  }
  p->n = 0;
}

static void proxy_notify(proxy_t *p) {
  char b = 1;
  ssize_t w = write(p->notify[1], &b, 1); /* full pipe: a wake-up is pending */
  (void)w;
}

static bool pump(int from, int to, atomic_ullong *count) {
  char buf[65536];
  ssize_t r = read(from, buf, sizeof(buf));
  if (r <= 0) return false;
  for (ssize_t off = 0; off < r;) {
    ssize_t w = write(to, buf + off, (size_t)(r - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += w;
  }
  if (count) atomic_fetch_add(count, (unsigned long long)r);
  return true;
}

static void *proxy_main(void *arg) {
  proxy_t *p = arg;
  for (;;) {
    struct pollfd fds[2 + 16];
    int nf = 0;
    fds[nf++] = (struct pollfd){p->ctl[0], POLLIN, 0};
    fds[nf++] = (struct pollfd){p->listen_fd, POLLIN, 0};
    for (int i = 0; i < p->n; i++) {
      fds[nf++] = (struct pollfd){p->cli[i], POLLIN, 0};
      fds[nf++] = (struct pollfd){p->up[i], POLLIN, 0};
    }
    if (poll(fds, (nfds_t)nf, -1) < 0) continue;
    if (fds[0].revents) {
      char cmd = 0;
      if (read(p->ctl[0], &cmd, 1) != 1 || cmd == 'q') break;
      proxy_cut_all(p);
      continue;
    }
    if (fds[1].revents) {
      int c = accept(p->listen_fd, NULL, NULL);
      int u = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)p->target_port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
      if (c >= 0 && p->n < 8 && connect(u, (struct sockaddr *)&a, sizeof(a)) == 0) {
        p->cli[p->n] = c;
        p->up[p->n++] = u;
        atomic_fetch_add(&p->accepted, 1);
        proxy_notify(p);
      } else {
        if (c >= 0) close(c);
        close(u);
      }
      continue;
    }
    for (int i = 0; i < p->n; i++) {
      bool ok = true;
      if (fds[2 + 2 * i].revents) ok = pump(p->cli[i], p->up[i], NULL);
      if (ok && fds[3 + 2 * i].revents) {
        ok = pump(p->up[i], p->cli[i], &p->down_bytes);
        proxy_notify(p);
      }
      if (!ok) { /* one side closed: close the pair */
        close(p->cli[i]);
        close(p->up[i]);
        p->cli[i] = p->cli[p->n - 1];
        p->up[i] = p->up[p->n - 1];
        p->n--;
        break; /* the poll set changed */
      }
    }
  }
  proxy_cut_all(p);
  return NULL;
}

static void proxy_start(proxy_t *p, int target_port) {
  memset(p, 0, sizeof(*p));
  p->target_port = target_port;
  p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(p->listen_fd, 8), 0);
  socklen_t l = sizeof(a);
  assert_int_equal(getsockname(p->listen_fd, (struct sockaddr *)&a, &l), 0);
  p->port = ntohs(a.sin_port);
  assert_int_equal(pipe(p->ctl), 0);
  assert_int_equal(pipe2(p->notify, O_NONBLOCK | O_CLOEXEC), 0);
  assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

static void proxy_send(proxy_t *p, char cmd) {
  assert_int_equal(write(p->ctl[1], &cmd, 1), 1);
}

static void proxy_stop(proxy_t *p) {
  proxy_send(p, 'q');
  pthread_join(p->thread, NULL);
  close(p->listen_fd);
  close(p->ctl[0]);
  close(p->ctl[1]);
  close(p->notify[0]);
  close(p->notify[1]);
}

/* Waits for the proxy's next event (bounded by |deadline|). */
static void proxy_wait(proxy_t *p, int64_t deadline) {
  int64_t left = deadline - tg_test_now_ms();
  assert_true(left > 0);
  struct pollfd pf = {p->notify[0], POLLIN, 0};
  if (poll(&pf, 1, (int)left) == 1) {
    char buf[256];
    while (read(p->notify[0], buf, sizeof(buf)) > 0) {
    }
  }
}

/* Waits until at least |n| more bytes went to the client than |base|. */
static void wait_down_bytes(proxy_t *p, unsigned long long base,
                            unsigned long long n) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (atomic_load(&p->down_bytes) < base + n) proxy_wait(p, deadline);
}

static void link_cut_mid_session_reconnects_and_keeps_everything(void **state) {
  (void)state;
  host_t h;
  host_start(&h, 0);
  host_connect_producer(&h, 32, 256);
  proxy_t px;
  proxy_start(&px, h.relay.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  const char *out = in_dir("cut.pftrace");
  /* Uncompressed, so that the bytes through the proxy count packets. */
  const char *args[] = {"record", "-H", spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--compress", "none", "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  /* Before the cut: 20 packets of 1 KB, and wait until they went through
   * the proxy to the CLI (the periodic reads fetch them). */
  unsigned long long base = atomic_load(&px.down_bytes);
  commit_big(&h, 0, "before", 0, 20);
  wait_down_bytes(&px, base, 20 * BIG);
  proxy_send(&px, 'c');
  /* After the cut: written while the CLI is away or back; either way the
   * session keeps it. */
  commit_big(&h, 1, "after", 0, 20);
  /* Stop once the CLI is through the proxy again. */
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (atomic_load(&px.accepted) < 2) proxy_wait(&px, deadline);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "lost the link"));
  assert_non_null(strstr(c.err, "reconnected and re-attached"));
  assert_non_null(strstr(c.err, "reconnected 1 time"));
  assert_non_null(strstr(c.err, "loss counters while disconnected: +0"));
  assert_non_null(strstr(c.err, "no data loss"));
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "before", 0, 20);
  assert_values(&t, "after", 0, 20);
  free_trace(&t);
  unlink(out);
  proxy_stop(&px);
  host_stop(&h);
}

/* Compression (the default): the same packets arrive, and the proxy in
 * the middle sees a fraction of their bytes; with --compress none it sees
 * them all. */
static unsigned long long record_through_proxy(const char *compress,
                                               const char *name) {
  host_t h;
  host_start(&h, 0);
  host_connect_producer(&h, 32, 256);
  proxy_t px;
  proxy_start(&px, h.relay.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  const char *out = in_dir(name);
  const char *args[] = {"record", "-H", spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--compress", compress, "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  for (uint32_t k = 0; k < 8; k++) commit_big(&h, k, "z", k * 20, 20);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "no data loss"));
  assert_null(strstr(c.err, "uncompressed"));
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "z", 0, 160);
  free_trace(&t);
  unlink(out);
  unsigned long long wire = atomic_load(&px.down_bytes);
  proxy_stop(&px);
  host_stop(&h);
  return wire;
}

static void compressed_stream_carries_every_packet_in_fewer_bytes(void **state) {
  (void)state;
  const unsigned long long trace_bytes = 160ull * BIG;
  unsigned long long zstd = record_through_proxy("zstd:3", "zstd.pftrace");
  unsigned long long plain = record_through_proxy("none", "plain.pftrace");
  print_message("160 KB of packets: %llu bytes on the wire compressed, %llu "
                "plain\n", zstd, plain);
  assert_true(plain > trace_bytes);
  assert_true(zstd * 3 < trace_bytes);
}

/* A DEFLATE config (compression_type) merged: the packets inside the
 * hosts' compressed_packets get their machine and sequence ids like any
 * other, so the merged file holds them plainly. */
static void merge_rewrites_packets_inside_compressed_packets(void **state) {
  (void)state;
  host_t h;
  host_start(&h, 0);
  host_connect_producer(&h, 32, 256);
  char cfg[200];
  snprintf(cfg, sizeof(cfg), "%s", in_dir("deflate.pbtxt"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 4096 }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "compression_type: COMPRESSION_TYPE_DEFLATE\n", f);
  fclose(f);
  const char *out = in_dir("deflate-merged.pftrace");
  const char *args[] = {"record", "-H", h.spec, TLS_ARGS, "-c", cfg, "--txt",
                        "-o", out, "--merge", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  for (uint32_t k = 0; k < 4; k++) commit_big(&h, k, "d", k * 20, 20);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "d", 0, 80);
  size_t tested = 0;
  for (size_t i = 0; i < t.n; i++) {
    assert_int_not_equal(t.pk[i]->data_case,
                         PERFETTO__PROTOS__TRACE_PACKET__DATA_COMPRESSED_PACKETS);
    if (t.pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING)
      continue;
    assert_int_equal(t.pk[i]->machine_id, 1);
    assert_true(t.pk[i]->trusted_packet_sequence_id > 1);
    tested++;
  }
  assert_int_equal(tested, 80);
  free_trace(&t);
  unlink(out);
  host_stop(&h);
}

/* --- (e) ssh ---------------------------------------------------------------------------------------- */

static void ssh_transport_runs_the_relay_in_stdio_mode(void **state) {
  (void)state;
  host_t h;
  memset(&h, 0, sizeof(h));
  assert_int_equal(test_service_start(&h.ts), 0);
  host_connect_producer(&h, 4, 64);
  /* "ssh" here: the relay in --stdio mode on this host's service; its
   * arguments (-o BatchMode=yes, user@host, the remote command) are
   * recorded for the check below. */
  const char *script = in_dir("fake-ssh");
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\necho \"$@\" > '%s'\nexec '%s' --stdio --consumer-socket "
          "'%s' --log-level warn\n", in_dir("ssh-args"), TRACEGATE_RELAY_PATH,
          h.ts.consumer_sock);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  setenv("TRACEGATE_SSH", script, 1);
  const char *out = in_dir("ssh.pftrace");
  const char *args[] = {"record", "-H", "ssh://tester@fakehost:2222", "-o", out,
                        "-t", "0", "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  unsetenv("TRACEGATE_SSH");
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  commit_packets(&h, 0, "ssh", 7, 5);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "ssh", 7, 5);
  free_trace(&t);
  unlink(out);
  char line[256] = "";
  f = fopen(in_dir("ssh-args"), "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  fclose(f);
  assert_non_null(strstr(line, "-p 2222 tester@fakehost tracegate-relay --stdio"));
  host_drop_producer(&h);
  assert_int_equal(test_service_stop(&h.ts), 0);
}

/* --- (f) a CLI that dies: its session taken back with --attach ------------------------- */

/* Reads the child's stderr until |needle| shows (bounded). Returns where
 * it starts in c->err. */
static const char *read_until(child_t *c, const char *needle) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  const char *at;
  while (!(at = strstr(c->err, needle))) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) fail_msg("no '%s' from tracegate:\n%s", needle, c->err);
    struct pollfd p = {c->err_fd, POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = read(c->err_fd, c->err + c->n_err, sizeof(c->err) - 1 - c->n_err);
    if (r <= 0) fail_msg("tracegate closed stderr before '%s':\n%s", needle, c->err);
    c->n_err += (size_t)r;
    c->err[c->n_err] = 0;
  }
  return at;
}

/* Issue 15.1 through relays: the names each host lacks, said once per name
 * with the hosts that lack it. Host 0 registers fleet.ds, host 1 nothing;
 * "fleet.dz" is a typo on both. */
static size_t count_str(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void unregistered_names_said_once_with_the_hosts_lacking_them(void **state) {
  (void)state;
  host_t hs[2];
  for (int i = 0; i < 2; i++) host_start(&hs[i], i);
  host_connect_producer(&hs[0], 4, 64);
  const char *merged = in_dir("names.pftrace");
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, TLS_ARGS,
                        "-o", merged, "--merge", "-t", "0", "-b", "1mb",
                        "fleet.ds", "fleet.dz", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&hs[0].p, WAIT_MS), 0);
  commit_packets(&hs[0], 0, "n0", 0, 3);
  /* Said once both hosts answered, just before the last one enables. */
  read_until(&c, "'fleet.dz' is not registered");
  kill(c.pid, SIGINT);
  ack_flush(&hs[0]);
  assert_int_equal(wait_cli(&c), 0);
  char want[256];
  snprintf(want, sizeof(want),
           "data source 'fleet.ds' is not registered on %s (", hs[1].spec);
  assert_non_null(strstr(c.err, want));
  snprintf(want, sizeof(want),
           "data source 'fleet.dz' is not registered on any host: %s, %s (",
           hs[0].spec, hs[1].spec);
  assert_non_null(strstr(c.err, want));
  /* The suggestion comes from the host that has the near name. */
  assert_non_null(strstr(c.err, "did you mean: fleet.ds?"));
  assert_int_equal(count_str(c.err, "'fleet.ds' is not registered"), 1);
  assert_int_equal(count_str(c.err, "'fleet.dz' is not registered"), 1);
  trace_t t;
  load_trace(merged, &t);
  assert_int_equal(count_tag(&t, "n0"), 3);
  free_trace(&t);
  unlink(merged);
  host_drop_producer(&hs[0]);
  for (int i = 0; i < 2; i++) host_stop(&hs[i]);
}

/* Past three hosts lacking a name: one summary line with a count and the
 * first three, not a line (or a list) per host. Four hosts: each relay
 * twice, by address and by name. */
static void many_hosts_lacking_a_name_give_one_summary_line(void **state) {
  (void)state;
  host_t hs[2];
  for (int i = 0; i < 2; i++) host_start(&hs[i], i);
  char specs[4][64];
  for (int i = 0; i < 2; i++) {
    snprintf(specs[2 * i], sizeof(specs[0]), "127.0.0.1:%d", hs[i].relay.port);
    snprintf(specs[2 * i + 1], sizeof(specs[0]), "localhost:%d", hs[i].relay.port);
  }
  const char *merged = in_dir("many.pftrace");
  const char *args[] = {"record", "-H", specs[0], "-H", specs[1], "-H", specs[2],
                        "-H", specs[3], TLS_ARGS, "-o", merged, "--merge", "-t",
                        "0", "-b", "1mb", "nope.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  char want[400];
  snprintf(want, sizeof(want),
           "data source 'nope.ds' is not registered on 4 of 4 hosts (%s, %s, "
           "%s, ...)", specs[0], specs[1], specs[2]);
  read_until(&c, want);
  kill(c.pid, SIGINT);
  wait_cli(&c);
  assert_int_equal(count_str(c.err, "'nope.ds' is not registered"), 1);
  unlink(merged);
  for (int i = 0; i < 2; i++) host_stop(&hs[i]);
}

/* Waits until the file |path| contains |needle| (a daemon's log: it has
 * no other way to say so), bounded. */
static void wait_log(const char *path, const char *needle) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  static char buf[65536];
  for (;;) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (strstr(buf, needle)) return;
    if (tg_test_now_ms() > deadline) fail_msg("no '%s' in %s", needle, path);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void killed_cli_session_taken_back_with_attach_and_merge(void **state) {
  (void)state;
  host_t h;
  host_start(&h, 5);
  host_connect_producer(&h, 4, 64);
  /* Copied: in_dir's buffers are reused by the calls below. */
  char out[256], merged[256];
  snprintf(out, sizeof(out), "%s", in_dir("killed.pftrace"));
  snprintf(merged, sizeof(merged), "%s", in_dir("taken-back.pftrace"));
  const char *args[] = {"record", "-H", h.spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "1mb", "fleet.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  /* The key is printed with the command that takes the session back. */
  const char *at = read_until(&c, "resume key ");
  char key[64] = "";
  assert_int_equal(sscanf(at, "resume key %63s", key), 1);
  assert_true(!strncmp(key, "tg-", 3));
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "record -H %s --attach %s)", h.spec, key);
  read_until(&c, cmd);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  kill(c.pid, SIGKILL);
  assert_int_equal(wait_cli(&c), 128 + SIGKILL);
  /* The relay keeps the session under the key once it saw the link go. */
  wait_log(in_dir("relay5.log"), "session detached under key");
  commit_packets(&h, 0, "post", 0, 10);

  const char *again[] = {"record", "-H", h.spec, TLS_ARGS, "--attach", key,
                         "-o", merged, "--merge", NULL};
  spawn_cli(&c, again);
  read_until(&c, "resume key ");
  commit_packets(&h, 1, "live", 0, 5);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "ok,"));
  trace_t t;
  load_trace(merged, &t);
  assert_values(&t, "post", 0, 10);
  assert_values(&t, "live", 0, 5);
  for (size_t i = 2; i < t.n; i++) assert_int_equal(t.pk[i]->machine_id, 1);
  free_trace(&t);
  unlink(merged);
  unlink(out);
  /* The first run's temporary file is what it had read; not ours to check. */
  host_stop(&h);
}

/* --- (g) a host whose session never ends: its deadline ------------------------------- */

static void stuck_host_fails_at_its_deadline_and_the_other_finishes(void **state) {
  (void)state;
  host_t hs[2];
  for (int i = 0; i < 2; i++) host_start(&hs[i], 6 + i);
  host_connect_producer(&hs[0], 4, 64);
  /* Host 2's producer says it will ack the stop, and never acks anything:
   * with long service timeouts its session never ends. */
  assert_int_equal(raw_producer_connect(&hs[1].p, &hs[1].ts, "stuck.producer",
                                        "fleet.ds", 4, 64, true), 0);
  hs[1].has_p = true;
  char cfg[200], dir[200];
  snprintf(cfg, sizeof(cfg), "%s", in_dir("stuck.pbtxt"));
  snprintf(dir, sizeof(dir), "%s", in_dir("deadline"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 }\n"
        "data_sources { config { name: \"fleet.ds\" } }\n"
        "duration_ms: 1000\n"
        "flush_timeout_ms: 60000\n"
        "data_source_stop_timeout_ms: 60000\n", f);
  fclose(f);
  const char *args[] = {"record", "-H", hs[0].spec, "-H", hs[1].spec, TLS_ARGS,
                        "-c", cfg, "--txt", "-o", dir, "--grace", "1s", NULL};
  child_t c;
  int64_t t0 = tg_test_now_ms();
  spawn_cli(&c, args);
  for (int i = 0; i < 2; i++)
    assert_int_equal(raw_producer_wait_started(&hs[i].p, WAIT_MS), 0);
  commit_packets(&hs[0], 0, "fine", 0, 3);
  ack_flush(&hs[0]); /* the service's own flush at the duration */
  assert_int_equal(wait_cli(&c), 1);
  int64_t took = tg_test_now_ms() - t0;
  assert_non_null(strstr(c.err, "1 of 2 hosts failed"));
  assert_non_null(strstr(c.err, "did not end by its deadline (duration 1s + grace 1s)"));
  /* Well before the service's own 60 s timeouts. */
  assert_true(took < 20000);
  char path[300];
  snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[0].relay.port);
  trace_t t;
  load_trace(path, &t);
  assert_values(&t, "fine", 0, 3);
  free_trace(&t);
  unlink(path);
  /* The stuck host's partial trace, if it kept one. */
  snprintf(path, sizeof(path), "%s/127.0.0.1_%d.pftrace", dir, hs[1].relay.port);
  unlink(path);
  rmdir(dir);
  for (int i = 0; i < 2; i++) host_stop(&hs[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(remote_record_through_one_relay_over_tls),
      cmocka_unit_test(tls_files_from_the_environment_and_a_name_per_host),
      cmocka_unit_test(three_hosts_merged_and_one_file_each),
      cmocka_unit_test(unregistered_names_said_once_with_the_hosts_lacking_them),
      cmocka_unit_test(many_hosts_lacking_a_name_give_one_summary_line),
      cmocka_unit_test(a_host_down_fails_the_run_but_not_the_others),
      cmocka_unit_test(link_cut_mid_session_reconnects_and_keeps_everything),
      cmocka_unit_test(compressed_stream_carries_every_packet_in_fewer_bytes),
      cmocka_unit_test(merge_rewrites_packets_inside_compressed_packets),
      cmocka_unit_test(ssh_transport_runs_the_relay_in_stdio_mode),
      cmocka_unit_test(killed_cli_session_taken_back_with_attach_and_merge),
      cmocka_unit_test(stuck_host_fails_at_its_deadline_and_the_other_finishes),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
