/* The `tracegate` binary end to end: a real tracegated, a raw producer
 * (tests/support) writing SMB chunks by hand, and the CLI as a child
 * process. Records in both output modes (the service writing the file, and
 * ReadBuffers over the connection), text configs, detach/attach, Ctrl-C,
 * the progress line on a terminal, queries, and the failures: no service,
 * a bad or refused config, an unwritable output path. Every wait is on an
 * event (a command from the service, the child's exit) with a deadline. */
#include <dirent.h>
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

#include "test_proc.h"
#include "tracegate/pb_wire.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define WAIT_MS 20000

/* --- the CLI as a child ------------------------------------------------------ */

typedef struct child {
  pid_t pid;
  int out_fd, err_fd;
  char out[16384], err[16384];
  size_t n_out, n_err;
  int status; /* wait status */
} child_t;

/* Starts tracegate with |args| (NULL-terminated, without argv[0]). With
 * |err_tty| >= 0, stderr is that terminal instead of a pipe. */
static void spawn_cli_tty(child_t *c, const char *const *args, int err_tty) {
  memset(c, 0, sizeof(*c));
  int po[2], pe[2] = {-1, -1};
  assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  if (err_tty < 0) assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  const char *argv[32] = {"tracegate"};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    assert_true(n < 31);
    argv[n] = args[n - 1];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATE_CLI_PATH;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = po[1];
  s.stderr_fd = err_tty >= 0 ? err_tty : pe[1];
  s.default_sigint = true;
  c->pid = tg_test_spawn(&s);
  assert_true(c->pid > 0);
  close(po[1]);
  c->out_fd = po[0];
  if (err_tty < 0) {
    close(pe[1]);
    c->err_fd = pe[0];
  } else {
    c->err_fd = -1;
  }
}

static void spawn_cli(child_t *c, const char *const *args) {
  spawn_cli_tty(c, args, -1);
}

static void drain_fd(int *fd, char *buf, size_t cap, size_t *n) {
  ssize_t r = read(*fd, buf + *n, cap - 1 - *n);
  if (r > 0) {
    *n += (size_t)r;
    buf[*n] = 0;
    if (*n + 1 < cap) return;
  }
  if (r < 0 && errno == EINTR) return;
  close(*fd); /* EOF, EIO (a terminal without slave), or full */
  *fd = -1;
}

/* Collects the output until the child closed it, then reaps it. Returns
 * the exit code, or -1 (and kills it) after |timeout_ms|. |extra| >= 0 is
 * one more fd to collect into |extra_buf| (a terminal's master side). */
static int wait_cli_ex(child_t *c, int timeout_ms, int extra, char *extra_buf,
                       size_t extra_cap) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  size_t n_extra = 0;
  if (extra_buf) extra_buf[0] = 0;
  bool killed = false;
  while (c->out_fd >= 0 || c->err_fd >= 0) {
    struct pollfd p[3];
    int np = 0, io = -1, ie = -1, ix = -1;
    if (c->out_fd >= 0) { io = np; p[np++] = (struct pollfd){c->out_fd, POLLIN, 0}; }
    if (c->err_fd >= 0) { ie = np; p[np++] = (struct pollfd){c->err_fd, POLLIN, 0}; }
    if (extra >= 0) { ix = np; p[np++] = (struct pollfd){extra, POLLIN, 0}; }
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) {
      killed = true;
      break;
    }
    if (poll(p, (nfds_t)np, (int)left) < 0) continue;
    if (io >= 0 && p[io].revents) drain_fd(&c->out_fd, c->out, sizeof(c->out), &c->n_out);
    if (ie >= 0 && p[ie].revents) drain_fd(&c->err_fd, c->err, sizeof(c->err), &c->n_err);
    if (ix >= 0 && p[ix].revents) drain_fd(&extra, extra_buf, extra_cap, &n_extra);
  }
  if (c->out_fd >= 0) close(c->out_fd);
  if (c->err_fd >= 0) close(c->err_fd);
  c->out_fd = c->err_fd = -1;
  /* Output closed: the exit follows, bounded by what is left of the
   * deadline (at least a second, for a child that closed it just in time);
   * after a timeout it is killed at once. */
  int64_t left = deadline - tg_test_now_ms();
  c->status = tg_test_reap(c->pid, killed ? 0 : left > 1000 ? (int)left : 1000);
  if (c->status == -1) killed = true;
  if (killed) {
    print_message("tracegate timed out; stderr:\n%s\n", c->err);
    return -1;
  }
  /* Whatever the exit code, a sanitizer report is a failure. */
  if (strstr(c->err, "Sanitizer") || strstr(c->err, "runtime error"))
    print_message("tracegate stderr:\n%s\n", c->err);
  assert_null(strstr(c->err, "Sanitizer"));
  assert_null(strstr(c->err, "runtime error"));
  return WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status);
}

