/* The authorization file and its roles, the relay's and the collector's.
 *
 * The file maps client identities (auth/cert_identity.h: a certificate's
 * one CN, else its first DNS SAN; or the relay's "ssh:USER" in --stdio
 * mode) to roles, one per line:
 *
 *   # identity role
 *   alice record
 *   bob observe
 *
 * Blank lines and '#' comments are ignored; anything else is an error that
 * names the line, and so is an identity outside the one alphabet
 * (common/identity.h: no '/', no ':' but ssh:'s). Default deny: an
 * identity that is not listed has no role and is refused at the handshake.
 *
 * Roles grant ConsumerPort methods by name:
 *   observe: QueryServiceState, QueryCapabilities, GetTraceStats,
 *            ObserveEvents
 *   record:  observe + EnableTracing, StartTracing, ChangeTraceConfig, Flush,
 *            DisableTracing, ReadBuffers, FreeBuffers, Detach, Attach,
 *            CloneSession
 * Every other method (SaveTraceForBugreport, names we do not know) is
 * denied to everyone. The collector's HTTP API reads the same roles:
 * observe reads, record also triggers and pins (docs/collector.md).
 *
 * A table is immutable once parsed; a reload builds a new one and the owner
 * swaps the pointer, so a broken file never replaces a good one. No I/O but
 * tg_authz_load() reading the file (a regular file only:
 * common/read_file.h).
 */
#ifndef TRACEGATE_AUTH_AUTHZ_H
#define TRACEGATE_AUTH_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>

#include "common/identity.h"

typedef enum tg_authz_role {
  TG_ROLE_NONE = 0, /* not listed: refused */
  TG_ROLE_OBSERVE = 1,
  TG_ROLE_RECORD = 2,
} tg_authz_role_t;

typedef struct tg_authz tg_authz_t;

/* Longest identity a line may name: an identity, or "ssh:" and one
 * (common/identity.h). */
#define TG_AUTHZ_IDENTITY_MAX \
  (TG_IDENTITY_MAX + sizeof(TG_IDENTITY_SSH_PREFIX) - 1)

/* Parses |len| bytes of file text; |name| (e.g. the path) prefixes error
 * messages. On success *out owns the table (tg_authz_free). On failure
 * returns TG_EPARSE (or -ENOMEM) and writes "name:LINE: why" into |err|. */
int tg_authz_parse(const char *text, size_t len, const char *name,
                   tg_authz_t **out, char *err, size_t errlen);

/* Reads and parses |path|. Errors as tg_authz_parse(), plus TG_EBAD_CONFIG
 * when the file cannot be read (|err| says why). */
int tg_authz_load(const char *path, tg_authz_t **out, char *err,
                  size_t errlen);

void tg_authz_free(tg_authz_t *a);

/* The role of |identity| (exact, case-sensitive match); TG_ROLE_NONE when
 * |a| or |identity| is NULL or the identity is not listed. */
tg_authz_role_t tg_authz_role(const tg_authz_t *a, const char *identity);

/* Number of identities in the table. */
size_t tg_authz_count(const tg_authz_t *a);

/* True if |role| may call the ConsumerPort method named |method|. */
bool tg_authz_allows(tg_authz_role_t role, const char *method);

/* "observe", "record" or "none". */
const char *tg_authz_role_name(tg_authz_role_t role);

/* Parses "observe"/"record"; returns 0 or -EINVAL. */
int tg_authz_parse_role(const char *s, tg_authz_role_t *out);

#endif /* TRACEGATE_AUTH_AUTHZ_H */
