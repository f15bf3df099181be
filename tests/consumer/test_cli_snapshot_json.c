/* The collector's snapshot reply as `tracegate snapshot` reads it
 * (consumer/cli/snapshot_json.h): the collector's own replies give their
 * fields; hostile text (cut anywhere, nested past the bound, numbers past
 * 64 bits, escapes of every kind, fields twice or of the wrong type) is
 * refused or kept within its buffers, never read past its length. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "consumer/cli/json_out.h"
#include "consumer/cli/snapshot_json.h"

static cli_snap_reply_t g_r;
static char g_err[128];

/* Parses |text| from an exact-size heap copy: a read past its end is an
 * ASan report. */
static int parse_n(const char *text, size_t n) {
  char *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, text, n);
  int rv = cli_snap_parse(copy, n, &g_r, g_err, sizeof(g_err));
  free(copy);
  return rv;
}

static int parse(const char *text) { return parse_n(text, strlen(text)); }

/* What collector/daemon/api.c writes for a partial snapshot. */
static const char partial[] =
    "{\"snapshot\":{\"id\":\"000000000000002a\",\"state\":\"partial\","
    "\"pinned\":false,\"started_ms\":1700000000000,\"finished_ms\":"
    "1700000001000,\"bytes\":1258291,\"crc32\":12345,\"packets\":10,"
    "\"loss\":0,\"hosts\":3,\"hosts_failed\":1,\"trigger\":\"operator\","
    "\"reason\":\"cli\",\"origin\":\"\",\"failure\":null},\n"
    "\"hosts\":[{\"host\":\"a:7467\",\"outcome\":\"ok\",\"error\":null,"
    "\"bytes\":1},{\"host\":\"b:7467\",\"outcome\":\"failed\",\"error\":"
    "\"connect: refused\",\"bytes\":0},{\"host\":\"c:7467\",\"outcome\":"
    "\"ok\",\"error\":\"\"}]}\n";

static void the_collectors_reply_gives_its_fields(void **state) {
  (void)state;
  assert_int_equal(parse(partial), 0);
  assert_true(g_r.has_snapshot);
  assert_string_equal(g_r.id, "000000000000002a");
  assert_string_equal(g_r.state, "partial");
  assert_true(g_r.has_hosts && g_r.has_hosts_failed && g_r.has_bytes);
  assert_int_equal(g_r.hosts, 3);
  assert_int_equal(g_r.hosts_failed, 1);
  assert_int_equal(g_r.bytes, 1258291);
  assert_int_equal(g_r.n_host_entries, 3);
  assert_int_equal(g_r.n_failed, 1);
  assert_string_equal(g_r.failed[0].host, "b:7467");
  assert_string_equal(g_r.failed[0].error, "connect: refused");
  assert_false(g_r.failed[0].partial);
}

static void a_refusal_gives_its_error(void **state) {
  (void)state;
  assert_int_equal(parse("{\"error\":\"over max_snapshots_per_minute: not taken\"}\n"), 0);
  assert_false(g_r.has_snapshot);
  assert_string_equal(g_r.error, "over max_snapshots_per_minute: not taken");
  /* 202 without wait: an id alone is no snapshot. */
  assert_int_equal(parse("{\"id\":\"000000000000002a\"}"), 0);
  assert_false(g_r.has_snapshot);
}

static void every_cut_of_a_reply_is_refused(void **state) {
  (void)state;
  size_t n = strlen(partial);
  /* Up to the closing brace, every prefix is incomplete JSON. */
  size_t close_at = (size_t)(strrchr(partial, '}') - partial);
  for (size_t i = 0; i <= close_at; i++) {
    assert_int_equal(parse_n(partial, i), -EINVAL);
    assert_false(g_r.has_snapshot);
    assert_true(g_err[0] != 0);
  }
  assert_int_equal(parse_n(partial, n), 0);
}

