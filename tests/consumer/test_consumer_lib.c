/* The consumer library against a real tracegated, with a raw producer
 * (tests/support) writing SMB chunks by hand: bind, the session calls,
 * ReadBuffers reassembly (a packet larger than an IPC frame), stats,
 * queries, events, detach/attach across connections, and the failures:
 * no service, a refused config, a connection lost mid-call. Also the
 * slice reassembler alone, on well-formed and hostile input. */
#include <errno.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "consumer/consumer.h"
#include "consumer/slice_reassembler.h"
#include "ipc/unix_transport.h"
#include "raw_ipc.h"
#include "test_service.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "tracegate/error.h"

#define WAIT_MS 10000

/* --- loop helpers ---------------------------------------------------------- */

static void on_deadline(uv_timer_t *t) { *(bool *)t->data = true; }

/* Runs |loop| until *flag (an event) or |timeout_ms| passed. */
static bool run_until(uv_loop_t *loop, const bool *flag, int timeout_ms) {
  bool late = false;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &late;
  uv_timer_start(&t, on_deadline, (uint64_t)timeout_ms, 0);
  while (!*flag && !late) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *flag;
}

/* --- one consumer and what its callbacks saw -------------------------------- */

typedef struct result {
  bool done;
  int status;
  char msg[512];
} result_t;

typedef struct conn {
  uv_loop_t *loop;
  tg_consumer_t *c;
  bool ready, closed;
  int ready_status, close_status;
  char close_msg[512];
  /* calls */
  result_t ended, flushed, disabled, started, detached, read, stats, attached,
      query, caps, events, extra;
  unsigned order; /* ordinal counter for checking callback order */
  unsigned ended_at, detached_at;
  /* ReadBuffers */
  Perfetto__Protos__TracePacket *packets[256];
  size_t n_packets;
  size_t max_packet_len;
  /* GetTraceStats */
  size_t n_buffer_stats;
  uint64_t bytes_written;
  /* Attach */
  uint8_t config[4096];
  size_t config_len;
  /* QueryServiceState */
  size_t producers, data_sources, sessions, state_replies;
  bool saw_ds_name;
  /* QueryCapabilities */
  bool has_query_capabilities;
  /* ObserveEvents */
  bool all_started;
  /* calls made inside callbacks after the close */
  int call_after_close;
} conn_t;

static void set_result(result_t *r, int status, const char *msg) {
  r->done = true;
  r->status = status;
  snprintf(r->msg, sizeof(r->msg), "%s", msg);
}

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  (void)msg;
  conn_t *k = tg_consumer_data(c);
  k->ready = status == 0;
  k->ready_status = status;
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  conn_t *k = tg_consumer_data(c);
  k->closed = true;
  k->close_status = status;
  snprintf(k->close_msg, sizeof(k->close_msg), "%s", msg);
  k->c = NULL;
}

static const tg_consumer_cbs_t cbs = {.on_ready = on_ready, .on_close = on_close};

static void connect_to(conn_t *k, uv_loop_t *loop, const test_service_t *ts) {
  memset(k, 0, sizeof(*k));
  k->loop = loop;
  assert_int_equal(tg_consumer_connect(loop, ts->consumer_sock, &cbs, k, &k->c), 0);
  assert_false(k->ready); /* never inside the call */
  assert_true(run_until(loop, &k->ready, WAIT_MS));
  assert_true(tg_consumer_ready(k->c));
  assert_true(tg_consumer_can_pass_fds(k->c));
}

static void close_conn(conn_t *k) {
  if (k->c) tg_consumer_close(k->c);
  assert_true(run_until(k->loop, &k->closed, WAIT_MS));
  for (size_t i = 0; i < k->n_packets; i++)
    perfetto__protos__trace_packet__free_unpacked(k->packets[i], NULL);
  k->n_packets = 0;
}

static void close_loop(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

#define DONE_CB(field)                                                       \
  static void on_##field(tg_consumer_t *c, void *ctx, int status,            \
                         const char *msg) {                                  \
    (void)c;                                                                 \
    conn_t *k = ctx;                                                         \
    set_result(&k->field, status, msg);                                      \
  }
DONE_CB(flushed)
DONE_CB(disabled)
DONE_CB(started)
DONE_CB(read)
DONE_CB(extra)

static void on_ended(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  conn_t *k = ctx;
  set_result(&k->ended, status, msg);
  k->ended_at = ++k->order;
}

static void on_detached(tg_consumer_t *c, void *ctx, int status, const char *msg) {
  (void)c;
  conn_t *k = ctx;
  set_result(&k->detached, status, msg);
  k->detached_at = ++k->order;
}

static int on_packet(tg_consumer_t *c, void *ctx, const uint8_t *p, size_t n) {
  (void)c;
  conn_t *k = ctx;
  Perfetto__Protos__TracePacket *tp = perfetto__protos__trace_packet__unpack(NULL, n, p);
  assert_non_null(tp);
  if (n > k->max_packet_len) k->max_packet_len = n;
  if (tp->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
      k->n_packets < 256) {
    k->packets[k->n_packets++] = tp;
  } else {
    perfetto__protos__trace_packet__free_unpacked(tp, NULL);
  }
  return 0;
}

static void on_stats(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     const Perfetto__Protos__TraceStats *st) {
  (void)c;
  conn_t *k = ctx;
  set_result(&k->stats, status, msg);
  if (status) {
    assert_null(st);
    return;
  }
  k->n_buffer_stats = st->n_buffer_stats;
  if (st->n_buffer_stats) k->bytes_written = st->buffer_stats[0]->bytes_written;
}

