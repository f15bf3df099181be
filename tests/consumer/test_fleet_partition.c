/* Silent partitions of real length between `tracegate record -H` and a
 * tracegate-relay: a host of fleet_harness.h (a real tracegated with a raw
 * producer, the relay in front of it on a loopback TLS port), the CLI as a
 * child, and between CLI and relay the fault proxy of
 * tests/support/fault_proxy.h.
 *
 * Each partition begins with a read reply held in flight (the proxy holds
 * what the relay sent, then stalls both ways, the way a dead NAT looks),
 * so the relay's replay window must resend it after the re-attach. Data
 * keeps coming on the host meanwhile. Checked: both ends find the dead link
 * within the dead-link timeout (2 s) plus slack; after the partition the
 * CLI re-attaches (--reconnect-timeout 15m) and the trace holds every packet
 * exactly once (no gap, no duplicate), the summary says "no data loss" and
 * shows the real outage length.
 *
 *   test_fleet_partition        25 s (compressed), and a partition whose
 *                               data overflows the host's buffer: exactly
 *                               the chunks lost are counted (summary and
 *                               the trace's trace_stats)
 *   test_fleet_partition long   2 min (plain) and 10 min (compressed), real
 *                               time; ctest label "long"
 *
 * tracegated and the relay get a 15 min lease, longer than any partition
 * here (the default, 10 min, is not longer than the longest). */
#include <errno.h>
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
#define LEASE_MS "900000"
#define PER_CHUNK 10
/* How late a dead link may be found past its timeout (scheduling, the
 * heartbeat period, the relay's timer granularity; sanitizers). */
#define DETECT_SLACK_MS 1500
/* From the link's return to the re-attach: the CLI's backoff (at most 5 s)
 * plus a TLS handshake and the Resume. */
#define BACK_SLACK_MS 12000

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* --- a host: tracegated (15 min lease), relay, producer ------------------------- */

/* A fleet_harness.h host, and the id of the next chunk its producer
 * commits. */
typedef struct host {
  fleet_host_t f;
  uint32_t next_chunk;
} host_t;

static void host_start(host_t *h, const char *log) {
  memset(h, 0, sizeof(*h));
  const char *const service_args[] = {"--session-lease-ms", LEASE_MS, NULL};
  assert_int_equal(
      test_service_start_with(&h->f.ts, service_args, FLEET_WAIT_MS), 0);
  char dl[16];
  snprintf(dl, sizeof(dl), "%d", DEAD_LINK_S);
  const char *const relay_args[] = {"--dead-link-timeout", dl,
                                    "--session-lease-ms", LEASE_MS, NULL};
  fleet_host_start_relay(&h->f, log, relay_args);
  fleet_host_connect_producer(&h->f, "partition.producer", "partition.ds", 32,
                              256, false);
}

/* PER_CHUNK packets "tag:<noise>" (values first..), one chunk. The noise
 * keeps zstd from shrinking a reply to nothing, so the bytes the proxy
 * holds tell that a reply with packets is in flight. */
static void commit_chunk(host_t *h, const char *tag, uint32_t first) {
  static uint8_t pk[PER_CHUNK][FLEET_BIG + 64];
  static uint32_t seed = 12345;
  const uint8_t *frags[PER_CHUNK];
  size_t lens[PER_CHUNK];
  char str[FLEET_BIG + 1];
  for (unsigned i = 0; i < PER_CHUNK; i++) {
    size_t tl = strlen(tag);
    memcpy(str, tag, tl);
    str[tl] = ':';
    for (size_t k = tl + 1; k < FLEET_BIG; k++) {
      seed = seed * 1103515245u + 12345u;
      str[k] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
          [(seed >> 16) & 63];
    }
    str[FLEET_BIG] = 0;
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), str, first + i);
    assert_true(lens[i] > 0);
    frags[i] = pk[i];
  }
  assert_int_equal(raw_producer_write_chunk(&h->f.p, 0, 0, TG_PAGE_DIV_1, 1,
                                            h->next_chunk++, 0, frags, lens,
                                            PER_CHUNK), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(&h->f.p, &page, &chunk, 1, 0), 0);
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("partition");
}

