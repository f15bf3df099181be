/* Remote recordings that survive their relay and their link (issue 12,
 * points 3 and 4), end to end: a real tracegated (raw producer from
 * tests/support), the real tracegate-relay and the CLI as children
 * (fleet_harness.h).
 *
 * - A relay SIGKILLed mid-recording and started again on the same port:
 *   tracegated kept the session under its disconnect lease (the relay
 *   asked for one when the client set its key), so `tracegate record -H`
 *   re-attaches and finishes with every packet exactly once and no loss.
 * - The link cut several times while ReadBuffers replies are on their
 *   way: the relay keeps what it forwarded in the key's replay window
 *   until the CLI acknowledges it, and the re-attached CLI asks for what
 *   followed the last reply it received (TracegateRelay.Resume): every
 *   packet exactly once, no gap, no duplicate, no loss reported.
 *
 * - tracegated killed mid-recording and started again: the session is
 *   gone, the relay says so, and the CLI fails the host at once instead
 *   of trying to re-attach until its reconnect timeout.
 * - The host rebooted (relay and tracegated killed, started again with
 *   another boot id): the CLI sees the new boot and fails the host at
 *   once too.
 * - tracegated restarted under a recording over ssh, whose --stdio relay
 *   knows nothing of the connection before: the CLI sees another service
 *   process and fails the host at once too.
 *
 * Between the CLI and the relay sits fleet_proxy.h's proxy (shared with
 * test_fleet_e2e.c): it counts the bytes going to the CLI, holds what the
 * relay sends on request, and cuts every connection on request. Every wait
 * has a deadline; the relay's log, which has no other way to tell, is
 * read every 20 ms. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet_harness.h"
#include "fleet_proxy.h"
#include "fleet_trace.h"
#include "common/notice.h"
#include "test_proc.h"

/* The audit line (in the relay's log) of |method| allowed for |code|:
 * "METHOD allow [TG-NNNN]", relay/audit.h's fields. */
static const char *allowed(char *buf, size_t cap, const char *method,
                           tg_notice_t code) {
  snprintf(buf, cap, "%s allow %s", method, tg_notice_tag(code));
  return buf;
}

/* How many lines of |path| hold |needle| (0 if it cannot be read). */
static size_t file_count(const char *path, const char *needle) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char line[4096];
  size_t n = 0;
  while (fgets(line, sizeof(line), f)) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

/* The sum of the counts that follow |needle| on the lines of |path|. */
static unsigned long long file_sum_after(const char *path, const char *needle) {
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char line[4096];
  unsigned long long sum = 0, v;
  while (fgets(line, sizeof(line), f)) {
    const char *at = strstr(line, needle);
    if (at && sscanf(at + strlen(needle), "%llu", &v) == 1) sum += v;
  }
  fclose(f);
  return sum;
}

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("survive");
}

/* --- the test ------------------------------------------------------------------------------- */

