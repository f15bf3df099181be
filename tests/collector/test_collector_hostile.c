/* One hostile host of two, through a real collector snapshot: host A's
 * relay (tests/support/hostile_relay.h, INJECT) ends every clone's read
 * with packets the test built, each a case that made trace processor
 * v50.1 refuse a merged file, crash or run out of memory (docs/merge.md,
 * "What the merge writes"); host B's producer wrote a track and a slice.
 * For each case the snapshot is stored, B's row is OK with all its
 * packets, A's row counts what was left out in its loss, and where the
 * merge names the reason, A's row's problems hold it (its notice code,
 * the packets left out, the last refused field's message and number), A
 * and the snapshot are partial and the collector's log names it; and
 * (PERFETTO_BIN) trace processor imports the stored file and has B's
 * track and slice.
 *
 * The cases: the ftrace bundle with previous_bundle_end_timestamp and no
 * ftrace_timestamp; a ClockSnapshot with an is_incremental global clock
 * then a MONOTONIC_RAW bundle; a relay that refuses ClockSync with the
 * host's own ClockSnapshot on REALTIME then a boot-clock bundle;
 * protolog_viewer_config with protolog_message; a gpu_render_stage_event
 * with render_subpass_index_mask {0xffffffff, INT64_MAX}; an
 * InternedV8Isolate whose code range ends before it starts; a 38-byte
 * memory_tracker_snapshot; and the fuzz job's regress-tp-* findings
 * (tests/fuzz/corpus/fuzz_merge), each input's packets sent as host A's.
 * Each built case, alone in a file, makes trace processor v50.1 refuse it,
 * crash or exhaust its memory; once merged, some are harmless (merge.md,
 * "End to end"), and the test holds the merge to keeping those whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "coll_unit.h"
#include "collector/daemon/api_parts.h"
#include "common/log.h"
#include "test_notice.h"
#include "test_proc.h"

#ifndef TG_FUZZ_MERGE_CORPUS
#error "TG_FUZZ_MERGE_CORPUS: the fuzz_merge corpus directory"
#endif

/* --- packets, encoded by hand --------------------------------------------- */

typedef struct pb {
  uint8_t b[1024];
  size_t n;
} pb_t;