static void on_attached(tg_consumer_t *c, void *ctx, int status, const char *msg,
                        const uint8_t *cfg, size_t len) {
  (void)c;
  conn_t *k = ctx;
  set_result(&k->attached, status, msg);
  if (status) return;
  assert_true(len <= sizeof(k->config));
  memcpy(k->config, cfg, len);
  k->config_len = len;
}

static void on_state(tg_consumer_t *c, void *ctx, int status, const char *msg,
                     bool has_more, const Perfetto__Protos__TracingServiceState *st) {
  (void)c;
  conn_t *k = ctx;
  k->state_replies++;
  if (status == 0) {
    k->producers += st->n_producers;
    k->data_sources += st->n_data_sources;
    k->sessions += st->n_tracing_sessions;
    for (size_t i = 0; i < st->n_data_sources; i++)
      if (st->data_sources[i]->ds_descriptor &&
          !strcmp(st->data_sources[i]->ds_descriptor->name, "lib.ds"))
        k->saw_ds_name = true;
  }
  if (!has_more) set_result(&k->query, status, msg);
}

static void on_caps(tg_consumer_t *c, void *ctx, int status, const char *msg,
                    const Perfetto__Protos__TracingServiceCapabilities *caps) {
  (void)c;
  conn_t *k = ctx;
  set_result(&k->caps, status, msg);
  if (status == 0) k->has_query_capabilities = caps->has_query_capabilities;
}

static void on_events(tg_consumer_t *c, void *ctx, int status, const char *msg,
                      bool has_more, const Perfetto__Protos__ObservableEvents *ev) {
  (void)c;
  conn_t *k = ctx;
  if (ev && ev->all_data_sources_started) k->all_started = true;
  if (!has_more) set_result(&k->events, status, msg);
}

/* --- producer helpers ------------------------------------------------------------ */

static void commit_small(raw_producer_t *p, uint32_t chunk_id, const char *str,
                         uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, str, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* One packet of |total| bytes, one fragment per whole-page chunk (32 KiB
 * pages). Returns the next chunk id. */
static uint32_t commit_big(raw_producer_t *p, uint32_t chunk_id, const uint8_t *pkt,
                           size_t total) {
  const size_t room = tg_smb_chunk_size(p->smb.page_size, TG_PAGE_DIV_1) -
                      TG_SMB_CHUNK_HEADER_SIZE - TG_PACKET_HEADER_SIZE;
  for (size_t off = 0; off < total; off += room, chunk_id++) {
    const uint8_t *frag = pkt + off;
    size_t len = total - off < room ? total - off : room;
    unsigned flags = (off ? TG_CHUNK_FIRST_PACKET_CONTINUES : 0) |
                     (off + len < total ? TG_CHUNK_LAST_PACKET_CONTINUES : 0);
    assert_int_equal(raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_1, 1, chunk_id,
                                              flags, &frag, &len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
  }
  return chunk_id;
}

static void enable_simple(conn_t *k, uint32_t kb, const char *ds) {
  simple_cfg_t sc;
  simple_cfg_init(&sc, kb, 1, ds);
  size_t n = perfetto__protos__trace_config__get_packed_size(&sc.cfg);
  uint8_t buf[512];
  assert_true(n <= sizeof(buf));
  perfetto__protos__trace_config__pack(&sc.cfg, buf);
  assert_int_equal(tg_consumer_enable_tracing(k->c, buf, n, -1, on_ended, k), 0);
}

/* --- tests ------------------------------------------------------------------------- */

static void connect_binds_and_queries_capabilities(void **state) {
  test_service_t *ts = *state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  assert_int_equal(tg_consumer_query_capabilities(k.c, on_caps, &k), 0);
  assert_false(k.caps.done);
  assert_true(run_until(&loop, &k.caps.done, WAIT_MS));
  assert_int_equal(k.caps.status, 0);
  assert_true(k.has_query_capabilities);
  /* Session calls without a session: refused with a message, not a crash. */
  assert_int_equal(tg_consumer_get_trace_stats(k.c, on_stats, &k), 0);
  assert_true(run_until(&loop, &k.stats.done, WAIT_MS));
  assert_int_equal(k.stats.status, TG_EREMOTE_FAILED);
  assert_non_null(strstr(k.stats.msg, "refused GetTraceStats"));
  close_conn(&k);
  assert_int_equal(k.close_status, 0);
  close_loop(&loop);
}

static void records_and_reassembles_a_packet_larger_than_a_frame(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "lib.ds", 32, 256, false), 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  enable_simple(&k, 1024, "lib.ds");
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);

  commit_small(&p, 0, "small", 1, 5);
  enum { STR_LEN = 200 * 1024 };
  char *str = malloc(STR_LEN + 1);
  assert_non_null(str);
  for (size_t i = 0; i < STR_LEN; i++) str[i] = (char)('a' + (i * 13 + i / 777) % 26);
  str[STR_LEN] = 0;
  uint8_t *pkt = malloc(STR_LEN + 64);
  assert_non_null(pkt);
  size_t total = make_test_packet(pkt, STR_LEN + 64, str, 42);
  assert_true(total > 128 * 1024);
  uint32_t next = commit_big(&p, 1, pkt, total);
  commit_small(&p, next, "after", 100, 2);

  /* Flush: the service asks the producer, which acks by hand. */
  assert_int_equal(tg_consumer_flush(k.c, 5000, on_flushed, &k), 0);
  uint64_t fid = raw_producer_wait_flush(&p, 0, WAIT_MS);
  assert_true(fid > 0);
  assert_int_equal(raw_producer_commit(&p, NULL, NULL, 0, fid), 0);
  assert_true(run_until(&loop, &k.flushed.done, WAIT_MS));
  assert_int_equal(k.flushed.status, 0);

  assert_int_equal(tg_consumer_read_buffers(k.c, on_packet, on_read, &k), 0);
  assert_true(run_until(&loop, &k.read.done, WAIT_MS));
  assert_int_equal(k.read.status, 0);
  assert_int_equal(k.n_packets, 8);
  for (unsigned i = 0; i < 5; i++) {
    assert_string_equal(k.packets[i]->for_testing->str, "small");
    assert_int_equal(k.packets[i]->for_testing->seq_value, 1 + i);
  }
  Perfetto__Protos__TracePacket *big = k.packets[5];
  assert_int_equal(big->for_testing->seq_value, 42);
  assert_int_equal(strlen(big->for_testing->str), STR_LEN);
  assert_memory_equal(big->for_testing->str, str, STR_LEN);
  assert_int_equal(big->trusted_pid, getpid());
  assert_true(k.max_packet_len > 128 * 1024);
  assert_string_equal(k.packets[7]->for_testing->str, "after");

  assert_int_equal(tg_consumer_get_trace_stats(k.c, on_stats, &k), 0);
  assert_true(run_until(&loop, &k.stats.done, WAIT_MS));
  assert_int_equal(k.stats.status, 0);
  assert_int_equal(k.n_buffer_stats, 1);
  assert_true(k.bytes_written >= total);

  /* A packet over the library's cap fails the read, cleanly. */
  next = commit_big(&p, next + 1, pkt, total);
  tg_consumer_set_max_packet(k.c, 64 * 1024);
  memset(&k.read, 0, sizeof(k.read));
  assert_int_equal(tg_consumer_read_buffers(k.c, on_packet, on_read, &k), 0);
  assert_true(run_until(&loop, &k.read.done, WAIT_MS));
  assert_int_equal(k.read.status, TG_ENO_SPACE);
  assert_non_null(strstr(k.read.msg, "exceeds the 65536-byte limit"));
  tg_consumer_set_max_packet(k.c, 0);

  /* Tracing ends with DisableTracing; the EnableTracing callback says so. */
  assert_int_equal(tg_consumer_disable_tracing(k.c, on_disabled, &k), 0);
  assert_true(run_until(&loop, &k.ended.done, WAIT_MS));
  assert_true(k.disabled.done);
  assert_int_equal(k.disabled.status, 0);
  assert_int_equal(k.ended.status, 0);
  assert_string_equal(k.ended.msg, "");

  close_conn(&k);
  close_loop(&loop);
  raw_producer_close(&p);
  free(pkt);
  free(str);
}

