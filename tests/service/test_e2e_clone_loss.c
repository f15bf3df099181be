/* tracegated end to end: the loss a snapshot (CloneSession) reports.
 *
 * A clone of a session whose writers lost nothing reports no loss, however
 * often it is taken while they write (Perfetto's traced reports none
 * either), and a writer's real loss still shows in the clone. Both are
 * read from the TraceStats the clone's trace holds; when PERFETTO_BIN names the
 * directory of Perfetto's binaries (trace_processor_shell, with tp-stats
 * beside it or one level up), the clones are also imported by Perfetto's
 * trace processor, which must find no error or data-loss stat in a clean
 * one and the writer's loss in the other. Without PERFETTO_BIN that part
 * is skipped, and says so. */
#include <fcntl.h>
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

#include "pb/trace/trace.pb-c.h"
#include "test_proc.h"
#include "test_service.h"

#ifndef EMIT_PATH
#error "EMIT_PATH must name the tracegate-emit binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define WAIT_MS 30000
#define SESSION "clone_loss"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Starts |argv| (|path|) with stdin from /dev/null and its stdout (|out|)
 * or stderr (!|out|) into file |log|, the other to /dev/null or ours. */
static pid_t spawn_logged(const char *path, const char *const *argv,
                          const char *log, bool out) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = path;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  if (out)
    s.stdout_fd = fd;
  else
    s.stderr_fd = fd;
  pid_t pid = tg_test_spawn(&s);
  close(fd);
  assert_true(pid > 0);
  return pid;
}

/* The CLI with |args|, its output to /dev/null and its errors to ours. */
static pid_t spawn_cli(const char *const *args) {
  pid_t pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                                TG_TEST_FD_INHERIT);
  assert_true(pid > 0);
  return pid;
}

/* A 1 MiB buffer of |ds| (|fill_policy|: "RING_BUFFER" or "DISCARD") in a
 * session named SESSION, recorded by the CLI until it is stopped. Returns
 * the CLI's pid. */
static pid_t start_session(const test_service_t *ts, const char *ds,
                           const char *fill_policy) {
  char cfg[160], text[512], out[160];
  snprintf(cfg, sizeof(cfg), "%s/session.pbtxt", ts->dir);
  snprintf(text, sizeof(text),
           "buffers { size_kb: 1024 fill_policy: %s }\n"
           "data_sources { config { name: \"%s\" } }\n"
           "unique_session_name: \"" SESSION "\"\n",
           fill_policy, ds);
  write_file(cfg, text);
  snprintf(out, sizeof(out), "%s/session.pftrace", ts->dir);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", out, NULL};
  return spawn_cli(args);
}

/* Starts `tracegate record --clone-by-name SESSION` into |trace| with its
 * summary in |summary|. Returns its pid. */
static pid_t spawn_clone(const test_service_t *ts, const char *trace,
                         const char *summary) {
  const char *args[] = {"record", "--socket", ts->consumer_sock,
                        "--clone-by-name", SESSION, "-o", trace,
                        "--summary-json", summary, NULL};
  return spawn_cli(args);
}

static int clone_once(const test_service_t *ts, const char *trace,
                      const char *summary) {
  return tg_test_exit_code(tg_test_reap(spawn_clone(ts, trace, summary), WAIT_MS));
}

/* Perfetto's tp-stats, or NULL (said once) when PERFETTO_BIN is unset. */
static const char *tp_stats_path(void) {
  static char path[512];
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "[ SKIPPED  ] the trace processor import: PERFETTO_BIN "
                    "(the directory of Perfetto's binaries) is not set\n");
    return NULL;
  }
  const char *where[] = {"%s/tp-stats", "%s/../tp-stats"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof(path), where[i], bin);
    if (access(path, X_OK) == 0) return path;
  }
  fail_msg("PERFETTO_BIN=%s: no tp-stats there or one level up", bin);
  return NULL;
}

/* Runs tp-stats on |trace|, its output into |out_path|. Returns its exit
 * code: 0 when trace processor found no error or data-loss stat. */
static int tp_stats(const char *tp, const char *trace, const char *out_path) {
  const char *argv[] = {tp, trace, NULL};
  pid_t pid = spawn_logged(tp, argv, out_path, true);
  return tg_test_exit_code(tg_test_reap(pid, 120000));
}