static void nesting_is_bounded(void **state) {
  (void)state;
  char buf[4096];
  /* Within the bound, deep in a field nobody reads: fine. */
  size_t len = 0;
  len += (size_t)sprintf(buf, "{\"x\":");
  for (int i = 0; i < CLI_SNAP_MAX_DEPTH - 1; i++) buf[len++] = '[';
  for (int i = 0; i < CLI_SNAP_MAX_DEPTH - 1; i++) buf[len++] = ']';
  buf[len++] = '}';
  assert_int_equal(parse_n(buf, len), 0);
  /* One past it, and far past it (no stack to spare for that). */
  for (int extra = 1; extra <= 2; extra++) {
    int depth = extra == 1 ? CLI_SNAP_MAX_DEPTH : 2000;
    len = (size_t)sprintf(buf, "{\"x\":");
    for (int i = 0; i < depth; i++) buf[len++] = '[';
    for (int i = 0; i < depth && len < sizeof(buf) - 2; i++) buf[len++] = ']';
    buf[len++] = '}';
    assert_int_equal(parse_n(buf, len), -EINVAL);
    assert_non_null(strstr(g_err, "deep"));
  }
}

static void counts_must_be_whole_and_within_64_bits(void **state) {
  (void)state;
  const char *fmt = "{\"snapshot\":{\"id\":\"0000000000000001\",\"state\":"
                    "\"complete\",\"bytes\":%s}}";
  char buf[512];
  snprintf(buf, sizeof(buf), fmt, "18446744073709551615");
  assert_int_equal(parse(buf), 0);
  assert_true(g_r.bytes == UINT64_MAX);
  const char *bad[] = {"18446744073709551616", "1e3", "1.5", "-1", "01",
                       "99999999999999999999999999999999999999999999", "\"3\"",
                       "null", "-", "1.", "1e"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(buf, sizeof(buf), fmt, bad[i]);
    assert_int_equal(parse(buf), -EINVAL);
  }
  /* A huge number where nobody reads one is only JSON. */
  assert_int_equal(parse("{\"x\":-123456789012345678901234567890.5e+999}"), 0);
}

static void escapes_are_decoded_to_utf8(void **state) {
  (void)state;
  assert_int_equal(
      parse("{\"hosts\":[{\"host\":\"a\\\"b\\\\c\\/\\u00c3\\u00a9\\ud83d\\ude00\\u0000"
            "\\ud800x\\n\\u001b[2J\",\"outcome\":\"failed\",\"error\":null}]}"),
      0);
  assert_int_equal(g_r.n_failed, 1);
  /* Bytes escaped one by one (as the collector does) are those bytes
   * again; NUL and a lone surrogate became U+FFFD; the rest is itself. */
  assert_string_equal(g_r.failed[0].host,
                      "a\"b\\c/\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbd"
                      "\xef\xbf\xbdx\n\x1b[2J");
  assert_string_equal(g_r.failed[0].error, "");
  assert_int_equal(parse("{\"error\":\"\\u00e9\\u0100\\u07ff\\uffff\"}"), 0);
  assert_string_equal(g_r.error, "\xe9\xc4\x80\xdf\xbf\xef\xbf\xbf");
  const char *bad[] = {"{\"error\":\"\\x\"}", "{\"error\":\"\\u12\"}",
                       "{\"error\":\"\\u12g4\"}", "{\"error\":\"a\nb\"}",
                       "{\"error\":\"\\", "{\"error\":\"\\u"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(parse(bad[i]), -EINVAL);
}

/* What the collector writes with cli_json_str() reads back as the same
 * bytes: well-formed UTF-8 as it is, the bytes of malformed UTF-8 and
 * control bytes through their escapes. */
static void written_text_reads_back_the_same(void **state) {
  (void)state;
  static const char *texts[] = {
      "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",      /* UTF-8 */
      "bad \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80 \xc0\xaf", /* not */
      "ctl \x01\x1b[2J\x7f \"q\" \\ \xc2\x85",            /* controls */
  };
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    assert_non_null(f);
    fputs("{\"error\":", f);
    cli_json_str(f, texts[i]);
    fputs("}", f);
    assert_int_equal(fclose(f), 0);
    /* Well-formed UTF-8 is written as it is, not escaped byte by byte. */
    if (i == 0) assert_non_null(strstr(doc, "caf\xc3\xa9 \xe2\x9c\x93"));
    assert_int_equal(parse_n(doc, len), 0);
    assert_string_equal(g_r.error, texts[i]);
    free(doc);
  }
}

