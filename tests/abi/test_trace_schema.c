/* A TracePacket's wire types and values against Perfetto's trace proto
 * (consumer/fleet/trace_schema.h): what the packets of a trace carry passes, fields
 * it does not know pass, a known field of another wire type at any depth
 * is refused, nesting past the bound is refused, and each value rule
 * refuses its value and takes its neighbour. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/fleet/trace_schema.h"
#include "tracegate/pb_wire.h"

/* --- building packets ------------------------------------------------------- */

typedef struct pkt {
  uint8_t b[4096];
  size_t n;
} pkt_t;

static void raw(pkt_t *p, const void *d, size_t n) {
  assert_true(p->n + n <= sizeof(p->b));
  memcpy(p->b + p->n, d, n);
  p->n += n;
}

static void varint(pkt_t *p, uint64_t v) {
  uint8_t t[TG_PB_MAX_VARINT_SIZE];
  raw(p, t, (size_t)(tg_pb_write_varint(t, v) - t));
}

static void fv(pkt_t *p, uint32_t id, uint64_t v) {
  varint(p, TG_PB_TAG(id, TG_PB_WT_VARINT));
  varint(p, v);
}

static void fbytes(pkt_t *p, uint32_t id, const void *d, size_t n) {
  varint(p, TG_PB_TAG(id, TG_PB_WT_LEN));
  varint(p, n);
  raw(p, d, n);
}

static void fmsg(pkt_t *p, uint32_t id, const pkt_t *inner) {
  fbytes(p, id, inner->b, inner->n);
}

static void ffixed64(pkt_t *p, uint32_t id, uint64_t v) {
  varint(p, TG_PB_TAG(id, TG_PB_WT_FIXED64));
  uint8_t t[8];
  for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
  raw(p, t, 8);
}

static tg_ts_clocks_t last_clocks;
/* The fields trusted beyond the allowlist: none, or all of them (to hold
 * the value rules of fields only an operator's trust keeps). */
static const tg_ts_allow_t *trust;
static tg_ts_allow_t trust_all;

static tg_trace_schema_verdict_t check(const pkt_t *p) {
  return tg_trace_schema_check(p->b, p->n, trust, &last_clocks);
}

/* A packet holding |inner| under TracePacket field |id|. */
static tg_trace_schema_verdict_t in_packet(uint32_t id, const pkt_t *inner) {
  pkt_t p = {0};
  fv(&p, 8, 1000);
  fmsg(&p, id, inner);
  fv(&p, 10, 1);
  return check(&p);
}

/* --- what a trace carries --------------------------------------------------- */

static void trace_packets_pass(void **state) {
  (void)state;
  /* A slice begin with an interned name, a debug annotation, counter
   * values (one by one, as declared), on an incremental clock. */
  pkt_t te = {0}, ann = {0}, names = {0}, interned = {0}, p = {0};
  fv(&te, 9, 1);
  fv(&te, 10, 1);
  fv(&te, 11, 1234);
  fv(&ann, 1, 2);
  fv(&ann, 4, (uint64_t)-5);
  fmsg(&te, 4, &ann);
  fv(&te, 12, 7);
  fv(&te, 12, 300);
  fv(&names, 1, 1);
  fbytes(&names, 2, "slice", 5);
  fmsg(&interned, 2, &names);
  fv(&p, 8, 5);
  fv(&p, 58, 64);
  fmsg(&p, 11, &te);
  fmsg(&p, 12, &interned);
  fv(&p, 13, 2);
  fv(&p, 10, 3);
  assert_int_equal(check(&p), TG_TS_OK);

  /* FtraceStats of both phases; a bundle on CPU 3 with each clock the
   * reader takes. */
  pkt_t cpu = {0}, fs = {0};
  fv(&cpu, 1, 3);
  fv(&cpu, 3, 17);
  for (uint64_t phase = 1; phase <= 2; phase++) {
    fs.n = 0;
    fv(&fs, 1, phase);
    fmsg(&fs, 2, &cpu);
    assert_int_equal(in_packet(34, &fs), TG_TS_OK);
  }
  static const uint64_t clocks[] = {0, 2, 4};
  for (size_t i = 0; i < 3; i++) {
    pkt_t b = {0};
    fv(&b, 1, 3);
    fv(&b, 5, clocks[i]);
    assert_int_equal(in_packet(1, &b), TG_TS_OK);
  }
  /* compact_sched's columns, declared [packed = true], as runs. */
  pkt_t run = {0}, cs = {0}, bundle = {0};
  varint(&run, 1000);
  varint(&run, 20);
  fmsg(&cs, 1, &run); /* switch_timestamp */
  fmsg(&cs, 3, &run); /* switch_next_pid */
  fv(&bundle, 1, 1);
  fmsg(&bundle, 4, &cs);
  assert_int_equal(in_packet(1, &bundle), TG_TS_OK);
  /* The service's report of data sources that did not start
   * (TracingServiceEvent.slow_starting_data_sources): kept, so that a
   * merged trace still says which data source of which host never ran. */
  pkt_t one = {0}, sources = {0}, event = {0};
  fbytes(&one, 1, "tracegate-perf", 14);
  fbytes(&one, 2, "linux.perf", 10);
  fmsg(&sources, 1, &one);
  fmsg(&sources, 1, &one);
  fmsg(&event, 7, &sources);
  assert_int_equal(in_packet(69, &event), TG_TS_OK);
  /* An empty packet, and fields the schema does not know below a kept
   * one. */
  assert_int_equal(tg_trace_schema_check(NULL, 0, NULL, &last_clocks),
                   TG_TS_OK);
  pkt_t unknown = {0};
  fv(&unknown, 5000, 1);
  fbytes(&unknown, 4999, "\xff\xff", 2);
  assert_int_equal(in_packet(11, &unknown), TG_TS_OK);
}

