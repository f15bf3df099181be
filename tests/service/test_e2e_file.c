/* tracegated end to end: write_into_file. The service writes the trace into
 * a file descriptor the consumer passed, periodically, at the end, at its
 * size limit and when the service itself is told to stop. */
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
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "service_scenario.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"
#include "pb/trace/trace.pb-c.h"

#define LONG_STR \
  "0123456789012345678901234567890123456789012345678901234567890123456789012345678"

/* An unlinked temporary file in the service's directory. */
static int temp_file(const test_service_t *ts) {
  char path[160];
  snprintf(path, sizeof(path), "%s/trace-XXXXXX", ts->dir);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  return fd;
}

/* Decodes the whole file as a perfetto.protos.Trace. */
static Perfetto__Protos__Trace *read_trace(int fd, size_t *size) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  *size = (size_t)st.st_size;
  uint8_t *b = malloc(*size ? *size : 1);
  assert_non_null(b);
  assert_int_equal(pread(fd, b, *size, 0), (ssize_t)*size);
  Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, *size, b);
  free(b);
  assert_non_null(t);
  return t;
}

/* A session of "file.ds" writing into |fd| every |period_ms| (up to
 * |max_size| bytes when not 0), started. */
static void file_session(scenario_t *s, test_service_t *ts, int fd,
                         uint32_t period_ms, uint64_t max_size) {
  scenario_open(s, ts, (scenario_opts_t){.ds = "file.ds", .buffer_kb = 256});
  s->sc.cfg.has_write_into_file = 1;
  s->sc.cfg.write_into_file = 1;
  s->sc.cfg.has_file_write_period_ms = 1;
  s->sc.cfg.file_write_period_ms = period_ms;
  if (max_size) {
    s->sc.cfg.has_max_file_size_bytes = 1;
    s->sc.cfg.max_file_size_bytes = max_size;
  }
  scenario_start_into(s, fd);
}

static void commit_packets(raw_producer_t *p, uint32_t chunk_id, uint32_t first,
                           unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, LONG_STR, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* Checks the file's test packets are first..first+k-1 and returns k;
 * |has_config| / |has_stats| say which service packets were there. */
static size_t check_trace(const Perfetto__Protos__Trace *t, uint32_t first,
                          bool *has_config, bool *has_stats) {
  size_t k = 0;
  *has_config = *has_stats = false;
  for (size_t i = 0; i < t->n_packet; i++) {
    const Perfetto__Protos__TracePacket *pk = t->packet[i];
    *has_config |= pk->trace_config != NULL;
    *has_stats |= pk->trace_stats != NULL;
    if (pk->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) continue;
    assert_int_equal(pk->for_testing->seq_value, first + k);
    assert_true(pk->trusted_packet_sequence_id > 1);
    k++;
  }
  return k;
}

static void write_into_file_yields_a_decodable_trace(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  int fd = temp_file(ts);
  file_session(&s, ts, fd, 100, 0);
  commit_packets(&s.p, 0, 0, 5);
  commit_packets(&s.p, 1, 5, 5);
  scenario_stop(&s);

  size_t size = 0;
  Perfetto__Protos__Trace *t = read_trace(fd, &size);
  bool has_config, has_stats;
  assert_int_equal(check_trace(t, 0, &has_config, &has_stats), 10);
  assert_true(has_config);
  assert_true(has_stats);
  perfetto__protos__trace__free_unpacked(t, NULL);
  close(fd);
  scenario_close(&s);
}

/* A session writing into a file, detached, that ends (its duration) has
 * its whole trace in the file and is freed: attaching to it then fails
 * (Perfetto's ReattachFailsAfterTimeout). */
static void detached_file_session_is_freed_when_it_ends(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  int fd = temp_file(ts);
  scenario_open(&s, ts, (scenario_opts_t){.ds = "file.ds", .buffer_kb = 256});
  s.sc.cfg.has_write_into_file = 1;
  s.sc.cfg.write_into_file = 1;
  s.sc.cfg.has_file_write_period_ms = 1;
  s.sc.cfg.file_write_period_ms = 100000;
  s.sc.cfg.has_duration_ms = 1;
  s.sc.cfg.duration_ms = 200;
  scenario_start_into(&s, fd);
  Perfetto__Protos__DetachRequest det = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
  det.key = "key";
  assert_int_equal(raw_call(&s.c.conn, "Detach", &det.base, -1, NULL, NULL, 5000), 1);
  raw_consumer_close(&s.c);
  commit_packets(&s.p, 0, 0, 5);
  /* The end: a final flush the producer answers. */
  uint64_t fid = raw_producer_wait_flush(&s.p, 0, 5000);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit_ex(&s.p, NULL, 0, NULL, 0, fid, false), 0);
  assert_int_equal(raw_producer_wait_stopped(&s.p, 5000), 0);
  /* Gone from the service once ended: looked for, not waited for. */
  raw_consumer_t q;
  assert_int_equal(raw_consumer_connect(&q, ts), 0);
  int64_t deadline = tg_test_now_ms() + 5000;
  size_t sessions = 1;
  while (sessions && tg_test_now_ms() < deadline) {
    Perfetto__Protos__QueryServiceStateResponse *r = raw_consumer_query(&q, 5000);
    assert_non_null(r);
    sessions = r->service_state->n_tracing_sessions;
    perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  }
  assert_int_equal(sessions, 0);
  Perfetto__Protos__AttachRequest att = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
  att.key = "key";
  assert_int_equal(raw_call(&q.conn, "Attach", &att.base, -1, NULL, NULL, 5000), 0);
  raw_consumer_close(&q);
  /* And the file holds the trace. */
  size_t size = 0;
  Perfetto__Protos__Trace *t = read_trace(fd, &size);
  bool has_config, has_stats;
  assert_int_equal(check_trace(t, 0, &has_config, &has_stats), 5);
  assert_true(has_stats);
  perfetto__protos__trace__free_unpacked(t, NULL);
  close(fd);
  scenario_close(&s);
}

