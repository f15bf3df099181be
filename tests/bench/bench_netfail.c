/* Dead links and their recovery, through a real tracegated, a real
 * tracegate-relay and `tracegate record -H` with the fault proxy of
 * tests/support/fault_proxy.h between CLI and relay.
 *
 * Each round cuts the link mid-read: the proxy holds the relay's replies
 * until one carrying a chunk of packets is in flight, then holds traffic
 * both ways (a silent partition: nothing closed, the way a dead NAT looks)
 * for 8 s, or 4 s past the dead-link timeout. It prints, next to the configured dead-link timeout:
 *
 *   - the time each end took to declare the link dead, counted from the
 *     last answer the CLI had (the hold's start): the CLI's message and
 *     the relay's log line;
 *   - from the link's return to the CLI's re-attach, and to the data
 *     flowing again (the replayed reply and the chunk committed during the
 *     partition through the proxy);
 *   - the bytes the relay replayed after the cut (the CLI's count).
 *
 * Plain transport (--compress none) so that byte counts through the proxy
 * are packet bytes. The end checks the run said "no data loss".
 *
 * usage: bench_netfail [ROUNDS [DEAD_LINK_S]]   (default 3 2)
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fault_proxy.h"
#include "test_notice.h"
#include "test_proc.h"
#include "test_service.h"
#include "test_wait.h"

#define STEP_MS 60000 /* bound of each awaited step */
/* At least this long, and 4 s past the dead-link timeout. */
#define PARTITION_MS 8000
#define BIG 1000
#define PER_CHUNK 10
#define MAX_ROUNDS 20

static char g_dir[128];
static test_service_t g_ts;
static pid_t g_relay, g_cli;
static tg_fault_proxy_t *g_px;
static char g_log[256];
static int g_err_fd = -1;
static char g_err[1 << 18];
static size_t g_n_err;

static const char *in_dir(const char *name) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

/* Stops whatever runs and leaves: a bench that lost its footing measures
 * nothing worth printing. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_netfail: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (g_n_err) fprintf(stderr, "--- tracegate stderr ---\n%s", g_err);
  if (g_cli > 0) tg_test_stop(g_cli, SIGKILL, 5000);
  if (g_px) tg_fault_proxy_stop(g_px);
  if (g_relay > 0) tg_test_stop(g_relay, SIGTERM, 10000);
  if (g_ts.pid > 0) test_service_stop(&g_ts);
  if (g_dir[0]) tg_test_rm_rf(g_dir);
  exit(1);
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static void relay_start(int dead_link_s) {
  snprintf(g_log, sizeof(g_log), "%s", in_dir("relay.log"));
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) die("pipe: %s", strerror(errno));
  int lfd = open(g_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (lfd < 0) die("%s: %s", g_log, strerror(errno));
  char fd[16], dl[16];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  snprintf(dl, sizeof(dl), "%d", dead_link_s);
  const char *argv[] = {
      "tracegate-relay", "--listen", "127.0.0.1:0", "--consumer-socket",
      g_ts.consumer_sock, "--cert", in_dir("pki/relay.test.pem"), "--key",
      in_dir("pki/relay.test.key"), "--ca", in_dir("pki/ca.pem"), "--authz",
      in_dir("pki/authz"), "--ready-fd", fd, "--log-level", "info",
      "--dead-link-timeout", dl, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_RELAY_PATH;
  s.argv = argv;
  s.stderr_fd = lfd;
  s.keep_fd = pfd[1];
  g_relay = tg_test_spawn(&s);
  close(lfd);
  close(pfd[1]);
  if (g_relay <= 0) die("cannot start the relay");
  char line[64] = "";
  int got = tg_test_wait_line(pfd[0], "ready", STEP_MS, line, sizeof(line));
  close(pfd[0]);
  int port = 0;
  if (got != 1 || sscanf(line, "ready %d", &port) != 1) die("the relay is not ready");
  if (tg_fault_proxy_start(port, &g_px) < 0) die("cannot start the proxy");
}

static void cli_start(const char *out, int dead_link_s) {
  int pe[2];
  if (pipe2(pe, O_CLOEXEC) < 0) die("pipe: %s", strerror(errno));
  char spec[64], dl[16];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", tg_fault_proxy_port(g_px));
  snprintf(dl, sizeof(dl), "%ds", dead_link_s);
  const char *args[] = {"record", "-H", spec, "--tls-server-name",
                        "relay.test", "--cert", in_dir("pki/alice.pem"), "--key",
                        in_dir("pki/alice.key"), "--ca", in_dir("pki/ca.pem"),
                        "-o", out, "-t", "0", "-b", "8mb", "--compress", "none",
                        "--dead-link-timeout", dl, "--reconnect-timeout", "5m",
                        "netfail.ds", NULL};
  g_cli = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL, pe[1]);
  close(pe[1]);
  if (g_cli <= 0) die("cannot start tracegate");
  g_err_fd = pe[0];
}

/* Occurrences of |needle| in |s|. */
static unsigned count_of(const char *s, const char *needle) {
  unsigned n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* Reads the CLI's stderr until |needle| shows for the |nth| time. Returns
 * when it did. */
static int64_t cli_until(const char *needle, unsigned nth) {
  int64_t deadline = tg_test_now_ms() + STEP_MS;
  while (count_of(g_err, needle) < nth) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) die("no '%s' (#%u) from tracegate", needle, nth);
    struct pollfd p = {g_err_fd, POLLIN, 0};
    if (poll(&p, 1, (int)left) <= 0) continue;
    ssize_t r = read(g_err_fd, g_err + g_n_err, sizeof(g_err) - 1 - g_n_err);
    if (r <= 0) die("tracegate closed stderr before '%s'", needle);
    g_n_err += (size_t)r;
    g_err[g_n_err] = 0;
  }
  return tg_test_now_ms();
}

