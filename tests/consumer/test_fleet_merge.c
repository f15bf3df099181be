/* The merged fleet trace as a unit of tg_fleet (consumer/fleet/merge.h):
 * a fixed recording (fleet_merge_script.h) comes out byte for byte as the
 * golden trace (fleet_merge_golden.inc), through a sink that frames
 * packets as the CLI's output file does; packets reach the sink uncopied,
 * the sink's errors come back, overflow ids are shared and stable, and a
 * host mapping more sequences than its bound is refused, not truncated. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "fleet_merge_script.h"
#include "tracegate/error.h"
#include "tracegate/pb_wire.h"

static const uint8_t golden[] = {
#include "fleet_merge_golden.inc"
};

/* --- a sink into memory, framed as a Trace ------------------------------------ */

typedef struct sink {
  tg_buf_t out;
  const uint8_t *last_p; /* the packet bytes of the last write */
  size_t writes;
  int fail_with; /* returned by every write when non-zero */
} sink_t;

static int sink_write(void *ctx, const uint8_t *p, size_t n,
                      const uint8_t *tail, size_t tail_n) {
  sink_t *s = ctx;
  s->last_p = p;
  s->writes++;
  if (s->fail_with) return s->fail_with;
  uint8_t hdr[1 + TG_PB_MAX_VARINT_SIZE];
  hdr[0] = (uint8_t)TG_PB_TAG(1, TG_PB_WT_LEN); /* Trace.packet */
  size_t h = (size_t)(tg_pb_write_varint(hdr + 1, n + tail_n) - hdr);
  if (tg_buf_append(&s->out, hdr, h) < 0 || tg_buf_append(&s->out, p, n) < 0 ||
      (tail_n && tg_buf_append(&s->out, tail, tail_n) < 0))
    return -ENOMEM;
  return 0;
}

typedef struct fixture {
  sink_t sink;
  tg_merge_t m;
  tg_merge_host_t hosts[SCRIPT_HOSTS];
} fixture_t;

static int setup(void **state) {
  static fixture_t fx;
  memset(&fx, 0, sizeof(fx));
  tg_buf_init(&fx.sink.out, 0);
  tg_merge_init(&fx.m, sink_write, &fx.sink);
  for (size_t i = 0; i < SCRIPT_HOSTS; i++) tg_merge_host_init(&fx.hosts[i], i);
  *state = &fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  for (size_t i = 0; i < SCRIPT_HOSTS; i++) tg_merge_host_free(&fx->hosts[i]);
  tg_merge_free(&fx->m);
  tg_buf_free(&fx->sink.out);
  return 0;
}

/* --- the script through the unit ------------------------------------------------ */

static int op_head(void *ctx) {
  fixture_t *fx = ctx;
  tg_merge_self_t self;
  memset(&self, 0, sizeof(self));
  self.has_uname = true;
  snprintf(self.uts.sysname, sizeof(self.uts.sysname), SCRIPT_SYSNAME);
  snprintf(self.uts.release, sizeof(self.uts.release), SCRIPT_RELEASE);
  snprintf(self.uts.version, sizeof(self.uts.version), SCRIPT_VERSION);
  snprintf(self.uts.machine, sizeof(self.uts.machine), SCRIPT_MACHINE);
  snprintf(self.hostname, sizeof(self.hostname), SCRIPT_HOSTNAME);
  self.num_cpus = SCRIPT_NUM_CPUS;
  memcpy(self.clocks, script_self_clocks, sizeof(self.clocks));
  return tg_merge_head(&fx->m, &self);
}

static int op_preamble(void *ctx, size_t i, const tg_fleet_host_report_t *h,
                       const char *fallback) {
  fixture_t *fx = ctx;
  return tg_merge_host_preamble(&fx->m, &fx->hosts[i], h, fallback);
}

static int op_clock_sync(void *ctx, size_t i, const tg_fleet_host_report_t *h) {
  fixture_t *fx = ctx;
  return tg_merge_clock_sync(&fx->m, &fx->hosts[i], h);
}

static int op_packet(void *ctx, size_t i, const uint8_t *p, size_t n) {
  fixture_t *fx = ctx;
  return tg_merge_packet(&fx->m, &fx->hosts[i], p, n);
}

static const merge_script_ops_t unit_ops = {op_head, op_preamble,
                                            op_clock_sync, op_packet};

static void merge_writes_the_golden_trace_byte_for_byte(void **state) {
  fixture_t *fx = *state;
  assert_int_equal(merge_script_run(&unit_ops, fx), 0);
  const uint8_t *out = tg_buf_begin(&fx->sink.out);
  size_t n = tg_buf_size(&fx->sink.out);
  size_t at = 0;
  while (at < n && at < sizeof(golden) && out[at] == golden[at]) at++;
  if (at != n || n != sizeof(golden))
    fail_msg("the merged trace differs from the golden one at byte %zu "
             "(%zu bytes written, %zu expected)", at, n, sizeof(golden));
  for (size_t i = 0; i < SCRIPT_HOSTS; i++)
    assert_int_equal(fx->hosts[i].malformed, script_malformed[i]);
}

/* --- the sink ------------------------------------------------------------------ */

