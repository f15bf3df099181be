/* The perf ring record parser and ring reader (agent/perf/perf_record.h)
 * against golden records (perf_golden.h): every field of SAMPLE with a
 * callchain, LOST, THROTTLE, COMM and MMAP2 (both layouts); every
 * truncation refused; records that wrap the ring's end; a group's READ
 * (leader and followers) in a sample and from read(2). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/perf/perf_record.h"
#include "perf_golden.h"

static const tg_perf_layout_t golden_layout = {
    .sample_type = GOLDEN_SAMPLE_TYPE, .sample_id_all = true};

static void sample_has_every_field(void **state) {
  (void)state;
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(golden_sample, sizeof(golden_sample),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_SAMPLE);
  assert_int_equal(r.misc & TG_PERF_MISC_CPUMODE_MASK, 2);
  assert_int_equal(r.u.sample.ip, 0x401136);
  assert_int_equal(r.u.sample.pid, 100);
  assert_int_equal(r.u.sample.tid, 101);
  assert_int_equal(r.u.sample.time, 5000000000ull);
  assert_int_equal(r.u.sample.cpu, 1);
  assert_int_equal(r.u.sample.period, 250000);
  assert_int_equal(r.u.sample.nr, 5);
  assert_true(tg_perf_callchain_at(&r, 0) == TG_PERF_CONTEXT_KERNEL);
  assert_true(tg_perf_callchain_at(&r, 1) == 0xffffffff81000010ull);
  assert_true(tg_perf_callchain_at(&r, 2) == TG_PERF_CONTEXT_USER);
  assert_int_equal(tg_perf_callchain_at(&r, 3), 0x401136);
  assert_int_equal(tg_perf_callchain_at(&r, 4), 0x401180);
  assert_int_equal(tg_perf_callchain_at(&r, 5), 0); /* past nr */
  assert_false(r.has_id); /* a sample carries no trailer */
}

static void every_truncation_is_refused(void **state) {
  (void)state;
  const struct {
    const uint8_t *p;
    size_t n;
  } recs[] = {
      {golden_sample, sizeof(golden_sample)},
      {golden_lost, sizeof(golden_lost)},
      {golden_throttle, sizeof(golden_throttle)},
      {golden_comm, sizeof(golden_comm)},
      {golden_mmap2, sizeof(golden_mmap2)},
      {golden_mmap2_build_id, sizeof(golden_mmap2_build_id)},
  };
  for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
    uint8_t buf[256];
    memcpy(buf, recs[i].p, recs[i].n);
    /* Every shorter record, with its size field saying so. */
    for (size_t n = 8; n < recs[i].n; n += 8) {
      buf[6] = (uint8_t)n;
      buf[7] = 0;
      tg_perf_record_t r;
      int rv = tg_perf_record_parse(buf, n, &golden_layout, &r);
      /* COMM and MMAP2 strings may be cut to nothing but not their
       * fixed fields. */
      if (rv == 0) {
        assert_true(r.type == TG_PERF_RECORD_COMM ||
                    r.type == TG_PERF_RECORD_MMAP2);
      } else {
        assert_int_equal(rv, -EBADMSG);
      }
    }
    /* A size field that disagrees with the length. */
    tg_perf_record_t r;
    assert_int_equal(tg_perf_record_parse(recs[i].p, recs[i].n - 8,
                                          &golden_layout, &r),
                     -EBADMSG);
  }
}

static void a_callchain_longer_than_the_record_is_refused(void **state) {
  (void)state;
  uint8_t buf[sizeof(golden_sample)];
  memcpy(buf, golden_sample, sizeof(buf));
  buf[48] = 6; /* nr: one more than the record holds */
  tg_perf_record_t r;
  assert_int_equal(
      tg_perf_record_parse(buf, sizeof(buf), &golden_layout, &r),
      -EBADMSG);
  memset(buf + 48, 0xff, 8); /* nr = 2^64 - 1 */
  assert_int_equal(
      tg_perf_record_parse(buf, sizeof(buf), &golden_layout, &r),
      -EBADMSG);
}

