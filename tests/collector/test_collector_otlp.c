/* SPDX-License-Identifier: Apache-2.0 */
/* OpenTelemetry spans in a collector snapshot, from two hosts: each host
 * of the fleet harness (tracegated and a relay) runs tracegate-otlp, the
 * collector's flight config names tracegate.otlp, and OpenTelemetry's Go
 * SDK (tests/otlp/go_client) sends go-front's spans to host 0's receiver
 * and go-back's to host 1's: one request whose server half is on the
 * other host, joined by its W3C context alone.
 *
 * Asserts: both receivers took every span of theirs (3 and 2) and
 * refused none; the operator's snapshot is complete with both hosts ok; its
 * trace holds both services' spans, each on its own host's part (host
 * 0's part: go-front's three and no go-back's; host 1's: go-back's two
 * and no go-front's), and one arrow from front.call on host 0 to
 * back.serve on host 1 and one from front.enqueue to back.audit (a link):
 * host 0's row starts both and counts them across, host 1's ends both,
 * and neither row has an end without its other. The spans stayed on the hosts until the
 * snapshot: nothing but the collector read the rings. Trace processor's
 * checks need PERFETTO_BIN; without it they are skipped, saying so. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll_e2e.h"
#include "fleet_harness.h"
#include "otlp_harness.h"
#include "test_proc.h"

#ifndef OTLP_PATH
#error "OTLP_PATH must name the tracegate-otlp binary"
#endif

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("cotlp");
}

/* Trace processor's counts over |trace|: slices of go-front's spans,
 * slices of go-back's, arrows front.call -> back.serve and front.enqueue
 * -> back.audit, as "front,back,calls,links". 0: skipped. */
static int span_counts(const char *trace, char *out, size_t cap) {
  return tg_test_tp_answer(
      trace,
      "select (select count(*) from slice where name in ('front.handle', "
      "'front.call', 'front.enqueue')) as front, "
      "(select count(*) from slice where name in ('back.serve', "
      "'back.audit')) as back, "
      OTLP_SQL_FLOWS("front.call", "back.serve") " as calls, "
      OTLP_SQL_FLOWS("front.enqueue", "back.audit") " as links;",
      out, cap);
}

static void spans_of_two_hosts_come_back_in_one_snapshot(void **state) {
  (void)state;
  char client[256];
  snprintf(client, sizeof(client), "%s", fleet_in_dir("otlp_go_client"));
  if (!otlp_go_client_build(client)) skip();

  fleet_host_t h[2];
  receiver_t r[2];
  for (size_t i = 0; i < 2; i++) {
    char log[64];
    snprintf(log, sizeof(log), "relay%zu.log", i);
    fleet_host_start(&h[i], fleet_in_dir(log), NULL);
    receiver_spawn(OTLP_PATH, h[i].ts.producer_sock, NULL, &r[i]);
  }
  write_config(h, 2, "operator_snapshots_per_minute = 600\n");
  FILE *f = fopen(fleet_in_dir("flight.pbtxt"), "w");
  assert_non_null(f);
  fprintf(f, "buffers { size_kb: 2048 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"tracegate.otlp\" } }\n");
  assert_int_equal(fclose(f), 0);
  collector_t c;
  collector_start(&c);
  wait_hosts(&c, 2, "tracing");
  for (size_t i = 0; i < 2; i++) otlp_wait_recording(&r[i]);

  char line[256];
  otlp_go_client_run(client, r[0].port, r[1].port, line, sizeof(line));
  assert_int_equal(otlp_spans(&r[0], "go-front", "accepted"), 3);
  assert_int_equal(otlp_spans(&r[1], "go-back", "accepted"), 2);
  assert_int_equal(otlp_spans(&r[0], "go-back", "accepted"), -1);
  assert_int_equal(otlp_spans(&r[1], "go-front", "accepted"), -1);
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(otlp_metric(&r[i], "tracegate_otlp_bad_requests_total"),
                     0);

  char json[512];
  snprintf(json, sizeof(json), "%s", fleet_in_dir("otlp.json"));
  char id[32];
  snprintf(id, sizeof(id), "%s", snapshot(&c, h, 0, json));
  assert_json(json, "snapshot.state", "\"complete\"");
  size_t front = snapshot_host_row(json, h[0].spec, 2);
  size_t back = snapshot_host_row(json, h[1].spec, 2);
  char key[96];
  for (size_t row = 0; row < 2; row++) {
    snprintf(key, sizeof(key), "hosts.%zu.outcome", row);
    assert_json(json, key, "\"ok\"");
  }
  assert_int_equal(snapshot_row_link(json, front, "flows_across"), 2);
  /* Calls start flows, their servers and consumers end them: every end
   * has its other in the snapshot. */
  assert_int_equal(snapshot_row_link(json, front, "flows_started"), 2);
  assert_int_equal(snapshot_row_link(json, back, "flows_terminated"), 2);
  assert_int_equal(snapshot_row_link(json, back, "flows_started"), 0);
  for (size_t row = 0; row < 2; row++)
    assert_int_equal(snapshot_row_link(json, row, "flows_unmatched"), 0);

  char whole[256], part[2][256];
  snprintf(whole, sizeof(whole), "%s", fleet_in_dir("otlp.pftrace"));
  download(&c, id, whole);
  for (size_t i = 0; i < 2; i++) {
    char name[64], path[1024];
    snprintf(name, sizeof(name), "otlp-%zu.pftrace", i);
    snprintf(part[i], sizeof(part[i]), "%s", fleet_in_dir(name));
    snprintf(path, sizeof(path), "/api/v1/snapshots/%s/trace?host=%s", id,
             h[i].spec);
    assert_int_equal(http(&c, "GET", path, part[i]), 200);
  }

  collector_stop(&c);
  for (size_t i = 0; i < 2; i++) {
    receiver_stop(&r[i]);
    fleet_host_stop(&h[i]);
  }

  char out[128];
  int got = span_counts(whole, out, sizeof(out));
  if (got == 0) return; /* said: no PERFETTO_BIN */
  assert_int_equal(got, 1);
  assert_string_equal(out, "3,2,1,1\n");
  /* Each host's part: its service's spans alone (flows need both). */
  assert_int_equal(span_counts(part[0], out, sizeof(out)), 1);
  assert_string_equal(out, "3,0,0,0\n");
  assert_int_equal(span_counts(part[1], out, sizeof(out)), 1);
  assert_string_equal(out, "0,2,0,0\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      FLEET_TEST(spans_of_two_hosts_come_back_in_one_snapshot),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
