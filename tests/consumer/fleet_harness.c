/* The fleet end-to-end harness (fleet_harness.h). */
#include "fleet_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "test_wait.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_RELAY_PATH
#error "TRACEGATE_RELAY_PATH must name the tracegate-relay binary"
#endif

/* --- the directory ---------------------------------------------------------- */

/* One per test binary, made by the group setup: every test of the group
 * shares its certificates. */
static char g_dir[128];

int fleet_dir_create(const char *tag) {
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), tag) < 0) return -1;
  if (tg_test_certs(g_dir, "ca pki") ||
      tg_test_certs(g_dir, "host pki relay.test --ip 127.0.0.1") ||
      tg_test_certs(g_dir, "client pki alice --role record"))
    return -1;
  return 0;
}

int fleet_dir_teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

const char *fleet_in_dir(const char *name) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

/* --- relays ------------------------------------------------------------------- */

/* The boot the host seems to have to a relay started by
 * fleet_relay_start_rebooted(): its /proc file, covered in the relay's own
 * mount namespace by a file of ours. */
#define BOOT_ID_PROC "/proc/sys/kernel/random/boot_id"
#define IN_NEW_BOOT \
  "mount --bind \"$0\" " BOOT_ID_PROC " && exec \"$@\""

/* Under |boot_id_file| (non-NULL), in a mount namespace where the host's
 * boot id reads as that file's. */
