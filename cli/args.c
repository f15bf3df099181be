/* Command-line plumbing: the commands' flags (tg_prog_flags, as every
 * program's), and durations and sizes (common/units.h) with their ranges. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/units.h"
#include "cli/cli.h"

int cli_parse_flags(const char *prog, const char *synopsis, const char *about,
                    const tg_flag_t *flags, size_t n, int argc, char **argv,
                    char **pos, size_t max_pos, size_t *n_pos) {
  return cli_parse_flags_given(prog, synopsis, about, flags, n, argc, argv, pos,
                               max_pos, n_pos, NULL);
}

int cli_parse_flags_given(const char *prog, const char *synopsis,
                          const char *about, const tg_flag_t *flags, size_t n,
                          int argc, char **argv, char **pos, size_t max_pos,
                          size_t *n_pos, tg_flags_given_t *given) {
  /* Every command's --version is the program's. */
  const tg_prog_t p = {.name = prog, .synopsis = synopsis, .about = about,
                       .version_name = CLI_PROG, .given = given};
  int status;
  if (!tg_prog_flags(&p, flags, n, argc, argv, pos, max_pos, n_pos, &status))
    return 0;
  return status == TG_EXIT_OK ? 1 : -1; /* -1: said why */
}

/* One value of the grammar of common/units.h, in [min, max]; says why
 * not on stderr. */
static int unit_flag(const char *prog, const char *flag, const char *v,
                     bool duration, uint64_t bare, uint64_t min, uint64_t max,
                     uint64_t *out) {
  uint64_t x;
  const char *why = "";
  int rv = duration ? tg_units_parse_duration(v, bare, &x, &why)
                    : tg_units_parse_size(v, bare, &x, &why);
  if (rv < 0) {
    fprintf(stderr, "%s: --%s: '%s' is %s (see --help)\n", prog, flag, v, why);
    return -EINVAL;
  }
  if (x < min || x > max) {
    char lo[TG_UNITS_FORMAT_MAX], hi[TG_UNITS_FORMAT_MAX];
    if (duration) {
      tg_units_format_duration(min, lo, sizeof(lo));
      tg_units_format_duration(max, hi, sizeof(hi));
    } else {
      tg_units_format_size(min, lo, sizeof(lo));
      tg_units_format_size(max, hi, sizeof(hi));
    }
    fprintf(stderr, "%s: --%s: '%s' is outside %s..%s\n", prog, flag, v, lo, hi);
    return -ERANGE;
  }
  *out = x;
  return 0;
}

int cli_flag_duration_ms(const char *prog, const char *flag, const char *v,
                         uint64_t min_ms, uint64_t max_ms, uint64_t *ms) {
  return unit_flag(prog, flag, v, true, 1000, min_ms, max_ms, ms);
}

int cli_flag_size(const char *prog, const char *flag, const char *v,
                  uint64_t min, uint64_t max, uint64_t *bytes) {
  return unit_flag(prog, flag, v, false, 1, min, max, bytes);
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