static void query_merges_replies_and_observe_reports_events(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "lib.ds", 4, 64, false), 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  Perfetto__Protos__ObservableEvents__Type types[] = {
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED};
  assert_int_equal(tg_consumer_observe_events(k.c, types, 1, on_events, &k), 0);
  enable_simple(&k, 256, "lib.ds");
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  assert_true(run_until(&loop, &k.all_started, WAIT_MS));

  assert_int_equal(tg_consumer_query_service_state(k.c, false, true, on_state, &k), 0);
  assert_true(run_until(&loop, &k.query.done, WAIT_MS));
  assert_int_equal(k.query.status, 0);
  assert_int_equal(k.state_replies, 1);
  assert_int_equal(k.producers, 1);
  assert_int_equal(k.data_sources, 1);
  assert_int_equal(k.sessions, 1);
  assert_true(k.saw_ds_name);

  /* Many producers and two descriptors of 100 KiB: a state larger than a
   * frame, which the service streams and the library merges. */
  enum { N = 140, BIG = 2 };
  raw_producer_t *many = calloc(N, sizeof(*many));
  assert_non_null(many);
  for (int i = 0; i < N; i++)
    assert_int_equal(raw_producer_connect(&many[i], ts, "many", "many.ds", 0, 0, false), 0);
  static uint8_t fill[100 * 1024];
  for (int i = 0; i < BIG; i++) {
    Perfetto__Protos__DataSourceDescriptor d =
        PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
    d.name = i ? "big.1" : "big.0";
    d.has_track_event_descriptor = 1;
    d.track_event_descriptor.data = fill;
    d.track_event_descriptor.len = sizeof(fill);
    Perfetto__Protos__RegisterDataSourceRequest r =
        PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
    r.data_source_descriptor = &d;
    assert_int_equal(
        raw_call(&p.conn, "RegisterDataSource", &r.base, -1, NULL, NULL, WAIT_MS),
        1);
  }
  memset(&k.query, 0, sizeof(k.query));
  k.producers = k.data_sources = k.sessions = k.state_replies = 0;
  assert_int_equal(tg_consumer_query_service_state(k.c, false, true, on_state, &k), 0);
  assert_true(run_until(&loop, &k.query.done, WAIT_MS));
  assert_int_equal(k.query.status, 0);
  assert_int_equal(k.state_replies, 1);
  assert_int_equal(k.producers, N + 1);
  assert_int_equal(k.data_sources, N + 1 + BIG);
  assert_int_equal(k.sessions, 1);
  /* Unmerged: one callback per reply, adding up to the same. */
  memset(&k.query, 0, sizeof(k.query));
  k.producers = k.data_sources = k.sessions = k.state_replies = 0;
  assert_int_equal(tg_consumer_query_service_state(k.c, false, false, on_state, &k), 0);
  assert_true(run_until(&loop, &k.query.done, WAIT_MS));
  assert_true(k.state_replies >= 2);
  assert_int_equal(k.producers, N + 1);
  assert_int_equal(k.sessions, 1);
  for (int i = 0; i < N; i++) raw_producer_close(&many[i]);
  free(many);

  close_conn(&k);
  /* The observe stream ended with the connection, once. */
  assert_true(k.events.done);
  assert_int_equal(k.events.status, -ECANCELED);
  assert_true(k.ended.done);
  assert_int_equal(k.ended.status, -ECANCELED);
  close_loop(&loop);
  raw_producer_close(&p);
}

