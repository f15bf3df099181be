/* The collector's snapshot reply as `tracegate snapshot` reads it
 * (cli/snapshot_json.h): the collector's own replies give their
 * fields; hostile text (cut anywhere, nested past jansson's bound, numbers
 * past 64 bits, escapes of every kind, keys twice, fields of the wrong
 * type, named) is refused or kept within its buffers, never read past its
 * length; text that was not UTF-8 reads as Python reads it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"
#include "cli/snapshot_json.h"
#include "test_proc.h"

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

/* jansson's bound (JSON_PARSER_MAX_DEPTH, jansson_config.h), the
 * top-level object included, in a field nobody reads. */
static void nesting_is_bounded(void **state) {
  (void)state;
  size_t cap = 200000;
  char *buf = malloc(cap);
  assert_non_null(buf);
  int depths[] = {JSON_PARSER_MAX_DEPTH - 1, JSON_PARSER_MAX_DEPTH, 90000};
  for (size_t k = 0; k < 3; k++) {
    size_t len = (size_t)sprintf(buf, "{\"x\":");
    for (int i = 0; i < depths[k]; i++) buf[len++] = '[';
    for (int i = 0; i < depths[k]; i++) buf[len++] = ']';
    buf[len++] = '}';
    assert_int_equal(parse_n(buf, len), k == 0 ? 0 : -EINVAL);
  }
  free(buf);
}

static void counts_must_be_whole_and_within_64_bits(void **state) {
  (void)state;
  const char *fmt = "{\"snapshot\":{\"id\":\"0000000000000001\",\"state\":"
                    "\"complete\",\"bytes\":%s}}";
  char buf[512];
  /* A number up to INT64_MAX, the string of its digits above. */
  snprintf(buf, sizeof(buf), fmt, "9223372036854775807");
  assert_int_equal(parse(buf), 0);
  assert_true(g_r.bytes == INT64_MAX);
  snprintf(buf, sizeof(buf), fmt, "\"18446744073709551615\"");
  assert_int_equal(parse(buf), 0);
  assert_true(g_r.bytes == UINT64_MAX);
  snprintf(buf, sizeof(buf), fmt, "\"9223372036854775808\"");
  assert_int_equal(parse(buf), 0);
  assert_true(g_r.bytes == (uint64_t)INT64_MAX + 1);
  const char *bad[] = {"18446744073709551615", "\"18446744073709551616\"",
                       "1e3", "1.5", "-1", "01", "\"3\"",
                       "\"09223372036854775808\"", "\"+9223372036854775808\"",
                       "99999999999999999999999999999999999999999999", "true",
                       "null", "-", "1.", "1e", "[]", "{}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(buf, sizeof(buf), fmt, bad[i]);
    if (parse(buf) != -EINVAL) fail_msg("accepted bytes: %s", bad[i]);
    assert_false(g_r.has_snapshot);
  }
  /* jansson holds every number in 64 bits or a double: past them, even
   * where nobody reads one, the document is refused. */
  assert_int_equal(parse("{\"x\":-123456789012345678901234567890.5e+999}"), -EINVAL);
  assert_int_equal(parse("{\"x\":123456789012345678901234567890}"), -EINVAL);
  assert_int_equal(parse("{\"x\":-1.5e300}"), 0);
}

