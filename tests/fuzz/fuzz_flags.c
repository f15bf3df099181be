/* Fuzzes the flag parser every program uses (common/flags.c,
 * tg_flags_parse): argv is outside input, and a daemon started by a
 * script or a unit file may be given anything.
 *
 * Input: the arguments, separated by NUL bytes (at most MAX_ARGS; the
 * last one need not end with a NUL). The table has one flag of each type,
 * most with a short form.
 *
 * Invariants (trap on violation):
 * - the result is 0, 1 (--help), -EINVAL or -ENOMEM;
 * - positionals are at most MAX_POS, each one of the arguments;
 * - a string or list value is one of the arguments (or its "=value"
 *   part), never empty; a list has at most its capacity;
 * - a number is within its range or still the default (durations and
 *   sizes too, in their flag's unit); an octal mode is at most 07777; a
 *   log level is one of the four;
 * - parsing the same arguments again gives the same result (getopt's
 *   global state is reset between parses);
 * - the flags recorded as given (tg_flags_parse_given) are flags of the
 *   table, and a flag whose value left its default, or a positional, was
 *   recorded; a rule table over them (common/flag_rules.h) answers 0 or
 *   -EINVAL with a terminated message, never a bug code.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/flag_rules.h"
#include "common/flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32
#define MAX_POS 4
#define LIST_MAX 3
#define UINT_DEFAULT 7

typedef struct values {
  const char *str;
  uint64_t num, ms, secs, kib;
  unsigned mode;
  bool flag;
  int level;
  const char *list[LIST_MAX];
  size_t n_list;
  char *pos[MAX_POS];
  size_t n_pos;
  int rv;
  tg_flags_given_t given;
} values_t;

/* The table's flags by index, as parse() lays them out. */
enum { F_NAME, F_COUNT, F_MODE, F_FORCE, F_LEVEL, F_HOST, F_MS, F_SECS, F_KIB,
       N_FLAGS };

/* |v| points into one of the arguments. */
static bool in_args(const char *v, char **argv, int argc) {
  for (int i = 0; i < argc; i++) {
    size_t len = strlen(argv[i]);
    if (v >= argv[i] && v <= argv[i] + len) return true;
  }
  return false;
}

/* One rule of each kind over the table: the validator's answer is 0 or
 * -EINVAL, its message terminated. */
static bool no_host_is_fine(const void *ctx) {
  (void)ctx;
  return true;
}

static void check_rules(const tg_flag_t *flags, size_t n,
                        const tg_flags_given_t *g) {
  static const tg_flag_rule_t rules[] = {
      TG_FLAG_REQUIRES(("force"), ("name", "host"), NULL),
      TG_FLAG_EXCLUDES(("mode"), ("log-level", TG_FLAG_ARGS), NULL),
      TG_FLAG_ANY_OF(("count", "timeout-ms"), NULL),
      TG_FLAG_AT_MOST_ONE_OF(("lifetime", "window-kb", "host"), NULL),
      TG_FLAG_ONE_OF(("name", "count"), NULL),
      TG_FLAG_REFUSED(("window-kb"), NULL),
      TG_FLAG_CHECK(("host"), (NULL), "why", no_host_is_fine),
  };
  const size_t nr = sizeof(rules) / sizeof(rules[0]);
  char err[64];
  for (size_t k = 0; k < nr; k++) {
    size_t which = nr;
    memset(err, 'x', sizeof(err));
    int rv = tg_flag_rules_check(flags, n, g, &rules[k], 1, NULL, err,
                                 sizeof(err), &which);
    if (rv != 0 && rv != -EINVAL) __builtin_trap();
    if (rv == -EINVAL && (which != 0 || !memchr(err, 0, sizeof(err))))
      __builtin_trap();
  }
}

