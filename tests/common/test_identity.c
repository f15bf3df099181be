/* The identity alphabet: what a certificate, an authorization line and
 * the relay's ssh: identities may name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/identity.h"

static bool valid(const char *s) {
  return tg_identity_valid(s, strlen(s), NULL);
}

static void identity_accepts_names_certificates_carry(void **state) {
  (void)state;
  const char *ok[] = {"alice", "bob-1", "host.example.org", "ops_team",
                      "alice@example.org", "A", "0day", "_svc"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    if (!valid(ok[i])) fail_msg("'%s' refused", ok[i]);
  char longest[TG_IDENTITY_MAX + 2];
  memset(longest, 'a', sizeof(longest));
  assert_true(tg_identity_valid(longest, TG_IDENTITY_MAX, NULL));
  assert_false(tg_identity_valid(longest, TG_IDENTITY_MAX + 1, NULL));
}

static void identity_refuses_every_separator(void **state) {
  (void)state;
  const char *bad[] = {"",         "alice/ops", "/alice",    "alice/",
                       "ssh:alice", "a:b",      "alice ops", "alice\tops",
                       "alice#x",  "-alice",    ".alice",    "al*ce",
                       "alice\n",  "al\x7f",    "caf\xc3\xa9", "a,b",
                       "a\\b",     "a%2fb",     "a+b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *why = NULL;
    if (tg_identity_valid(bad[i], strlen(bad[i]), &why))
      fail_msg("'%s' accepted", bad[i]);
    assert_non_null(why);
  }
  /* A NUL inside the bytes is not the end of them. */
  assert_false(tg_identity_valid("alice\0/ops", 10, NULL));
  const char *why = NULL;
  assert_false(tg_identity_valid("alice/ops", 9, &why));
  assert_non_null(strstr(why, "'/'"));
}

static void identity_listed_may_be_an_ssh_one(void **state) {
  (void)state;
  assert_true(tg_identity_valid_listed("ssh:alice", 9, NULL));
  assert_true(tg_identity_valid_listed("alice", 5, NULL));
  assert_false(tg_identity_valid_listed("ssh:", 4, NULL));
  assert_false(tg_identity_valid_listed("ssh:a:b", 7, NULL));
  assert_false(tg_identity_valid_listed("ssh:a/b", 7, NULL));
  assert_false(tg_identity_valid_listed("ssh:ssh:a", 9, NULL));
  /* What the relay makes for --stdio links is always listable. */
  char id[64];
  tg_identity_ssh(id, sizeof(id), "carol", 1000);
  assert_string_equal(id, "ssh:carol");
  tg_identity_ssh(id, sizeof(id), "car/ol", 1000);
  assert_string_equal(id, "ssh:uid-1000");
  tg_identity_ssh(id, sizeof(id), NULL, 7);
  assert_string_equal(id, "ssh:uid-7");
  assert_true(tg_identity_valid_listed(id, strlen(id), NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(identity_accepts_names_certificates_carry),
      cmocka_unit_test(identity_refuses_every_separator),
      cmocka_unit_test(identity_listed_may_be_an_ssh_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
