/* Links on track events end to end: the agent in this process, a real
 * tracegated in a child, and `tracegate record` writing the trace file.
 *
 *   - golden bytes: flow ids, terminating flow ids, annotations between
 *     them and a correlation id come out as the exact TrackEvent bytes
 *     Perfetto's SDK would write (fixed64 fields 47 and 48, field 52 or 53,
 *     in the order given; the bounds and "the last correlation wins"),
 *     from the general path and from the fast one alike;
 *   - client and server: a client slice carries the flow id it derives from
 *     the traceparent it sends, a server slice terminates the id it derives
 *     from the header it parsed; with PERFETTO_BIN, Perfetto's trace
 *     processor holds one `flow` row from the first slice to the second.
 *
 * The agent is a process singleton: every test starts it and shuts it down;
 * the categories stay registered across tests (rpc is iid 1, golden 2). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "te_harness.h"
#include "test_proc.h"
#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/trace_context.h"
#include "tracegate/track_event.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

#define WAIT_MS TE_WAIT_MS

TG_CATEGORY(cat_rpc, "rpc");
TG_CATEGORY(cat_golden, "golden");

static void start_agent(const test_service_t *ts) {
  static bool registered;
  if (!registered) {
    static tg_category_t *const cats[] = {&cat_rpc, &cat_golden};
    assert_int_equal(tg_track_event_register(cats, 2), 0);
    registered = true;
  }
  te_start_agent(ts, "track-event-links");
}

/* Records with `tracegate record` (the track_event data source, every
 * category) what |fns| (|n|) write, each on a thread of its own, one after
 * the other, into |name| in |ts|'s directory; its path in |trace|. Each
 * thread's sequence starts fresh (iids from 1) and its exit commits what it
 * wrote; a Ctrl-C then stops the recording cleanly (flushing the agent).
 * The agent is stopped after. */
static void record(const test_service_t *ts, const char *name,
                   void *(*const *fns)(void *), size_t n, void *arg,
                   char *trace, size_t cap) {
  start_agent(ts);
  snprintf(trace, cap, "%s/%s", ts->dir, name);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-t", "60s",
                        "-o", trace, "track_event", NULL};
  pid_t cl = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args, TG_TEST_FD_DEVNULL,
                               TG_TEST_FD_INHERIT);
  assert_true(cl > 0);
  /* No callback says an instance started: poll the bits (bounded). */
  for (int i = 0; i < WAIT_MS && !(tg_category_enabled(&cat_rpc) &&
                                   tg_category_enabled(&cat_golden));
       i++)
    te_sleep_ms(1);
  assert_true(tg_category_enabled(&cat_rpc));
  assert_true(tg_category_enabled(&cat_golden));
  for (size_t i = 0; i < n; i++) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fns[i], arg), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
  }
  assert_int_equal(tg_test_exit_code(tg_test_stop(cl, SIGINT, WAIT_MS)), 0);
  tg_agent_shutdown();
}

/* Whether the |n| bytes at |want| occur in |file|. */
static bool file_holds(const char *file, const uint8_t *want, size_t n) {
  size_t len = 0;
  uint8_t *buf = tg_test_read_file(file, &len);
  assert_non_null(buf);
  bool found = memmem(buf, len, want, n) != NULL;
  free(buf);
  return found;
}

/* Perfetto's trace processor imports |trace| without an error or a loss
 * stat, but for up to |unknown_fields| events with fields it does not
 * know. */
static void assert_imported_cleanly(const char *bin, const char *dir,
                                    const char *trace,
                                    unsigned unknown_fields) {
  char sql[512], out[4096];
  snprintf(sql, sizeof(sql),
           "select name, idx, value from stats where value > 0 and "
           "severity in ('error', 'data_loss') and not "
           "(name = 'unknown_extension_fields' and value <= %u);\n",
           unknown_fields);
  te_tp_query(bin, dir, sql, trace, out, sizeof(out));
  assert_string_equal(out, "\"name\",\"idx\",\"value\"\n");
}

/* --- golden bytes ----------------------------------------------------------
 */