static void relay_killed_and_restarted_loses_nothing(void **state) {
  (void)state;
  test_service_t ts;
  assert_int_equal(test_service_start(&ts), 0);
  fleet_relay_t r1, r2;
  fleet_relay_start(&r1, ts.consumer_sock, 0, fleet_in_dir("relay1.log"), NULL);
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, &ts, "crash.producer", "crash.ds",
                                        32, 256, false), 0);
  fleet_proxy_t px;
  fleet_proxy_start(&px, r1.port);
  char spec[64];
  snprintf(spec, sizeof(spec), "127.0.0.1:%d", px.port);
  char out[256]; /* fleet_in_dir's buffers rotate */
  snprintf(out, sizeof(out), "%s", fleet_in_dir("crash.pftrace"));
  const char *args[] = {"record", "-H", spec, FLEET_TLS_ARGS, "-o", out, "-t", "0",
                        "-b", "4mb", "--compress", "none", "--summary-json",
                        fleet_in_dir("crash.json"), "crash.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, FLEET_WAIT_MS), 0);
  /* The relay has asked tracegated to keep the session if it dies. */
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  char lease[128];
  allowed(lease, sizeof(lease), "TracegateConsumer.SetDisconnectLease",
          TG_N_RELAY_LEASE);
  while (file_count(fleet_in_dir("relay1.log"), lease) == 0) {
    assert_true(tg_test_now_ms() < deadline);
    usleep(20000);
  }
  /* Before the crash: 20 packets, read by the CLI through the relay. The
   * crash then cuts no ReadBuffers reply in flight: a reply the relay
   * holds when it dies is lost with it, which no lease can help (see
   * docs/operations.md). */
  unsigned long long base = atomic_load(&px.down_bytes);
  fleet_commit_big(&p, 0, "before", 0, 20);
  fleet_proxy_wait_down_bytes(&px, base, 20 * FLEET_BIG);

  /* The relay dies without a word: no Detach reaches tracegated. */
  fleet_relay_stop(&r1, SIGKILL);
  /* Written while no relay runs: kept only if the session is. */
  fleet_commit_big(&p, 1, "during", 0, 20);
  /* systemd's restart: a new relay on the same port. */
  fleet_relay_start(&r2, ts.consumer_sock, r1.port, fleet_in_dir("relay2.log"),
                    NULL);
  base = atomic_load(&px.down_bytes);
  fleet_commit_big(&p, 2, "after", 0, 20);
  /* Both batches reach the CLI through the new relay. */
  fleet_proxy_wait_down_bytes(&px, base, 40 * FLEET_BIG);
  assert_true(atomic_load(&px.accepted) >= 2);

  kill(c.pid, SIGINT);
  fleet_ack_flush(&p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  const char *sum = fleet_in_dir("crash.json");
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.reconnects", "1");
  assert_json(sum, "hosts.0.loss.total", "0");
  /* Every packet exactly once, in order: no gap, no duplicate. */
  fleet_trace_t t;
  fleet_trace_load(out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_assert_values(&t, "during", 0, 20);
  fleet_trace_assert_values(&t, "after", 0, 20);
  fleet_trace_free(&t);
  unlink(out);
  /* The new relay asked for the lease again (the CLI set its key again). */
  assert_true(file_count(fleet_in_dir("relay2.log"), lease) > 0);

  fleet_proxy_stop(&px);
  raw_producer_close(&p);
  fleet_relay_stop(&r2, SIGTERM);
  assert_int_equal(test_service_stop(&ts), 0);
}

/* One host (tracegated, a raw producer of "<tag>.ds") behind a relay
 * (log "<tag>.log") behind the cutting proxy; the CLI records from |spec|
 * into |out| ("<tag>.pftrace"). */
typedef struct survive {
  test_service_t ts;
  fleet_relay_t r;
  raw_producer_t p;
  fleet_proxy_t px;
  char spec[64];
  char out[256]; /* fleet_in_dir's buffers rotate */
  char log[256];
} survive_t;

static void survive_start(survive_t *s, const char *tag,
                          const char *const *relay_args) {
  char name[64], ds[64];
  assert_int_equal(test_service_start(&s->ts), 0);
  snprintf(name, sizeof(name), "%s.log", tag);
  snprintf(s->log, sizeof(s->log), "%s", fleet_in_dir(name));
  fleet_relay_start(&s->r, s->ts.consumer_sock, 0, s->log, relay_args);
  snprintf(name, sizeof(name), "%s.producer", tag);
  snprintf(ds, sizeof(ds), "%s.ds", tag);
  assert_int_equal(raw_producer_connect(&s->p, &s->ts, name, ds, 32, 256,
                                        false), 0);
  fleet_proxy_start(&s->px, s->r.port);
  snprintf(s->spec, sizeof(s->spec), "127.0.0.1:%d", s->px.port);
  snprintf(name, sizeof(name), "%s.pftrace", tag);
  snprintf(s->out, sizeof(s->out), "%s", fleet_in_dir(name));
}

/* Stops all of it (the producer may be closed already). */
static void survive_stop(survive_t *s) {
  unlink(s->out);
  fleet_proxy_stop(&s->px);
  raw_producer_close(&s->p);
  fleet_relay_stop(&s->r, SIGTERM);
  assert_int_equal(test_service_stop(&s->ts), 0);
}

#define ROUNDS 3
#define COMMITS 10 /* of 24 packets of FLEET_BIG bytes: ~240 KB per round */

/* Waits until the relay's log shows |n| Resume calls. */
static void wait_resumes(const char *log, size_t n) {
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  char resume[128];
  allowed(resume, sizeof(resume), "TracegateRelay.Resume",
          TG_N_RELAY_CALL_ALLOWED);
  while (file_count(log, resume) < n) {
    assert_true(tg_test_now_ms() < deadline);
    usleep(20000);
  }
}

static void cuts_mid_read_lose_nothing_and_double_nothing(void **state) {
  (void)state;
  survive_t s;
  survive_start(&s, "replay", NULL);
  const char *args[] = {"record", "-H", s.spec, FLEET_TLS_ARGS,
                        "-o", s.out, "-t", "0",
                        "-b", "16mb", "--compress", "none", "--summary-json",
                        fleet_in_dir("replay.json"), "replay.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&s.p, FLEET_WAIT_MS), 0);
  char tag[24];
  uint32_t chunk = 0;
  const unsigned long long round_bytes = COMMITS * 24ull * FLEET_BIG;
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "round%d", k);
    /* From now on what the relay sends is in flight and stays there. */
    fleet_proxy_hold(&s.px);
    unsigned long long held = atomic_load(&s.px.held_bytes);
    for (unsigned i = 0; i < COMMITS; i++)
      fleet_commit_big(&s.p, chunk++, tag, i * 24, 24);
    /* The CLI's reads fetched the whole round from the service; the relay
     * forwarded it; none of it arrived. */
    int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
    while (atomic_load(&s.px.held_bytes) < held + round_bytes)
      fleet_proxy_wait(&s.px, deadline);
    unsigned long long down = atomic_load(&s.px.down_bytes);
    fleet_proxy_cut(&s.px);
    /* Back, resumed, and the round sent again. */
    wait_resumes(s.log, (size_t)k + 1);
    fleet_proxy_wait_down_bytes(&s.px, down, round_bytes);
  }
  kill(c.pid, SIGINT);
  fleet_ack_flush(&s.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  /* The cut reads were made whole: nothing lost in transit or anywhere. */
  const char *sum = fleet_in_dir("replay.json");
  char want[32];
  snprintf(want, sizeof(want), "%d", ROUNDS);
  assert_json(sum, "hosts.0.reconnects", want);
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.loss.counters", "{}");
  /* The summary says the relay's replay made them whole (the feature). */
  assert_notice(c.err, TG_N_FLEET_RESENT);
  /* Every packet exactly once, in order: no gap, no duplicate. */
  fleet_trace_t t;
  fleet_trace_load(s.out, &t);
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "round%d", k);
    fleet_trace_assert_values(&t, tag, 0, COMMITS * 24);
  }
  fleet_trace_free(&t);
  survive_stop(&s);
  /* What was sent again came from the service's own reply buffers, kept
   * by the window without a copy (bulk replies of ~128 KiB). */
  assert_true(file_sum_after(s.log, " replies kept compressed, ") > 0);
}