static void relay_spawn(fleet_relay_t *r, const char *consumer_sock, int port,
                        const char *log, const char *const *extra_args,
                        const char *boot_id_file) {
  snprintf(r->log, sizeof(r->log), "%s", log);
  int pfd[2];
  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(lfd >= 0);
  char fd[16], listen[32];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
  /* A fleet here is many spellings of a few relays, all one identity's
   * connections: as many as --max-conns (64) may be one identity's. */
  const char *argv[48] = {
      "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
      IN_NEW_BOOT, boot_id_file, TRACEGATE_RELAY_PATH};
  /* Under unshare the relay's arguments follow its path ("$@" of the
   * shell); without, they are the whole argv, argv[0] its name. */
  size_t n = boot_id_file ? 9 : 0;
  const char *const relay_argv[] = {
      "tracegate-relay", "--listen", listen, "--consumer-socket",
      consumer_sock, "--cert", fleet_in_dir("pki/relay.test.pem"), "--key",
      fleet_in_dir("pki/relay.test.key"), "--ca", fleet_in_dir("pki/ca.pem"),
      "--authz", fleet_in_dir("pki/authz"), "--ready-fd", fd, "--log-level",
      "info", "--max-conns-per-identity", "64"};
  for (size_t i = boot_id_file ? 1 : 0;
       i < sizeof(relay_argv) / sizeof(relay_argv[0]); i++)
    argv[n++] = relay_argv[i];
  for (size_t i = 0; extra_args && extra_args[i]; i++) {
    assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
    argv[n++] = extra_args[i];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = boot_id_file ? "/usr/bin/unshare" : TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stderr_fd = lfd;
  s.keep_fd = pfd[1];
  r->pid = tg_test_spawn(&s);
  close(lfd);
  close(pfd[1]);
  assert_true(r->pid > 0);
  char line[64] = "";
  int got = tg_test_wait_line(pfd[0], "ready", FLEET_WAIT_MS, line, sizeof(line));
  close(pfd[0]);
  assert_int_equal(got, 1);
  assert_int_equal(sscanf(line, "ready %d", &r->port), 1);
  if (port) assert_int_equal(r->port, port);
}

void fleet_relay_start(fleet_relay_t *r, const char *consumer_sock, int port,
                       const char *log, const char *const *extra_args) {
  relay_spawn(r, consumer_sock, port, log, extra_args, NULL);
}

bool fleet_relay_start_rebooted(fleet_relay_t *r, const char *consumer_sock,
                                int port, const char *log,
                                const char *boot_id) {
  char file[256];
  snprintf(file, sizeof(file), "%s", fleet_in_dir("boot_id"));
  FILE *f = fopen(file, "we");
  assert_non_null(f);
  fprintf(f, "%s\n", boot_id);
  assert_int_equal(fclose(f), 0);
  /* Can this machine make the namespace at all (root, mounts allowed)? */
  char probe[512];
  snprintf(probe, sizeof(probe), "unshare --mount --propagation private "
           "/bin/sh -c 'mount --bind \"$0\" %s' '%s' 2>/dev/null",
           BOOT_ID_PROC, file);
  if (system(probe) != 0) return false;
  relay_spawn(r, consumer_sock, port, log, NULL, file);
  return true;
}

void fleet_relay_stop(fleet_relay_t *r, int sig) {
  if (r->pid <= 0) return;
  /* The exit is an event (a pidfd); SIGKILL after 10 s. */
  tg_test_stop(r->pid, sig, 10000);
  r->pid = 0;
}

/* --- hosts ---------------------------------------------------------------------- */

void fleet_host_start(fleet_host_t *h, const char *relay_log,
                      const char *const *relay_args) {
  memset(h, 0, sizeof(*h));
  assert_int_equal(test_service_start(&h->ts), 0);
  fleet_host_start_relay(h, relay_log, relay_args);
}

void fleet_host_start_relay(fleet_host_t *h, const char *relay_log,
                            const char *const *relay_args) {
  fleet_relay_start(&h->relay, h->ts.consumer_sock, 0, relay_log, relay_args);
  snprintf(h->spec, sizeof(h->spec), "127.0.0.1:%d", h->relay.port);
}

tg_hostile_relay_t *fleet_hostile_start(fleet_host_t *h, tg_hostile_mode_t mode) {
  /* fleet_in_dir's buffers are reused: the paths are read in the call. */
  char cert[256], key[256], ca[256], ccert[256], ckey[256];
  snprintf(cert, sizeof(cert), "%s", fleet_in_dir("pki/relay.test.pem"));
  snprintf(key, sizeof(key), "%s", fleet_in_dir("pki/relay.test.key"));
  snprintf(ca, sizeof(ca), "%s", fleet_in_dir("pki/ca.pem"));
  snprintf(ccert, sizeof(ccert), "%s", fleet_in_dir("pki/alice.pem"));
  snprintf(ckey, sizeof(ckey), "%s", fleet_in_dir("pki/alice.key"));
  tg_hostile_opts_t o = {
      .target_port = h->relay.port,
      .cert_file = cert,
      .key_file = key,
      .ca_file = ca,
      .client_cert_file = ccert,
      .client_key_file = ckey,
      .server_name = "relay.test",
      .mode = mode,
  };
  char err[256] = "";
  tg_hostile_relay_t *x = NULL;
  if (tg_hostile_relay_start(&o, &x, err, sizeof(err)) < 0)
    fail_msg("hostile relay: %s", err);
  snprintf(h->spec, sizeof(h->spec), "127.0.0.1:%d", tg_hostile_relay_port(x));
  return x;
}

void fleet_host_connect_producer(fleet_host_t *h, const char *name,
                                 const char *ds_name, uint32_t page_kb,
                                 uint32_t smb_kb, bool will_notify_on_stop) {
  assert_int_equal(raw_producer_connect(&h->p, &h->ts, name, ds_name, page_kb,
                                        smb_kb, will_notify_on_stop), 0);
  h->has_p = true;
}

void fleet_host_drop_producer(fleet_host_t *h) {
  if (h->has_p) raw_producer_close(&h->p);
  h->has_p = false;
}

void fleet_host_stop(fleet_host_t *h) {
  fleet_host_drop_producer(h);
  fleet_relay_stop(&h->relay, SIGTERM);
  assert_int_equal(test_service_stop(&h->ts), 0);
}

/* --- producer steps ---------------------------------------------------------------- */

void fleet_commit_packets(raw_producer_t *p, uint32_t chunk_id, const char *tag,
                          uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, tag, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

void fleet_commit_big(raw_producer_t *p, uint32_t chunk_id, const char *tag,
                      uint32_t first, unsigned n) {
  assert_int_equal(
      raw_producer_commit_padded(p, chunk_id, tag, first, n, FLEET_BIG), 0);
}

void fleet_commit_ftrace_stats(raw_producer_t *p, uint32_t chunk_id,
                               const uint64_t *start, const uint64_t *end,
                               size_t n_cpus) {
  uint8_t pk[2][128];
  const uint8_t *frags[2] = {pk[0], pk[1]};
  const size_t lens[2] = {make_ftrace_stats_packet(pk[0], 1, start, n_cpus),
                          make_ftrace_stats_packet(pk[1], 2, end, n_cpus)};
  assert_true(lens[0] && lens[1]);
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_4, 1, chunk_id,
                                            0, frags, lens, 2),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* linux.ftrace's start stats with |events| failed; with one CPU's
 * counters when |running|. */
static void commit_ftrace_setup(raw_producer_t *p, uint32_t chunk_id,
                                char **events, size_t n, bool running) {
  Perfetto__Protos__FtraceStats st = PERFETTO__PROTOS__FTRACE_STATS__INIT;
  Perfetto__Protos__FtraceCpuStats cpu = PERFETTO__PROTOS__FTRACE_CPU_STATS__INIT;
  Perfetto__Protos__FtraceCpuStats *cpus[1] = {&cpu};
  cpu.has_cpu = 1;
  st.has_phase = 1;
  st.phase = PERFETTO__PROTOS__FTRACE_STATS__PHASE__START_OF_TRACE;
  st.n_failed_ftrace_events = n;
  st.failed_ftrace_events = events;
  if (running) {
    st.n_cpu_stats = 1;
    st.cpu_stats = cpus;
  }
  Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  tp.has_timestamp = 1;
  tp.timestamp = 42;
  tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS;
  tp.ftrace_stats = &st;
  uint8_t pk[512];
  assert_true(perfetto__protos__trace_packet__get_packed_size(&tp) <= sizeof(pk));
  const uint8_t *frags[1] = {pk};
  const size_t lens[1] = {perfetto__protos__trace_packet__pack(&tp, pk)};
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_4, 1, chunk_id,
                                            0, frags, lens, 1),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

void fleet_commit_ftrace_failure(raw_producer_t *p, uint32_t chunk_id,
                                 char **events, size_t n) {
  commit_ftrace_setup(p, chunk_id, events, n, false);
}

void fleet_commit_ftrace_refused(raw_producer_t *p, uint32_t chunk_id,
                                 char **events, size_t n) {
  commit_ftrace_setup(p, chunk_id, events, n, true);
}

void fleet_ack_flush(raw_producer_t *p) {
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, FLEET_WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
}

const char *fleet_fake_ssh(const char *consumer_sock) {
  char args[256];
  snprintf(args, sizeof(args), "%s", fleet_in_dir("ssh-args"));
  const char *script = fleet_in_dir("fake-ssh");
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\necho \"$@\" > '%s'\nexec '%s' --stdio --consumer-socket "
          "'%s' --log-level warn\n", args, TRACEGATE_RELAY_PATH, consumer_sock);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  return script;
}

/* --- the CLI as a child -------------------------------------------------------------- */

void fleet_cli_spawn(fleet_cli_t *c, const char *const *args) {
  memset(c, 0, sizeof(*c));
  int pe[2];
  assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  c->pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                             pe[1]);
  assert_true(c->pid > 0);
  close(pe[1]);
  c->err_fd = pe[0];
}

