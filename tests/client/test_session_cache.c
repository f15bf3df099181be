/* A client's saved TLS sessions (client/session_cache.c): keys that
 * keep identities and CAs apart, expiry, the file's permissions and
 * atomic write, and files that are corrupt, truncated, oversized or not
 * ours. Sessions here are opaque bytes: what they hold is tested in
 * tests/tls/test_tls_resume.c. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/session_cache.h"
#include "test_proc.h"

#define NOW 1700000000ull

static char g_dir[128];
static const uint8_t FP_ALICE[32] = {1}, FP_BOB[32] = {2};
static const uint8_t FP_CA[32] = {9}, FP_OTHER_CA[32] = {8};
static const uint8_t SESSION[] = "session-bytes-with-a-master-secret";

static int setup(void **state) {
  (void)state;
  return tg_test_mkdtemp(g_dir, sizeof(g_dir), "sesscache");
}

static int teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static char *file(const char *name) {
  static char p[256];
  snprintf(p, sizeof(p), "%s/%s", g_dir, name);
  return p;
}

/* The warning of the last load(), as the caller gets it ("" for none). */
static char g_warn[TG_SC_WARN_MAX];

static int load(tg_session_cache_t *sc, const char *path, uint64_t now) {
  return tg_session_cache_load(sc, path, now, g_warn, sizeof(g_warn));
}

/* A failed store says why. */
static int store(const tg_session_cache_t *sc, const char *path,
                 uint64_t now) {
  char err[TG_SC_WARN_MAX] = "";
  int rv = tg_session_cache_store(sc, path, now, err, sizeof(err));
  if (rv < 0) assert_non_null(strstr(err, path));
  return rv;
}

static tg_session_cache_t *cache(const uint8_t *own, const uint8_t *ca) {
  tg_session_cache_t *sc;
  assert_int_equal(tg_session_cache_new(own, ca, &sc), 0);
  return sc;
}

static bool has(const tg_session_cache_t *sc, const char *hp, const char *sni,
                uint64_t now) {
  size_t len;
  return tg_session_cache_get(sc, hp, sni, now, &len) != NULL;
}

static void write_bytes(const char *path, const void *p, size_t n, mode_t mode) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(path, mode), 0);
}

static void session_cache_keys_by_host_name_identity_and_ca(void **state) {
  (void)state;
  tg_session_cache_t *alice = cache(FP_ALICE, FP_CA);
  assert_int_equal(tg_session_cache_put(alice, "h1:7467", "relay.test", SESSION,
                                        sizeof(SESSION), NOW + 60),
                   0);
  assert_true(has(alice, "h1:7467", "relay.test", NOW));
  assert_false(has(alice, "h1:7468", "relay.test", NOW));
  assert_false(has(alice, "h1:7467", "other.test", NOW));
  /* Through the file: another identity or CA never sees alice's entry. */
  assert_int_equal(store(alice, file("s"), NOW), 0);
  tg_session_cache_t *bob = cache(FP_BOB, FP_CA);
  tg_session_cache_t *other_ca = cache(FP_ALICE, FP_OTHER_CA);
  tg_session_cache_t *again = cache(FP_ALICE, FP_CA);
  assert_int_equal(load(bob, file("s"), NOW), 0);
  assert_int_equal(load(other_ca, file("s"), NOW), 0);
  assert_int_equal(load(again, file("s"), NOW), 0);
  assert_false(has(bob, "h1:7467", "relay.test", NOW));
  assert_false(has(other_ca, "h1:7467", "relay.test", NOW));
  size_t len;
  const uint8_t *p = tg_session_cache_get(again, "h1:7467", "relay.test", NOW, &len);
  assert_non_null(p);
  assert_int_equal(len, sizeof(SESSION));
  assert_memory_equal(p, SESSION, len);
  /* bob's own entry is added next to alice's, which stays in the file. */
  assert_int_equal(tg_session_cache_put(bob, "h1:7467", "relay.test", SESSION,
                                        4, NOW + 60),
                   0);
  assert_int_equal(store(bob, file("s"), NOW), 0);
  assert_int_equal(load(again, file("s"), NOW), 0);
  assert_int_equal(tg_session_cache_count(again), 2);
  assert_int_equal(tg_session_cache_get(again, "h1:7467", "relay.test", NOW, &len) != NULL, 1);
  assert_int_equal(len, sizeof(SESSION));
  tg_session_cache_forget(again, "h1:7467", "relay.test");
  assert_false(has(again, "h1:7467", "relay.test", NOW));
  tg_session_cache_free(alice);
  tg_session_cache_free(bob);
  tg_session_cache_free(other_ca);
  tg_session_cache_free(again);
}