/* --- the CLI through the proxy ----------------------------------------------------- */

/* Where record_through()'s CLI writes its --summary-json: a buffer of its
 * own (fleet_in_dir()'s are reused in turn, and the TLS arguments take
 * several). */
static const char *summary_path(void) {
  static char path[256];
  if (!path[0]) snprintf(path, sizeof(path), "%s", fleet_in_dir("partition.json"));
  return path;
}
#define SUMMARY summary_path()

static void record_through(fleet_cli_t *c, tg_fault_proxy_t *px, const char *out,
                           const char *buffer, bool compress) {
  static char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", tg_fault_proxy_port(px));
  /* A config of its own rather than the quick form: the quick form asks
   * for a flush every 30 s, as Perfetto's does, and this test's producer
   * answers only the flushes it is told to (a partition outlasts many). */
  static char cfg[256];
  snprintf(cfg, sizeof(cfg), "%s", fleet_in_dir("partition.pbtxt"));
  FILE *f = fopen(cfg, "w");
  assert_non_null(f);
  fputs("buffers { size_kb: 1024 }\n"
        "data_sources { config { name: \"partition.ds\" } }\n", f);
  assert_int_equal(fclose(f), 0);
  const char *args[] = {"record", "-H", spec, FLEET_TLS_ARGS,
                        "-o", out, "-c", cfg, "--txt", "-b", buffer,
                        "--dead-link-timeout", "2s", "--reconnect-timeout", "15m",
                        "--compress", compress ? "zstd" : "none",
                        "--summary-json", SUMMARY, NULL};
  fleet_cli_spawn(c, args);
}

/* Waits until a reply with |tag|'s chunk (most of its noise bytes,
 * compressed or not) went to the CLI past |base|, then until a few hundred
 * bytes more did (heartbeat and stats replies come after the read's end):
 * the read is over, so the next one is the one a hold catches whole. */
static void wait_chunk_read_through(tg_fault_proxy_t *px, uint64_t base) {
  fleet_wait_read_through(px, base, PER_CHUNK * FLEET_BIG / 2);
}

/* Begins a partition with a read in flight: the replies are held while a
 * |tag| chunk is committed, until a reply with its packets (most of
 * PER_CHUNK * FLEET_BIG noise bytes, compressed or not) is in the proxy; then
 * nothing moves either way. Should the hold have caught the tail of an
 * earlier read instead (the CLI reads one at a time, so the chunk's read
 * would never come), the link is given back before the dead-link timeout
 * and the next chunk is tried. Returns when the hold began; *chunks: the
 * |tag| chunks committed (values 0..). */
static int64_t cut_mid_read(host_t *h, tg_fault_proxy_t *px, const char *tag,
                            uint32_t *chunks) {
  for (uint32_t k = 0; k < 10; k++) {
    tg_fault_proxy_hold_down(px);
    int64_t t0 = tg_test_now_ms();
    commit_chunk(h, tag, k * PER_CHUNK);
    *chunks = k + 1;
    if (tg_fault_proxy_wait_held_bytes(px, PER_CHUNK * FLEET_BIG / 2,
                                       DEAD_LINK_S * 1000 / 3) == 0) {
      tg_fault_proxy_stall(px);
      print_message("a read reply with packets caught in flight (try %u)\n", k + 1);
      return t0;
    }
    uint64_t d0 = tg_fault_proxy_down_bytes(px);
    tg_fault_proxy_resume(px);
    wait_chunk_read_through(px, d0);
  }
  fail_msg("no read reply with packets was ever caught in flight");
  return 0;
}

/* Both ends find the dead link in time; the CLI's words and the relay's
 * log, measured from |t0|. */