/* The same cuts on a compressed link: the relay's window holds what it
 * sent as the compressed bytes it made of it (relay/replay_window.h's
 * segments) and a Resume inflates them. The wire's bytes no longer tell
 * how much of a round left the relay, so each cut comes once some of it
 * did; whatever was in flight then is sent again, the rest follows. */
static void compressed_cuts_mid_read_lose_nothing_and_double_nothing(
    void **state) {
  (void)state;
  survive_t s;
  survive_start(&s, "zreplay", NULL);
  const char *args[] = {"record", "-H", s.spec, FLEET_TLS_ARGS,
                        "-o", s.out, "-t", "0", "-b", "16mb",
                        "--summary-json", fleet_in_dir("zreplay.json"),
                        "zreplay.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&s.p, FLEET_WAIT_MS), 0);
  char tag[24];
  uint32_t chunk = 0;
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "zround%d", k);
    fleet_proxy_hold(&s.px);
    unsigned long long held = atomic_load(&s.px.held_bytes);
    for (unsigned i = 0; i < COMMITS; i++)
      fleet_commit_big(&s.p, chunk++, tag, i * 24, 24);
    int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
    while (atomic_load(&s.px.held_bytes) == held)
      fleet_proxy_wait(&s.px, deadline);
    fleet_proxy_cut(&s.px);
    wait_resumes(s.log, (size_t)k + 1);
  }
  kill(c.pid, SIGINT);
  fleet_ack_flush(&s.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  const char *sum = fleet_in_dir("zreplay.json");
  /* A cut may come while the CLI is still resuming from the one before:
   * one reconnection then survives both, so only the data is counted. */
  assert_json(sum, "hosts.0.compression", "\"zstd\"");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.loss.counters", "{}");
  fleet_trace_t t;
  fleet_trace_load(s.out, &t);
  for (int k = 0; k < ROUNDS; k++) {
    snprintf(tag, sizeof(tag), "zround%d", k);
    fleet_trace_assert_values(&t, tag, 0, COMMITS * 24);
  }
  fleet_trace_free(&t);
  /* The relay's replay made them whole (the feature). */
  assert_notice(c.err, TG_N_FLEET_RESENT);
  survive_stop(&s);
  /* The replies were kept as their compressed bytes (those that came
   * after a client went are kept as they are: nobody compressed them). */
  assert_true(file_sum_after(s.log, "; replay window: ") > 0);
}