static void pb_uv(pb_t *p, uint64_t v) {
  do {
    assert_true(p->n < sizeof(p->b));
    p->b[p->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
}

static void pb_v(pb_t *p, uint32_t field, uint64_t v) {
  pb_uv(p, (uint64_t)field << 3);
  pb_uv(p, v);
}

static void pb_f64(pb_t *p, uint32_t field, uint64_t v) {
  pb_uv(p, (uint64_t)field << 3 | 1);
  assert_true(p->n + 8 <= sizeof(p->b));
  for (int i = 0; i < 8; i++) p->b[p->n++] = (uint8_t)(v >> (8 * i));
}

static void pb_s(pb_t *p, uint32_t field, const void *s, size_t n) {
  pb_uv(p, (uint64_t)field << 3 | 2);
  pb_uv(p, n);
  assert_true(p->n + n <= sizeof(p->b));
  memcpy(p->b + p->n, s, n);
  p->n += n;
}

static void pb_m(pb_t *p, uint32_t field, const pb_t *sub) {
  pb_s(p, field, sub->b, sub->n);
}

/* TracePacket fields. */
#define PKT_FTRACE_EVENTS 1
#define PKT_CLOCK_SNAPSHOT 6
#define PKT_TIMESTAMP 8
#define PKT_SEQ_ID 10
#define PKT_TRACK_EVENT 11
#define PKT_SEQ_FLAGS 13
#define PKT_INTERNED_DATA 12
#define PKT_GPU_RENDER_STAGE 53
#define PKT_TRACK_DESCRIPTOR 60
#define PKT_MEMORY_TRACKER 73
#define PKT_V8_JS_CODE 99
#define PKT_PROTOLOG_MESSAGE 104
#define PKT_PROTOLOG_VIEWER_CONFIG 105

#define CLOCK_REALTIME_ 1
#define CLOCK_BOOTTIME_ 6

/* The packets host A's relay ends its reads with. */
#define CASE_PKTS_MAX 32
typedef struct hostile_case {
  const char *name;
  pb_t pk[CASE_PKTS_MAX];
  size_t n;
} hostile_case_t;

static pb_t *next_pkt(hostile_case_t *c) {
  assert_true(c->n < CASE_PKTS_MAX);
  pb_t *p = &c->pk[c->n++];
  p->n = 0;
  return p;
}

static uint64_t boot_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A fuzz_merge input: records of [host][u16 length LE][packet], every
 * host's packets taken as host A's. */
static void corpus_case(hostile_case_t *c, const char *file) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", TG_FUZZ_MERGE_CORPUS, file);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint8_t in[8192];
  size_t len = fread(in, 1, sizeof(in), f);
  fclose(f);
  for (size_t at = 0; at + 3 <= len;) {
    size_t n = (size_t)in[at + 1] | (size_t)in[at + 2] << 8;
    at += 3;
    if (n > len - at) n = len - at;
    pb_t *p = next_pkt(c);
    assert_true(n <= sizeof(p->b));
    memcpy(p->b, in + at, n);
    p->n = n;
    at += n;
  }
  assert_true(c->n > 0);
  c->name = file;
}

/* ClockSnapshot{clocks {REALTIME}, primary_trace_clock: REALTIME}, then a
 * boot-clock bundle that says where the CPU's previous one ended (trace
 * processor: "No path from clock 6 to 1", the file refused). */
static void realtime_primary_case(hostile_case_t *c) {
  c->name = "realtime-primary";
  pb_t clk = {0}, snap = {0}, ev = {0}, print = {0}, bundle = {0};
  pb_v(&clk, 1, CLOCK_REALTIME_);
  pb_v(&clk, 2, 1700000000000000000ull);
  pb_m(&snap, 1, &clk);
  pb_v(&snap, 2, CLOCK_REALTIME_);
  pb_t *p = next_pkt(c);
  pb_m(p, PKT_CLOCK_SNAPSHOT, &snap);
  pb_v(p, PKT_SEQ_ID, 3);
  pb_s(&print, 2, "hostile\n", 8);
  pb_v(&ev, 1, boot_ns());
  pb_v(&ev, 2, 1);
  pb_m(&ev, 3, &print); /* FtraceEvent.print */
  pb_v(&bundle, 1, 0);
  pb_v(&bundle, 10, 5000); /* previous_bundle_end_timestamp */
  pb_m(&bundle, 2, &ev);
  p = next_pkt(c);
  pb_m(p, PKT_FTRACE_EVENTS, &bundle);
  pb_v(p, PKT_SEQ_ID, 3);
}

/* A format that takes four arguments, a message that brings none
 * (trace processor: SIGSEGV). */
static void protolog_case(hostile_case_t *c) {
  c->name = "protolog";
  pb_t msg = {0}, group = {0}, cfg = {0}, m = {0};
  pb_f64(&msg, 1, 1);
  pb_s(&msg, 2, "%d %s %f %b", 11);
  pb_v(&msg, 3, 1);
  pb_v(&msg, 4, 1);
  pb_m(&cfg, 1, &msg);
  pb_v(&group, 1, 1);
  pb_s(&group, 2, "G", 1);
  pb_s(&group, 3, "T", 1);
  pb_m(&cfg, 2, &group);
  pb_t *p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, boot_ns());
  pb_m(p, PKT_PROTOLOG_VIEWER_CONFIG, &cfg);
  pb_v(p, PKT_SEQ_ID, 3);
  pb_f64(&m, 1, 1);
  p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, boot_ns());
  pb_m(p, PKT_PROTOLOG_MESSAGE, &m);
  pb_v(p, PKT_SEQ_ID, 3);
}

/* Trace processor: stack smashing in gpu_event_parser.cc. */
static void gpu_mask_case(hostile_case_t *c) {
  c->name = "gpu-subpass-mask";
  pb_t ev = {0};
  pb_v(&ev, 1, 1);
  pb_v(&ev, 2, 100);
  pb_v(&ev, 15, 0xffffffffu);
  pb_v(&ev, 15, (uint64_t)INT64_MAX);
  pb_t *p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, boot_ns());
  pb_m(p, PKT_GPU_RENDER_STAGE, &ev);
  pb_v(p, PKT_SEQ_ID, 3);
}