static void packet_reaches_the_sink_uncopied(void **state) {
  fixture_t *fx = *state;
  uint8_t p[64];
  uint32_t seq = 3;
  size_t n = script_packet(p, sizeof(p), 1, "x", &seq, 1);
  assert_int_equal(tg_merge_packet(&fx->m, &fx->hosts[0], p, n), 0);
  assert_ptr_equal(fx->sink.last_p, p);
}

static void sink_error_is_the_merge_error(void **state) {
  fixture_t *fx = *state;
  fx->sink.fail_with = -EIO;
  uint8_t p[64];
  size_t n = script_packet(p, sizeof(p), 1, NULL, NULL, 0);
  assert_int_equal(tg_merge_packet(&fx->m, &fx->hosts[1], p, n), -EIO);
  tg_fleet_host_report_t h;
  memset(&h, 0, sizeof(h));
  assert_int_equal(tg_merge_host_preamble(&fx->m, &fx->hosts[1], &h, "b"),
                   -EIO);
  assert_int_equal(fx->hosts[1].malformed, 0);
}

/* --- sequence ids ------------------------------------------------------------- */

/* The last sequence id the sink saw appended. */
static uint32_t last_seq(const fixture_t *fx) {
  const uint8_t *p = tg_buf_begin(&fx->sink.out);
  tg_pb_reader_t r;
  tg_pb_field_t f;
  uint64_t len = 0;
  size_t k = tg_pb_read_varint(p + 1, p + tg_buf_size(&fx->sink.out), &len);
  assert_true(k > 0 && 1 + k + len <= tg_buf_size(&fx->sink.out));
  /* Only one packet is kept in the buffer at a time (see merge_id). */
  tg_pb_reader_init(&r, p + 1 + k, (size_t)len);
  uint32_t seq = 0;
  while (tg_pb_reader_next(&r, &f) == 1)
    if (f.id == 10) seq = (uint32_t)f.value;
  return seq;
}

/* One packet of |host| with id |orig|: the merge's result. */
static int merge_rv(fixture_t *fx, size_t host, uint32_t orig) {
  uint8_t p[64];
  size_t n = script_packet(p, sizeof(p), 1, NULL, &orig, 1);
  tg_buf_reset(&fx->sink.out);
  return tg_merge_packet(&fx->m, &fx->hosts[host], p, n);
}

static uint32_t merge_id(fixture_t *fx, size_t host, uint32_t orig) {
  assert_int_equal(merge_rv(fx, host, orig), 0);
  return last_seq(fx);
}

static void overflow_ids_are_shared_and_stable_per_host(void **state) {
  fixture_t *fx = *state;
  assert_int_equal(merge_id(fx, 0, 7), (1u << TG_MERGE_SEQ_SHIFT) | 7);
  assert_int_equal(merge_id(fx, 1, 7), (2u << TG_MERGE_SEQ_SHIFT) | 7);
  uint32_t a = merge_id(fx, 0, TG_MERGE_SEQ_COLLECTOR);
  uint32_t b = merge_id(fx, 1, TG_MERGE_SEQ_COLLECTOR);
  assert_int_equal(a, TG_MERGE_SEQ_OVERFLOW_BASE + 1);
  assert_int_equal(b, TG_MERGE_SEQ_OVERFLOW_BASE + 2);
  assert_int_equal(merge_id(fx, 0, TG_MERGE_SEQ_COLLECTOR), a);
  assert_int_equal(merge_id(fx, 1, TG_MERGE_SEQ_COLLECTOR), b);
}

static void a_host_past_its_mapped_sequences_is_refused(void **state) {
  fixture_t *fx = *state;
  const uint32_t base = TG_MERGE_SEQ_COLLECTOR;
  for (uint32_t i = 0; i < TG_MERGE_HOST_MAX_SEQS; i++)
    assert_int_equal(merge_rv(fx, 0, base + i), 0);
  size_t writes = fx->sink.writes;
  /* One more new id: refused, and nothing of the packet written. */
  assert_int_equal(merge_rv(fx, 0, base + TG_MERGE_HOST_MAX_SEQS),
                   TG_ETOO_MANY_SEQUENCES);
  assert_int_equal(fx->sink.writes, writes);
  assert_int_equal(tg_u32_map_count(&fx->hosts[0].seqs), TG_MERGE_HOST_MAX_SEQS);
  /* Ids it has, and those of its own range, still go through. */
  assert_int_equal(merge_id(fx, 0, base), TG_MERGE_SEQ_OVERFLOW_BASE + 1);
  assert_int_equal(merge_id(fx, 0, 5), (1u << TG_MERGE_SEQ_SHIFT) | 5);
  /* The bound is per host: another host maps its own. */
  assert_int_equal(merge_id(fx, 1, base),
                   TG_MERGE_SEQ_OVERFLOW_BASE + 1 + TG_MERGE_HOST_MAX_SEQS);
  assert_int_equal(fx->hosts[0].malformed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          merge_writes_the_golden_trace_byte_for_byte, setup, teardown),
      cmocka_unit_test_setup_teardown(packet_reaches_the_sink_uncopied, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(sink_error_is_the_merge_error, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          overflow_ids_are_shared_and_stable_per_host, setup, teardown),
      cmocka_unit_test_setup_teardown(
          a_host_past_its_mapped_sequences_is_refused, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
