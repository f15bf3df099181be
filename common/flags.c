/* The flag parser and --help generator of flags.h. */
#include "common/flags.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static const tg_flag_t *find(const tg_flag_t *flags, size_t n, const char *name,
                             size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(flags[i].name) == len && !strncmp(flags[i].name, name, len))
      return &flags[i];
  return NULL;
}

static int set_value(const char *prog, const tg_flag_t *f, const char *v) {
  char *end;
  switch (f->type) {
    case TG_FLAG_STRING:
      if (!*v) {
        fprintf(stderr, "%s: --%s: needs a non-empty value\n", prog, f->name);
        return -EINVAL;
      }
      *(const char **)f->target = v;
      return 0;
    case TG_FLAG_UINT: {
      errno = 0;
      unsigned long long x = strtoull(v, &end, 10);
      if (errno || end == v || *end || v[0] == '-') {
        fprintf(stderr, "%s: --%s: '%s' is not a whole number\n", prog, f->name, v);
        return -EINVAL;
      }
      if (x < f->min || (f->max && x > f->max)) {
        fprintf(stderr, "%s: --%s: %llu is outside %" PRIu64 "..%" PRIu64 "\n",
                prog, f->name, x, f->min, f->max);
        return -EINVAL;
      }
      *(uint64_t *)f->target = x;
      return 0;
    }
    case TG_FLAG_OCTAL: {
      errno = 0;
      unsigned long x = strtoul(v, &end, 8);
      if (errno || end == v || *end || x > 07777) {
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
    case TG_FLAG_BOOL:
      break;
  }
  return -EINVAL;
}

int tg_flags_parse(const char *prog, const tg_flag_t *flags, size_t n, int argc,
                   char **argv, char **pos, size_t max_pos, size_t *n_pos) {
  size_t np = 0;
  bool only_pos = false;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    if (only_pos || a[0] != '-' || a[1] == 0) {
      if (np >= max_pos || !pos) {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, a);
        return -EINVAL;
      }
      pos[np++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      only_pos = true;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (a[1] != '-') {
      fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, a);
      return -EINVAL;
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const tg_flag_t *f = find(flags, n, name, len);
    if (!f) {
      fprintf(stderr, "%s: unknown option '--%.*s' (see --help)\n", prog,
              (int)len, name);
      return -EINVAL;
    }
    if (f->type == TG_FLAG_BOOL) {
      if (eq) {
        fprintf(stderr, "%s: --%s takes no value\n", prog, f->name);
        return -EINVAL;
      }
      *(bool *)f->target = true;
      continue;
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s: --%s needs a value (%s)\n", prog, f->name,
                f->metavar ? f->metavar : "VALUE");
        return -EINVAL;
      }
      v = argv[++i];
    }
    int rv = set_value(prog, f, v);
    if (rv < 0) return rv;
  }
  if (n_pos) *n_pos = np;
  return 0;
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
        break;
    }
    fputc('\n', out);
  }
  fprintf(out, "  %-32s %s\n", "--help", "show this help and exit");
}
