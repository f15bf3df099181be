/* tracegated end to end: a real service process driven by raw producers
 * and consumers that speak the wire by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pb/ipc/consumer_port.pb-c.h"
#include "test_service.h"
#include "pb/trace/test_event.pb-c.h"

typedef struct fixture {
  test_service_t ts;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  if (!f || test_service_start(&f->ts) < 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  int st = test_service_stop(&f->ts);
  free(f);
  /* A clean exit on SIGTERM is part of the contract. */
  return st == 0 ? 0 : -1;
}

/* Counts the producer packets (for_testing) and checks their trusted
 * fields; returns how many there were. |values| receives seq_value. */
static size_t producer_packets(Perfetto__Protos__TracePacket **pk, size_t n,
                               uint32_t *values, size_t max, uint32_t *seq_id) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) continue;
    assert_int_equal(pk[i]->trusted_uid, (int32_t)getuid());
    assert_int_equal(pk[i]->trusted_pid, (int32_t)getpid());
    assert_true(pk[i]->trusted_packet_sequence_id > 1);
    if (seq_id) *seq_id = pk[i]->trusted_packet_sequence_id;
    if (k < max) values[k] = pk[i]->for_testing->seq_value;
    k++;
  }
  return k;
}

static void full_session_records_packets_with_trusted_fields(void **state) {
  fixture_t *f = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &f->ts, "test.producer", "test.ds", 4, 64, false), 0);
  raw_consumer_t c;
  assert_int_equal(raw_consumer_connect(&c, &f->ts), 0);

  Perfetto__Protos__TraceConfig cfg;
  Perfetto__Protos__TraceConfig__BufferConfig buf, *bufp;
  Perfetto__Protos__TraceConfig__DataSource ds, *dsp;
  Perfetto__Protos__DataSourceConfig dsc;
  simple_config(&cfg, &buf, &bufp, &ds, &dsp, &dsc, 1024, 1, "test.ds");
  assert_int_equal(raw_consumer_enable(&c, &cfg, -1), 0);
  assert_int_equal(raw_producer_wait_started(&p, 5000), 0);
  assert_true(p.target_buffer > 0);

  uint8_t pk[3][64];
  const uint8_t *frags[3];
  size_t lens[3];
  for (int i = 0; i < 3; i++) {
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), "hello", (uint32_t)(100 + i));
    frags[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&p, 0, 0, TG_PAGE_DIV_4, 1, 0, 0, frags, lens, 3), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  /* The service freed the chunk after copying it. */
  assert_int_equal(tg_smb_bitmap_chunk_state(tg_smb_page_bitmap(&p.smb, 0), 0),
                   TG_CHUNK_FREE);

  Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  assert_int_equal(raw_call(&c.conn, "DisableTracing", &dis.base, -1, NULL, NULL, 5000), 1);
  assert_int_equal(raw_consumer_wait_disabled(&c, 5000, NULL, 0), 1);

  size_t n = 0;
  Perfetto__Protos__TracePacket **out = raw_consumer_read(&c, &n);
  assert_non_null(out);
  uint32_t values[8];
  assert_int_equal(producer_packets(out, n, values, 8, NULL), 3);
  assert_int_equal(values[0], 100);
  assert_int_equal(values[1], 101);
  assert_int_equal(values[2], 102);
  /* Service packets: the config, system info, clocks, stats at the end. */
  bool has_cfg = false, has_stats = false, has_clock = false, has_sys = false;
  for (size_t i = 0; i < n; i++) {
    if (out[i]->trusted_packet_sequence_id != 1) continue;
    has_cfg |= out[i]->trace_config != NULL;
    has_stats |= out[i]->trace_stats != NULL;
    has_clock |= out[i]->clock_snapshot != NULL;
    has_sys |= out[i]->system_info != NULL;
  }
  assert_true(has_cfg && has_stats && has_clock && has_sys);
  free_packets(out, n);

  Perfetto__Protos__FreeBuffersRequest fb = PERFETTO__PROTOS__FREE_BUFFERS_REQUEST__INIT;
  assert_int_equal(raw_call(&c.conn, "FreeBuffers", &fb.base, -1, NULL, NULL, 5000), 1);
  raw_consumer_close(&c);
  raw_producer_close(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(full_session_records_packets_with_trusted_fields,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