static int wait_cli(child_t *c) { return wait_cli_ex(c, WAIT_MS, -1, NULL, 0); }

static int run_cli(child_t *c, const char *const *args) {
  spawn_cli(c, args);
  return wait_cli(c);
}

/* --- trace files ---------------------------------------------------------------- */

typedef struct trace_file {
  size_t packets;       /* all packets */
  size_t test_packets;  /* for_testing with |str| */
  uint32_t values[256]; /* their seq_values, in order */
  size_t big_len;       /* the longest for_testing str */
  bool has_config;      /* a trace_config packet */
  uint32_t config_duration_ms;
  /* What the quick form asked of the probes' data sources (0: absent). */
  uint32_t config_meminfo_ms, config_stat_ms, config_proc_poll_ms;
} trace_file_t;

/* Decodes |path| as a sequence of Trace.packet fields; every byte must
 * belong to a whole TracePacket. */
static void read_trace(const char *path, const char *str, trace_file_t *t) {
  memset(t, 0, sizeof(*t));
  int fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  assert_true(st.st_size > 0);
  uint8_t *buf = malloc((size_t)st.st_size);
  assert_non_null(buf);
  assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
  close(fd);
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
    t->packets++;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
        pk->for_testing->str) {
      size_t sl = strlen(pk->for_testing->str);
      if (sl > t->big_len) t->big_len = sl;
      if (!strcmp(pk->for_testing->str, str) && t->test_packets < 256)
        t->values[t->test_packets++] = pk->for_testing->seq_value;
    }
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG) {
      t->has_config = true;
      t->config_duration_ms = pk->trace_config->duration_ms;
      for (size_t d = 0; d < pk->trace_config->n_data_sources; d++) {
        const Perfetto__Protos__DataSourceConfig *dc =
            pk->trace_config->data_sources[d]->config;
        if (dc && dc->sys_stats_config) {
          t->config_meminfo_ms = dc->sys_stats_config->meminfo_period_ms;
          t->config_stat_ms = dc->sys_stats_config->stat_period_ms;
        }
        if (dc && dc->process_stats_config)
          t->config_proc_poll_ms = dc->process_stats_config->proc_stats_poll_ms;
      }
    }
    perfetto__protos__trace_packet__free_unpacked(pk, NULL);
    p += 1 + k + len;
  }
  free(buf);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* No temporary file left behind in |dir|. */
static void assert_no_temp(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp-")) fail_msg("left behind: %s/%s", dir, e->d_name);
  closedir(d);
}

/* --- producer steps ---------------------------------------------------------------- */

static void commit_packets(raw_producer_t *p, uint32_t chunk_id, const char *str,
                           uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, str, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* Answers the next flush (the CLI's stop, or the end of the duration). */
static void ack_flush(raw_producer_t *p) {
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
}

static char out_path[256];

static const char *out_in(const test_service_t *ts, const char *name) {
  snprintf(out_path, sizeof(out_path), "%s/%s", ts->dir, name);
  return out_path;
}

/* --- tests ---------------------------------------------------------------------------- */

static void record_quick_form_writes_the_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "quick.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "1s", "-b", "1mb", "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "quick", 10, 6);
  ack_flush(&p); /* the duration's final flush */
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "wrote"));
  assert_non_null(strstr(c.err, "no data loss"));
  trace_file_t t;
  read_trace(out, "quick", &t);
  assert_int_equal(t.test_packets, 6);
  for (unsigned i = 0; i < 6; i++) assert_int_equal(t.values[i], 10 + i);
  assert_true(t.has_config);
  assert_int_equal(t.config_duration_ms, 1000);
  assert_no_temp(ts->dir);
  unlink(out);
  raw_producer_close(&p);
}

/* The quick form gives the probes' data sources sampling periods: without
 * them tracegate-probes (like traced_probes) would record nothing. */
