/* Fuzzes tracegate-collector's configuration file parser
 * (collector/config/config.c, tg_coll_config_parse) with label "fuzz.conf" and
 * base directory "/base": a wrong or hand-broken file must be refused
 * with a reason, never crash the daemon or reach a terminal raw.
 *
 * The text is parsed from an exact-size copy (no NUL after it), so reads
 * past the end show up under ASan; ASan's leak check sees what a failed
 * parse or tg_coll_config_free() would leave.
 *
 * Invariants (trap on violation):
 * - the result is 0, -EINVAL, -ENOMEM or -EFBIG; a failure leaves a
 *   message that starts "fuzz.conf" and owns no groups;
 * - every message and warning is printable ASCII (echoed text is
 *   sanitised), and an error about the catalog never echoes it;
 * - on success every string is NUL-terminated within its array, paths are
 *   absolute (resolved against /base), the required ones set; each number
 *   is within its documented range; tls and https mean their three keys;
 *   a listener beyond loopback, or authz, comes with https;
 * - groups and triggers are within their limits, named uniquely, "all" is
 *   never defined, hosts are 1..320 non-blank bytes, and every trigger's
 *   group is "all" or a defined one that holds its hosts;
 * - the alertmanager_* keys are within their ranges, and its host mappings
 *   within their limits, each value once, hosts as groups' are;
 * - the web page's Content-Security-Policy for the ui_url taken
 *   (collector/daemon/page.c) has its eight directives, no more, and a
 *   connect-src of 'self' and at most the UI's origin: an http(s) scheme
 *   and host characters alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collector/config/config.h"
#include "collector/daemon/page_assets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LABEL "fuzz.conf"

static void check(int ok) {
  if (!ok) __builtin_trap();
}

static int terminated(const char *s, size_t cap) {
  return memchr(s, 0, cap) != NULL;
}

static int printable(const char *s) {
  for (; *s; s++)
    if (*s < ' ' || *s > '~') return 0;
  return 1;
}

static void on_warn(void *ctx, const char *text) {
  (void)ctx;
  check(!strncmp(text, LABEL ":", strlen(LABEL ":")) && printable(text));
}

/* An optional path: "" or absolute (relative ones got "/base/"). */
#define CHECK_PATH(c, f) \
  check(terminated((c)->f, sizeof((c)->f)) && (!(c)->f[0] || (c)->f[0] == '/'))
#define CHECK_STR(c, f) check(terminated((c)->f, sizeof((c)->f)) && (c)->f[0])

