/* client/tls_defaults.h: where a client's TLS files (certificate, key,
 * CA) and its session cache setting come from when no flag gave them:
 * the environment (TRACEGATE_CERT, TRACEGATE_KEY, TRACEGATE_CA,
 * TRACEGATE_SESSION_CACHE), then the per-user config file
 * ($XDG_CONFIG_HOME or ~/.config, tracegate/config; its format:
 * tls_defaults.c and docs/commands.md). */
#ifndef TRACEGATE_CLIENT_TLS_DEFAULTS_H
#define TRACEGATE_CLIENT_TLS_DEFAULTS_H

#include <stddef.h>

#define TG_CLIENT_PATH_MAX 1024

/* The settings, each NULL until given. The pointers are borrowed: from
 * argv, the environment, or |file_vals| of the same struct (the config
 * file's values), so a copy of the struct must not outlive the original
 * when it points into it. */
typedef struct tg_client_tls_files {
  const char *cert, *key, *ca;
  /* "off", "on" or a file (session_cache.h, tg_session_cache_resolve). */
  const char *session_cache;
  char file_vals[4][TG_CLIENT_PATH_MAX];
} tg_client_tls_files_t;

/* The size of a message about the config file, its path included. */
#define TG_CLIENT_TLS_ERR_MAX (TG_CLIENT_PATH_MAX + 320)

/* Fills |f|'s cert, key, ca and session_cache that are still NULL from
 * $TRACEGATE_CERT, $TRACEGATE_KEY, $TRACEGATE_CA,
 * $TRACEGATE_SESSION_CACHE, then the per-user config file ("cert = PATH",
 * "key = PATH", "ca = PATH", "session_cache = on|off|PATH" lines). The
 * certificate and key come as a pair from one source. Returns 0 (a
 * missing file is no error), or when the file cannot be read or is wrong
 * the error of tg_read_regular_file() or tg_client_tls_config_parse(),
 * with why in |err| (TG_CLIENT_TLS_ERR_MAX holds it whole), its notice
 * code first. */
int tg_client_tls_defaults(tg_client_tls_files_t *f, char *err, size_t errn);

/* The config file's bytes at most. */
#define TG_CLIENT_TLS_CONFIG_FILE_MAX (64u << 10)

/* The config file's |len| bytes (no NUL needed; |label| names it in
 * errors) into |f|'s file_vals, and into its cert, key, ca and
 * session_cache that are still NULL. Returns 0, or -EINVAL / -EFBIG with
 * "LABEL:LINE: why" in |err|: an unknown name, an empty value, a name
 * given twice, a value that does not fit, or what common/config_text.h
 * refuses. */
int tg_client_tls_config_parse(const char *text_untrusted, size_t len,
                                const char *label, tg_client_tls_files_t *f,
                                char *err, size_t errn);

#endif /* TRACEGATE_CLIENT_TLS_DEFAULTS_H */
