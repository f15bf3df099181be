/* The collector daemon's HTTP parts without a network: the routes table
 * (routes.h) walked as api.c walks it, each refusal in its order; the
 * arguments' checks; the list's filter; the JSON of a snapshot row and
 * its hosts, read back with Python's json module; the HTTP layer's
 * counters in /metrics text; the page's embedded files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector/config/config.h"
#include "collector/daemon/api_parts.h"
#include "collector/daemon/page_assets.h"
#include "collector/daemon/routes.h"
#include "test_proc.h"

#define ID1 "0000000000000001"
#define IDMAX "7fffffffffffffff"

static const coll_route_t *table(size_t *n) { return coll_api_routes(n); }

/* Walks api.c's table: the status, and the matched row's pattern. */
static int find(const char *method, const char *path, tg_authz_role_t role,
                coll_route_match_t *m) {
  size_t n;
  const coll_route_t *t = table(&n);
  return coll_route_find(t, n, method, path, role, m);
}

static void every_documented_route_is_found(void **state) {
  (void)state;
  static const struct {
    const char *method, *path, *pattern;
    uint64_t id;
  } want[] = {
      {"GET", "/", "/", 0},
      {"GET", "/index.html", "/index.html", 0},
      {"GET", "/app.js", "/app.js", 0},
      {"GET", "/style.css", "/style.css", 0},
      {"GET", "/healthz", "/healthz", 0},
      {"HEAD", "/metrics", "/metrics", 0},
      {"GET", "/api/v1/hosts", "/api/v1/hosts", 0},
      {"GET", "/api/v1/store", "/api/v1/store", 0},
      {"GET", "/api/v1/snapshots", "/api/v1/snapshots", 0},
      {"POST", "/api/v1/snapshots", "/api/v1/snapshots", 0},
      {"GET", "/api/v1/snapshots/" ID1, "/api/v1/snapshots/{id}", 1},
      {"HEAD", "/api/v1/snapshots/" IDMAX "/trace",
       "/api/v1/snapshots/{id}/trace", INT64_MAX},
      {"GET", "/api/v1/snapshots/" ID1 "/profile",
       "/api/v1/snapshots/{id}/profile", 1},
      {"POST", "/api/v1/snapshots/" ID1 "/pin", "/api/v1/snapshots/{id}/pin", 1},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    coll_route_match_t m;
    assert_int_equal(find(want[i].method, want[i].path, TG_ROLE_RECORD, &m), 0);
    assert_non_null(m.route);
    assert_string_equal(m.route->pattern, want[i].pattern);
    assert_true(m.id == want[i].id);
    assert_non_null(m.route->fn);
  }
  /* A profile is read as the trace it is made of is: observe may. */
  coll_route_match_t m;
  assert_int_equal(find("GET", "/api/v1/snapshots/" ID1 "/profile",
                        TG_ROLE_OBSERVE, &m), 0);
  assert_int_equal(m.route->role, TG_ROLE_OBSERVE);
}

