/* The time a host's ring data covers (collector/daemon/data_window.h),
 * from packets built here as the service sends them: absolute BOOTTIME,
 * the agent's track events (deltas on a sequence's incremental clock),
 * the service's own packets, a ring that wrapped past a sequence's start,
 * other clocks and the bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "collector/daemon/data_window.h"
#include "tracegate/pb_wire.h"

#define BOOT0 5000000000000ull /* 5000 s after the boot */

/* A packet under construction. */
typedef struct pkt {
  uint8_t b[256];
  size_t n;
} pkt_t;

static void varint(pkt_t *p, uint32_t field, uint64_t v) {
  uint8_t *e = tg_pb_write_varint(p->b + p->n, TG_PB_TAG(field, TG_PB_WT_VARINT));
  e = tg_pb_write_varint(e, v);
  p->n = (size_t)(e - p->b);
}

static void nested(pkt_t *p, uint32_t field, const pkt_t *in) {
  uint8_t *e = tg_pb_write_varint(p->b + p->n, TG_PB_TAG(field, TG_PB_WT_LEN));
  e = tg_pb_write_varint(e, in->n);
  memcpy(e, in->b, in->n);
  p->n = (size_t)(e - p->b) + in->n;
}

/* A packet of sequence |seq| at |ts| (0: no timestamp). */
static pkt_t at(uint32_t seq, uint64_t ts) {
  pkt_t p = {.n = 0};
  if (ts) varint(&p, 8, ts);
  varint(&p, 10, seq);
  return p;
}

static void feed(coll_window_t *w, const pkt_t *p) {
  assert_int_equal(coll_window_packet(w, p->b, p->n), 0);
}

/* As the agent starts a track event sequence: cleared, defaults on the
 * incremental clock 64, then a ClockSnapshot at |t| (BOOTTIME and clock
 * 64 read the same) whose own time is BOOTTIME, said explicitly. */
