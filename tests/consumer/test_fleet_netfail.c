/* Fleet recording through network faults: a host of fleet_harness.h (a
 * real tracegated with a raw producer, a real tracegate-relay in front of
 * it on a loopback TLS port), the tracegate CLI as a child, and between
 * CLI and relay the fault-injecting proxy of tests/support/fault_proxy.h.
 *
 *   - a silent partition (traffic held both ways, nothing closed) is found
 *     within the dead-link timeout on both ends: the relay detaches the
 *     session, the CLI reconnects once the partition ends, and the trace
 *     holds every packet once, with "no data loss";
 *   - a reset (RST both ways) reconnects the same way;
 *   - a reply held in flight (half a partition) and lost with the link is
 *     reported as lost, and only then;
 *   - five lossless recordings in a row against one service each say "no
 *     data loss", although the service refused a stale commit after each
 *     (loss is per session, not the service's since it started);
 *   - merged traces get a RemoteClockSync per clock sync: the first, the
 *     periodic ones and one after each reconnection.
 *
 * Dead-link timeouts of 2 s keep every case within seconds. Every wait is
 * on an event with a deadline, except reading the relay's log, which has
 * no other way to tell; every child is stopped at the end of its test. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_proxy.h"
#include "fleet_harness.h"
#include "fleet_trace.h"
#include "test_proc.h"

#define DEAD_LINK_S 2
/* How late a dead link may be found past its timeout (scheduling, the
 * heartbeat period, the relay's timer granularity). */
#define DETECT_SLACK_MS 1500

/* A host whose relay gives up on a silent link after DEAD_LINK_S. */
static void start_host(fleet_host_t *h, const char *log) {
  char dl[16];
  snprintf(dl, sizeof(dl), "%d", DEAD_LINK_S);
  const char *const relay_args[] = {"--dead-link-timeout", dl, NULL};
  fleet_host_start(h, log, relay_args);
}

static void connect_producer(fleet_host_t *h) {
  fleet_host_connect_producer(h, "netfail.producer", "netfail.ds", 32, 256,
                              false);
}

static size_t count_unknown_field(const fleet_trace_t *t, uint32_t id) {
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++)
    for (size_t k = 0; k < t->pk[i]->base.n_unknown_fields; k++)
      n += t->pk[i]->base.unknown_fields[k].tag == id;
  return n;
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("netfail");
}

/* Starts `record -H` through |px| into |out| (merged with |merge|). */
/* Where record_through()'s CLI writes its --summary-json: a buffer of its
 * own (fleet_in_dir()'s are reused in turn, and the TLS arguments take
 * several). */
static const char *summary_path(void) {
  static char path[256];
  if (!path[0]) snprintf(path, sizeof(path), "%s", fleet_in_dir("netfail.json"));
  return path;
}
#define SUMMARY summary_path()

static void record_through(fleet_cli_t *c, tg_fault_proxy_t *px, const char *out,
                           bool merge, const char *clock_sync) {
  static char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", tg_fault_proxy_port(px));
  const char *args[] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--dead-link-timeout", "2s",
                        "--clock-sync-period", clock_sync,
                        /* plain: the proxy's byte counts are packet bytes */
                        "--compress", "none", "--summary-json", SUMMARY,
                        "netfail.ds", NULL};
  const char *margs[] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out, "--merge",
                         "-t", "0", "-b", "4mb", "--compress", "none",
                         "--dead-link-timeout", "2s",
                         "--clock-sync-period", clock_sync, "--summary-json",
                         SUMMARY, "netfail.ds", NULL};
  fleet_cli_spawn(c, merge ? margs : args);
}

/* --- (a) a silent partition --------------------------------------------------------- */

