/* The kernel's ftrace overruns a trace's packets carry
 * (consumer/fleet/ftrace_loss.c): per packet sequence, the last END's overruns
 * minus the START before it, summed over sequences.
 *
 * The numbers of last_pair_counts_not_their_sum and
 * two_sequences_add_up were checked once by hand against Perfetto v50.1's
 * trace_processor_shell: the same packets, framed as a Trace, give
 * stats.ftrace_cpu_overrun_delta summing to 50 in both (the sequences of
 * two_sequences_add_up name different CPUs, since trace_processor keys
 * these stats by CPU alone). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "consumer/fleet/ds_problem.h"
#include "consumer/fleet/ftrace_loss.h"
#include "pb/trace/ftrace/ftrace_stats.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"
#include "test_service.h"

#define START 1
#define END 2

/* Scans one stats packet of |n| CPUs (from cpu |cpu0|) on sequence |seq|. */
static void scan_stats(tg_ftrace_loss_t *l, int phase, uint32_t seq,
                       uint32_t cpu0, const uint64_t *overrun, size_t n) {
  uint8_t pkt[256];
  size_t len = make_ftrace_stats_packet_on(pkt, phase, seq, cpu0, overrun, n);
  assert_true(len > 0);
  tg_ftrace_loss_scan(l, pkt, len);
}

static void no_stats_is_no_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint8_t other[] = {0x40, 0x2a, 0x0a, 0x00, 0x50, 0x07};
  tg_ftrace_loss_scan(&l, other, sizeof(other));
  tg_ftrace_loss_scan(&l, NULL, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  assert_int_equal(l.starts + l.ends, 0);
  assert_int_equal(l.n_seqs, 0);
}

