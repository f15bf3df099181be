/* The verdict of `tracegate bridge` on a WebSocket upgrade
 * (cli/bridge_policy.c): paths, origins compared exactly, and
 * which HOST a /traced/HOST may name. Pure: no bridge runs here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/bridge_policy.h"

/* Any non-NULL pointer: the policy only checks that TLS is configured. */
static tg_tls_config_t *const some_tls = (tg_tls_config_t *)&some_tls;

static bridge_decision_t decide(const bridge_cfg_t *cfg, const char *path,
                                const char *origin) {
  bridge_decision_t d;
  bridge_decide(cfg, path, origin, &d);
  return d;
}

static void assert_refused(const bridge_cfg_t *cfg, const char *path,
                           const char *origin, unsigned status) {
  bridge_decision_t d = decide(cfg, path, origin);
  assert_int_equal(d.verdict, BRIDGE_REFUSE);
  assert_int_equal(d.status, status);
  assert_true(d.why[0]);
}

static void policy_paths(void **state) {
  (void)state;
  bridge_cfg_t cfg = {.tls = some_tls};
  const char *o = "https://ui.perfetto.dev";
  assert_int_equal(decide(&cfg, "/traced", o).verdict, BRIDGE_LOCAL);
  assert_refused(&cfg, "/", o, 404);
  assert_refused(&cfg, "/adb", o, 404); /* Perfetto's, not ours */
  assert_refused(&cfg, "/tracedX", o, 404);
  assert_refused(&cfg, "/TRACED", o, 404);
  assert_refused(&cfg, "traced", o, 404);
  assert_refused(&cfg, "/traced/", o, 400);
  /* The origin is checked before the path's HOST is looked at. */
  assert_refused(&cfg, "/traced/x:1", "https://evil.example", 403);
}

static void policy_origins_exact(void **state) {
  (void)state;
  bridge_cfg_t cfg = {.origins = {"http://localhost:8080"}, .n_origins = 1};
  const char *ok[] = {"https://ui.perfetto.dev", "http://localhost:10000",
                      "http://127.0.0.1:10000", "http://localhost:8080"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    assert_int_equal(decide(&cfg, "/traced", ok[i]).verdict, BRIDGE_LOCAL);
  const char *bad[] = {"",
                       "null",
                       "https://ui.perfetto.dev/",
                       "https://ui.perfetto.dev.evil.example",
                       "https://evil.example/https://ui.perfetto.dev",
                       "http://ui.perfetto.dev",
                       "HTTPS://UI.PERFETTO.DEV",
                       "https://ui.perfetto.dev:443",
                       "http://localhost:10001",
                       "http://localhost:808",
                       "https://ui.perfetto.de"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_refused(&cfg, "/traced", bad[i], 403);
  assert_refused(&cfg, "/traced", NULL, 403);
}

static void policy_hosts(void **state) {
  (void)state;
  const char *o = "http://127.0.0.1:10000";
  bridge_cfg_t open = {.tls = some_tls};
  bridge_decision_t d = decide(&open, "/traced/relay.example", o);
  assert_int_equal(d.verdict, BRIDGE_REMOTE);
  assert_string_equal(d.target.hostport, "relay.example:7467");
  d = decide(&open, "/traced/[::1]:9000", o);
  assert_int_equal(d.verdict, BRIDGE_REMOTE);
  assert_string_equal(d.target.hostport, "[::1]:9000");
  assert_refused(&open, "/traced/bad host", o, 400);
  assert_refused(&open, "/traced/-oProxyCommand=x", o, 400);
  assert_refused(&open, "/traced/ssh://h", o, 400);
  assert_refused(&open, "/traced/h:99999", o, 400);

  bridge_cfg_t no_tls = {0};
  assert_refused(&no_tls, "/traced/relay.example:7467", o, 503);
  assert_int_equal(decide(&no_tls, "/traced", o).verdict, BRIDGE_LOCAL);

  tg_target_t hosts[2];
  char err[128];
  assert_int_equal(tg_target_parse("a.example:7000", &hosts[0], err, sizeof(err)), 0);
  snprintf(hosts[0].name, sizeof(hosts[0].name), "a.example");
  snprintf(hosts[0].server_name, sizeof(hosts[0].server_name), "relay.a");
  assert_int_equal(tg_target_parse("ssh://b.example", &hosts[1], err, sizeof(err)), 0);
  snprintf(hosts[1].name, sizeof(hosts[1].name), "b.example");
  bridge_cfg_t listed = {.tls = some_tls, .hosts = hosts, .n_hosts = 2};
  const char *names[] = {"/traced/a.example:7000", "/traced/a.example"};
  for (size_t i = 0; i < 2; i++) {
    d = decide(&listed, names[i], o);
    assert_int_equal(d.verdict, BRIDGE_REMOTE);
    assert_string_equal(d.target.hostport, "a.example:7000");
    assert_string_equal(d.target.server_name, "relay.a");
  }
  assert_refused(&listed, "/traced/a.example:7001", o, 403);
  assert_refused(&listed, "/traced/c.example", o, 403);
  assert_refused(&listed, "/traced/b.example", o, 403); /* ssh: not bridged */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(policy_paths),
      cmocka_unit_test(policy_origins_exact),
      cmocka_unit_test(policy_hosts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