static void silent_partition_is_found_on_both_ends_and_nothing_is_lost(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, fleet_in_dir("relay-partition.log"));
  connect_producer(&h);
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.relay.port, &px), 0);
  const char *out = fleet_in_dir("partition.pftrace");
  fleet_cli_t c;
  record_through(&c, px, out, true, "1s");
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  fleet_commit_big(&h.p, 0, "before", 0, 20);
  fleet_wait_read_through(px, base, 20 * FLEET_BIG);

  /* The partition: nothing moves, nothing closes. Data keeps coming on
   * the host; its buffer (4 MB) does not wrap. */
  tg_fault_proxy_stall(px);
  int64_t t0 = tg_test_now_ms();
  fleet_commit_big(&h.p, 1, "during", 0, 20);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_LINK_DEAD), FLEET_WAIT_MS);
  int64_t cli_found = tg_test_now_ms() - t0;
  int64_t relay_found =
      fleet_wait_log(h.relay.log, TG_NOTE(RELAY_LINK_LOST)) - t0;
  print_message("dead link found by the CLI after %lld ms, by the relay after "
                "%lld ms\n", (long long)cli_found, (long long)relay_found);
  assert_true(cli_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
  assert_true(relay_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
  /* A while longer down, then the link comes back. */
  struct timespec hold = {1, 0};
  nanosleep(&hold, NULL);
  int64_t outage = tg_test_now_ms() - t0;
  tg_fault_proxy_resume(px);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RECONNECTED), FLEET_WAIT_MS);
  base = tg_fault_proxy_down_bytes(px);
  fleet_commit_big(&h.p, 2, "after", 0, 10);
  assert_int_equal(
      tg_fault_proxy_wait_down_bytes(px, base + 10 * FLEET_BIG, FLEET_WAIT_MS), 0);
  /* Clock re-syncs are periodic (1 s here): the run goes on for a few. */
  struct timespec resyncs = {2, 500 * 1000 * 1000};
  nanosleep(&resyncs, NULL);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);

  const char *sum = SUMMARY;
  assert_json(sum, "hosts.0.reconnects", "1");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.loss.counters", "{}");
  /* The read the partition cut never reached the service. */
  assert_json(sum, "hosts.0.reads_lost", "0");
  assert_no_notice(c.err, TG_N_FLEET_HOST_FAILED);
  /* The outage counts from the last answer, not from the detection: at
   * least as long as the partition was held. */
  const char *down = tg_test_json(sum, "hosts.0.link_down_ms");
  assert_non_null(down);
  assert_true(strtod(down, NULL) >= (double)outage - 100);
  /* Offset +/- uncertainty, from more than one sync. */
  const char *syncs = tg_test_json(sum, "hosts.0.clock_syncs");
  assert_non_null(syncs);
  assert_true(atoi(syncs) >= 2);
  assert_string_not_equal(tg_test_json(sum, "hosts.0.clock_uncertainty_ns"),
                          "null");

  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_assert_values(&t, "during", 0, 20);
  fleet_trace_assert_values(&t, "after", 0, 10);
  /* The first RemoteClockSync, one after the reconnection and one per
   * second's re-sync after it. */
  assert_true(count_unknown_field(&t, 107) >= 4);
  fleet_trace_free(&t);
  unlink(out);
  tg_fault_proxy_stop(px);
  fleet_host_stop(&h);
}

/* --- (b) a reset -------------------------------------------------------------------- */

static void reset_reconnects_and_keeps_every_packet(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, fleet_in_dir("relay-reset.log"));
  connect_producer(&h);
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.relay.port, &px), 0);
  const char *out = fleet_in_dir("reset.pftrace");
  fleet_cli_t c;
  record_through(&c, px, out, false, "30s");
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  fleet_commit_big(&h.p, 0, "before", 0, 20);
  fleet_wait_read_through(px, base, 20 * FLEET_BIG);
  tg_fault_proxy_reset(px);
  fleet_commit_big(&h.p, 1, "after", 0, 20);
  assert_int_equal(tg_fault_proxy_wait_accepted(px, 2, FLEET_WAIT_MS), 0);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RECONNECTED), FLEET_WAIT_MS);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  const char *sum = SUMMARY;
  assert_json(sum, "hosts.0.reconnects", "1");
  assert_json(sum, "hosts.0.loss.total", "0");
  /* The reset came between reads: the one it cut took nothing. */
  assert_json(sum, "hosts.0.reads_lost", "0");
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_assert_values(&t, "after", 0, 20);
  fleet_trace_free(&t);
  unlink(out);
  tg_fault_proxy_stop(px);
  fleet_host_stop(&h);
}

/* --- (c) a reply lost in flight ------------------------------------------------------ */