static void *golden_events(void *arg) {
  (void)arg;
  TG_SLICE_BEGIN(cat_golden, "golden", TG_FLOW(0x1122334455667788ull),
                 TG_ARG_INT("n", 5), TG_TERMINATING_FLOW(0x0102030405060708ull),
                 TG_FLOW(2), TG_CORRELATION_ID(300));
  TG_SLICE_END(cat_golden);
  /* Of two correlation ids, the last one given. */
  TG_INSTANT(cat_golden, "str", TG_CORRELATION_ID(9),
             TG_CORRELATION_STR("req-7"));
  /* Ten flows: the first eight are written. */
  TG_INSTANT(cat_golden, "many", TG_FLOW(1), TG_FLOW(2), TG_FLOW(3),
             TG_FLOW(4), TG_FLOW(5), TG_FLOW(6), TG_FLOW(7), TG_FLOW(8),
             TG_FLOW(9), TG_FLOW(10));
  /* Twice: the first interns the name (the general path), the second
   * takes the fast one, each writing its own bytes for the same fields. */
  for (int i = 0; i < 2; i++)
    TG_INSTANT(cat_golden, "fast", TG_TERMINATING_FLOW(0x0102030405060708ull),
               TG_FLOW(3), TG_CORRELATION_ID(7), TG_CORRELATION_ID(300));
  return NULL;
}

#define FLOW_TAG 0xF9, 0x02 /* field 47, fixed64 */
#define TERM_TAG 0x81, 0x03 /* field 48, fixed64 */
/* A length under 2^14 as a 4-byte varint. */
#define LEN4(n) \
  (uint8_t)(0x80 | ((n) & 0x7F)), (uint8_t)(0x80 | ((n) >> 7)), 0x80, 0x00
#define LE64(x)                                                          \
  (uint8_t)(x), (uint8_t)((x) >> 8), (uint8_t)((x) >> 16),               \
      (uint8_t)((x) >> 24), (uint8_t)((x) >> 32), (uint8_t)((x) >> 40),  \
      (uint8_t)((x) >> 48), (uint8_t)((x) >> 56)

static void links_are_written_as_perfettos_sdk_writes_them(void **state) {
  const test_service_t *ts = *state;
  char trace[128];
  void *(*const fns[])(void *) = {golden_events};
  record(ts, "golden.pftrace", fns, 1, NULL, trace, sizeof(trace));

  /* TracePacket.track_event (field 11) of each event, whole. Lengths of
   * nested messages take 4 bytes, as protozero writes them (reserved
   * before the body is known). */
  static const uint8_t slice[] = {
      0x5A, LEN4(49),    /* track_event */
      0x48, 0x01,        /* type: TYPE_SLICE_BEGIN */
      0x18, 0x02,        /* category_iids: golden */
      0x50, 0x01,        /* name_iid: "golden", first on the sequence */
      FLOW_TAG, LE64(0x1122334455667788ull),
      0x22, LEN4(4), 0x08, 0x01, 0x20, 0x05, /* debug_annotations {n: 5} */
      TERM_TAG, LE64(0x0102030405060708ull),
      FLOW_TAG, LE64(2ull),
      0xA0, 0x03, 0xAC, 0x02, /* correlation_id (52): 300 */
  };
  static const uint8_t str[] = {
      0x5A, LEN4(14), 0x48, 0x03, 0x18, 0x02, 0x50, 0x02,
      0xAA, 0x03, 5, 'r', 'e', 'q', '-', '7', /* correlation_id_str (53) */
  };
  static const uint8_t many[] = {
      0x5A, LEN4(86), 0x48, 0x03, 0x18, 0x02, 0x50, 0x03,
      FLOW_TAG, LE64(1ull), FLOW_TAG, LE64(2ull), FLOW_TAG, LE64(3ull),
      FLOW_TAG, LE64(4ull), FLOW_TAG, LE64(5ull), FLOW_TAG, LE64(6ull),
      FLOW_TAG, LE64(7ull), FLOW_TAG, LE64(8ull),
  };
  /* "fast", general path then fast path (its length in one byte). */
#define FAST_BODY                                                         \
  0x48, 0x03, 0x18, 0x02, 0x50, 0x04, TERM_TAG,                           \
      LE64(0x0102030405060708ull), FLOW_TAG, LE64(3ull), 0xA0, 0x03, 0xAC, \
      0x02
  static const uint8_t fast_general[] = {0x5A, LEN4(30), FAST_BODY};
  static const uint8_t fast[] = {0x5A, 30, FAST_BODY};
  _Static_assert(sizeof(fast) == 2 + 30, "fast length");
  _Static_assert(sizeof(slice) == 5 + 49, "slice length");
  _Static_assert(sizeof(str) == 5 + 14, "str length");
  _Static_assert(sizeof(many) == 5 + 86, "many length");
  assert_true(file_holds(trace, slice, sizeof(slice)));
  assert_true(file_holds(trace, str, sizeof(str)));
  assert_true(file_holds(trace, many, sizeof(many)));
  assert_true(file_holds(trace, fast_general, sizeof(fast_general)));
  assert_true(file_holds(trace, fast, sizeof(fast)));
  /* Trace processors older than correlation ids (v50.1) count each event
   * that has one in unknown_extension_fields and import it all the same;
   * a terminating flow that never started is no error. */
  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) return;
  assert_imported_cleanly(bin, ts->dir, trace, 4);
  char out[256];
  te_tp_query(bin, ts->dir,
           "select name from slice where category = 'golden' order by ts;\n",
           trace, out, sizeof(out));
  assert_string_equal(out,
                      "\"name\"\n\"golden\"\n\"str\"\n\"many\"\n\"fast\"\n"
                      "\"fast\"\n");
}