/* A field of the wrong type fails the reply, naming the field. */
static void a_wrong_type_names_its_field(void **state) {
  (void)state;
  static const struct {
    const char *doc, *field;
  } cases[] = {
      {"{\"snapshot\":{\"id\":\"0000000000000001\",\"bytes\":\"x\"}}", "snapshot.bytes"},
      {"{\"snapshot\":{\"id\":\"0000000000000001\",\"hosts\":-3}}", "snapshot.hosts"},
      {"{\"snapshot\":{\"id\":\"0000000000000001\",\"hosts_failed\":1.0}}",
       "snapshot.hosts_failed"},
      {"{\"snapshot\":{\"id\":\"0000000000000001\",\"state\":7}}", "snapshot.state"},
      {"{\"snapshot\":{\"id\":2}}", "snapshot.id"},
      {"{\"snapshot\":{\"state\":\"complete\"}}", "snapshot.id"},
      {"{\"snapshot\":[]}", "snapshot"},
      {"{\"hosts\":{}}", "hosts"},
      {"{\"hosts\":[{\"outcome\":\"ok\"},{\"outcome\":[]}]}", "hosts[1].outcome"},
      {"{\"hosts\":[{\"outcome\":\"ok\",\"host\":null}]}", "hosts[0].host"},
      {"{\"hosts\":[{\"outcome\":\"failed\",\"error\":false}]}", "hosts[0].error"},
      {"{\"hosts\":[{\"host\":\"a\"}]}", "hosts[0].outcome"},
      {"{\"error\":{}}", "error"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (parse(cases[i].doc) != -EINVAL) fail_msg("accepted: %s", cases[i].doc);
    char want[64];
    snprintf(want, sizeof(want), "%s: ", cases[i].field);
    if (strncmp(g_err, want, strlen(want)) != 0)
      fail_msg("%s: says \"%s\", not the field %s", cases[i].doc, g_err,
               cases[i].field);
  }
}

/* No key twice in any object, read or not (JSON_REJECT_DUPLICATES). */
static void a_key_twice_is_refused(void **state) {
  (void)state;
  const char *bad[] = {
      "{\"snapshot\":{\"id\":\"0000000000000001\",\"id\":\"0000000000000002\"}}",
      "{\"snapshot\":{\"id\":\"0000000000000001\"},\"snapshot\":{\"id\":\"0000000000000002\"}}",
      "{\"error\":\"a\",\"error\":null}",
      "{\"x\":{\"y\":1,\"y\":1}}",
      "{\"hosts\":[{\"outcome\":\"ok\",\"outcome\":\"failed\"}]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (parse(bad[i]) != -EINVAL) fail_msg("accepted: %s", bad[i]);
    assert_false(g_r.has_snapshot);
  }
}

static void escapes_are_decoded_to_utf8(void **state) {
  (void)state;
  assert_int_equal(
      parse("{\"hosts\":[{\"host\":\"a\\\"b\\\\c\\/\\u00e9\\ud83d\\ude00"
            "\\n\\u001b[2J\",\"outcome\":\"failed\",\"error\":null}]}"),
      0);
  assert_int_equal(g_r.n_failed, 1);
  assert_string_equal(g_r.failed[0].host,
                      "a\"b\\c/\xc3\xa9\xf0\x9f\x98\x80\n\x1b[2J");
  assert_string_equal(g_r.failed[0].error, "");
  /* \u00XX is the code point U+00XX, as every reader reads it. */
  assert_int_equal(parse("{\"error\":\"\\u00c3\\u00a9\\u0100\\u07ff\\uffff\"}"), 0);
  assert_string_equal(g_r.error, "\xc3\x83\xc2\xa9\xc4\x80\xdf\xbf\xef\xbf\xbf");
  /* NUL (the text is a C string), lone surrogates, bad escapes, raw
   * control bytes and bytes that are not UTF-8 are not JSON text. */
  const char *bad[] = {"{\"error\":\"\\x\"}", "{\"error\":\"\\u12\"}",
                       "{\"error\":\"\\u12g4\"}", "{\"error\":\"a\nb\"}",
                       "{\"error\":\"\\", "{\"error\":\"\\u",
                       "{\"error\":\"a\\u0000b\"}", "{\"error\":\"\\ud800x\"}",
                       "{\"error\":\"\\udc00\"}", "{\"error\":\"\xff\"}",
                       "{\"error\":\"\xc3(\"}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (parse(bad[i]) != -EINVAL) fail_msg("accepted: %s", bad[i]);
}

/* The hex of |n| bytes at |p| into |out| (2n + 1 bytes). */
static void hex(const char *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", (unsigned char)p[i]);
  out[2 * n] = 0;
}

/* Python's reading of hosts[0].host in |path| and its own decoding of
 * |raw_hex| (bytes.decode("utf-8", "replace")), each as the hex of its
 * UTF-8, on two lines of |out|. */
static void python_reads(const char *path, const char *raw_hex, char *out,
                         size_t cap) {
  char cmd[8192];
  snprintf(cmd, sizeof(cmd),
           "python3 -c 'import json,sys; "
           "print(json.load(open(sys.argv[1]))[\"hosts\"][0][\"host\"]"
           ".encode().hex()); "
           "print(bytes.fromhex(sys.argv[2]).decode(\"utf-8\",\"replace\")"
           ".encode().hex())' %s %s",
           path, raw_hex);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  assert_int_equal(pclose(p), 0);
}

/* The rule for bytes that are not UTF-8 (common/json.h), end to end: what
 * the collector writes with tg_json_text() reads back through this reader
 * as the same text Python's json module reads, and that is Python's own
 * decoding of the original bytes, U+FFFD for each maximal subpart of an
 * ill-formed sequence. Well-formed UTF-8 and control bytes stay. */
static void text_that_is_not_utf8_reads_as_python_reads_it(void **state) {
  (void)state;
  char dir[128], path[256];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "snapjson"), 0);
  snprintf(path, sizeof(path), "%s/reply.json", dir);
  static const char *texts[] = {
      "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",              /* UTF-8 */
      "bad \xff\xfe \xc3( \xe2\x82 \xed\xa0\x80 \xc0\xaf",      /* not */
      "\xf0\x9f\x98 \xf4\x90\x80\x80 \xe0\x80\xaf \xf1\x80\x80", /* cut, too high */
      "ctl \x01\x1b[2J\x7f \"q\" \\ \xc2\x85",                   /* controls */
      "\x80\xbf\xc2",
  };
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    json_t *doc = json_pack("{s:[{s:o, s:s, s:o}]}", "hosts", "host",
                            tg_json_text(texts[i]), "outcome", "failed",
                            "error", tg_json_text(texts[i]));
    assert_non_null(doc);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    assert_non_null(text);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(parse(text), 0);
    free(text);
    assert_string_equal(g_r.failed[0].host, g_r.failed[0].error);
    char ours[1024], raw[1024], py[2048], want[2100];
    hex(g_r.failed[0].host, strlen(g_r.failed[0].host), ours);
    hex(texts[i], strlen(texts[i]), raw);
    python_reads(path, raw, py, sizeof(py));
    snprintf(want, sizeof(want), "%s\n%s\n", ours, ours);
    if (strcmp(py, want) != 0)
      fail_msg("text %zu: ours %s, Python's reading and decoding:\n%s", i, ours, py);
    /* Well-formed UTF-8 is the same bytes. */
    if (i == 0) assert_string_equal(g_r.failed[0].host, texts[0]);
  }
  assert_int_equal(tg_test_rm_rf(dir), 0);
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

