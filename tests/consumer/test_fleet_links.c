/* The merge's joined mode (consumer/fleet/merge_links.h; docs/merge.md,
 * "Links across hosts"): a host's app sequence goes to machine 0 with no
 * machine id and its own moved sequence id, its times moved onto the
 * collector's clock by the host's estimate, its pids remapped and its
 * process names prefixed with the host's name; what another host owns,
 * and fields not allowed there, are left out and counted; a host
 * without a clock estimate keeps its app sequences; the MACHINES mode
 * writes what it always wrote. With Perfetto's binaries (PERFETTO_BIN),
 * trace processor joins 10,000 flows from one host's client slices to
 * another's server slices, each server slice after its client one began,
 * while the hosts' other data stays on their machines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/merge_problem.h"
#include "test_proc.h"
#include "tracegate/pb_wire.h"
#include "tracegate/pb_writer.h"

#define HOSTS 2
#define MS 1000000ull
/* The collector's BOOTTIME at the head; the hosts' clocks minus it. */
#define SELF_BOOT (100000 * MS)
static const int64_t host_offset[HOSTS] = {2 * MS, 7 * MS};

#include "links_fixture.h"

/* The collector's head, and host |i|'s preamble named |name|, with its
 * clock estimate when |clocked| (a round trip of 100 us). */
static void preamble(fixture_t *fx, size_t i, const char *name, bool clocked) {
  lf_preamble(fx, i, name, clocked, host_offset[i], 100000);
}

/* --- reading what the merge wrote ------------------------------------------------- */

/* The |k|th packet (from 0) written after |from| bytes of the output. */
static tg_pb_field_t written(const fixture_t *fx, size_t from, size_t k) {
  tg_pb_reader_t r;
  tg_pb_field_t f;
  tg_pb_reader_init(&r, tg_buf_begin(&fx->out) + from,
                    tg_buf_size(&fx->out) - from);
  for (size_t i = 0; i <= k; i++) assert_int_equal(tg_pb_reader_next(&r, &f), 1);
  return f;
}

static uint64_t value_of(const tg_pb_field_t *pkt, uint32_t id) {
  tg_pb_field_t f;
  assert_true(field(pkt->data, pkt->size, id, &f));
  return f.value;
}

static bool has(const tg_pb_field_t *pkt, uint32_t id) {
  tg_pb_field_t f;
  return field(pkt->data, pkt->size, id, &f);
}

/* --- the unit ------------------------------------------------------------------------ */

/* A process track and an event: on machine 0 (no machine id), the
 * host's sequence id, the time moved by the host's offset, the pid
 * remapped above pid_max and the name "HOST/name". */
static void app_packets_go_to_machine_0_moved(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  preamble(fx, 1, "beta", true);
  size_t from = tg_buf_size(&fx->out);
  send_process(fx, 1, 7, 0xB0, 1234, "server");
  send_event(fx, 1, 7, 50000 * MS, SLICE_BEGIN, 0xB0, "s", 0);
  tg_pb_field_t d = written(fx, from, 0), e = written(fx, from, 1);
  uint32_t seq = (2u << TG_MERGE_SEQ_SHIFT) | 7;
  assert_false(has(&d, 98));
  assert_false(has(&e, 98));
  assert_int_equal(value_of(&d, 10), seq);
  assert_int_equal(value_of(&e, 10), seq);
  assert_int_equal(value_of(&e, 8), 50000 * MS - (uint64_t)host_offset[1]);
  tg_pb_field_t td, pd, f;
  assert_true(field(d.data, d.size, 60, &td));
  assert_true(field(td.data, td.size, 3, &pd));
  assert_true(field(pd.data, pd.size, 1, &f));
  assert_int_equal(f.value, TG_MERGE_PID_BASE);
  assert_true(field(pd.data, pd.size, 6, &f));
  assert_int_equal(f.size, strlen("beta/server"));
  assert_memory_equal(f.data, "beta/server", f.size);
  /* Host alpha's pid 1234 is another process. */
  from = tg_buf_size(&fx->out);
  send_process(fx, 0, 7, 0xA0, 1234, "client");
  d = written(fx, from, 0);
  assert_int_equal(value_of(&d, 10), (1u << TG_MERGE_SEQ_SHIFT) | 7);
  assert_true(field(d.data, d.size, 60, &td));
  assert_true(field(td.data, td.size, 3, &pd));
  assert_true(field(pd.data, pd.size, 1, &f));
  assert_int_equal(f.value, TG_MERGE_PID_BASE + 1);
  /* A thread of the same pid: the same process. */
  from = tg_buf_size(&fx->out);
  send_thread(fx, 1, 7, 0xB1, 0xB0, 1234, 1240);
  d = written(fx, from, 0);
  assert_true(field(d.data, d.size, 60, &td));
  assert_true(field(td.data, td.size, 4, &pd));
  assert_true(field(pd.data, pd.size, 1, &f));
  assert_int_equal(f.value, TG_MERGE_PID_BASE);
  assert_true(field(pd.data, pd.size, 2, &f));
  assert_int_equal(f.value, TG_MERGE_PID_BASE + 2);
  assert_int_equal(fx->hosts[1].joined, 3);
  assert_int_equal(fx->hosts[1].malformed, 0);
}

