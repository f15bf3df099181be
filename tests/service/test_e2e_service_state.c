/* tracegated end to end: QueryServiceState returns every registered
 * DataSourceDescriptor whole, as its producer sent it, in replies of at
 * most one frame each (has_more on all but the last), as Perfetto's
 * service does (its QueryServiceStateLargeResponse test); descriptors
 * over the limits are refused, and a slow reader gets the whole state.
 *
 * Descriptors are written byte by byte here, so that what comes back can
 * be compared byte by byte, and replies are read with the field reader,
 * not protobuf-c, for the same reason; protobuf-c then decodes the
 * concatenated replies as a Perfetto client merges them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "abi/ipc_frame.h"
#include "common/buf.h"
#include "pb/common/tracing_service_state.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "service/ds_descriptor.h"
#include "service/service.h"
#include "test_notice.h"
#include "test_service.h"
#include "tracegate/pb_wire.h"

/* --- descriptors, byte by byte -------------------------------------------- */

typedef tg_buf_t bytes_t;

static bytes_t bytes_new(void) {
  bytes_t b;
  tg_buf_init(&b, 0);
  return b;
}

static void put(bytes_t *b, const void *p, size_t n) {
  assert_int_equal(tg_buf_append(b, p, n), 0);
}

static void put_varint(bytes_t *b, uint64_t v) {
  uint8_t tmp[TG_PB_MAX_VARINT_SIZE];
  put(b, tmp, (size_t)(tg_pb_write_varint(tmp, v) - tmp));
}

static void put_len(bytes_t *b, uint32_t field, const void *p, size_t n) {
  put_varint(b, TG_PB_TAG(field, TG_PB_WT_LEN));
  put_varint(b, n);
  put(b, p, n);
}

static void put_filled(bytes_t *b, uint32_t field, size_t n, uint8_t seed) {
  uint8_t *fill = malloc(n ? n : 1);
  assert_non_null(fill);
  for (size_t i = 0; i < n; i++) fill[i] = (uint8_t)(seed + i * 7);
  put_len(b, field, fill, n);
  free(fill);
}

/* {name = 1, track_event_descriptor = 6} with |n| bytes of |seed|'s. */
static bytes_t desc_big(const char *name, size_t n, uint8_t seed) {
  bytes_t b = bytes_new();
  put_len(&b, 1, name, strlen(name));
  put_filled(&b, 6, n, seed);
  return b;
}

/* --- the producer side ------------------------------------------------------ */

/* RegisterDataSource or UpdateDataSource with |desc| as field 1, sent as
 * is. Returns 1 accepted, 0 refused (the reason in |err|), -1 error. */
static int send_descriptor(raw_producer_t *p, const char *method,
                           const bytes_t *desc, char *err, size_t errlen) {
  bytes_t req = bytes_new();
  put_len(&req, 1, tg_buf_begin(desc), tg_buf_size(desc));
  Perfetto__Protos__IPCFrame__InvokeMethod im =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  im.has_service_id = 1;
  im.service_id = p->conn.service_id;
  im.has_method_id = 1;
  im.method_id = raw_method_id(&p->conn, method);
  im.has_args_proto = 1;
  im.args_proto.data = tg_buf_begin(&req);
  im.args_proto.len = tg_buf_size(&req);
  tg_ipc_frame_t f = PERFETTO__PROTOS__IPCFRAME__INIT;
  uint64_t rid = p->conn.next_request++;
  f.has_request_id = 1;
  f.request_id = rid;
  f.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  f.msg_invoke_method = &im;
  int rv = raw_send_frame(&p->conn, &f);
  tg_buf_free(&req);
  if (rv < 0) return -1;
  Perfetto__Protos__RegisterDataSourceResponse *r = NULL;
  rv = raw_wait_reply(&p->conn, rid,
                      &perfetto__protos__register_data_source_response__descriptor,
                      (ProtobufCMessage **)&r, 5000);
  if (err) snprintf(err, errlen, "%s", r && r->error ? r->error : "");
  if (r) perfetto__protos__register_data_source_response__free_unpacked(r, NULL);
  return rv;
}

static void register_ok(raw_producer_t *p, const bytes_t *desc) {
  char err[256];
  assert_int_equal(send_descriptor(p, "RegisterDataSource", desc, err, sizeof(err)), 1);
}

