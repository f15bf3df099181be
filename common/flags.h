/* Command-line flags from one definition table per program.
 *
 * The table gives each flag's name, type, default, range and help; the
 * parser fills the targets and tg_flags_usage() prints --help from the same
 * table, so the two never disagree. Errors name the flag and the problem.
 */
#ifndef TRACEGATE_FLAGS_H
#define TRACEGATE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>


typedef enum tg_flag_type {
  TG_FLAG_STRING, /* const char **; points into argv */
  TG_FLAG_UINT,   /* uint64_t *; decimal, with min/max */
  TG_FLAG_OCTAL,  /* unsigned *; file modes like 0660 */
  TG_FLAG_BOOL,   /* bool *; takes no value */
  TG_FLAG_LOG_LEVEL, /* int * (tg_log_level_t) */
} tg_flag_type_t;

typedef struct tg_flag {
  const char *name;    /* without the leading "--" */
  tg_flag_type_t type;
  void *target;        /* holds the default before parsing */
  const char *metavar; /* "PATH", "N"; NULL for bools */
  const char *help;
  uint64_t min, max;   /* TG_FLAG_UINT; max 0 = no limit */
} tg_flag_t;

/* Parses argv[1..] (flags as "--name value" or "--name=value"). Positional
 * arguments are collected into |pos| (at most |max_pos|; NULL if none are
 * allowed). Returns 0, 1 when --help was given (the caller prints
 * tg_flags_usage() with its synopsis and exits 0), or
 * -EINVAL after printing "prog: --flag: why" to stderr. */
int tg_flags_parse(const char *prog, const tg_flag_t *flags, size_t n,
                             int argc, char **argv, char **pos, size_t max_pos,
                             size_t *n_pos);

void tg_flags_usage(FILE *out, const char *prog, const char *synopsis,
                              const tg_flag_t *flags, size_t n);

#endif /* TRACEGATE_FLAGS_H */
