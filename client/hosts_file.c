/* Hosts files (record --hosts FILE): one target per line, in the line
 * grammar of common/config_text.h ('#' at the start or after a blank
 * starts a comment, blank lines are skipped). After a TLS target, "name=NAME" gives
 * the name that host's relay certificate must carry, so a fleet reached
 * by IP address, each host with its own certificate, records in one
 * command; "label=LABEL" after any target is the name the host is shown
 * by (tg_targets_name), distinct from the certificate's:
 *
 *     10.0.0.5:7467  name=host5.example   # the relay on host5
 *     10.0.0.6:7467  name=host6.example label=db-primary
 *     ssh://admin@db1  label=db1
 *
 * The text is the user's, but it may be anything (a wrong file): every
 * line is bounded, a NUL byte is refused, and the parser works on a
 * length, never past it (tests/fuzz/fuzz_hosts_file.c). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/target.h"
#include "common/config_text.h"
#include "common/read_file.h"

#define MAX_HOSTS_LINE 1024
#define MAX_HOSTS_FILE (4u << 20)
#define NAME_OPT "name="
#define LABEL_OPT "label="

/* A line is what MAX_HOSTS_LINE holds with its NUL; a file of only
 * short host lines stays far below the line count. */
static const tg_conf_limits_t kLimits = {
    .file_max = MAX_HOSTS_FILE,
    .line_max = MAX_HOSTS_LINE - 1,
    .lines_max = 1u << 20,
    .what = "a hosts file",
};

static bool blank(char c) { return tg_conf_blank(c); }

/* A DNS name as certificates carry it: letters, digits, '-' and '.', a
 * leading "*." for a wildcard; at most 253 characters. */
static bool server_name_ok(const char *s) {
  size_t len = strlen(s);
  if (len == 0 || len > 253 || s[0] == '-' || s[0] == '.') return false;
  if (!strncmp(s, "*.", 2)) s += 2;
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (!isalnum(ch) && ch != '-' && ch != '.') return false;
  }
  return true;
}

/* What an operator names a host by: printable ASCII, no blank (which
 * ends the word), 1..TG_TARGET_LABEL_MAX characters. */
static bool label_ok(const char *s) {
  size_t len = strlen(s);
  if (len == 0 || len > TG_TARGET_LABEL_MAX) return false;
  for (; *s; s++)
    if ((unsigned char)*s <= ' ' || (unsigned char)*s > '~') return false;
  return true;
}

/* One line (|line| NUL-terminated, comment removed, not blank): 0 with
 * |t| filled, -EINVAL with why in |err|. Modifies |line|. */
static int parse_line(char *line, tg_target_t *t, char *err, size_t n) {
  char *words[8];
  size_t nw = 0;
  for (char *p = line; *p;) {
    while (blank(*p)) *p++ = 0;
    if (!*p) break;
    if (nw == sizeof(words) / sizeof(words[0])) {
      snprintf(err, n, "too many words (HOST [name=SERVER_NAME] "
               "[label=LABEL])");
      return -EINVAL;
    }
    words[nw++] = p;
    while (*p && !blank(*p)) p++;
  }
  if (nw == 0) { /* the caller skips blank lines: never, but say so */
    snprintf(err, n, "no host on the line");
    return -EINVAL;
  }
  int rv = tg_target_parse(words[0], t, err, n);
  if (rv < 0) return rv;
  for (size_t i = 1; i < nw; i++) {
    if (!strncmp(words[i], LABEL_OPT, strlen(LABEL_OPT))) {
      const char *v = words[i] + strlen(LABEL_OPT);
      if (t->given_label[0]) {
        snprintf(err, n, "label= given twice");
        return -EINVAL;
      }
      if (!label_ok(v)) {
        snprintf(err, n, "'%.100s' is not a label (1 to %d printable ASCII "
                 "characters)", v, TG_TARGET_LABEL_MAX);
        return -EINVAL;
      }
      snprintf(t->given_label, sizeof(t->given_label), "%s", v);
      continue;
    }
    if (strncmp(words[i], NAME_OPT, strlen(NAME_OPT)) != 0) {
      snprintf(err, n, "'%.100s': one host per line, then name=SERVER_NAME "
               "or label=LABEL", words[i]);
      return -EINVAL;
    }
    const char *v = words[i] + strlen(NAME_OPT);
    if (t->kind != TG_TARGET_TLS) {
      snprintf(err, n, "name= is for TLS hosts (host:port), not ssh://");
      return -EINVAL;
    }
    if (t->server_name[0]) {
      snprintf(err, n, "name= given twice");
      return -EINVAL;
    }
    if (!server_name_ok(v)) {
      snprintf(err, n, "'%.100s' is not a server name (a DNS name)", v);
      return -EINVAL;
    }
    snprintf(t->server_name, sizeof(t->server_name), "%s", v);
  }
  return 0;
}

int tg_hosts_parse(const char *text, size_t len, tg_target_t **list,
                   size_t *n, size_t max, unsigned *lineno, char *err,
                   size_t errn) {
  *lineno = 0;
  size_t cap = *n; /* what *list holds on entry is all we know of it */
  tg_conf_t r;
  /* No label: the line goes back apart, the caller names the file. */
  int rv = tg_conf_begin(&r, text, len, NULL, &kLimits, err, errn);
  tg_conf_span_t span;
  while (rv == 0 && (rv = tg_conf_next(&r, &span)) == 1) {
    *lineno = r.line;
    char line[MAX_HOSTS_LINE];
    memcpy(line, span.s, span.n);
    line[span.n] = 0;
    tg_target_t t;
    rv = parse_line(line, &t, err, errn);
    if (rv < 0) return rv;
    if (*n >= max) {
      snprintf(err, errn, "more than %zu hosts", max);
      return -E2BIG;
    }
    if (*n == cap) {
      /* Doubling: a thousand hosts of ~650 bytes each, grown one at a
       * time, copied ~300 MB before the first connection. */
      size_t want = cap < 16 ? 16 : cap * 2;
      if (want > max) want = max;
      tg_target_t *grown = realloc(*list, want * sizeof(**list));
      if (!grown) {
        snprintf(err, errn, "out of memory");
        return -ENOMEM;
      }
      *list = grown;
      cap = want;
    }
    (*list)[(*n)++] = t;
  }
  *lineno = r.line;
  return rv;
}

int tg_targets_load(const char *path, tg_target_t **list, size_t *n,
                    size_t max, char *err, size_t errn) {
  char *text = NULL;
  size_t len = 0;
  int rv = tg_read_regular_file(path, MAX_HOSTS_FILE, &text, &len);
  if (rv < 0) {
    char why[96];
    snprintf(err, errn, "cannot read the hosts file %s: %s", path,
             tg_read_file_why(why, sizeof(why), rv, MAX_HOSTS_FILE));
    return rv;
  }
  char why[400];
  unsigned line = 0;
  rv = tg_hosts_parse(text, len, list, n, max, &line, why, sizeof(why));
  free(text);
  if (rv < 0) snprintf(err, errn, "%s:%u: %s", path, line, why);
  return rv < 0 ? rv : 0;
}