static void detach_then_attach_from_a_second_connection(void **state) {
  test_service_t *ts = *state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t a, b;
  connect_to(&a, &loop, ts);
  enable_simple(&a, 512, "nobody.ds");
  assert_int_equal(tg_consumer_detach(a.c, "lib-key", on_detached, &a), 0);
  assert_true(run_until(&loop, &a.detached.done, WAIT_MS));
  assert_int_equal(a.detached.status, 0);
  /* The end is no longer reported here: the callback ran first. */
  assert_true(a.ended.done);
  assert_int_equal(a.ended.status, -ECANCELED);
  assert_string_equal(a.ended.msg, "detached");
  assert_true(a.ended_at < a.detached_at);
  close_conn(&a);
  assert_int_equal(a.close_status, 0);

  connect_to(&b, &loop, ts);
  assert_int_equal(tg_consumer_attach(b.c, "wrong-key", on_attached, &b), 0);
  assert_true(run_until(&loop, &b.attached.done, WAIT_MS));
  assert_int_equal(b.attached.status, TG_EREMOTE_FAILED);
  assert_non_null(strstr(b.attached.msg, "Attach"));
  memset(&b.attached, 0, sizeof(b.attached));
  assert_int_equal(tg_consumer_attach(b.c, "lib-key", on_attached, &b), 0);
  assert_true(run_until(&loop, &b.attached.done, WAIT_MS));
  assert_int_equal(b.attached.status, 0);
  Perfetto__Protos__TraceConfig *cfg =
      perfetto__protos__trace_config__unpack(NULL, b.config_len, b.config);
  assert_non_null(cfg);
  assert_int_equal(cfg->n_buffers, 1);
  assert_int_equal(cfg->buffers[0]->size_kb, 512);
  assert_string_equal(cfg->data_sources[0]->config->name, "nobody.ds");
  perfetto__protos__trace_config__free_unpacked(cfg, NULL);

  assert_int_equal(tg_consumer_notify_on_end(b.c, on_ended, &b), 0);
  assert_int_equal(tg_consumer_disable_tracing(b.c, on_disabled, &b), 0);
  assert_true(run_until(&loop, &b.ended.done, WAIT_MS));
  assert_int_equal(b.ended.status, 0);
  assert_int_equal(tg_consumer_read_buffers(b.c, on_packet, on_read, &b), 0);
  assert_true(run_until(&loop, &b.read.done, WAIT_MS));
  assert_int_equal(b.read.status, 0);
  close_conn(&b);
  close_loop(&loop);
}

static void deferred_start_waits_for_start_tracing(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "lib.ds", 4, 64, false), 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  simple_cfg_t sc;
  simple_cfg_init(&sc, 256, 1, "lib.ds");
  sc.cfg.has_deferred_start = 1;
  sc.cfg.deferred_start = 1;
  uint8_t buf[512];
  size_t n = perfetto__protos__trace_config__pack(&sc.cfg, buf);
  assert_int_equal(tg_consumer_enable_tracing(k.c, buf, n, -1, on_ended, &k), 0);
  /* Set up, not started. */
  while (p.setups == 0) assert_int_equal(raw_producer_poll(&p, WAIT_MS), 1);
  assert_false(p.started);
  assert_int_equal(tg_consumer_start_tracing(k.c, on_started, &k), 0);
  assert_true(run_until(&loop, &k.started.done, WAIT_MS));
  assert_int_equal(k.started.status, 0);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* A second start is refused: the session already started. */
  memset(&k.started, 0, sizeof(k.started));
  assert_int_equal(tg_consumer_start_tracing(k.c, on_started, &k), 0);
  assert_true(run_until(&loop, &k.started.done, WAIT_MS));
  assert_int_equal(k.started.status, TG_EREMOTE_FAILED);
  assert_non_null(strstr(k.started.msg, "the service refused StartTracing"));
  /* FreeBuffers ends the session. */
  assert_int_equal(tg_consumer_free_buffers(k.c, on_extra, &k), 0);
  assert_true(run_until(&loop, &k.extra.done, WAIT_MS));
  assert_int_equal(k.extra.status, 0);
  close_conn(&k);
  close_loop(&loop);
  raw_producer_close(&p);
}

static void no_service_is_a_connect_error(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  memset(&k, 0, sizeof(k));
  tg_consumer_t *c = NULL;
  int rv = tg_consumer_connect(&loop, "/tmp/tg-no-such-dir/consumer", &cbs, &k, &c);
  assert_int_equal(rv, -ENOENT);
  assert_null(c);
  rv = tg_consumer_connect(&loop, "@tg-no-such-abstract-socket", &cbs, &k, &c);
  assert_int_equal(rv, -ECONNREFUSED);
  assert_false(k.ready);
  assert_false(k.closed);
  close_loop(&loop);
}

