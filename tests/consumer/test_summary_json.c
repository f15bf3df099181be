/* --summary-json's writer (consumer/cli/summary_json.h): whatever bytes a
 * host's name, a reason or a loss counter's name hold, the file is valid
 * JSON (read back by Python's json module) with those values; absent
 * figures are null; the file is replaced whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "consumer/cli/summary_json.h"
#include "test_proc.h"

static char g_dir[128];

static int setup(void **state) {
  (void)state;
  return tg_test_mkdtemp(g_dir, sizeof(g_dir), "sumjson") < 0 ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static void hostile_text_comes_back_as_it_was(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s/s.json", g_dir);
  cli_loss_t loss = {.n = 2, .total = 7};
  snprintf(loss.items[0].name, sizeof(loss.items[0].name), "chunks\"lost\\");
  loss.items[0].value = 3;
  snprintf(loss.items[1].name, sizeof(loss.items[1].name), "a\tb\x01");
  loss.items[1].value = 4;
  cli_summary_host_t h[2] = {
      {.host = "h\"1\\:1", .ok = false, .reason = "bad \xff\xfe\n\"bytes\"",
       .bytes = 10, .packets = 2, .loss = &loss, .reconnects = 3,
       .link_down_ms = 1500, .has_clock = true, .clock_offset_ns = -42,
       .clock_uncertainty_ns = 9, .compression = "zstd",
       .has_machine_id = true, .machine_id = 5, .path = NULL},
      {.host = "local", .ok = true},
  };
  cli_summary_t s = {.exit_code = 1, .elapsed_ms = 99, .output = NULL,
                     .hosts = h, .n_hosts = 2};
  assert_int_equal(cli_summary_json_write(path, &s), 0);
  assert_json(path, "schema", "1");
  assert_json(path, "exit_code", "1");
  assert_json(path, "elapsed_ms", "99");
  assert_json(path, "output", "null");
  assert_json(path, "hosts.0.host", "\"h\\\"1\\\\:1\"");
  assert_json(path, "hosts.0.outcome", "\"failed\"");
  /* Bytes above 0x7f come back as the code points of the same value. */
  assert_json(path, "hosts.0.reason",
              "\"bad \\u00ff\\u00fe\\n\\\"bytes\\\"\"");
  assert_json(path, "hosts.0.loss.total", "7");
  assert_json(path, "hosts.0.loss.counters",
              "{\"a\\tb\\u0001\": 4, \"chunks\\\"lost\\\\\": 3}");
  assert_json(path, "hosts.0.reconnects", "3");
  assert_json(path, "hosts.0.link_down_ms", "1500");
  assert_json(path, "hosts.0.clock_offset_ns", "-42");
  assert_json(path, "hosts.0.clock_uncertainty_ns", "9");
  assert_json(path, "hosts.0.machine_id", "5");
  assert_json(path, "hosts.0.path", "null");
  assert_json(path, "hosts.1.outcome", "\"ok\"");
  assert_json(path, "hosts.1.reason", "null");
  assert_json(path, "hosts.1.loss", "null");
  assert_json(path, "hosts.1.clock_offset_ns", "null");
  assert_json(path, "hosts.1.compression", "null");
  assert_json(path, "hosts.1.machine_id", "null");
  /* Written again: replaced whole, nothing left beside it. */
  s.n_hosts = 0;
  assert_int_equal(cli_summary_json_write(path, &s), 0);
  assert_json(path, "hosts", "[]");
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(g_dir), 0); /* empty: no temporary file left */
  assert_int_equal(tg_test_mkdtemp(g_dir, sizeof(g_dir), "sumjson"), 0);
}

/* A directory that cannot be written: an error, said, and no file. */
static void unwritable_place_is_an_error(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s/no/such/dir/s.json", g_dir);
  cli_summary_t s = {.exit_code = 0};
  assert_true(cli_summary_json_write(path, &s) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hostile_text_comes_back_as_it_was),
      cmocka_unit_test(unwritable_place_is_an_error),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
