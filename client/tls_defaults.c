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
 * One "name = value" a line, '#' comments, blank lines skipped; an
 * unknown name or a malformed line is an error naming the line (a typo
 * must not silently pick no file). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/prog.h"
#include "common/notice.h"
#include "client/tls_defaults.h"

#define ENV_CERT "TRACEGATE_CERT"
#define ENV_KEY "TRACEGATE_KEY"
#define ENV_CA "TRACEGATE_CA"
#define ENV_SESSION_CACHE "TRACEGATE_SESSION_CACHE"

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static char *trim(char *s) {
  while (blank(*s)) s++;
  char *e = s + strlen(s);
  while (e > s && blank(e[-1])) *--e = 0;
  return s;
}

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

/* Reads the file's settings into |tf|'s slots that are still empty. */
static int read_config(tg_client_tls_files_t *tf, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0; /* no file: no defaults */
    fprintf(stderr, TG_CLIENT_PROG ": %s cannot read %s: %s\n",
            TG_NOTE(FLEET_OPTIONS_INVALID), path,
            strerror(errno));
    return -1;
  }
  char line[TG_CLIENT_PATH_MAX + 64];
  unsigned lineno = 0;
  int rv = 0;
  while (rv == 0 && fgets(line, sizeof(line), f)) {
    lineno++;
    if (!strchr(line, '\n') && !feof(f)) {
      fprintf(stderr, TG_CLIENT_PROG ": %s %s:%u: line too long\n",
              TG_NOTE(FLEET_OPTIONS_INVALID), path,
              lineno);
      rv = -1;
      break;
    }
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = trim(line);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      fprintf(stderr, TG_CLIENT_PROG ": %s %s:%u: not 'name = value'\n",
              TG_NOTE(FLEET_OPTIONS_INVALID), path, lineno);
      rv = -1;
      break;
    }
    *eq = 0;
    char *name = trim(s), *val = trim(eq + 1);
    int slot = !strcmp(name, "cert") ? 0 : !strcmp(name, "key") ? 1
             : !strcmp(name, "ca")   ? 2
             : !strcmp(name, "session_cache") ? 3 : -1;
    if (slot < 0 || !*val) {
      fprintf(stderr, TG_CLIENT_PROG ": %s %s:%u: %s\n",
              TG_NOTE(FLEET_OPTIONS_INVALID), path, lineno,
              slot < 0 ? "unknown setting (cert, key, ca, session_cache)"
                       : "empty value");
      rv = -1;
      break;
    }
    const char **dst = slot == 0 ? &tf->cert : slot == 1 ? &tf->key
                     : slot == 2 ? &tf->ca : &tf->session_cache;
    snprintf(tf->file_vals[slot], sizeof(tf->file_vals[slot]), "%s", val);
    if (!*dst) *dst = tf->file_vals[slot];
  }
  fclose(f);
  return rv;
}

int tg_client_tls_defaults(tg_client_tls_files_t *tf) {
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
  if (read_config(&file, path) < 0) return -1;
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