static void refused_config_reports_the_service_text(void **state) {
  test_service_t *ts = *state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  cfg.has_duration_ms = 1;
  cfg.duration_ms = 1000;
  Perfetto__Protos__TraceConfig__BufferConfig tiny =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
  tiny.has_size_kb = 1;
  tiny.size_kb = 1; /* under the 4 KiB minimum */
  Perfetto__Protos__TraceConfig__BufferConfig *bufs[1] = {&tiny};
  cfg.n_buffers = 1;
  cfg.buffers = bufs;
  uint8_t buf[64];
  size_t n = perfetto__protos__trace_config__pack(&cfg, buf);
  assert_int_equal(tg_consumer_enable_tracing(k.c, buf, n, -1, on_ended, &k), 0);
  assert_false(k.ended.done);
  assert_true(run_until(&loop, &k.ended.done, WAIT_MS));
  assert_int_equal(k.ended.status, TG_EREMOTE_FAILED);
  assert_non_null(strstr(k.ended.msg, "the service refused EnableTracing"));
  assert_non_null(strstr(k.ended.msg, "buffers[0].size_kb: must be at least 4"));
  /* Bytes that are not a TraceConfig: refused too. */
  memset(&k.ended, 0, sizeof(k.ended));
  static const uint8_t junk[] = {0x0a, 0x05, 0xff};
  assert_int_equal(tg_consumer_enable_tracing(k.c, junk, sizeof(junk), -1, on_ended, &k), 0);
  assert_true(run_until(&loop, &k.ended.done, WAIT_MS));
  assert_int_equal(k.ended.status, TG_EREMOTE_FAILED);
  assert_non_null(strstr(k.ended.msg, "does not decode"));
  /* Argument errors come back at once, without a callback. */
  assert_int_equal(tg_consumer_detach(k.c, "", on_extra, &k), -EINVAL);
  close_conn(&k);
  assert_false(k.extra.done);
  close_loop(&loop);
}

static void on_extra_calls_after_close(tg_consumer_t *c, void *ctx, int status,
                                       const char *msg) {
  conn_t *k = ctx;
  set_result(&k->flushed, status, msg);
  /* The connection is gone: new calls fail at once. */
  k->call_after_close = tg_consumer_start_tracing(c, on_extra, k);
}

static void lost_connection_fails_every_pending_call(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "test.producer", "lib.ds", 4, 64, false), 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  /* A transport opened by the test, so it can cut the socket. */
  tg_unix_transport_t tr;
  assert_int_equal(tg_unix_transport_connect(&loop, &tr, ts->consumer_sock), 0);
  conn_t k;
  memset(&k, 0, sizeof(k));
  k.loop = &loop;
  assert_int_equal(tg_consumer_open(&loop, &tr.base, true, &cbs, &k, &k.c), 0);
  assert_true(run_until(&loop, &k.ready, WAIT_MS));
  enable_simple(&k, 256, "lib.ds");
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* The producer never acks: the flush stays pending. */
  assert_int_equal(tg_consumer_flush(k.c, 30000, on_extra_calls_after_close, &k), 0);
  assert_true(raw_producer_wait_flush(&p, 0, WAIT_MS) > 0);
  /* The service is stopped while the query is in flight, so its reply can
   * never arrive before the cut (in a fast build it otherwise could, and the
   * query would succeed instead of being failed by the close). */
  assert_int_equal(kill(ts->pid, SIGSTOP), 0);
  assert_int_equal(tg_consumer_query_service_state(k.c, false, true, on_state, &k), 0);
  shutdown(tr.chan.fd, SHUT_RDWR);
  bool closed = run_until(&loop, &k.closed, WAIT_MS);
  assert_int_equal(kill(ts->pid, SIGCONT), 0);
  assert_true(closed);
  assert_true(k.flushed.done);
  assert_int_equal(k.flushed.status, TG_EPEER_CLOSED);
  assert_non_null(strstr(k.flushed.msg, "lost the connection"));
  assert_int_equal(k.call_after_close, TG_ENOT_CONNECTED);
  assert_true(k.ended.done);
  assert_int_equal(k.ended.status, TG_EPEER_CLOSED);
  assert_true(k.query.done);
  assert_int_equal(k.query.status, TG_EPEER_CLOSED);
  assert_int_equal(k.close_status, TG_EPEER_CLOSED);
  assert_false(k.extra.done);
  close_loop(&loop);
  raw_producer_close(&p);
}

/* A peer that says why before it closes (the relay does, when the tracing
 * service closed its side): the close, and the call it fails, carry the
 * peer's words as sent, where they used to say "the service closed the
 * connection" and the CLI then appended the same words again. The peer
 * is the test, over a socketpair. */
#define PEER_NOTE "relay: the tracing service closed the connection"

static void send_frame(raw_conn_t *peer, const tg_ipc_frame_t *f) {
  assert_int_equal(raw_send_frame(peer, f), 0);
}

/* A consumer on |loop| over a socketpair whose other end is |peer|. */
static void open_with_peer(uv_loop_t *loop, tg_unix_transport_t *tr,
                           conn_t *k, raw_conn_t *peer) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  uv_loop_init(loop);
  assert_int_equal(tg_unix_transport_open(loop, tr, sv[0]), 0);
  memset(k, 0, sizeof(*k));
  k->loop = loop;
  assert_int_equal(tg_consumer_open(loop, &tr->base, true, &cbs, k, &k->c), 0);
  memset(peer, 0, sizeof(*peer));
  peer->fd = sv[1];
  tg_frame_decoder_init(&peer->dec);
}

static void bind_reply(raw_conn_t *peer, uint64_t request_id, bool ok,
                       const char *method) {
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo mi =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__METHOD_INFO__INIT;
  mi.has_id = 1;
  mi.id = 1;
  mi.name = (char *)method;
  Perfetto__Protos__IPCFrame__BindServiceReply__MethodInfo *mis[] = {&mi};
  Perfetto__Protos__IPCFrame__BindServiceReply br =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE_REPLY__INIT;
  br.has_success = 1;
  br.success = ok;
  if (ok) {
    br.has_service_id = 1;
    br.service_id = 2;
    br.n_methods = 1;
    br.methods = mis;
  }
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE_REPLY;
  f.msg_bind_service_reply = &br;
  send_frame(peer, &f);
}

/* A RequestError carrying |text|, for |request_id| (0: a notice). */
static void send_request_error(raw_conn_t *peer, uint64_t request_id,
                               const char *text) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_ipc_request_error_append(request_id, text, &b), 0);
  assert_int_equal(raw_send_bytes(peer, tg_buf_begin(&b), tg_buf_size(&b)), 0);
  tg_buf_free(&b);
}