/* --- wire types and depth ----------------------------------------------------- */

static void another_wire_type_is_refused_at_any_depth(void **state) {
  (void)state;
  pkt_t p = {0};
  fbytes(&p, 8, "x", 1); /* timestamp */
  assert_int_equal(check(&p), TG_TS_WIRE_TYPE);
  pkt_t te = {0};
  ffixed64(&te, 9, 1); /* TrackEvent.type */
  assert_int_equal(in_packet(11, &te), TG_TS_WIRE_TYPE);
  /* ClockSnapshot.clocks[].timestamp, two levels down. */
  pkt_t clock = {0}, snap = {0};
  fv(&clock, 1, 6);
  fbytes(&clock, 2, "12345678", 8);
  fmsg(&snap, 1, &clock);
  assert_int_equal(in_packet(6, &snap), TG_TS_WIRE_TYPE);
  /* A repeated number as a run where the .proto does not declare it
   * packed (TrackEvent.extra_counter_values), and a lone number where it
   * does (CompactSched.switch_timestamp): each reads as a pointer. */
  pkt_t run = {0}, te2 = {0}, cs = {0}, bundle = {0};
  varint(&run, 9);
  fmsg(&te2, 12, &run);
  assert_int_equal(in_packet(11, &te2), TG_TS_WIRE_TYPE);
  fv(&cs, 1, 1000);
  fmsg(&bundle, 4, &cs);
  assert_int_equal(in_packet(1, &bundle), TG_TS_WIRE_TYPE);
  /* A message field as a varint. */
  pkt_t q = {0};
  fv(&q, 11, 1);
  assert_int_equal(check(&q), TG_TS_WIRE_TYPE);
  /* Not protobuf at the top, or inside. */
  static const uint8_t cut[] = {0x40, 0xff};
  assert_int_equal(tg_trace_schema_check(cut, sizeof(cut), NULL, &last_clocks),
                   TG_TS_MALFORMED);
  pkt_t bad = {0};
  fbytes(&bad, 11, cut, sizeof(cut));
  assert_int_equal(check(&bad), TG_TS_MALFORMED);
}

/* Debug annotations nest in dict_entries (DebugAnnotation field 11):
 * |levels| of them under a TrackEvent, under the packet. */
static tg_trace_schema_verdict_t annotations_nested(size_t levels) {
  static pkt_t a, b;
  a.n = 0;
  fv(&a, 1, 1);
  for (size_t i = 1; i < levels; i++) {
    b.n = 0;
    fv(&b, 1, 1);
    fmsg(&b, 11, &a);
    a = b;
  }
  pkt_t te = {0};
  fmsg(&te, 4, &a);
  return in_packet(11, &te);
}

static void nesting_past_the_bound_is_refused(void **state) {
  (void)state;
  /* The packet and its TrackEvent are two levels. */
  assert_int_equal(annotations_nested(TG_TRACE_SCHEMA_MAX_DEPTH - 2),
                   TG_TS_OK);
  assert_int_equal(annotations_nested(TG_TRACE_SCHEMA_MAX_DEPTH - 1),
                   TG_TS_TOO_DEEP);
}