static void track_event_start(coll_window_t *w, uint32_t seq, uint64_t t) {
  pkt_t d = {.n = 0}, defaults = {.n = 0};
  varint(&defaults, 58, 64);
  d = at(seq, 0);
  varint(&d, 13, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
  nested(&d, 59, &defaults);
  feed(w, &d);
  pkt_t boot = {.n = 0}, inc = {.n = 0}, snap = {.n = 0};
  varint(&boot, 1, 6);
  varint(&boot, 2, t);
  varint(&inc, 1, 64);
  varint(&inc, 2, t);
  varint(&inc, 3, 1);
  nested(&snap, 1, &boot);
  nested(&snap, 1, &inc);
  pkt_t s = at(seq, t);
  varint(&s, 58, 6);
  nested(&s, 6, &snap);
  feed(w, &s);
}

/* An event |delta| ns after the sequence's previous one. */
static void track_event(coll_window_t *w, uint32_t seq, uint64_t delta) {
  pkt_t e = at(seq, delta);
  varint(&e, 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
  feed(w, &e);
}

static void absolute_boottime_packets(void **state) {
  (void)state;
  coll_window_t w;
  coll_window_init(&w);
  pkt_t p = at(2, BOOT0 + 30);
  feed(&w, &p);
  p = at(3, BOOT0 + 10);
  feed(&w, &p);
  p = at(2, 0); /* no time */
  feed(&w, &p);
  assert_int_equal(w.first_ns, BOOT0 + 10);
  assert_int_equal(w.last_ns, BOOT0 + 30);
  assert_int_equal(w.packets, 2);
  coll_window_free(&w);
}

/* The deltas of track events are times on their sequence's clock, not
 * BOOTTIME values just after the boot. */
static void track_event_deltas_are_summed_from_the_snapshot(void **state) {
  (void)state;
  coll_window_t w;
  coll_window_init(&w);
  track_event_start(&w, 7, BOOT0);
  track_event(&w, 7, 1000);
  track_event(&w, 7, 250);
  assert_int_equal(w.first_ns, BOOT0);
  assert_int_equal(w.last_ns, BOOT0 + 1250);
  /* A second sequence, later, with its own clock. */
  track_event_start(&w, 8, BOOT0 + 5000);
  track_event(&w, 8, 7);
  track_event(&w, 7, 50); /* the first sequence goes on where it was */
  assert_int_equal(w.first_ns, BOOT0);
  assert_int_equal(w.last_ns, BOOT0 + 5007);
  assert_int_equal(w.packets, 6);
  coll_window_free(&w);
}

/* A ring that wrapped past a sequence's start: its events need state the
 * read never had, and are left out as trace processor leaves them out. */
static void events_of_a_sequence_never_cleared_do_not_count(void **state) {
  (void)state;
  coll_window_t w;
  coll_window_init(&w);
  track_event(&w, 9, 12);
  track_event(&w, 9, 30);
  assert_int_equal(w.first_ns, 0);
  assert_int_equal(w.last_ns, 0);
  /* Cleared again later: counted from there. */
  track_event_start(&w, 9, BOOT0 + 100);
  track_event(&w, 9, 5);
  assert_int_equal(w.first_ns, BOOT0 + 100);
  assert_int_equal(w.last_ns, BOOT0 + 105);
  coll_window_free(&w);
}

/* The clone's own packets (sequence 1) come at the clone, not with the
 * data; clocks the window cannot place are left out. */
static void service_packets_and_other_clocks_do_not_count(void **state) {
  (void)state;
  coll_window_t w;
  coll_window_init(&w);
  pkt_t p = at(1, BOOT0 + 999999);
  feed(&w, &p);
  p = at(4, BOOT0 + 1);
  varint(&p, 58, 3); /* MONOTONIC */
  feed(&w, &p);
  p = at(4, 20);
  varint(&p, 58, 70); /* a sequence clock never snapshot */
  feed(&w, &p);
  assert_int_equal(w.packets, 0);
  assert_int_equal(w.first_ns, 0);
  p = at(4, BOOT0 + 2);
  feed(&w, &p);
  assert_int_equal(w.first_ns, BOOT0 + 2);
  assert_int_equal(w.last_ns, BOOT0 + 2);
  coll_window_free(&w);
}

/* Bytes that do not decode count for nothing and harm nothing; sequences
 * past the bound are not followed. */
static void garbage_and_the_bound_of_sequences(void **state) {
  (void)state;
  coll_window_t w;
  coll_window_init(&w);
  const uint8_t bad[] = {0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  assert_int_equal(coll_window_packet(&w, bad, sizeof(bad)), 0);
  assert_int_equal(coll_window_packet(&w, bad, 0), 0);
  for (uint32_t s = 2; s < 2 + COLL_WINDOW_MAX_SEQS; s++) {
    pkt_t p = at(s, BOOT0 + s);
    varint(&p, 13, 1); /* cleared: the sequence has state */
    feed(&w, &p);
  }
  assert_int_equal(w.n_seqs, COLL_WINDOW_MAX_SEQS);
  /* Past the bound its state is not kept: its track events need it. */
  track_event_start(&w, 2 + COLL_WINDOW_MAX_SEQS, BOOT0 + 1);
  track_event(&w, 2 + COLL_WINDOW_MAX_SEQS, 1);
  assert_int_equal(w.n_seqs, COLL_WINDOW_MAX_SEQS);
  assert_int_equal(w.first_ns, BOOT0 + 1); /* its snapshot's own time */
  assert_int_equal(w.last_ns, BOOT0 + 1 + COLL_WINDOW_MAX_SEQS);
  assert_int_equal(w.packets, COLL_WINDOW_MAX_SEQS + 1);
  coll_window_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(absolute_boottime_packets),
      cmocka_unit_test(track_event_deltas_are_summed_from_the_snapshot),
      cmocka_unit_test(events_of_a_sequence_never_cleared_do_not_count),
      cmocka_unit_test(service_packets_and_other_clocks_do_not_count),
      cmocka_unit_test(garbage_and_the_bound_of_sequences),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
