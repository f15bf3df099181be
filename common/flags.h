/* Command-line flags from one definition table per program.
 *
 * The table gives each flag's name, type, default, range and help; the
 * parser (getopt_long, its option array generated from the table) fills
 * the targets and tg_flags_usage() prints --help from the same table, so
 * the two never disagree. Errors name the flag and the problem.
 *
 * --help ends with the grammar of durations and sizes (common/units.h)
 * when a flag is of a unit type or its metavar is DURATION or SIZE (a
 * string the program parses with common/units.h itself).
 *
 * A short form is declared where --help shows it: a help text that starts
 * with "-x: " makes -x the flag's short form ("-x V" and "-xV").
 */
#ifndef TRACEGATE_FLAGS_H
#define TRACEGATE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>


typedef enum tg_flag_type {
  TG_FLAG_STRING, /* const char **; points into argv */
  TG_FLAG_UINT,   /* uint64_t *; decimal, with min/max */
  TG_FLAG_OCTAL,  /* unsigned *; file modes like 0660 */
  TG_FLAG_BOOL,   /* bool *; takes no value */
  TG_FLAG_LOG_LEVEL, /* int * (tg_log_level_t) */
  TG_FLAG_LIST,   /* tg_flag_list_t *; may be given many times */
  /* Durations and sizes in the grammar of common/units.h ("1m30s",
   * "64M"), each into a uint64_t * counting the type's unit, which is also
   * what a number alone counts; min/max are in that unit too. A value
   * that is not a whole number of it is refused. */
  TG_FLAG_MS,      /* milliseconds */
  TG_FLAG_SECONDS, /* seconds */
  TG_FLAG_BYTES,   /* bytes */
  TG_FLAG_KIB,     /* KiB (1024 bytes) */
} tg_flag_type_t;

/* The values of a TG_FLAG_LIST flag, in order: pointers into argv. */
typedef struct tg_flag_list {
  const char **vals; /* |max| slots, owned by the caller */
  size_t max;
  size_t *n;         /* how many are filled; the caller zeroes it */
} tg_flag_list_t;

typedef struct tg_flag {
  const char *name;    /* without the leading "--" */
  tg_flag_type_t type;
  void *target;        /* holds the default before parsing */
  const char *metavar; /* "PATH", "N"; NULL for bools */
  const char *help;    /* "-x: ..." gives the short form -x */
  uint64_t min, max;   /* TG_FLAG_UINT and the units; max 0 = no limit */
} tg_flag_t;

/* Which flags of a table a command line gave, by their index in the
 * table, and whether it gave positional arguments: what the rules of
 * common/flag_rules.h are checked against. A flag given with the value
 * of its default is given all the same. */
#define TG_FLAGS_GIVEN_MAX 128 /* flags of one table that are recorded */
typedef struct tg_flags_given {
  uint64_t bits[TG_FLAGS_GIVEN_MAX / 64];
  bool args; /* a positional argument was given */
} tg_flags_given_t;

/* Whether the flag at |index| of the table was given; false past
 * TG_FLAGS_GIVEN_MAX. */
bool tg_flags_was_given(const tg_flags_given_t *g, size_t index);

/* Marks the flag at |index| given (ignored past TG_FLAGS_GIVEN_MAX): for
 * "flags" that are not parsed from a command line, such as the fields a
 * config sets, checked by rules all the same. */
void tg_flags_mark_given(tg_flags_given_t *g, size_t index);

/* Parses argv[1..]: "--name value", "--name=value", and "-x value" or
 * "-xvalue" for short forms; names must be given in full. "--" ends the
 * flags. Positional arguments are collected into |pos| (at most
 * |max_pos|; NULL if none are allowed). Returns 0, 1 when --help or -h was
 * given (the caller prints tg_flags_usage() with its synopsis and exits
 * 0), -ENOMEM, or -EINVAL after printing "prog: --flag: why" to stderr.
 * Uses getopt_long(), so it is not reentrant. */
int tg_flags_parse(const char *prog, const tg_flag_t *flags, size_t n,
                   int argc, char **argv, char **pos, size_t max_pos,
                   size_t *n_pos);

/* tg_flags_parse(), also filling |given| (zeroed first; owned by the
 * caller; NULL: not wanted). A table of more than TG_FLAGS_GIVEN_MAX
 * flags cannot be recorded: -EINVAL before anything is parsed. */
int tg_flags_parse_given(const char *prog, const tg_flag_t *flags, size_t n,
                         int argc, char **argv, char **pos, size_t max_pos,
                         size_t *n_pos, tg_flags_given_t *given);

/* The flags with their help and defaults, then the short forms if any. */
void tg_flags_usage(FILE *out, const char *prog, const char *synopsis,
                    const tg_flag_t *flags, size_t n);

/* --- a program's command line ------------------------------------------- */

/* The exit statuses every program gives alike; a program's own ones come
 * after these (tracegate snapshot's 3: stored, some hosts failed). */
#define TG_EXIT_OK 0
#define TG_EXIT_FAIL 1  /* it could not do what it was asked */
#define TG_EXIT_USAGE 2 /* a bad flag or argument, named on stderr */

/* What main() hands tg_prog_flags() besides its flag table. */
typedef struct tg_prog {
  const char *name;     /* "tracegated", "tracegate record": every message's */
  const char *synopsis; /* --help: "usage: NAME SYNOPSIS" */
  const char *about;    /* --help: a paragraph after the flags; NULL: none */
  /* --version's first line is "PROGRAM VERSION": PROGRAM is this (a
   * command's program, "tracegate"), or |name| when NULL. */
  const char *version_name;
  /* --version: lines after the first one (the libraries that serve a
   * program's parts); NULL: none. */
  void (*version_detail)(FILE *out);
  /* Filled with the flags of the table given (tg_flags_parse_given());
   * NULL: not wanted. Owned by main(). */
  tg_flags_given_t *given;
} tg_prog_t;

/* main()'s flags: tg_flags_parse() with |flags| and the two flags every
 * program answers alike, --help (the usage, then |about|, to stdout) and
 * --version (tg_prog_version(), after the whole line parsed: a bad flag
 * anywhere still fails). Returns true when main() is to return *status at
 * once: TG_EXIT_OK after --help or --version, TG_EXIT_USAGE after a bad
 * flag or argument was named on stderr ("NAME: --flag: why"), TG_EXIT_FAIL
 * when out of memory; false: the targets are set, go on. |flags| must not
 * name "help" or "version". */
bool tg_prog_flags(const tg_prog_t *p, const tg_flag_t *flags, size_t n,
                   int argc, char **argv, char **pos, size_t max_pos,
                   size_t *n_pos, int *status);

/* --version's output: "PROGRAM VERSION" on a line, then the detail. */
void tg_prog_version(FILE *out, const tg_prog_t *p);

#endif /* TRACEGATE_FLAGS_H */
