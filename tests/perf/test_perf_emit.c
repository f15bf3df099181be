/* The linux.perf packets (agent/perf/perf_emit.h) against golden bytes:
 * the defaults packet, a sample with its interned data (build id, path
 * components, mapping, function names, frames, callstack root first), the
 * same sample again with nothing interned, everything again after a reset,
 * the empty callstack's fixed iid, kernel frames by name with no address
 * (distinct functions distinct frames), ring loss, a skipped sample and the
 * guardrail's stop; a tracepoint timebase with followers and a process
 * shard in the defaults, follower counts in a sample, a polled reading.
 * Nested sizes are the writer's 4-byte redundant varints (SZ). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/perf/perf_emit.h"

#define SZ(n)                                                       \
  (uint8_t)(((n)&0x7f) | 0x80), (uint8_t)((((n) >> 7) & 0x7f) | 0x80), \
      (uint8_t)((((n) >> 14) & 0x7f) | 0x80), (uint8_t)((n) >> 21)

typedef struct out {
  uint8_t buf[4096];
  tg_pbw_t w;
} out_t;

static void out_init(out_t *o) { tg_pbw_init(&o->w, o->buf, sizeof(o->buf), NULL, NULL); }

static void expect(out_t *o, const uint8_t *want, size_t n) {
  assert_int_equal(tg_pbw_error(&o->w), 0);
  size_t got = (size_t)tg_pbw_written(&o->w);
  if (got != n || memcmp(o->buf, want, n) != 0) {
    for (size_t i = 0; i < got; i++) fprintf(stderr, "%02x ", o->buf[i]);
    fprintf(stderr, "\n");
  }
  assert_int_equal(got, n);
  assert_memory_equal(o->buf, want, n);
}

static void defaults_packet(void **state) {
  (void)state;
  out_t o;
  out_init(&o);
  tg_perf_timebase_desc_t tb = {.frequency = 100, .counter = 1,
                                .builtin_clock = 6};
  tg_perf_emit_defaults(&o.w, 1000, &tb);
  static const uint8_t want[] = {
      0x40, 0xe8, 0x07,             /* timestamp 1000 */
      0x68, 0x01,                   /* SEQ_INCREMENTAL_STATE_CLEARED */
      0xda, 0x03, SZ(17),           /* trace_packet_defaults */
      0xd0, 0x03, 0x06,             /*   timestamp_clock_id BOOTTIME */
      0x62, SZ(9),                  /*   perf_sample_defaults */
      0x0a, SZ(4),                  /*     timebase */
      0x10, 0x64, 0x20, 0x01,       /*       frequency 100, SW_CPU_CLOCK */
  };
  expect(&o, want, sizeof(want));

  /* A period, a name and a clock. */
  out_init(&o);
  tb = (tg_perf_timebase_desc_t){.period = 5, .counter = 3, .name = "tb",
                                 .perf_clock = 4, .builtin_clock = 6};
  tg_perf_emit_defaults(&o.w, 1, &tb);
  static const uint8_t want2[] = {
      0x40, 0x01, 0x68, 0x01, 0xda, 0x03, SZ(23), 0xd0, 0x03, 0x06,
      0x62, SZ(15), 0x0a, SZ(10),
      0x08, 0x05, 0x20, 0x03, 0x52, 0x02, 't', 'b', 0x58, 0x04,
  };
  expect(&o, want2, sizeof(want2));
}

static const uint8_t build_id[] = {0xab, 0xcd};
static const tg_perf_emit_mapping_t map_w = {
    .start = 0x1000, .end = 0x2000, .build_id = build_id,
    .build_id_len = 2, .path = "/bin/w"};
static const tg_perf_emit_frame_t frames[] = {
    {&map_w, 0x10, "main", 0},   /* root */
    {&map_w, 0x20, "spinX", 4},  /* leaf: "spin", a name not NUL-ended */
};
static const tg_perf_emit_sample_t sample = {
    .ts = 2000, .cpu = 1, .pid = 7, .tid = 8, .cpu_mode = 2,
    .timebase_count = 10000, .frames = frames, .n_frames = 2};

