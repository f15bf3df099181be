/* Remote targets: "-H" specs (hosts files: hosts_file.c), and the names
 * files are given. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/target.h"
#include "common/fnv1a.h"
#include "ipc/net_addr.h"

#define SSH_SCHEME "ssh://"

static bool user_ok(const char *u) {
  if (!u[0] || u[0] == '-') return false;
  for (const char *p = u; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (!isalnum(ch) && !strchr("._-", ch)) return false;
  }
  return true;
}

_Static_assert(sizeof(((tg_target_t *)0)->host) > TG_NET_HOST_MAX,
               "tg_target_t.host holds any parsed host");
_Static_assert(sizeof(((tg_target_t *)0)->hostport) >= TG_NET_ADDR_STRLEN,
               "tg_target_t.hostport holds any formatted address");

/* "host", "host:port", "[v6]", "[v6]:port", or a bare IPv6 address
 * (ipc/net_addr.h). Host names reach getaddrinfo or ssh's command line:
 * the parser refuses spaces, control bytes and a leading '-'. The port is
 * |default_port| when none is given. */
static int split_host(const char *s, uint16_t default_port, tg_target_t *t,
                      tg_net_addr_t *a) {
  if (tg_net_addr_parse(s, TG_NET_ADDR_PORT_OPTIONAL, default_port, a) < 0)
    return -EINVAL;
  snprintf(t->host, sizeof(t->host), "%s", a->host);
  t->port = a->port;
  return 0;
}

int tg_target_parse(const char *spec, tg_target_t *t, char *err, size_t n) {
  memset(t, 0, sizeof(*t));
  if (!spec || strlen(spec) >= sizeof(t->spec)) {
    snprintf(err, n, "'%s' is too long for a host", spec ? spec : "");
    return -EINVAL;
  }
  snprintf(t->spec, sizeof(t->spec), "%s", spec);
  tg_net_addr_t a;
  if (!strncmp(spec, SSH_SCHEME, strlen(SSH_SCHEME))) {
    t->kind = TG_TARGET_SSH;
    const char *rest = spec + strlen(SSH_SCHEME);
    const char *at = strchr(rest, '@');
    if (at) {
      size_t ul = (size_t)(at - rest);
      if (ul >= sizeof(t->user)) ul = sizeof(t->user); /* fails below */
      snprintf(t->user, sizeof(t->user), "%.*s", (int)ul, rest);
      if (ul >= sizeof(t->user) || !user_ok(t->user)) {
        snprintf(err, n, "'%s': not a user name in ssh://[user@]host[:port]",
                 spec);
        return -EINVAL;
      }
      rest = at + 1;
    }
    /* No port: 0, ssh's own default. */
    if (split_host(rest, 0, t, &a) < 0) {
      snprintf(err, n, "'%s' is not ssh://[user@]host[:port]", spec);
      return -EINVAL;
    }
    return 0;
  }
  t->kind = TG_TARGET_TLS;
  if (strstr(spec, "://") || split_host(spec, TG_RELAY_PORT, t, &a) < 0) {
    snprintf(err, n, "'%s' is not host:port, [ipv6]:port or "
             "ssh://[user@]host[:port]", spec);
    return -EINVAL;
  }
  /* Fits: see the _Static_assert above. */
  return tg_net_addr_format(&a, t->hostport, sizeof(t->hostport));
}

static void safe_copy(char *dst, size_t cap, const char *src) {
  size_t i = 0;
  for (; src[i] && i + 1 < cap; i++) {
    unsigned char ch = (unsigned char)src[i];
    dst[i] = isalnum(ch) || ch == '.' || ch == '-' || ch == '_' ? (char)ch : '_';
  }
  dst[i] = 0;
}

/* Orders targets by host, then kind, port and user: the same target lands
 * next to itself, and targets sharing a host form one run. */
