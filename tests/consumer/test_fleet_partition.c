/* Silent partitions of real length between `tracegate record -H` and a
 * tracegate-relay: a real tracegated (with a raw producer), the relay in
 * front of it on a loopback TLS port, the CLI as a child, and between CLI
 * and relay the fault proxy of tests/support/fault_proxy.h.
 *
 * Each partition begins with a read reply held in flight (the proxy holds
 * what the relay sent, then stalls both ways, the way a dead NAT looks),
 * so the relay's replay window must resend it after the re-attach. Data
 * keeps coming on the host meanwhile. Checked: both ends find the dead link
 * within the dead-link timeout (2 s) plus slack; after the partition the
 * CLI re-attaches (--reconnect-timeout 15m) and the trace holds every packet
 * exactly once (no gap, no duplicate), the summary says "no data loss" and
 * shows the real outage length.
 *
 *   test_fleet_partition        25 s (compressed), and a partition whose
 *                               data overflows the host's buffer: exactly
 *                               the chunks lost are counted (summary and
 *                               the trace's trace_stats)
 *   test_fleet_partition long   2 min (plain) and 10 min (compressed), real
 *                               time; ctest label "long"
 *
 * tracegated and the relay get a 15 min lease, longer than any partition
 * here (the default, 10 min, is not longer than the longest). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_proxy.h"
#include "test_proc.h"
#include "test_service.h"
#include "test_wait.h"
#include "tracegate/pb_wire.h"
#include "pb/trace/test_event.pb-c.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif
#ifndef TRACEGATE_RELAY_PATH
#error "TRACEGATE_RELAY_PATH must name the tracegate-relay binary"
#endif
#ifndef TRACEGATED_FOR_LEASE_PATH
#error "TRACEGATED_FOR_LEASE_PATH must name the tracegated binary"
#endif

#define WAIT_MS 30000
#define DEAD_LINK_S 2
#define LEASE_MS "900000"
#define BIG 1000 /* payload bytes of a test packet */
#define PER_CHUNK 10
/* How late a dead link may be found past its timeout (scheduling, the
 * heartbeat period, the relay's timer granularity; sanitizers). */
#define DETECT_SLACK_MS 1500
/* From the link's return to the re-attach: the CLI's backoff (at most 5 s)
 * plus a TLS handshake and the Resume. */
#define BACK_SLACK_MS 12000

static char g_dir[128];

static const char *in_dir(const char *name) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* --- a host: tracegated (15 min lease), relay, producer ------------------------- */

typedef struct host {
  test_service_t ts;
  pid_t relay;
  int relay_port;
  char log[256];
  raw_producer_t p;
  bool has_p;
  uint32_t next_chunk;
} host_t;