/* The sequence-scoped clock: its snapshot's BOOTTIME moved, its own
 * reading kept, the events' deltas untouched. */
static void sequence_clock_snapshots_are_moved(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  size_t from = tg_buf_size(&fx->out);
  send_process(fx, 0, 3, 0xA0, 99, "app");
  send_clock64(fx, 0, 3, 0xA0, 40000 * MS);
  send_event(fx, 0, 3, 1000, SLICE_BEGIN, 0, "x", 0);
  tg_pb_field_t snap = written(fx, from, 2), cs, c, f;
  assert_false(has(&snap, 98));
  /* The packet's own time (on BOOTTIME) moved, appended. */
  assert_int_equal(value_of(&snap, 8), 40000 * MS - (uint64_t)host_offset[0]);
  assert_true(field(snap.data, snap.size, 6, &cs));
  tg_pb_reader_t r;
  tg_pb_reader_init(&r, cs.data, cs.size);
  int clocks = 0;
  while (tg_pb_reader_next(&r, &c) == 1) {
    assert_true(field(c.data, c.size, 1, &f));
    uint64_t id = f.value;
    assert_true(field(c.data, c.size, 2, &f));
    if (id == 6) assert_int_equal(f.value, 40000 * MS - (uint64_t)host_offset[0]);
    else assert_int_equal(f.value, 40000 * MS);
    clocks++;
  }
  assert_int_equal(clocks, 2);
  tg_pb_field_t ev = written(fx, from, 3);
  assert_int_equal(value_of(&ev, 8), 1000); /* last field 8: the delta */
  assert_int_equal(fx->hosts[0].joined, 4);
  assert_int_equal(fx->hosts[0].joined_clock, 0);
}

/* A uuid another host named first. A sequence that begins with it (the
 * same machine listed twice in an inventory) stays whole on its own
 * host's machine: counted, not a loss. A sequence that moved and then
 * names it (a host reaching for tracks it did not start with) has that
 * packet left out and counted as a loss. The owner's own go on. */
static void another_hosts_uuid_is_left_out(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  preamble(fx, 1, "beta", true);
  send_process(fx, 0, 5, 0x77, 10, "mine");
  size_t size = tg_buf_size(&fx->out);
  send_process(fx, 1, 5, 0x77, 10, "taken");
  send_event(fx, 1, 5, 60000 * MS, SLICE_BEGIN, 0x77, "into", 0);
  /* Both written, on beta's machine (2). */
  tg_pb_field_t p0 = written(fx, size, 0), p1 = written(fx, size, 1);
  assert_int_equal(value_of(&p0, 98), 2);
  assert_int_equal(value_of(&p1, 98), 2);
  assert_int_equal(fx->hosts[1].joined_shared, 2);
  assert_int_equal(fx->hosts[1].joined_uuid, 0);
  assert_int_equal(tg_merge_joined_left_out(&fx->hosts[1]), 0);
  /* A sequence of beta's own moves, then reaches for alpha's track. */
  send_process(fx, 1, 6, 0x88, 11, "its own");
  assert_int_equal(fx->hosts[1].joined, 1);
  size = tg_buf_size(&fx->out);
  send_event(fx, 1, 6, 60000 * MS, SLICE_BEGIN, 0x77, "into", 0);
  assert_int_equal(tg_buf_size(&fx->out), size);
  assert_int_equal(fx->hosts[1].joined_uuid, 1);
  /* A loss of the host, and its problem (merge_problem.h). */
  assert_int_equal(tg_merge_joined_left_out(&fx->hosts[1]), 1);
  tg_merge_left_outs_t left;
  tg_merge_left_outs(&fx->hosts[1], &left);
  assert_int_equal(left.n, 1);
  assert_int_equal(left.items[0].reason, TG_MERGE_LEFT_APP_TRACKS);
  assert_int_equal(left.items[0].packets, 1);
  assert_int_equal(tg_merge_left_reason_code(TG_MERGE_LEFT_APP_TRACKS),
                   TG_N_COLLECTOR_APP_TRACKS);
  send_event(fx, 0, 5, 60000 * MS, SLICE_BEGIN, 0x77, "own", 0);
  assert_true(tg_buf_size(&fx->out) > size);
  assert_int_equal(fx->hosts[0].joined_uuid, 0);
}