/* The same cut with a replay window smaller than what was in flight (a
 * round is two replies of up to 128 KiB; the window holds one): the
 * oldest reply is gone, and exactly that is reported; nothing is doubled
 * and what is left is in order. */
static void a_window_too_small_loses_exactly_what_it_says(void **state) {
  (void)state;
  survive_t s;
  const char *const window[] = {"--replay-window-kb", "160", NULL};
  survive_start(&s, "small", window);
  const char *args[] = {"record", "-H", s.spec, FLEET_TLS_ARGS,
                        "-o", s.out, "-t", "0",
                        "-b", "16mb", "--compress", "none", "--summary-json",
                        fleet_in_dir("small.json"), "small.ds", NULL};
  fleet_cli_t c;
  fleet_cli_spawn(&c, args);
  assert_int_equal(raw_producer_wait_started(&s.p, FLEET_WAIT_MS), 0);
  const unsigned long long round_bytes = COMMITS * 24ull * FLEET_BIG;
  fleet_proxy_hold(&s.px);
  for (unsigned i = 0; i < COMMITS; i++)
    fleet_commit_big(&s.p, i, "small", i * 24, 24);
  int64_t deadline = tg_test_now_ms() + FLEET_WAIT_MS;
  while (atomic_load(&s.px.held_bytes) < round_bytes)
    fleet_proxy_wait(&s.px, deadline);
  fleet_proxy_cut(&s.px);
  wait_resumes(s.log, 1);
  /* Then more, which arrives whole. */
  fleet_commit_big(&s.p, COMMITS, "after", 0, 20);
  kill(c.pid, SIGINT);
  fleet_ack_flush(&s.p);
  assert_int_equal(fleet_cli_wait(&c), 0);
  assert_notice(c.err, TG_N_FLEET_TRANSIT_LOSS);
  const char *sum = fleet_in_dir("small.json");
  const char *lb = tg_test_json(sum, "hosts.0.loss.counters.lost in transit: bytes");
  assert_non_null(lb);
  unsigned long long lost_bytes = strtoull(lb, NULL, 10);
  assert_true(lost_bytes > 0);
  assert_string_not_equal(tg_test_json(sum, "hosts.0.loss.total"), "0");
  fleet_trace_t t;
  fleet_trace_load(s.out, &t);
  /* In order, none twice, the last ones there: the oldest are missing. */
  uint32_t prev = 0;
  size_t n = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!fleet_has_tag(t.pk[i], "small")) continue;
    uint32_t v = t.pk[i]->for_testing->seq_value;
    if (n) assert_true(v > prev);
    prev = v;
    n++;
  }
  size_t total = COMMITS * 24, missing = total - n;
  assert_true(n > 0);
  assert_true(missing > 0);
  assert_int_equal(prev, total - 1);
  /* The bytes said lost hold every missing packet (its payload and a few
   * bytes of framing each), and not much more. */
  assert_true(lost_bytes >= missing * FLEET_BIG);
  assert_true(lost_bytes <= (missing + 1) * (FLEET_BIG + 64));
  fleet_trace_assert_values(&t, "after", 0, 20);
  fleet_trace_free(&t);
  survive_stop(&s);
}

/* The CLI records |s|'s host as "<tag>" with a reconnect timeout past
 * the test's bounded waits, and has the host's 20 packets "before" in
 * hand. */
