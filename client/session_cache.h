/* client/session_cache.h: a client's saved TLS sessions, so that a
 * reconnection (and, with the on-disk cache, the next run) resumes from a
 * session ticket instead of paying a full handshake's public-key work.
 *
 * Entries are keyed by (host:port, TLS server name, SHA-256 of the client
 * certificate, SHA-256 of the CA chain): another identity or another trust
 * never picks up a session it did not make. A cache is created for one
 * pair of fingerprints (the run's TLS config); entries of other pairs read
 * from the file are kept and written back, never offered.
 *
 * The file (opt-in: --session-cache, docs/security.md says why) holds
 * master secrets: it is as sensitive as the private key. It is written
 * 0600 in a 0700 directory, atomically (temporary file, fsync, rename),
 * never with expired entries, and removed when nothing is left in it. It
 * is read defensively: a file that is not ours (owner, mode), too large,
 * truncated or malformed means "no saved sessions" with one warning.
 *
 * Format, little-endian, all or nothing:
 *   "TGSESS\0" u8 version(1) | u32 count |
 *   count x { u16 n, host:port[n] | u16 n, server name[n] |
 *             own_fp[32] | ca_fp[32] | u64 expires (Unix s) |
 *             u32 n, session[n] (tg_tls_session_save's bytes) }
 */
#ifndef TRACEGATE_CLIENT_SESSION_CACHE_H
#define TRACEGATE_CLIENT_SESSION_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define TG_SC_FP_SIZE 32
#define TG_SC_MAX_ENTRIES 4096
#define TG_SC_MAX_NAME 300
#define TG_SC_MAX_SESSION 16384
#define TG_SC_MAX_FILE (8u * 1024 * 1024)
/* No entry lives longer than this past now, whatever the file says. */
#define TG_SC_MAX_LIFETIME_S (24u * 3600)
#define TG_SC_ENV "TRACEGATE_SESSION_CACHE"

typedef struct tg_session_cache tg_session_cache_t;

/* An empty cache for sessions made with the client certificate |own_fp|
 * and the CA |ca_fp| (both copied). Returns 0 or -ENOMEM. */
int tg_session_cache_new(const uint8_t own_fp[TG_SC_FP_SIZE],
                         const uint8_t ca_fp[TG_SC_FP_SIZE],
                         tg_session_cache_t **out);
/* Wipes every saved session and frees |sc| (NULL: nothing). */
void tg_session_cache_free(tg_session_cache_t *sc);

/* Replaces the entries with those of |len| file bytes (read only during
 * the call), dropping the ones expired at |now| (Unix s) or implausibly
 * far ahead. Returns 0, -EINVAL (malformed: the cache is left empty) or
 * -ENOMEM. */
int tg_session_cache_parse(tg_session_cache_t *sc,
                           const uint8_t *data_untrusted, size_t len,
                           uint64_t now);

/* Appends the file bytes of the entries alive at |now| to |out|. */
int tg_session_cache_serialize(const tg_session_cache_t *sc, uint64_t now,
                               tg_buf_t *out);

/* The session saved for (|hostport|, |server_name|) with this cache's
 * fingerprints, alive at |now|: NULL or |*len| bytes owned by the cache,
 * valid until its next put/forget/parse/free. */
const uint8_t *tg_session_cache_get(const tg_session_cache_t *sc,
                                    const char *hostport,
                                    const char *server_name, uint64_t now,
                                    size_t *len);

/* Saves |data| (|len| bytes, copied) for the key, replacing an older
 * one. Returns 0, -EINVAL (empty or oversized names or session), -ENOSPC
 * (TG_SC_MAX_ENTRIES entries already), -ENOMEM. */
int tg_session_cache_put(tg_session_cache_t *sc, const char *hostport,
                         const char *server_name, const uint8_t *data,
                         size_t len, uint64_t expires);

/* Drops the key's session (a server refused it). */
void tg_session_cache_forget(tg_session_cache_t *sc, const char *hostport,
                             const char *server_name);

size_t tg_session_cache_count(const tg_session_cache_t *sc);

/* What a --session-cache / $TRACEGATE_SESSION_CACHE / "session_cache ="
 * value means: "off" (or NULL: the default) -> 0; "on" -> 1 with the
 * default file ($XDG_CACHE_HOME/tracegate/sessions, else
 * ~/.cache/tracegate/sessions) in |path|; a value with a '/' -> 1 with
 * that file. Anything else, or no home for "on": -EINVAL. */
int tg_session_cache_resolve(const char *setting, char *path, size_t n);

/* The size of a warning about a cache file, a path of up to 1 KiB
 * included (longer ones are cut). */
#define TG_SC_WARN_MAX 1536

/* Reads |path| into |sc| at |now|. A missing file is no error; any other
 * problem (not a regular file of ours with mode 0600 or stricter, too
 * large, unreadable, malformed) leaves the cache empty and says why in
 * |warn|, for the caller to warn with; else |warn| is "". Returns 0, or
 * -ENOMEM. */
int tg_session_cache_load(tg_session_cache_t *sc, const char *path,
                          uint64_t now, char *warn, size_t warnn);

/* Writes the entries alive at |now| to |path| atomically (its directory
 * made 0700 when missing, the file 0600), or removes the file when none is
 * left. Returns 0, or a -errno with why in |err|. */
int tg_session_cache_store(const tg_session_cache_t *sc, const char *path,
                           uint64_t now, char *err, size_t errn);

#endif /* TRACEGATE_CLIENT_SESSION_CACHE_H */