static const uint8_t sample_full[] = {
    0x40, 0xd0, 0x0f,                 /* timestamp 2000 */
    0x68, 0x02,                       /* SEQ_NEEDS_INCREMENTAL_STATE */
    0x62, SZ(125),                    /* interned_data */
    0x82, 0x01, SZ(6), 0x08, 0x01, 0x12, 0x02, 0xab, 0xcd, /* build_ids */
    0x8a, 0x01, SZ(7), 0x08, 0x01, 0x12, 0x03, 'b', 'i', 'n', /* paths */
    0x8a, 0x01, SZ(5), 0x08, 0x02, 0x12, 0x01, 'w',
    0x9a, 0x01, SZ(20),               /* mappings */
    0x08, 0x01, 0x10, 0x01, 0x18, 0x00, 0x20, 0x80, 0x20, 0x28, 0x80, 0x40,
    0x30, 0x00, 0x38, 0x01, 0x38, 0x02, 0x40, 0x00,
    0x2a, SZ(8), 0x08, 0x01, 0x12, 0x04, 'm', 'a', 'i', 'n', /* functions */
    0x32, SZ(8), 0x08, 0x01, 0x10, 0x01, 0x18, 0x01, 0x20, 0x10, /* frames */
    0x2a, SZ(8), 0x08, 0x02, 0x12, 0x04, 's', 'p', 'i', 'n',
    0x32, SZ(8), 0x08, 0x02, 0x10, 0x02, 0x18, 0x01, 0x20, 0x20,
    0x3a, SZ(6), 0x08, 0x02, 0x10, 0x01, 0x10, 0x02, /* callstack, root first */
    0x92, 0x04, SZ(13),               /* perf_sample */
    0x08, 0x01, 0x10, 0x07, 0x18, 0x08, 0x20, 0x02, 0x28, 0x02,
    0x30, 0x90, 0x4e,
};

static const uint8_t sample_again[] = {
    0x40, 0xd0, 0x0f, 0x68, 0x02, 0x92, 0x04, SZ(13),
    0x08, 0x01, 0x10, 0x07, 0x18, 0x08, 0x20, 0x02, 0x28, 0x02,
    0x30, 0x90, 0x4e,
};

static void a_sample_interns_once_per_clear(void **state) {
  (void)state;
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  out_t o;
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &sample), 0);
  expect(&o, sample_full, sizeof(sample_full));
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &sample), 0);
  expect(&o, sample_again, sizeof(sample_again));
  /* After a clear, everything again with the same iids. */
  tg_perf_emitter_reset(e);
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &sample), 0);
  expect(&o, sample_full, sizeof(sample_full));
  assert_false(tg_perf_emitter_full(e));
  tg_perf_emitter_free(e);
}

static void the_empty_callstack_is_iid_1(void **state) {
  (void)state;
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  out_t o;
  out_init(&o);
  tg_perf_emit_sample_t s = sample;
  s.n_frames = 0;
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &s), 0);
  static const uint8_t want[] = {
      0x40, 0xd0, 0x0f, 0x68, 0x02,
      0x62, SZ(7), 0x3a, SZ(2), 0x08, 0x01, /* callstack 1, no frames */
      0x92, 0x04, SZ(13),
      0x08, 0x01, 0x10, 0x07, 0x18, 0x08, 0x20, 0x01, 0x28, 0x02,
      0x30, 0x90, 0x4e,
  };
  expect(&o, want, sizeof(want));
  /* Once only; and a real callstack after it still starts at 2. */
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &s), 0);
  assert_int_equal(tg_pbw_written(&o.w), sizeof(want) - 12);
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &sample), 0);
  expect(&o, sample_full, sizeof(sample_full));
  tg_perf_emitter_free(e);
}

/* Kernel frames as tracegate-perf makes them (perf_ds.c): a name and no
 * address (rel_pc 0) under a mapping of no range. Two functions stay two
 * frames, interned by name; an unnamed one (no kallsyms) is a third, with
 * no function name written. */
static const tg_perf_emit_mapping_t map_k = {.path = "[kernel.kallsyms]"};
static const tg_perf_emit_frame_t kframes[] = {
    {&map_k, 0, "do_syscall_64", 0},
    {&map_k, 0, "getppid", 0},
    {&map_k, 0, NULL, 0},
};