/* On a moved sequence, a field outside the narrow set (ftrace, with its
 * own times) is left out and counted; on the host's other sequences it
 * goes to the host's machine as ever. */
static void other_fields_on_a_moved_sequence_are_left_out(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  send_process(fx, 0, 4, 0xA0, 1, "app");
  pk_t k;
  size_t size = tg_buf_size(&fx->out);
  tg_pbw_t *w = pk_begin(&k);
  tg_pbw_begin_nested(w, 1); /* ftrace_events */
  tg_pbw_append_varint(w, 1, 0); /* cpu */
  tg_pbw_end_nested(w);
  pk_send(fx, 0, &k, 4);
  assert_int_equal(tg_buf_size(&fx->out), size);
  assert_int_equal(fx->hosts[0].joined_refused, 1);
  /* On a sequence of its own: the host's machine. */
  w = pk_begin(&k);
  tg_pbw_begin_nested(w, 1);
  tg_pbw_append_varint(w, 1, 0);
  tg_pbw_end_nested(w);
  pk_send(fx, 0, &k, 9);
  tg_pb_field_t p = written(fx, size, 0);
  assert_int_equal(value_of(&p, 98), 1);
  assert_int_equal(fx->hosts[0].joined_refused, 1);
  assert_int_equal(fx->hosts[0].malformed, 0);
}

/* A host without a clock estimate: its app sequences stay on its
 * machine, counted, for good. */
static void without_an_estimate_app_tracks_stay(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", false);
  size_t from = tg_buf_size(&fx->out);
  send_process(fx, 0, 3, 0xA0, 5, "app");
  tg_pb_field_t d = written(fx, from, 0);
  assert_int_equal(value_of(&d, 98), 1);
  assert_int_equal(fx->hosts[0].joined_unclocked, 1);
  assert_int_equal(fx->hosts[0].joined, 0);
}

/* Packets of a sequence before its first app packet stay where they went
 * and are counted once it moves. */
static void packets_before_the_move_are_counted(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  pk_t k;
  for (int i = 0; i < 3; i++) {
    tg_pbw_t *w = pk_begin(&k);
    tg_pbw_append_string(w, 900 /* for_testing */, "");
    pk_send(fx, 0, &k, 6);
  }
  assert_int_equal(fx->hosts[0].joined_early, 0);
  send_process(fx, 0, 6, 0xA0, 5, "app");
  assert_int_equal(fx->hosts[0].joined_early, 3);
  assert_int_equal(fx->hosts[0].joined, 1);
}

static tg_merge_host_t *host_at(void *ctx, size_t i) {
  fixture_t *fx = ctx;
  return i < HOSTS ? &fx->hosts[i] : NULL;
}

/* Flows started and ended per host, and at the end those whose other end
 * is not in the file. */
static void flows_are_counted(void **state) {
  fixture_t *fx = *state;
  head(fx);
  preamble(fx, 0, "alpha", true);
  preamble(fx, 1, "beta", true);
  send_process(fx, 0, 3, 0xA0, 5, "client");
  send_process(fx, 1, 3, 0xB0, 5, "server");
  send_event(fx, 0, 3, 50000 * MS, SLICE_BEGIN, 0xA0, "c", 11);
  send_event(fx, 0, 3, 50001 * MS, SLICE_BEGIN, 0xA0, "c", 12);
  send_event(fx, 1, 3, 50002 * MS, SLICE_BEGIN, 0xB0, "s", -11);
  send_event(fx, 1, 3, 50003 * MS, SLICE_BEGIN, 0xB0, "s", -13);
  assert_int_equal(fx->hosts[0].flows_started, 2);
  assert_int_equal(fx->hosts[1].flows_terminated, 2);
  tg_merge_links_end(&fx->m, HOSTS, host_at, fx);
  assert_int_equal(fx->hosts[0].flows_unmatched, 1); /* 12 */
  assert_int_equal(fx->hosts[1].flows_unmatched, 1); /* 13 */
  /* 11, on the host that started it. */
  assert_int_equal(fx->hosts[0].flows_across, 1);
  assert_int_equal(fx->hosts[1].flows_across, 0);
  tg_merge_links_end(&fx->m, HOSTS, host_at, fx); /* once */
  assert_int_equal(fx->hosts[0].flows_unmatched, 1);
  assert_int_equal(fx->hosts[0].flows_across, 1);
}

