/* A snapshot's sidecar (collector/store/snap_meta.h): the text made from a row
 * parses back to it; a sidecar edited by hand or by another writer is
 * refused, naming the field: wrong types, values out of range, text over
 * the catalog's caps, a state or loss the hosts do not give, an object
 * that is not the id's, duplicate keys, sizes over the cap. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collector/store/snap_meta.h"

static const tg_coll_host_result_t hosts[] = {
    {.host = "alpha:7000", .name = "a", .outcome = TG_COLL_HOST_OK,
     .bytes = 600, .packets = 6, .loss = 2, .window_first_ms = -10,
     .window_last_ms = 20},
    {.host = "beta:7000", .outcome = TG_COLL_HOST_FAILED, .error = "gone",
     .problems = "[]", .loss = 3,
     .boost = "{\"state\":\"failed\",\"reason\":\"timeout\"}",
     .links = "{\"mode\":\"joined\",\"flows_unmatched\":4}"},
};

/* The sidecar of a PARTIAL snapshot 0x2a. */
static char *made(size_t *len) {
  tg_coll_begin_t b = {"oom", "why \"quoted\"", "o"};
  tg_coll_finish_t f = {.bytes = 600, .crc32 = 0xfeedface, .packets = 6,
                        .hosts = hosts, .n_hosts = 2, .finished_ms = 99};
  tg_coll_meta_in_t in = {.id = 0x2a, .pinned = true, .started_ms = 42,
                          .begin = &b, .finish = &f, .etag = "\"e-1\"",
                          .index = true};
  char *text = NULL;
  assert_int_equal(tg_coll_meta_format(&in, &text, len), 0);
  return text;
}

static void meta_made_parses_back(void **state) {
  (void)state;
  size_t len;
  char *text = made(&len);
  assert_int_equal(text[len - 1], '\n');
  tg_coll_meta_t m;
  char why[256];
  assert_int_equal(tg_coll_meta_parse(text, len, &m, why, sizeof why), 0);
  assert_int_equal(m.id, 0x2a);
  assert_int_equal(m.state, TG_COLL_PARTIAL);
  assert_true(m.pinned);
  assert_int_equal(m.started_ms, 42);
  assert_int_equal(m.finished_ms, 99);
  assert_string_equal(m.trigger, "oom");
  assert_string_equal(m.reason, "why \"quoted\"");
  assert_string_equal(m.origin, "o");
  assert_int_equal(m.bytes, 600);
  assert_int_equal(m.crc32, 0xfeedface);
  assert_int_equal(m.packets, 6);
  assert_int_equal(m.loss, 5);
  assert_int_equal(m.n_hosts_failed, 1);
  assert_string_equal(m.object, "snapshots/000000000000002a.pftrace");
  assert_string_equal(m.etag, "\"e-1\"");
  assert_true(m.index);
  assert_int_equal(m.n_hosts, 2);
  assert_string_equal(m.hosts[0].host, "alpha:7000");
  assert_string_equal(m.hosts[0].name, "a");
  assert_int_equal(m.hosts[0].window_first_ms, -10);
  assert_int_equal(m.hosts[1].outcome, TG_COLL_HOST_FAILED);
  assert_string_equal(m.hosts[1].error, "gone");
  assert_string_equal(m.hosts[1].problems, "[]");
  assert_string_equal(m.hosts[0].boost, "");
  assert_string_equal(m.hosts[1].boost,
                      "{\"state\":\"failed\",\"reason\":\"timeout\"}");
  assert_string_equal(m.hosts[0].links, "");
  assert_string_equal(m.hosts[1].links,
                      "{\"mode\":\"joined\",\"flows_unmatched\":4}");
  tg_coll_meta_free(&m);
  tg_coll_meta_free(&m); /* idempotent */
  free(text);
}

static void meta_of_a_failed_row_is_not_made(void **state) {
  (void)state;
  tg_coll_begin_t b = {"oom", "", ""};
  tg_coll_finish_t f = {.hosts = &hosts[1], .n_hosts = 1};
  tg_coll_meta_in_t in = {.id = 1, .begin = &b, .finish = &f};
  char *text = NULL;
  size_t len;
  assert_int_equal(tg_coll_meta_format(&in, &text, &len), -EINVAL);
  assert_null(text);
}

/* |text| with the first |from| replaced by |to|: must be refused, the
 * reason naming |field|. */