static void refusals_come_in_their_order(void **state) {
  (void)state;
  coll_route_match_t m;
  /* No row for the path. */
  assert_int_equal(find("GET", "/nope", TG_ROLE_RECORD, &m), 404);
  assert_null(m.route);
  assert_int_equal(find("GET", "/api/v1/snapshots/" ID1 "/nope", TG_ROLE_RECORD, &m), 404);
  assert_int_equal(find("GET", "/api/v1/snapshotsX", TG_ROLE_RECORD, &m), 404);
  /* An id that is not one: 404 naming the form, whatever follows it. */
  static const char *const bad_ids[] = {
      "/api/v1/snapshots/0000000000000000",  /* 0 is no id */
      "/api/v1/snapshots/8000000000000000",  /* over the range */
      "/api/v1/snapshots/000000000000000A",  /* upper case */
      "/api/v1/snapshots/00000000000000001", /* 17 digits */
      "/api/v1/snapshots/1",
      "/api/v1/snapshots/",
      "/api/v1/snapshots/../etc/trace",
      "/api/v1/snapshots/000000000000000g/pin",
  };
  for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
    assert_int_equal(find("GET", bad_ids[i], TG_ROLE_RECORD, &m), 404);
    assert_non_null(strstr(m.why, COLL_ROUTE_ID_FORM));
  }
  /* A path with rows, but not for the method: 405 saying which. */
  assert_int_equal(find("DELETE", "/api/v1/snapshots", TG_ROLE_RECORD, &m), 405);
  assert_string_equal(m.why, "GET or POST");
  assert_int_equal(find("POST", "/metrics", TG_ROLE_RECORD, &m), 405);
  assert_string_equal(m.why, "GET only");
  assert_int_equal(find("GET", "/api/v1/snapshots/" ID1 "/pin", TG_ROLE_RECORD, &m), 405);
  assert_string_equal(m.why, "POST only");
  assert_int_equal(find("PUT", "/healthz", TG_ROLE_RECORD, &m), 405);
  /* The method's row needs more than the caller has: 403. */
  assert_int_equal(find("POST", "/api/v1/snapshots", TG_ROLE_OBSERVE, &m), 403);
  assert_int_equal(find("POST", "/api/v1/snapshots/" ID1 "/pin", TG_ROLE_OBSERVE, &m), 403);
  assert_int_equal(find("GET", "/api/v1/snapshots", TG_ROLE_OBSERVE, &m), 0);
  assert_int_equal(find("GET", "/api/v1/hosts", TG_ROLE_NONE, &m), 403);
}

/* Every row under /api/v1 checks its arguments; the rows that take some
 * say which, and a POST needs the record role. */
static void the_table_is_consistent(void **state) {
  (void)state;
  size_t n;
  const coll_route_t *t = table(&n);
  for (size_t i = 0; i < n; i++) {
    if (!strncmp(t[i].pattern, "/api/v1/", 8)) assert_non_null(t[i].args);
    if (t[i].method == COLL_ROUTE_POST)
      assert_int_equal(t[i].role, TG_ROLE_RECORD);
    for (size_t j = 0; j < i; j++) /* one row per method and pattern */
      assert_false(t[i].method == t[j].method &&
                   !strcmp(t[i].pattern, t[j].pattern));
  }
}

static int check(const char *const *allowed, const char *const *args, size_t n,
                 const char *want_why) {
  char why[160] = "";
  int rv = coll_route_args_check(allowed, args, n, why, sizeof(why));
  if (want_why) assert_string_equal(why, want_why);
  return rv;
}