static void expect_found(fleet_cli_t *c, host_t *h, int64_t t0) {
  fleet_cli_read_until(c, TG_NOTE(FLEET_LINK_DEAD), FLEET_WAIT_MS);
  int64_t cli_found = tg_test_now_ms() - t0;
  int64_t relay_found =
      fleet_wait_log(h->f.relay.log, TG_NOTE(RELAY_LINK_LOST)) - t0;
  print_message("dead link found by the CLI after %lld ms, by the relay after "
                "%lld ms\n", (long long)cli_found, (long long)relay_found);
  assert_true(cli_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
  assert_true(relay_found <= DEAD_LINK_S * 1000 + DETECT_SLACK_MS);
}

/* --- partitions that the buffer holds ------------------------------------------------ */

static void partition(int64_t part_ms, bool compress, const char *name) {
  host_t h;
  char log[64], out_name[64];
  snprintf(log, sizeof(log), "relay-%s.log", name);
  snprintf(out_name, sizeof(out_name), "%s.pftrace", name);
  host_start(&h, fleet_in_dir(log));
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.f.relay.port, &px), 0);
  const char *out = fleet_in_dir(out_name);
  fleet_cli_t c;
  /* 8 MB: the 10 min case commits about 1.3 MB during the partition. */
  record_through(&c, px, out, "8mb", compress);
  assert_int_equal(raw_producer_wait_started(&h.f.p, FLEET_WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  commit_chunk(&h, "before", 0);
  wait_chunk_read_through(px, base);

  uint32_t inflight;
  int64_t t0 = cut_mid_read(&h, px, "inflight", &inflight);
  expect_found(&c, &h, t0);
  /* Data keeps coming on the host all along: a chunk every 5 s. */
  uint32_t during = 0;
  for (;;) {
    int64_t left = t0 + part_ms - tg_test_now_ms();
    if (left <= 0) break;
    sleep_ms(left < 5000 ? left : 5000);
    commit_chunk(&h, "during", during);
    during += PER_CHUNK;
  }
  int64_t outage = tg_test_now_ms() - t0;
  tg_fault_proxy_resume(px);
  int64_t back = tg_test_now_ms();
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RECONNECTED), BACK_SLACK_MS + FLEET_WAIT_MS);
  int64_t reattached = tg_test_now_ms();
  print_message("partition of %lld ms: re-attached %lld ms after the link came "
                "back\n", (long long)outage, (long long)(reattached - back));
  assert_true(reattached - back <= BACK_SLACK_MS);
  commit_chunk(&h, "after", 0);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.f.p);
  assert_int_equal(fleet_cli_wait(&c), 0);

  const char *sum = SUMMARY;
  assert_json(sum, "hosts.0.reconnects", "1");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.loss.counters", "{}");
  /* The real outage: from the last answer (just before the hold) to the
   * re-attach, not the detection's few seconds. */
  const char *down_ms = tg_test_json(sum, "hosts.0.link_down_ms");
  assert_non_null(down_ms);
  int64_t down = strtoll(down_ms, NULL, 10);
  print_message("summary: link down %lld ms for a %lld ms partition\n",
                (long long)down, (long long)outage);
  assert_true(down >= outage - 1000);
  assert_true(down <= reattached - t0 + 1000);

  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, PER_CHUNK);
  fleet_trace_assert_values(&t, "inflight", 0, inflight * PER_CHUNK);
  fleet_trace_assert_values(&t, "during", 0, during);
  fleet_trace_assert_values(&t, "after", 0, PER_CHUNK);
  fleet_trace_free(&t);
  unlink(out);
  tg_fault_proxy_stop(px);
  fleet_host_stop(&h.f);
}

static void partition_of_25s_compressed(void **state) {
  (void)state;
  partition(25 * 1000, true, "p25s");
}

static void partition_of_2min_plain(void **state) {
  (void)state;
  partition(2 * 60 * 1000, false, "p2min");
}

static void partition_of_10min_compressed(void **state) {
  (void)state;
  partition(10 * 60 * 1000, true, "p10min");
}

/* --- a partition longer than the buffer holds --------------------------------------- */

/* The summary's "buffer 0 chunks_overwritten" counter; 0 if none. */
static uint64_t summary_overwritten(void) {
  const char *v =
      tg_test_json(SUMMARY, "hosts.0.loss.counters.buffer 0 chunks_overwritten");
  return v ? strtoull(v, NULL, 10) : 0;
}