/* Without an END the loss is not known: nothing is claimed. */
static void start_only_claims_nothing(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {5, 7};
  scan_stats(&l, START, 3, 0, start, 2);
  assert_int_equal(l.starts, 1);
  assert_int_equal(l.ends, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

static void one_pair_is_its_difference(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {5, 7}, end[2] = {105, 57};
  scan_stats(&l, START, 3, 0, start, 2);
  scan_stats(&l, END, 3, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 150);
}

/* A pair at every flush, the START the same each time: the last END
 * holds the whole loss (the sum of the pairs would be 90). */
static void last_pair_counts_not_their_sum(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {2, 3};
  const uint64_t ends[3][2] = {{12, 3}, {22, 13}, {32, 23}};
  for (int i = 0; i < 3; i++) {
    scan_stats(&l, START, 7, 0, start, 2);
    scan_stats(&l, END, 7, 0, ends[i], 2);
  }
  assert_int_equal(l.starts, 3);
  assert_int_equal(l.ends, 3);
  assert_int_equal(l.n_seqs, 1);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 50);
  /* A START the trace kept without its END (a flush cut short) leaves
   * the last END's loss as it was. */
  scan_stats(&l, START, 7, 0, start, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 50);
}

/* Two instances, their packets interleaved, one with the sequence id
 * after the stats (where the service appends it): each END is matched
 * with its own sequence's START. */
static void two_sequences_add_up(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t a0[2] = {1, 1}, a1[2] = {11, 1};
  const uint64_t b0[2] = {100, 200}, b1[2] = {100, 240};
  scan_stats(&l, START, 5, 0, a0, 2);
  uint8_t pkt[256];
  size_t len = make_ftrace_stats_packet_on(pkt, START, 0, 2, b0, 2);
  pkt[len++] = 0x50; /* trusted_packet_sequence_id = 6 */
  pkt[len++] = 6;
  tg_ftrace_loss_scan(&l, pkt, len);
  scan_stats(&l, END, 5, 0, a1, 2);
  scan_stats(&l, END, 6, 2, b1, 2);
  assert_int_equal(l.n_seqs, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 10 + 40);
}

/* Counters that went down (another instance's, a reset) are no loss. */
static void end_below_start_is_no_loss(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[2] = {50, 50}, end[2] = {10, 60};
  scan_stats(&l, START, 4, 0, start, 2);
  scan_stats(&l, END, 4, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  /* An END with no START before it on its sequence claims nothing. */
  scan_stats(&l, END, 9, 0, end, 2);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

static void sums_saturate(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t zero[2] = {0, 0}, huge[2] = {UINT64_MAX - 1, UINT64_MAX - 1};
  /* Over CPUs: one sequence's END sums to UINT64_MAX. */
  scan_stats(&l, START, 2, 0, zero, 2);
  scan_stats(&l, END, 2, 0, huge, 2);
  assert_true(tg_ftrace_loss_overrun(&l) == UINT64_MAX);
  /* Over sequences. */
  scan_stats(&l, START, 3, 0, zero, 1);
  scan_stats(&l, END, 3, 0, huge, 1);
  assert_true(tg_ftrace_loss_overrun(&l) == UINT64_MAX);
}

/* Past the table's sequences, stats are counted as untracked, and the
 * tracked sequences' loss stays what it was. */
static void sequences_past_the_table_are_untracked(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint64_t start[1] = {0}, end[1] = {1};
  for (uint32_t s = 0; s < TG_FTRACE_LOSS_MAX_SEQS + 3; s++) {
    scan_stats(&l, START, 100 + s, 0, start, 1);
    scan_stats(&l, END, 100 + s, 0, end, 1);
  }
  assert_int_equal(l.n_seqs, TG_FTRACE_LOSS_MAX_SEQS);
  assert_int_equal(l.untracked, 2 * 3);
  assert_int_equal(tg_ftrace_loss_overrun(&l), TG_FTRACE_LOSS_MAX_SEQS);
  /* A tracked sequence still is. */
  scan_stats(&l, END, 100, 0, (const uint64_t[]){5}, 1);
  assert_int_equal(tg_ftrace_loss_overrun(&l), TG_FTRACE_LOSS_MAX_SEQS + 4);
  assert_int_equal(l.untracked, 2 * 3);
}

static void garbage_is_ignored(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  const uint8_t cut[] = {0x92, 0x02, 0x7f, 0x01};     /* field 34 cut short */
  const uint8_t bad[] = {0x92, 0x02, 0x02, 0xff, 0xff}; /* not FtraceStats */
  const uint8_t seq_only[] = {0x50, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const uint8_t wrong_type[] = {0x91, 0x02, 1, 2, 3, 4, 5, 6, 7, 8};
  tg_ftrace_loss_scan(&l, cut, sizeof(cut));
  tg_ftrace_loss_scan(&l, bad, sizeof(bad));
  tg_ftrace_loss_scan(&l, seq_only, sizeof(seq_only));
  tg_ftrace_loss_scan(&l, wrong_type, sizeof(wrong_type));
  /* A good packet cut anywhere. */
  uint8_t pkt[256];
  const uint64_t end[2] = {9, 9};
  size_t len = make_ftrace_stats_packet_on(pkt, END, 5, 0, end, 2);
  for (size_t n = 0; n < len; n++) tg_ftrace_loss_scan(&l, pkt, n);
  assert_int_equal(l.starts, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
  /* A phase that is neither START nor END is not counted. */
  scan_stats(&l, 3, 5, 0, end, 2);
  assert_int_equal(l.starts + l.ends, 0);
  assert_int_equal(tg_ftrace_loss_overrun(&l), 0);
}

/* --- setup errors (Perfetto's FtraceSetupErrors) ------------------------ */

/* Scans a stats packet on |seq| with |n_cpus| CPUs' counters and these
 * setup errors. */
static void scan_setup(tg_ftrace_loss_t *l, int phase, uint32_t seq,
                       size_t n_cpus, char **failed, size_t n_failed,
                       char **unknown, size_t n_unknown, const char *atrace) {
  Perfetto__Protos__FtraceStats st = PERFETTO__PROTOS__FTRACE_STATS__INIT;
  Perfetto__Protos__FtraceCpuStats cpus[4], *cp[4];
  assert_true(n_cpus <= 4);
  for (size_t i = 0; i < n_cpus; i++) {
    perfetto__protos__ftrace_cpu_stats__init(&cpus[i]);
    cpus[i].has_cpu = true;
    cpus[i].cpu = i;
    cp[i] = &cpus[i];
  }
  st.has_phase = true;
  st.phase = (Perfetto__Protos__FtraceStats__Phase)phase;
  st.n_cpu_stats = n_cpus;
  st.cpu_stats = cp;
  st.n_failed_ftrace_events = n_failed;
  st.failed_ftrace_events = failed;
  st.n_unknown_ftrace_events = n_unknown;
  st.unknown_ftrace_events = unknown;
  st.atrace_errors = (char *)atrace;
  size_t body = perfetto__protos__ftrace_stats__get_packed_size(&st);
  static uint8_t pkt[1 << 16];
  assert_true(body < sizeof(pkt) - 16);
  size_t n = 0;
  pkt[n++] = 0x92; /* TracePacket.ftrace_stats (34), length-delimited */
  pkt[n++] = 0x02;
  for (size_t v = body; ; v >>= 7) {
    pkt[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
    if (v < 0x80) break;
  }
  n += perfetto__protos__ftrace_stats__pack(&st, pkt + n);
  pkt[n++] = 0x50; /* trusted_packet_sequence_id */
  pkt[n++] = (uint8_t)seq;
  tg_ftrace_loss_scan(l, pkt, n);
}

/* The one problem of |ps| as JSON, checked for the shape every reader
 * relies on; the caller frees it. */
static json_t *only_problem(const tg_ds_problems_t *ps, const char *code,
                            const char *reason, uint64_t events) {
  assert_int_equal(ps->n, 1);
  json_t *a = tg_ds_problems_json(ps);
  assert_non_null(a);
  assert_int_equal(json_array_size(a), 1);
  json_t *p = json_array_get(a, 0);
  assert_string_equal(json_string_value(json_object_get(p, "kind")),
                      "data_source");
  assert_string_equal(json_string_value(json_object_get(p, "data_source")),
                      "linux.ftrace");
  assert_string_equal(json_string_value(json_object_get(p, "code")), code);
  assert_string_equal(json_string_value(json_object_get(p, "reason")), reason);
  assert_non_null(json_string_value(json_object_get(p, "why")));
  assert_int_equal(json_integer_value(json_object_get(p, "events")), events);
  return a;
}

/* tracegate-probes that cannot open tracefs write each event as failed
 * and no CPU counters, at the start and at every flush: one instance that
 * did not start, counted once. */
static void every_event_failed_without_cpus_did_not_start(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  char *failed[] = {"sched/sched_switch", "sched/sched_waking"};
  for (int i = 0; i < 3; i++)
    scan_setup(&l, START, 3, 0, failed, 2, NULL, 0, NULL);
  tg_ftrace_setup_t su;
  tg_ftrace_setup_summary(&l, &su);
  assert_int_equal(su.down, 1);
  assert_int_equal(su.down_events, 2);
  assert_int_equal(su.partial, 0);
  assert_int_equal(l.n_names, 2);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  json_decref(only_problem(&ps, "TG-7010", "not_started", 2));
  assert_non_null(strstr(ps.items[0].why, "sched/sched_switch"));
  const tg_ds_problem_t *first;
  assert_int_equal(tg_ds_problems_failures(&ps, &first), 1);
  assert_ptr_equal(first, &ps.items[0]);
}

/* An instance that runs (its CPUs' counters came) without an event the
 * kernel does not have: its START and END both name it, counted once. */
static void unknown_event_of_a_running_instance_is_refused(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  char *unknown[] = {"no_such_group/no_such_event"};
  scan_setup(&l, START, 4, 2, NULL, 0, unknown, 1, NULL);
  scan_setup(&l, END, 4, 2, NULL, 0, unknown, 1, NULL);
  /* Another instance, clean. */
  scan_setup(&l, START, 5, 2, NULL, 0, NULL, 0, NULL);
  tg_ftrace_setup_t su;
  tg_ftrace_setup_summary(&l, &su);
  assert_int_equal(su.down, 0);
  assert_int_equal(su.partial, 1);
  assert_int_equal(su.refused, 1);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  json_decref(only_problem(&ps, "TG-7011", "events_refused", 1));
}

static void clean_start_has_no_problem(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  scan_setup(&l, START, 4, 2, NULL, 0, NULL, 0, NULL);
  scan_setup(&l, END, 4, 2, NULL, 0, NULL, 0, "");
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  assert_int_equal(ps.n, 0);
  char text[8];
  assert_int_equal(tg_ds_problems_text(&ps, text, sizeof(text)), 0);
  assert_string_equal(text, "[]");
}

/* A hostile host names many long events, with control bytes: a few
 * names are kept, each cut, and the why holds none of those bytes. */
static void names_kept_are_bounded(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  static char names[40][1000];
  char *failed[40];
  for (int i = 0; i < 40; i++) {
    memset(names[i], 'a' + i % 26, sizeof(names[i]) - 1);
    names[i][0] = 0x1b;
    names[i][1] = (char)('0' + i / 26);
    names[i][sizeof(names[i]) - 1] = 0;
    failed[i] = names[i];
  }
  scan_setup(&l, START, 7, 0, failed, 40, NULL, 0, NULL);
  scan_setup(&l, START, 7, 0, failed, 40, NULL, 0, NULL);
  assert_int_equal(l.n_names, TG_FTRACE_SETUP_NAMES);
  for (size_t i = 0; i < l.n_names; i++)
    assert_int_equal(strlen(l.names[i]), TG_FTRACE_SETUP_NAME_MAX);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  assert_int_equal(ps.n, 1);
  assert_int_equal(ps.items[0].events, 40);
  assert_null(strchr(ps.items[0].why, 0x1b));
  assert_true(strlen(ps.items[0].why) <= TG_DS_WHY_MAX);
}

/* The JSON text cuts the list, never the JSON: a prefix of whole
 * problems that fits. */
static void problems_text_cuts_the_list(void **state) {
  (void)state;
  tg_ds_problems_t ps = {0};
  for (int i = 0; i < TG_DS_PROBLEMS_MAX + 2; i++)
    tg_ds_problems_add(&ps, TG_DS_NOT_OFFERED, "some.source", NULL,
                       "no producer offers it (%d)", i);
  assert_int_equal(ps.n, TG_DS_PROBLEMS_MAX);
  assert_int_equal(ps.omitted, 2);
  /* Not offered is listed, not a failure: a producer may register later. */
  const tg_ds_problem_t *first;
  assert_int_equal(tg_ds_problems_failures(&ps, &first), 0);
  assert_null(first);
  char text[400];
  int kept = tg_ds_problems_text(&ps, text, sizeof(text));
  assert_true(kept > 0 && kept < TG_DS_PROBLEMS_MAX);
  json_error_t err;
  json_t *a = json_loads(text, 0, &err);
  assert_non_null(a);
  assert_int_equal(json_array_size(a), (size_t)kept);
  assert_null(json_object_get(json_array_get(a, 0), "events"));
  json_decref(a);
  char tiny[2];
  assert_int_equal(tg_ds_problems_text(&ps, tiny, sizeof(tiny)), -ENOSPC);
}


/* A service packet (sequence 1) whose TracingServiceEvent names |n|
 * (producer, data source) pairs as slow_starting_data_sources, scanned. */
static void scan_slow_start(tg_ftrace_loss_t *l, char *const *producers,
                            char *const *names, size_t n) {
  Perfetto__Protos__TracingServiceEvent__DataSources__DataSource e[16];
  Perfetto__Protos__TracingServiceEvent__DataSources__DataSource *ep[16];
  assert_true(n <= 16);
  for (size_t i = 0; i < n; i++) {
    perfetto__protos__tracing_service_event__data_sources__data_source__init(&e[i]);
    e[i].producer_name = producers[i];
    e[i].data_source_name = names[i];
    ep[i] = &e[i];
  }
  Perfetto__Protos__TracingServiceEvent__DataSources ds =
      PERFETTO__PROTOS__TRACING_SERVICE_EVENT__DATA_SOURCES__INIT;
  ds.n_data_source = n;
  ds.data_source = ep;
  Perfetto__Protos__TracingServiceEvent ev =
      PERFETTO__PROTOS__TRACING_SERVICE_EVENT__INIT;
  ev.event_type_case =
      PERFETTO__PROTOS__TRACING_SERVICE_EVENT__EVENT_TYPE_SLOW_STARTING_DATA_SOURCES;
  ev.slow_starting_data_sources = &ds;
  Perfetto__Protos__TracePacket tp = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  tp.optional_trusted_packet_sequence_id_case =
      PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
  tp.trusted_packet_sequence_id = 1;
  tp.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_SERVICE_EVENT;
  tp.service_event = &ev;
  uint8_t buf[8192];
  size_t len = perfetto__protos__trace_packet__get_packed_size(&tp);
  assert_true(len <= sizeof(buf));
  perfetto__protos__trace_packet__pack(&tp, buf);
  tg_ftrace_loss_scan(l, buf, len);
}

/* tracegate-perf refused its session: the service names linux.perf at
 * the start timeout, at a flush and at the stop; one problem. */
static void slow_starting_data_source_did_not_start(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  char *producers[] = {"tracegate-perf"}, *names[] = {"linux.perf"};
  for (int i = 0; i < 3; i++) scan_slow_start(&l, producers, names, 1);
  assert_int_equal(l.n_not_started, 1);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  assert_int_equal(ps.n, 1);
  json_t *a = tg_ds_problems_json(&ps);
  assert_non_null(a);
  json_t *p = json_array_get(a, 0);
  assert_string_equal(json_string_value(json_object_get(p, "kind")),
                      "data_source");
  assert_string_equal(json_string_value(json_object_get(p, "data_source")),
                      "linux.perf");
  assert_string_equal(json_string_value(json_object_get(p, "code")), "TG-7010");
  assert_string_equal(json_string_value(json_object_get(p, "reason")),
                      "not_started");
  assert_null(json_object_get(p, "events"));
  json_decref(a);
  assert_non_null(strstr(ps.items[0].why, "tracegate-perf"));
  assert_non_null(strstr(ps.items[0].why, "TG-8002"));
  assert_int_equal(tg_ds_problems_failures(&ps, NULL), 1);
}

/* A hostile host names many pairs, long, with control bytes: a few are
 * kept, cut, and the rest counted as omitted problems. */
static void not_started_names_are_bounded(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  char long_name[300];
  memset(long_name, 'n', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = 0;
  long_name[3] = '\n';
  char names_buf[10][400];
  char *producers[10], *names[10];
  for (int i = 0; i < 10; i++) {
    snprintf(names_buf[i], sizeof(names_buf[i]), "%d%s", i, long_name);
    producers[i] = "p\x1b";
    names[i] = names_buf[i];
  }
  scan_slow_start(&l, producers, names, 10);
  scan_slow_start(&l, producers, names, 10);
  assert_int_equal(l.n_not_started, TG_FTRACE_NOT_STARTED_MAX);
  assert_int_equal(l.not_started_omitted, 2 * (10 - TG_FTRACE_NOT_STARTED_MAX));
  for (size_t i = 0; i < l.n_not_started; i++)
    assert_int_equal(strlen(l.not_started[i].data_source),
                     TG_FTRACE_SETUP_NAME_MAX);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  assert_int_equal(ps.n, TG_FTRACE_NOT_STARTED_MAX);
  assert_int_equal(ps.omitted, l.not_started_omitted);
  for (size_t i = 0; i < ps.n; i++) {
    for (const char *c = ps.items[i].why; *c; c++)
      assert_true((unsigned char)*c >= 0x20 && *c != 0x7f);
    for (const char *c = ps.items[i].data_source; *c; c++)
      assert_true((unsigned char)*c >= 0x20 && *c != 0x7f);
  }
}

/* linux.ftrace whose stats already say it did not start is said once. */
static void ftrace_not_started_is_said_once(void **state) {
  (void)state;
  tg_ftrace_loss_t l = {0};
  char *failed[] = {"sched/sched_switch"};
  scan_setup(&l, START, 3, 0, failed, 1, NULL, 0, NULL);
  char *producers[] = {"traced_probes"}, *names[] = {"linux.ftrace"};
  scan_slow_start(&l, producers, names, 1);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_from_ftrace(&ps, &l);
  json_decref(only_problem(&ps, "TG-7010", "not_started", 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_stats_is_no_loss),
      cmocka_unit_test(start_only_claims_nothing),
      cmocka_unit_test(one_pair_is_its_difference),
      cmocka_unit_test(last_pair_counts_not_their_sum),
      cmocka_unit_test(two_sequences_add_up),
      cmocka_unit_test(end_below_start_is_no_loss),
      cmocka_unit_test(sums_saturate),
      cmocka_unit_test(sequences_past_the_table_are_untracked),
      cmocka_unit_test(garbage_is_ignored),
      cmocka_unit_test(every_event_failed_without_cpus_did_not_start),
      cmocka_unit_test(unknown_event_of_a_running_instance_is_refused),
      cmocka_unit_test(clean_start_has_no_problem),
      cmocka_unit_test(names_kept_are_bounded),
      cmocka_unit_test(problems_text_cuts_the_list),
      cmocka_unit_test(slow_starting_data_source_did_not_start),
      cmocka_unit_test(not_started_names_are_bounded),
      cmocka_unit_test(ftrace_not_started_is_said_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