static void parse(char **argv, int argc, values_t *v) {
  memset(v, 0, sizeof(*v));
  v->num = UINT_DEFAULT;
  v->ms = v->secs = v->kib = UINT_DEFAULT;
  v->mode = 0640;
  v->level = 2;
  tg_flag_list_t list = {v->list, LIST_MAX, &v->n_list};
  const tg_flag_t flags[] = {
      {"name", TG_FLAG_STRING, &v->str, "NAME", "-s: a string", 0, 0},
      {"count", TG_FLAG_UINT, &v->num, "N", "-n: a number", 1, 1000},
      {"mode", TG_FLAG_OCTAL, &v->mode, "MODE", "a file mode", 0, 0},
      {"force", TG_FLAG_BOOL, &v->flag, NULL, "-f: a switch", 0, 0},
      {"log-level", TG_FLAG_LOG_LEVEL, &v->level, "LEVEL", "a level", 0, 0},
      {"host", TG_FLAG_LIST, &list, "HOST", "-H: repeated", 0, 0},
      {"timeout-ms", TG_FLAG_MS, &v->ms, "DURATION", "-t: ms", 100, 600000},
      {"lifetime", TG_FLAG_SECONDS, &v->secs, "DURATION", "s", 1, 3600},
      {"window-kb", TG_FLAG_KIB, &v->kib, "SIZE", "-w: KiB", 64, 1048576},
  };
  v->rv = tg_flags_parse_given("fuzz", flags, sizeof(flags) / sizeof(flags[0]),
                               argc, argv, v->pos, MAX_POS, &v->n_pos,
                               &v->given);
  if (v->rv == 0) check_rules(flags, N_FLAGS, &v->given);
}

static void check(const values_t *v, char **argv, int argc) {
  if (v->rv != 0 && v->rv != 1 && v->rv != -EINVAL && v->rv != -ENOMEM)
    __builtin_trap();
  if (v->n_pos > MAX_POS || v->n_list > LIST_MAX) __builtin_trap();
  for (size_t i = 0; i < v->n_pos; i++)
    if (!in_args(v->pos[i], argv, argc)) __builtin_trap();
  if (v->str && (!*v->str || !in_args(v->str, argv, argc))) __builtin_trap();
  for (size_t i = 0; i < v->n_list; i++)
    if (!*v->list[i] || !in_args(v->list[i], argv, argc)) __builtin_trap();
  if (v->num != UINT_DEFAULT && (v->num < 1 || v->num > 1000)) __builtin_trap();
  if (v->ms != UINT_DEFAULT && (v->ms < 100 || v->ms > 600000)) __builtin_trap();
  if (v->secs != UINT_DEFAULT && (v->secs < 1 || v->secs > 3600)) __builtin_trap();
  if (v->kib != UINT_DEFAULT && (v->kib < 64 || v->kib > 1048576)) __builtin_trap();
  if (v->mode > 07777) __builtin_trap();
  if (v->level < 0 || v->level > 3) __builtin_trap();
  for (size_t i = N_FLAGS; i < TG_FLAGS_GIVEN_MAX; i++)
    if (tg_flags_was_given(&v->given, i)) __builtin_trap();
  if (v->rv != 0) return;
  if ((v->str && !tg_flags_was_given(&v->given, F_NAME)) ||
      (v->n_list && !tg_flags_was_given(&v->given, F_HOST)) ||
      (v->flag && !tg_flags_was_given(&v->given, F_FORCE)) ||
      (v->num != UINT_DEFAULT && !tg_flags_was_given(&v->given, F_COUNT)) ||
      (v->n_pos && !v->given.args))
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* argv[0], then the arguments: one NUL-terminated copy. */
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[MAX_ARGS + 2] = {"fuzz"};
  int argc = 1;
  for (size_t off = 0; off < size && argc <= MAX_ARGS;) {
    argv[argc++] = buf + off;
    off += strlen(buf + off) + 1;
  }
  /* getopt permutes argv: parse copies, compare the values. */
  char *a1[MAX_ARGS + 2], *a2[MAX_ARGS + 2];
  memcpy(a1, argv, sizeof(argv));
  memcpy(a2, argv, sizeof(argv));
  values_t v1, v2;
  parse(a1, argc, &v1);
  check(&v1, argv, argc);
  parse(a2, argc, &v2);
  if (v1.rv != v2.rv || v1.n_pos != v2.n_pos || v1.n_list != v2.n_list ||
      v1.num != v2.num || v1.ms != v2.ms || v1.secs != v2.secs ||
      v1.kib != v2.kib || v1.mode != v2.mode || v1.flag != v2.flag ||
      v1.level != v2.level || v1.str != v2.str)
    __builtin_trap();
  for (size_t i = 0; i < v1.n_pos; i++)
    if (v1.pos[i] != v2.pos[i]) __builtin_trap();
  free(buf);
  return 0;
}