static void refused(const char *from, const char *to, const char *field) {
  size_t len;
  char *text = made(&len);
  char *at = strstr(text, from);
  if (!at) fail_msg("%s not in %s", from, text);
  size_t n = len - strlen(from) + strlen(to);
  char *edited = malloc(n + 1);
  assert_non_null(edited);
  snprintf(edited, n + 1, "%.*s%s%s", (int)(at - text), text, to,
           at + strlen(from));
  tg_coll_meta_t m;
  char why[256];
  int err = tg_coll_meta_parse(edited, n, &m, why, sizeof why);
  if (err != -EINVAL || !strstr(why, field))
    fail_msg("%s -> %s: %d, \"%s\" (wanted \"%s\")", from, to, err, why,
             field);
  free(edited);
  free(text);
}

static void meta_edited_is_refused_naming_the_field(void **state) {
  (void)state;
  refused("\"version\":1", "\"version\":2", "version");
  refused("tracegate-snapshot-meta", "other", "format");
  refused("\"id\":\"000000000000002a\"", "\"id\":\"000000000000002A\"",
          "id");
  refused("\"id\":\"000000000000002a\"", "\"id\":\"000000000000002b\"",
          "object");
  refused("\"state\":\"partial\"", "\"state\":\"complete\"", "state");
  refused("\"state\":\"partial\"", "\"state\":\"failed\"", "state");
  refused("\"loss\":5", "\"loss\":4", "loss");
  refused("\"bytes\":600", "\"bytes\":-1", "bytes");
  refused("\"bytes\":600", "\"bytes\":\"600\"", "bytes");
  refused("\"crc32\":4277009102", "\"crc32\":4294967296", "crc32");
  refused("\"pinned\":true", "\"pinned\":1", "pinned");
  refused("\"trigger\":\"oom\"", "\"trigger\":\"\"", "trigger");
  refused("\"started_ms\":42", "\"started_ms\":4.2", "started_ms");
  refused("\"outcome\":\"ok\"", "\"outcome\":\"fine\"", "hosts[0].outcome");
  refused("\"links\":\"\"", "\"links\":7", "hosts[0].links");
  refused("\"host\":\"alpha:7000\"", "\"host\":7", "hosts[0].host");
  refused("\"hosts\":[", "\"hosts\":7,\"x\":[", "hosts");
  refused("\"index\":true", "\"index\":true,\"index\":false", "JSON");
  refused("{", "[", "JSON");
  /* Text over a cap: a reason of 1025 bytes. */
  char big[1100];
  memset(big, 'r', 1025);
  big[1025] = '\0';
  char to[1200];
  snprintf(to, sizeof to, "\"reason\":\"%s\"", big);
  refused("\"reason\":\"why \\\"quoted\\\"\"", to, "reason");
}

/* A sidecar of an older collector has no boost nor links: none. */
static void meta_of_an_older_collector_has_no_links(void **state) {
  (void)state;
  size_t len;
  char *text = made(&len);
  static const char *const keys[] = {"\"boost\":\"\",", "\"links\":\"\","};
  for (size_t k = 0; k < 2; k++) {
    char *at = strstr(text, keys[k]);
    assert_non_null(at);
    size_t cut = strlen(keys[k]);
    memmove(at, at + cut, strlen(at + cut) + 1);
    len -= cut;
  }
  assert_null(strstr(text, "\"links\":\"\""));
  tg_coll_meta_t m;
  char why[256];
  assert_int_equal(tg_coll_meta_parse(text, len, &m, why, sizeof why), 0);
  assert_string_equal(m.hosts[0].boost, "");
  assert_string_equal(m.hosts[0].links, "");
  assert_string_equal(m.hosts[1].links,
                      "{\"mode\":\"joined\",\"flows_unmatched\":4}");
  tg_coll_meta_free(&m);
  free(text);
}

static void meta_over_the_cap_or_not_json_is_refused(void **state) {
  (void)state;
  tg_coll_meta_t m;
  char why[256];
  assert_int_equal(
      tg_coll_meta_parse("{", (size_t)TG_COLL_META_MAX + 1, &m, why,
                         sizeof why),
      -E2BIG);
  assert_int_equal(tg_coll_meta_parse("", 0, &m, why, sizeof why), -EINVAL);
  assert_int_equal(tg_coll_meta_parse("{\"a\":\"\\u0000\"}", 14, &m, why,
                                      sizeof why),
                   -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(meta_made_parses_back),
      cmocka_unit_test(meta_of_a_failed_row_is_not_made),
      cmocka_unit_test(meta_edited_is_refused_naming_the_field),
      cmocka_unit_test(meta_over_the_cap_or_not_json_is_refused),
      cmocka_unit_test(meta_of_an_older_collector_has_no_links),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