static void service_start(test_service_t *ts) {
  assert_int_equal(test_service_prepare(ts), 0);
  int pfd[2];
  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  char fd[16];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  const char *argv[] = {"tracegated", "--producer-socket", ts->producer_sock,
                        "--consumer-socket", ts->consumer_sock, "--ready-fd", fd,
                        "--log-level", "warn", "--session-lease-ms", LEASE_MS,
                        NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATED_FOR_LEASE_PATH;
  s.argv = argv;
  s.keep_fd = pfd[1];
  ts->pid = tg_test_spawn(&s);
  close(pfd[1]);
  assert_true(ts->pid > 0);
  int ok = tg_test_wait_line(pfd[0], "ready", WAIT_MS, NULL, 0);
  close(pfd[0]);
  assert_int_equal(ok, 1);
}

static void relay_start(host_t *h, const char *log) {
  snprintf(h->log, sizeof(h->log), "%s", log);
  int pfd[2];
  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(lfd >= 0);
  char fd[16], dl[16];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  snprintf(dl, sizeof(dl), "%d", DEAD_LINK_S);
  const char *argv[] = {
      "tracegate-relay", "--listen", "127.0.0.1:0", "--consumer-socket",
      h->ts.consumer_sock, "--cert", in_dir("pki/relay.test.pem"), "--key",
      in_dir("pki/relay.test.key"), "--ca", in_dir("pki/ca.pem"), "--authz",
      in_dir("pki/authz"), "--ready-fd", fd, "--log-level", "info",
      "--dead-link-timeout", dl, "--session-lease-ms", LEASE_MS, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stderr_fd = lfd;
  s.keep_fd = pfd[1];
  h->relay = tg_test_spawn(&s);
  close(lfd);
  close(pfd[1]);
  assert_true(h->relay > 0);
  char line[64] = "";
  int got = tg_test_wait_line(pfd[0], "ready", WAIT_MS, line, sizeof(line));
  close(pfd[0]);
  assert_int_equal(got, 1);
  assert_int_equal(sscanf(line, "ready %d", &h->relay_port), 1);
}

static void host_start(host_t *h, const char *log) {
  memset(h, 0, sizeof(*h));
  service_start(&h->ts);
  relay_start(h, log);
  assert_int_equal(raw_producer_connect(&h->p, &h->ts, "partition.producer",
                                        "partition.ds", 32, 256, false), 0);
  h->has_p = true;
}

static void host_stop(host_t *h) {
  if (h->has_p) raw_producer_close(&h->p);
  h->has_p = false;
  if (h->relay > 0) tg_test_stop(h->relay, SIGTERM, 10000);
  h->relay = 0;
  assert_int_equal(test_service_stop(&h->ts), 0);
}

/* PER_CHUNK packets "tag:<noise>" (values first..), one chunk. The noise
 * keeps zstd from shrinking a reply to nothing, so the bytes the proxy
 * holds tell that a reply with packets is in flight. */
static void commit_chunk(host_t *h, const char *tag, uint32_t first) {
  static uint8_t pk[PER_CHUNK][BIG + 64];
  static uint32_t seed = 12345;
  const uint8_t *frags[PER_CHUNK];
  size_t lens[PER_CHUNK];
  char str[BIG + 1];
  for (unsigned i = 0; i < PER_CHUNK; i++) {
    size_t tl = strlen(tag);
    memcpy(str, tag, tl);
    str[tl] = ':';
    for (size_t k = tl + 1; k < BIG; k++) {
      seed = seed * 1103515245u + 12345u;
      str[k] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
          [(seed >> 16) & 63];
    }
    str[BIG] = 0;
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), str, first + i);
    assert_true(lens[i] > 0);
    frags[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&h->p, 0, 0, TG_PAGE_DIV_1, 1,
                                            h->next_chunk++, 0, frags, lens,
                                            PER_CHUNK), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&h->p, &page, &chunk, 1, 0), 0);
}

static void ack_flush(host_t *h) {
  uint64_t id = raw_producer_wait_flush(&h->p, h->p.last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(&h->p, NULL, NULL, 0, id), 0);
}

/* --- the CLI as a child ---------------------------------------------------------- */

typedef struct child {
  pid_t pid;
  int err_fd;
  char err[65536];
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

/* Reads the child's stderr until |needle| shows, at most |ms|. */
static void read_until(child_t *c, const char *needle, int64_t ms) {
  int64_t deadline = tg_test_now_ms() + ms;
  while (!strstr(c->err, needle)) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) fail_msg("no '%s' from tracegate:\n%s", needle, c->err);
    struct pollfd p = {c->err_fd, POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = read(c->err_fd, c->err + c->n_err, sizeof(c->err) - 1 - c->n_err);
    if (r <= 0) fail_msg("tracegate closed stderr before '%s':\n%s", needle, c->err);
    c->n_err += (size_t)r;
    c->err[c->n_err] = 0;
  }
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
  int64_t left = deadline - tg_test_now_ms();
  int status = tg_test_reap(c->pid, killed ? 0 : left > 1000 ? (int)left : 1000);
  if (status == -1) killed = true;
  print_message("--- tracegate stderr ---\n%s------------------------\n", c->err);
  if (killed) return -1;
  assert_null(strstr(c->err, "Sanitizer"));
  assert_null(strstr(c->err, "runtime error"));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Waits until the relay's log contains |needle| (bounded): a daemon's log
 * has no other way to say so. Returns when it was seen. */
static int64_t wait_log(const char *path, const char *needle) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  static char buf[1 << 17];
  for (;;) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (strstr(buf, needle)) return tg_test_now_ms();
    if (tg_test_now_ms() > deadline) fail_msg("no '%s' in %s:\n%s", needle, path, buf);
    sleep_ms(20);
  }
}

