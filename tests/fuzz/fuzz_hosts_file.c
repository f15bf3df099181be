/* Fuzzes the CLI's hosts file parser (client/hosts_file.c,
 * tg_hosts_parse): `tracegate record --hosts FILE` reads any file it is
 * given, and each target it accepts reaches getaddrinfo, a TLS handshake
 * (its server name) or ssh's command line.
 *
 * The text is parsed from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan.
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL, -E2BIG, -ENOMEM or -EFBIG; a failure
 *   leaves a NUL-terminated message and names a line within the text
 *   (-EFBIG, the whole text: line 0);
 * - at most MAX_HOSTS targets;
 * - every target is TLS or ssh, its strings are NUL-terminated within
 *   their arrays, its host is not empty and does not start with '-';
 * - a server name is only set on a TLS target, and holds no blank;
 * - a label= is printable ASCII without a blank;
 * - parsing the same text again gives the same targets;
 * - once named (tg_targets_name), every target's label is set and no two
 *   are equal; a refusal to name them leaves a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HOSTS 64

static size_t count_lines(const uint8_t *d, size_t n) {
  size_t lines = 1;
  for (size_t i = 0; i < n; i++) lines += d[i] == '\n';
  return lines;
}

static int terminated(const char *s, size_t cap) { return memchr(s, 0, cap) != NULL; }

static void check_target(const tg_target_t *t) {
  if (t->kind != TG_TARGET_TLS && t->kind != TG_TARGET_SSH) __builtin_trap();
  if (!terminated(t->spec, sizeof(t->spec)) || !terminated(t->host, sizeof(t->host)) ||
      !terminated(t->hostport, sizeof(t->hostport)) ||
      !terminated(t->user, sizeof(t->user)) ||
      !terminated(t->server_name, sizeof(t->server_name)) ||
      !terminated(t->given_label, sizeof(t->given_label)))
    __builtin_trap();
  for (const char *l = t->given_label; *l; l++)
    if ((unsigned char)*l <= ' ' || (unsigned char)*l > '~') __builtin_trap();
  if (!t->host[0] || t->host[0] == '-') __builtin_trap();
  if (t->server_name[0]) {
    if (t->kind != TG_TARGET_TLS) __builtin_trap();
    if (strpbrk(t->server_name, " \t\r\n#")) __builtin_trap();
  }
}

static int parse(const char *text, size_t len, tg_target_t **list, size_t *n) {
  char err[400];
  unsigned line = 0;
  memset(err, 'x', sizeof(err));
  int rv = tg_hosts_parse(text, len, list, n, MAX_HOSTS, &line, err, sizeof(err));
  if (rv != 0 && rv != -EINVAL && rv != -E2BIG && rv != -ENOMEM && rv != -EFBIG)
    __builtin_trap();
  if (rv != 0) {
    if (!terminated(err, sizeof(err))) __builtin_trap();
    if ((line == 0) != (rv == -EFBIG) || line > count_lines((const uint8_t *)text, len))
      __builtin_trap();
  }
  return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  tg_target_t *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  int rv = parse(text, size, &a, &na);
  if (na > MAX_HOSTS) __builtin_trap();
  for (size_t i = 0; i < na; i++) check_target(&a[i]);
  if (rv == 0) {
    if (parse(text, size, &b, &nb) != 0 || nb != na) __builtin_trap();
    for (size_t i = 0; i < na; i++)
      if (a[i].kind != b[i].kind || a[i].port != b[i].port ||
          strcmp(a[i].spec, b[i].spec) || strcmp(a[i].host, b[i].host) ||
          strcmp(a[i].hostport, b[i].hostport) || strcmp(a[i].user, b[i].user) ||
          strcmp(a[i].server_name, b[i].server_name) ||
          strcmp(a[i].given_label, b[i].given_label))
        __builtin_trap();
    /* Named, each target has a label of its own (what the trace and the
     * collector show it by); refused, the caller is told why. */
    char why[400] = "";
    int named = tg_targets_name(a, na, why, sizeof(why));
    if (named < 0 && (!why[0] || !terminated(why, sizeof(why))))
      __builtin_trap();
    if (named == 0)
      for (size_t i = 0; i < na; i++) {
        if (!a[i].label[0] || !terminated(a[i].label, sizeof(a[i].label)))
          __builtin_trap();
        for (size_t j = 0; j < i; j++)
          if (!strcmp(a[i].label, a[j].label)) __builtin_trap();
      }
  }
  free(a);
  free(b);
  free(text);
  return 0;
}
