/* Command-line plumbing: Perfetto's short flags on top of the flag table,
 * usage text, and the units of durations and sizes. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "consumer/cli/cli.h"

static const tg_flag_t *find_long(const tg_flag_t *flags, size_t n,
                                  const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(flags[i].name, name)) return &flags[i];
  return NULL;
}

static const char *short_name(const cli_short_flag_t *s, size_t n, char l) {
  for (size_t i = 0; i < n; i++)
    if (s[i].letter == l) return s[i].name;
  return NULL;
}

static void usage(FILE *out, const char *prog, const char *synopsis,
                  const char *about, const tg_flag_t *flags, size_t n,
                  const cli_short_flag_t *shorts, size_t n_shorts) {
  tg_flags_usage(out, prog, synopsis, flags, n);
  if (n_shorts) {
    fprintf(out, "\nshort forms:");
    for (size_t i = 0; i < n_shorts; i++)
      fprintf(out, "%s -%c = --%s", i ? "," : "", shorts[i].letter,
              shorts[i].name);
    fputc('\n', out);
  }
  if (about && about[0]) fprintf(out, "\n%s", about);
}

/* A value of the repeatable flag: "-H V", "-HV", "--host V", "--host=V".
 * Returns how many arguments it took (0: not this flag, -1: error). */
static int take_multi(const char *prog, const cli_multi_t *m, int argc,
                      char **argv, int i) {
  const char *a = argv[i], *v = NULL;
  int used = 1;
  size_t nl = strlen(m->name);
  if (a[1] == m->letter && a[0] == '-') {
    v = a[2] ? a + 2 : NULL;
  } else if (a[1] == '-' && !strncmp(a + 2, m->name, nl) &&
             (a[2 + nl] == 0 || a[2 + nl] == '=')) {
    v = a[2 + nl] == '=' ? a + 3 + nl : NULL;
  } else {
    return 0;
  }
  if (!v) {
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: --%s needs a value (see --help)\n", prog, m->name);
      return -1;
    }
    v = argv[i + 1];
    used = 2;
  }
  if (!*v) {
    fprintf(stderr, "%s: --%s: needs a non-empty value\n", prog, m->name);
    return -1;
  }
  if (*m->n >= m->max) {
    fprintf(stderr, "%s: --%s: at most %zu\n", prog, m->name, m->max);
    return -1;
  }
  m->vals[(*m->n)++] = v;
  return used;
}

int cli_parse_flags(const char *prog, const char *synopsis, const char *about,
                    const tg_flag_t *flags, size_t n,
                    const cli_short_flag_t *shorts, size_t n_shorts,
                    const cli_multi_t *multi, int argc, char **argv,
                    char **pos, size_t max_pos, size_t *n_pos) {
  /* Each short flag may become two arguments: at most twice as many. */
  char **av = calloc((size_t)argc * 2 + 1, sizeof(char *));
  char **owned = calloc((size_t)argc + 1, sizeof(char *));
  if (!av || !owned) {
    free(av);
    free(owned);
    fprintf(stderr, "%s: out of memory\n", prog);
    return -1;
  }
  int ac = 0, no = 0, rv = 0;
  bool only_pos = false;
  av[ac++] = argv[0];
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    if (only_pos || a[0] != '-' || a[1] == 0) {
      av[ac++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      only_pos = true;
      av[ac++] = a;
      continue;
    }
    if (multi && strcmp(a, "--help")) {
      int used = take_multi(prog, multi, argc, argv, i);
      if (used < 0) {
        rv = -2;
        break;
      }
      if (used > 0) {
        i += used - 1;
        continue;
      }
    }
    if (a[1] == '-') {
      /* "--name VALUE": the value is passed through untouched, even when
       * it starts with '-' ("--config -"). */
      av[ac++] = a;
      const tg_flag_t *f = strchr(a, '=') ? NULL : find_long(flags, n, a + 2);
      if (f && f->type != TG_FLAG_BOOL && i + 1 < argc) av[ac++] = argv[++i];
      continue;
    }
    const char *name = short_name(shorts, n_shorts, a[1]);
    if (!name) {
      av[ac++] = a; /* -h, or an unknown option the parser reports */
      continue;
    }
    size_t len = strlen(name) + 3;
    char *l = malloc(len);
    if (!l) {
      rv = -1;
      break;
    }
    snprintf(l, len, "--%s", name);
    owned[no++] = l;
    av[ac++] = l;
    const tg_flag_t *f = find_long(flags, n, name);
    if (a[2]) {
      av[ac++] = a + 2; /* "-t10s" */
    } else if (f && f->type != TG_FLAG_BOOL && i + 1 < argc) {
      av[ac++] = argv[++i];
    }
  }
  if (rv == 0) {
    rv = tg_flags_parse(prog, flags, n, ac, av, pos, max_pos, n_pos);
    if (rv == 1) usage(stdout, prog, synopsis, about, flags, n, shorts, n_shorts);
    else if (rv < 0) rv = -1;
  } else if (rv == -2) {
    rv = -1; /* said why */
  } else {
    fprintf(stderr, "%s: out of memory\n", prog);
  }
  for (int i = 0; i < no; i++) free(owned[i]);
  free(owned);
  free(av);
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

int cli_parse_duration_ms(const char *s, uint64_t *ms) {
  double v;
  char u[4];
  if (split_number(s, &v, u, sizeof(u)) < 0) return -EINVAL;
  double mul;
  if (!strcmp(u, "ms")) mul = 1;
  else if (!strcmp(u, "s") || !u[0]) mul = 1000;
  else if (!strcmp(u, "m") || !strcmp(u, "min")) mul = 60e3;
  else if (!strcmp(u, "h")) mul = 3600e3;
  else return -EINVAL;
  double r = v * mul;
  /* TraceConfig.duration_ms is a uint32. */
  if (r > 4294967295.0) return -ERANGE;
  *ms = (uint64_t)llround(r);
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
