/* Child processes, clocks, temporary directories and certificates for
 * tests: the plumbing every integration test used to carry its own copy of.
 *
 * Children die with the test (PR_SET_PDEATHSIG), so a crashed test leaves
 * nothing behind holding ctest's pipes; every wait is bounded and what was
 * started is killed and reaped when the bound passes; a test that fails
 * half-way has its children killed by tg_test_children_teardown().
 */
#ifndef TRACEGATE_TESTS_TEST_PROC_H
#define TRACEGATE_TESTS_TEST_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in milliseconds: for deadlines. */
int64_t tg_test_now_ms(void);

/* How a child's standard fds are set up. */
#define TG_TEST_FD_INHERIT (-1)
#define TG_TEST_FD_DEVNULL (-2)

typedef struct tg_test_spawn {
  const char *path;        /* the executable */
  const char *const *argv; /* argv[0]..., NULL-terminated */
  /* TG_TEST_FD_INHERIT, TG_TEST_FD_DEVNULL or an fd to dup2() there;
   * ours stay open (the caller closes its copies). */
  int stdin_fd, stdout_fd, stderr_fd;
  int keep_fd; /* stays open across exec (its FD_CLOEXEC cleared), or -1 */
  bool default_sigint; /* SIGINT back to SIG_DFL (tests ignore it) */
} tg_test_spawn_t;

#define TG_TEST_SPAWN_INIT                                               \
  {                                                                      \
    .stdin_fd = TG_TEST_FD_INHERIT, .stdout_fd = TG_TEST_FD_INHERIT,     \
    .stderr_fd = TG_TEST_FD_INHERIT, .keep_fd = -1                       \
  }

/* Forks and execs |s|. Returns the pid, or -errno (nothing started). An
 * exec failure shows as exit status 127. */
pid_t tg_test_spawn(const tg_test_spawn_t *s);

/* Starts the CLI at |path| as "tracegate" with |args| (NULL-terminated,
 * without argv[0], at most 46): stdin /dev/null, stdout |out_fd|, stderr
 * |err_fd| (TG_TEST_FD_* or fds, as in tg_test_spawn_t), SIGINT at its
 * default. Returns the pid, or -errno (-E2BIG: too many args). */
pid_t tg_test_spawn_cli(const char *path, const char *const *args, int out_fd,
                        int err_fd);

/* Waits for |pid| to exit, up to |timeout_ms| (on a pidfd: the exit is an
 * event), then SIGKILLs it. Always reaps. Returns the wait status, or -1 if
 * it had to be killed. */
int tg_test_reap(pid_t pid, int timeout_ms);

/* Sends |sig| and reaps as tg_test_reap. */
int tg_test_stop(pid_t pid, int sig, int timeout_ms);

/* A cmocka per-test teardown (cmocka_unit_test_teardown): SIGKILLs and
 * reaps every child tg_test_spawn() started that was not reaped since, so
 * that a test failing half-way does not leave daemons holding the
 * directory, sockets or catalog the next test uses. Returns 0 when there
 * were none; -1 otherwise (said on stderr), which fails a test that
 * passed without stopping what it started. Not for a binary whose group
 * setup spawns children the tests share. */
int tg_test_children_teardown(void **state);

/* A wait status as a shell would report it: the exit code, or 128 + the
 * signal; -1 stays -1. */
int tg_test_exit_code(int status);

/* Makes a fresh directory "/tmp/tg-test-<tag>-XXXXXX" into |out|. Returns 0
 * or -errno. */
int tg_test_mkdtemp(char *out, size_t cap, const char *tag);

/* Removes |path| and everything below it (no shell). Returns 0 or -errno
 * of the first failure; a missing |path| is not an error. */
int tg_test_rm_rf(const char *path);

/* Running something as another user: the one way the C tests do it (the
 * shell tests' twin is tests/support/other_user.sh, with the same rules).
 *
 * The checkout and its build tree may lie below a directory only root can
 * enter (a clone in /root or in a `mktemp -d`), so nothing the other user
 * must reach (sockets, programs, work files) may be there: it goes into a
 * directory the test made with tg_test_mkdtemp under /tmp, opened with
 * tg_test_other_user_dir, and programs are copied into it
 * (tg_test_copy_program). A test that cannot become another user here says
 * so and is skipped (TG_TEST_REQUIRE_OTHER_USER), never passed. */

