/* SPDX-License-Identifier: Apache-2.0 */
/* The rules between a program's flags, as data.
 *
 * "--txt needs -c", "--attach and --detach exclude each other", "give -c
 * or data source names": each is one entry of a table next to the flag
 * table it speaks of, naming flags by their table name, and one pure
 * validator checks a command line's given flags (tg_flags_given_t, filled
 * by tg_flags_parse_given()) against it. A rule that depends on values
 * (-o - and --detach) is a TG_RULE_CHECK entry: a predicate over the
 * program's options, still in the table, still naming its flags.
 *
 * A rule naming a flag its table lacks is a programmer's error:
 * tg_flag_rules_lint() finds it (each program's test runs it), and the
 * validator refuses such a rule rather than reading it as "not given".
 */
#ifndef TRACEGATE_FLAG_RULES_H
#define TRACEGATE_FLAG_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/flags.h"

/* The name a rule uses for the positional arguments (the data sources
 * of `tracegate record`). */
#define TG_FLAG_ARGS "(arguments)"

/* Names per side of a rule; the lists end at the first NULL. */
#define TG_FLAG_RULE_NAMES 24

typedef enum tg_flag_rule_kind {
  TG_RULE_REQUIRES,       /* any of a given: at least one of b must be */
  TG_RULE_EXCLUDES,       /* any of a given: none of b may be */
  TG_RULE_ANY_OF,         /* at least one of a must be given */
  TG_RULE_AT_MOST_ONE_OF, /* at most one of a may be given */
  TG_RULE_ONE_OF,         /* exactly one of a must be given */
  TG_RULE_REFUSED,        /* none of a may be given (kept, not acted on) */
  /* |ok| says whether the values agree; a and b name the flags it reads
   * (for the lint and the reader). Broken only when a flag of a was
   * given (or a is empty) and ok() returns false. */
  TG_RULE_CHECK,
} tg_flag_rule_kind_t;

typedef struct tg_flag_rule {
  tg_flag_rule_kind_t kind;
  const char *a[TG_FLAG_RULE_NAMES]; /* flag names without "--" */
  const char *b[TG_FLAG_RULE_NAMES];
  /* The message when broken (without the program's name); NULL: one is
   * built from the names ("--a needs --b", "--a and --b exclude each
   * other"). A TG_RULE_CHECK must have one. */
  const char *why;
  /* TG_RULE_CHECK: true when the options |ctx| (the program's, as
   * handed to tg_flag_rules_check()) keep the rule. */
  bool (*ok)(const void *ctx);
} tg_flag_rule_t;

/* A rule table's entries, each side a parenthesised list of names:
 *   TG_FLAG_REQUIRES(("txt"), ("config"), "--txt needs -c CONFIG"),
 *   TG_FLAG_CHECK(("detach"), ("out"), "...", detach_not_to_stdout),
 * WHY may be NULL except for TG_FLAG_CHECK. */
#define TG__FLAG_NAMES(...) {__VA_ARGS__}
#define TG_FLAG_REQUIRES(A, B, WHY)                                        \
  {.kind = TG_RULE_REQUIRES, .a = TG__FLAG_NAMES A, .b = TG__FLAG_NAMES B, \
   .why = (WHY), .ok = NULL}
#define TG_FLAG_EXCLUDES(A, B, WHY)                                        \
  {.kind = TG_RULE_EXCLUDES, .a = TG__FLAG_NAMES A, .b = TG__FLAG_NAMES B, \
   .why = (WHY), .ok = NULL}
#define TG_FLAG_ANY_OF(A, WHY)                                        \
  {.kind = TG_RULE_ANY_OF, .a = TG__FLAG_NAMES A, .b = {NULL}, .why = (WHY), \
   .ok = NULL}
#define TG_FLAG_AT_MOST_ONE_OF(A, WHY)                                \
  {.kind = TG_RULE_AT_MOST_ONE_OF, .a = TG__FLAG_NAMES A, .b = {NULL}, \
   .why = (WHY), .ok = NULL}
#define TG_FLAG_ONE_OF(A, WHY)                                        \
  {.kind = TG_RULE_ONE_OF, .a = TG__FLAG_NAMES A, .b = {NULL}, .why = (WHY), \
   .ok = NULL}
#define TG_FLAG_REFUSED(A, WHY)                                        \
  {.kind = TG_RULE_REFUSED, .a = TG__FLAG_NAMES A, .b = {NULL}, .why = (WHY), \
   .ok = NULL}
#define TG_FLAG_CHECK(A, B, WHY, OK)                                    \
  {.kind = TG_RULE_CHECK, .a = TG__FLAG_NAMES A, .b = TG__FLAG_NAMES B, \
   .why = (WHY), .ok = (OK)}

/* Checks |given| against |rules| in order and stops at the first broken
 * one, so that one command line always gets the same message. Pure: reads
 * only its arguments (and what a TG_RULE_CHECK's ok() reads of |ctx|).
 * Returns 0 when every rule holds; -EINVAL when one is broken, its message
 * in |err| (truncated to |cap|) and its index in *|which| (when not
 * NULL); and for a bug in the rules, said in
 * |err| as tg_flag_rules_lint() says it: -ENOENT when a rule names a flag
 * that is not in |flags|, -EDOM when a rule's shape does not fit its kind. */
int tg_flag_rules_check(const tg_flag_t *flags, size_t n,
                        const tg_flags_given_t *given,
                        const tg_flag_rule_t *rules, size_t n_rules,
                        const void *ctx, char *err, size_t cap,
                        size_t *which);

/* Checks the rules themselves against the flag table: every name is a
 * flag of |flags| (or TG_FLAG_ARGS), no side is empty where the kind
 * needs it, a TG_RULE_CHECK has ok() and why. Returns 0 or -ENOENT /
 * -EDOM with the first problem in |err|. */
int tg_flag_rules_lint(const tg_flag_t *flags, size_t n,
                       const tg_flag_rule_t *rules, size_t n_rules, char *err,
                       size_t cap);

#endif /* TRACEGATE_FLAG_RULES_H */