/* --- traces ----------------------------------------------------------------------- */

typedef struct trace {
  Perfetto__Protos__TracePacket **pk;
  size_t n;
} trace_t;

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

static bool has_tag(const Perfetto__Protos__TracePacket *pk, const char *tag) {
  if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING ||
      !pk->for_testing->str)
    return false;
  size_t l = strlen(tag);
  const char *s = pk->for_testing->str;
  return !strncmp(s, tag, l) && s[l] == ':';
}

/* The |tag| packets are exactly first, first + 1, ... (n of them), in
 * order: no gap, no duplicate. */
static void assert_values(const trace_t *t, const char *tag, uint32_t first,
                          size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (!has_tag(t->pk[i], tag)) continue;
    if (k >= n || t->pk[i]->for_testing->seq_value != first + k)
      fail_msg("'%s' packet %zu is value %u, expected %zu of %zu", tag, k,
               t->pk[i]->for_testing->seq_value, first + k, n);
    k++;
  }
  if (k != n) fail_msg("%zu '%s' packets, expected %zu", k, tag, n);
}

/* The summary's outage, "link down 25.3s" or "link down 10m02s", in ms. */
static int64_t link_down_ms(const char *err) {
  const char *at = strstr(err, "link down ");
  assert_non_null(at);
  char *end;
  double v = strtod(at + strlen("link down "), &end);
  if (*end == 'm') return (int64_t)(v * 60000 + strtod(end + 1, NULL) * 1000);
  return (int64_t)(v * 1000);
}

/* --- fixtures --------------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "partition") < 0) return -1;
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

static void record_through(child_t *c, tg_fault_proxy_t *px, const char *out,
                           const char *buffer, bool compress) {
  static char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", tg_fault_proxy_port(px));
  const char *args[] = {"record", "-H", spec, "--tls-server-name", "relay.test",
                        "--cert", in_dir("pki/alice.pem"), "--key",
                        in_dir("pki/alice.key"), "--ca", in_dir("pki/ca.pem"),
                        "-o", out, "-t", "0", "-b", buffer,
                        "--dead-link-timeout", "2s", "--reconnect-timeout", "15m",
                        "--compress", compress ? "zstd" : "none",
                        "partition.ds", NULL};
  spawn_cli(c, args);
}

/* Waits until a reply with |tag|'s chunk (most of its noise bytes,
 * compressed or not) went to the CLI past |base|, then until a few hundred
 * bytes more did (heartbeat and stats replies come after the read's end):
 * the read is over, so the next one is the one a hold catches whole. */
static void wait_read_through(tg_fault_proxy_t *px, uint64_t base) {
  assert_int_equal(tg_fault_proxy_wait_down_bytes(px, base + PER_CHUNK * BIG / 2,
                                                  WAIT_MS), 0);
  uint64_t now = tg_fault_proxy_down_bytes(px);
  assert_int_equal(tg_fault_proxy_wait_down_bytes(px, now + 300, WAIT_MS), 0);
}

/* Begins a partition with a read in flight: the replies are held while a
 * |tag| chunk is committed, until a reply with its packets (most of
 * PER_CHUNK * BIG noise bytes, compressed or not) is in the proxy; then
 * nothing moves either way. Should the hold have caught the tail of an
 * earlier read instead (the CLI reads one at a time, so the chunk's read
 * would never come), the link is given back before the dead-link timeout
 * and the next chunk is tried. Returns when the hold began; *chunks: the
 * |tag| chunks committed (values 0..). */
static int64_t cut_mid_read(host_t *h, tg_fault_proxy_t *px, const char *tag,
                            uint32_t *chunks) {
  for (uint32_t k = 0; k < 10; k++) {
    tg_fault_proxy_hold_down(px);
    int64_t t0 = tg_test_now_ms();
    commit_chunk(h, tag, k * PER_CHUNK);
    *chunks = k + 1;
    if (tg_fault_proxy_wait_held_bytes(px, PER_CHUNK * BIG / 2,
                                       DEAD_LINK_S * 1000 / 3) == 0) {
      tg_fault_proxy_stall(px);
      print_message("a read reply with packets caught in flight (try %u)\n", k + 1);
      return t0;
    }
    uint64_t d0 = tg_fault_proxy_down_bytes(px);
    tg_fault_proxy_resume(px);
    wait_read_through(px, d0);
  }
  fail_msg("no read reply with packets was ever caught in flight");
  return 0;
}