/* The uid and gid tests use as "another user". */
#define TG_TEST_NOBODY 65534
/* NULL when this process can run a child as TG_TEST_NOBODY (it is root,
 * and a forked child could become that uid); else why not, a static
 * string. The answer is computed once. */
const char *tg_test_other_user_unavailable(void);
/* In a cmocka test: skips it, printing the reason, unless a child can run
 * as another user here. */
#define TG_TEST_REQUIRE_OTHER_USER()                                    \
  do {                                                                  \
    const char *why_ = tg_test_other_user_unavailable();                \
    if (why_) {                                                         \
      print_message("skipped: cannot run as another user: %s\n", why_); \
      skip();                                                           \
    }                                                                   \
  } while (0)
/* Opens |dir|, a directory tg_test_mkdtemp made, to the other user with
 * |mode| (0711 to reach a path inside, 0755 to list it too); root keeps
 * owning it. Returns 0, -EINVAL for a directory tg_test_mkdtemp did not
 * make (a checkout's or build tree's), or -errno. */
int tg_test_other_user_dir(const char *dir, mode_t mode);
/* Becomes nobody (uid and gid TG_TEST_NOBODY, no supplementary groups):
 * for a forked child of a test running as root. Returns 0 or -errno. */
int tg_test_become_nobody(void);
/* Copies the program at |src| to |dir|/<its base name>, mode 0755, and
 * writes that path into |out|: what a child that becomes nobody executes.
 * |dir| is one tg_test_other_user_dir opened. Returns 0 or -errno. */
int tg_test_copy_program(const char *src, const char *dir, char *out,
                         size_t cap);
/* Writes |dir|/|name| as a shell script (#!/bin/sh, then |body| and a
 * newline), mode 0755: a stand-in for a program the code under test
 * runs. Its path into |out|. Returns 0 or -errno. */
int tg_test_write_script(const char *dir, const char *name, const char *body,
                         char *out, size_t cap);

/* Runs deploy/certs/tg-certs in |dir| with |args|, words separated by
 * spaces ("client pki alice --role record"), its output discarded. Returns
 * 0 or -1 (tool failed; its status is printed). */
int tg_test_certs(const char *dir, const char *args);

/* A fresh directory (as tg_test_mkdtemp) holding a CA, the host certificate
 * of relay.test and the client certificate of alice, in |out|/pki: what
 * the TLS tests talk with. Returns 0 or -1. */
int tg_test_pki(char *out, size_t cap, const char *tag);

/* Reads the JSON file |path| (jansson: it must be valid JSON) and writes
 * into |out| the value at |key|, a dotted path of object keys and array
 * indexes ("hosts.0.packets"), itself as JSON the way Python's
 * json.dumps(v, sort_keys=True) writes it ("3", "\"ok\"", "null",
 * "{\"a\": 1}", "0.5", "2.0"; test_json.c). Returns 0, or -1 (not JSON,
 * no such key, a value longer than |cap|; said on stderr). */
int tg_test_json_get(const char *path, const char *key, char *out, size_t cap);
/* The same into one of 8 static buffers, reused in turn; NULL on failure. */
const char *tg_test_json(const char *path, const char *key);
/* In a cmocka test: the value at |key| of JSON file |path| is |want|
 * (JSON text: "1", "\"ok\"", "null"). */
#define assert_json(path, key, want)                  \
  do {                                                 \
    const char *got_ = tg_test_json((path), (key));    \
    assert_non_null(got_);                             \
    assert_string_equal(got_, (want));                 \
  } while (0)

/* With Perfetto's binaries (PERFETTO_BIN, the directory of its
 * trace_processor_shell): the last line of trace processor's answer to
 * |sql| (no double quote in it) over the trace at |path| into |out|, and
 * 1; -1 when it failed (said on stderr). Without them, 0, said on stderr
 * as a skip. */
int tg_test_tp_answer(const char *path, const char *sql, char *out,
                      size_t cap);

#endif /* TRACEGATE_TESTS_TEST_PROC_H */
