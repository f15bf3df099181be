/* Remote recordings that survive their relay and their link (issue 12,
 * points 3 and 4), end to end: a real tracegated (raw producer from
 * tests/support), the real tracegate-relay and the CLI as children.
 *
 * - A relay SIGKILLed mid-recording and started again on the same port:
 *   tracegated kept the session under its disconnect lease (the relay
 *   asked for one when the client set its key), so `tracegate record -H`
 *   re-attaches and finishes with every packet exactly once and no loss.
 * - The link cut several times while ReadBuffers replies are on their
 *   way: the relay keeps what it forwarded in the key's replay window
 *   until the CLI acknowledges it, and the re-attached CLI asks for what
 *   followed the last reply it received (TracegateRelay.Resume): every
 *   packet exactly once, no gap, no duplicate, no loss reported.
 *
 * Between the CLI and the relay sits the smallest TCP proxy that serves
 * here (a thread of this process, copied from test_fleet_e2e.c;
 * tests/support/fault_proxy from branch h-netfail was not merged here
 * yet): it counts the bytes going to the CLI and cuts every connection on
 * request. Every wait is on an event with a deadline. */
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
#define BIG 1000 /* payload bytes of each test packet */

static char g_dir[128];

static const char *in_dir(const char *name) {
  static char bufs[8][256];
  static int i;
  char *b = bufs[i++ % 8];
  snprintf(b, 256, "%s/%s", g_dir, name);
  return b;
}

/* --- the relay ------------------------------------------------------------------ */

typedef struct relay {
  pid_t pid;
  int port;
} relay_t;

/* Starts tracegate-relay on 127.0.0.1:|port| (0: any) for |consumer_sock|
 * and waits for its "ready PORT" line. Its log is appended to |log|. */
static void relay_start_with(relay_t *r, int port, const char *consumer_sock,
                             const char *log, const char *flag,
                             const char *value) {
  int pfd[2];
  assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
  int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  assert_true(lfd >= 0);
  char fd[16], listen[32];
  snprintf(fd, sizeof(fd), "%d", pfd[1]);
  snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
  const char *argv[] = {
      "tracegate-relay", "--listen", listen, "--consumer-socket",
      consumer_sock, "--cert", in_dir("pki/relay.test.pem"), "--key",
      in_dir("pki/relay.test.key"), "--ca", in_dir("pki/ca.pem"), "--authz",
      in_dir("pki/authz"), "--ready-fd", fd, "--log-level", "info", flag,
      value, NULL};
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
  if (port) assert_int_equal(r->port, port);
}

static void relay_start(relay_t *r, int port, const char *consumer_sock,
                        const char *log) {
  relay_start_with(r, port, consumer_sock, log, NULL, NULL);
}

