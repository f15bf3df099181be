/* tracegated end to end: a producer writes only where its own data sources
 * point (Perfetto's allowed target buffers), names only writers 1..32767,
 * and what it left waiting for patches when it died is never read out.
 *
 * The world is one session with two buffers: "a.ds" targets buffer 0 and
 * is served by producer A, "b.ds" targets buffer 1 and is served by B. A is
 * in the session, so the older per-session rule let it write into buffer 1;
 * each test aims A at B's buffer (or at a bad writer id) and checks that
 * nothing of it reaches the trace and that the refusal is counted in
 * TraceStats, while A's and B's legitimate packets come out whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

typedef struct world {
  raw_consumer_t c;
  raw_producer_t a, b;
  Perfetto__Protos__TraceConfig cfg;
  Perfetto__Protos__TraceConfig__BufferConfig buf[2], *bufp[2];
  Perfetto__Protos__TraceConfig__DataSource ds[2], *dsp[2];
  Perfetto__Protos__DataSourceConfig dsc[2];
} world_t;

static void world_config(world_t *w) {
  static const char *const names[2] = {"a.ds", "b.ds"};
  perfetto__protos__trace_config__init(&w->cfg);
  for (int i = 0; i < 2; i++) {
    perfetto__protos__trace_config__buffer_config__init(&w->buf[i]);
    w->buf[i].has_size_kb = 1;
    w->buf[i].size_kb = 128;
    w->buf[i].has_fill_policy = 1;
    w->buf[i].fill_policy = 1; /* RING_BUFFER */
    w->bufp[i] = &w->buf[i];
    perfetto__protos__data_source_config__init(&w->dsc[i]);
    w->dsc[i].name = (char *)names[i];
    w->dsc[i].has_target_buffer = 1;
    w->dsc[i].target_buffer = (uint32_t)i;
    perfetto__protos__trace_config__data_source__init(&w->ds[i]);
    w->ds[i].config = &w->dsc[i];
    w->dsp[i] = &w->ds[i];
  }
  w->cfg.n_buffers = 2;
  w->cfg.buffers = w->bufp;
  w->cfg.n_data_sources = 2;
  w->cfg.data_sources = w->dsp;
}

static void world_start(test_service_t *ts, world_t *w) {
  memset(w, 0, sizeof(*w));
  world_config(w);
  assert_int_equal(raw_producer_connect(&w->a, ts, "prod-a", "a.ds", 4, 64, false), 0);
  assert_int_equal(raw_producer_connect(&w->b, ts, "prod-b", "b.ds", 4, 64, false), 0);
  assert_int_equal(raw_consumer_connect(&w->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&w->c, &w->cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&w->a, 5000), 0);
  assert_int_equal(raw_producer_wait_started(&w->b, 5000), 0);
  assert_int_not_equal(w->a.target_buffer, 0);
  assert_int_not_equal(w->b.target_buffer, 0);
  assert_int_not_equal(w->a.target_buffer, w->b.target_buffer);
}

static void world_stop(world_t *w) {
  raw_consumer_close(&w->c);
  raw_producer_close(&w->a);
  raw_producer_close(&w->b);
}

/* Writes |n| packets "str" first.. into (page, 0) and commits them into
 * |target|. */
static void commit_to(raw_producer_t *p, uint32_t page, uint16_t writer,
                      uint32_t chunk_id, const char *str, uint32_t first,
                      unsigned n, uint32_t target) {
  assert_int_equal(raw_producer_write_packets(p, page, 0, writer, chunk_id, str,
                                              first, n), 0);
  raw_move_t mv = {page, 0, target};
  assert_int_equal(raw_producer_commit_ex(p, &mv, 1, NULL, 0, 0, false), 0);
}

/* The legitimate traffic every test surrounds its abuse with. */
static void commit_good(world_t *w, uint32_t chunk_id, uint32_t first) {
  commit_to(&w->a, 0, 1, chunk_id, "a", first, 3, w->a.target_buffer);
  commit_to(&w->b, 0, 1, chunk_id, "b", first, 3, w->b.target_buffer);
}

typedef struct trace {
  Perfetto__Protos__TracePacket **pk;
  size_t n;
  const Perfetto__Protos__TraceStats *st;
} trace_t;