/* InternedData.v8_isolate (35) whose code range ends before it starts
 * (2^64 - 1 bytes from 100), then a v8_js_code of that isolate (trace
 * processor: CHECK(start <= end) in address_range.h). */
static void v8_isolate_case(hostile_case_t *c) {
  c->name = "v8-code-range";
  pb_t range = {0}, iso = {0}, interned = {0}, code = {0};
  pb_v(&range, 1, 100);
  pb_v(&range, 2, UINT64_MAX);
  pb_v(&iso, 1, 1);
  pb_v(&iso, 2, 1);
  pb_v(&iso, 3, 1);
  pb_m(&iso, 4, &range);
  pb_m(&interned, 35, &iso);
  const uint64_t t = boot_ns();
  pb_t *p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, t);
  pb_m(p, PKT_INTERNED_DATA, &interned);
  pb_v(p, PKT_SEQ_FLAGS, 1);
  pb_v(p, PKT_SEQ_ID, 3);
  pb_v(&code, 1, 1);  /* v8_isolate_iid */
  pb_v(&code, 3, 50); /* v8_js_function_iid */
  p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, t + 1);
  pb_m(p, PKT_V8_JS_CODE, &code);
  pb_v(p, PKT_SEQ_FLAGS, 2);
  pb_v(p, PKT_SEQ_ID, 3);
}

/* The interned isolate of v8_isolate_case alone: the field refused is
 * InternedData's, under a TracePacket.interned_data the list keeps. */
static void v8_interned_case(hostile_case_t *c) {
  v8_isolate_case(c);
  c->n = 1;
  c->name = "v8-interned-isolate";
}

/* A TracePacket field Perfetto's schema does not have. */
#define PKT_UNKNOWN 3000
static void unknown_field_case(hostile_case_t *c) {
  c->name = "unknown-field";
  pb_t *p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, boot_ns());
  pb_s(p, PKT_UNKNOWN, "x", 1);
  pb_v(p, PKT_SEQ_ID, 3);
}

/* 38 bytes: two memory nodes whose edges make a cycle (trace processor:
 * std::bad_alloc, after gigabytes). */
static void memory_tracker_case(hostile_case_t *c) {
  c->name = "memory-tracker";
  pb_t a = {0}, b = {0}, ab = {0}, ba = {0}, proc = {0}, snap = {0};
  pb_v(&a, 1, 1);
  pb_s(&a, 2, "a", 1);
  pb_v(&b, 1, 2);
  pb_s(&b, 2, "b", 1);
  pb_v(&ab, 1, 1);
  pb_v(&ab, 2, 2);
  pb_v(&ba, 1, 2);
  pb_v(&ba, 2, 1);
  pb_v(&proc, 1, 1);
  pb_m(&proc, 2, &a);
  pb_m(&proc, 2, &b);
  pb_m(&proc, 3, &ab);
  pb_m(&proc, 3, &ba);
  pb_m(&snap, 3, &proc);
  pb_t *p = next_pkt(c);
  pb_v(p, PKT_TIMESTAMP, 1000);
  pb_m(p, PKT_MEMORY_TRACKER, &snap);
  pb_v(p, PKT_SEQ_ID, 3);
  assert_int_equal(p->n, 38);
}

/* --- the collector's log ---------------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 20];
static size_t log_len;

static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx;
  (void)level;
  pthread_mutex_lock(&log_mu);
  int n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s\n", line);
  if (n > 0 && (size_t)n < sizeof(log_text) - log_len) log_len += (size_t)n;
  pthread_mutex_unlock(&log_mu);
  fprintf(stderr, "%s\n", line);
}

static void log_reset(void) {
  pthread_mutex_lock(&log_mu);
  log_len = 0;
  log_text[0] = 0;
  pthread_mutex_unlock(&log_mu);
}

/* --- the snapshot ------------------------------------------------------------- */