static void a_notice_before_the_close_is_its_reason(void **state) {
  (void)state;
  uv_loop_t loop;
  tg_unix_transport_t tr;
  conn_t k;
  raw_conn_t peer;
  open_with_peer(&loop, &tr, &k, &peer);

  /* BindService ConsumerPort -> one method. */
  uv_run(&loop, UV_RUN_NOWAIT);
  raw_frame_t in;
  assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
  assert_int_equal(in.frame->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  bind_reply(&peer, in.frame->request_id, true, "QueryServiceState");
  tg_ipc_frame_free(in.frame);
  assert_true(run_until(&loop, &k.ready, WAIT_MS));

  /* A call in flight, then the notice (request 0) and the close. */
  assert_int_equal(
      tg_consumer_query_service_state(k.c, false, true, on_state, &k), 0);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
  tg_ipc_frame_free(in.frame);
  send_request_error(&peer, 0, PEER_NOTE);
  raw_close(&peer);

  assert_true(run_until(&loop, &k.closed, WAIT_MS));
  assert_int_equal(k.close_status, TG_EPEER_CLOSED);
  assert_string_equal(k.close_msg, PEER_NOTE);
  assert_true(k.query.done);
  assert_int_equal(k.query.status, TG_EPEER_CLOSED);
  const char *at = strstr(k.query.msg, PEER_NOTE);
  assert_non_null(at);
  assert_null(strstr(at + 1, PEER_NOTE)); /* once */
  close_loop(&loop);
}

/* A relay that refuses the whole connection answers its first request
 * (the ConsumerPort bind) with a RequestError and closes: a service bind
 * sent in the same flight fails as the connection did, not as a service
 * the peer lacks (the CLI took that for "not a tracegate-relay"). */
#define REFUSAL "relay: the tracing service on the relay's host is down"
static void a_refused_connection_fails_other_binds_as_closed(void **state) {
  (void)state;
  uv_loop_t loop;
  tg_unix_transport_t tr;
  conn_t k;
  raw_conn_t peer;
  open_with_peer(&loop, &tr, &k, &peer);
  assert_int_equal(tg_consumer_bind_service(k.c, "TracegateRelay", on_extra, &k),
                   0);

  uv_run(&loop, UV_RUN_NOWAIT);
  raw_frame_t in;
  assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
  assert_int_equal(in.frame->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  assert_string_equal(in.frame->msg_bind_service->service_name, "ConsumerPort");
  uint64_t first = in.frame->request_id;
  tg_ipc_frame_free(in.frame);
  assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
  assert_string_equal(in.frame->msg_bind_service->service_name,
                      "TracegateRelay");
  tg_ipc_frame_free(in.frame);

  send_request_error(&peer, first, REFUSAL);
  raw_close(&peer);

  assert_true(run_until(&loop, &k.closed, WAIT_MS));
  assert_false(k.ready);
  assert_int_equal(k.ready_status, TG_EUNKNOWN_SERVICE);
  assert_non_null(strstr(k.close_msg, REFUSAL));
  assert_true(k.extra.done);
  assert_int_not_equal(k.extra.status, TG_EUNKNOWN_SERVICE);
  assert_int_equal(k.extra.status, TG_EPEER_CLOSED);
  close_loop(&loop);
}

/* A relay whose tracing service is down refuses ConsumerPort (a notice,
 * then BindServiceReply{success: false}) and still answers its own
 * service: a bind of it in the same flight, and a call its callback
 * makes, are answered before the connection closes, by itself, with the
 * refusal as its reason. */
#define DOWN_NOTE "relay: the tracing service on the relay's host is not running"

static void on_info_reply(tg_consumer_t *c, void *ctx, int status,
                          const char *msg, const uint8_t *reply, size_t len) {
  (void)c;
  (void)reply;
  (void)len;
  set_result(&((conn_t *)ctx)->stats, status, msg);
}

static void on_relay_bound_ask(tg_consumer_t *c, void *ctx, int status,
                               const char *msg) {
  conn_t *k = ctx;
  set_result(&k->extra, status, msg);
  if (status == 0)
    k->call_after_close = tg_consumer_call(c, "TracegateRelay", "GetHostInfo",
                                           NULL, 0, on_info_reply, k);
}


static void a_refused_consumer_port_lets_other_calls_finish(void **state) {
  (void)state;
  uv_loop_t loop;
  tg_unix_transport_t tr;
  conn_t k;
  raw_conn_t peer;
  open_with_peer(&loop, &tr, &k, &peer);
  assert_int_equal(tg_consumer_bind_service(k.c, "TracegateRelay",
                                            on_relay_bound_ask, &k),
                   0);
  uv_run(&loop, UV_RUN_NOWAIT);
  raw_frame_t in;
  uint64_t ids[2];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
    ids[i] = in.frame->request_id;
    tg_ipc_frame_free(in.frame);
  }
  send_request_error(&peer, 0, DOWN_NOTE); /* the notice */
  bind_reply(&peer, ids[0], false, NULL);
  bind_reply(&peer, ids[1], true, "GetHostInfo");

  /* The call made in the bind's callback arrives and is answered. */
  uv_run(&loop, UV_RUN_NOWAIT);
  while (!k.extra.done && uv_run(&loop, UV_RUN_ONCE)) {
  }
  assert_int_equal(k.extra.status, 0);
  assert_int_equal(k.call_after_close, 0);
  assert_false(k.closed);
  assert_int_equal(k.ready_status, TG_EUNKNOWN_SERVICE);
  uv_run(&loop, UV_RUN_NOWAIT);
  assert_int_equal(raw_wait(&peer, 0, WAIT_MS, &in), 1);
  assert_int_equal(in.frame->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD);
  Perfetto__Protos__IPCFrame__InvokeMethodReply ir =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  ir.has_success = ir.success = 1;
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = in.frame->request_id;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  f.msg_invoke_method_reply = &ir;
  tg_ipc_frame_free(in.frame);
  send_frame(&peer, &f);

  /* Answered: the connection closes by itself, for the refusal. */
  assert_true(run_until(&loop, &k.closed, WAIT_MS));
  assert_true(k.stats.done);
  assert_int_equal(k.stats.status, 0);
  assert_int_equal(k.close_status, TG_EUNKNOWN_SERVICE);
  assert_non_null(strstr(k.close_msg, DOWN_NOTE));
  assert_true(raw_wait_closed(&peer, WAIT_MS));
  raw_close(&peer);
  close_loop(&loop);
}

/* --- the slice reassembler alone ------------------------------------------------ */

typedef struct sink {
  size_t n;
  size_t lens[16];
  uint8_t first[16];
  int stop_after; /* 0: never */
} sink_t;

static int sink_packet(void *ctx, const uint8_t *p, size_t len) {
  sink_t *s = ctx;
  if (s->n < 16) {
    s->lens[s->n] = len;
    s->first[s->n] = len ? p[0] : 0;
  }
  s->n++;
  return s->stop_after && (int)s->n >= s->stop_after ? -EIO : 0;
}

/* Appends slices{data, last} to |out|. */
static size_t put_slice(uint8_t *out, const uint8_t *data, size_t n, bool last) {
  uint8_t inner[512];
  uint8_t *q = inner;
  q = tg_pb_write_varint(q, TG_PB_TAG(1, TG_PB_WT_LEN));
  q = tg_pb_write_varint(q, n);
  memcpy(q, data, n);
  q += n;
  if (last) {
    q = tg_pb_write_varint(q, TG_PB_TAG(2, TG_PB_WT_VARINT));
    *q++ = 1;
  }
  uint8_t *o = out;
  o = tg_pb_write_varint(o, TG_PB_TAG(2, TG_PB_WT_LEN));
  o = tg_pb_write_varint(o, (uint64_t)(q - inner));
  memcpy(o, inner, (size_t)(q - inner));
  return (size_t)(o - out) + (size_t)(q - inner);
}

static void reassembler_joins_slices_across_responses(void **state) {
  (void)state;
  tg_slice_reassembler_t r;
  tg_slice_reassembler_init(&r, 1024);
  sink_t s = {0};
  uint8_t resp[1024];
  const uint8_t a[] = {1, 2, 3}, b[] = {4, 5}, c[] = {9};
  size_t n = put_slice(resp, a, sizeof(a), false);
  assert_int_equal(tg_slice_reassembler_feed(&r, resp, n, sink_packet, &s), 0);
  assert_int_equal(s.n, 0);
  assert_int_equal(tg_slice_reassembler_finish(&r), TG_EPROTO_DECODE);
  n = put_slice(resp, b, sizeof(b), true);
  n += put_slice(resp + n, c, sizeof(c), true);
  n += put_slice(resp + n, c, 0, true); /* an empty packet is a packet */
  assert_int_equal(tg_slice_reassembler_feed(&r, resp, n, sink_packet, &s), 0);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.lens[0], 5);
  assert_int_equal(s.first[0], 1);
  assert_int_equal(s.lens[1], 1);
  assert_int_equal(s.first[1], 9);
  assert_int_equal(s.lens[2], 0);
  assert_int_equal(tg_slice_reassembler_finish(&r), 0);
  assert_int_equal(r.packets, 3);
  tg_slice_reassembler_free(&r);
}