/* Stops the session, reads it to the end and returns its packets and the
 * stats it ends with. */
static void read_trace(world_t *w, trace_t *t) {
  assert_int_equal(raw_consumer_disable(&w->c, 5000), 0);
  t->pk = raw_consumer_read(&w->c, &t->n);
  assert_non_null(t->pk);
  t->st = find_trace_stats(t->pk, t->n);
  assert_non_null(t->st);
  assert_int_equal(t->st->n_buffer_stats, 2);
}

/* How many test packets carry |str|; those must be first..first+count-1 in
 * order without a loss flag. */
static size_t count_str(const trace_t *t, const char *str, uint32_t first) {
  Perfetto__Protos__TracePacket *tp[256];
  size_t k = test_packets(t->pk, t->n, tp, 256);
  size_t got = 0;
  for (size_t i = 0; i < k; i++) {
    if (!tp[i]->for_testing->str || strcmp(tp[i]->for_testing->str, str)) continue;
    assert_int_equal(tp[i]->for_testing->seq_value, first + got);
    got++;
  }
  return got;
}

static void expect_good(const trace_t *t) {
  assert_int_equal(count_str(t, "a", 0), 6);
  assert_int_equal(count_str(t, "b", 0), 6);
}

/* Both commit paths (SMB move, alone and batched with a legitimate one)
 * into a buffer of its own session that its data source does not target. */