static void max_file_size_stops_the_session(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  int fd = temp_file(ts);
  const uint64_t max = 8192;
  file_session(&s, ts, fd, 100, max);
  /* ~18 KiB of packets: more than the file may hold. */
  for (uint32_t id = 0; id < 20; id++) commit_packets(&s.p, id, id * 10, 10);

  /* No DisableTracing: the periodic write reaches the limit and ends it. */
  scenario_wait_end(&s);
  size_t size = 0;
  Perfetto__Protos__Trace *t = read_trace(fd, &size);
  assert_true(size <= max);
  bool has_config, has_stats;
  size_t k = check_trace(t, 0, &has_config, &has_stats);
  assert_true(k > 0);
  assert_true(k < 200);
  assert_true(has_config);
  perfetto__protos__trace__free_unpacked(t, NULL);
  close(fd);
  scenario_close(&s);
}

static void sigterm_writes_out_the_file_of_a_running_session(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  int fd = temp_file(ts);
  /* A period far beyond the test: only the shutdown writes the file. */
  file_session(&s, ts, fd, 600000, 0);
  commit_packets(&s.p, 0, 0, 7);

  int status = test_service_terminate(ts);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  size_t size = 0;
  Perfetto__Protos__Trace *t = read_trace(fd, &size);
  bool has_config, has_stats;
  assert_int_equal(check_trace(t, 0, &has_config, &has_stats), 7);
  assert_true(has_config);
  assert_true(has_stats);
  perfetto__protos__trace__free_unpacked(t, NULL);
  close(fd);
  scenario_close(&s);
}

/* A file descriptor sent with a config that does not write into a file is
 * not kept: the service closes its copy at once. Sent as the write end of
 * a pipe, whose read end sees EOF only when every copy is closed. */
