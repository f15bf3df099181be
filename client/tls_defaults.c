/* Where --cert, --key, --ca and --session-cache come from when they are
 * not given: the environment (TRACEGATE_CERT, TRACEGATE_KEY, TRACEGATE_CA,
 * TRACEGATE_SESSION_CACHE), then the
 * per-user config file ($XDG_CONFIG_HOME/tracegate/config, by default
 * ~/.config/tracegate/config). A flag wins over the environment, which
 * wins over the file. The file's format (docs/commands.md):
 *
 *     # tracegate's TLS files for -H
 *     cert = /home/me/.tracegate/me.pem
 *     key  = /home/me/.tracegate/me.key
 *     ca   = /etc/tracegate/ca.pem
 *     session_cache = on
 *
 * One "name = value" a line in the grammar of common/config_text.h; an
 * unknown name, a name given twice or a malformed line is an error naming
 * the line (a typo must not silently pick no file). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config_text.h"
#include "common/notice.h"
#include "common/read_file.h"
#include "client/tls_defaults.h"

#define ENV_CERT "TRACEGATE_CERT"
#define ENV_KEY "TRACEGATE_KEY"
#define ENV_CA "TRACEGATE_CA"
#define ENV_SESSION_CACHE "TRACEGATE_SESSION_CACHE"

/* Four short settings: a file past these is not this file. */
static const tg_conf_limits_t kLimits = {
    .file_max = TG_CLIENT_TLS_CONFIG_FILE_MAX,
    .line_max = TG_CLIENT_PATH_MAX + 64,
    .lines_max = 4096,
    .what = "a tracegate config file",
};

static const char *const kNames[4] = {"cert", "key", "ca", "session_cache"};

/* The config file's path into |out|; false when there is no home. */
static bool config_path(char *out, size_t n) {
  const char *xdg = getenv("XDG_CONFIG_HOME");
  const char *home = getenv("HOME");
  int w;
  if (xdg && xdg[0] == '/') w = snprintf(out, n, "%s/tracegate/config", xdg);
  else if (home && home[0]) w = snprintf(out, n, "%s/.config/tracegate/config", home);
  else return false;
  return w > 0 && (size_t)w < n;
}

int tg_client_tls_config_parse(const char *text_untrusted, size_t len,
                                const char *label, tg_client_tls_files_t *tf,
                                char *err, size_t errn) {
  tg_conf_t r;
  int rv = tg_conf_begin(&r, text_untrusted, len, label, &kLimits, err, errn);
  unsigned seen[4] = {0};
  tg_conf_span_t line, name, val;
  while (rv == 0 && (rv = tg_conf_next(&r, &line)) == 1) {
    rv = tg_conf_key_value(&r, line, &name, &val);
    if (rv < 0) break;
    int slot = -1;
    for (int i = 0; i < 4 && slot < 0; i++)
      if (tg_conf_is(name, kNames[i])) slot = i;
    if (slot < 0)
      return tg_conf_fail(&r, r.line, -EINVAL,
                          "unknown setting (cert, key, ca, session_cache)");
    if (!val.n) return tg_conf_fail(&r, r.line, -EINVAL, "empty value");
    if (seen[slot])
      return tg_conf_fail(&r, r.line, -EINVAL,
                          "%s: expected once, already set on line %u",
                          kNames[slot], seen[slot]);
    if (val.n >= sizeof(tf->file_vals[slot]))
      return tg_conf_fail(&r, r.line, -EINVAL, "%s: longer than %zu bytes",
                          kNames[slot], sizeof(tf->file_vals[slot]) - 1);
    seen[slot] = r.line;
    memcpy(tf->file_vals[slot], val.s, val.n);
    tf->file_vals[slot][val.n] = 0;
    const char **dst = slot == 0 ? &tf->cert : slot == 1 ? &tf->key
                     : slot == 2 ? &tf->ca : &tf->session_cache;
    if (!*dst) *dst = tf->file_vals[slot];
  }
  return rv;
}

/* Reads the file's settings into |tf|'s slots that are still empty. */
static int read_config(tg_client_tls_files_t *tf, const char *path, char *err,
                       size_t errn) {
  char *text = NULL;
  size_t len = 0;
  int rv = tg_read_regular_file(path, kLimits.file_max, &text, &len);
  if (rv == -ENOENT) return 0; /* no file: no defaults */
  if (rv < 0) {
    char why[96];
    snprintf(err, errn, "%s cannot read %s: %s",
             TG_NOTE(FLEET_OPTIONS_INVALID), path,
             tg_read_file_why(why, sizeof(why), rv, kLimits.file_max));
    return rv;
  }
  char why[TG_CLIENT_PATH_MAX + 256];
  rv = tg_client_tls_config_parse(text, len, path, tf, why, sizeof(why));
  free(text);
  if (rv < 0)
    snprintf(err, errn, "%s %s", TG_NOTE(FLEET_OPTIONS_INVALID), why);
  return rv < 0 ? rv : 0;
}

int tg_client_tls_defaults(tg_client_tls_files_t *tf, char *err,
                           size_t errn) {
  /* --cert and --key go together: a pair is taken from one place only,
   * or a flag's certificate would meet another source's key. */
  bool pair_given = tf->cert || tf->key;
  const char *ec = getenv(ENV_CERT), *ek = getenv(ENV_KEY), *ea = getenv(ENV_CA);
  if (!pair_given && ((ec && *ec) || (ek && *ek))) {
    tf->cert = ec && *ec ? ec : NULL;
    tf->key = ek && *ek ? ek : NULL;
    pair_given = true;
  }
  if (!tf->ca && ea && *ea) tf->ca = ea;
  const char *es = getenv(ENV_SESSION_CACHE);
  if (!tf->session_cache && es && *es) tf->session_cache = es;
  if (pair_given && tf->ca && tf->session_cache) return 0;
  char path[TG_CLIENT_PATH_MAX];
  if (!config_path(path, sizeof(path))) return 0;
  tg_client_tls_files_t file;
  memset(&file, 0, sizeof(file));
  int rv = read_config(&file, path, err, errn);
  if (rv < 0) return rv;
  if (!pair_given && (file.cert || file.key)) {
    if (file.cert) {
      memcpy(tf->file_vals[0], file.file_vals[0], sizeof(tf->file_vals[0]));
      tf->cert = tf->file_vals[0];
    }
    if (file.key) {
      memcpy(tf->file_vals[1], file.file_vals[1], sizeof(tf->file_vals[1]));
      tf->key = tf->file_vals[1];
    }
  }
  if (!tf->ca && file.ca) {
    memcpy(tf->file_vals[2], file.file_vals[2], sizeof(tf->file_vals[2]));
    tf->ca = tf->file_vals[2];
  }
  if (!tf->session_cache && file.session_cache) {
    memcpy(tf->file_vals[3], file.file_vals[3], sizeof(tf->file_vals[3]));
    tf->session_cache = tf->file_vals[3];
  }
  return 0;
}