/* Both ends find the dead link in time; the CLI's words and the relay's
 * log, measured from |t0|. */
static void expect_found(child_t *c, host_t *h, int64_t t0) {
  read_until(c, "the link is dead", WAIT_MS);
  int64_t cli_found = tg_test_now_ms() - t0;
  int64_t relay_found = wait_log(h->log, "link lost with a tracing session") - t0;
  print_message("dead link found by the CLI after %lld ms, by the relay after "
                "%lld ms\n", (long long)cli_found, (long long)relay_found);
  assert_true(cli_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
  assert_true(relay_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
}

/* --- partitions that the buffer holds ------------------------------------------------ */

static void partition(int64_t part_ms, bool compress, const char *name) {
  host_t h;
  char log[64], out_name[64];
  snprintf(log, sizeof(log), "relay-%s.log", name);
  snprintf(out_name, sizeof(out_name), "%s.pftrace", name);
  host_start(&h, in_dir(log));
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.relay_port, &px), 0);
  const char *out = in_dir(out_name);
  child_t c;
  /* 8 MB: the 10 min case commits about 1.3 MB during the partition. */
  record_through(&c, px, out, "8mb", compress);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  commit_chunk(&h, "before", 0);
  wait_read_through(px, base);

  uint32_t inflight;
  int64_t t0 = cut_mid_read(&h, px, "inflight", &inflight);
  expect_found(&c, &h, t0);
  /* Data keeps coming on the host all along: a chunk every 5 s. */
  uint32_t during = 0;
  for (;;) {
    int64_t left = t0 + part_ms - tg_test_now_ms();
    if (left <= 0) break;
    sleep_ms(left < 5000 ? left : 5000);
    commit_chunk(&h, "during", during);
    during += PER_CHUNK;
  }
  int64_t outage = tg_test_now_ms() - t0;
  tg_fault_proxy_resume(px);
  int64_t back = tg_test_now_ms();
  read_until(&c, "reconnected and re-attached", BACK_SLACK_MS + WAIT_MS);
  int64_t reattached = tg_test_now_ms();
  print_message("partition of %lld ms: re-attached %lld ms after the link came "
                "back\n", (long long)outage, (long long)(reattached - back));
  assert_true(reattached - back <= BACK_SLACK_MS);
  commit_chunk(&h, "after", 0);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);

  assert_non_null(strstr(c.err, "reconnected 1 time"));
  assert_non_null(strstr(c.err, "no data loss"));
  assert_null(strstr(c.err, "data loss:"));
  assert_null(strstr(c.err, "counted by the service"));
  /* The real outage: from the last answer (just before the hold) to the
   * re-attach, not the detection's few seconds. */
  int64_t down = link_down_ms(c.err);
  print_message("summary: link down %lld ms for a %lld ms partition\n",
                (long long)down, (long long)outage);
  assert_true(down >= outage - 1000);
  assert_true(down <= reattached - t0 + 1000);

  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "before", 0, PER_CHUNK);
  assert_values(&t, "inflight", 0, inflight * PER_CHUNK);
  assert_values(&t, "during", 0, during);
  assert_values(&t, "after", 0, PER_CHUNK);
  free_packets(t.pk, t.n);
  unlink(out);
  tg_fault_proxy_stop(px);
  host_stop(&h);
}

static void partition_of_25s_compressed(void **state) {
  (void)state;
  partition(25 * 1000, true, "p25s");
}

static void partition_of_2min_plain(void **state) {
  (void)state;
  partition(2 * 60 * 1000, false, "p2min");
}

static void partition_of_10min_compressed(void **state) {
  (void)state;
  partition(10 * 60 * 1000, true, "p10min");
}

/* --- a partition longer than the buffer holds --------------------------------------- */

