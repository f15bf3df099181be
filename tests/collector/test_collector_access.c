/* access.c: the HTTPS access tables from the collector's config (the
 * authz file and the CRL), driven through coll_access_load() and
 * coll_access_reload() with the files tg-certs makes (pki/ of the fleet
 * directory). What is asserted is what the daemon's start and SIGHUP rely
 * on: nothing over plain HTTP, an authz file required over HTTPS, a bad
 * file refused by its key with nothing left allocated (LeakSanitizer
 * watches), good files loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "auth/authz.h"
#include "auth/crl.h"
#include "collector/daemon/access.h"
#include "collector/daemon/coll.h"
#include "fleet_harness.h"

static int group_setup(void **state) {
  (void)state;
  return fleet_dir_create("collaccess");
}

static void write_text(const char *name, const char *text) {
  FILE *f = fopen(fleet_in_dir(name), "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* An HTTPS config: pki's CA for the clients, pki/authz, and |crl| ("":
 * none) as http_crl. */
static void https_config(tg_coll_config_t *g, const char *authz,
                         const char *crl) {
  tg_coll_config_defaults(g);
  g->https = true;
  snprintf(g->http_ca, sizeof(g->http_ca), "%s", fleet_in_dir("pki/ca.pem"));
  snprintf(g->authz, sizeof(g->authz), "%s", authz[0] ? fleet_in_dir(authz) : "");
  snprintf(g->http_crl, sizeof(g->http_crl), "%s", crl[0] ? fleet_in_dir(crl) : "");
}

static void plain_http_has_no_tables(void **state) {
  (void)state;
  tg_coll_config_t g;
  tg_coll_config_defaults(&g);
  /* Files named but HTTPS off: nothing is read. */
  snprintf(g.authz, sizeof(g.authz), "/nonexistent/authz");
  tg_authz_t *authz = (tg_authz_t *)&g;
  tg_crl_t *crl = (tg_crl_t *)&g;
  char err[256] = "";
  assert_int_equal(coll_access_load(&g, &authz, &crl, err, sizeof(err)), 0);
  assert_null(authz);
  assert_null(crl);
}

static void https_needs_an_authz_file(void **state) {
  (void)state;
  tg_coll_config_t g;
  https_config(&g, "", "");
  tg_authz_t *authz;
  tg_crl_t *crl;
  char err[256] = "";
  assert_int_equal(coll_access_load(&g, &authz, &crl, err, sizeof(err)), -1);
  assert_null(authz);
  assert_null(crl);
  assert_non_null(strstr(err, "authz"));
}

static void the_authz_file_and_the_crl_load(void **state) {
  (void)state;
  write_text("two.authz", "alice record\nbob observe\n");
  tg_coll_config_t g;
  https_config(&g, "two.authz", "pki/crl.pem");
  tg_authz_t *authz;
  tg_crl_t *crl;
  char err[256] = "";
  assert_int_equal(coll_access_load(&g, &authz, &crl, err, sizeof(err)), 0);
  assert_non_null(authz);
  assert_non_null(crl);
  assert_int_equal(tg_authz_count(authz), 2);
  assert_int_equal(tg_authz_role(authz, "bob"), TG_ROLE_OBSERVE);
  tg_authz_free(authz);
  tg_crl_free(crl);
  /* Without http_crl, no CRL. */
  https_config(&g, "two.authz", "");
  assert_int_equal(coll_access_load(&g, &authz, &crl, err, sizeof(err)), 0);
  assert_non_null(authz);
  assert_null(crl);
  tg_authz_free(authz);
}

/* Each bad file is refused by the key that names it; an authz table
 * loaded before a bad CRL is freed, not handed out. */
static void a_bad_file_is_refused_by_its_key(void **state) {
  (void)state;
  write_text("bad.authz", "alice fly\n");
  write_text("bad.crl", "-----BEGIN X509 CRL-----\nnot base64\n");
  static const struct {
    const char *authz, *crl, *key;
  } cases[] = {
      {"bad.authz", "", "authz: "},
      {"missing.authz", "", "authz: "},
      {"pki/authz", "bad.crl", "http_crl: "},
      {"pki/authz", "missing.crl", "http_crl: "},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tg_coll_config_t g;
    https_config(&g, cases[i].authz, cases[i].crl);
    tg_authz_t *authz;
    tg_crl_t *crl;
    char err[640] = "";
    assert_int_equal(coll_access_load(&g, &authz, &crl, err, sizeof(err)), -1);
    assert_null(authz);
    assert_null(crl);
    if (strncmp(err, cases[i].key, strlen(cases[i].key)) != 0)
      fail_msg("case %zu: '%s' does not start with '%s'", i, err, cases[i].key);
  }
}

/* SIGHUP without an HTTPS listener (plain HTTP, or none yet) reads
 * nothing and changes nothing. */
static void a_reload_without_https_reads_nothing(void **state) {
  (void)state;
  coll_t c;
  memset(&c, 0, sizeof(c));
  tg_coll_config_defaults(&c.cfg);
  snprintf(c.cfg.authz, sizeof(c.cfg.authz), "/nonexistent/authz");
  coll_access_reload(&c, "SIGHUP");
  assert_null(c.http);
  https_config(&c.cfg, "bad.authz", "");
  coll_access_reload(&c, "SIGHUP"); /* no listener: nothing to hand them */
  assert_null(c.http);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plain_http_has_no_tables),
      cmocka_unit_test(https_needs_an_authz_file),
      cmocka_unit_test(the_authz_file_and_the_crl_load),
      cmocka_unit_test(a_bad_file_is_refused_by_its_key),
      cmocka_unit_test(a_reload_without_https_reads_nothing),
  };
  return cmocka_run_group_tests(tests, group_setup, fleet_dir_teardown);
}