static void record_before(survive_t *s, const char *tag, fleet_cli_t *c) {
  char name[64], ds[64], sum[256];
  snprintf(name, sizeof(name), "%s.json", tag);
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir(name));
  snprintf(ds, sizeof(ds), "%s.ds", tag);
  const char *args[] = {"record", "-H", s->spec, FLEET_TLS_ARGS,
                        "-o", s->out, "-t", "0",
                        "-b", "4mb", "--compress", "none",
                        "--reconnect-timeout", "10m", "--summary-json", sum,
                        ds, NULL};
  fleet_cli_spawn(c, args);
  assert_int_equal(raw_producer_wait_started(&s->p, FLEET_WAIT_MS), 0);
  unsigned long long base = atomic_load(&s->px.down_bytes);
  fleet_commit_big(&s->p, 0, "before", 0, 20);
  fleet_proxy_wait_down_bytes(&s->px, base, 20 * FLEET_BIG);
}

/* The host's tracegated dies without a word and starts again. */
static void service_killed_and_started(survive_t *s) {
  tg_test_stop(s->ts.pid, SIGKILL, FLEET_WAIT_MS);
  s->ts.pid = 0;
  raw_producer_close(&s->p);
  assert_int_equal(test_service_launch(&s->ts), 0);
}

/* The CLI ended by itself (-1: it was still retrying), the host failed
 * with its session, and what arrived before is in the partial trace. */
static void expect_session_failed(survive_t *s, fleet_cli_t *c,
                                  const char *tag) {
  assert_int_not_equal(fleet_cli_wait(c), -1);
  char name[64];
  snprintf(name, sizeof(name), "%s.json", tag);
  const char *sum = fleet_in_dir(name);
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.failure", "\"session\"");
  fleet_trace_t t;
  fleet_trace_load(s->out, &t);
  fleet_trace_assert_values(&t, "before", 0, 20);
  fleet_trace_free(&t);
}

/* tracegated killed mid-recording and started again: the session died
 * with it. The relay saw the service close the session's connection and
 * says so when the reconnected CLI sets its key again
 * (SetSessionKeyResponse.ended_with_service), so the refused Attach is
 * final: the host fails at once, its partial trace kept, where the CLI
 * used to try again until --reconnect-timeout (here 10 minutes, past the
 * test's bounded wait). */
static void a_service_restart_ends_the_recording_at_once(void **state) {
  (void)state;
  survive_t s;
  survive_start(&s, "restart", NULL);
  fleet_cli_t c;
  record_before(&s, "restart", &c);
  /* systemd starts it again. */
  service_killed_and_started(&s);
  expect_session_failed(&s, &c, "restart");
  survive_stop(&s);
}

/* tracegated killed mid-recording and not started again: the relay can
 * answer only its own service, and its GetHostInfo says the service is
 * down, so the host fails at once with its session, its partial trace
 * kept, where the CLI used to try again until --reconnect-timeout (10
 * minutes here, past the test's bounded wait). The outage it failed in
 * counts in link_down_ms. */
static void a_service_that_stays_down_ends_the_recording_at_once(
    void **state) {
  (void)state;
  survive_t s;
  survive_start(&s, "down", NULL);
  fleet_cli_t c;
  record_before(&s, "down", &c);
  tg_test_stop(s.ts.pid, SIGKILL, FLEET_WAIT_MS);
  s.ts.pid = 0;
  s.ts.exit_status = 0; /* killed on purpose: no failure of the service */
  raw_producer_close(&s.p);
  expect_session_failed(&s, &c, "down");
  const char *sum = fleet_in_dir("down.json");
  assert_json(sum, "hosts.0.reconnects", "0");
  assert_string_not_equal(tg_test_json(sum, "hosts.0.link_down_ms"), "0");
  survive_stop(&s);
}

/* The host rebooted under the recording: relay and tracegated start
 * again, the new relay knows nothing of the key, and tracegated nothing of
 * the session. The CLI asks the relay for the host's facts again after
 * reconnecting; a new boot id makes the refused Attach final: the host
 * fails at once, its partial trace kept, where the CLI used to try again
 * until --reconnect-timeout. The new boot is the relay's own mount
 * namespace with another boot_id (needs root: skipped without). */
static void a_host_reboot_ends_the_recording_at_once(void **state) {
  (void)state;
  survive_t s;
  survive_start(&s, "reboot", NULL);
  fleet_cli_t c;
  record_before(&s, "reboot", &c);
  /* Power cut: everything on the host dies at once, then comes back. */
  int port = s.r.port;
  fleet_relay_stop(&s.r, SIGKILL);
  service_killed_and_started(&s);
  if (!fleet_relay_start_rebooted(&s.r, s.ts.consumer_sock, port, s.log,
                                  "0badb007-0000-4000-8000-000000000001")) {
    kill(c.pid, SIGKILL);
    fleet_cli_wait(&c);
    survive_stop(&s);
    skip();
  }
  expect_session_failed(&s, &c, "reboot");
  survive_stop(&s);
}