static bool file_has(const char *path, const char *needle) {
  char buf[8192];
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

/* The loss counters of buffer 0 in the last TraceStats of trace |path|. */
typedef struct loss {
  uint64_t packet_loss, overwritten, discarded, abi_violations;
} loss_t;

static loss_t trace_loss(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  assert_true(fd >= 0);
  static uint8_t buf[4 << 20];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0)
    n += (size_t)r;
  close(fd);
  assert_true(n < sizeof(buf));
  Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, n, buf);
  assert_non_null(t);
  const Perfetto__Protos__TraceStats *ts = NULL;
  for (size_t i = 0; i < t->n_packet; i++)
    if (t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
      ts = t->packet[i]->trace_stats;
  assert_non_null(ts);
  assert_true(ts->n_buffer_stats >= 1);
  const Perfetto__Protos__TraceStats__BufferStats *b = ts->buffer_stats[0];
  loss_t l = {b->trace_writer_packet_loss, b->chunks_overwritten,
              b->chunks_discarded, b->abi_violations};
  perfetto__protos__trace__free_unpacked(t, NULL);
  return l;
}

/* Two writers at 1000 packets/s each (tracegate-emit) into a 1 MiB ring,
 * cloned again and again while they write: each clone is whole, so it
 * reports no loss, and trace processor finds none in it. */
static void clean_clones_report_no_loss(void **state) {
  test_service_t *ts = *state;
  char err_path[160];
  snprintf(err_path, sizeof(err_path), "%s/emit.err", ts->dir);
  /* --stall: a writer waits for room rather than drop, so that a loaded
   * machine cannot make a real loss here. */
  const char *argv[] = {"tracegate-emit", "--socket", ts->producer_sock,
                        "--threads", "2", "--rate", "1000", "--stall", NULL};
  pid_t emit = spawn_logged(EMIT_PATH, argv, err_path, false);
  pid_t rec = start_session(ts, "tracegate.emit", "RING_BUFFER");

  char trace[160], summary[160], tp_out[160];
  snprintf(summary, sizeof(summary), "%s/clone.json", ts->dir);
  snprintf(tp_out, sizeof(tp_out), "%s/tp-stats.out", ts->dir);
  /* Until both writers have written into the session. */
  int64_t end = tg_test_now_ms() + WAIT_MS;
  long packets = 0;
  while (packets < 200 && tg_test_now_ms() < end) {
    sleep_ms(100);
    snprintf(trace, sizeof(trace), "%s/wait.pftrace", ts->dir);
    if (clone_once(ts, trace, summary) != 0) continue;
    const char *p = tg_test_json(summary, "hosts.0.packets");
    packets = p ? strtol(p, NULL, 10) : 0;
  }
  assert_true(packets >= 200);

  const char *tp = tp_stats_path();
  for (int i = 0; i < 3; i++) {
    snprintf(trace, sizeof(trace), "%s/clone%d.pftrace", ts->dir, i);
    assert_int_equal(clone_once(ts, trace, summary), 0);
    assert_json(summary, "hosts.0.outcome", "\"ok\"");
    loss_t l = trace_loss(trace);
    assert_int_equal(l.packet_loss, 0);
    assert_int_equal(l.overwritten, 0);
    assert_int_equal(l.discarded, 0);
    assert_int_equal(l.abi_violations, 0);
    if (tp && tp_stats(tp, trace, tp_out) != 0)
      fail_msg("trace processor finds loss or errors in clone %d (%s)", i,
               tp_out);
    sleep_ms(50);
  }

  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGTERM, WAIT_MS)), 0);
  assert_int_equal(tg_test_exit_code(tg_test_stop(emit, SIGTERM, WAIT_MS)), 0);
}

/* A raw producer of "test.loss" (|p|, the caller closes it) and a session
 * of it, started. Returns the CLI's pid. The buffer is DISCARD, which the
 * CLI reads only once the session ended: a ring it reads while tracing
 * (every 500 ms) could take the chunk a test commits before the clone the
 * test starts next gets there, as it did on a loaded machine. */
static pid_t start_with_producer(const test_service_t *ts, raw_producer_t *p) {
  assert_int_equal(raw_producer_connect(p, ts, "loss.producer", "test.loss", 4,
                                        64, false),
                   0);
  pid_t rec = start_session(ts, "test.loss", "DISCARD");
  assert_int_equal(raw_producer_wait_started(p, WAIT_MS), 0);
  return rec;
}

/* |k| whole packets as a chunk's payload: each behind its size, a
 * redundant 4-byte varint as writers put it. Returns the bytes used. */