/* Polls the relay's log (a daemon's log has no other way to say so) until
 * |needle| shows for the |nth| time. */
static int64_t log_until(const char *needle, unsigned nth) {
  static char buf[1 << 18];
  int64_t deadline = tg_test_now_ms() + STEP_MS;
  for (;;) {
    FILE *f = fopen(g_log, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (count_of(buf, needle) >= nth) return tg_test_now_ms();
    if (tg_test_now_ms() > deadline) die("no '%s' (#%u) in the relay's log", needle, nth);
    sleep_ms(5);
  }
}

static raw_producer_t g_p;
static uint32_t g_chunk;
static uint32_t g_inflight; /* next "inflight" value */

static void commit_chunk(const char *tag, uint32_t first) {
  if (raw_producer_commit_padded(&g_p, g_chunk++, tag, first, PER_CHUNK, BIG) < 0)
    die("cannot commit a chunk");
}

/* |n| bytes more went to the CLI past |base|, then a few hundred more
 * (the replies after a read's end): that read is over. */
static void read_through(uint64_t base, uint64_t n) {
  if (tg_fault_proxy_wait_down_bytes(g_px, base + n, STEP_MS) < 0)
    die("the data did not reach the CLI");
  uint64_t now = tg_fault_proxy_down_bytes(g_px);
  if (tg_fault_proxy_wait_down_bytes(g_px, now + 300, STEP_MS) < 0)
    die("the link went quiet");
}

/* The CLI's running count of bytes sent again, the bytes= field of its
 * last FLEET_RESENT line. */
static uint64_t replayed_bytes(void) {
  const char *last = NULL;
  const char *tag = tg_notice_tag(TG_N_FLEET_RESENT);
  for (const char *p = g_err; (p = strstr(p, tag)); p++) last = p;
  if (!last) return 0;
  const char *b = strstr(last, " bytes=");
  const char *e = strchr(last, '\n');
  if (!b || (e && b > e)) return 0;
  return strtoull(b + 7, NULL, 10);
}

typedef struct round {
  int64_t cli_ms, relay_ms, reattach_ms, flow_ms;
  uint64_t replayed;
} round_t;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int64_t median(const round_t *r, int n, size_t off) {
  int64_t v[MAX_ROUNDS];
  for (int i = 0; i < n; i++) v[i] = *(const int64_t *)((const char *)&r[i] + off);
  qsort(v, (size_t)n, sizeof(v[0]), cmp_i64);
  return v[n / 2];
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  int dead_link_s = argc > 2 ? atoi(argv[2]) : 2;
  if (rounds < 1 || rounds > MAX_ROUNDS || dead_link_s < 1 || dead_link_s > 60) {
    fprintf(stderr, "usage: bench_netfail [ROUNDS (1..%d) [DEAD_LINK_S (1..60)]]\n",
            MAX_ROUNDS);
    return 2;
  }
  int64_t part_ms = dead_link_s * 1000 + 4000;
  if (part_ms < PARTITION_MS) part_ms = PARTITION_MS;
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "bench-netfail") < 0) die("mkdtemp");
  if (tg_test_certs(g_dir, "ca pki") ||
      tg_test_certs(g_dir, "host pki relay.test --ip 127.0.0.1") ||
      tg_test_certs(g_dir, "client pki alice --role record"))
    die("cannot make certificates");
  if (test_service_start(&g_ts) < 0) die("cannot start tracegated");
  relay_start(dead_link_s);
  if (raw_producer_connect(&g_p, &g_ts, "bench.producer", "netfail.ds", 32, 256,
                           false) < 0)
    die("cannot connect the producer");
  const char *out = in_dir("netfail.pftrace");
  cli_start(out, dead_link_s);
  if (raw_producer_wait_started(&g_p, STEP_MS) < 0) die("tracing did not start");

  round_t r[MAX_ROUNDS];
  const uint64_t chunk_bytes = PER_CHUNK * BIG;
  for (int k = 0; k < rounds; k++) {
    uint64_t base = tg_fault_proxy_down_bytes(g_px);
    commit_chunk("before", (uint32_t)k * PER_CHUNK);
    read_through(base, chunk_bytes);
    /* The cut: a reply with packets held in flight, then silence. A hold
     * that caught an earlier read's tail instead (the CLI reads one at a
     * time) gives the link back before the timeout and tries again. */
    int64_t t0 = 0;
    for (int tries = 0;; tries++) {
      if (tries == 10) die("no read reply with packets was caught in flight");
      tg_fault_proxy_hold_down(g_px);
      t0 = tg_test_now_ms();
      commit_chunk("inflight", g_inflight);
      g_inflight += PER_CHUNK;
      if (tg_fault_proxy_wait_held_bytes(g_px, chunk_bytes, dead_link_s * 1000 / 3) == 0)
        break;
      uint64_t d0 = tg_fault_proxy_down_bytes(g_px);
      tg_fault_proxy_resume(g_px);
      read_through(d0, chunk_bytes);
    }
    tg_fault_proxy_stall(g_px);
    r[k].cli_ms = cli_until(TG_NOTE(FLEET_LINK_DEAD), (unsigned)k + 1) - t0;
    r[k].relay_ms = log_until(TG_NOTE(RELAY_LINK_LOST), (unsigned)k + 1) - t0;
    commit_chunk("during", (uint32_t)k * PER_CHUNK);
    int64_t left = t0 + part_ms - tg_test_now_ms();
    if (left > 0) sleep_ms(left);
    uint64_t replayed_before = replayed_bytes();
    base = tg_fault_proxy_down_bytes(g_px);
    tg_fault_proxy_resume(g_px);
    int64_t back = tg_test_now_ms();
    /* The re-attach comes first, then the replayed reply and the
     * partition's chunk through the new link. */
    r[k].reattach_ms = cli_until(TG_NOTE(FLEET_RECONNECTED), (unsigned)k + 1) - back;
    if (tg_fault_proxy_wait_down_bytes(g_px, base + 2 * chunk_bytes, STEP_MS) < 0)
      die("the data did not flow again");
    r[k].flow_ms = tg_test_now_ms() - back;
    cli_until(" so far)\n", (unsigned)k + 1);
    r[k].replayed = replayed_bytes() - replayed_before;
  }
  kill(g_cli, SIGINT);
  uint64_t fid = raw_producer_wait_flush(&g_p, g_p.last_flush_id, STEP_MS);
  if (!fid || raw_producer_commit(&g_p, NULL, NULL, 0, fid) < 0) die("no final flush");
  for (;;) {
    struct pollfd p = {g_err_fd, POLLIN, 0};
    if (poll(&p, 1, STEP_MS) <= 0) die("tracegate did not finish");
    ssize_t n = read(g_err_fd, g_err + g_n_err, sizeof(g_err) - 1 - g_n_err);
    if (n <= 0) break;
    g_n_err += (size_t)n;
    g_err[g_n_err] = 0;
  }
  close(g_err_fd);
  int status = tg_test_reap(g_cli, STEP_MS);
  g_cli = 0;
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status))
    die("tracegate failed (status %d)", status);
  bool lossless = tg_test_notice_count(g_err, TG_N_NO_LOSS, NULL) &&
                  !tg_test_notice_count(g_err, TG_N_DATA_LOSS, NULL);

  printf("bench_netfail: %d silent partitions of %d ms, each cut mid-read "
         "(a %llu-byte reply in flight); dead-link timeout %d s on both ends\n",
         rounds, (int)part_ms, (unsigned long long)chunk_bytes, dead_link_s);
  printf("  %-5s %14s %14s %16s %16s %14s\n", "round", "CLI found ms",
         "relay found ms", "back->attach ms", "back->data ms", "replayed B");
  for (int k = 0; k < rounds; k++)
    printf("  %-5d %14lld %14lld %16lld %16lld %14llu\n", k + 1,
           (long long)r[k].cli_ms, (long long)r[k].relay_ms,
           (long long)r[k].reattach_ms, (long long)r[k].flow_ms,
           (unsigned long long)r[k].replayed);
  long long dl = dead_link_s * 1000LL;
  long long cm = median(r, rounds, offsetof(round_t, cli_ms));
  long long rm = median(r, rounds, offsetof(round_t, relay_ms));
  printf("  median: dead link found by the CLI in %lld ms (%.2fx the %lld ms "
         "timeout), by the relay in %lld ms (%.2fx); link back to re-attached "
         "%lld ms, to data flowing %lld ms (%.2fx the timeout)\n",
         cm, (double)cm / (double)dl, dl, rm, (double)rm / (double)dl,
         (long long)median(r, rounds, offsetof(round_t, reattach_ms)),
         (long long)median(r, rounds, offsetof(round_t, flow_ms)),
         (double)median(r, rounds, offsetof(round_t, flow_ms)) / (double)dl);
  printf("  summary: %s\n", lossless ? "no data loss" : "DATA LOSS (see below)");
  if (!lossless) fprintf(stderr, "%s", g_err);

  raw_producer_close(&g_p);
  tg_fault_proxy_stop(g_px);
  g_px = NULL;
  tg_test_stop(g_relay, SIGTERM, 10000);
  g_relay = 0;
  test_service_stop(&g_ts);
  tg_test_rm_rf(g_dir);
  return lossless ? 0 : 1;
}
