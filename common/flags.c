/* The flag parser and --help generator of flags.h. */
#include "common/flags.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/decimal.h"
#include "common/log.h"
#include "common/units.h"
#include "common/version.h"

#define HELP_VAL 'h'
#define LONG_ONLY_VAL 256 /* + table index: past every short option char */

/* The short form a help text declares ("-x: ..."), or 0. Letters and
 * digits only, and not -h (help). */
static char letter_of(const tg_flag_t *f) {
  const char *h = f->help;
  if (h && h[0] == '-' && isalnum((unsigned char)h[1]) && h[1] != HELP_VAL &&
      h[2] == ':' && h[3] == ' ')
    return h[1];
  return 0;
}

static int val_of(const tg_flag_t *flags, size_t i) {
  char l = letter_of(&flags[i]);
  return l ? (unsigned char)l : LONG_ONLY_VAL + (int)i;
}

/* The table entry getopt_long() answered with |val|. */
static const tg_flag_t *by_val(const tg_flag_t *flags, size_t n, int val) {
  for (size_t i = 0; i < n; i++)
    if (val_of(flags, i) == val) return &flags[i];
  return NULL;
}

/* getopt_long()'s view of the table: the long options and the short
 * option string. Bools take an optional argument so that "--flag=x" comes
 * back to us (to say it takes no value) instead of as an unknown option. */
static int build_getopt(const tg_flag_t *flags, size_t n, struct option **lo,
                        char **so) {
  *lo = calloc(n + 2, sizeof(**lo));
  /* "-": positionals come back in order; ":": a missing value is ':'. */
  *so = malloc(3 * n + 4);
  if (!*lo || !*so) return -ENOMEM;
  char *s = *so;
  *s++ = '-';
  *s++ = ':';
  *s++ = HELP_VAL;
  for (size_t i = 0; i < n; i++) {
    bool is_bool = flags[i].type == TG_FLAG_BOOL;
    (*lo)[i] = (struct option){flags[i].name,
                               is_bool ? optional_argument : required_argument,
                               NULL, val_of(flags, i)};
    char l = letter_of(&flags[i]);
    if (!l) continue;
    *s++ = l;
    if (!is_bool) *s++ = ':';
  }
  *s = 0;
  (*lo)[n] = (struct option){"help", no_argument, NULL, HELP_VAL};
  return 0;
}

/* getopt_long() also takes an unambiguous prefix ("--sock"): a table
 * grows, and a prefix that works today would change meaning or break. */
static bool named_in_full(const char *arg, const char *name) {
  if (arg[0] != '-' || arg[1] != '-') return true; /* the short form */
  size_t len = strcspn(arg + 2, "=");
  return len == strlen(name) && !strncmp(arg + 2, name, len);
}

static int add_to_list(const char *prog, const tg_flag_t *f, const char *v) {
  tg_flag_list_t *l = f->target;
  if (!*v) {
    fprintf(stderr, "%s: --%s: needs a non-empty value\n", prog, f->name);
    return -EINVAL;
  }
  if (*l->n >= l->max) {
    fprintf(stderr, "%s: --%s: at most %zu\n", prog, f->name, l->max);
    return -EINVAL;
  }
  l->vals[(*l->n)++] = v;
  return 0;
}

/* Base units (ms, bytes) per unit of a unit type; 0 for the others. */
static uint64_t unit_of(tg_flag_type_t t) {
  switch (t) {
    case TG_FLAG_MS: return 1;
    case TG_FLAG_SECONDS: return 1000;
    case TG_FLAG_BYTES: return 1;
    case TG_FLAG_KIB: return 1024;
    default: return 0;
  }
}

static bool is_duration(tg_flag_type_t t) {
  return t == TG_FLAG_MS || t == TG_FLAG_SECONDS;
}

static void format_value(const tg_flag_t *f, uint64_t x, char *out, size_t n) {
  uint64_t unit = unit_of(f->type);
  /* Past 2^64 base units it cannot be spelled in them: the plain count. */
  if (!unit || x > UINT64_MAX / unit)
    snprintf(out, n, "%" PRIu64, x);
  else if (is_duration(f->type))
    tg_units_format_duration(x * unit, out, n);
  else
    tg_units_format_size(x * unit, out, n);
}