static void quick_form_asks_the_probes_to_sample(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.probes", "linux.sys_stats",
                                        4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "probes.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "1s", "linux.sys_stats", "linux.process_stats",
                        NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "probes", 1, 1);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "probes", &t);
  assert_true(t.has_config);
  assert_int_equal(t.config_meminfo_ms, 1000);
  assert_int_equal(t.config_stat_ms, 1000);
  assert_int_equal(t.config_proc_poll_ms, 1000);
  unlink(out);
  raw_producer_close(&p);
}

static void record_over_read_buffers_reassembles_big_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 32, 256, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "rb.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "--out", out,
                        "--time", "0", "--read-buffers", "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "rb", 1, 3);
  /* 150 KiB: more than one IPC frame, so ReadBuffers slices it. */
  enum { STR_LEN = 150 * 1024 };
  char *str = malloc(STR_LEN + 1);
  uint8_t *pkt = malloc(STR_LEN + 64);
  assert_non_null(str);
  assert_non_null(pkt);
  memset(str, 'x', STR_LEN);
  str[STR_LEN] = 0;
  size_t total = make_test_packet(pkt, STR_LEN + 64, str, 7);
  const size_t room = tg_smb_chunk_size(p.smb.page_size, TG_PAGE_DIV_1) -
                      TG_SMB_CHUNK_HEADER_SIZE - TG_PACKET_HEADER_SIZE;
  uint32_t id = 1;
  for (size_t off = 0; off < total; off += room, id++) {
    const uint8_t *frag = pkt + off;
    size_t len = total - off < room ? total - off : room;
    unsigned flags = (off ? TG_CHUNK_FIRST_PACKET_CONTINUES : 0) |
                     (off + len < total ? TG_CHUNK_LAST_PACKET_CONTINUES : 0);
    assert_int_equal(raw_producer_write_chunk(&p, 0, 0, TG_PAGE_DIV_1, 1, id, flags,
                                              &frag, &len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  }
  commit_packets(&p, id, "rb", 4, 2);
  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "rb", &t);
  assert_int_equal(t.test_packets, 5);
  for (unsigned i = 0; i < 5; i++) assert_int_equal(t.values[i], 1 + i);
  assert_int_equal(t.big_len, STR_LEN);
  unlink(out);
  free(str);
  free(pkt);
  raw_producer_close(&p);
}

static const char txt_config[] =
    "# a text config, as Perfetto's --txt takes\n"
    "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
    "data_sources: {\n"
    "  config { name: \"cli.ds\" }\n"
    "}\n"
    "duration_ms: 1500\n";

static void record_with_a_text_config(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "config.pbtxt"));
  write_file(cfg, txt_config);
  snprintf(out, sizeof(out), "%s", out_in(ts, "txt.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "txt", 0, 4);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "txt", &t);
  assert_int_equal(t.test_packets, 4);
  assert_true(t.has_config);
  assert_int_equal(t.config_duration_ms, 1500);
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

/* --detach, packets, then --attach --stop; |read_buffers| picks the mode. */
static void detach_attach(test_service_t *ts, bool read_buffers, const char *key) {
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "detach.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "detach.pftrace"));
  const char *detach[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                          "-o", out, "--detach", key,
                          read_buffers ? "--read-buffers" : NULL, NULL};
  child_t c;
  assert_int_equal(run_cli(&c, detach), 0);
  char want[64];
  snprintf(want, sizeof(want), "%s\n", key);
  assert_string_equal(c.out, want);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "detached", 20, 5);

  /* stats --attach gives the session back afterwards. */
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, "--attach", key, NULL};
  assert_int_equal(run_cli(&c, stats), 0);
  assert_non_null(strstr(c.out, "buffer 0"));
  assert_non_null(strstr(c.out, "bytes_written"));

  const char *attach[] = {"record", "--socket", ts->consumer_sock, "--attach", key,
                          "--stop", "-o", out, NULL};
  spawn_cli(&c, attach);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "detached", &t);
  assert_int_equal(t.test_packets, 5);
  for (unsigned i = 0; i < 5; i++) assert_int_equal(t.values[i], 20 + i);
  /* The key is free again: attaching once more fails. */
  assert_int_not_equal(run_cli(&c, attach), 0);
  assert_non_null(strstr(c.err, "cannot attach"));
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

static void detach_then_attach_with_the_service_writing(void **state) {
  detach_attach(*state, false, "cli-key");
}

