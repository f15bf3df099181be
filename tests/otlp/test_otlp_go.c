/* SPDX-License-Identifier: Apache-2.0 */
/* OpenTelemetry's Go SDK against tracegate-otlp: tests/otlp/go_client,
 * built against Debian's golang-opentelemetry-otel-dev, runs two services
 * whose request crosses a real HTTP call on loopback, its context carried
 * by the SDK's W3C propagator in the traceparent header. Both export to
 * one receiver here (test_collector_otlp gives each its own host).
 * Skipped, saying why, without go or the SDK's sources.
 *
 * Asserts: the receiver took every span, by service (3 of go-front, 2 of
 * go-back), and refused none; with PERFETTO_BIN, trace processor finds
 * front.call nested in front.handle, back.serve with its event, its error
 * status and its int attribute, front.call's string attribute, both
 * processes by name, one flow from front.call to back.serve (the remote
 * parent, joined through the W3C ids alone), one from front.enqueue to
 * back.audit (a span link), and no other arrow. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "otlp_harness.h"
#include "test_proc.h"
#include "test_service.h"

#ifndef OTLP_PATH
#error "OTLP_PATH must name the tracegate-otlp binary"
#endif
#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

static void the_go_sdk_spans_reach_the_trace_with_their_flows(void **state) {
  const test_service_t *ts = *state;
  char client[200];
  snprintf(client, sizeof(client), "%s/otlp_go_client", ts->dir);
  if (!otlp_go_client_build(client)) skip();
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, NULL, &r);
  char trace[200];
  snprintf(trace, sizeof(trace), "%s/go.pftrace", ts->dir);
  pid_t rec = otlp_record_start(TRACEGATE_CLI_PATH, ts, &r, trace);

  char line[256];
  otlp_go_client_run(client, r.port, r.port, line, sizeof(line));
  /* The batch processors were flushed and answered before it left. */
  otlp_sdk_took(&r, rec, "go-front", 3, "go-back", 2);

  char out[512];
  int got = tg_test_tp_answer(
      trace,
      "select " OTLP_SQL_SDK_REQUEST("'go-front'", "'go-back'") ", "
      OTLP_SQL_ARG("back.serve", "debug.retries", "int_value", "3")
      " as retries, "
      OTLP_SQL_FLOWS("front.enqueue", "back.audit") " as links, "
      "(select count(*) from flow) as all_flows;",
      out, sizeof(out));
  if (got == 0) skip();
  assert_int_equal(got, 1);
  assert_string_equal(out, "1,1,1,1,2,1,1,1,2\n");
}

int main(void) {
#define T(fn) \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      T(the_go_sdk_spans_reach_the_trace_with_their_flows),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
