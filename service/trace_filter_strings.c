/* string_filter_chain: Perfetto's string filter rules over PCRE2; see
 * trace_filter.h.
 *
 * Perfetto compiles the patterns as ECMAScript std::regex over bytes. The
 * PCRE2 options below give the same meaning to what such patterns use:
 * bytes, not UTF-8; '$' only at the very end; '.' stops at \r and \n;
 * \u and \x as in ECMAScript. A "match" policy must match the whole
 * string (anchored at both ends, backtracking into alternatives as
 * std::regex_match does); the repeated search walks the matches as
 * std::regex_iterator does, an empty match retried non-empty at the same
 * place before moving on one byte. Redaction happens in place, group by
 * group, so a later search sees the redacted bytes behind it, as there.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcre2.h>

#include "service/trace_filter.h"

typedef struct rule {
  int policy;
  pcre2_code *re;
  char *atrace_prefix;
  size_t atrace_prefix_len;
} rule_t;

struct tg_string_filter {
  rule_t *rules;
  size_t n_rules;
  pcre2_match_data *md; /* room for the groups of every rule */
  uint32_t max_groups;
};

tg_string_filter_t *tg_string_filter_new(void) {
  return calloc(1, sizeof(tg_string_filter_t));
}

void tg_string_filter_free(tg_string_filter_t *sf) {
  if (!sf) return;
  for (size_t i = 0; i < sf->n_rules; i++) {
    pcre2_code_free(sf->rules[i].re);
    free(sf->rules[i].atrace_prefix);
  }
  free(sf->rules);
  pcre2_match_data_free(sf->md);
  free(sf);
}

size_t tg_string_filter_n_rules(const tg_string_filter_t *sf) {
  return sf ? sf->n_rules : 0;
}

/* Sizes the shared match data for |groups| capture groups. */
static int ensure_match_data(tg_string_filter_t *sf, uint32_t groups) {
  if (sf->md && groups <= sf->max_groups) return 0;
  pcre2_match_data *md = pcre2_match_data_create(groups + 1, NULL);
  if (!md) return -ENOMEM;
  pcre2_match_data_free(sf->md);
  sf->md = md;
  sf->max_groups = groups;
  return 0;
}

static pcre2_code *compile(const char *pattern, char *why, size_t why_len,
                           int *rv) {
  pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
  if (!cc) {
    *rv = -ENOMEM;
    return NULL;
  }
  pcre2_set_newline(cc, PCRE2_NEWLINE_ANYCRLF);
  int code;
  PCRE2_SIZE at;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                 PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX, &code,
                                 &at, cc);
  pcre2_compile_context_free(cc);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(code, msg, sizeof(msg));
    tg__trace_filter_say(why, why_len, "regex_pattern '%s': %s at offset %zu", pattern,
        (const char *)msg, (size_t)at);
    *rv = code == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EINVAL;
    return NULL;
  }
  /* JIT when the build has it; the interpreter gives the same matches. */
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  *rv = 0;
  return re;
}

static int append_rule(tg_string_filter_t *sf, int policy, pcre2_code *re,
                       const char *prefix) {
  uint32_t groups = 0;
  pcre2_pattern_info(re, PCRE2_INFO_CAPTURECOUNT, &groups);
  rule_t *r = realloc(sf->rules, (sf->n_rules + 1) * sizeof(*r));
  if (!r) return -ENOMEM;
  sf->rules = r;
  char *p = strdup(prefix ? prefix : "");
  if (!p || ensure_match_data(sf, groups) < 0) {
    free(p);
    return -ENOMEM;
  }
  r[sf->n_rules++] = (rule_t){policy, re, p, strlen(p)};
  return 0;
}

int tg_string_filter_add_rule(tg_string_filter_t *sf, int policy,
                              const char *pattern, const char *atrace_prefix,
                              char *why, size_t why_len) {
  if (policy < TG_SFP_MATCH_REDACT_GROUPS ||
      policy > TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS) {
    tg__trace_filter_say(why, why_len, "policy: %d is not a string filter policy", policy);
    return -EINVAL;
  }
  int rv;
  pcre2_code *re = compile(pattern ? pattern : "", why, why_len, &rv);
  if (!re) return rv;
  rv = append_rule(sf, policy, re, atrace_prefix);
  if (rv < 0) {
    pcre2_code_free(re);
    tg__trace_filter_say(why, why_len, "out of memory");
  }
  return rv;
}