/* A number, or a value of a unit type in its unit, into the target if it
 * is in range; the error spells the value and range in units. */
static int set_in_range(const char *prog, const tg_flag_t *f, uint64_t x) {
  if (x < f->min || (f->max && x > f->max)) {
    char xs[TG_UNITS_FORMAT_MAX], lo[TG_UNITS_FORMAT_MAX], hi[TG_UNITS_FORMAT_MAX];
    format_value(f, x, xs, sizeof(xs));
    format_value(f, f->min, lo, sizeof(lo));
    format_value(f, f->max, hi, sizeof(hi));
    if (f->max)
      fprintf(stderr, "%s: --%s: %s is outside %s..%s\n", prog, f->name, xs, lo,
              hi);
    else
      fprintf(stderr, "%s: --%s: %s is less than %s\n", prog, f->name, xs, lo);
    return -EINVAL;
  }
  *(uint64_t *)f->target = x;
  return 0;
}

static int set_unit_value(const char *prog, const tg_flag_t *f, const char *v) {
  uint64_t unit = unit_of(f->type), base;
  const char *why = "";
  int rv = is_duration(f->type) ? tg_units_parse_duration(v, unit, &base, &why)
                                : tg_units_parse_size(v, unit, &base, &why);
  if (rv == 0 && base % unit) {
    rv = -EINVAL;
    why = f->type == TG_FLAG_SECONDS ? "not a whole number of seconds"
                                     : "not a whole number of KiB";
  }
  if (rv < 0) {
    fprintf(stderr, "%s: --%s: '%s' is %s (see --help)\n", prog, f->name, v,
            why);
    return -EINVAL;
  }
  return set_in_range(prog, f, base / unit);
}

static int set_value(const char *prog, const tg_flag_t *f, const char *v) {
  switch (f->type) {
    case TG_FLAG_STRING:
      if (!*v) {
        fprintf(stderr, "%s: --%s: needs a non-empty value\n", prog, f->name);
        return -EINVAL;
      }
      *(const char **)f->target = v;
      return 0;
    case TG_FLAG_UINT: {
      uint64_t x;
      int rv = tg_decimal_u64(v, UINT64_MAX, &x);
      if (rv == -ERANGE) {
        fprintf(stderr, "%s: --%s: '%s' is too large\n", prog, f->name, v);
        return -EINVAL;
      }
      if (rv < 0) {
        fprintf(stderr, "%s: --%s: '%s' is not a whole number\n", prog, f->name, v);
        return -EINVAL;
      }
      return set_in_range(prog, f, x);
    }
    case TG_FLAG_MS:
    case TG_FLAG_SECONDS:
    case TG_FLAG_BYTES:
    case TG_FLAG_KIB:
      return set_unit_value(prog, f, v);
    case TG_FLAG_OCTAL: {
      /* Octal digits only, as for decimals (common/decimal.h): strtoul()
       * would also take blanks and a sign. Past ULONG_MAX it saturates. */
      size_t n = strspn(v, "01234567");
      unsigned long x = n && !v[n] ? strtoul(v, NULL, 8) : ULONG_MAX;
      if (x > 07777) {
        fprintf(stderr, "%s: --%s: '%s' is not an octal file mode\n", prog,
                f->name, v);
        return -EINVAL;
      }
      *(unsigned *)f->target = (unsigned)x;
      return 0;
    }
    case TG_FLAG_LOG_LEVEL: {
      tg_log_level_t lv;
      if (tg_log_parse_level(v, &lv) < 0) {
        fprintf(stderr, "%s: --%s: '%s' is not one of error, warn, info, debug\n",
                prog, f->name, v);
        return -EINVAL;
      }
      *(int *)f->target = (int)lv;
      return 0;
    }
    case TG_FLAG_LIST:
      return add_to_list(prog, f, v);
    case TG_FLAG_BOOL:
      break;
  }
  return -EINVAL;
}

static int unknown(const char *prog, const char *arg, int opt) {
  if (opt > 0 && opt < LONG_ONLY_VAL)
    fprintf(stderr, "%s: unknown option '-%c' (see --help)\n", prog, opt);
  else
    fprintf(stderr, "%s: unknown option '%.*s' (see --help)\n", prog,
            (int)strcspn(arg, "="), arg);
  return -EINVAL;
}

