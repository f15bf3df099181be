/* Every program's command line answers alike (common/flags.h,
 * tg_prog_flags): --help and --version exit 0, --version's first line is
 * "PROGRAM VERSION", and a flag the program does not have exits 2 with
 * nothing on stdout and the flag named on stderr. The CLI's commands are
 * programs of their own here: each has its own flag table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/version.h"
#include "test_proc.h"

#define WAIT_MS 30000

typedef struct prog {
  const char *path;
  const char *args[3]; /* before the flag under test; NULL-terminated */
  const char *version_name; /* --version's PROGRAM */
} prog_t;

static const prog_t progs[] = {
    {TRACEGATED_PATH, {"tracegated", NULL}, "tracegated"},
    {TRACEGATE_RELAY_PATH, {"tracegate-relay", NULL}, "tracegate-relay"},
    {TRACEGATE_COLLECTOR_PATH, {"tracegate-collector", NULL},
     "tracegate-collector"},
    {TRACEGATE_PROBES_PATH, {"tracegate-probes", NULL}, "tracegate-probes"},
    {TRACEGATE_EMIT_PATH, {"tracegate-emit", NULL}, "tracegate-emit"},
    {TRACEGATE_CLI_PATH, {"tracegate", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "record", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "query", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "stats", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "trigger", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "snapshot", NULL}, "tracegate"},
    {TRACEGATE_CLI_PATH, {"tracegate", "bridge", NULL}, "tracegate"},
};

typedef struct run {
  int status;       /* the exit code, or -1 */
  char out[65536];  /* stdout, NUL-terminated (cut at the size) */
  char err[4096];   /* stderr, idem */
} run_t;

static void slurp(FILE *f, char *buf, size_t cap) {
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

/* Runs |p| with its args and then |flags| (NULL-terminated). */
static void run(const prog_t *p, const char *const *flags, run_t *r) {
  const char *argv[16];
  size_t n = 0;
  for (size_t i = 0; p->args[i]; i++) argv[n++] = p->args[i];
  for (size_t i = 0; flags[i]; i++) argv[n++] = flags[i];
  argv[n] = NULL;
  FILE *out = tmpfile(), *err = tmpfile();
  assert_non_null(out);
  assert_non_null(err);
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = p->path;
  s.argv = argv;
  s.stdin_fd = TG_TEST_FD_DEVNULL;
  s.stdout_fd = fileno(out);
  s.stderr_fd = fileno(err);
  pid_t pid = tg_test_spawn(&s);
  assert_true(pid > 0);
  r->status = tg_test_exit_code(tg_test_reap(pid, WAIT_MS));
  slurp(out, r->out, sizeof(r->out));
  slurp(err, r->err, sizeof(r->err));
}

static const char *name_of(const prog_t *p) {
  return p->args[1] ? p->args[1] : p->args[0];
}

static void programs_answer_version_alike(void **state) {
  (void)state;
  static run_t r;
  const char *flags[] = {"--version", NULL};
  for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
    run(&progs[i], flags, &r);
    char want[128];
    snprintf(want, sizeof(want), "%s %s\n", progs[i].version_name, TG_VERSION);
    if (r.status != 0 || strncmp(r.out, want, strlen(want)) != 0)
      fail_msg("%s --version: exit %d, stdout '%.200s'", name_of(&progs[i]),
               r.status, r.out);
  }
}

/* --help lists --help and --version among the flags, on stdout. */
static void programs_answer_help_alike(void **state) {
  (void)state;
  static run_t r;
  const char *flags[] = {"--help", NULL};
  for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
    run(&progs[i], flags, &r);
    if (r.status != 0 || strncmp(r.out, "usage: ", 7) != 0 ||
        !strstr(r.out, "--help") || !strstr(r.out, "--version"))
      fail_msg("%s --help: exit %d, stdout '%.200s'", name_of(&progs[i]),
               r.status, r.out);
  }
}

/* A flag the program does not have: usage (2), named; --version after it
 * does not hide it, the whole line is read first. */
static void programs_refuse_a_bad_flag_with_2(void **state) {
  (void)state;
  static run_t r;
  const char *bad[] = {"--no-such-flag", NULL};
  const char *bad_then_version[] = {"--no-such-flag", "--version", NULL};
  const char *const *cases[] = {bad, bad_then_version};
  for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
    for (size_t k = 0; k < 2; k++) {
      run(&progs[i], cases[k], &r);
      if (r.status != 2 || r.out[0] || !strstr(r.err, "'--no-such-flag'"))
        fail_msg("%s %s: exit %d, stdout '%.100s', stderr '%.200s'",
                 name_of(&progs[i]), cases[k][k], r.status, r.out, r.err);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(programs_answer_version_alike,
                                tg_test_children_teardown),
      cmocka_unit_test_teardown(programs_answer_help_alike,
                                tg_test_children_teardown),
      cmocka_unit_test_teardown(programs_refuse_a_bad_flag_with_2,
                                tg_test_children_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