static void kernel_frames_are_names_without_addresses(void **state) {
  (void)state;
  tg_perf_emit_sample_t s = sample;
  s.frames = kframes;
  s.n_frames = 3;
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  out_t o;
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &s), 0);
  static const uint8_t want[] = {
      0x40, 0xd0, 0x0f, 0x68, 0x02,
      0x62, SZ(135),                  /* interned_data */
      0x8a, 0x01, SZ(21), 0x08, 0x01, 0x12, 0x11, /* path, one part */
      '[', 'k', 'e', 'r', 'n', 'e', 'l', '.', 'k', 'a', 'l', 'l', 's', 'y',
      'm', 's', ']',
      0x9a, 0x01, SZ(14),             /* the mapping: every number 0 */
      0x08, 0x01, 0x18, 0x00, 0x20, 0x00, 0x28, 0x00, 0x30, 0x00,
      0x38, 0x01, 0x40, 0x00,
      0x2a, SZ(17), 0x08, 0x01, 0x12, 0x0d, /* function 1 */
      'd', 'o', '_', 's', 'y', 's', 'c', 'a', 'l', 'l', '_', '6', '4',
      0x32, SZ(8), 0x08, 0x01, 0x10, 0x01, 0x18, 0x01, 0x20, 0x00, /* frame 1 */
      0x2a, SZ(11), 0x08, 0x02, 0x12, 0x07, 'g', 'e', 't', 'p', 'p', 'i', 'd',
      0x32, SZ(8), 0x08, 0x02, 0x10, 0x02, 0x18, 0x01, 0x20, 0x00, /* frame 2 */
      0x32, SZ(6), 0x08, 0x03, 0x18, 0x01, 0x20, 0x00, /* frame 3: no name */
      0x3a, SZ(8), 0x08, 0x02, 0x10, 0x01, 0x10, 0x02, 0x10, 0x03,
      0x92, 0x04, SZ(13),
      0x08, 0x01, 0x10, 0x07, 0x18, 0x08, 0x20, 0x02, 0x28, 0x02,
      0x30, 0x90, 0x4e,
  };
  expect(&o, want, sizeof(want));
  tg_perf_emitter_free(e);
}

static void loss_and_skips(void **state) {
  (void)state;
  out_t o;
  out_init(&o);
  tg_perf_emit_lost(&o.w, 3, 1, 42);
  static const uint8_t lost[] = {0x40, 0x03, 0x68, 0x02, 0x92, 0x04, SZ(5),
                                 0x08, 0x01, 0x88, 0x01, 0x2a};
  expect(&o, lost, sizeof(lost));
  out_init(&o);
  /* The counts stay with a skipped sample (traced_perf's
   * EmitSkippedSample); its frames are not written. */
  static const uint64_t follow[] = {9};
  tg_perf_emit_sample_t sk = {.ts = 3, .cpu = 0, .pid = 7, .tid = 8,
                              .cpu_mode = 2, .timebase_count = 5,
                              .follower_counts = follow,
                              .n_follower_counts = 1};
  tg_perf_emit_skipped(&o.w, &sk, TG_PERF_SKIP_NOT_IN_SCOPE);
  /* perf_sample { cpu pid tid cpu_mode timebase_count follower_counts
   * sample_skipped_reason (18) } */
  static const uint8_t skipped[] = {0x40, 0x03, 0x68, 0x02, 0x92, 0x04,
                                    SZ(15), 0x08, 0x00, 0x10, 0x07, 0x18,
                                    0x08, 0x28, 0x02, 0x30, 0x05, 0x38,
                                    0x09, 0x90, 0x01, 0x04};
  expect(&o, skipped, sizeof(skipped));
  out_init(&o);
  tg_perf_emit_guardrail_stop(&o.w, 3);
  /* perf_sample { producer_event (19) { source_stop_reason: GUARDRAIL } } */
  static const uint8_t guardrail[] = {0x40, 0x03, 0x68, 0x02, 0x92, 0x04,
                                      SZ(8), 0x9a, 0x01, SZ(2), 0x08, 0x01};
  expect(&o, guardrail, sizeof(guardrail));
}