static void session_cache_never_offers_an_expired_entry(void **state) {
  (void)state;
  tg_session_cache_t *sc = cache(FP_ALICE, FP_CA);
  assert_int_equal(tg_session_cache_put(sc, "h:1", "n", SESSION, 8, NOW + 10), 0);
  assert_true(has(sc, "h:1", "n", NOW + 9));
  assert_false(has(sc, "h:1", "n", NOW + 10));
  /* A lifetime beyond the cap is a forged or skewed one. */
  assert_int_equal(tg_session_cache_put(sc, "h:2", "n", SESSION, 8,
                                        NOW + TG_SC_MAX_LIFETIME_S + 30), 0);
  assert_false(has(sc, "h:2", "n", NOW));
  /* Expired entries are not written, and an empty cache leaves no file. */
  assert_int_equal(store(sc, file("s"), NOW + 20), 0);
  assert_int_equal(access(file("s"), F_OK), -1);
  assert_int_equal(store(sc, file("s"), NOW), 0);
  tg_session_cache_t *back = cache(FP_ALICE, FP_CA);
  assert_int_equal(load(back, file("s"), NOW + 11), 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  tg_session_cache_free(sc);
  tg_session_cache_free(back);
}

static void session_cache_file_is_0600_in_a_0700_directory(void **state) {
  (void)state;
  tg_session_cache_t *sc = cache(FP_ALICE, FP_CA);
  assert_int_equal(tg_session_cache_put(sc, "h:1", "n", SESSION, 8, NOW + 10), 0);
  /* $XDG_CACHE_HOME/tracegate/sessions, both directories made. */
  char xdg[256], want[300], path[300];
  snprintf(xdg, sizeof(xdg), "%s/xdg", g_dir);
  setenv("XDG_CACHE_HOME", xdg, 1);
  assert_int_equal(tg_session_cache_resolve("on", path, sizeof(path)), 1);
  snprintf(want, sizeof(want), "%s/tracegate/sessions", xdg);
  assert_string_equal(path, want);
  assert_int_equal(tg_session_cache_resolve("off", path, sizeof(path)), 0);
  assert_int_equal(tg_session_cache_resolve(NULL, path, sizeof(path)), 0);
  assert_int_equal(tg_session_cache_resolve("yes", path, sizeof(path)), -EINVAL);
  assert_int_equal(tg_session_cache_resolve("on", path, sizeof(path)), 1);
  umask(022);
  assert_int_equal(store(sc, path, NOW), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char dir[300];
  snprintf(dir, sizeof(dir), "%s/tracegate", xdg);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  /* No temporary file is left behind. */
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
  assert_int_equal(system(cmd), 0);
  /* A file others may read is not trusted (nor its sessions offered). */
  assert_int_equal(chmod(path, 0644), 0);
  tg_session_cache_t *back = cache(FP_ALICE, FP_CA);
  assert_int_equal(load(back, path, NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  assert_non_null(strstr(g_warn, path));
  assert_int_equal(chmod(path, 0600), 0);
  assert_int_equal(load(back, path, NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 1);
  assert_string_equal(g_warn, "");
  unsetenv("XDG_CACHE_HOME");
  tg_session_cache_free(sc);
  tg_session_cache_free(back);
}

static void session_cache_survives_corrupt_truncated_and_oversized_files(
    void **state) {
  (void)state;
  tg_session_cache_t *sc = cache(FP_ALICE, FP_CA);
  assert_int_equal(tg_session_cache_put(sc, "h:1", "n", SESSION, sizeof(SESSION),
                                        NOW + 10), 0);
  assert_int_equal(tg_session_cache_put(sc, "h:2", "", SESSION, 3, NOW + 10), 0);
  tg_buf_t b;
  tg_buf_init(&b, 0);
  assert_int_equal(tg_session_cache_serialize(sc, NOW, &b), 0);
  size_t n = tg_buf_size(&b);
  uint8_t *good = malloc(n + 1);
  memcpy(good, tg_buf_begin(&b), n);
  tg_buf_free(&b);
  tg_session_cache_t *back = cache(FP_ALICE, FP_CA);
  assert_int_equal(tg_session_cache_parse(back, good, n, NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 2);
  /* Every truncation, and one byte too many, is refused as a whole. */
  for (size_t k = 0; k < n; k++)
    assert_int_equal(tg_session_cache_parse(back, good, k, NOW), -EINVAL);
  good[n] = 0;
  assert_int_equal(tg_session_cache_parse(back, good, n + 1, NOW), -EINVAL);
  assert_int_equal(tg_session_cache_count(back), 0);
  /* Lengths that point past the end. */
  uint8_t bad[64];
  memcpy(bad, good, 12);
  bad[8] = 0xff, bad[9] = 0xff, bad[10] = 0xff, bad[11] = 0xff;
  assert_int_equal(tg_session_cache_parse(back, bad, 12, NOW), -EINVAL);
  /* Through files: one warning each, no sessions, no crash. */
  write_bytes(file("trunc"), good, n / 2, 0600);
  assert_int_equal(load(back, file("trunc"), NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  assert_non_null(strstr(g_warn, file("trunc")));
  write_bytes(file("junk"), "not a cache at all", 18, 0600);
  assert_int_equal(load(back, file("junk"), NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  FILE *f = fopen(file("big"), "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(good, 1, n, f), n);
  assert_int_equal(fseek(f, TG_SC_MAX_FILE + 1, SEEK_SET), 0);
  assert_int_equal(fputc(0, f), 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(file("big"), 0600), 0);
  assert_int_equal(load(back, file("big"), NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  assert_non_null(strstr(g_warn, file("big")));
  /* A directory, a missing file: no sessions. */
  assert_int_equal(load(back, g_dir, NOW), 0);
  assert_non_null(strstr(g_warn, g_dir));
  assert_int_equal(load(back, file("missing"), NOW), 0);
  assert_string_equal(g_warn, "");
  assert_int_equal(tg_session_cache_count(back), 0);
  /* And the good bytes still load. */
  write_bytes(file("good"), good, n, 0600);
  assert_int_equal(load(back, file("good"), NOW), 0);
  assert_int_equal(tg_session_cache_count(back), 2);
  free(good);
  tg_session_cache_free(sc);
  tg_session_cache_free(back);
}

/* A fleet's worth of entries: each found by its own key after growth,
 * replacement, forgetting some (the last entry moves into the hole) and a
 * round trip through the file; the bound holds. */
static void session_cache_holds_a_fleet(void **state) {
  (void)state;
  enum { N = 3000 };
  tg_session_cache_t *sc = cache(FP_ALICE, FP_CA);
  char hp[32];
  for (unsigned i = 0; i < N; i++) {
    snprintf(hp, sizeof(hp), "10.0.%u.%u:7467", i / 250, i % 250);
    assert_int_equal(tg_session_cache_put(sc, hp, "relay.test", SESSION,
                                          1 + i % 30, NOW + 60),
                     0);
  }
  /* Replaced in place, not added. */
  assert_int_equal(tg_session_cache_put(sc, "10.0.0.0:7467", "relay.test",
                                        SESSION, 33, NOW + 60),
                   0);
  assert_int_equal(tg_session_cache_count(sc), N);
  for (unsigned i = 0; i < N; i += 7) {
    snprintf(hp, sizeof(hp), "10.0.%u.%u:7467", i / 250, i % 250);
    tg_session_cache_forget(sc, hp, "relay.test");
  }
  assert_int_equal(store(sc, file("fleet"), NOW), 0);
  tg_session_cache_t *again = cache(FP_ALICE, FP_CA);
  assert_int_equal(load(again, file("fleet"), NOW), 0);
  for (unsigned i = 0; i < N; i++) {
    snprintf(hp, sizeof(hp), "10.0.%u.%u:7467", i / 250, i % 250);
    for (int k = 0; k < 2; k++) {
      tg_session_cache_t *c = k ? again : sc;
      size_t len;
      const uint8_t *p = tg_session_cache_get(c, hp, "relay.test", NOW, &len);
      if (i % 7 == 0) {
        assert_null(p);
      } else {
        assert_non_null(p);
        assert_int_equal(len, 1 + i % 30);
      }
      assert_false(has(c, hp, "other.test", NOW));
    }
  }
  for (unsigned i = tg_session_cache_count(sc); i < TG_SC_MAX_ENTRIES; i++) {
    snprintf(hp, sizeof(hp), "10.1.%u.%u:7467", i / 250, i % 250);
    assert_int_equal(tg_session_cache_put(sc, hp, "n", SESSION, 8, NOW + 60),
                     0);
  }
  assert_int_equal(
      tg_session_cache_put(sc, "10.2.0.0:1", "n", SESSION, 8, NOW + 60),
      -ENOSPC);
  assert_true(has(sc, hp, "n", NOW)); /* the last one in */
  tg_session_cache_free(sc);
  tg_session_cache_free(again);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          session_cache_keys_by_host_name_identity_and_ca, setup, teardown),
      cmocka_unit_test_setup_teardown(
          session_cache_never_offers_an_expired_entry, setup, teardown),
      cmocka_unit_test_setup_teardown(session_cache_holds_a_fleet, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          session_cache_file_is_0600_in_a_0700_directory, setup, teardown),
      cmocka_unit_test_setup_teardown(
          session_cache_survives_corrupt_truncated_and_oversized_files, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