static int add_positional(const char *prog, char *a, char **pos,
                          size_t max_pos, size_t *np) {
  if (*np >= max_pos || !pos) {
    fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, a);
    return -EINVAL;
  }
  pos[(*np)++] = a;
  return 0;
}

bool tg_flags_was_given(const tg_flags_given_t *g, size_t index) {
  return index < TG_FLAGS_GIVEN_MAX &&
         (g->bits[index / 64] >> (index % 64) & 1);
}

void tg_flags_mark_given(tg_flags_given_t *g, size_t index) {
  if (index < TG_FLAGS_GIVEN_MAX)
    g->bits[index / 64] |= UINT64_C(1) << (index % 64);
}

static void mark_given(tg_flags_given_t *g, const tg_flag_t *flags,
                       const tg_flag_t *f) {
  if (g) tg_flags_mark_given(g, (size_t)(f - flags));
}

/* One getopt_long() step; 2 when the flags ended. */
static int step(const char *prog, const tg_flag_t *flags, size_t n,
                const struct option *lo, const char *so, int argc,
                char **argv, char **pos, size_t max_pos, size_t *np,
                tg_flags_given_t *given) {
  int at = optind ? optind : 1, idx = -1; /* 0: before the first call */
  int c = getopt_long(argc, argv, so, lo, &idx);
  if (c == -1) return 2;
  if (c == 1) {
    if (given) given->args = true;
    return add_positional(prog, optarg, pos, max_pos, np);
  }
  if (c == '?') return unknown(prog, argv[optind - 1], optopt);
  if (idx >= 0 && !named_in_full(argv[at], lo[idx].name))
    return unknown(prog, argv[at], 0);
  if (c == HELP_VAL) return 1;
  const tg_flag_t *f = by_val(flags, n, c == ':' ? optopt : c);
  if (!f) return unknown(prog, argv[optind - 1], optopt);
  if (c == ':') {
    fprintf(stderr, "%s: --%s needs a value (%s)\n", prog, f->name,
            f->metavar ? f->metavar : "VALUE");
    return -EINVAL;
  }
  mark_given(given, flags, f);
  if (f->type == TG_FLAG_BOOL) {
    if (optarg) {
      fprintf(stderr, "%s: --%s takes no value\n", prog, f->name);
      return -EINVAL;
    }
    *(bool *)f->target = true;
    return 0;
  }
  return set_value(prog, f, optarg);
}

int tg_flags_parse(const char *prog, const tg_flag_t *flags, size_t n, int argc,
                   char **argv, char **pos, size_t max_pos, size_t *n_pos) {
  return tg_flags_parse_given(prog, flags, n, argc, argv, pos, max_pos, n_pos,
                              NULL);
}

int tg_flags_parse_given(const char *prog, const tg_flag_t *flags, size_t n,
                         int argc, char **argv, char **pos, size_t max_pos,
                         size_t *n_pos, tg_flags_given_t *given) {
  struct option *lo = NULL;
  char *so = NULL;
  size_t np = 0;
  if (given) {
    memset(given, 0, sizeof(*given));
    if (n > TG_FLAGS_GIVEN_MAX) {
      fprintf(stderr, "%s: internal error: %zu flags, at most %d recorded\n",
              prog, n, TG_FLAGS_GIVEN_MAX);
      return -EINVAL;
    }
  }
  int rv = build_getopt(flags, n, &lo, &so);
  if (rv == 0) {
    optind = 0; /* glibc: start afresh, whatever an earlier parse left */
    opterr = 0; /* the messages are ours */
    while ((rv = step(prog, flags, n, lo, so, argc, argv, pos, max_pos, &np,
                      given)) == 0) {
    }
    /* After "--" everything is positional. */
    for (int i = optind; rv == 2 && i < argc; i++) {
      if (given) given->args = true;
      if (add_positional(prog, argv[i], pos, max_pos, &np) < 0) rv = -EINVAL;
    }
    if (rv == 2) rv = 0;
  }
  free(lo);
  free(so);
  if (rv == 0 && n_pos) *n_pos = np;
  return rv;
}