static uint64_t trace_stats_overwritten(const fleet_trace_t *t) {
  uint64_t v = 0;
  bool seen = false;
  for (size_t i = 0; i < t->n; i++) {
    if (t->pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
      continue;
    const Perfetto__Protos__TraceStats *st = t->pk[i]->trace_stats;
    seen = true;
    v = 0;
    for (size_t b = 0; b < st->n_buffer_stats; b++)
      v += st->buffer_stats[b]->chunks_overwritten;
  }
  if (!seen) fail_msg("no trace_stats packet in the trace");
  return v;
}

static void partition_past_the_buffer_counts_exactly_what_was_overwritten(void **state) {
  (void)state;
  host_t h;
  host_start(&h, fleet_in_dir("relay-wrap.log"));
  tg_fault_proxy_t *px;
  assert_int_equal(tg_fault_proxy_start(h.f.relay.port, &px), 0);
  const char *out = fleet_in_dir("wrap.pftrace");
  fleet_cli_t c;
  record_through(&c, px, out, "256kb", true);
  assert_int_equal(raw_producer_wait_started(&h.f.p, FLEET_WAIT_MS), 0);
  uint64_t base = tg_fault_proxy_down_bytes(px);
  commit_chunk(&h, "before", 0);
  wait_chunk_read_through(px, base);
  uint32_t inflight;
  int64_t t0 = cut_mid_read(&h, px, "inflight", &inflight);
  expect_found(&c, &h, t0);
  /* About 11 KB a chunk into a 256 KB buffer: 60 chunks wrap it twice. */
  enum { CHUNKS = 60 };
  for (uint32_t k = 0; k < CHUNKS; k++) commit_chunk(&h, "during", k * PER_CHUNK);
  tg_fault_proxy_resume(px);
  fleet_cli_read_until(&c, TG_NOTE(FLEET_RECONNECTED), BACK_SLACK_MS + FLEET_WAIT_MS);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&h.f.p);
  assert_int_equal(fleet_cli_wait(&c), 0);

  uint64_t said = summary_overwritten();
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  /* What was read before the cut is replayed: nothing of it is lost. */
  fleet_trace_assert_values(&t, "before", 0, PER_CHUNK);
  fleet_trace_assert_values(&t, "inflight", 0, inflight * PER_CHUNK);
  /* The "during" chunks kept are whole, each once, in order; the ones
   * missing are the oldest (overwritten first). */
  size_t kept = 0;
  uint32_t first = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!fleet_has_tag(t.pk[i], "during")) continue;
    if (!kept) first = t.pk[i]->for_testing->seq_value;
    kept++;
  }
  assert_int_equal(first % PER_CHUNK, 0);
  assert_int_equal(kept % PER_CHUNK, 0);
  fleet_trace_assert_values(&t, "during", first, kept);
  uint64_t lost_chunks = CHUNKS - kept / PER_CHUNK;
  uint64_t in_stats = trace_stats_overwritten(&t);
  print_message("%zu of %u chunks kept; chunks_overwritten: %llu in the summary, "
                "%llu in the trace's stats\n", kept / PER_CHUNK, CHUNKS,
                (unsigned long long)said, (unsigned long long)in_stats);
  assert_true(lost_chunks > 0);
  assert_int_equal(first / PER_CHUNK, lost_chunks); /* the oldest went */
  assert_int_equal(said, lost_chunks);
  assert_int_equal(in_stats, lost_chunks);
  /* The human summary says there was loss too. */
  assert_notice(c.err, TG_N_DATA_LOSS);
  fleet_trace_free(&t);
  unlink(out);
  tg_fault_proxy_stop(px);
  fleet_host_stop(&h.f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest regular[] = {
      FLEET_TEST(partition_of_25s_compressed),
      FLEET_TEST(partition_past_the_buffer_counts_exactly_what_was_overwritten),
  };
  const struct CMUnitTest real_time[] = {
      FLEET_TEST(partition_of_2min_plain),
      FLEET_TEST(partition_of_10min_compressed),
  };
  if (argc > 1 && !strcmp(argv[1], "long"))
    return cmocka_run_group_tests(real_time, group_setup, fleet_dir_teardown);
  return cmocka_run_group_tests(regular, group_setup, fleet_dir_teardown);
}
