/* client/ prints nothing: every function of tg_client that fails (or
 * ignores a file) returns a negative error and leaves the reason in the
 * caller's buffer, for the CLI to print and the collector to log under
 * its own name. Each scenario runs with stderr captured into a file,
 * which must stay empty, and checks that the buffer names what went
 * wrong (the file, the line, the host). Log lines go to a sink of the
 * test's: the layers below may log (the TLS layer says once which library
 * runs what), client/'s own files may not. */
#include <errno.h>
#include <fcntl.h>
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

#include "client/remote.h"
#include "client/session_cache.h"
#include "client/target.h"
#include "client/tls_defaults.h"
#include "common/log.h"
#include "test_proc.h"

static char g_dir[128];
static int g_saved_stderr = -1, g_capture = -1;

static char *file(const char *name) {
  static char p[256];
  snprintf(p, sizeof(p), "%s/%s", g_dir, name);
  return p;
}

static void write_text(const char *path, const char *text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  assert_true(fd >= 0);
  size_t n = strlen(text);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  assert_int_equal(close(fd), 0);
}

/* stderr goes to a file of the test's until end_capture(). */
static void begin_capture(void) {
  fflush(stderr);
  g_saved_stderr = dup(STDERR_FILENO);
  assert_true(g_saved_stderr >= 0);
  g_capture = open(file("stderr"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                   0600);
  assert_true(g_capture >= 0);
  assert_true(dup2(g_capture, STDERR_FILENO) >= 0);
}

/* How many bytes were written to stderr since begin_capture(); what they
 * said is shown, for the failure it is. */
static off_t end_capture(void) {
  fflush(stderr);
  assert_true(dup2(g_saved_stderr, STDERR_FILENO) >= 0);
  close(g_saved_stderr);
  struct stat st;
  assert_int_equal(fstat(g_capture, &st), 0);
  char said[1024];
  ssize_t n = pread(g_capture, said, sizeof(said) - 1, 0);
  if (n > 0) {
    said[n] = 0;
    fprintf(stderr, "printed to stderr: %s\n", said);
  }
  close(g_capture);
  return st.st_size;
}

static const char *const kClientFiles[] = {
    " hosts_file.c:", " target.c:", " remote.c:", " session_cache.c:",
    " tls_defaults.c:"};
static unsigned g_client_log_lines;

static void log_sink(void *ctx, tg_log_level_t level, const char *line) {
  (void)ctx, (void)level;
  for (size_t i = 0; i < sizeof(kClientFiles) / sizeof(kClientFiles[0]); i++)
    if (strstr(line, kClientFiles[i])) g_client_log_lines++;
}

static int setup(void **state) {
  (void)state;
  tg_log_set_sink(log_sink, NULL);
  return tg_test_mkdtemp(g_dir, sizeof(g_dir), "clienterr");
}

static int teardown(void **state) {
  (void)state;
  tg_log_set_sink(NULL, NULL);
  if (g_client_log_lines) return -1;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

/* A bad line: -EINVAL with "FILE:LINE: why"; a missing file: its errno
 * with the file named. */
static void hosts_file_errors_come_back_to_the_caller(void **state) {
  (void)state;
  write_text(file("fleet.hosts"), "a.example:7467\nb.example:7467 bogus\n",
             0600);
  tg_target_t *t = NULL;
  size_t n = 0;
  char err[512] = "";
  char want[300];
  snprintf(want, sizeof(want), "%s:2: ", file("fleet.hosts"));
  begin_capture();
  int bad = tg_targets_load(file("fleet.hosts"), &t, &n, 16, err, sizeof(err));
  char missing_err[512] = "";
  int missing = tg_targets_load(file("none.hosts"), &t, &n, 16, missing_err,
                                sizeof(missing_err));
  assert_int_equal(end_capture(), 0);
  assert_int_equal(bad, -EINVAL);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, "bogus"));
  assert_int_equal(missing, -ENOENT);
  assert_non_null(strstr(missing_err, file("none.hosts")));
  free(t);
}

/* Naming: a host given twice, a label two hosts share. */
static void naming_errors_come_back_to_the_caller(void **state) {
  (void)state;
  static const char text[] = "a.example:7467 label=db\n"
                             "b.example:7467 label=db\n"
                             "c.example:7467\n"
                             "c.example:7467\n";
  tg_target_t *t = NULL;
  size_t n = 0;
  unsigned line = 0;
  char err[512] = "";
  assert_int_equal(tg_hosts_parse(text, sizeof(text) - 1, &t, &n, 8, &line,
                                  err, sizeof(err)),
                   0);
  char twice[512] = "", shared[512] = "";
  begin_capture();
  int rv_twice = tg_targets_name(t, n, twice, sizeof(twice));
  int rv_shared = tg_targets_name(t, 2, shared, sizeof(shared));
  assert_int_equal(end_capture(), 0);
  assert_int_equal(rv_twice, -EINVAL);
  assert_non_null(strstr(twice, "c.example:7467"));
  assert_int_equal(rv_shared, -EINVAL);
  assert_non_null(strstr(shared, "label=db"));
  free(t);
}

