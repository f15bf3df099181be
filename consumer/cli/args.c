/* Command-line plumbing: the flag table's parser with the subcommands'
 * help, and the units of durations and sizes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "consumer/cli/cli.h"

int cli_parse_flags(const char *prog, const char *synopsis, const char *about,
                    const tg_flag_t *flags, size_t n, int argc, char **argv,
                    char **pos, size_t max_pos, size_t *n_pos) {
  int rv = tg_flags_parse(prog, flags, n, argc, argv, pos, max_pos, n_pos);
  if (rv == -ENOMEM) fprintf(stderr, "%s: out of memory\n", prog);
  if (rv < 0) return -1; /* said why */
  if (rv == 1) {
    tg_flags_usage(stdout, prog, synopsis, flags, n);
    if (about && about[0]) printf("\n%s", about);
  }
  return rv;
}

/* A non-negative decimal number with an optional fraction, then a unit
 * suffix (returned in |unit|, lower-cased, at most 3 letters). */
static int split_number(const char *s, double *v, char *unit, size_t n) {
  if (!s || !*s || !(isdigit((unsigned char)s[0]) || s[0] == '.')) return -EINVAL;
  char *end;
  errno = 0;
  double d = strtod(s, &end);
  if (errno || end == s || !isfinite(d) || d < 0) return -EINVAL;
  size_t k = 0;
  for (; *end && k + 1 < n; end++) unit[k++] = (char)tolower((unsigned char)*end);
  unit[k] = 0;
  if (*end) return -EINVAL;
  *v = d;
  return 0;
}

/* One "<number><unit>" term of a duration, in ms; |*end| after it.
 * |first|: no term came before it. */
static int duration_term(const char *s, bool first, const char **end,
                         double *ms) {
  if (!(isdigit((unsigned char)s[0]) || s[0] == '.')) return -EINVAL;
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (errno || e == s || !isfinite(v) || v < 0) return -EINVAL;
  /* The unit: letters up to the next digit (a following term). */
  char u[4];
  size_t k = 0;
  for (; *e && !isdigit((unsigned char)*e) && *e != '.'; e++) {
    if (k + 1 >= sizeof(u)) return -EINVAL;
    u[k++] = (char)tolower((unsigned char)*e);
  }
  u[k] = 0;
  double mul;
  if (!strcmp(u, "ms")) mul = 1;
  else if (!strcmp(u, "s") || !u[0]) mul = 1000;
  else if (!strcmp(u, "m") || !strcmp(u, "min")) mul = 60e3;
  else if (!strcmp(u, "h")) mul = 3600e3;
  else return -EINVAL;
  /* A bare number (seconds) only alone: in "1m30" it would be a guess. */
  if (!u[0] && (*e || !first)) return -EINVAL;
  *ms = v * mul;
  *end = e;
  return 0;
}

int cli_parse_duration_ms(const char *s, uint64_t *ms) {
  if (!s || !*s) return -EINVAL;
  /* Perfetto's -t takes "1m30s" too: terms add up. */
  double total = 0;
  for (const char *p = s; *p;) {
    double t;
    if (duration_term(p, p == s, &p, &t) < 0) return -EINVAL;
    total += t;
    /* Past 2^32 ms the sum stays out of range: stop before it grows on. */
    if (total > 4294967295.0) return -ERANGE;
  }
  /* TraceConfig.duration_ms is a uint32. */
  *ms = (uint64_t)llround(total);
  return 0;
}

int cli_parse_size(const char *s, uint64_t *bytes) {
  double v;
  char u[4];
  if (split_number(s, &v, u, sizeof(u)) < 0) return -EINVAL;
  double mul;
  if (!u[0] || !strcmp(u, "b")) mul = 1;
  else if (!strcmp(u, "k") || !strcmp(u, "kb") || !strcmp(u, "kib")) mul = 1024.0;
  else if (!strcmp(u, "m") || !strcmp(u, "mb") || !strcmp(u, "mib")) mul = 1048576.0;
  else if (!strcmp(u, "g") || !strcmp(u, "gb") || !strcmp(u, "gib")) mul = 1073741824.0;
  else return -EINVAL;
  double r = v * mul;
  /* Past LLONG_MAX llround() has no defined result: round by hand. */
  if (r > 18e18) return -ERANGE;
  *bytes = (uint64_t)(r + 0.5);
  return 0;
}

void cli_format_bytes(char *out, size_t n, uint64_t b) {
  if (b < 1024) snprintf(out, n, "%llu B", (unsigned long long)b);
  else if (b < (1u << 20)) snprintf(out, n, "%.1f KiB", (double)b / 1024.0);
  else if (b < (1ull << 30)) snprintf(out, n, "%.1f MiB", (double)b / 1048576.0);
  else snprintf(out, n, "%.2f GiB", (double)b / 1073741824.0);
}

void cli_format_ms(char *out, size_t n, uint64_t ms) {
  if (ms < 60000) snprintf(out, n, "%.1fs", (double)ms / 1000.0);
  else snprintf(out, n, "%llum%02llus", (unsigned long long)(ms / 60000),
                (unsigned long long)(ms / 1000 % 60));
}

uint64_t cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