static void commit_into_a_sibling_buffer_is_refused(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  commit_to(&w.a, 1, 2, 0, "forbidden", 0, 2, w.b.target_buffer);
  assert_int_equal(raw_producer_write_packets(&w.a, 2, 0, 3, 0, "forbidden", 2, 2), 0);
  assert_int_equal(raw_producer_write_packets(&w.a, 3, 0, 1, 1, "a", 3, 3), 0);
  const raw_move_t batch[] = {{2, 0, w.b.target_buffer}, {3, 0, w.a.target_buffer}};
  assert_int_equal(raw_producer_commit_ex(&w.a, batch, 2, NULL, 0, 0, false), 0);
  commit_to(&w.b, 1, 1, 1, "b", 3, 3, w.b.target_buffer);

  trace_t t;
  read_trace(&w, &t);
  expect_good(&t);
  assert_int_equal(count_str(&t, "forbidden", 0), 0);
  assert_int_equal(t.st->chunks_discarded, 2);
  assert_int_equal(t.st->buffer_stats[1]->chunks_written, 2); /* B's own */
  assert_int_equal(t.st->buffer_stats[0]->chunks_written, 2); /* A's own */
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* A writer registered for a sibling buffer would make scraping write
 * there: the registration is refused, and what that writer leaves in the
 * SMB goes nowhere when A disconnects. A writer registered for A's own
 * buffer is scraped as usual (so the refusal is not vacuous). */
static void register_writer_for_a_sibling_buffer_is_refused(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  assert_int_equal(raw_producer_register_writer_to(&w.a, 2, w.b.target_buffer), 0);
  assert_int_equal(raw_producer_register_writer_to(&w.a, 3, w.a.target_buffer), 1);
  uint8_t pk[64];
  const uint8_t *f = pk;
  size_t l = make_test_packet(pk, sizeof(pk), "forbidden", 0);
  assert_int_equal(raw_producer_write_chunk_ex(&w.a, 1, 0, TG_PAGE_DIV_4, 2, 0, 0,
                                               &f, &l, 1, false), 0);
  l = make_test_packet(pk, sizeof(pk), "scraped", 0);
  assert_int_equal(raw_producer_write_chunk_ex(&w.a, 2, 0, TG_PAGE_DIV_4, 3, 0, 0,
                                               &f, &l, 1, false), 0);
  commit_to(&w.a, 0, 1, 1, "a", 3, 3, w.a.target_buffer);
  assert_true(raw_hangup(&w.a.conn, 5000)); /* the service scraped its SMB */
  commit_to(&w.b, 1, 1, 1, "b", 3, 3, w.b.target_buffer);

  trace_t t;
  read_trace(&w, &t);
  expect_good(&t);
  assert_int_equal(count_str(&t, "forbidden", 0), 0);
  assert_int_equal(count_str(&t, "scraped", 0), 1);
  assert_int_equal(t.st->buffer_stats[1]->chunks_written, 2);
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* Writer ids are 15 bits: 0 and 32768.. are refused in registrations and
 * in chunk headers (counted as ABI violations of the buffer aimed at). */
static void writer_ids_outside_1_to_32767_are_refused(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  const uint32_t bad_ids[] = {0, 32768, 40000, 65535, 65536, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
    assert_int_equal(raw_producer_register_writer_to(&w.a, bad_ids[i],
                                                     w.a.target_buffer), 0);
  assert_int_equal(raw_producer_register_writer_to(&w.a, 32767, w.a.target_buffer), 1);

  commit_to(&w.a, 1, 32768, 0, "badwriter", 0, 2, w.a.target_buffer);
  commit_to(&w.a, 2, 65535, 0, "badwriter", 2, 2, w.a.target_buffer);
  commit_to(&w.a, 3, 32767, 0, "lastwriter", 0, 1, w.a.target_buffer);
  commit_good(&w, 1, 3);

  trace_t t;
  read_trace(&w, &t);
  expect_good(&t);
  assert_int_equal(count_str(&t, "badwriter", 0), 0);
  assert_int_equal(count_str(&t, "lastwriter", 0), 1);
  assert_int_equal(t.st->buffer_stats[0]->abi_violations, 2);
  assert_int_equal(t.st->buffer_stats[1]->abi_violations, 0);
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* Patches aimed at a sibling buffer, or naming a writer outside 1..32767,
 * are discarded before any buffer sees them (patches_discarded), rather
 * than tried and failed there. */
static void patches_outside_the_rules_are_discarded(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  const raw_patch_t bad[] = {
      {w.b.target_buffer, 1, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {w.a.target_buffer, 32768, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
      {w.a.target_buffer, 65535, 0, 4, {0xde, 0xad, 0xbe, 0xef}, false},
  };
  assert_int_equal(raw_producer_commit_ex(&w.a, NULL, 0, bad, 3, 0, false), 0);
  commit_good(&w, 1, 3);

  trace_t t;
  read_trace(&w, &t);
  expect_good(&t);
  assert_int_equal(t.st->patches_discarded, 3);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(t.st->buffer_stats[i]->patches_failed, 0);
    assert_int_equal(t.st->buffer_stats[i]->patches_succeeded, 0);
  }
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* A dies with a chunk still flagged as needing patches: none of its
 * packets is read out, not even the whole ones, and the chunk is counted
 * as discarded. Its other sequence is read to the end. */
static void unpatched_chunks_of_a_dead_producer_are_dropped(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  uint8_t pk[3][64];
  const uint8_t *f[3];
  size_t l[3];
  for (int i = 0; i < 3; i++) {
    l[i] = make_test_packet(pk[i], sizeof(pk[i]), "unpatched", (uint32_t)i);
    f[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&w.a, 1, 0, TG_PAGE_DIV_4, 2, 0,
                                            TG_CHUNK_NEEDS_PATCHING, f, l, 3), 0);
  raw_move_t mv = {1, 0, w.a.target_buffer};
  assert_int_equal(raw_producer_commit_ex(&w.a, &mv, 1, NULL, 0, 0, false), 0);
  commit_to(&w.a, 0, 1, 1, "a", 3, 3, w.a.target_buffer);
  assert_true(raw_hangup(&w.a.conn, 5000));
  commit_to(&w.b, 1, 1, 1, "b", 3, 3, w.b.target_buffer);

  trace_t t;
  read_trace(&w, &t);
  expect_good(&t);
  assert_int_equal(count_str(&t, "unpatched", 0), 0);
  assert_int_equal(t.st->buffer_stats[0]->chunks_discarded, 1);
  assert_int_equal(t.st->buffer_stats[0]->chunks_written, 3);
  assert_int_equal(t.st->buffer_stats[0]->chunks_read, 2);
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* The right to write outlives the instance until the session is freed:
 * what a producer commits while its data source stops (its last chunks)
 * is kept, as Perfetto keeps a producer's allowed buffers until
 * FreeBuffers; the sibling buffer stays closed to it all along. */
static void final_commits_after_the_instance_stopped_are_kept(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);

  Perfetto__Protos__UnregisterDataSourceRequest un =
      PERFETTO__PROTOS__UNREGISTER_DATA_SOURCE_REQUEST__INIT;
  un.data_source_name = "a.ds";
  assert_int_equal(raw_call(&w.a.conn, "UnregisterDataSource", &un.base, -1, NULL,
                            NULL, 5000), 1);
  commit_to(&w.a, 1, 1, 1, "late", 0, 2, w.a.target_buffer);
  /* 1: the service answered success. */
  assert_int_equal(raw_producer_register_writer_to(&w.a, 5, w.a.target_buffer), 1);
  commit_to(&w.a, 2, 1, 2, "a", 3, 3, w.a.target_buffer);
  commit_to(&w.a, 3, 1, 3, "sibling", 0, 2, w.b.target_buffer); /* refused */
  commit_to(&w.b, 1, 1, 1, "b", 3, 3, w.b.target_buffer);

  trace_t t;
  read_trace(&w, &t);
  assert_int_equal(count_str(&t, "a", 0), 6);
  assert_int_equal(count_str(&t, "late", 0), 2);
  assert_int_equal(count_str(&t, "b", 0), 6);
  assert_int_equal(count_str(&t, "sibling", 0), 0);
  free_packets(t.pk, t.n);
  world_stop(&w);
}

/* The service's id of the live producer named |name| (0: none). */
static uint32_t producer_id_of(raw_consumer_t *c, const char *name) {
  Perfetto__Protos__QueryServiceStateResponse *r = raw_consumer_query(c, 5000);
  assert_non_null(r);
  uint32_t id = 0;
  const Perfetto__Protos__TracingServiceState *st = r->service_state;
  for (size_t i = 0; st && i < st->n_producers; i++)
    if (st->producers[i]->name && !strcmp(st->producers[i]->name, name))
      id = (uint32_t)st->producers[i]->id;
  perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  return id;
}

/* Reads from |fd| until |frames| whole IPC frames came (the replies of
 * the calls written to it). */
static void read_replies(int fd, unsigned frames) {
  uint8_t buf[4096];
  size_t have = 0;
  while (frames > 0) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - have);
    assert_true(r > 0);
    have += (size_t)r;
    for (;;) {
      if (have < TG_IPC_FRAME_HEADER_SIZE) break;
      size_t len = TG_IPC_FRAME_HEADER_SIZE + (size_t)buf[0] +
                   ((size_t)buf[1] << 8) + ((size_t)buf[2] << 16) +
                   ((size_t)buf[3] << 24);
      assert_true(len <= sizeof(buf));
      if (have < len) break;
      memmove(buf, buf + len, have - len);
      have -= len;
      if (--frames == 0) break;
    }
  }
}

/* |n| producers that come and go: each connects, binds ProducerPort and
 * initializes (the ids |svc| and |init| learned from a real producer) and
 * hangs up once answered (a reply written to a closed socket would close
 * the connection before the call is seen). Each takes a producer id.
 * Batches of connections at a time, so that the round trips overlap. */
#define CYCLE_BATCH 32
static void cycle_producers(const test_service_t *ts, uint32_t svc,
                            uint32_t init, unsigned n) {
  tg_buf_t b;
  tg_buf_init(&b, 0);
  Perfetto__Protos__IPCFrame__BindService bind =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  bind.service_name = "ProducerPort";
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  f.has_request_id = 1;
  f.request_id = 1;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  f.msg_bind_service = &bind;
  assert_int_equal(tg_ipc_frame_append(&f, &b), 0);
  Perfetto__Protos__InitializeConnectionRequest req =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  req.producer_name = "cycling";
  uint8_t args[64];
  size_t alen = perfetto__protos__initialize_connection_request__pack(&req, args);
  Perfetto__Protos__IPCFrame__InvokeMethod im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  im.has_service_id = im.has_method_id = im.has_args_proto = 1;
  im.service_id = svc;
  im.method_id = init;
  im.args_proto.data = args;
  im.args_proto.len = alen;
  f.request_id = 2;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  f.msg_invoke_method = &im;
  assert_int_equal(tg_ipc_frame_append(&f, &b), 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  assert_true(strlen(ts->producer_sock) < sizeof(sa.sun_path));
  memcpy(sa.sun_path, ts->producer_sock, strlen(ts->producer_sock) + 1);
  for (unsigned done = 0; done < n;) {
    int fds[CYCLE_BATCH];
    unsigned k = n - done < CYCLE_BATCH ? n - done : CYCLE_BATCH;
    for (unsigned i = 0; i < k; i++) {
      fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      assert_true(fds[i] >= 0);
      assert_int_equal(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
      assert_int_equal(write(fds[i], tg_buf_begin(&b), tg_buf_size(&b)),
                       (ssize_t)tg_buf_size(&b));
    }
    for (unsigned i = 0; i < k; i++) {
      read_replies(fds[i], 2);
      close(fds[i]);
    }
    done += k;
  }
  tg_buf_free(&b);
}

/* Producer ids are 16 bits, so after 65,535 more producers a departed
 * producer's id comes back. Its right to write into the buffer its data
 * source targeted must have gone with it: the newcomer that gets the id
 * traces into a session of its own (so it has an SMB to commit from), and
 * what it commits into the departed producer's buffer is refused. */
static void a_reused_producer_id_inherits_no_buffer_right(void **state) {
  test_service_t *ts = *state;
  world_t w;
  world_start(ts, &w);
  commit_good(&w, 0, 0);
  uint32_t a_id = producer_id_of(&w.c, "prod-a");
  uint32_t b_id = producer_id_of(&w.c, "prod-b");
  assert_int_not_equal(a_id, 0);
  uint32_t svc = w.a.conn.service_id;
  uint32_t init = raw_method_id(&w.a.conn, "InitializeConnection");
  assert_int_not_equal(init, 0);
  raw_producer_close(&w.a);
  /* Every id after B's, around to A's (ids run 1..65535, 0 is none). */
  unsigned n = (a_id + 65535u - b_id - 1u) % 65535u;
  cycle_producers(ts, svc, init, n);
  raw_producer_t x;
  assert_int_equal(raw_producer_connect(&x, ts, "prod-x", "x.ds", 4, 64, false),
                   0);
  assert_int_equal(producer_id_of(&w.c, "prod-x"), a_id);
  raw_consumer_t cx;
  simple_cfg_t sc;
  simple_cfg_init(&sc, 128, 1 /* RING_BUFFER */, "x.ds");
  assert_int_equal(raw_consumer_connect(&cx, ts), 0);
  assert_int_equal(raw_consumer_enable(&cx, &sc.cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&x, 5000), 0);
  assert_int_not_equal(x.target_buffer, w.a.target_buffer);
  commit_to(&x, 0, 1, 0, "usurper", 0, 3, w.a.target_buffer);
  commit_to(&x, 1, 1, 0, "x", 0, 3, x.target_buffer); /* its own: kept */
  commit_to(&w.b, 1, 1, 1, "b", 3, 3, w.b.target_buffer);

  trace_t t;
  read_trace(&w, &t);
  assert_int_equal(count_str(&t, "usurper", 0), 0);
  assert_int_equal(count_str(&t, "a", 0), 3); /* A's, before it left */
  assert_int_equal(count_str(&t, "b", 0), 6);
  assert_int_equal(t.st->chunks_discarded, 1);
  free_packets(t.pk, t.n);
  assert_int_equal(raw_consumer_disable(&cx, 5000), 0);
  size_t nx = 0;
  Perfetto__Protos__TracePacket **px = raw_consumer_read(&cx, &nx);
  assert_non_null(px);
  trace_t tx = {.pk = px, .n = nx};
  assert_int_equal(count_str(&tx, "x", 0), 3);
  free_packets(px, nx);
  raw_consumer_close(&cx);
  raw_producer_close(&x);
  raw_consumer_close(&w.c);
  raw_producer_close(&w.b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(commit_into_a_sibling_buffer_is_refused,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(register_writer_for_a_sibling_buffer_is_refused,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(writer_ids_outside_1_to_32767_are_refused,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(patches_outside_the_rules_are_discarded,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(unpatched_chunks_of_a_dead_producer_are_dropped,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(final_commits_after_the_instance_stopped_are_kept,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(a_reused_producer_id_inherits_no_buffer_right,
                                      test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