/* MACHINES: the app packets keep their host's machine, as before. */
static void machines_mode_keeps_app_tracks_on_the_hosts(void **state) {
  fixture_t *fx = *state;
  tg_merge_set_app_tracks(&fx->m, TG_MERGE_APP_MACHINES);
  head(fx);
  preamble(fx, 1, "beta", true);
  size_t from = tg_buf_size(&fx->out);
  send_process(fx, 1, 7, 0xB0, 1234, "server");
  send_event(fx, 1, 7, 50000 * MS, SLICE_BEGIN, 0xB0, "s", 5);
  tg_pb_field_t d = written(fx, from, 0), e = written(fx, from, 1);
  assert_int_equal(value_of(&d, 98), 2);
  assert_int_equal(value_of(&e, 98), 2);
  assert_int_equal(value_of(&e, 8), 50000 * MS);
  tg_pb_field_t td, pd, f;
  assert_true(field(d.data, d.size, 60, &td));
  assert_true(field(td.data, td.size, 3, &pd));
  assert_true(field(pd.data, pd.size, 1, &f));
  assert_int_equal(f.value, 1234);
  assert_int_equal(fx->hosts[1].joined, 0);
  assert_int_equal(fx->hosts[1].flows_started, 0);
  tg_merge_app_tracks_t mode;
  assert_int_equal(tg_merge_app_tracks_parse("machines", &mode), 0);
  assert_int_equal(mode, TG_MERGE_APP_MACHINES);
  assert_int_equal(tg_merge_app_tracks_parse("joined", &mode), 0);
  assert_int_equal(mode, TG_MERGE_APP_JOINED);
  assert_int_equal(tg_merge_app_tracks_parse("both", &mode), -EINVAL);
}

/* --- with trace processor ------------------------------------------------------------- */

#define REQUESTS 10000

/* Trace processor's answer to |query| over the merged trace (its last
 * line, in |out|): tests/support/test_proc.h. False when PERFETTO_BIN is
 * not set. */
static bool tp_last_line(const fixture_t *fx, const char *query, char *out,
                         size_t cap) {
  char path[] = "/tmp/tg-links-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = tg_buf_size(&fx->out);
  assert_int_equal(write(fd, tg_buf_begin(&fx->out), n), (ssize_t)n);
  close(fd);
  int rv = tg_test_tp_answer(path, query, out, cap);
  unlink(path);
  assert_true(rv >= 0);
  return rv == 1;
}

/* Host alpha's client slices (absolute BOOTTIME times) start a flow each;
 * host beta's server slices (on the incremental clock 64, as the agent
 * writes them) end them, 10 us after the client's began on the
 * collector's clock, beta's clock 5 ms ahead of alpha's. Each host also
 * has a process of its own in a process tree (not app data). */