/* The per-user config file of TLS defaults, and the TLS files. */
static void tls_errors_come_back_to_the_caller(void **state) {
  (void)state;
  static const char *const env[] = {"TRACEGATE_CERT", "TRACEGATE_KEY",
                                    "TRACEGATE_CA", "TRACEGATE_SESSION_CACHE"};
  for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) unsetenv(env[i]);
  char dir[200];
  snprintf(dir, sizeof(dir), "%s/tracegate", g_dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  write_text(file("tracegate/config"), "ca = /etc/ca.pem\ncolour = blue\n",
             0600);
  assert_int_equal(setenv("XDG_CONFIG_HOME", g_dir, 1), 0);
  tg_client_tls_files_t f;
  memset(&f, 0, sizeof(f));
  char conf_err[TG_CLIENT_TLS_ERR_MAX] = "";
  char no_ca[256] = "", half[256] = "", files[1024] = "";
  tg_tls_config_t *cfg = NULL;
  begin_capture();
  int rv_conf = tg_client_tls_defaults(&f, conf_err, sizeof(conf_err));
  int rv_no_ca = tg_client_tls_load(NULL, NULL, NULL, &cfg, no_ca,
                                    sizeof(no_ca));
  int rv_half = tg_client_tls_load(file("me.pem"), NULL, file("ca.pem"), &cfg,
                                   half, sizeof(half));
  int rv_files = tg_client_tls_load(NULL, NULL, file("ca.pem"), &cfg, files,
                                    sizeof(files));
  assert_int_equal(end_capture(), 0);
  unsetenv("XDG_CONFIG_HOME");
  char want[300];
  snprintf(want, sizeof(want), "%s:2: ", file("tracegate/config"));
  assert_int_equal(rv_conf, -EINVAL);
  assert_non_null(strstr(conf_err, want));
  assert_int_equal(rv_no_ca, -EINVAL);
  assert_true(no_ca[0] != 0);
  assert_int_equal(rv_half, -EINVAL);
  assert_true(half[0] != 0);
  assert_true(rv_files < 0);
  assert_non_null(strstr(files, file("ca.pem"))); /* it does not exist */
}

/* A session cache file others may read is ignored with a warning for the
 * caller; one that cannot be written is an error naming it. */
static void session_cache_warnings_come_back_to_the_caller(void **state) {
  (void)state;
  static const uint8_t fp_own[32] = {1}, fp_ca[32] = {9};
  tg_session_cache_t *sc = NULL;
  assert_int_equal(tg_session_cache_new(fp_own, fp_ca, &sc), 0);
  write_text(file("sessions"), "whatever", 0644);
  assert_int_equal(chmod(file("sessions"), 0644), 0);
  assert_int_equal(tg_session_cache_put(sc, "h:1", "n", (const uint8_t *)"s",
                                        1, 1700000000ull + 60),
                   0);
  write_text(file("plain"), "a file, not a directory", 0600);
  char warn[TG_SC_WARN_MAX] = "x", err[TG_SC_WARN_MAX] = "";
  char unwritable[300];
  snprintf(unwritable, sizeof(unwritable), "%s/sessions", file("plain"));
  tg_session_cache_t *back = NULL;
  assert_int_equal(tg_session_cache_new(fp_own, fp_ca, &back), 0);
  begin_capture();
  int rv_load = tg_session_cache_load(back, file("sessions"), 1700000000ull,
                                      warn, sizeof(warn));
  int rv_store = tg_session_cache_store(sc, unwritable, 1700000000ull, err,
                                        sizeof(err));
  assert_int_equal(end_capture(), 0);
  assert_int_equal(rv_load, 0);
  assert_int_equal(tg_session_cache_count(back), 0);
  assert_non_null(strstr(warn, file("sessions")));
  assert_true(rv_store < 0);
  assert_non_null(strstr(err, unwritable));
  tg_session_cache_free(sc);
  tg_session_cache_free(back);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hosts_file_errors_come_back_to_the_caller),
      cmocka_unit_test(naming_errors_come_back_to_the_caller),
      cmocka_unit_test(tls_errors_come_back_to_the_caller),
      cmocka_unit_test(session_cache_warnings_come_back_to_the_caller),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