/* Half a partition: the CLI's requests reach the service, the replies
 * are held. The read that takes the packets out of the buffers never
 * comes back; the replay window that would resend it is not built, so
 * they are lost, and the summary must say so rather than "no data loss".
 * (Should a read of empty buffers have been in flight at the cut instead,
 * the packets are read after the reconnection and nothing is reported:
 * either way the report matches the trace.) */
static void a_reply_lost_in_flight_is_reported(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, fleet_in_dir("relay-inflight.log"));
  connect_producer(&h);
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.relay.port, &px), 0);
  const char *out = fleet_in_dir("inflight.pftrace");
  fleet_cli_t c;
  record_through(&c, px, out, false, "30s");
  assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  fleet_commit_big(&h.p, 0, "before", 0, 20);
  fleet_wait_read_through(px, base, 20 * FLEET_BIG);
  tg_fault_proxy_hold_down(px);
  fleet_commit_big(&h.p, 1, "inflight", 0, 20);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_LINK_DEAD), FLEET_WAIT_MS);
  tg_fault_proxy_resume(px);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RECONNECTED), FLEET_WAIT_MS);
  base = tg_fault_proxy_down_bytes(px);
  fleet_commit_big(&h.p, 2, "after", 0, 10);
  assert_int_equal(
      tg_fault_proxy_wait_down_bytes(px, base + 10 * FLEET_BIG, FLEET_WAIT_MS), 0);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_assert_values(&t, "after", 0, 10);
  size_t got = fleet_trace_count_tag(&t, "inflight");
  const char *lost = tg_test_json(SUMMARY, "hosts.0.reads_lost");
  assert_non_null(lost);
  bool reported = !strcmp(lost, "1");
  print_message("in-flight packets kept: %zu of 20; reported: %s\n", got,
                reported ? "yes" : "no");
  if (got == 20) {
    assert_false(reported);
    assert_json(SUMMARY, "hosts.0.loss.total", "0");
  } else {
    assert_int_equal(got, 0); /* one chunk, one read: all or nothing */
    assert_true(reported);
    /* The summary does not claim what the service could not count. */
    assert_no_notice(c.err, TG_N_NO_LOSS);
  }
  fleet_trace_free(&t);
  unlink(out);
  tg_fault_proxy_stop(px);
  fleet_host_stop(&h);
}

/* --- (d) loss is per session -------------------------------------------------------- */

static void five_lossless_recordings_in_a_row_each_say_no_data_loss(void **state) {
  (void)state;
  fleet_host_t h;
  start_host(&h, fleet_in_dir("relay-five.log"));
  for (int run = 0; run < 5; run++) {
    connect_producer(&h);
    const char *out = fleet_in_dir("five.pftrace");
    const char *args[] = {"record", "-H", h.spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                          "-b", "1mb", "--summary-json", SUMMARY, "netfail.ds",
                          NULL};
    fleet_cli_t c;
    fleet_cli_spawn(&c, args);
    assert_int_equal(raw_producer_wait_started(&h.p, FLEET_WAIT_MS), 0);
    fleet_commit_packets(&h.p, 0, "run", 10 * (uint32_t)run, 5);
    kill(c.pid, SIGINT);
    fleet_ack_flush(&h.p);
    assert_int_equal(fleet_cli_wait(&c), 0);
    assert_json(SUMMARY, "hosts.0.loss.total", "0");
    fleet_trace_t t;
    fleet_trace_load(out, &t);
    fleet_trace_assert_values(&t, "run", 10 * (uint32_t)run, 5);
    fleet_trace_free(&t);
    unlink(out);
    /* A late commit into the ended session's buffer: the service refuses
     * it (chunks_discarded), and it is no later session's loss. */
    fleet_commit_packets(&h.p, 1, "late", 0, 1);
    fleet_host_drop_producer(&h);
  }
  fleet_host_stop(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(silent_partition_is_found_on_both_ends_and_nothing_is_lost),
      FLEET_TEST(reset_reconnects_and_keeps_every_packet),
      FLEET_TEST(a_reply_lost_in_flight_is_reported),
      FLEET_TEST(five_lossless_recordings_in_a_row_each_say_no_data_loss),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