/* --- the consumer side ------------------------------------------------------ */

typedef struct found_ds {
  uint8_t *desc; /* owned copy of ds_descriptor's bytes */
  size_t len;
  uint32_t producer_id;
} found_ds_t;

typedef struct state {
  found_ds_t *ds;
  size_t n_ds;
  size_t replies;
  size_t largest_reply; /* reply_proto bytes */
  tg_buf_t merged;      /* every reply_proto, concatenated */
} state_t;

static void read_data_source(state_t *st, const uint8_t *p, size_t n) {
  found_ds_t d = {0};
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, p, n);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id == 1 && f.type == TG_PB_WT_LEN) {
      assert_null(d.desc); /* once */
      d.desc = malloc(f.size ? f.size : 1);
      assert_non_null(d.desc);
      memcpy(d.desc, f.data, f.size);
      d.len = f.size;
    } else if (f.id == 2 && f.type == TG_PB_WT_VARINT) {
      d.producer_id = (uint32_t)f.value;
    }
  }
  assert_int_equal(rv, 0);
  assert_non_null(d.desc);
  st->ds = realloc(st->ds, (st->n_ds + 1) * sizeof(*st->ds));
  assert_non_null(st->ds);
  st->ds[st->n_ds++] = d;
}

/* One QueryServiceStateResponse: its data sources into |st|. */
static void read_reply(state_t *st, const uint8_t *p, size_t n) {
  tg_pb_reader_t r, s;
  tg_pb_field_t f, g;
  tg_pb_reader_init(&r, p, n);
  int rv;
  while ((rv = tg_pb_reader_next(&r, &f)) == 1) {
    if (f.id != 1 || f.type != TG_PB_WT_LEN) continue;
    tg_pb_reader_init(&s, f.data, f.size);
    while ((rv = tg_pb_reader_next(&s, &g)) == 1)
      if (g.id == 2 && g.type == TG_PB_WT_LEN) read_data_source(st, g.data, g.size);
    assert_int_equal(rv, 0);
  }
  assert_int_equal(rv, 0);
}

/* QueryServiceState, every reply read; all but the last have has_more. */
static void query(raw_consumer_t *c, state_t *st, int pause_ms) {
  memset(st, 0, sizeof(*st));
  tg_buf_init(&st->merged, 0);
  Perfetto__Protos__QueryServiceStateRequest req =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
  int64_t rid = raw_invoke(&c->conn, "QueryServiceState", &req.base, -1, false);
  assert_true(rid > 0);
  if (pause_ms) usleep((useconds_t)pause_ms * 1000);
  for (bool more = true; more;) {
    raw_frame_t f;
    assert_int_equal(raw_wait(&c->conn, (uint64_t)rid, 20000, &f), 1);
    assert_int_equal(f.frame->msg_case,
                     PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY);
    Perfetto__Protos__IPCFrame__InvokeMethodReply *r = f.frame->msg_invoke_method_reply;
    assert_true(r->success);
    /* The frame decoder took it: the frame was within the cap. */
    assert_true(perfetto__protos__ipcframe__get_packed_size(f.frame) <=
                TG_IPC_FRAME_MAX_PAYLOAD);
    more = r->has_more;
    st->replies++;
    if (r->reply_proto.len > st->largest_reply) st->largest_reply = r->reply_proto.len;
    read_reply(st, r->reply_proto.data, r->reply_proto.len);
    assert_int_equal(tg_buf_append(&st->merged, r->reply_proto.data, r->reply_proto.len),
                     0);
    tg_ipc_frame_free(f.frame);
  }
}

/* The replies decoded as one message, as Perfetto's client merges them. */
static Perfetto__Protos__TracingServiceState *merged(state_t *st) {
  Perfetto__Protos__QueryServiceStateResponse *r =
      perfetto__protos__query_service_state_response__unpack(
          NULL, tg_buf_size(&st->merged), tg_buf_begin(&st->merged));
  assert_non_null(r);
  assert_non_null(r->service_state);
  Perfetto__Protos__TracingServiceState *s = r->service_state;
  r->service_state = NULL;
  perfetto__protos__query_service_state_response__free_unpacked(r, NULL);
  return s;
}

static void state_free(state_t *st) {
  for (size_t i = 0; i < st->n_ds; i++) free(st->ds[i].desc);
  free(st->ds);
  tg_buf_free(&st->merged);
}