static void relay_stop(relay_t *r, int sig) {
  if (r->pid <= 0) return;
  tg_test_stop(r->pid, sig, 10000);
  r->pid = 0;
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

/* |n| packets of BIG payload bytes ("tag:" padded with 'x'), one chunk of a
 * page of at least 32 KiB. */
static void commit_big(raw_producer_t *p, uint32_t chunk_id, const char *tag,
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
  assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_1, 1, chunk_id,
                                            0, frags, lens, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

static void ack_flush(raw_producer_t *p) {
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
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

static size_t file_count(const char *path, const char *needle) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char line[4096];
  size_t n = 0;
  while (fgets(line, sizeof(line), f)) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

/* --- the proxy ------------------------------------------------------------------------- */

/* A TCP proxy in a thread: forwards every accepted connection to the
 * relay, counts the bytes going to the client, and on request cuts every
 * connection (it keeps accepting). In hold mode ('h') what comes from the
 * relay is taken in and counted but not delivered: it is in flight, and
 * the next cut ('c', which ends hold mode) loses it. */
typedef struct proxy {
  int listen_fd, port, target_port;
  int ctl[2];    /* 'c': cut, 'q': quit */
  int notify[2]; /* a byte after each accept and each forward to the client */
  pthread_t thread;
  atomic_ullong down_bytes;
  atomic_int accepted;
  atomic_ullong held_bytes;
  bool hold; /* the proxy thread's own */
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

/* Hold mode: read and count, deliver nothing. */
static bool hold(int from, atomic_ullong *count) {
  char buf[65536];
  ssize_t r = read(from, buf, sizeof(buf));
  if (r <= 0) return false;
  atomic_fetch_add(count, (unsigned long long)r);
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
      if (cmd == 'h') {
        p->hold = true;
        continue;
      }
      p->hold = false;
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
        ok = p->hold ? hold(p->up[i], &p->held_bytes)
                     : pump(p->up[i], p->cli[i], &p->down_bytes);
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

/* --- fixtures ----------------------------------------------------------------------------- */

static int group_setup(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_IGN);
  if (tg_test_mkdtemp(g_dir, sizeof(g_dir), "survive") < 0) return -1;
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

/* --- the test ------------------------------------------------------------------------------- */

static void relay_killed_and_restarted_loses_nothing(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  relay_t r1, r2;
  relay_start(&r1, 0, ts.consumer_sock, in_dir("relay1.log"));
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &ts, "crash.producer", "crash.ds",
                                        32, 256, false), 0);
  proxy_t px;
  proxy_start(&px, r1.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  char out[256]; /* in_dir's buffers rotate */
  snprintf(out, sizeof(out), "%s", in_dir("crash.pftrace"));
  const char *args[] = {"record", "-H", spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--compress", "none", "crash.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* The relay has asked tracegated to keep the session if it dies. */
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (file_count(in_dir("relay1.log"), "if the relay goes away") == 0) {
    assert_true(tg_test_now_ms() < deadline);
    usleep(20000);
  }
  /* Before the crash: 20 packets, read by the CLI through the relay. The
   * crash then cuts no ReadBuffers reply in flight: a reply the relay
   * holds when it dies is lost with it, which no lease can help (see
   * docs/operations.md). */
  unsigned long long base = atomic_load(&px.down_bytes);
  commit_big(&p, 0, "before", 0, 20);
  wait_down_bytes(&px, base, 20 * BIG);

  /* The relay dies without a word: no Detach reaches tracegated. */
  relay_stop(&r1, SIGKILL);
  /* Written while no relay runs: kept only if the session is. */
  commit_big(&p, 1, "during", 0, 20);
  /* systemd's restart: a new relay on the same port. */
  relay_start(&r2, r1.port, ts.consumer_sock, in_dir("relay2.log"));
  base = atomic_load(&px.down_bytes);
  commit_big(&p, 2, "after", 0, 20);
  /* Both batches reach the CLI through the new relay. */
  wait_down_bytes(&px, base, 40 * BIG);
  assert_true(atomic_load(&px.accepted) >= 2);

  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "lost the link"));
  assert_non_null(strstr(c.err, "reconnected and re-attached"));
  assert_non_null(strstr(c.err, "no data loss"));
  /* Every packet exactly once, in order: no gap, no duplicate. */
  trace_t t;
  load_trace(out, &t);
  assert_values(&t, "before", 0, 20);
  assert_values(&t, "during", 0, 20);
  assert_values(&t, "after", 0, 20);
  free_trace(&t);
  unlink(out);
  /* The new relay asked for the lease again (the CLI set its key again). */
  assert_true(file_count(in_dir("relay2.log"), "if the relay goes away") > 0);

  proxy_stop(&px);
  raw_producer_close(&p);
  relay_stop(&r2, SIGTERM);
  assert_int_equal(test_service_stop(&ts), 0);
}

#define ROUNDS 3
#define COMMITS 10 /* of 24 packets of BIG bytes: ~240 KB per round */

/* Waits until the relay's log shows |n| Resume calls. */
static void wait_resumes(const char *log, size_t n) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (file_count(log, "TracegateRelay.Resume allow") < n) {
    assert_true(tg_test_now_ms() < deadline);
    usleep(20000);
  }
}

static void cuts_mid_read_lose_nothing_and_double_nothing(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  relay_t r;
  relay_start(&r, 0, ts.consumer_sock, in_dir("relay.log"));
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &ts, "replay.producer",
                                        "replay.ds", 32, 256, false), 0);
  proxy_t px;
  proxy_start(&px, r.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  char out[256]; /* in_dir's buffers rotate */
  snprintf(out, sizeof(out), "%s", in_dir("replay.pftrace"));
  const char *args[] = {"record", "-H", spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "16mb", "--compress", "none", "replay.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  char tag[16];
  uint32_t chunk = 0;
  const unsigned long long round_bytes = COMMITS * 24ull * BIG;
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "round%d", k);
    /* From now on what the relay sends is in flight and stays there. */
    proxy_send(&px, 'h');
    unsigned long long held = atomic_load(&px.held_bytes);
    for (unsigned i = 0; i < COMMITS; i++)
      commit_big(&p, chunk++, tag, i * 24, 24);
    /* The CLI's reads fetched the whole round from the service; the relay
     * forwarded it; none of it arrived. */
    int64_t deadline = tg_test_now_ms() + WAIT_MS;
    while (atomic_load(&px.held_bytes) < held + round_bytes)
      proxy_wait(&px, deadline);
    unsigned long long down = atomic_load(&px.down_bytes);
    proxy_send(&px, 'c');
    /* Back, resumed, and the round sent again. */
    wait_resumes(in_dir("relay.log"), (size_t)k + 1);
    wait_down_bytes(&px, down, round_bytes);
  }
  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "reconnected and re-attached"));
  assert_non_null(strstr(c.err, "the relay sent again what the link loss took"));
  assert_null(strstr(c.err, "lost in transit"));
  /* The cut reads were made whole: none is said to be lost. */
  assert_null(strstr(c.err, "a read was cut"));
  assert_non_null(strstr(c.err, "no data loss"));
  /* Every packet exactly once, in order: no gap, no duplicate. */
  trace_t t;
  load_trace(out, &t);
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "round%d", k);
    assert_values(&t, tag, 0, COMMITS * 24);
  }
  free_trace(&t);
  unlink(out);
  proxy_stop(&px);
  raw_producer_close(&p);
  relay_stop(&r, SIGTERM);
  assert_int_equal(test_service_stop(&ts), 0);
}