/* --- a client and a server ------------------------------------------------
 */

typedef struct hop {
  char header[TG_TRACEPARENT_BUF]; /* the client's traceparent */
} hop_t;

static void *client(void *arg) {
  hop_t *h = arg;
  tg_trace_context_t ctx;
  assert_int_equal(tg_trace_context_new(&ctx), 0);
  ctx.flags = TG_TRACE_FLAG_SAMPLED;
  tg_traceparent_format(&ctx, h->header);
  TG_SLICE_BEGIN(cat_rpc, "client.call",
                 TG_FLOW(tg_flow_id_from_context(ctx.trace_id, ctx.parent_id)));
  TG_SLICE_END(cat_rpc);
  return NULL;
}

static void *server(void *arg) {
  const hop_t *h = arg;
  tg_trace_context_t ctx;
  assert_int_equal(tg_traceparent_parse(h->header, strlen(h->header), &ctx), 0);
  TG_SLICE_BEGIN(cat_rpc, "server.handle",
                 TG_TERMINATING_FLOW(
                     tg_flow_id_from_context(ctx.trace_id, ctx.parent_id)));
  TG_SLICE_END(cat_rpc);
  return NULL;
}

static void server_slice_terminates_the_clients_flow(void **state) {
  const test_service_t *ts = *state;
  char trace[128];
  hop_t h;
  /* The server after the client: flows run forward in time. */
  void *(*const fns[])(void *) = {client, server};
  record(ts, "rpc.pftrace", fns, 2, &h, trace, sizeof(trace));

  const char *bin = getenv("PERFETTO_BIN");
  if (!bin || !*bin) {
    fprintf(stderr, "PERFETTO_BIN not set: the flow table is not checked\n");
    skip();
  }
  char out[4096];
  te_tp_query(bin, ts->dir,
           "select o.name as out_name, i.name as in_name from flow f "
           "join slice o on f.slice_out = o.id "
           "join slice i on f.slice_in = i.id;\n",
           trace, out, sizeof(out));
  assert_string_equal(out,
                      "\"out_name\",\"in_name\"\n"
                      "\"client.call\",\"server.handle\"\n");
  assert_imported_cleanly(bin, ts->dir, trace, 0);
}

int main(void) {
#define T(fn) \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, te_teardown)
  const struct CMUnitTest tests[] = {
      T(links_are_written_as_perfettos_sdk_writes_them),
      T(server_slice_terminates_the_clients_flow),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