/* A recording over ssh (the fake ssh runs the relay in --stdio mode in
 * front of the service's socket) with its producer started; the summary
 * goes to |tag|.json. */
static void ssh_record(survive_t *s, const char *tag, fleet_cli_t *c) {
  char name[64], ds[64], sum[256];
  memset(s, 0, sizeof(*s));
  assert_int_equal(test_service_start(&s->ts), 0);
  snprintf(name, sizeof(name), "%s.producer", tag);
  snprintf(ds, sizeof(ds), "%s.ds", tag);
  assert_int_equal(raw_producer_connect(&s->p, &s->ts, name, ds, 32, 256,
                                        false), 0);
  setenv("TRACEGATE_SSH", fleet_fake_ssh(s->ts.consumer_sock), 1);
  snprintf(name, sizeof(name), "%s.json", tag);
  snprintf(sum, sizeof(sum), "%s", fleet_in_dir(name));
  snprintf(name, sizeof(name), "%s.pftrace", tag);
  snprintf(s->out, sizeof(s->out), "%s", fleet_in_dir(name));
  const char *args[] = {"record", "-H", "ssh://tester@fakehost", "-o", s->out,
                        "-t", "0", "-b", "4mb", "--reconnect-timeout", "10m",
                        "--summary-json", sum, ds, NULL};
  fleet_cli_spawn(c, args);
  unsetenv("TRACEGATE_SSH");
  assert_int_equal(raw_producer_wait_started(&s->p, FLEET_WAIT_MS), 0);
}

/* The CLI ended by itself with the host's session failed (|tag|.json). */
static void expect_ssh_session_failed(survive_t *s, fleet_cli_t *c,
                                      const char *tag) {
  assert_int_not_equal(fleet_cli_wait(c), -1);
  char name[64];
  snprintf(name, sizeof(name), "%s.json", tag);
  assert_json(fleet_in_dir(name), "hosts.0.outcome", "\"failed\"");
  assert_json(fleet_in_dir(name), "hosts.0.failure", "\"session\"");
  unlink(s->out);
  assert_int_equal(test_service_stop(&s->ts), 0);
}

/* The same restart under a recording over ssh: the --stdio relay lives
 * as long as its connection, so the one the reconnected CLI talks to
 * remembers nothing of the session; but another tracegated process
 * answers it, which GetHostInfo names (RelayHostInfo.service_instance):
 * the refused Attach is final, where the CLI used to try again until
 * --reconnect-timeout (10 minutes here, past the test's bounded wait). */
static void a_service_restart_over_ssh_ends_the_recording_at_once(
    void **state) {
  (void)state;
  survive_t s;
  fleet_cli_t c;
  ssh_record(&s, "sshrs", &c);
  service_killed_and_started(&s);
  expect_ssh_session_failed(&s, &c, "sshrs");
}

/* The same service down under a recording over ssh: the --stdio relay of
 * the reconnection finds nothing on the service's socket and answers its
 * own service only. */
static void a_service_down_over_ssh_ends_the_recording_at_once(void **state) {
  (void)state;
  survive_t s;
  fleet_cli_t c;
  ssh_record(&s, "sshdn", &c);
  tg_test_stop(s.ts.pid, SIGKILL, FLEET_WAIT_MS);
  s.ts.pid = 0;
  s.ts.exit_status = 0; /* killed on purpose, and not started again */
  raw_producer_close(&s.p);
  expect_ssh_session_failed(&s, &c, "sshdn");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(relay_killed_and_restarted_loses_nothing),
      FLEET_TEST(cuts_mid_read_lose_nothing_and_double_nothing),
      FLEET_TEST(compressed_cuts_mid_read_lose_nothing_and_double_nothing),
      FLEET_TEST(a_window_too_small_loses_exactly_what_it_says),
      FLEET_TEST(a_service_restart_ends_the_recording_at_once),
      FLEET_TEST(a_service_that_stays_down_ends_the_recording_at_once),
      FLEET_TEST(a_host_reboot_ends_the_recording_at_once),
      FLEET_TEST(a_service_restart_over_ssh_ends_the_recording_at_once),
      FLEET_TEST(a_service_down_over_ssh_ends_the_recording_at_once),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
