/* See bench_args.h. */
#include "bench_args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bench_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bench_parse_uint(const char *prog, const char *what, const char *s,
                     uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "%s: %s must be %llu-%llu, not '%s'\n", prog, what,
            (unsigned long long)lo, (unsigned long long)hi, s);
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
}

int bench_args_parse(const char *prog, int argc, char **argv,
                     const bench_arg_t *args, size_t n, void (*usage)(FILE *),
                     size_t *given) {
  size_t pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    }
    if (a[0] == '-') {
      fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
    } else if (pos == n) {
      fprintf(stderr, "%s: too many arguments at '%s'\n", prog, a);
    } else if (bench_parse_uint(prog, args[pos].name, a, args[pos].lo,
                                args[pos].hi, args[pos].out) == 0) {
      pos++;
      continue;
    }
    usage(stderr);
    return -1;
  }
  if (given) *given = pos;
  return 0;
}