/* One more read of the CLI's stderr before |deadline|; fails the test
 * past it or at the end of stderr, naming |what| it waited for. */
static void read_more(fleet_cli_t *c, int64_t deadline, const char *what) {
  int64_t left = deadline - tg_test_now_ms();
  if (left <= 0) fail_msg("no '%s' from tracegate:\n%s", what, c->err);
  struct pollfd p = {c->err_fd, POLLIN, 0};
  if (poll(&p, 1, (int)left) <= 0) return;
  ssize_t r = read(c->err_fd, c->err + c->n_err, sizeof(c->err) - 1 - c->n_err);
  if (r <= 0) fail_msg("tracegate closed stderr before '%s':\n%s", what, c->err);
  c->n_err += (size_t)r;
  c->err[c->n_err] = 0;
}

const char *fleet_cli_read_until(fleet_cli_t *c, const char *needle,
                                 int64_t timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  const char *at;
  while (!(at = strstr(c->err, needle))) read_more(c, deadline, needle);
  return at;
}

void fleet_cli_read_notice(fleet_cli_t *c, tg_notice_t n, char *line,
                           size_t cap, int64_t timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  const char *at;
  /* Whole lines only: the tag's line may still be arriving. */
  while (!(at = strstr(c->err, tg_notice_tag(n))) || !strchr(at, '\n'))
    read_more(c, deadline, tg_notice_tag(n));
  assert_true(tg_test_notice_line(c->err, n, NULL, line, cap));
}