/* The "buffer 0 chunks_overwritten   N" line of the summary; 0 if none. */
static uint64_t summary_overwritten(const char *err) {
  const char *at = strstr(err, "chunks_overwritten");
  if (!at) return 0;
  return strtoull(at + strlen("chunks_overwritten"), NULL, 10);
}

static uint64_t trace_stats_overwritten(const trace_t *t) {
  uint64_t v = 0;
  bool seen = false;
  for (size_t i = 0; i < t->n; i++) {
    if (t->pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
      continue;
    const Perfetto__Protos__TraceStats *st = t->pk[i]->trace_stats;
    seen = true;
    v = 0;
    for (size_t b = 0; b < st->n_buffer_stats; b++)
      v += st->buffer_stats[b]->chunks_overwritten;
  }
  if (!seen) fail_msg("no trace_stats packet in the trace");
  return v;
}

static void partition_past_the_buffer_counts_exactly_what_was_overwritten(void **state) {
  (void)state;
  host_t h;
  host_start(&h, in_dir("relay-wrap.log"));
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.relay_port, &px), 0);
  const char *out = in_dir("wrap.pftrace");
  child_t c;
  record_through(&c, px, out, "256kb", true);
  assert_int_equal(raw_producer_wait_started(&h.p, WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  commit_chunk(&h, "before", 0);
  wait_read_through(px, base);
  uint32_t inflight;
  int64_t t0 = cut_mid_read(&h, px, "inflight", &inflight);
  expect_found(&c, &h, t0);
  /* About 11 KB a chunk into a 256 KB buffer: 60 chunks wrap it twice. */
  enum { CHUNKS = 60 };
  for (uint32_t k = 0; k < CHUNKS; k++) commit_chunk(&h, "during", k * PER_CHUNK);
  tg_fault_proxy_resume(px);
  read_until(&c, "reconnected and re-attached", BACK_SLACK_MS + WAIT_MS);
  kill(c.pid, SIGINT);
  ack_flush(&h);
  assert_int_equal(wait_cli(&c), 0);

  uint64_t said = summary_overwritten(c.err);
  trace_t t;
  load_trace(out, &t);
  /* What was read before the cut is replayed: nothing of it is lost. */
  assert_values(&t, "before", 0, PER_CHUNK);
  assert_values(&t, "inflight", 0, inflight * PER_CHUNK);
  /* The "during" chunks kept are whole, each once, in order; the ones
   * missing are the oldest (overwritten first). */
  size_t kept = 0;
  uint32_t first = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!has_tag(t.pk[i], "during")) continue;
    if (!kept) first = t.pk[i]->for_testing->seq_value;
    kept++;
  }
  assert_int_equal(first % PER_CHUNK, 0);
  assert_int_equal(kept % PER_CHUNK, 0);
  assert_values(&t, "during", first, kept);
  uint64_t lost_chunks = CHUNKS - kept / PER_CHUNK;
  uint64_t in_stats = trace_stats_overwritten(&t);
  print_message("%zu of %u chunks kept; chunks_overwritten: %llu in the summary, "
                "%llu in the trace's stats\n", kept / PER_CHUNK, CHUNKS,
                (unsigned long long)said, (unsigned long long)in_stats);
  assert_true(lost_chunks > 0);
  assert_int_equal(first / PER_CHUNK, lost_chunks); /* the oldest went */
  assert_int_equal(said, lost_chunks);
  assert_int_equal(in_stats, lost_chunks);
  assert_non_null(strstr(c.err, "data loss:"));
  free_packets(t.pk, t.n);
  unlink(out);
  tg_fault_proxy_stop(px);
  host_stop(&h);
}

int main(int argc, char **argv) {
  const struct CMUnitTest regular[] = {
      cmocka_unit_test(partition_of_25s_compressed),
      cmocka_unit_test(partition_past_the_buffer_counts_exactly_what_was_overwritten),
  };
  const struct CMUnitTest real_time[] = {
      cmocka_unit_test(partition_of_2min_plain),
      cmocka_unit_test(partition_of_10min_compressed),
  };
  if (argc > 1 && !strcmp(argv[1], "long"))
    return cmocka_run_group_tests(real_time, group_setup, group_teardown);
  return cmocka_run_group_tests(regular, group_setup, group_teardown);
}