/* A host cut short is listed with the failed ones, marked partial. */
static void a_partial_host_is_marked(void **state) {
  (void)state;
  assert_int_equal(
      parse("{\"hosts\":[{\"host\":\"a\",\"outcome\":\"ok\",\"error\":null},"
            "{\"host\":\"b\",\"outcome\":\"partial\",\"error\":\"link lost\"},"
            "{\"host\":\"c\",\"outcome\":\"failed\",\"error\":\"refused\"}]}"),
      0);
  assert_int_equal(g_r.n_host_entries, 3);
  assert_int_equal(g_r.n_failed, 2);
  assert_string_equal(g_r.failed[0].host, "b");
  assert_true(g_r.failed[0].partial);
  assert_string_equal(g_r.failed[1].host, "c");
  assert_false(g_r.failed[1].partial);
}

static void long_strings_are_cut_on_a_character(void **state) {
  (void)state;
  static char buf[8192];
  /* "é" is two bytes: 1000 of them overflow the 512-byte error. */
  size_t len = (size_t)sprintf(buf, "{\"hosts\":[{\"host\":\"h\",\"outcome\":"
                               "\"failed\",\"error\":\"x");
  for (int i = 0; i < 1000; i++) len += (size_t)sprintf(buf + len, "\xc3\xa9");
  len += (size_t)sprintf(buf + len, "\"}]}");
  assert_int_equal(parse_n(buf, len), 0);
  const char *e = g_r.failed[0].error;
  size_t n = strlen(e);
  assert_true(n > 0 && n < sizeof(g_r.failed[0].error));
  /* "x" then whole "é"s: an odd length. */
  assert_int_equal(n % 2, 1);
  assert_int_equal((unsigned char)e[n - 1], 0xa9);
}

static void wrong_shapes_are_refused(void **state) {
  (void)state;
  const char *bad[] = {
      "",
      "[]",
      "{} {}",
      "{\"snapshot\":{\"state\":\"complete\"}}",                 /* no id */
      "{\"snapshot\":{\"id\":\"000000000000002A\"}}",            /* upper case */
      "{\"snapshot\":{\"id\":\"000000000000002\"}}",             /* 15 digits */
      "{\"snapshot\":{\"id\":\"000000000000002a0\"}}",           /* 17 digits */
      "{\"snapshot\":{\"id\":2}}",
      "{\"snapshot\":[]}",
      "{\"snapshot\":{\"id\":\"0000000000000001\",\"id\":\"0000000000000002\"}}",
      "{\"snapshot\":{\"id\":\"0000000000000001\"},\"snapshot\":{\"id\":\"0000000000000002\"}}",
      "{\"hosts\":{}}",
      "{\"hosts\":[1]}",
      "{\"hosts\":[{\"host\":\"a\"}]}",                          /* no outcome */
      "{\"hosts\":[{\"outcome\":\"ok\"},]}",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "{\"a\":tru}",
      "{\"a\":nul}",
      "{'a':1}",
      "{\"a\":1}x",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (parse(bad[i]) != -EINVAL) fail_msg("accepted: %s", bad[i]);
    assert_false(g_r.has_snapshot);
  }
  /* A NUL inside the text is a byte like any other: not JSON there. */
  assert_int_equal(parse_n("{\"a\":1}\0", 8), -EINVAL);
}

static void failed_hosts_past_the_bound_are_counted(void **state) {
  (void)state;
  size_t cap = 200 * 64;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t len = (size_t)snprintf(buf, cap, "{\"hosts\":[");
  for (int i = 0; i < 100; i++)
    len += (size_t)snprintf(buf + len, cap - len,
                            "%s{\"host\":\"h%d\",\"outcome\":\"failed\"}",
                            i ? "," : "", i);
  len += (size_t)snprintf(buf + len, cap - len, "]}");
  assert_int_equal(parse_n(buf, len), 0);
  assert_int_equal(g_r.n_host_entries, 100);
  assert_int_equal(g_r.n_failed, 100);
  assert_string_equal(g_r.failed[CLI_SNAP_MAX_FAILED - 1].host, "h63");
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_collectors_reply_gives_its_fields),
      cmocka_unit_test(a_refusal_gives_its_error),
      cmocka_unit_test(every_cut_of_a_reply_is_refused),
      cmocka_unit_test(nesting_is_bounded),
      cmocka_unit_test(counts_must_be_whole_and_within_64_bits),
      cmocka_unit_test(escapes_are_decoded_to_utf8),
      cmocka_unit_test(written_text_reads_back_the_same),
      cmocka_unit_test(a_partial_host_is_marked),
      cmocka_unit_test(long_strings_are_cut_on_a_character),
      cmocka_unit_test(wrong_shapes_are_refused),
      cmocka_unit_test(failed_hosts_past_the_bound_are_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
