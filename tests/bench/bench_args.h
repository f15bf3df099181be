/* The command line of a bench: positional numbers, each in a range, and
 * --help. Every bench checks its arguments before it starts anything, so a
 * typo never launches a run of minutes. Depends on libc only, so that any
 * bench can link it.
 */
#ifndef TRACEGATE_TESTS_BENCH_ARGS_H
#define TRACEGATE_TESTS_BENCH_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One positional number: |out| holds the default and takes the value. */
typedef struct bench_arg {
  const char *name; /* as the usage names it: "SECONDS" */
  uint64_t lo, hi;
  uint64_t *out;
} bench_arg_t;

/* One number of a bench's command line in [lo, hi] into |out|: 0, or -1
 * after saying on stderr which argument of |prog| was wrong. */
int bench_parse_uint(const char *prog, const char *what, const char *s,
                     uint64_t lo, uint64_t hi, uint64_t *out);

/* argv of a bench that takes |n| optional positional numbers, in order:
 * --help or -h prints usage(stdout) and returns 1; an option, a bad
 * number or one too many is said on stderr with usage(stderr) and returns
 * -1; else 0, and *given (if not NULL) says how many were given. */
int bench_args_parse(const char *prog, int argc, char **argv,
                     const bench_arg_t *args, size_t n, void (*usage)(FILE *),
                     size_t *given);

/* The process's CPU time in seconds: on a machine shared with other
 * builds, wall time would count their turns too. */
double bench_cpu_s(void);
/* Monotonic wall time in seconds, for what includes waits on another
 * process (a service draining a ring, a database server). */
double bench_wall_s(void);

#endif /* TRACEGATE_TESTS_BENCH_ARGS_H */