/* --- values ------------------------------------------------------------------- */

typedef struct value_case {
  uint32_t packet_field;         /* under TracePacket */
  uint32_t field;                /* in that message (or in |sub| of it) */
  uint32_t sub;                  /* 0, or the submessage's field */
  uint64_t bad, good;
} value_case_t;

static const value_case_t value_cases[] = {
    {1, 1, 0, 1024, 1023},          /* FtraceEventBundle.cpu */
    {1, 5, 0, 3, 2},                /* FtraceEventBundle.ftrace_clock */
    {34, 1, 0, 0, 1},               /* FtraceStats.phase */
    {34, 1, 0, 3, 2},
    {66, 1, 0, 4096, 4095},         /* PerfSample.cpu */
    {62, 2, 0, 1u << 31, 5},        /* VulkanMemoryEvent.operation */
    {62, 1, 0, 6, 0},               /* .source */
    {62, 8, 0, 6, 5},               /* .allocation_scope */
    {60, 11, 0, 4, 3},              /* TrackDescriptor.child_ordering */
    {7, 1, 3, 4096, 4095},          /* SysStats.cpu_stat[].cpu_id */
    {7, 1, 16, 1u << 31, 0},        /* SysStats.cpuidle_state[].cpu_id */
    {115, 3, 1, 3, 2},              /* KernelWakelockData.wakelock[].type */
};

static void each_value_rule_refuses_its_value_only(void **state) {
  (void)state;
  /* Trusted or not, a value trace processor cannot take is refused. */
  trust = &trust_all;
  for (size_t i = 0; i < sizeof(value_cases) / sizeof(value_cases[0]); i++) {
    const value_case_t *c = &value_cases[i];
    for (int good = 0; good < 2; good++) {
      pkt_t m = {0}, sub = {0};
      uint64_t v = good ? c->good : c->bad;
      if (c->sub) {
        fv(&sub, c->field, v);
        fmsg(&m, c->sub, &sub);
      } else {
        if (c->packet_field == 34 && c->field != 1) fv(&m, 1, 1);
        fv(&m, c->field, v);
      }
      tg_trace_schema_verdict_t want = good ? TG_TS_OK : TG_TS_VALUE;
      if (in_packet(c->packet_field, &m) != want)
        fail_msg("case %zu (%s value %llu)", i, good ? "good" : "bad",
                 (unsigned long long)v);
    }
  }
  /* FtraceStats without a phase; with parse errors. */
  pkt_t fs = {0};
  fv(&fs, 4, 1);
  assert_int_equal(in_packet(34, &fs), TG_TS_VALUE);
  fv(&fs, 1, 2);
  assert_int_equal(in_packet(34, &fs), TG_TS_OK);
  fv(&fs, 9, 1);
  assert_int_equal(in_packet(34, &fs), TG_TS_VALUE);
  /* A string interned as 0 (ProfilePacket.strings); an empty one, or one
   * with its id, passes. */
  pkt_t s = {0}, pp = {0};
  fbytes(&s, 2, "x", 1);
  fmsg(&pp, 1, &s);
  assert_int_equal(in_packet(37, &pp), TG_TS_VALUE);
  s.n = pp.n = 0;
  fv(&s, 1, 7);
  fbytes(&s, 2, "x", 1);
  fmsg(&pp, 1, &s);
  assert_int_equal(in_packet(37, &pp), TG_TS_OK);
  /* The last iid counts: 7 then 0 is 0. */
  s.n = pp.n = 0;
  fv(&s, 1, 7);
  fv(&s, 1, 0);
  fbytes(&s, 2, "x", 1);
  fmsg(&pp, 1, &s);
  assert_int_equal(in_packet(37, &pp), TG_TS_VALUE);
  /* A mapping that ends before it starts. */
  pkt_t map = {0};
  fv(&map, 4, 100);
  pp.n = 0;
  fmsg(&pp, 4, &map);
  assert_int_equal(in_packet(37, &pp), TG_TS_VALUE);
  fv(&map, 5, 100);
  pp.n = 0;
  fmsg(&pp, 4, &map);
  assert_int_equal(in_packet(37, &pp), TG_TS_OK);
  /* pixel_modem_token_database and extension_descriptor, whatever they
   * hold. */
  pkt_t empty = {0};
  assert_int_equal(in_packet(111, &empty), TG_TS_VALUE);
  assert_int_equal(in_packet(72, &empty), TG_TS_VALUE);
  assert_int_equal(in_packet(76, &empty), TG_TS_VALUE);
  trust = NULL;
}

