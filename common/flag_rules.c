/* SPDX-License-Identifier: Apache-2.0 */
/* The validator of flag_rules.h: rules as data over the given flags. */
#include "common/flag_rules.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A name's place in the table: n for TG_FLAG_ARGS, -1 when the table has
 * no such flag. */
static long index_of(const tg_flag_t *flags, size_t n, const char *name) {
  if (!strcmp(name, TG_FLAG_ARGS)) return (long)n;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(flags[i].name, name)) return (long)i;
  return -1;
}

static size_t count_names(const char *const *names) {
  size_t k = 0;
  while (k < TG_FLAG_RULE_NAMES && names[k]) k++;
  return k;
}

/* "--name", or the positional arguments' name as it is. */
static const char *dashes(const char *name) {
  return strcmp(name, TG_FLAG_ARGS) ? "--" : "";
}

/* Every name of |names| is in the table; else -ENOENT, said in |err|. */
static int names_known(const tg_flag_t *flags, size_t n, size_t rule,
                       const char *const *names, char *err, size_t cap) {
  for (size_t k = 0; k < count_names(names); k++) {
    if (index_of(flags, n, names[k]) < 0) {
      snprintf(err, cap, "flag rule %zu names --%s, which is not a flag",
               rule, names[k]);
      return -ENOENT;
    }
  }
  return 0;
}

/* The first name of |names| given, or NULL. Names are known here. */
static const char *first_given(const tg_flag_t *flags, size_t n,
                               const tg_flags_given_t *g,
                               const char *const *names, const char *skip) {
  for (size_t k = 0; k < count_names(names); k++) {
    if (skip && !strcmp(names[k], skip)) continue;
    long i = index_of(flags, n, names[k]);
    bool on = (size_t)i == n ? g->args : tg_flags_was_given(g, (size_t)i);
    if (on) return names[k];
  }
  return NULL;
}

/* "--a or --b or --c" into |out|. */
static void join_or(const char *const *names, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (size_t k = 0; k < count_names(names) && used < cap; k++) {
    int w = snprintf(out + used, cap - used, "%s%s%s", k ? " or " : "",
                     dashes(names[k]), names[k]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

static void say_excludes(const char *x, const char *y, char *err, size_t cap) {
  snprintf(err, cap, "%s%s and %s%s exclude each other", dashes(x), x,
           dashes(y), y);
}

/* Whether rule |r| holds; when not, its message in |err|. */
static bool holds(const tg_flag_t *flags, size_t n, const tg_flags_given_t *g,
                  const tg_flag_rule_t *r, const void *ctx, char *err,
                  size_t cap) {
  const char *x = first_given(flags, n, g, r->a, NULL), *y = NULL;
  char list[512];
  switch (r->kind) {
    case TG_RULE_REQUIRES:
      if (!x || first_given(flags, n, g, r->b, NULL)) return true;
      join_or(r->b, list, sizeof(list));
      snprintf(err, cap, "%s%s needs %s", dashes(x), x, list);
      break;
    case TG_RULE_EXCLUDES:
      if (!x || !(y = first_given(flags, n, g, r->b, NULL))) return true;
      say_excludes(x, y, err, cap);
      break;
    case TG_RULE_ANY_OF:
      if (x) return true;
      join_or(r->a, list, sizeof(list));
      snprintf(err, cap, "give %s", list);
      break;
    case TG_RULE_ONE_OF:
    case TG_RULE_AT_MOST_ONE_OF:
      y = x ? first_given(flags, n, g, r->a, x) : NULL;
      if (y) {
        say_excludes(x, y, err, cap);
        break;
      }
      if (x || r->kind == TG_RULE_AT_MOST_ONE_OF) return true;
      join_or(r->a, list, sizeof(list));
      snprintf(err, cap, "give %s", list);
      break;
    case TG_RULE_REFUSED:
      if (!x) return true;
      snprintf(err, cap, "%s%s is not supported", dashes(x), x);
      break;
    case TG_RULE_CHECK:
      if ((count_names(r->a) && !x) || r->ok(ctx)) return true;
      break;
  }
  /* The rule's own words win over the built ones. */
  if (r->why) snprintf(err, cap, "%s", r->why);
  return false;
}

/* The shape of rule |i|: sides present as its kind needs them. */
static int rule_shape(const tg_flag_rule_t *r, size_t i, char *err,
                      size_t cap) {
  size_t na = count_names(r->a), nb = count_names(r->b);
  bool ok;
  switch (r->kind) {
    case TG_RULE_REQUIRES:
    case TG_RULE_EXCLUDES:
      ok = na && nb;
      break;
    case TG_RULE_ANY_OF:
    case TG_RULE_REFUSED:
      ok = na && !nb;
      break;
    case TG_RULE_AT_MOST_ONE_OF:
    case TG_RULE_ONE_OF:
      ok = na >= 2 && !nb;
      break;
    case TG_RULE_CHECK:
      ok = r->ok && r->why && (na || nb);
      break;
    default:
      ok = false;
  }
  if (ok) return 0;
  snprintf(err, cap, "flag rule %zu: its names, kind or check do not fit", i);
  return -EDOM;
}

/* Rule |r|, the |i|th of its table, against the flag table. */
static int lint_one(const tg_flag_t *flags, size_t n, const tg_flag_rule_t *r,
                    size_t i, char *err, size_t cap) {
  int rv = rule_shape(r, i, err, cap);
  if (rv == 0) rv = names_known(flags, n, i, r->a, err, cap);
  if (rv == 0) rv = names_known(flags, n, i, r->b, err, cap);
  return rv;
}

int tg_flag_rules_lint(const tg_flag_t *flags, size_t n,
                       const tg_flag_rule_t *rules, size_t n_rules, char *err,
                       size_t cap) {
  for (size_t i = 0; i < n_rules; i++) {
    int rv = lint_one(flags, n, &rules[i], i, err, cap);
    if (rv < 0) return rv;
  }
  return 0;
}

int tg_flag_rules_check(const tg_flag_t *flags, size_t n,
                        const tg_flags_given_t *given,
                        const tg_flag_rule_t *rules, size_t n_rules,
                        const void *ctx, char *err, size_t cap,
                        size_t *which) {
  for (size_t i = 0; i < n_rules; i++) {
    /* An unknown name would read as "not given" and silently disable the
     * rule: refused instead, as is a rule of no known shape. */
    int rv = lint_one(flags, n, &rules[i], i, err, cap);
    if (rv < 0) return rv;
    if (!holds(flags, n, given, &rules[i], ctx, err, cap)) {
      if (which) *which = i;
      return -EINVAL;
    }
  }
  return 0;
}