typedef struct {
  int calls;
} done_t;

static void on_done(coll_t *c, coll_snap_t *s, void *ctx) {
  (void)c;
  (void)s;
  ((done_t *)ctx)->calls++;
}

static const tg_coll_host_t *row_host(const tg_coll_host_t *hosts, size_t n,
                                      const char *spec) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(hosts[i].host, spec)) return &hosts[i];
  fail_msg("no row for %s", spec);
  return NULL;
}

/* Host B's packets: a track, a slice on it, begun and ended. */
#define GOOD_TRACK "good-track"
#define GOOD_SLICE "good-slice"
#define GOOD_PACKETS 3

static void commit_good(raw_producer_t *prod) {
  pb_t pk[GOOD_PACKETS] = {{{0}, 0}};
  pb_t td = {0}, begin = {0}, end = {0};
  const uint64_t uuid = 0x600d, t = boot_ns();
  pb_v(&td, 1, uuid);
  pb_s(&td, 2, GOOD_TRACK, strlen(GOOD_TRACK));
  pb_v(&pk[0], PKT_TIMESTAMP, t);
  pb_m(&pk[0], PKT_TRACK_DESCRIPTOR, &td);
  pb_v(&pk[0], PKT_SEQ_FLAGS, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
  pb_v(&begin, 9, 1);             /* TYPE_SLICE_BEGIN */
  pb_v(&begin, 11, uuid);
  pb_s(&begin, 23, GOOD_SLICE, strlen(GOOD_SLICE));
  pb_v(&pk[1], PKT_TIMESTAMP, t + 1000);
  pb_m(&pk[1], PKT_TRACK_EVENT, &begin);
  pb_v(&pk[1], PKT_SEQ_FLAGS, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
  pb_v(&end, 9, 2);               /* TYPE_SLICE_END */
  pb_v(&end, 11, uuid);
  pb_v(&pk[2], PKT_TIMESTAMP, t + 2000);
  pb_m(&pk[2], PKT_TRACK_EVENT, &end);
  pb_v(&pk[2], PKT_SEQ_FLAGS, 2);
  const uint8_t *frags[GOOD_PACKETS];
  size_t lens[GOOD_PACKETS];
  for (size_t i = 0; i < GOOD_PACKETS; i++) {
    frags[i] = pk[i].b;
    lens[i] = pk[i].n;
  }
  assert_int_equal(raw_producer_write_chunk(prod, 0, 0, TG_PAGE_DIV_4, 1, 0, 0,
                                            frags, lens, GOOD_PACKETS),
                   0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(prod, &page, &chunk, 1, 0), 0);
}

static void up(coll_unit_t *u, tg_hostile_mode_t mode, bool clock_sync_error) {
  coll_unit_hosts(u, 2);
  u->hostile = fleet_hostile_start(&u->h[0], mode);
  tg_hostile_relay_set_clock_sync_error(u->hostile, clock_sync_error);
  /* Uncompressed, so that the hostile relay can read every reply. */
  coll_unit_open(u, 2, "compress_level = 0\n", NULL, true);
  for (size_t i = 0; i < 2; i++) {
    coll_unit_wait_host(u, u->h[i].spec, COLL_HOST_TRACING, true);
    assert_int_equal(raw_producer_wait_started(&u->h[i].p, FLEET_WAIT_MS), 0);
  }
  fleet_commit_packets(&u->h[0].p, 0, "hostA", 1, 3);
  commit_good(&u->h[1].p);
}

/* The last field the allowlist refused, as host A's problem names it:
 * |message| NULL when the case expects no TG-5060. */
typedef struct refused {
  const char *message;
  uint32_t field;
  const char *field_name; /* NULL: the schema names none */
} refused_t;

/* |o|[|key|] as a string, "" when it is none. */
static const char *str_of(const json_t *o, const char *key) {
  const char *v = json_string_value(json_object_get(o, key));
  return v ? v : "";
}

/* Host A's row as /api/v1/snapshots/ID shows it (|bad|, from the
 * catalog): its problems hold one of kind "merge" with |reason|'s code
 * and |lost| packets, and for TG-5060 the message and field of |last|;
 * with TG_N_NONE, none of kind "merge". */
static void merge_problem_is(const char *name, const tg_coll_host_t *bad,
                             tg_notice_t reason, uint64_t lost,
                             const refused_t *last) {
  json_t *rows = coll_json_snap_hosts(bad, 1);
  assert_non_null(rows);
  json_t *a = json_object_get(json_array_get(rows, 0), "problems");
  const char *text = bad->problems;
  if (!json_is_array(a)) fail_msg("%s: problems not a JSON array: %s", name, text);
  char code[16];
  snprintf(code, sizeof(code), "TG-%d", (int)reason);
  const json_t *found = NULL;
  size_t merge_kind = 0;
  for (size_t i = 0; i < json_array_size(a); i++) {
    const json_t *p = json_array_get(a, i);
    if (strcmp(str_of(p, "kind"), "merge")) continue;
    merge_kind++;
    if (!strcmp(str_of(p, "code"), code)) found = p;
  }
  if (reason == TG_N_NONE) {
    if (merge_kind) fail_msg("%s: a merge problem in %s", name, text);
    json_decref(rows);
    return;
  }
  if (!found) fail_msg("%s: no %s problem in %s", name, code, text);
  assert_int_equal(merge_kind, 1); /* one reason a case */
  assert_int_equal(json_integer_value(json_object_get(found, "packets")), lost);
  assert_non_null(json_string_value(json_object_get(found, "why")));
  const char *token = reason == TG_N_COLLECTOR_NOT_ALLOWED ? "not_allowed"
                                                           : "clock_unplaced";
  assert_string_equal(json_string_value(json_object_get(found, "reason")),
                      token);
  if (reason == TG_N_COLLECTOR_NOT_ALLOWED && last && last->message) {
    assert_string_equal(json_string_value(json_object_get(found, "message")),
                        last->message);
    assert_int_equal(json_integer_value(json_object_get(found, "field")),
                     last->field);
    const json_t *fname = json_object_get(found, "field_name");
    if (last->field_name)
      assert_string_equal(json_string_value(fname), last->field_name);
    else
      assert_null(fname);
  }
  json_decref(rows);
}

/* One snapshot with host A ending its read with |c|'s packets; the
 * checks of this file's comment. |lost|: how many of them the merge
 * leaves out; |reason|: the notice the collector logs for them and names
 * in A's problems, which then make A partial (TG_N_NONE: the screen's
 * malformed count, which has no line or problem of its own); |last|: for
 * TG-5060, the field A's problem names (NULL: not checked). */
static void snapshot_case(coll_unit_t *u, const hostile_case_t *c,
                          uint64_t lost, tg_notice_t reason,
                          const refused_t *last) {
  const uint8_t *pkts[CASE_PKTS_MAX];
  size_t lens[CASE_PKTS_MAX];
  for (size_t i = 0; i < c->n; i++) {
    pkts[i] = c->pk[i].b;
    lens[i] = c->pk[i].n;
  }
  assert_int_equal(tg_hostile_relay_set_packets(u->hostile, pkts, lens, c->n), 0);
  tg_hostile_stats_t before, after;
  tg_hostile_relay_stats(u->hostile, &before);
  log_reset();
  coll_trigger_req_t r = {.trigger = "operator", .reason = c->name,
                          .origin = "", .group = "all"};
  coll_snap_t *s;
  uint64_t id = 0;
  done_t d = {0};
  assert_int_equal(coll_snap_begin(&u->c, &r, on_done, &d, &s, &id), 0);
  coll_unit_wait_idle(u);
  assert_int_equal(d.calls, 1);
  tg_hostile_relay_stats(u->hostile, &after);
  assert_int_equal(after.injected, before.injected + c->n);

  tg_coll_snapshot_t row;
  tg_coll_host_t hosts[2];
  size_t n;
  coll_unit_row(u, id, &row, hosts, 2, &n);
  assert_int_equal(n, 2);
  const tg_coll_host_t *bad = row_host(hosts, n, u->h[0].spec);
  const tg_coll_host_t *good = row_host(hosts, n, u->h[1].spec);
  assert_int_equal(good->outcome, TG_COLL_HOST_OK);
  assert_int_equal(good->loss, 0);
  assert_string_equal(good->problems, "");
  assert_true(good->packets >= GOOD_PACKETS);
  assert_true(bad->packets >= 3); /* its own test packets */
  if (bad->loss != lost)
    fail_msg("%s: host A's loss is %" PRIu64 ", not %" PRIu64, c->name,
             bad->loss, lost);
  /* What the merge left out for a reason it names: A's problem, and A
   * partial (its data is in the file, less those), so the snapshot is. */
  merge_problem_is(c->name, bad, reason, lost, last);
  bool named = reason != TG_N_NONE && lost;
  assert_int_equal(bad->outcome,
                   named ? TG_COLL_HOST_PARTIAL : TG_COLL_HOST_OK);
  assert_int_equal(row.state, named ? TG_COLL_PARTIAL : TG_COLL_COMPLETE);
  if (named) assert_non_null(strstr(bad->error, tg_notice_tag(reason)));
  if (reason != TG_N_NONE) {
    static char seen[sizeof(log_text)];
    pthread_mutex_lock(&log_mu);
    memcpy(seen, log_text, log_len + 1);
    pthread_mutex_unlock(&log_mu);
    assert_notice_with(seen, reason, u->h[0].spec);
  }

  /* The stored file, copied out for trace processor. */
  int fd = -1;
  assert_int_equal(tg_coll_store_open_file(u->c.store, id, &fd), 0);
  char name[128], path[512];
  snprintf(name, sizeof(name), "hostile-%s.pftrace", c->name);
  snprintf(path, sizeof(path), "%s", fleet_in_dir(name));
  int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  assert_true(out >= 0);
  uint8_t buf[65536];
  ssize_t got;
  uint64_t total = 0;
  while ((got = read(fd, buf, sizeof(buf))) > 0) {
    assert_int_equal(write(out, buf, (size_t)got), got);
    total += (uint64_t)got;
  }
  assert_int_equal(got, 0);
  close(fd);
  assert_int_equal(close(out), 0);
  assert_int_equal(total, row.bytes);

  char ans[256];
  int tp = tg_test_tp_answer(
      path,
      "select (select count(*) from track where name = '" GOOD_TRACK "') || "
      "'/' || (select count(*) from slice where name = '" GOOD_SLICE "' and "
      "dur = 1000) || '/' || (select ifnull(sum(value), 0) from stats where "
      "name in ('invalid_clock_snapshots', 'sorter_push_event_out_of_order'))",
      ans, sizeof(ans));
  if (tp < 0) fail_msg("%s: trace processor did not import %s", c->name, path);
  /* B's track and slice; and none of the whole file's stats no host may
   * raise (docs/merge.md, "What one host can do to the others"). */
  if (tp) assert_string_equal(ans, "\"1/1/0\"\n");
}

static int group_setup(void **state) {
  (void)state;
  tg_log_set_sink(log_sink, NULL);
  return fleet_dir_create("collhostile");
}

static int group_teardown(void **state) {
  tg_log_set_sink(NULL, NULL);
  return fleet_dir_teardown(state);
}

/* The cases through one collector, a snapshot each: each snapshot's merge
 * starts every host's clock model afresh. */
static void each_case_spoils_only_its_host(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, TG_HOSTILE_INJECT, false);
  /* Those a host's own ClockSnapshot (tracegated's, at the clone) gives
   * every clock a path in are kept whole: placed, they import. The
   * screen's malformed packets have no line of their own (TG_N_NONE). */
  static const struct {
    const char *file;
    uint64_t lost;
    tg_notice_t reason;
  } corpus[] = {
      {"regress-tp-clock-global-prev", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      /* The snapshot trace processor refuses (invalid_clock_snapshots on
       * the whole file) is left out; its bundle, placed by the host's
       * own snapshot, is kept. */
      {"regress-tp-clock-snapshot-dropped", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-clock-snapshot-refused", 5, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-clock-id-truncated", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      /* A host's flush markers are left out, not lost: its events stay. */
      {"regress-tp-sorter-flush-markers", 0, TG_N_NONE},
      {"regress-tp-mono-raw-unsynced", 0, TG_N_NONE},
      {"regress-tp-clock-raw-back", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-cpuidle-cpu", 1, TG_N_NONE},
      {"regress-tp-gpu-mask-run", 1, TG_N_COLLECTOR_NOT_ALLOWED},
      {"regress-tp-interned-last-iid", 1, TG_N_COLLECTOR_NOT_ALLOWED},
      {"regress-tp-wakelock-type", 1, TG_N_COLLECTOR_NOT_ALLOWED},
      {"regress-tp-frame-timeline", 1, TG_N_COLLECTOR_NOT_ALLOWED},
  };
  static hostile_case_t c;
  for (size_t i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
    memset(&c, 0, sizeof(c));
    corpus_case(&c, corpus[i].file);
    snapshot_case(&u, &c, corpus[i].lost, corpus[i].reason, NULL);
  }
  /* Every packet of these is off the allowlist; A's problem names the
   * last one's field by the message it is a field of. */
  static const struct {
    void (*make)(hostile_case_t *);
    refused_t last;
  } made[] = {
      {protolog_case, {"TracePacket", PKT_PROTOLOG_MESSAGE, "protolog_message"}},
      {gpu_mask_case,
       {"TracePacket", PKT_GPU_RENDER_STAGE, "gpu_render_stage_event"}},
      {v8_isolate_case, {"TracePacket", PKT_V8_JS_CODE, "v8_js_code"}},
      {v8_interned_case, {"InternedData", 35, "v8_isolate"}},
      {memory_tracker_case,
       {"TracePacket", PKT_MEMORY_TRACKER, "memory_tracker_snapshot"}},
      {unknown_field_case, {"TracePacket", PKT_UNKNOWN, NULL}},
  };
  for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
    memset(&c, 0, sizeof(c));
    made[i].make(&c);
    snapshot_case(&u, &c, c.n, TG_N_COLLECTOR_NOT_ALLOWED, &made[i].last);
  }
  coll_unit_close(&u);
}

/* Host A's relay refuses every ClockSync, so the merge writes no clock
 * preamble for A, and sends the case's packets before its service's
 * own ClockSnapshot (INJECT_FIRST): nothing ties A's clocks yet when
 * they come. A's ClockSnapshot moving the trace clock to REALTIME is left
 * out (the boot-clock bundle after it is then placed, and kept); each
 * clock case of the corpus leaves out its bundle. */
static void a_host_without_clock_sync_spoils_only_itself(void **state) {
  (void)state;
  coll_unit_t u = {0};
  up(&u, TG_HOSTILE_INJECT_FIRST, true);
  static hostile_case_t c;
  memset(&c, 0, sizeof(c));
  realtime_primary_case(&c);
  /* The snapshot is left out; the bundle, on BOOTTIME again, is kept. */
  snapshot_case(&u, &c, 1, TG_N_COLLECTOR_CLOCK_UNPLACED, NULL);
  /* The clock cases again, on a host with no estimate and before its
   * service's ClockSnapshot: each leaves out its one bundle. */
  static const struct {
    const char *file;
    uint64_t lost;
    tg_notice_t reason;
  } corpus[] = {
      {"regress-tp-clock-global-prev", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-clock-snapshot-dropped", 2, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-mono-raw-unsynced", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-clock-raw-back", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
      {"regress-tp-clock-path-long", 1, TG_N_COLLECTOR_CLOCK_UNPLACED},
  };
  for (size_t i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
    memset(&c, 0, sizeof(c));
    corpus_case(&c, corpus[i].file);
    snapshot_case(&u, &c, corpus[i].lost, corpus[i].reason, NULL);
  }
  tg_hostile_stats_t st;
  tg_hostile_relay_stats(u.hostile, &st);
  assert_true(st.clock_refused > 0);
  coll_unit_close(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_case_spoils_only_its_host),
      cmocka_unit_test(a_host_without_clock_sync_spoils_only_itself),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