/* The data source whose descriptor is |want|, byte for byte, or NULL. */
static const found_ds_t *find(const state_t *st, const bytes_t *want) {
  const found_ds_t *hit = NULL;
  for (size_t i = 0; i < st->n_ds; i++) {
    if (st->ds[i].len != tg_buf_size(want) ||
        memcmp(st->ds[i].desc, tg_buf_begin(want), st->ds[i].len))
      continue;
    assert_null(hit); /* exactly once */
    hit = &st->ds[i];
  }
  return hit;
}

static uint32_t producer_id_of(raw_consumer_t *c, const char *name) {
  state_t st;
  query(c, &st, 0);
  Perfetto__Protos__TracingServiceState *s = merged(&st);
  uint32_t id = 0;
  for (size_t i = 0; i < s->n_producers; i++)
    if (s->producers[i]->name && !strcmp(s->producers[i]->name, name))
      id = (uint32_t)s->producers[i]->id;
  perfetto__protos__tracing_service_state__free_unpacked(s, NULL);
  state_free(&st);
  assert_int_not_equal(id, 0);
  return id;
}

/* --- tests -------------------------------------------------------------------- */

static void descriptor_with_extra_fields_comes_back_byte_identical(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "desc.producer", NULL, 4, 64, false), 0);
  /* Out of field order, typed sub-descriptors, a field no .proto of ours
   * has (of every wire type), a non-minimal varint. */
  bytes_t d = bytes_new();
  put_filled(&d, 6, 300, 1);          /* track_event_descriptor */
  put_len(&d, 1, "extra.ds", 8);      /* name */
  put_varint(&d, TG_PB_TAG(2, TG_PB_WT_VARINT));
  put(&d, "\x81\x00", 2);             /* will_notify_on_stop = 1, 2 bytes */
  put_filled(&d, 5, 40, 2);           /* gpu_counter_descriptor */
  put_filled(&d, 8, 17, 3);           /* ftrace_descriptor */
  put_varint(&d, TG_PB_TAG(7, TG_PB_WT_VARINT));
  put_varint(&d, 0x123456789ull);     /* id */
  put_filled(&d, 4242, 9, 4);         /* unknown LEN */
  put_varint(&d, TG_PB_TAG(4243, TG_PB_WT_FIXED32));
  put(&d, "\x01\x02\x03\x04", 4);
  put_varint(&d, TG_PB_TAG(4244, TG_PB_WT_FIXED64));
  put(&d, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  register_ok(&p, &d);

  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  uint32_t pid = producer_id_of(&c, "desc.producer");
  state_t st;
  query(&c, &st, 0);
  assert_int_equal(st.replies, 1);
  const found_ds_t *got = find(&st, &d);
  assert_non_null(got);
  assert_int_equal(got->producer_id, pid);

  /* UpdateDataSource replaces the bytes kept. */
  bytes_t u = bytes_new();
  put_len(&u, 1, "extra.ds", 8);
  put_filled(&u, 4242, 5, 9);
  char err[256];
  assert_int_equal(send_descriptor(&p, "UpdateDataSource", &u, err, sizeof(err)), 1);
  state_t st2;
  query(&c, &st2, 0);
  assert_null(find(&st2, &d));
  assert_non_null(find(&st2, &u));

  state_free(&st);
  state_free(&st2);
  tg_buf_free(&d);
  tg_buf_free(&u);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

/* Data source |k| of producer "<prefix>.<i>": "<prefix>.<i>.<k>" with
 * |size| bytes of track_event_descriptor of its own. */
static bytes_t numbered_desc(const char *prefix, int i, int k, size_t size) {
  char name[48];
  snprintf(name, sizeof(name), "%s.%d.%d", prefix, i, k);
  return desc_big(name, size, (uint8_t)(i * 31 + k));
}

/* Producer "<prefix>.<i>" with |per| numbered descriptors. */
static void connect_with_descriptors(raw_producer_t *p, const test_service_t *ts,
                                     const char *prefix, int i, int per, size_t size) {
  char pname[32];
  snprintf(pname, sizeof(pname), "%s.%d", prefix, i);
  assert_int_equal(raw_producer_connect(p, ts, pname, NULL, 4, 64, false), 0);
  for (int k = 0; k < per; k++) {
    bytes_t d = numbered_desc(prefix, i, k, size);
    register_ok(p, &d);
    tg_buf_free(&d);
  }
}

/* Every numbered descriptor of |producers| x |per| is in |st| once;
 * with |ids|, from the producer of that id. */
static void expect_numbered(const state_t *st, const char *prefix, int producers,
                            int per, size_t size, const uint32_t *ids) {
  assert_int_equal(st->n_ds, (size_t)(producers * per));
  for (int i = 0; i < producers; i++) {
    for (int k = 0; k < per; k++) {
      bytes_t d = numbered_desc(prefix, i, k, size);
      const found_ds_t *got = find(st, &d);
      assert_non_null(got);
      if (ids) assert_int_equal(got->producer_id, ids[i]);
      tg_buf_free(&d);
    }
  }
}

/* 500 data sources with 1 KiB descriptors (two producers: 256 at most
 * each): ~520 KB of state in several replies, each within a frame. */
static void state_larger_than_a_frame_arrives_in_several_replies_whole(void **state) {
  test_service_t *ts = *state;
  enum { PRODUCERS = 2, PER = 250, SIZE = 1024 };
  raw_producer_t p[PRODUCERS];
  for (int i = 0; i < PRODUCERS; i++)
    connect_with_descriptors(&p[i], ts, "many", i, PER, SIZE);
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  uint32_t ids[PRODUCERS] = {producer_id_of(&c, "many.0"), producer_id_of(&c, "many.1")};
  state_t st;
  query(&c, &st, 0);
  assert_true(st.replies >= 4); /* > 4 frames of state */
  assert_true(st.largest_reply <= TG_IPC_FRAME_MAX_PAYLOAD);
  expect_numbered(&st, "many", PRODUCERS, PER, SIZE, ids);
  /* Merged as a Perfetto client does: everything once, the rest intact. */
  Perfetto__Protos__TracingServiceState *m = merged(&st);
  assert_int_equal(m->n_data_sources, PRODUCERS * PER);
  assert_int_equal(m->n_producers, PRODUCERS);
  assert_true(m->has_num_sessions);
  assert_string_equal(m->data_sources[0]->ds_descriptor->name, "many.0.0");
  assert_int_equal(m->data_sources[0]->ds_descriptor->track_event_descriptor.len, SIZE);
  perfetto__protos__tracing_service_state__free_unpacked(m, NULL);
  state_free(&st);
  for (int i = 0; i < PRODUCERS; i++) raw_producer_close(&p[i]);
  raw_consumer_close(&c);
}

/* Perfetto's QueryServiceStateLargeResponse: five descriptors that each
 * fill a frame come back in six replies, whole. */
static void frame_sized_descriptors_take_a_reply_each(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "big.producer", NULL, 4, 64, false), 0);
  bytes_t d[5];
  for (int i = 0; i < 5; i++) {
    char name[24];
    snprintf(name, sizeof(name), "big_ds_%d", i);
    d[i] = desc_big(name, 128 * 1024 - 64, (uint8_t)(' ' + i)); /* kIPCBufferSize - 64 */
    register_ok(&p, &d[i]);
  }
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  state_t st;
  query(&c, &st, 0);
  assert_int_equal(st.replies, 6);
  for (int i = 0; i < 5; i++) assert_non_null(find(&st, &d[i]));
  state_free(&st);
  for (int i = 0; i < 5; i++) tg_buf_free(&d[i]);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

