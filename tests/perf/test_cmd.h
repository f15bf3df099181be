/* SPDX-License-Identifier: Apache-2.0 */
/* For tests that build programs of their own with the system compiler
 * (test_symbolize_links.c, test_perf_unwind.c): the compiler to call and
 * a shell command run from a format. */
#ifndef TRACEGATE_TESTS_PERF_TEST_CMD_H
#define TRACEGATE_TESTS_PERF_TEST_CMD_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* $CC (the build's compiler, set by tests/perf/CMakeLists.txt), or cc. */
static inline const char *test_cc(void) {
  const char *c = getenv("CC");
  return c && c[0] ? c : "cc";
}

/* system() of the command |fmt| makes (at most 2 KiB): its status. */
static inline int test_run(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return system(cmd);
}

#endif /* TRACEGATE_TESTS_PERF_TEST_CMD_H */