static void trace_processor_joins_flows_across_hosts(void **state) {
  fixture_t *fx = *state;
  if (!getenv("PERFETTO_BIN") || !*getenv("PERFETTO_BIN")) {
    fprintf(stderr, "[ SKIPPED  ] trace processor's flows: PERFETTO_BIN (the "
                    "directory of Perfetto's binaries) is not set\n");
    skip();
  }
  head(fx);
  preamble(fx, 0, "alpha", true);
  preamble(fx, 1, "beta", true);
  for (size_t i = 0; i < HOSTS; i++) send_daemon(fx, i, 2, 4242, 1000 * MS);
  const uint64_t t0 = 50000 * MS; /* the collector's time of the first */
  send_process(fx, 0, 3, 0xA0, 300, "client");
  send_thread(fx, 0, 3, 0xA1, 0xA0, 300, 301);
  send_process(fx, 1, 3, 0xB0, 300, "server");
  uint64_t b_prev = t0 + (uint64_t)host_offset[1];
  send_clock64(fx, 1, 3, 0xB1, b_prev);
  send_thread(fx, 1, 3, 0xB1, 0xB0, 300, 302);
  for (uint64_t i = 0; i < REQUESTS; i++) {
    uint64_t at = t0 + i * 100000; /* every 100 us */
    uint64_t a = at + (uint64_t)host_offset[0];
    send_event(fx, 0, 3, a, SLICE_BEGIN, 0xA1, "client", (int64_t)i + 1);
    uint64_t b = at + 10000 + (uint64_t)host_offset[1];
    send_event(fx, 1, 3, b - b_prev, SLICE_BEGIN, 0, "server",
               -((int64_t)i + 1));
    send_event(fx, 1, 3, 20000, SLICE_END, 0, NULL, 0);
    b_prev = b + 20000;
    send_event(fx, 0, 3, a + 50000, SLICE_END, 0xA1, NULL, 0);
  }
  tg_merge_links_end(&fx->m, HOSTS, host_at, fx);
  for (size_t i = 0; i < HOSTS; i++) {
    assert_int_equal(fx->hosts[i].malformed, 0);
    assert_int_equal(fx->hosts[i].joined_clock, 0);
    assert_int_equal(fx->hosts[i].flows_unmatched, 0);
  }
  assert_int_equal(fx->hosts[0].flows_started, REQUESTS);
  assert_int_equal(fx->hosts[1].flows_terminated, REQUESTS);
  assert_int_equal(fx->hosts[0].flows_across, REQUESTS);
  char out[512];
  assert_true(tp_last_line(
      fx,
      "select (select count(*) from flow f join slice c on f.slice_out = "
      "c.id join slice s on f.slice_in = s.id where c.name = 'client' and "
      "s.name = 'server' and s.ts >= c.ts and s.ts - c.ts = 10000) || ':' || "
      "(select count(*) from process where pid = 4242 and machine_id is not "
      "null) || ':' || (select count(*) from process where name in "
      "('alpha/client', 'beta/server') and machine_id is null and pid >= "
      "4194304) || ':' || (select ifnull(sum(value), 0) from stats where "
      "severity in ('error', 'data_loss') and value > 0)",
      out, sizeof(out)));
  assert_string_equal(out, "\"10000:2:2:0\"\n");
  /* What Perfetto's UI asks when a slice is selected, to draw its arrows
   * (ui/src/core/flow_manager.ts, sliceSelected: directly_connected_flow
   * of the slice, each end's slice, thread track, thread and process):
   * every client slice gives one arrow, to a server slice on a thread
   * track of beta's process, from a thread track of alpha's; no request
   * connects to anything else. Asked of some of them (ids that are
   * multiples of 10): the function is a query per slice. */
  assert_true(tp_last_line(
      fx,
      "include perfetto module slices.flow; "
      "with c as (select id from slice where name = 'client' and id % 10 = "
      "0), a as (select f.slice_out, f.slice_in, po.name as pout, pi.name as "
      "pin, s.name as sin from c join directly_connected_flow(c.id) f join "
      "slice s on s.id = f.slice_in join slice o on o.id = f.slice_out join "
      "thread_track tto on tto.id = o.track_id join thread tho on tho.utid = "
      "tto.utid join process po on po.upid = tho.upid join thread_track tti "
      "on tti.id = s.track_id join thread thi on thi.utid = tti.utid join "
      "process pi on pi.upid = thi.upid) select (select count(*) from c) || "
      "':' || (select count(*) from a where pout = 'alpha/client' and pin = "
      "'beta/server' and sin = 'server') || ':' || (select count(*) from a)",
      out, sizeof(out)));
  unsigned long long asked, arrows, rows;
  assert_int_equal(sscanf(out, "\"%llu:%llu:%llu", &asked, &arrows, &rows), 3);
  assert_true(asked >= REQUESTS / 10);
  assert_int_equal(arrows, asked);
  assert_int_equal(rows, asked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(app_packets_go_to_machine_0_moved, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(sequence_clock_snapshots_are_moved, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(another_hosts_uuid_is_left_out, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          other_fields_on_a_moved_sequence_are_left_out, setup, teardown),
      cmocka_unit_test_setup_teardown(without_an_estimate_app_tracks_stay,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(packets_before_the_move_are_counted,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(flows_are_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(
          machines_mode_keeps_app_tracks_on_the_hosts, setup, teardown),
      cmocka_unit_test_setup_teardown(trace_processor_joins_flows_across_hosts,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