/* A host partial for its data sources: its problems are kept (the first
 * CLI_SNAP_MAX_PROBLEMS, the rest counted), with their kind (a merge's
 * has no data source), extra keys ignored, an ok
 * host's kept apart; a
 * problems field of the wrong shape names itself. */
static void a_hosts_problems_are_read(void **state) {
  (void)state;
  const char *p1 = "{\"kind\":\"data_source\",\"data_source\":\"linux.ftrace\","
                   "\"code\":\"TG-7010\",\"why\":\"did not start\","
                   "\"reason\":\"not_started\",\"events\":2}";
  const char *p2 = "{\"kind\":\"data_source\",\"data_source\":\"x.y\","
                   "\"code\":\"TG-7012\",\"why\":\"not offered\"}";
  char text[1024];
  snprintf(text, sizeof(text),
           "{\"hosts\":[{\"host\":\"a:1\",\"outcome\":\"partial\","
           "\"error\":\"[TG-7010] linux.ftrace: did not start\","
           "\"problems\":[%s,%s,%s]},{\"host\":\"b:1\",\"outcome\":\"ok\","
           "\"problems\":[]},{\"host\":\"c:1\",\"outcome\":\"ok\","
           "\"problems\":[%s]}]}", p1, p2, p2, p2);
  assert_int_equal(parse(text), 0);
  assert_int_equal(g_r.n_failed, 1);
  assert_int_equal(g_r.failed[0].n_problems, 3);
  assert_string_equal(g_r.failed[0].problems[0].code, "TG-7010");
  assert_string_equal(g_r.failed[0].problems[0].data_source, "linux.ftrace");
  assert_string_equal(g_r.failed[0].problems[0].why, "did not start");
  assert_string_equal(g_r.failed[0].problems[1].code, "TG-7012");
  /* An ok host with a problem that is no failure is kept apart. */
  assert_int_equal(g_r.n_noted, 1);
  assert_string_equal(g_r.noted[0].host, "c:1");
  assert_int_equal(g_r.noted[0].n_problems, 1);
  assert_string_equal(g_r.noted[0].problems[0].data_source, "x.y");
  assert_string_equal(g_r.noted[0].problems[0].kind, "data_source");
  /* Packets the merge left out: a problem of its own kind, no data
   * source. */
  assert_int_equal(
      parse("{\"hosts\":[{\"host\":\"a:1\",\"outcome\":\"partial\","
            "\"error\":\"[TG-5060] 1 packet ...\",\"problems\":[{\"kind\":"
            "\"merge\",\"code\":\"TG-5060\",\"reason\":\"not_allowed\","
            "\"packets\":1,\"message\":\"InternedData\",\"field\":35,"
            "\"why\":\"1 packet ...\"}]}]}"),
      0);
  assert_int_equal(g_r.failed[0].n_problems, 1);
  assert_string_equal(g_r.failed[0].problems[0].kind, "merge");
  assert_string_equal(g_r.failed[0].problems[0].code, "TG-5060");
  assert_string_equal(g_r.failed[0].problems[0].data_source, "");
  const char *bad[] = {
      "{\"hosts\":[{\"host\":\"a\",\"outcome\":\"partial\",\"problems\":{}}]}",
      "{\"hosts\":[{\"host\":\"a\",\"outcome\":\"partial\",\"problems\":[1]}]}",
      "{\"hosts\":[{\"host\":\"a\",\"outcome\":\"partial\",\"problems\":"
      "[{\"code\":7,\"data_source\":\"d\",\"why\":\"w\"}]}]}",
      "{\"hosts\":[{\"host\":\"a\",\"outcome\":\"partial\",\"problems\":"
      "[{\"code\":\"c\",\"why\":\"w\",\"data_source\":null}]}]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(parse(bad[i]), -EINVAL);
    assert_non_null(strstr(g_err, "problems"));
  }
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
      "\"x\"",
      "{} {}",
      "{\"snapshot\":{\"id\":\"000000000000002A\"}}",            /* upper case */
      "{\"snapshot\":{\"id\":\"000000000000002\"}}",             /* 15 digits */
      "{\"snapshot\":{\"id\":\"000000000000002a0\"}}",           /* 17 digits */
      "{\"hosts\":[1]}",
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
    assert_true(g_err[0] != 0);
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

/* The largest reply the collector sends, a snapshot of 1024 hosts with
 * every host name and error at its cap in control bytes (each written as
 * six), is read whole; a reply whose tree would take more than
 * CLI_SNAP_MAX_TREE is refused before it does. */
static void the_tree_of_a_reply_is_bounded(void **state) {
  (void)state;
  char host[321], error[513];
  memset(host, 1, 320), host[320] = 0;
  memset(error, 2, 512), error[512] = 0;
  json_t *hosts = json_array();
  for (int i = 0; i < 1024; i++)
    hosts = tg_json_push(hosts, json_pack("{s:o, s:s, s:o, s:i}", "host",
                                          tg_json_text(host), "outcome",
                                          "failed", "error",
                                          tg_json_text(error), "bytes", 0));
  json_t *doc = json_pack(
      "{s:{s:s, s:s, s:i, s:i}, s:o, s:b}", "snapshot", "id",
      "0000000000000001", "state", "failed", "hosts", 1024, "hosts_failed",
      1024, "hosts", hosts, "hosts_truncated", 0);
  assert_non_null(doc);
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  assert_non_null(text);
  assert_true(strlen(text) > 1024 * 832 * 6);
  assert_int_equal(parse(text), 0);
  free(text);
  assert_int_equal(g_r.n_host_entries, 1024);
  /* Kept as far as its buffer goes. */
  size_t kept = sizeof(g_r.failed[63].host) - 1;
  assert_int_equal(strlen(g_r.failed[63].host), kept);
  assert_memory_equal(g_r.failed[63].host, host, kept);
  /* 12 MiB of empty objects in a field nobody reads. */
  size_t n = 12u << 20;
  char *big = malloc(n);
  assert_non_null(big);
  size_t len = (size_t)sprintf(big, "{\"x\":[");
  while (len + 4 < n) memcpy(big + len, "{},", 3), len += 3;
  big[len - 1] = ']';
  big[len++] = '}';
  assert_int_equal(parse_n(big, len), -E2BIG);
  assert_false(g_r.has_snapshot);
  assert_true(g_err[0] != 0);
  free(big);
}

/* snapshot check's list of hosts: every entry's "host", whole and in
 * order; a reply without the list, an entry without a valid host, a host
 * twice or past 320 bytes, is refused naming the field. */
static void host_names_are_every_entrys_host(void **state) {
  (void)state;
  char **names = NULL, err[128];
  size_t n = 99;
  assert_int_equal(cli_snap_host_names(partial, strlen(partial), &names, &n,
                                       err, sizeof(err)), 0);
  assert_true(n >= 2);
  for (size_t i = 0; i < n; i++) assert_true(names[i][0] != 0);
  cli_snap_names_free(names, n);
  static const char *const bad[] = {
      "{}", "{\"hosts\":{}}", "{\"hosts\":[1]}", "{\"hosts\":[{}]}",
      "{\"hosts\":[{\"host\":\"\"}]}", "{\"hosts\":[{\"host\":7}]}",
      "{\"hosts\":[{\"host\":\"a\\u0000b\"}]}",
      "{\"hosts\":[{\"host\":\"a\"},{\"host\":\"a\"}]}", "[", "",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    names = (char **)1;
    n = 7;
    assert_int_equal(cli_snap_host_names(bad[i], strlen(bad[i]), &names, &n,
                                         err, sizeof(err)), -EINVAL);
    assert_null(names);
    assert_int_equal(n, 0);
    assert_true(err[0] != 0);
  }
  char big[400 + 32];
  memset(big, 0, sizeof(big));
  snprintf(big, sizeof(big), "{\"hosts\":[{\"host\":\"%0321d\"}]}", 0);
  assert_int_equal(cli_snap_host_names(big, strlen(big), &names, &n, err,
                                       sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "hosts[0].host"));
  snprintf(big, sizeof(big), "{\"hosts\":[{\"host\":\"%0320d\"}]}", 0);
  assert_int_equal(cli_snap_host_names(big, strlen(big), &names, &n, err,
                                       sizeof(err)), 0);
  assert_int_equal(n, 1);
  assert_int_equal(strlen(names[0]), 320);
  cli_snap_names_free(names, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_collectors_reply_gives_its_fields),
      cmocka_unit_test(a_refusal_gives_its_error),
      cmocka_unit_test(every_cut_of_a_reply_is_refused),
      cmocka_unit_test(nesting_is_bounded),
      cmocka_unit_test(counts_must_be_whole_and_within_64_bits),
      cmocka_unit_test(a_wrong_type_names_its_field),
      cmocka_unit_test(a_key_twice_is_refused),
      cmocka_unit_test(escapes_are_decoded_to_utf8),
      cmocka_unit_test(text_that_is_not_utf8_reads_as_python_reads_it),
      cmocka_unit_test(a_partial_host_is_marked),
      cmocka_unit_test(a_hosts_problems_are_read),
      cmocka_unit_test(long_strings_are_cut_on_a_character),
      cmocka_unit_test(wrong_shapes_are_refused),
      cmocka_unit_test(failed_hosts_past_the_bound_are_counted),
      cmocka_unit_test(the_tree_of_a_reply_is_bounded),
      cmocka_unit_test(host_names_are_every_entrys_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
