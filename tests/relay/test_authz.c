/* The relay's authorization file: parsing, errors with line numbers, and
 * the role table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "auth/authz.h"
#include "tracegate/error.h"

static void authz_parses_lines_comments_and_blanks(void **state) {
  (void)state;
  static const char text[] =
      "# identity role\n"
      "\n"
      "alice record\n"
      "  bob\tobserve   # trailing comment\r\n"
      "ssh:carol record";
  tg_authz_t *a;
  char err[256];
  assert_int_equal(tg_authz_parse(text, sizeof(text) - 1, "authz", &a, err,
                                  sizeof(err)), 0);
  assert_int_equal(tg_authz_count(a), 3);
  assert_int_equal(tg_authz_role(a, "alice"), TG_ROLE_RECORD);
  assert_int_equal(tg_authz_role(a, "bob"), TG_ROLE_OBSERVE);
  assert_int_equal(tg_authz_role(a, "ssh:carol"), TG_ROLE_RECORD);
  assert_int_equal(tg_authz_role(a, "Alice"), TG_ROLE_NONE);
  assert_int_equal(tg_authz_role(a, "eve"), TG_ROLE_NONE);
  assert_int_equal(tg_authz_role(a, NULL), TG_ROLE_NONE);
  assert_int_equal(tg_authz_role(NULL, "alice"), TG_ROLE_NONE);
  tg_authz_free(a);
  /* The shared line grammar (common/config_text.h): a BOM is skipped; a
   * '#' inside a word is the word's, so it is checked as an identity. */
  static const char bom[] = "\xef\xbb\xbf" "alice record\r\n";
  assert_int_equal(tg_authz_parse(bom, sizeof(bom) - 1, "authz", &a, err,
                                  sizeof(err)), 0);
  assert_int_equal(tg_authz_role(a, "alice"), TG_ROLE_RECORD);
  tg_authz_free(a);
  static const char hash[] = "alice#x record\n";
  assert_int_equal(tg_authz_parse(hash, sizeof(hash) - 1, "authz", &a, err,
                                  sizeof(err)), TG_EPARSE);
  assert_non_null(strstr(err, "authz:1: identity 'alice#x'"));
  /* Empty is valid: nobody is authorized. */
  assert_int_equal(tg_authz_parse("", 0, "authz", &a, err, sizeof(err)), 0);
  assert_int_equal(tg_authz_count(a), 0);
  tg_authz_free(a);
}

static void authz_errors_name_the_line(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *want;
  } cases[] = {
      {"alice record\nbob admin\n", "f:2: role 'admin' is not observe or record"},
      {"alice\n", "f:1: expected \"identity role\", found 1 word"},
      {"# x\n\nalice record extra\n", "f:3: expected \"identity role\", found 3 words"},
      {"alice record\nalice observe\n", "f:2: identity 'alice' is listed twice"},
      {"al\x01ice record\n", "f:1: byte 0x01"},
      /* One alphabet for identities: no separator the relay gives a
       * meaning to ('/' before session names, ':' of ssh: identities). */
      {"alice record\nalice/ops record\n", "f:2: identity 'alice/ops': '/'"},
      {"ops:alice record\n", "f:1: identity 'ops:alice': ':' is reserved"},
      {"ssh:a/b record\n", "f:1: identity 'ssh:a/b': '/'"},
      {"ssh: record\n", "f:1: identity 'ssh:': ':' is reserved"},
      {"-alice record\n", "f:1: identity '-alice': an identity may not start"},
      {"al*ce record\n", "f:1: identity 'al*ce': an identity has only"},
      /* The first error in the file is the one reported. */
      {"bob record\nalice record\nbob observe\nalice observe\nx\n",
       "f:3: identity 'bob' is listed twice"},
      {"bob record\nx\nbob observe\n",
       "f:2: expected \"identity role\", found 1 word"},
      {"bob record\nalice record\nbob observe\nx\nalice observe\n",
       "f:3: identity 'bob' is listed twice"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tg_authz_t *a = (tg_authz_t *)1;
    char err[256] = "";
    assert_int_equal(tg_authz_parse(cases[i].text, strlen(cases[i].text), "f",
                                    &a, err, sizeof(err)), TG_EPARSE);
    assert_null(a);
    if (!strstr(err, cases[i].want))
      fail_msg("case %zu: '%s' not in '%s'", i, cases[i].want, err);
  }
  tg_authz_t *a;
  char err[256];
  assert_int_equal(tg_authz_load("/nonexistent/authz", &a, err, sizeof(err)),
                   TG_EBAD_CONFIG);
  assert_non_null(strstr(err, "/nonexistent/authz"));
}

/* A large file parses in about linear time and every identity is found
 * (lookups run per client call). */
static void authz_handles_many_identities(void **state) {
  (void)state;
  enum { N = 200000 };
  char *text = malloc((size_t)N * 32);
  assert_non_null(text);
  size_t len = 0;
  for (unsigned i = 0; i < N; i++)
    len += (size_t)sprintf(text + len, "host-%u.example %s\n", (i * 7919u) % N,
                           i % 2 ? "observe" : "record");
  tg_authz_t *a;
  char err[256] = "";
  assert_int_equal(tg_authz_parse(text, len, "big", &a, err, sizeof(err)), 0);
  assert_int_equal(tg_authz_count(a), N);
  char id[64];
  for (unsigned i = 0; i < N; i += 997) {
    snprintf(id, sizeof(id), "host-%u.example", (i * 7919u) % N);
    assert_int_equal(tg_authz_role(a, id),
                     i % 2 ? TG_ROLE_OBSERVE : TG_ROLE_RECORD);
  }
  assert_int_equal(tg_authz_role(a, "host-1.exampl"), TG_ROLE_NONE);
  assert_int_equal(tg_authz_role(a, "host-1.examplee"), TG_ROLE_NONE);
  tg_authz_free(a);
  /* A repeat near the end is still named by its line. */
  len += (size_t)sprintf(text + len, "host-5.example record\n");
  assert_int_equal(tg_authz_parse(text, len, "big", &a, err, sizeof(err)),
                   TG_EPARSE);
  assert_non_null(strstr(err, "big:200001: identity 'host-5.example'"));
  free(text);
}

static void authz_role_table(void **state) {
  (void)state;
  assert_true(tg_authz_allows(TG_ROLE_OBSERVE, "ObserveEvents"));
  assert_false(tg_authz_allows(TG_ROLE_OBSERVE, "ReadBuffers"));
  assert_true(tg_authz_allows(TG_ROLE_RECORD, "ReadBuffers"));
  assert_true(tg_authz_allows(TG_ROLE_RECORD, "QueryCapabilities"));
  assert_false(tg_authz_allows(TG_ROLE_RECORD, "SaveTraceForBugreport"));
  assert_false(tg_authz_allows(TG_ROLE_RECORD, "InitializeConnection"));
  assert_false(tg_authz_allows(TG_ROLE_NONE, "QueryServiceState"));
  assert_false(tg_authz_allows(TG_ROLE_RECORD, NULL));
  assert_string_equal(tg_authz_role_name(TG_ROLE_OBSERVE), "observe");
  tg_authz_role_t r;
  assert_int_equal(tg_authz_parse_role("record", &r), 0);
  assert_int_equal(r, TG_ROLE_RECORD);
  assert_int_equal(tg_authz_parse_role("Record", &r), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(authz_parses_lines_comments_and_blanks),
      cmocka_unit_test(authz_errors_name_the_line),
      cmocka_unit_test(authz_handles_many_identities),
      cmocka_unit_test(authz_role_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