static void oversized_descriptor_is_refused_and_the_service_carries_on(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "huge.producer", NULL, 4, 64, false), 0);
  char err[256];

  /* One byte over the largest a reply can carry: the name's field (9
   * bytes) and track_event_descriptor's tag and 3-byte length around the
   * fill. */
  size_t fill = TG_DS_DESCRIPTOR_MAX_BYTES + 1 - 9 - 1 - 3;
  bytes_t over = desc_big("huge.ds", fill, 5);
  assert_int_equal(tg_buf_size(&over), TG_DS_DESCRIPTOR_MAX_BYTES + 1);
  assert_int_equal(send_descriptor(&p, "RegisterDataSource", &over, err, sizeof(err)), 0);
  char limit[32];
  snprintf(limit, sizeof(limit), " %llu ",
           (unsigned long long)TG_DS_DESCRIPTOR_MAX_BYTES);
  assert_notice_with(err, TG_N_SERVICE_DS_REFUSED, limit);
  bytes_t max = desc_big("huge.ds", fill - 1, 5);
  assert_int_equal(tg_buf_size(&max), TG_DS_DESCRIPTOR_MAX_BYTES);
  register_ok(&p, &max);

  /* The producer's budget: 1 MiB of descriptors in all. */
  size_t kept = tg_buf_size(&max);
  bytes_t more[8];
  int n_more = 0;
  for (;; n_more++) {
    char name[32];
    snprintf(name, sizeof(name), "huge.ds.%d", n_more);
    assert_true(n_more < 8);
    more[n_more] = desc_big(name, 128 * 1024 - 64, (uint8_t)n_more);
    int rv = send_descriptor(&p, "RegisterDataSource", &more[n_more], err, sizeof(err));
    assert_true(rv >= 0);
    if (rv == 0) break;
    kept += tg_buf_size(&more[n_more]);
  }
  assert_notice_with(err, TG_N_SERVICE_DS_REFUSED, " 1 MiB ");
  assert_true(kept <= TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER);
  assert_true(kept + tg_buf_size(&more[n_more]) > TG_SERVICE_MAX_DESCRIPTOR_BYTES_PER_PRODUCER);
  /* An oversized update is refused too, and keeps what was there. */
  assert_int_equal(send_descriptor(&p, "UpdateDataSource", &over, err, sizeof(err)), 0);

  /* The service and its other producers carry on. */
  raw_producer_t q;
  assert_int_equal(raw_producer_connect(&q, ts, "small.producer", "small.ds", 4, 64,
                                        false), 0);
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  state_t st;
  query(&c, &st, 0);
  assert_non_null(find(&st, &max));
  assert_null(find(&st, &over));
  assert_null(find(&st, &more[n_more]));
  assert_int_equal(st.n_ds, 1 + (size_t)n_more + 1);
  state_free(&st);

  /* Unregistering gives the budget back. */
  Perfetto__Protos__UnregisterDataSourceRequest un =
      PERFETTO__PROTOS__UNREGISTER_DATA_SOURCE_REQUEST__INIT;
  un.data_source_name = "huge.ds";
  assert_int_equal(raw_call(&p.conn, "UnregisterDataSource", &un.base, -1, NULL, NULL,
                            5000), 1);
  register_ok(&p, &more[n_more]);

  tg_buf_free(&over);
  tg_buf_free(&max);
  for (int i = 0; i <= n_more; i++) tg_buf_free(&more[i]);
  raw_consumer_close(&c);
  raw_producer_close(&q);
  raw_producer_close(&p);
}