void tg_flags_usage(FILE *out, const char *prog, const char *synopsis,
                    const tg_flag_t *flags, size_t n) {
  fprintf(out, "usage: %s %s\n\noptions:\n", prog, synopsis);
  for (size_t i = 0; i < n; i++) {
    const tg_flag_t *f = &flags[i];
    char left[64];
    snprintf(left, sizeof(left), "--%s%s%s", f->name, f->metavar ? " " : "",
             f->metavar ? f->metavar : "");
    fprintf(out, "  %-32s %s", left, f->help);
    switch (f->type) {
      case TG_FLAG_STRING:
        if (*(const char **)f->target)
          fprintf(out, " (default: %s)", *(const char **)f->target);
        break;
      case TG_FLAG_UINT:
        fprintf(out, " (default: %" PRIu64 ")", *(uint64_t *)f->target);
        break;
      case TG_FLAG_MS:
      case TG_FLAG_SECONDS:
      case TG_FLAG_BYTES:
      case TG_FLAG_KIB: {
        /* In the enum's order, from TG_FLAG_MS. */
        static const char *alone[] = {"ms", "seconds", "bytes", "KiB"};
        char d[TG_UNITS_FORMAT_MAX];
        format_value(f, *(uint64_t *)f->target, d, sizeof(d));
        fprintf(out, " (a number alone: %s; default: %s)",
                alone[f->type - TG_FLAG_MS], d);
        break;
      }
      case TG_FLAG_OCTAL:
        fprintf(out, " (default: %04o)", *(unsigned *)f->target);
        break;
      case TG_FLAG_LOG_LEVEL: {
        static const char *names[] = {"error", "warn", "info", "debug"};
        int lv = *(int *)f->target;
        fprintf(out, " (default: %s)", lv >= 0 && lv < 4 ? names[lv] : "?");
        break;
      }
      case TG_FLAG_BOOL:
      case TG_FLAG_LIST:
        break;
    }
    fputc('\n', out);
  }
  fprintf(out, "  %-32s %s\n", "--help", "show this help and exit");
  for (size_t i = 0; i < n; i++) {
    const char *m = flags[i].metavar;
    if (!unit_of(flags[i].type) &&
        !(m && (!strcmp(m, "DURATION") || !strcmp(m, "SIZE"))))
      continue;
    fprintf(out, "\n%s", TG_UNITS_HELP);
    break;
  }
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    char l = letter_of(&flags[i]);
    if (!l) continue;
    fprintf(out, "%s -%c = --%s", any ? "," : "\nshort forms:", l, flags[i].name);
    any = true;
  }
  if (any) fputc('\n', out);
}

void tg_prog_version(FILE *out, const tg_prog_t *p) {
  fprintf(out, "%s %s\n", p->version_name ? p->version_name : p->name,
          TG_VERSION);
  if (p->version_detail) p->version_detail(out);
}

bool tg_prog_flags(const tg_prog_t *p, const tg_flag_t *flags, size_t n,
                   int argc, char **argv, char **pos, size_t max_pos,
                   size_t *n_pos, int *status) {
  /* --version is a flag of the table, so that --help lists it and the
   * line is parsed whole before it answers. */
  bool version = false;
  tg_flag_t *all = malloc((n + 1) * sizeof(*all));
  if (!all) {
    fprintf(stderr, "%s: out of memory\n", p->name);
    *status = TG_EXIT_FAIL;
    return true;
  }
  if (n) memcpy(all, flags, n * sizeof(*all));
  all[n] = (tg_flag_t){"version", TG_FLAG_BOOL, &version, NULL,
                       "print the version and exit", 0, 0};
  /* --version is last: the table's own indexes are the same in |given|. */
  int rv = tg_flags_parse_given(p->name, all, n + 1, argc, argv, pos, max_pos,
                                n_pos, p->given);
  if (rv == 1) {
    tg_flags_usage(stdout, p->name, p->synopsis, all, n + 1);
    if (p->about && p->about[0]) printf("\n%s", p->about);
  }
  free(all);
  if (rv == -ENOMEM) fprintf(stderr, "%s: out of memory\n", p->name);
  if (rv == 0 && version) tg_prog_version(stdout, p);
  *status = rv == 1 || (rv == 0 && version) ? TG_EXIT_OK
            : rv == -ENOMEM                 ? TG_EXIT_FAIL
                                            : TG_EXIT_USAGE;
  return rv != 0 || version;
}