/* --- the allowlist ---------------------------------------------------------- */

/* What trace processor v50.1 crashed on or ran out of memory with, each
 * in a field the allowlist does not keep: refused, the field named,
 * unless the operator trusts the producers with it. */
static void the_allowlist_keeps_what_it_lists(void **state) {
  (void)state;
  pkt_t empty = {0};
  static const uint32_t refused[] = {104, 105, 53, 73, 107, 37};
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    assert_int_equal(in_packet(refused[i], &empty), TG_TS_NOT_ALLOWED);
    assert_int_equal(last_clocks.refused, refused[i]);
    assert_string_equal(tg_trace_schema_message_name(last_clocks.refused_in),
                        "TracePacket");
  }
  assert_string_equal(tg_trace_schema_field_name(last_clocks.refused_in, 104),
                      "protolog_message");
  /* InternedData.v8_isolate (35), under a kept interned_data: named as a
   * field of InternedData, the message the screen refused it in. */
  pkt_t iso = {0}, interned = {0};
  fv(&iso, 1, 1);
  fmsg(&interned, 35, &iso);
  assert_int_equal(in_packet(12, &interned), TG_TS_NOT_ALLOWED);
  assert_int_equal(last_clocks.refused, 35);
  assert_string_equal(tg_trace_schema_message_name(last_clocks.refused_in),
                      "InternedData");
  assert_string_equal(tg_trace_schema_field_name(last_clocks.refused_in, 35),
                      "v8_isolate");
  /* A number the schema does not name; no screened message. */
  assert_null(tg_trace_schema_field_name(last_clocks.refused_in, 3000));
  assert_null(tg_trace_schema_field_name(UINT32_MAX, 35));
  assert_string_equal(tg_trace_schema_message_name(UINT32_MAX), "?");
  /* Trusted by name. */
  tg_ts_allow_t allow;
  char bad[32];
  assert_int_equal(tg_trace_schema_allow(&allow,
                                         " protolog_message,memory_tracker_snapshot , "
                                         "interned_data.v8_isolate",
                                         bad, sizeof(bad)),
                   0);
  trust = &allow;
  assert_int_equal(in_packet(104, &empty), TG_TS_OK);
  assert_int_equal(in_packet(73, &empty), TG_TS_OK);
  assert_int_equal(in_packet(12, &interned), TG_TS_OK);
  assert_int_equal(in_packet(53, &empty), TG_TS_NOT_ALLOWED);
  /* A field the schema does not know is never trusted. */
  pkt_t unknown = {0};
  fv(&unknown, 5000, 1);
  trust = &trust_all;
  assert_int_equal(check(&unknown), TG_TS_NOT_ALLOWED);
  trust = NULL;
  assert_int_equal(tg_trace_schema_allow(&allow, "track_event,no_such_field",
                                         bad, sizeof(bad)),
                   -1);
  assert_string_equal(bad, "no_such_field");
  assert_int_equal(tg_trace_schema_allow(&allow, "interned_data.x", bad,
                                         sizeof(bad)),
                   -1);
  assert_string_equal(bad, "x");
  assert_int_equal(tg_trace_schema_allow(&allow, NULL, bad, sizeof(bad)), 0);
  assert_int_equal(tg_trace_schema_allow(&allow, "", bad, sizeof(bad)), 0);
}

/* --- the clock facts -------------------------------------------------------- */