static void detach_then_attach_reading_buffers(void **state) {
  detach_attach(*state, true, "cli-key-rb");
}

static void sigint_stops_cleanly_and_keeps_the_file(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "sigint.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "sigint", 1, 3);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_non_null(strstr(c.err, "stopping the trace"));
  trace_file_t t;
  read_trace(out, "sigint", &t);
  assert_int_equal(t.test_packets, 3);
  assert_no_temp(ts->dir);
  unlink(out);
  raw_producer_close(&p);
}

static void second_sigint_aborts(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "abort.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "abort", 1, 3);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  /* The CLI is stopping: its flush reached the producer, which does not
   * answer. The second Ctrl-C aborts. */
  assert_true(raw_producer_wait_flush(&p, 0, WAIT_MS) > 0);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  assert_int_equal(wait_cli(&c), 130);
  assert_non_null(strstr(c.err, "aborted"));
  assert_false(exists(out));
  assert_no_temp(ts->dir);
  raw_producer_close(&p);
}

static void progress_line_on_a_terminal(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  assert_true(slave >= 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "tty.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli_tty(&c, args, slave);
  close(slave);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "tty", 1, 3);
  /* The progress line counts the packets the service wrote: wait for it
   * on the terminal, then stop. */
  char tty[16384] = "";
  size_t n = 0;
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (!strstr(tty, "recording") && tg_test_now_ms() < deadline) {
    struct pollfd pf = {master, POLLIN, 0};
    if (poll(&pf, 1, 200) == 1) {
      ssize_t r = read(master, tty + n, sizeof(tty) - 1 - n);
      if (r > 0) tty[n += (size_t)r] = 0;
    }
  }
  assert_non_null(strstr(tty, "recording"));
  assert_non_null(strstr(tty, "\r\033[K"));
  kill(c.pid, SIGINT);
  ack_flush(&p);
  char rest[16384];
  assert_int_equal(wait_cli_ex(&c, WAIT_MS, master, rest, sizeof(rest)), 0);
  assert_non_null(strstr(rest, "no data loss"));
  close(master);
  unlink(out);
  raw_producer_close(&p);
}

static void missing_service_fails_with_a_message(void **state) {
  test_service_t *ts = *state;
  char sock[256], out[256];
  snprintf(sock, sizeof(sock), "%s/no-such-socket", ts->dir);
  snprintf(out, sizeof(out), "%s", out_in(ts, "none.pftrace"));
  const char *args[] = {"record", "--socket", sock, "-o", out, "cli.ds", NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  assert_non_null(strstr(c.err, "cannot connect to the tracing service at"));
  assert_non_null(strstr(c.err, sock));
  assert_non_null(strstr(c.err, "is tracegated running?"));
  assert_false(exists(out));
  assert_no_temp(ts->dir);
  const char *query[] = {"query", "--socket", sock, NULL};
  assert_int_not_equal(run_cli(&c, query), 0);
  assert_non_null(strstr(c.err, "is tracegated running?"));
}

static void bad_config_reports_line_and_column(void **state) {
  test_service_t *ts = *state;
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "bad.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "duration_ms: 1000\n"
             "  no_such_field: 3\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "bad.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  char want[300];
  snprintf(want, sizeof(want), "%s: line 3, column 3", cfg);
  if (!strstr(c.err, want)) print_message("stderr: %s\n", c.err);
  assert_non_null(strstr(c.err, want));
  assert_false(exists(out));

  /* A config the service refuses: its own words. */
  write_file(cfg, "duration_ms: 1000\n");
  assert_int_not_equal(run_cli(&c, args), 0);
  assert_non_null(strstr(c.err, "buffers: at least one buffer is required"));
  assert_false(exists(out));
  assert_no_temp(ts->dir);

  /* A text file without --txt does not decode as binary. */
  const char *binary[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "-o", out,
                          NULL};
  write_file(cfg, "buffers { size_kb: 1024 }\n");
  assert_int_not_equal(run_cli(&c, binary), 0);
  assert_non_null(strstr(c.err, "does not decode as a TraceConfig"));
  unlink(cfg);

  /* Bad flags. */
  const char *bad_time[] = {"record", "-o", out, "-t", "ten", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, bad_time), 2);
  assert_non_null(strstr(c.err, "--time"));
  const char *stop_alone[] = {"record", "-o", out, "--stop", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, stop_alone), 2);
  assert_non_null(strstr(c.err, "--stop needs --attach"));
}