int fleet_cli_wait(fleet_cli_t *c) {
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
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

/* --- waits -------------------------------------------------------------------------- */

int64_t fleet_wait_log(const char *path, const char *needle) {
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  static char buf[1 << 17];
  for (;;) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (strstr(buf, needle)) return tg_test_now_ms();
    if (tg_test_now_ms() > deadline) fail_msg("no '%s' in %s:\n%s", needle, path, buf);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

void fleet_wait_read_through(tg_fault_proxy_t *px, uint64_t base, uint64_t n) {
  assert_int_equal(tg_fault_proxy_wait_down_bytes(px, base + n, FLEET_WAIT_MS), 0);
  uint64_t now = tg_fault_proxy_down_bytes(px);
  assert_int_equal(tg_fault_proxy_wait_down_bytes(px, now + 300, FLEET_WAIT_MS), 0);
}

/* --- an app on a host ------------------------------------------------------------------ */

pid_t fleet_emit_start(const char *emit, const fleet_host_t *h, int i,
                       const char *const *mode_args, unsigned *port) {
  char log[64];
  snprintf(log, sizeof(log), "emit%d.log", i);
  int fd = open(fleet_in_dir(log), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                0644);
  assert_true(fd >= 0);
  int ready[2] = {-1, -1};
  char ready_fd[16] = "";
  if (port) {
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    snprintf(ready_fd, sizeof(ready_fd), "%d", ready[1]);
  }
  const char *argv[20] = {emit, "--socket", h->ts.producer_sock, "--log-level",
                          "warn"};
  size_t n = 5;
  for (size_t k = 0; mode_args[k] && n + 3 < 20; k++) argv[n++] = mode_args[k];
  if (port) {
    argv[n++] = "--ready-fd";
    argv[n++] = ready_fd;
  }
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = emit;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = TG_TEST_FD_DEVNULL;
  s.stderr_fd = fd;
  s.keep_fd = port ? ready[1] : -1;
  pid_t pid = tg_test_spawn(&s);
  close(fd);
  assert_true(pid > 0);
  if (port) {
    close(ready[1]);
    char line[64] = "";
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof(line) &&
           (r = read(ready[0], line + got, sizeof(line) - 1 - got)) > 0)
      got += (size_t)r;
    close(ready[0]);
    line[got] = 0;
    assert_int_equal(sscanf(line, "ready %u", port), 1);
  }
  return pid;
}

bool fleet_rpc_counts(const char *path, unsigned long long *flows,
                      unsigned long long *calls, unsigned long long *serves,
                      unsigned long long *early, unsigned long long *pairs) {
  char out[256];
  int rv = tg_test_tp_answer(
      path,
      "with f as (select c.ts as cts, s.ts as sts from flow join slice c on "
      "flow.slice_out = c.id join slice s on flow.slice_in = s.id where "
      "c.name = 'rpc.call' and s.name = 'rpc.serve'), a as (select s.name, "
      "s.ts, x.display_value as v from slice s join args x using "
      "(arg_set_id) where x.key = 'debug.traceparent' and s.name in "
      "('rpc.call', 'rpc.serve')), p as (select c.ts as cts, s.ts as sts "
      "from a c join a s on c.v = s.v where c.name = 'rpc.call' and s.name "
      "= 'rpc.serve') select (select count(*) from f) || ',' || (select "
      "count(*) from slice where name = 'rpc.call') || ',' || (select "
      "count(*) from slice where name = 'rpc.serve') || ',' || (select "
      "count(*) from p where sts < cts) || ',' || (select count(*) from p)",
      out, sizeof(out));
  assert_true(rv >= 0);
  if (rv == 0) return false;
  assert_int_equal(
      sscanf(out, "\"%llu,%llu,%llu,%llu,%llu\"", flows, calls, serves, early,
             pairs),
      5);
  return true;
}