static size_t chunk_payload(uint8_t *raw, size_t cap, const uint8_t *const *pk,
                            const size_t *lens, size_t k) {
  size_t n = 0;
  for (size_t i = 0; i < k; i++) {
    assert_true(lens[i] < (1u << 14) && n + 4 + lens[i] <= cap);
    raw[n++] = (uint8_t)(0x80 | (lens[i] & 0x7F));
    raw[n++] = (uint8_t)(0x80 | ((lens[i] >> 7) & 0x7F));
    raw[n++] = 0x80;
    raw[n++] = 0;
    memcpy(raw + n, pk[i], lens[i]);
    n += lens[i];
  }
  return n;
}

/* Commits |raw| as chunk 0 of page 0 (writer 1, |k| packets) and clones
 * the session into |trace| with its summary JSON in |summary|, answering
 * the flush the clone waits for. */
static void commit_and_clone(const test_service_t *ts, raw_producer_t *p,
                             const uint8_t *raw, size_t n, uint8_t k,
                             const char *trace, const char *summary) {
  assert_int_equal(raw_producer_write_chunk_raw(p, 0, 0, 1, 1, 0, k, 0, raw, n), 0);
  const uint32_t pages[1] = {0}, chunks[1] = {0};
  assert_int_equal(raw_producer_commit(p, pages, chunks, 1, 0), 0);
  pid_t cl = spawn_clone(ts, trace, summary);
  uint64_t flush = raw_producer_wait_flush(p, 0, WAIT_MS);
  assert_true(flush != 0);
  assert_int_equal(raw_producer_commit_ex(p, NULL, 0, NULL, 0, flush, false), 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(cl, WAIT_MS)), 0);
}

/* A session whose linux.ftrace stats (start, then end) say the kernel
 * overwrote events: the clone lists the overrun as ftrace_cpu_overrun in
 * its summary JSON, counted in the loss total, as a plain recording does. */
static void clone_reports_ftrace_overruns(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  pid_t rec = start_with_producer(ts, &p);

  uint8_t pk[2][128];
  const uint8_t *frags[2] = {pk[0], pk[1]};
  const uint64_t start[2] = {3, 4}, end[2] = {10, 24};
  size_t lens[2] = {make_ftrace_stats_packet(pk[0], 1, start, 2),
                    make_ftrace_stats_packet(pk[1], 2, end, 2)};
  uint8_t raw[512];
  size_t n = chunk_payload(raw, sizeof(raw), frags, lens, 2);

  char trace[160], summary[160];
  snprintf(trace, sizeof(trace), "%s/ftrace.pftrace", ts->dir);
  snprintf(summary, sizeof(summary), "%s/ftrace.json", ts->dir);
  commit_and_clone(ts, &p, raw, n, 2, trace, summary);
  assert_json(summary, "hosts.0.loss.counters.ftrace_cpu_overrun", "27");
  assert_json(summary, "hosts.0.loss.total", "27");

  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGTERM, WAIT_MS)), 0);
  raw_producer_close(&p);
}

/* A writer whose packet was dropped (its drop marker) before the clone:
 * the clone reports it, and trace processor finds it. */
static void clone_reports_a_writers_real_loss(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  pid_t rec = start_with_producer(ts, &p);

  /* Chunk 0: two packets, then a packet the writer dropped. */
  uint8_t pk[2][64];
  const uint8_t *frags[3];
  size_t lens[3];
  for (int i = 0; i < 2; i++) {
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), "kept", (uint32_t)i);
    frags[i] = pk[i];
  }
  uint8_t raw[256];
  size_t n = chunk_payload(raw, sizeof(raw), frags, lens, 2);
  const uint8_t drop[4] = {0xFF, 0xFF, 0xFF, 0x7F}; /* TG_PACKET_SIZE_DROP */
  memcpy(raw + n, drop, 4);
  n += 4;

  char trace[160], summary[160], tp_out[160];
  snprintf(trace, sizeof(trace), "%s/lossy.pftrace", ts->dir);
  snprintf(summary, sizeof(summary), "%s/lossy.json", ts->dir);
  snprintf(tp_out, sizeof(tp_out), "%s/tp-lossy.out", ts->dir);
  commit_and_clone(ts, &p, raw, n, 3, trace, summary);
  loss_t l = trace_loss(trace);
  assert_int_equal(l.packet_loss, 1);
  assert_int_equal(l.abi_violations, 0);
  const char *tp = tp_stats_path();
  if (tp) {
    assert_int_equal(tp_stats(tp, trace, tp_out), 1);
    assert_true(file_has(tp_out, "\"traced_buf_trace_writer_packet_loss\""));
  }

  assert_int_equal(tg_test_exit_code(tg_test_stop(rec, SIGTERM, WAIT_MS)), 0);
  raw_producer_close(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(clean_clones_report_no_loss,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_reports_a_writers_real_loss,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(clone_reports_ftrace_overruns,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