static void check_config(const tg_coll_config_t *c) {
  CHECK_PATH(c, hosts);
  CHECK_PATH(c, trace_config);
  CHECK_PATH(c, store);
  check(c->hosts[0] && c->trace_config[0] && c->store[0]);
  CHECK_PATH(c, ca);
  CHECK_PATH(c, cert);
  CHECK_PATH(c, key);
  check(c->tls == (c->ca[0] && c->cert[0] && c->key[0]));
  check(c->tls || (!c->ca[0] && !c->cert[0] && !c->key[0]));
  CHECK_PATH(c, http_cert);
  CHECK_PATH(c, http_key);
  CHECK_PATH(c, http_ca);
  CHECK_PATH(c, authz);
  check(c->https == (c->http_cert[0] && c->http_key[0] && c->http_ca[0]));
  check(c->https || (!c->http_cert[0] && !c->http_key[0] && !c->http_ca[0]));
  check(c->https || (c->listen_loopback && !c->authz[0]));
  check(c->http_max_conns_per_source <= 65535);
  check(c->http_max_conns <= 65535);
  check(c->http_timeout_ms == 0 ||
        (c->http_timeout_ms >= 1000 && c->http_timeout_ms <= 86400000));
  check(terminated(c->tls_server_name, sizeof(c->tls_server_name)));
  CHECK_STR(c, catalog);
  check(!strcmp(c->catalog, "sqlite") ||
        !strncmp(c->catalog, "postgresql://", 13) ||
        !strncmp(c->catalog, "postgres://", 11));
  check(c->shard_count >= 1 && c->shard_count <= 65536 &&
        c->shard_index < c->shard_count);
  check(c->retention_max_age_ms >= 0);
  CHECK_STR(c, listen_host);
  CHECK_STR(c, session_key);
  check(c->session_key[0] != '.');
  check(c->dead_link_ms >= 1000);
  check(c->snapshot_every_ms == 0 || c->snapshot_every_ms >= 1000);
  check(c->coalesce_window_ms >= 0 && c->reconnect_ms >= 0);
  check(c->max_snapshots_per_minute >= 1 && c->max_snapshots_per_minute <= 600);
  check(c->host_snapshots_per_minute >= 1 && c->host_snapshots_per_minute <= 600);
  check(c->operator_snapshots_per_minute >= 1 &&
        c->operator_snapshots_per_minute <= 600);
  check(c->schedule_snapshots_per_minute >= 1 &&
        c->schedule_snapshots_per_minute <= 600);
  check(c->clone_timeout_ms >= 100 && c->clone_timeout_ms <= 120000);
  check(c->clone_min_rate <= (1ull << 30));
  check(c->compress_level <= 19);
  CHECK_STR(c, ui_url);
  check(!strncmp(c->ui_url, "https://", 8) ||
        !strncmp(c->ui_url, "http://", 7));

  check(c->n_groups <= TG_COLL_CONFIG_GROUPS_MAX);
  check(c->n_groups == 0 || c->groups);
  size_t hosts = 0;
  for (size_t i = 0; i < c->n_groups; i++) {
    const tg_coll_group_t *g = &c->groups[i];
    CHECK_STR(g, name);
    check(strcmp(g->name, TG_COLL_CONFIG_GROUP_ALL) != 0);
    check(tg_coll_config_group(c, g->name) == g); /* the first: unique */
    check(g->n_hosts >= 1);
    hosts += g->n_hosts;
    for (size_t h = 0; h < g->n_hosts; h++) {
      size_t n = strlen(g->hosts[h]);
      check(n >= 1 && n <= TG_COLL_CONFIG_HOST_MAX);
      check(!strpbrk(g->hosts[h], " \t\r\n"));
    }
  }
  check(hosts <= TG_COLL_CONFIG_GROUP_HOSTS_MAX);
  CHECK_STR(c, am_host_label);
  CHECK_STR(c, am_group_label);
  check(c->am_host_label[0] != '.' && c->am_group_label[0] != '.');
  check(c->am_repeat_window_ms >= 0 &&
        c->am_repeat_window_ms <= 30LL * 86400 * 1000);
  check(c->am_snapshots_per_minute >= 1 && c->am_snapshots_per_minute <= 600);
  check(c->am_max_bytes >= 1024 && c->am_max_bytes <= (16u << 20));
  check(c->n_am_hosts <= TG_COLL_CONFIG_AM_HOSTS_MAX);
  check(c->n_am_hosts == 0 || c->am_hosts);
  hosts = 0;
  for (size_t i = 0; i < c->n_am_hosts; i++) {
    const tg_coll_am_host_t *m = &c->am_hosts[i];
    CHECK_STR(m, value);
    check(!strpbrk(m->value, " \t\r\n"));
    check(tg_coll_config_am_host(c, m->value) == m); /* the first: unique */
    check(m->n_hosts >= 1);
    hosts += m->n_hosts;
    for (size_t h = 0; h < m->n_hosts; h++) {
      size_t n = strlen(m->hosts[h]);
      check(n >= 1 && n <= TG_COLL_CONFIG_HOST_MAX);
      check(!strpbrk(m->hosts[h], " \t\r\n"));
    }
  }
  check(hosts <= TG_COLL_CONFIG_GROUP_HOSTS_MAX);
  check(c->n_triggers <= TG_COLL_CONFIG_TRIGGERS_MAX);
  for (size_t i = 0; i < c->n_triggers; i++) {
    const tg_coll_trigger_t *t = &c->triggers[i];
    CHECK_STR(t, name);
    CHECK_STR(t, group);
    for (size_t j = 0; j < i; j++) check(strcmp(c->triggers[j].name, t->name));
    if (strcmp(t->group, TG_COLL_CONFIG_GROUP_ALL) != 0) {
      const tg_coll_group_t *g = tg_coll_config_group(c, t->group);
      check(g != NULL);
      check(tg_coll_config_group_has(c, t->group, g->hosts[g->n_hosts - 1]));
    }
  }
}

/* The page's policy for |ui_url|: nothing in the URL adds a directive
 * or a source. */
static void check_page_csp(const char *ui_url) {
  char csp[COLL_PAGE_CSP_MAX];
  coll_page_csp(csp, sizeof(csp), ui_url);
  check(printable(csp) && !strchr(csp, ','));
  size_t semis = 0;
  for (const char *p = csp; *p; p++) semis += *p == ';';
  check(semis == 7);
  const char *cs = strstr(csp, "; connect-src 'self'");
  check(cs != NULL);
  cs += strlen("; connect-src 'self'");
  size_t n = strcspn(cs, ";");
  if (n) {
    check(cs[0] == ' ' && (!strncmp(cs + 1, "http://", 7) || !strncmp(cs + 1, "https://", 8)));
    const char *o = strstr(cs, "//") + 2;
    for (; o < cs + n; o++)
      check((*o >= 'a' && *o <= 'z') || (*o >= 'A' && *o <= 'Z') ||
            (*o >= '0' && *o <= '9') || strchr(".-:[]", *o));
  }
  char origin[TG_COLL_CONFIG_URL_MAX + 1];
  check((coll_page_origin(origin, sizeof(origin), ui_url) == 0) == (n != 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  memcpy(text, data, size);
  tg_coll_config_t *c = malloc(sizeof(*c));
  if (!c) {
    free(text);
    return 0;
  }
  char err[512];
  memset(err, 'x', sizeof(err));
  int rv = tg_coll_config_parse(text, size, LABEL, "/base", c, on_warn, NULL,
                                err, sizeof(err));
  check(rv == 0 || rv == -EINVAL || rv == -ENOMEM || rv == -EFBIG);
  if (rv == 0) {
    check(err[0] == 0);
    check_config(c);
    check_page_csp(c->ui_url);
  } else {
    check(terminated(err, sizeof(err)));
    check(!strncmp(err, LABEL, strlen(LABEL)) && printable(err));
    check(c->groups == NULL && c->n_groups == 0);
    check(c->am_hosts == NULL && c->n_am_hosts == 0);
    /* The catalog is never echoed: its two errors quote nothing. */
    const char *p = err + strlen(LABEL);
    if (*p == ':')
      while (*++p >= '0' && *p <= '9') {
      }
    if (!strncmp(p, ": catalog: ", 11)) check(!strchr(p, '\''));
  }
  tg_coll_config_free(c);
  free(c);
  free(text);
  return 0;
}