static void arguments_are_known_valued_and_once(void **state) {
  (void)state;
  static const char *const allowed[] = {"reason", "wait", NULL};
  static const char *const none[] = {NULL};
  const char *ok[] = {"reason=a=b", "wait=1"};
  assert_int_equal(check(allowed, ok, 2, ""), 0);
  assert_int_equal(check(none, ok, 0, ""), 0);
  const char *unknown[] = {"wait=1", "reasons=x"};
  assert_int_equal(check(allowed, unknown, 2, "reasons: not an argument of this request"),
                   -EINVAL);
  const char *prefix[] = {"reaso=x"};
  assert_int_equal(check(allowed, prefix, 1, "reaso: not an argument of this request"),
                   -EINVAL);
  const char *twice[] = {"wait=0", "reason=", "wait=1"};
  assert_int_equal(check(allowed, twice, 3, "wait: given twice"), -EINVAL);
  const char *bare[] = {"wait"};
  assert_int_equal(check(allowed, bare, 1, "wait: no value (name=value)"), -EINVAL);
  assert_int_equal(check(none, bare, 1, "wait: not an argument of this request"),
                   -EINVAL);
  /* A long name is cut in the refusal. */
  char longname[300];
  memset(longname, 'x', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = 0;
  const char *lng[] = {longname};
  char why[160];
  assert_int_equal(coll_route_args_check(allowed, lng, 1, why, sizeof(why)), -EINVAL);
  assert_int_equal(strspn(why, "x"), 64);
  /* The values: "reason=" is present and empty; absent is NULL. */
  assert_string_equal(coll_route_arg(twice, 3, "reason"), "");
  assert_string_equal(coll_route_arg(twice, 3, "wait"), "0");
  assert_null(coll_route_arg(twice, 3, "group"));
}

static void the_list_filter_takes_whole_values_in_range(void **state) {
  (void)state;
  tg_coll_filter_t f;
  const char *why = NULL;
  assert_int_equal(coll_list_filter(NULL, 0, &f, &why), 0);
  assert_int_equal(f.limit, COLL_LIST_DEFAULT);
  assert_true(f.from_ms == INT64_MIN && f.to_ms == INT64_MAX);
  assert_null(f.trigger);
  const char *all[] = {"from=-5", "to=9", "limit=1000", "before=" IDMAX,
                       "state=partial", "trigger=oom", "host=a:1"};
  assert_int_equal(coll_list_filter(all, 7, &f, &why), 0);
  assert_true(f.from_ms == -5 && f.to_ms == 9 && f.limit == 1000);
  assert_true(f.before_id == INT64_MAX);
  assert_int_equal(f.states, TG_COLL_STATE_BIT(TG_COLL_PARTIAL));
  assert_string_equal(f.trigger, "oom");
  assert_string_equal(f.host, "a:1");
  static const struct {
    const char *arg, *why;
  } bad[] = {
      {"limit=0", "limit: 1..1000"},
      {"limit=1001", "limit: 1..1000"},
      {"limit=1x", "limit: 1..1000"},
      {"limit=", "limit: 1..1000"},
      {"from=1.5", "from: epoch milliseconds"},
      {"to=99999999999999999999", "to: epoch milliseconds"},
      {"before=1", "before: " COLL_ROUTE_ID_FORM},
      {"state=Complete", "state: pending, complete, partial or failed"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *a[] = {bad[i].arg};
    why = NULL;
    assert_int_equal(coll_list_filter(a, 1, &f, &why), -EINVAL);
    assert_string_equal(why, bad[i].why);
  }
  char host[TG_COLL_HOST_MAX + 8] = "host=";
  memset(host + 5, 'h', TG_COLL_HOST_MAX + 1);
  host[5 + TG_COLL_HOST_MAX + 1] = 0;
  const char *h[] = {host};
  assert_int_equal(coll_list_filter(h, 1, &f, &why), -EINVAL);
  assert_string_equal(why, "trigger or host: too long");
}

/* Writes |text| to a file of |dir| and returns its path (static). */
static const char *in_file(const char *dir, const char *name, const char *text,
                           size_t len) {
  static char path[600];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return path;
}

static void a_snapshot_row_is_json_with_its_texts_escaped(void **state) {
  (void)state;
  char dir[256];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "routes"), 0);
  tg_coll_snapshot_t s = {.id = 0x1234, .state = TG_COLL_FAILED,
                          .pinned = true, .started_ms = -1,
                          .finished_ms = INT64_MAX, .bytes = UINT64_MAX,
                          .crc32 = UINT32_MAX, .loss = 7, .n_hosts = 3,
                          .n_hosts_failed = 3};
  strcpy(s.trigger, "oom\"killer\xc3");
  strcpy(s.reason, "line\nbreak\\ and </script>");
  strcpy(s.origin, "h\x01st");
  strcpy(s.failure, "\xc3\xa9t\xc3\xa9");
  tg_coll_host_t hosts[2] = {
      {.outcome = TG_COLL_HOST_OK, .bytes = 10, .packets = 2, .loss = 1,
       .window_first_ms = 5, .window_last_ms = 6},
      {.outcome = TG_COLL_HOST_FAILED},
  };
  strcpy(hosts[0].host, "a.example:7");
  strcpy(hosts[1].host, "b\"\xe2\x82\xac\xe2\x82");
  strcpy(hosts[1].error, "re\xff\xfeused \xe2\x82");
  json_t *doc = json_pack("{s:o, s:o, s:o}", "snapshot", coll_json_snapshot(&s),
                          "hosts", coll_json_snap_hosts(hosts, 2),
                          "none", coll_json_snap_hosts(hosts, 0));
  assert_non_null(doc);
  char *buf = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  assert_non_null(buf);
  const char *p = in_file(dir, "row.json", buf, strlen(buf));
  assert_json(p, "snapshot.id", "\"0000000000001234\"");
  assert_json(p, "snapshot.state", "\"failed\"");
  assert_json(p, "snapshot.pinned", "true");
  assert_json(p, "snapshot.started_ms", "-1");
  assert_json(p, "snapshot.finished_ms", "9223372036854775807");
  /* Above INT64_MAX: the string of its digits (common/json.h). */
  assert_json(p, "snapshot.bytes", "\"18446744073709551615\"");
  assert_json(p, "snapshot.loss", "7");
  assert_json(p, "snapshot.crc32", "4294967295");
  assert_json(p, "snapshot.hosts_failed", "3");
  assert_json(p, "snapshot.trigger", "\"oom\\\"killer\\ufffd\"");
  assert_json(p, "snapshot.reason", "\"line\\nbreak\\\\ and </script>\"");
  assert_json(p, "snapshot.origin", "\"h\\u0001st\"");
  assert_json(p, "hosts.0.host", "\"a.example:7\"");
  assert_json(p, "hosts.0.outcome", "\"ok\"");
  assert_json(p, "hosts.0.window_last_ms", "6");
  assert_json(p, "hosts.1.host", "\"b\\\"\\u20ac\\ufffd\"");
  /* Bytes that are not UTF-8: one U+FFFD per maximal subpart. */
  assert_json(p, "hosts.1.error", "\"re\\ufffd\\ufffdused \\ufffd\"");
  assert_json(p, "snapshot.failure", "\"\\u00e9t\\u00e9\"");
  assert_json(p, "none", "[]");
  free(buf);
  assert_int_equal(tg_test_rm_rf(dir), 0);
}