static int by_target(const void *a, const void *b, void *ctx) {
  const tg_target_t *list = ctx;
  const tg_target_t *x = &list[*(const size_t *)a];
  const tg_target_t *y = &list[*(const size_t *)b];
  int c = strcmp(x->host, y->host);
  if (c) return c;
  if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
  if (x->port != y->port) return x->port < y->port ? -1 : 1;
  c = strcmp(x->user, y->user);
  if (c) return c;
  /* Equal targets in list order: the first one given is named. */
  return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static uint64_t name_hash(const char *s) {
  return tg_fnv1a(TG_FNV1A_SEED, s, strlen(s));
}

/* Open addressing over |cap| (a power of two) slots of indices + 1. */
static bool name_taken(const tg_target_t *list, const size_t *slots,
                       size_t cap, const char *name) {
  for (size_t i = name_hash(name) & (cap - 1); slots[i];
       i = (i + 1) & (cap - 1))
    if (!strcmp(list[slots[i] - 1].name, name)) return true;
  return false;
}

static void name_take(const tg_target_t *list, size_t *slots, size_t cap,
                      size_t idx) {
  size_t i = name_hash(list[idx].name) & (cap - 1);
  while (slots[i]) i = (i + 1) & (cap - 1);
  slots[i] = idx + 1;
}

static int by_label(const void *a, const void *b, void *ctx) {
  const tg_target_t *list = ctx;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  int c = strcmp(list[i].label, list[j].label);
  return c ? c : i < j ? -1 : 1;
}

/* The label of each of the |n| targets (tg_targets_name), unique among
 * them; |order| is room for n indices. */
static int label_all(tg_target_t *list, size_t n, size_t *order, char *err,
                     size_t errn) {
  for (size_t i = 0; i < n; i++) {
    tg_target_t *t = &list[i];
    const char *l = t->given_label[0] ? t->given_label
                    : t->server_name[0] && t->server_name[0] != '*'
                        ? t->server_name
                        : t->spec;
    snprintf(t->label, sizeof(t->label), "%s", l);
  }
  /* Twice: a name= or spec that meets a label becomes the spec; specs
   * differ (a target given twice is refused above), so only a label that
   * is another target's spec still meets one the second time. */
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof(*order), by_label, list);
    for (size_t run = 0; run < n;) {
      size_t end = run + 1;
      while (end < n &&
             !strcmp(list[order[end]].label, list[order[run]].label))
        end++;
      size_t given = 0;
      for (size_t k = run; end - run > 1 && k < end; k++) {
        tg_target_t *t = &list[order[k]];
        if (t->given_label[0]) {
          if (++given > 1 || round == 1) {
            snprintf(err, errn, "label=%s is %s", t->label,
                     given > 1 ? "given to two hosts" : "another host's address");
            return -EINVAL;
          }
        } else {
          snprintf(t->label, sizeof(t->label), "%s", t->spec);
        }
      }
      run = end;
    }
  }
  return 0;
}

/* Sorting and hashing, not every pair: a fleet has thousands of hosts. */
int tg_targets_name(tg_target_t *list, size_t n, char *err, size_t errn) {
  if (n == 0) return 0;
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  size_t *order = malloc(n * sizeof(*order));
  bool *shared = calloc(n, sizeof(*shared));
  size_t *slots = calloc(cap, sizeof(*slots));
  if (!order || !shared || !slots) {
    snprintf(err, errn, "out of memory naming %zu hosts", n);
    free(order);
    free(shared);
    free(slots);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++) order[i] = i;
  qsort_r(order, n, sizeof(*order), by_target, list);
  size_t dup = n; /* the first target, in list order, given twice */
  for (size_t run = 0; run < n;) {
    size_t end = run + 1;
    while (end < n && !strcmp(list[order[end]].host, list[order[run]].host))
      end++;
    for (size_t k = run; k < end; k++) {
      shared[order[k]] = end - run > 1;
      if (k + 1 < end) {
        const tg_target_t *a = &list[order[k]], *b = &list[order[k + 1]];
        if (a->kind == b->kind && a->port == b->port &&
            !strcmp(a->user, b->user) && order[k] < dup)
          dup = order[k];
      }
    }
    run = end;
  }
  if (dup < n) {
    snprintf(err, errn, "host %s is given twice", list[dup].spec);
    free(order);
    free(shared);
    free(slots);
    return -EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    char raw[400];
    if (!shared[i])
      snprintf(raw, sizeof(raw), "%s", list[i].host);
    else if (list[i].kind == TG_TARGET_SSH)
      snprintf(raw, sizeof(raw), "%s%s%s_ssh%u", list[i].user,
               list[i].user[0] ? "@" : "", list[i].host, list[i].port);
    else
      snprintf(raw, sizeof(raw), "%s_%u", list[i].host, list[i].port);
    safe_copy(list[i].name, sizeof(list[i].name), raw);
    /* Sanitising may still make two names equal ("a:b" vs "a_b"): number
     * the later ones. */
    for (unsigned round = 0;
         round < 8 && name_taken(list, slots, cap, list[i].name); round++) {
      char tmp[128];
      snprintf(tmp, sizeof(tmp), "%.100s_%zu", list[i].name, i + 1);
      snprintf(list[i].name, sizeof(list[i].name), "%s", tmp);
    }
    name_take(list, slots, cap, i);
  }
  int rv = label_all(list, n, order, err, errn);
  free(order);
  free(shared);
  free(slots);
  return rv;
}