/* The same cut with a replay window smaller than what was in flight (a
 * round is two replies of up to 128 KiB; the window holds one): the
 * oldest reply is gone, and exactly that is reported; nothing is doubled
 * and what is left is in order. */
static void a_window_too_small_loses_exactly_what_it_says(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  relay_t r;
  relay_start_with(&r, 0, ts.consumer_sock, in_dir("small.log"),
                   "--replay-window-kb", "160");
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &ts, "small.producer",
                                        "small.ds", 32, 256, false), 0);
  proxy_t px;
  proxy_start(&px, r.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  char out[256];
  snprintf(out, sizeof(out), "%s", in_dir("small.pftrace"));
  const char *args[] = {"record", "-H", spec, TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "16mb", "--compress", "none", "small.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  const unsigned long long round_bytes = COMMITS * 24ull * BIG;
  proxy_send(&px, 'h');
  for (unsigned i = 0; i < COMMITS; i++) commit_big(&p, i, "small", i * 24, 24);
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (atomic_load(&px.held_bytes) < round_bytes) proxy_wait(&px, deadline);
  proxy_send(&px, 'c');
  wait_resumes(in_dir("small.log"), 1);
  /* Then more, which arrives whole. */
  commit_big(&p, COMMITS, "after", 0, 20);
  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "no longer held: lost, counted in the summary"));
  const char *lb = strstr(c.err, "lost in transit: bytes");
  assert_non_null(lb);
  unsigned long long lost_bytes = 0;
  assert_int_equal(sscanf(lb + strlen("lost in transit: bytes"), " %llu",
                          &lost_bytes), 1);
  assert_null(strstr(c.err, "no data loss"));
  trace_t t;
  load_trace(out, &t);
  /* In order, none twice, the last ones there: the oldest are missing. */
  uint32_t prev = 0;
  size_t n = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!has_tag(t.pk[i], "small")) continue;
    uint32_t v = t.pk[i]->for_testing->seq_value;
    if (n) assert_true(v > prev);
    prev = v;
    n++;
  }
  size_t total = COMMITS * 24, missing = total - n;
  assert_true(n > 0);
  assert_true(missing > 0);
  assert_int_equal(prev, total - 1);
  /* The bytes said lost hold every missing packet (its payload and a few
   * bytes of framing each), and not much more. */
  assert_true(lost_bytes >= missing * BIG);
  assert_true(lost_bytes <= (missing + 1) * (BIG + 64));
  assert_values(&t, "after", 0, 20);
  free_trace(&t);
  unlink(out);
  proxy_stop(&px);
  raw_producer_close(&p);
  relay_stop(&r, SIGTERM);
  assert_int_equal(test_service_stop(&ts), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(relay_killed_and_restarted_loses_nothing),
      cmocka_unit_test(cuts_mid_read_lose_nothing_and_double_nothing),
      cmocka_unit_test(a_window_too_small_loses_exactly_what_it_says),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