static void the_packets_own_clocks_are_told(void **state) {
  (void)state;
  pkt_t ev = {0}, b = {0};
  fv(&ev, 1, 1000);
  fv(&b, 1, 0);
  fv(&b, 5, 4);
  assert_int_equal(in_packet(1, &b), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_BUNDLE);
  assert_int_equal(last_clocks.ftrace_clock, 4);
  fmsg(&b, 2, &ev);
  fv(&b, 6, 70);
  fv(&b, 7, 80);
  assert_int_equal(in_packet(1, &b), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_BUNDLE | TG_TS_BUNDLE_SNAP);
  assert_int_equal(last_clocks.ftrace_ts, 70);
  assert_int_equal(last_clocks.boot_ts, 80);
  fv(&b, 5, 0); /* the last clock counts: boot */
  assert_int_equal(in_packet(1, &b), TG_TS_OK);
  assert_int_equal(last_clocks.ftrace_clock, 0);
  pkt_t raw = {0}, boot = {0}, snap = {0}, inc = {0}, seqc = {0};
  fv(&raw, 1, 5);
  fv(&raw, 2, 10);
  fv(&boot, 1, 6);
  fv(&boot, 2, 20);
  fmsg(&snap, 1, &raw);
  fmsg(&snap, 1, &boot);
  assert_int_equal(in_packet(6, &snap), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_SNAPSHOT);
  assert_int_equal(last_clocks.ids, (1u << 5) | (1u << 6));
  assert_int_equal(last_clocks.ts[5], 10);
  assert_int_equal(last_clocks.ts[6], 20);
  /* A global clock incremental: refused whole by trace processor. */
  fv(&inc, 1, 1);
  fv(&inc, 2, 30);
  fv(&inc, 3, 1);
  pkt_t snap2 = snap;
  fmsg(&snap2, 1, &inc);
  assert_int_equal(in_packet(6, &snap2), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_SNAPSHOT | TG_TS_SNAP_REJECTED);
  assert_int_equal(last_clocks.odd, 1u << 1);
  /* A clock twice, and a sequence-scoped one incremental (allowed). */
  pkt_t snap3 = snap;
  fmsg(&snap3, 1, &raw);
  assert_int_equal(in_packet(6, &snap3), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_SNAPSHOT | TG_TS_SNAP_REJECTED);
  fv(&seqc, 1, 64);
  fv(&seqc, 3, 1);
  pkt_t snap4 = snap;
  fmsg(&snap4, 1, &seqc);
  fv(&snap4, 2, 1);
  assert_int_equal(in_packet(6, &snap4), TG_TS_OK);
  assert_int_equal(last_clocks.flags, TG_TS_SNAPSHOT | TG_TS_SNAP_SEQ_CLOCK |
                                          TG_TS_SNAP_PRIMARY);
  assert_int_equal(last_clocks.primary, 1);
  /* Two snapshots in one packet. */
  pkt_t two = {0};
  fmsg(&two, 6, &snap);
  fmsg(&two, 6, &snap);
  assert_int_equal(check(&two), TG_TS_OK);
  assert_true(last_clocks.flags & TG_TS_TWICE);
}

/* Every packet of the recordings of Linux producers (tracegated with
 * tracegate-probes and tracegate-emit; Perfetto's traced, traced_probes
 * and SDK; recorded/README.md) passes as it is: the allowlist keeps every
 * field they write, and no value rule refuses what they write. A field
 * one of them starts writing fails here until the list keeps it. */
static void recorded_traces_pass_whole(void **state) {
  (void)state;
  DIR *d = opendir(RECORDED_DIR);
  assert_non_null(d);
  size_t files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 8 || strcmp(e->d_name + len - 8, ".pftrace")) continue;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", RECORDED_DIR, e->d_name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf), f);
    assert_true(feof(f));
    fclose(f);
    tg_pb_reader_t r;
    tg_pb_field_t fld;
    tg_pb_reader_init(&r, buf, n);
    size_t packets = 0;
    int rv;
    while ((rv = tg_pb_reader_next(&r, &fld)) == 1) {
      assert_int_equal(fld.id, 1);
      tg_trace_schema_verdict_t v =
          tg_trace_schema_check(fld.data, fld.size, NULL, &last_clocks);
      if (v != TG_TS_OK)
        fail_msg("%s: packet %zu refused (verdict %d, field %u)", e->d_name,
                 packets, (int)v, last_clocks.refused);
      packets++;
    }
    assert_int_equal(rv, 0);
    assert_true(packets > 0);
    files++;
  }
  closedir(d);
  assert_true(files >= 2);
}

int main(void) {
  memset(&trust_all, 0xff, sizeof(trust_all));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(trace_packets_pass),
      cmocka_unit_test(another_wire_type_is_refused_at_any_depth),
      cmocka_unit_test(nesting_past_the_bound_is_refused),
      cmocka_unit_test(each_value_rule_refuses_its_value_only),
      cmocka_unit_test(the_packets_own_clocks_are_told),
      cmocka_unit_test(the_allowlist_keeps_what_it_lists),
      cmocka_unit_test(recorded_traces_pass_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