static void unused_file_descriptor_is_closed(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  scenario_open(&s, ts,
                (scenario_opts_t){.ds = "test.ds"}); /* no write_into_file */
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  assert_int_equal(raw_consumer_enable(&s.c, &s.sc.cfg, pfd[1]), 0);
  close(pfd[1]);
  assert_int_equal(raw_producer_wait_started(&s.p, 5000), 0);
  struct pollfd pl = {.fd = pfd[0], .events = POLLIN};
  assert_int_equal(poll(&pl, 1, 5000), 1);
  char b;
  assert_int_equal(read(pfd[0], &b, 1), 0); /* EOF: no copy left open */
  close(pfd[0]);
  scenario_stop(&s);
  scenario_close(&s);
}

/* COMPRESSION_TYPE_DEFLATE: every packet of the trace is a
 * compressed_packets wrapper; inflated, they hold the whole trace (config,
 * the producer's packets in order, stats), in a file and when streamed. */
static Perfetto__Protos__Trace *inflate_trace(const Perfetto__Protos__TracePacket *const *pk,
                                              size_t n) {
  Perfetto__Protos__Trace *t = test_inflate_trace(pk, n);
  assert_non_null(t);
  return t;
}

/* A DEFLATE session of "file.ds"; |fd| >= 0 writes into it. */
static void deflate_session(scenario_t *s, test_service_t *ts, int fd) {
  scenario_open(s, ts, (scenario_opts_t){.ds = "file.ds", .buffer_kb = 256});
  if (fd >= 0) {
    s->sc.cfg.has_write_into_file = 1;
    s->sc.cfg.write_into_file = 1;
    s->sc.cfg.has_file_write_period_ms = 1;
    s->sc.cfg.file_write_period_ms = 100;
  }
  s->sc.cfg.has_compression_type = 1;
  s->sc.cfg.compression_type =
      PERFETTO__PROTOS__TRACE_CONFIG__COMPRESSION_TYPE__COMPRESSION_TYPE_DEFLATE;
  scenario_start_into(s, fd);
}

static void deflate_compresses_the_file(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  int fd = temp_file(ts);
  deflate_session(&s, ts, fd);
  for (uint32_t id = 0; id < 8; id++) commit_packets(&s.p, id, id * 10, 10);
  scenario_stop(&s);

  size_t size = 0;
  Perfetto__Protos__Trace *file = read_trace(fd, &size);
  assert_true(file->n_packet >= 1);
  Perfetto__Protos__Trace *t =
      inflate_trace((const Perfetto__Protos__TracePacket *const *)file->packet,
                    file->n_packet);
  bool has_config, has_stats;
  assert_int_equal(check_trace(t, 0, &has_config, &has_stats), 80);
  assert_true(has_config);
  assert_true(has_stats);
  /* The long repeated strings shrink: the file is smaller than its content. */
  assert_true(size * 3 < perfetto__protos__trace__get_packed_size(t));
  perfetto__protos__trace__free_unpacked(t, NULL);
  perfetto__protos__trace__free_unpacked(file, NULL);
  close(fd);
  scenario_close(&s);
}

static void deflate_compresses_the_stream(void **state) {
  test_service_t *ts = *state;
  scenario_t s;
  deflate_session(&s, ts, -1);
  for (uint32_t id = 0; id < 4; id++) commit_packets(&s.p, id, id * 10, 10);
  scenario_stop(&s);
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(&s.c, &n);
  assert_non_null(pk);
  Perfetto__Protos__Trace *t =
      inflate_trace((const Perfetto__Protos__TracePacket *const *)pk, n);
  bool has_config, has_stats;
  assert_int_equal(check_trace(t, 0, &has_config, &has_stats), 40);
  assert_true(has_config);
  assert_true(has_stats);
  perfetto__protos__trace__free_unpacked(t, NULL);
  free_packets(pk, n);
  scenario_close(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(detached_file_session_is_freed_when_it_ends,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(write_into_file_yields_a_decodable_trace,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(max_file_size_stops_the_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(sigterm_writes_out_the_file_of_a_running_session,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(deflate_compresses_the_file,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(deflate_compresses_the_stream,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(unused_file_descriptor_is_closed,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