static void lost_throttle_and_comm(void **state) {
  (void)state;
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(golden_lost, sizeof(golden_lost),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_LOST);
  assert_int_equal(r.u.lost.id, 7);
  assert_int_equal(r.u.lost.lost, 42);
  assert_true(r.has_id);
  assert_int_equal(r.id.time, 5000000100ull);
  assert_int_equal(r.id.cpu, 1);

  assert_int_equal(tg_perf_record_parse(golden_throttle,
                                        sizeof(golden_throttle),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_THROTTLE);
  assert_int_equal(r.u.throttle.time, 5000000200ull);
  assert_int_equal(r.u.throttle.id, 7);

  assert_int_equal(tg_perf_record_parse(golden_comm, sizeof(golden_comm),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_COMM);
  assert_true(r.misc & TG_PERF_MISC_COMM_EXEC);
  assert_int_equal(r.u.comm.pid, 100);
  assert_int_equal(r.u.comm.comm_len, 4);
  assert_memory_equal(r.u.comm.comm, "work", 4);
  assert_int_equal(r.id.pid, 100);
}

static void mmap2_in_both_layouts(void **state) {
  (void)state;
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(golden_mmap2, sizeof(golden_mmap2),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_MMAP2);
  assert_int_equal(r.u.mmap2.pid, 100);
  assert_int_equal(r.u.mmap2.addr, 0x400000);
  assert_int_equal(r.u.mmap2.len, 0x2000);
  assert_int_equal(r.u.mmap2.pgoff, 0x1000);
  assert_int_equal(r.u.mmap2.maj, 8);
  assert_int_equal(r.u.mmap2.min, 1);
  assert_int_equal(r.u.mmap2.ino, 1234);
  assert_int_equal(r.u.mmap2.prot, 5);
  assert_int_equal(r.u.mmap2.filename_len, 6);
  assert_memory_equal(r.u.mmap2.filename, "/tmp/w", 6);
  assert_null(r.u.mmap2.build_id);
  assert_int_equal(r.id.time, 5000000400ull);

  assert_int_equal(tg_perf_record_parse(golden_mmap2_build_id,
                                        sizeof(golden_mmap2_build_id),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.u.mmap2.build_id_size, 20);
  assert_int_equal(r.u.mmap2.build_id[0], 0xde);
  assert_int_equal(r.u.mmap2.build_id[19], 16);
  assert_int_equal(r.u.mmap2.ino, 0);
  assert_int_equal(r.u.mmap2.prot, 5);
  assert_memory_equal(r.u.mmap2.filename, "/tmp/w", 6);

  /* A build id longer than the kernel's 20 bytes. */
  uint8_t buf[sizeof(golden_mmap2_build_id)];
  memcpy(buf, golden_mmap2_build_id, sizeof(buf));
  buf[8 + 32] = 21;
  assert_int_equal(
      tg_perf_record_parse(buf, sizeof(buf), &golden_layout, &r),
      -EBADMSG);
}

static void user_registers_and_stack(void **state) {
  (void)state;
  const tg_perf_layout_t lay = {.sample_type = GOLDEN_DWARF_SAMPLE_TYPE,
                                .sample_id_all = true, .n_user_regs = 3};
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(golden_dwarf_sample,
                                        sizeof(golden_dwarf_sample), &lay, &r),
                   0);
  assert_int_equal(r.u.sample.regs_abi, 2);
  assert_int_equal(r.u.sample.n_regs, 3);
  assert_int_equal(tg_perf_user_reg_at(&r, 0), 0x7ffc0000);
  assert_int_equal(tg_perf_user_reg_at(&r, 1), 0x7ffb0000);
  assert_int_equal(tg_perf_user_reg_at(&r, 2), 0x401136);
  assert_int_equal(tg_perf_user_reg_at(&r, 3), 0); /* past n_regs */
  assert_int_equal(r.u.sample.stack_size, 16);
  assert_int_equal(r.u.sample.stack_dyn_size, 12);
  assert_int_equal(r.u.sample.stack[0], 1);
  assert_int_equal(r.u.sample.stack[15], 16);
  /* More registers than the record holds. */
  tg_perf_layout_t many = lay;
  many.n_user_regs = 10;
  assert_int_equal(tg_perf_record_parse(golden_dwarf_sample,
                                        sizeof(golden_dwarf_sample), &many,
                                        &r),
                   -EBADMSG);
  /* A stack size past the record. */
  uint8_t buf[sizeof(golden_dwarf_sample)];
  memcpy(buf, golden_dwarf_sample, sizeof(buf));
  buf[80] = 200;
  assert_int_equal(tg_perf_record_parse(buf, sizeof(buf), &lay, &r), -EBADMSG);
  /* A dyn_size above the size is cut to it. */
  memcpy(buf, golden_dwarf_sample, sizeof(buf));
  buf[104] = 99;
  assert_int_equal(tg_perf_record_parse(buf, sizeof(buf), &lay, &r), 0);
  assert_int_equal(r.u.sample.stack_dyn_size, 16);
  /* A kernel thread: ABI none, no registers follow; an empty stack. */
  const uint8_t kthread[] = {GHDR(9, 1, 64), G64(1), G32(0), G32(0), G64(1),
                             G32(0), G32(0), G64(1), G64(0), G64(0)};
  assert_int_equal(tg_perf_record_parse(kthread, sizeof(kthread), &lay, &r), 0);
  assert_int_equal(r.u.sample.n_regs, 0);
  assert_int_equal(r.u.sample.stack_size, 0);
}

static void read_value_as_timebase_count(void **state) {
  (void)state;
  /* IP|TID|TIME|CPU|READ: what tracegate-perf opens without callstacks. */
  const tg_perf_layout_t lay = {
      .sample_type = 0x1u | 0x2u | 0x4u | 0x80u | 0x10u, .sample_id_all = true};
  const uint8_t rec[] = {GHDR(9, 2, 48), G64(0x401136), G32(7), G32(8),
                         G64(99), G32(1), G32(0), G64(123456789)};
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(rec, sizeof(rec), &lay, &r), 0);
  assert_int_equal(r.u.sample.read_value, 123456789);
  assert_int_equal(r.u.sample.period, 0);
  assert_int_equal(r.u.sample.cpu, 1);
  assert_int_equal(tg_perf_record_parse(rec, sizeof(rec) - 8, &lay, &r),
                   -EBADMSG);
}

static void group_read_has_every_member(void **state) {
  (void)state;
  /* TID|TIME|READ with read_format PERF_FORMAT_GROUP: nr, then values. */
  const tg_perf_layout_t lay = {.sample_type = 0x2u | 0x4u | 0x10u,
                                .sample_id_all = true, .read_group = true};
  const uint8_t rec[] = {GHDR(9, 2, 56), G32(7), G32(8), G64(99), G64(3),
                         G64(1000), G64(20), G64(30)};
  tg_perf_record_t r;
  assert_int_equal(tg_perf_record_parse(rec, sizeof(rec), &lay, &r), 0);
  assert_int_equal(r.u.sample.read_nr, 3);
  assert_int_equal(r.u.sample.read_value, 1000);
  assert_int_equal(tg_perf_read_value_at(&r, 0), 1000);
  assert_int_equal(tg_perf_read_value_at(&r, 2), 30);
  assert_int_equal(tg_perf_read_value_at(&r, 3), 0);
  /* nr past the record, and a record cut short. */
  uint8_t bad[sizeof(rec)];
  memcpy(bad, rec, sizeof(rec));
  bad[24] = 4;
  assert_int_equal(tg_perf_record_parse(bad, sizeof(bad), &lay, &r), -EBADMSG);
  bad[24] = 0xff, bad[31] = 0xff; /* a huge nr: no overflow */
  assert_int_equal(tg_perf_record_parse(bad, sizeof(bad), &lay, &r), -EBADMSG);

  /* read(2) of a polled leader: the same group format, alone. */
  const uint8_t polled[] = {G64(2), G64(5), G64(6)};
  uint64_t v[4];
  size_t n;
  assert_int_equal(tg_perf_group_read_parse(polled, sizeof(polled), v, 4, &n),
                   0);
  assert_int_equal(n, 2);
  assert_int_equal(v[0], 5);
  assert_int_equal(v[1], 6);
  assert_int_equal(tg_perf_group_read_parse(polled, sizeof(polled), v, 1, &n),
                   0);
  assert_int_equal(n, 1);
  assert_int_equal(tg_perf_group_read_parse(polled, 16, v, 4, &n), -EBADMSG);
  assert_int_equal(tg_perf_group_read_parse(polled, 7, v, 4, &n), -EBADMSG);
}

static void unknown_layouts_are_not_guessed(void **state) {
  (void)state;
  tg_perf_record_t r;
  /* A sample_type bit whose layout the parser does not know. */
  tg_perf_layout_t other = golden_layout;
  other.sample_type |= 1u << 3;
  assert_int_equal(tg_perf_record_parse(golden_sample, sizeof(golden_sample),
                                        &other, &r),
                   -ENOTSUP);
  /* A record type it does not read: its header only. */
  const uint8_t exit_rec[] = {GHDR(4, 0, 16), G64(0)};
  assert_int_equal(tg_perf_record_parse(exit_rec, sizeof(exit_rec),
                                        &golden_layout, &r),
                   0);
  assert_int_equal(r.type, TG_PERF_RECORD_EXIT);
  assert_int_equal(tg_perf_record_parse(exit_rec, 7, &golden_layout, &r),
                   -EBADMSG);
}

static void ring_records_wrap_the_end(void **state) {
  (void)state;
  /* A 128-byte ring: a LOST record (48) from offset 96 wraps the end. */
  uint8_t data[128];
  memset(data, 0xaa, sizeof(data));
  memcpy(data + 96, golden_lost, 32);
  memcpy(data, golden_lost + 32, 16);
  /* Then a COMM (48) at 16. */
  memcpy(data + 16, golden_comm, sizeof(golden_comm));
  uint8_t *scratch = malloc(65536);
  assert_non_null(scratch);
  tg_perf_ring_view_t v = {data, sizeof(data), 96 + 48 + 48};
  uint64_t tail = 96;
  const uint8_t *rec;
  size_t len;
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len), 1);
  assert_int_equal(len, sizeof(golden_lost));
  assert_ptr_equal(rec, scratch);
  assert_memory_equal(rec, golden_lost, len);
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len), 1);
  assert_ptr_equal(rec, data + 16);
  assert_int_equal(len, sizeof(golden_comm));
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len), 0);
  assert_int_equal(tail, v.head);

  /* A header whose size runs past head: the rest is skipped. */
  v.head = tail + 24;
  memcpy(data + (tail & 127), golden_lost, 8);
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len),
                   -EBADMSG);
  assert_int_equal(tail, v.head);
  /* A size below the header's. */
  data[tail & 127] = 2;
  data[(tail & 127) + 6] = 4;
  data[(tail & 127) + 7] = 0;
  v.head = tail + 16;
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len),
                   -EBADMSG);
  /* More bytes claimed than the ring holds. */
  v.head = tail + 1024;
  assert_int_equal(tg_perf_ring_next(&v, &tail, scratch, 65536, &rec, &len),
                   -EBADMSG);
  free(scratch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sample_has_every_field),
      cmocka_unit_test(every_truncation_is_refused),
      cmocka_unit_test(a_callchain_longer_than_the_record_is_refused),
      cmocka_unit_test(lost_throttle_and_comm),
      cmocka_unit_test(mmap2_in_both_layouts),
      cmocka_unit_test(user_registers_and_stack),
      cmocka_unit_test(read_value_as_timebase_count),
      cmocka_unit_test(group_read_has_every_member),
      cmocka_unit_test(unknown_layouts_are_not_guessed),
      cmocka_unit_test(ring_records_wrap_the_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