static void the_http_counters_are_in_metrics_text(void **state) {
  (void)state;
  tg_http_server_stats_t hs = {.refused_per_source = 1, .refused_max_conns = 2,
                               .evicted = 3, .refused_peers = 4,
                               .ended_by_reload = 5};
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  coll_metrics_http(f, &hs);
  assert_int_equal(fclose(f), 0);
  static const char *const want[] = {
      "\ntracegate_collector_http_refused_total{reason=\"per_source\"} 1\n",
      "\ntracegate_collector_http_refused_total{reason=\"max_conns\"} 2\n",
      "\n# TYPE tracegate_collector_http_evictions_total counter\n"
      "tracegate_collector_http_evictions_total 3\n",
      "\n# TYPE tracegate_collector_http_refused_peers_total counter\n"
      "tracegate_collector_http_refused_peers_total 4\n",
      "\n# TYPE tracegate_collector_http_ended_by_reload_total counter\n"
      "tracegate_collector_http_ended_by_reload_total 5\n",
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if (!strstr(buf, want[i])) fail_msg("metrics lack %s in:\n%s", want[i], buf);
  free(buf);
}

/* The page's files are embedded whole; the page has its two marks, the
 * UI's URL goes in escaped, and whether the page may probe it. */
static void the_page_files_are_embedded(void **state) {
  (void)state;
  static const char *const names[] = {"index.html", "style.css", "app.js"};
  for (size_t i = 0; i < 3; i++) {
    const coll_page_asset_t *a = coll_page_asset(names[i]);
    assert_non_null(a);
    assert_true(a->len > 100);
    assert_int_equal(a->bytes[a->len], 0);
    assert_int_equal(strlen((const char *)a->bytes), a->len);
  }
  assert_null(coll_page_asset("nope.js"));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(coll_page_render(f, "https://ui.example/a?b=1&c=\"'<>"), 0);
  assert_int_equal(fclose(f), 0);
  assert_non_null(strstr(buf, "<body data-ui=\"https://ui.example/a?b=1&amp;c="
                              "&quot;&#39;&lt;&gt;\">"));
  assert_null(strstr(buf, "{{"));
  /* A plain origin (what follows it is the path's): the page may probe. */
  assert_non_null(strstr(buf, " data-probe=\"1\">"));
  free(buf);
  /* A host a CSP source cannot spell: the page may not. */
  f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(coll_page_render(f, "https://ui_example/"), 0);
  assert_int_equal(fclose(f), 0);
  assert_non_null(strstr(buf, " data-probe=\"0\">"));
  assert_non_null(strstr(buf, "<script src=\"/app.js\"></script>"));
  assert_non_null(strstr(buf, "href=\"/style.css\""));
  assert_null(strstr(buf, "<style")); /* the CSP allows no inline style */
  free(buf);
}

/* The CSP's connect-src gets the UI's origin, and only a plain one: a
 * URL whose host or port could carry anything else into the policy is
 * left out of it. */
static void the_ui_origin_goes_into_connect_src_when_plain(void **state) {
  (void)state;
  static const struct {
    const char *url, *origin; /* NULL: refused */
  } cases[] = {
      {"https://ui.perfetto.dev", "https://ui.perfetto.dev"},
      {"https://ui.perfetto.dev/", "https://ui.perfetto.dev"},
      {"http://127.0.0.1:8099/ui.html?x=1#y", "http://127.0.0.1:8099"},
      {"https://user:pw@ui.example:443/p", "https://ui.example:443"},
      {"https://a@b@ui.example/p", "https://ui.example"},
      {"http://[::1]:9000/", "http://[::1]:9000"},
      {"http://UI.Example\\path", "http://UI.Example"},
      {"https://ui.example?q", "https://ui.example"},
      {"ftp://ui.example/", NULL},
      {"https://", NULL},
      {"https:///p", NULL},
      {"https://ui.example:/", NULL},
      {"https://ui.example:1234567/", NULL},
      {"https://ui.example:80x/", NULL},
      {"https://ui;example/", NULL},
      {"https://ui.example,x/", NULL},
      {"https://[::1/", NULL},
      {"https://[]/", NULL},
      {"https://[::1]x/", NULL},
      {"https://%75i.example/", NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char o[128];
    int rv = coll_page_origin(o, sizeof(o), cases[i].url);
    if (!cases[i].origin) {
      if (rv != -1) fail_msg("%s: origin %s, want refused", cases[i].url, o);
      continue;
    }
    if (rv != 0) fail_msg("%s: refused, want %s", cases[i].url, cases[i].origin);
    assert_string_equal(o, cases[i].origin);
  }
  char small[8];
  assert_int_equal(coll_page_origin(small, sizeof(small), "https://ui.example"), -1);

  char csp[COLL_PAGE_CSP_MAX];
  coll_page_csp(csp, sizeof(csp), "http://127.0.0.1:8099/ui.html");
  assert_non_null(strstr(csp, "; connect-src 'self' http://127.0.0.1:8099; "));
  assert_non_null(strstr(csp, "script-src 'self'; style-src 'self';"));
  coll_page_csp(csp, sizeof(csp), "https://ui;example/");
  assert_non_null(strstr(csp, "; connect-src 'self'; "));
  /* The longest ui_url the config takes fits. */
  char url[TG_COLL_CONFIG_URL_MAX + 1];
  memset(url, 'a', sizeof(url) - 1);
  memcpy(url, "https://", 8);
  url[sizeof(url) - 1] = '\0';
  coll_page_csp(csp, sizeof(csp), url);
  assert_non_null(strstr(csp, "form-action 'none'"));
  assert_int_equal(strstr(csp, "connect-src 'self' https://aaa")[19 + 8 + 504], ';');
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_documented_route_is_found),
      cmocka_unit_test(refusals_come_in_their_order),
      cmocka_unit_test(the_table_is_consistent),
      cmocka_unit_test(arguments_are_known_valued_and_once),
      cmocka_unit_test(the_list_filter_takes_whole_values_in_range),
      cmocka_unit_test(a_snapshot_row_is_json_with_its_texts_escaped),
      cmocka_unit_test(the_http_counters_are_in_metrics_text),
      cmocka_unit_test(the_page_files_are_embedded),
      cmocka_unit_test(the_ui_origin_goes_into_connect_src_when_plain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