static void followers_tracepoints_and_shards(void **state) {
  (void)state;
  out_t o;
  out_init(&o);
  tg_perf_event_t tp = {.kind = TG_PERF_EVENT_TRACEPOINT, .tp_name = "s:x",
                        .tp_filter = "f"};
  tg_perf_event_t fl[2] = {
      {.kind = TG_PERF_EVENT_COUNTER, .counter = 4},
      {.kind = TG_PERF_EVENT_RAW, .attr_type = 1, .attr_config = 3,
       .name = "r"},
  };
  tg_perf_timebase_desc_t tb = {.period = 1, .builtin_clock = 4,
                                .event = &tp, .followers = fl,
                                .n_followers = 2, .shard_count = 2,
                                .chosen_shard = 1};
  tg_perf_emit_defaults(&o.w, 1, &tb);
  static const uint8_t want[] = {
      0x40, 0x01, 0x68, 0x01,
      0xda, 0x03, SZ(60),             /* trace_packet_defaults */
      0xd0, 0x03, 0x04,               /*   MONOTONIC_RAW */
      0x62, SZ(52),                   /*   perf_sample_defaults */
      0x0a, SZ(15), 0x08, 0x01,       /*     timebase: period 1 */
      0x1a, SZ(8),                    /*       tracepoint */
      0x0a, 0x03, 's', ':', 'x', 0x12, 0x01, 'f',
      0x10, 0x02, 0x18, 0x01,         /*     shard count 2, chosen 1 */
      0x22, SZ(2), 0x08, 0x04,        /*     follower: context switches */
      0x22, SZ(16), 0x1a, SZ(8),      /*     follower: raw 1/3, "r" */
      0x08, 0x01, 0x10, 0x03, 0x18, 0x00, 0x20, 0x00, 0x22, 0x01, 'r',
  };
  expect(&o, want, sizeof(want));

  /* A sample's follower counts, repeated (not packed). */
  tg_perf_emitter_t *e = tg_perf_emitter_new(0);
  assert_non_null(e);
  uint64_t counts[] = {5, 6};
  tg_perf_emit_sample_t smp = sample;
  smp.follower_counts = counts;
  smp.n_follower_counts = 2;
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &sample), 0);
  out_init(&o);
  assert_int_equal(tg_perf_emit_sample(e, &o.w, &smp), 0);
  static const uint8_t again[] = {
      0x40, 0xd0, 0x0f, 0x68, 0x02, 0x92, 0x04, SZ(17),
      0x08, 0x01, 0x10, 0x07, 0x18, 0x08, 0x20, 0x02, 0x28, 0x02,
      0x30, 0x90, 0x4e, 0x38, 0x05, 0x38, 0x06,
  };
  expect(&o, again, sizeof(again));
  tg_perf_emitter_free(e);

  /* A polled reading: no process, no callstack. */
  out_init(&o);
  tg_perf_emit_counts(&o.w, 5, 1, 300, counts, 2);
  static const uint8_t polled[] = {0x40, 0x05, 0x68, 0x02, 0x92, 0x04, SZ(9),
                                   0x08, 0x01, 0x30, 0xac, 0x02,
                                   0x38, 0x05, 0x38, 0x06};
  expect(&o, polled, sizeof(polled));

  /* Polling in the defaults: poll_period_ms, not a frequency. */
  out_init(&o);
  tg_perf_timebase_desc_t pb = {.poll_period_ms = 100, .frequency = 10,
                                .counter = 1, .builtin_clock = 6};
  tg_perf_emit_defaults(&o.w, 1, &pb);
  static const uint8_t pwant[] = {
      0x40, 0x01, 0x68, 0x01, 0xda, 0x03, SZ(17), 0xd0, 0x03, 0x06,
      0x62, SZ(9), 0x0a, SZ(4), 0x30, 0x64, 0x20, 0x01,
  };
  expect(&o, pwant, sizeof(pwant));
}

static void the_budget_says_when_to_clear(void **state) {
  (void)state;
  tg_perf_emitter_t *e = tg_perf_emitter_new(4096);
  assert_non_null(e);
  static uint8_t big[1 << 16];
  tg_perf_emit_frame_t f = {&map_w, 0, NULL, 0};
  tg_perf_emit_sample_t s = sample;
  s.frames = &f;
  s.n_frames = 1;
  int i = 0;
  while (!tg_perf_emitter_full(e)) {
    assert_true(i < 1000);
    tg_pbw_t w;
    tg_pbw_init(&w, big, sizeof(big), NULL, NULL);
    f.rel_pc = (uint64_t)i++;
    assert_int_equal(tg_perf_emit_sample(e, &w, &s), 0);
  }
  assert_true(i > 10);
  tg_perf_emitter_reset(e);
  assert_false(tg_perf_emitter_full(e));
  tg_perf_emitter_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_packet),
      cmocka_unit_test(a_sample_interns_once_per_clear),
      cmocka_unit_test(the_empty_callstack_is_iid_1),
      cmocka_unit_test(kernel_frames_are_names_without_addresses),
      cmocka_unit_test(loss_and_skips),
      cmocka_unit_test(followers_tracepoints_and_shards),
      cmocka_unit_test(the_budget_says_when_to_clear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