static void unwritable_output_fails_before_tracing(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s/no-such-dir/x.pftrace", ts->dir);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "cli.ds", NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  assert_non_null(strstr(c.err, "cannot write"));
  assert_non_null(strstr(c.err, out));
  /* No session was ever created: the producer was not told to start, and
   * the service has no session. */
  assert_int_equal(raw_producer_poll(&p, 200), 0);
  assert_false(p.started);
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  size_t np, nd, ns, nr;
  assert_int_equal(raw_consumer_query_all(&rc, WAIT_MS, &np, &nd, &ns, &nr), 0);
  assert_int_equal(ns, 0);
  raw_consumer_close(&rc);
  /* A directory as output. */
  const char *dir_args[] = {"record", "--socket", ts->consumer_sock, "-o", ts->dir,
                            "cli.ds", NULL};
  assert_int_not_equal(run_cli(&c, dir_args), 0);
  assert_non_null(strstr(c.err, "is a directory"));
  raw_producer_close(&p);
}

static void query_and_stats_print_tables(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  child_t c;
  const char *query[] = {"query", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, query), 0);
  assert_non_null(strstr(c.out, "PRODUCERS (1)"));
  assert_non_null(strstr(c.out, "cli.producer"));
  assert_non_null(strstr(c.out, "DATA SOURCES (1)"));
  assert_non_null(strstr(c.out, "cli.ds"));
  assert_non_null(strstr(c.out, "TRACING SESSIONS (0"));
  /* Perfetto's spelling. */
  const char *pquery[] = {"--query", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, pquery), 0);
  assert_non_null(strstr(c.out, "cli.producer"));
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, stats), 0);
  assert_non_null(strstr(c.out, "no tracing sessions"));
  const char *missing[] = {"stats", "--socket", ts->consumer_sock, "--session", "99", NULL};
  assert_int_not_equal(run_cli(&c, missing), 0);
  assert_non_null(strstr(c.err, "no tracing session 99"));
  raw_producer_close(&p);
}

static void help_of_every_command(void **state) {
  (void)state;
  static const struct {
    const char *args[4];
    const char *mentions[10];
  } cases[] = {
      {{"--help"}, {"record", "query", "stats", "help"}},
      {{"help"}, {"record", "query", "stats"}},
      {{"record", "--help"},
       {"--config", "--txt", "--out", "--time", "--buffer", "--detach", "--attach",
        "--stop", "--socket", "-c = --config"}},
      {{"help", "record"}, {"--config", "--detach", "examples"}},
      {{"query", "--help"}, {"--socket"}},
      {{"stats", "--help"}, {"--session", "--attach", "--socket"}},
      {{"help", "stats"}, {"--session"}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    child_t c;
    assert_int_equal(run_cli(&c, cases[i].args), 0);
    for (size_t k = 0; k < 10 && cases[i].mentions[k]; k++) {
      if (!strstr(c.out, cases[i].mentions[k]))
        print_message("'%s' missing from:\n%s\n", cases[i].mentions[k], c.out);
      assert_non_null(strstr(c.out, cases[i].mentions[k]));
    }
  }
  child_t c;
  const char *none[] = {NULL};
  assert_int_equal(run_cli(&c, none), 2);
  const char *unknown[] = {"frobnicate", NULL};
  assert_int_equal(run_cli(&c, unknown), 2);
  assert_non_null(strstr(c.err, "unknown command"));
}

int main(void) {
#define SVC(t) cmocka_unit_test_setup_teardown(t, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      SVC(record_quick_form_writes_the_packets),
      SVC(quick_form_asks_the_probes_to_sample),
      SVC(record_over_read_buffers_reassembles_big_packets),
      SVC(record_with_a_text_config),
      SVC(detach_then_attach_with_the_service_writing),
      SVC(detach_then_attach_reading_buffers),
      SVC(sigint_stops_cleanly_and_keeps_the_file),
      SVC(second_sigint_aborts),
      SVC(progress_line_on_a_terminal),
      SVC(missing_service_fails_with_a_message),
      SVC(bad_config_reports_line_and_column),
      SVC(unwritable_output_fails_before_tracing),
      SVC(query_and_stats_print_tables),
      cmocka_unit_test(help_of_every_command),
  };
#undef SVC
  return cmocka_run_group_tests(tests, NULL, NULL);
}
