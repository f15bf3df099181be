/* SPDX-License-Identifier: Apache-2.0 */
/* OpenTelemetry's JavaScript SDK against tracegate-otlp: node runs
 * otlp_js_client.js, whose two services export through
 * @opentelemetry/exporter-trace-otlp-proto (protobuf) and
 * @opentelemetry/exporter-trace-otlp-http (JSON), both from the npm
 * registry (deploy/deps.sh installs them into OTLP_JS_DIR, default
 * /var/cache/tracegate/otlp-js). Skipped, saying why, without node or
 * the packages.
 *
 * Asserts: the receiver took every span, by service (2 of js-front, 1
 * of js-back); with PERFETTO_BIN, trace processor finds front.call
 * nested in front.handle, back.serve with its event, its status and the
 * attribute peer, both processes by name, and one flow from front.call
 * to back.serve: the remote parent joined through the W3C ids alone. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
#ifndef JS_CLIENT
#error "JS_CLIENT must name otlp_js_client.js"
#endif

#define NODE "/usr/bin/node"

static void the_js_sdk_spans_reach_the_trace_with_a_cross_service_flow(
    void **state) {
  const test_service_t *ts = *state;
  const char *dir = getenv("OTLP_JS_DIR");
  if (!dir || !*dir) dir = "/var/cache/tracegate/otlp-js";
  char modules[512], probe[600];
  snprintf(modules, sizeof(modules), "%s/node_modules", dir);
  snprintf(probe, sizeof(probe),
           "%s/@opentelemetry/exporter-trace-otlp-proto/package.json",
           modules);
  struct stat st;
  if (access(NODE, X_OK) != 0 || stat(probe, &st) != 0) {
    print_message("skipped: %s or the @opentelemetry packages in %s are "
                  "missing (deploy/deps.sh installs them)\n",
                  NODE, modules);
    skip();
  }
  receiver_t r;
  receiver_spawn(OTLP_PATH, ts->producer_sock, NULL, &r);
  char trace[200];
  snprintf(trace, sizeof(trace), "%s/js.pftrace", ts->dir);
  pid_t rec = otlp_record_start(TRACEGATE_CLI_PATH, ts, &r, trace);

  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", r.port);
  setenv("NODE_PATH", modules, 1);
  const char *argv[] = {NODE, JS_CLIENT, url, NULL};
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = NODE;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = TG_TEST_FD_DEVNULL;
  pid_t node = tg_test_spawn(&s);
  assert_true(node > 0);
  assert_int_equal(tg_test_exit_code(tg_test_reap(node, OTLP_WAIT_MS)), 0);
  /* The exporters answered before node left (forceFlush). */
  otlp_sdk_took(&r, rec, "js-front", 2, "js-back", 1);

  char out[512];
  int got = tg_test_tp_answer(
      trace, "select " OTLP_SQL_SDK_REQUEST("'js-front'", "'js-back'") ";",
      out, sizeof(out));
  if (got == 0) skip();
  assert_int_equal(got, 1);
  assert_string_equal(out, "1,1,1,1,2,1\n");
}

int main(void) {
#define T(fn) \
  cmocka_unit_test_setup_teardown(fn, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      T(the_js_sdk_spans_reach_the_trace_with_a_cross_service_flow),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