tg_string_filter_t *tg_string_filter_dup(const tg_string_filter_t *src) {
  tg_string_filter_t *sf = tg_string_filter_new();
  if (!sf) return NULL;
  for (size_t i = 0; src && i < src->n_rules; i++) {
    const rule_t *r = &src->rules[i];
    pcre2_code *re = pcre2_code_copy_with_tables(r->re);
    if (!re || append_rule(sf, r->policy, re, r->atrace_prefix) < 0) {
      pcre2_code_free(re);
      tg_string_filter_free(sf);
      return NULL;
    }
  }
  return sf;
}

/* Where an atrace string's payload starts: after the pipe that follows the
 * tgid ("B|1024|payload"). NULL for strings too short to have one and for
 * "E..." strings, which never carry one. */
static const char *atrace_payload(const char *s, const char *end) {
  if (s + 2 >= end || *s == 'E') return NULL;
  const char *pipe = memchr(s + 2, '|', (size_t)(end - (s + 2)));
  return pipe ? pipe + 1 : NULL;
}

static bool starts_with(const char *p, const char *end, const rule_t *r) {
  return r->atrace_prefix_len <= (size_t)(end - p) &&
         memcmp(p, r->atrace_prefix, r->atrace_prefix_len) == 0;
}

/* Overwrites each matched group of the last match. */
static void redact_groups(pcre2_match_data *md, int rc, char *s) {
  static const char kRedacted[] = TG_STRING_FILTER_REDACTED;
  const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  for (int g = 1; g < rc; g++) {
    if (ov[2 * g] == PCRE2_UNSET || ov[2 * g + 1] < ov[2 * g]) continue;
    size_t n = ov[2 * g + 1] - ov[2 * g];
    size_t k = n < sizeof(kRedacted) - 1 ? n : sizeof(kRedacted) - 1;
    memcpy(s + ov[2 * g], kRedacted, k);
    memset(s + ov[2 * g] + k, '-', n - k);
  }
}

static int match_at(const rule_t *r, pcre2_match_data *md, const char *s,
                    size_t len, size_t off, uint32_t opts) {
  return pcre2_match(r->re, (PCRE2_SPTR)s, len, off, opts, md, NULL);
}

/* Redacts the groups of every match of |r| in |s|; true if there was one. */
static bool search_redact(const rule_t *r, pcre2_match_data *md, char *s,
                          size_t len) {
  const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  bool any = false;
  size_t off = 0;
  int rc = match_at(r, md, s, len, off, 0);
  while (rc > 0) {
    any = true;
    redact_groups(md, rc, s);
    size_t start = ov[0];
    off = ov[1];
    if (start != off) {
      rc = off <= len ? match_at(r, md, s, len, off, 0) : -1;
      continue;
    }
    /* An empty match: first a non-empty one at the same place, else the
     * search goes on one byte further. */
    if (off >= len) break;
    rc = match_at(r, md, s, len, off, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED);
    if (rc > 0) continue;
    rc = match_at(r, md, s, len, off + 1, 0);
  }
  return any;
}

bool tg_string_filter_apply(tg_string_filter_t *sf, char *s, size_t len) {
  if (!sf || sf->n_rules == 0) return false;
  const char *end = s + len;
  const char *payload = NULL;
  bool payload_found = false;
  for (size_t i = 0; i < sf->n_rules; i++) {
    const rule_t *r = &sf->rules[i];
    if (r->policy != TG_SFP_MATCH_REDACT_GROUPS &&
        r->policy != TG_SFP_MATCH_BREAK) {
      if (!payload_found) payload = atrace_payload(s, end);
      payload_found = true;
      if (!payload || !starts_with(payload, end, r)) continue;
    }
    if (r->policy == TG_SFP_ATRACE_REPEATED_SEARCH_REDACT_GROUPS) {
      if (search_redact(r, sf->md, s, len)) return true;
      continue;
    }
    int rc = match_at(r, sf->md, s, len, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED);
    if (rc <= 0) continue;
    if (r->policy == TG_SFP_MATCH_BREAK || r->policy == TG_SFP_ATRACE_MATCH_BREAK)
      return false;
    redact_groups(sf->md, rc, s);
    return true;
  }
  return false;
}