/* A consumer that reads nothing for a while: ~20 MiB of state would pass
 * the 16 MiB a connection may queue (ipc/host.h), so the service stops at
 * the high-water mark and goes on as the consumer reads. */
static void slow_reader_gets_a_state_larger_than_the_output_cap(void **state) {
  test_service_t *ts = *state;
  enum { PRODUCERS = 20, PER = 8, SIZE = 128 * 1024 - 64 };
  raw_producer_t *p = calloc(PRODUCERS, sizeof(*p));
  assert_non_null(p);
  for (int i = 0; i < PRODUCERS; i++)
    connect_with_descriptors(&p[i], ts, "bulk", i, PER, SIZE);
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, ts), 0);
  state_t st;
  query(&c, &st, 1000);
  assert_true(tg_buf_size(&st.merged) > TG_IPC_HOST_OUTPUT_HARD_CAP);
  expect_numbered(&st, "bulk", PRODUCERS, PER, SIZE, NULL);
  state_free(&st);
  /* Still serving on the same connection. */
  query(&c, &st, 0);
  assert_int_equal(st.n_ds, PRODUCERS * PER);
  state_free(&st);
  raw_consumer_close(&c);
  for (int i = 0; i < PRODUCERS; i++) raw_producer_close(&p[i]);
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(descriptor_with_extra_fields_comes_back_byte_identical,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          state_larger_than_a_frame_arrives_in_several_replies_whole,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(frame_sized_descriptors_take_a_reply_each,
                                      test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          oversized_descriptor_is_refused_and_the_service_carries_on,
          test_service_setup, test_service_teardown),
      cmocka_unit_test_setup_teardown(
          slow_reader_gets_a_state_larger_than_the_output_cap,
          test_service_setup, test_service_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
