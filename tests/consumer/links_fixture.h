/* A merged trace built in memory by the merge unit in its joined mode,
 * from packets two hosts send (app_packets.h; tests of merge_links.h
 * and reclock.h).
 * Header-only: each test includes it once and defines HOSTS and
 * SELF_BOOT (the collector's BOOTTIME at the head) first. */
#ifndef TRACEGATE_TESTS_CONSUMER_LINKS_FIXTURE_H
#define TRACEGATE_TESTS_CONSUMER_LINKS_FIXTURE_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"
#include "app_packets.h"

/* --- the merged trace in memory ------------------------------------------------- */

typedef struct fixture {
  tg_buf_t out; /* a Trace: each write one Trace.packet */
  tg_merge_t m;
  tg_merge_host_t hosts[HOSTS];
} fixture_t;

static int setup(void **state) {
  static fixture_t fx;
  memset(&fx, 0, sizeof(fx));
  tg_buf_init(&fx.out, 0);
  tg_merge_init(&fx.m, ap_collect, &fx.out);
  tg_merge_set_app_tracks(&fx.m, TG_MERGE_APP_JOINED);
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_init(&fx.hosts[i], i);
  *state = &fx;
  return 0;
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  for (size_t i = 0; i < HOSTS; i++) tg_merge_host_free(&fx->hosts[i]);
  tg_merge_free(&fx->m);
  tg_buf_free(&fx->out);
  return 0;
}

/* The collector's head. */
static void head(fixture_t *fx) {
  tg_merge_self_t self;
  memset(&self, 0, sizeof(self));
  snprintf(self.hostname, sizeof(self.hostname), "collector");
  for (int c = 0; c < TG_CLK_N; c++) self.clocks[c] = SELF_BOOT + (uint64_t)c;
  assert_int_equal(tg_merge_head(&fx->m, &self), 0);
}

/* Host |i|'s preamble named |name|: with a clock estimate when |clocked|,
 * the host's clocks |offset| ns ahead of the collector's as the estimate
 * says, from a round trip of |rtt| ns. */
static void lf_preamble(fixture_t *fx, size_t i, const char *name, bool clocked,
                        int64_t offset, uint64_t rtt) {
  tg_fleet_host_report_t h;
  memset(&h, 0, sizeof(h));
  if (clocked) {
    tg_clock_sample_t *s = &h.clock.best;
    for (int c = 0; c < TG_CLK_N; c++) {
      s->before[c] = SELF_BOOT + (uint64_t)c * 1000;
      s->after[c] = s->before[c] + rtt;
      s->remote[c] = s->before[c] + rtt / 2 + (uint64_t)offset;
    }
    h.clock.first = h.clock.best;
    h.clock.estimates = 1;
  }
  assert_int_equal(tg_merge_host_preamble(&fx->m, &fx->hosts[i], &h, name), 0);
}

/* --- packets a host sends ----------------------------------------------------------- */

typedef struct pk {
  uint8_t buf[1024];
  tg_pbw_t w;
} pk_t;

static tg_pbw_t *pk_begin(pk_t *k) {
  tg_pbw_init(&k->w, k->buf, sizeof(k->buf), NULL, NULL);
  return &k->w;
}

/* Host |i| sends the packet of |k| on its sequence |seq|: the merge takes
 * it (writes it, or leaves it out and counts it). */
static void pk_send(fixture_t *fx, size_t i, pk_t *k, uint32_t seq) {
  tg_pbw_append_varint(&k->w, 10, seq);
  assert_int_equal(tg_pbw_error(&k->w), 0);
  assert_int_equal(tg_merge_packet(&fx->m, &fx->hosts[i], k->buf,
                                   (size_t)tg_pbw_written(&k->w)),
                   0);
}

static void send_process(fixture_t *fx, size_t i, uint32_t seq, uint64_t uuid,
                         int32_t pid, const char *name) {
  pk_t k;
  ap_process(pk_begin(&k), uuid, pid, name);
  pk_send(fx, i, &k, seq);
}

static void send_thread(fixture_t *fx, size_t i, uint32_t seq, uint64_t uuid,
                        uint64_t parent, int32_t pid, int32_t tid) {
  pk_t k;
  ap_thread(pk_begin(&k), uuid, parent, pid, tid);
  pk_send(fx, i, &k, seq);
}

static void send_event(fixture_t *fx, size_t i, uint32_t seq, uint64_t ts,
                       int type, uint64_t uuid, const char *name,
                       int64_t flow) {
  pk_t k;
  ap_event(pk_begin(&k), ts, type, uuid, name, flow);
  pk_send(fx, i, &k, seq);
}

/* The sequence-scoped clock 64 (incremental) as Perfetto's SDK and the
 * agent set it up: its defaults, then its snapshot at |boot|. */
static void send_clock64(fixture_t *fx, size_t i, uint32_t seq, uint64_t track,
                         uint64_t boot) {
  pk_t k;
  ap_clock64_defaults(pk_begin(&k), track);
  pk_send(fx, i, &k, seq);
  ap_clock64_snapshot(pk_begin(&k), boot);
  pk_send(fx, i, &k, seq);
}

/* Host |i|'s own process |pid| named "daemon" at |ts| (host data). */
static void send_daemon(fixture_t *fx, size_t i, uint32_t seq, int32_t pid,
                        uint64_t ts) {
  pk_t k;
  ap_process_tree(pk_begin(&k), pid, "daemon", ts);
  pk_send(fx, i, &k, seq);
}

/* The last value of field |id| of the message |p| (|n| bytes): true with
 * *f filled when it has one. */
static bool field(const uint8_t *p, size_t n, uint32_t id, tg_pb_field_t *f) {
  tg_pb_reader_t r;
  tg_pb_field_t x;
  bool found = false;
  tg_pb_reader_init(&r, p, n);
  while (tg_pb_reader_next(&r, &x) == 1)
    if (x.id == id) {
      *f = x;
      found = true;
    }
  return found;
}

#endif /* TRACEGATE_TESTS_CONSUMER_LINKS_FIXTURE_H */