static void reassembler_rejects_garbage_and_oversized_packets(void **state) {
  (void)state;
  sink_t s = {0};
  tg_slice_reassembler_t r;
  /* Truncated length, a slice of the wrong wire type, a bad inner field. */
  static const uint8_t truncated[] = {0x12, 0x10, 0x0a};
  static const uint8_t wrong_type[] = {0x10, 0x01};
  static const uint8_t bad_data[] = {0x12, 0x02, 0x08, 0x01};
  static const uint8_t unknown_ok[] = {0x1a, 0x01, 0x00, 0x08, 0x07};
  const struct {
    const uint8_t *p;
    size_t n;
    int want;
  } cases[] = {
      {truncated, sizeof(truncated), TG_EPROTO_DECODE},
      {wrong_type, sizeof(wrong_type), TG_EPROTO_DECODE},
      {bad_data, sizeof(bad_data), TG_EPROTO_DECODE},
      {unknown_ok, sizeof(unknown_ok), 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tg_slice_reassembler_init(&r, 1024);
    assert_int_equal(tg_slice_reassembler_feed(&r, cases[i].p, cases[i].n, sink_packet, &s),
                     cases[i].want);
    tg_slice_reassembler_free(&r);
  }
  assert_int_equal(s.n, 0);
  /* The cap holds across slices. */
  tg_slice_reassembler_init(&r, 8);
  uint8_t resp[256], data[6] = {0};
  size_t n = put_slice(resp, data, 6, false);
  assert_int_equal(tg_slice_reassembler_feed(&r, resp, n, sink_packet, &s), 0);
  n = put_slice(resp, data, 6, true);
  assert_int_equal(tg_slice_reassembler_feed(&r, resp, n, sink_packet, &s), TG_ENO_SPACE);
  tg_slice_reassembler_free(&r);
  /* The sink's error stops the feed. */
  tg_slice_reassembler_init(&r, 64);
  s.stop_after = 1;
  n = put_slice(resp, data, 2, true);
  n += put_slice(resp + n, data, 2, true);
  assert_int_equal(tg_slice_reassembler_feed(&r, resp, n, sink_packet, &s), -EIO);
  assert_int_equal(s.n, 1);
  tg_slice_reassembler_free(&r);
}

/* --- other services on the connection ------------------------------------- */

static void on_bound_other(tg_consumer_t *c, void *ctx, int status,
                           const char *msg) {
  (void)c;
  set_result(ctx, status, msg);
}

typedef struct reply_result {
  result_t r;
  bool decoded;
} reply_result_t;

static void on_raw_caps(tg_consumer_t *c, void *ctx, int status, const char *msg,
                        const uint8_t *reply, size_t len) {
  (void)c;
  reply_result_t *rr = ctx;
  set_result(&rr->r, status, msg);
  Perfetto__Protos__QueryCapabilitiesResponse *r =
      perfetto__protos__query_capabilities_response__unpack(
          NULL, len, reply ? reply : (const uint8_t *)"");
  rr->decoded = r && r->capabilities;
  if (r) perfetto__protos__query_capabilities_response__free_unpacked(r, NULL);
}

/* A plain service offers ConsumerPort only: binding the relay's service
 * fails cleanly, and a generic call reaches a bound service. */
static void binds_and_calls_services_by_name(void **state) {
  test_service_t *ts = *state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  connect_to(&k, &loop, ts);
  result_t b;
  memset(&b, 0, sizeof(b));
  assert_int_equal(tg_consumer_bind_service(k.c, "TracegateRelay", on_bound_other, &b), 0);
  assert_false(b.done);
  assert_true(run_until(&loop, &b.done, WAIT_MS));
  assert_int_equal(b.status, TG_EUNKNOWN_SERVICE);
  assert_non_null(strstr(b.msg, "TracegateRelay"));
  assert_false(tg_consumer_has_service(k.c, "TracegateRelay"));
  assert_int_equal(tg_consumer_call(k.c, "TracegateRelay", "ClockSync", NULL, 0,
                                    on_raw_caps, NULL), TG_ENOT_CONNECTED);
  /* ConsumerPort is bound already: a second bind is refused at once. */
  assert_true(tg_consumer_has_service(k.c, "ConsumerPort"));
  assert_int_equal(tg_consumer_bind_service(k.c, "ConsumerPort", on_bound_other, &b),
                   -EALREADY);
  assert_int_equal(tg_consumer_call(k.c, "ConsumerPort", "NoSuchMethod", NULL, 0,
                                    on_raw_caps, NULL), TG_ENOT_SUPPORTED);
  reply_result_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(tg_consumer_call(k.c, "ConsumerPort", "QueryCapabilities", NULL,
                                    0, on_raw_caps, &rr), 0);
  assert_false(rr.r.done);
  assert_true(run_until(&loop, &rr.r.done, WAIT_MS));
  assert_int_equal(rr.r.status, 0);
  assert_true(rr.decoded);
  /* Pending binds fail with the connection. */
  memset(&b, 0, sizeof(b));
  assert_int_equal(tg_consumer_bind_service(k.c, "Other", on_bound_other, &b), 0);
  close_conn(&k);
  assert_true(b.done);
  assert_int_equal(b.status, -ECANCELED);
  close_loop(&loop);
}

/* Another service is bound in the same round trip as ConsumerPort: right
 * after connecting, before on_ready. ConsumerPort itself stays the
 * consumer's own and its calls wait for on_ready. */
static void binds_another_service_before_ready(void **state) {
  test_service_t *ts = *state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  conn_t k;
  memset(&k, 0, sizeof(k));
  k.loop = &loop;
  assert_int_equal(
      tg_consumer_connect(&loop, ts->consumer_sock, &cbs, &k, &k.c), 0);
  assert_false(tg_consumer_ready(k.c));
  result_t b;
  memset(&b, 0, sizeof(b));
  assert_int_equal(
      tg_consumer_bind_service(k.c, "TracegateConsumer", on_bound_other, &b),
      0);
  assert_int_equal(
      tg_consumer_bind_service(k.c, "ConsumerPort", on_bound_other, &b),
      -EALREADY);
  reply_result_t rr;
  memset(&rr, 0, sizeof(rr));
  assert_int_equal(tg_consumer_call(k.c, "ConsumerPort", "QueryCapabilities",
                                    NULL, 0, on_raw_caps, &rr),
                   TG_ENOT_CONNECTED);
  assert_true(run_until(&loop, &b.done, WAIT_MS));
  assert_int_equal(b.status, 0);
  assert_true(tg_consumer_has_service(k.c, "TracegateConsumer"));
  assert_true(run_until(&loop, &k.ready, WAIT_MS));
  close_conn(&k);
  close_loop(&loop);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(binds_and_calls_services_by_name,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(binds_another_service_before_ready,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(connect_binds_and_queries_capabilities,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(
          records_and_reassembles_a_packet_larger_than_a_frame,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          query_merges_replies_and_observe_reports_events, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(
          detach_then_attach_from_a_second_connection, test_service_setup,
          test_service_teardown),
      cmocka_unit_test_setup_teardown(deferred_start_waits_for_start_tracing,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test(no_service_is_a_connect_error),
      cmocka_unit_test(a_notice_before_the_close_is_its_reason),
      cmocka_unit_test(a_refused_connection_fails_other_binds_as_closed),
      cmocka_unit_test(a_refused_consumer_port_lets_other_calls_finish),
      cmocka_unit_test_setup_teardown(refused_config_reports_the_service_text,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test_setup_teardown(lost_connection_fails_every_pending_call,
                                      test_service_setup,
                                      test_service_teardown),
      cmocka_unit_test(reassembler_joins_slices_across_responses),
      cmocka_unit_test(reassembler_rejects_garbage_and_oversized_packets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
