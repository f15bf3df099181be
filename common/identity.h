/* Identities of remote principals: what a client certificate names (its
 * CN, or its first DNS SAN), what the relay's authorization file lists,
 * what the relay namespaces sessions, resume keys and replay windows by
 * ("<identity>/<key>"), and what the audit trail writes as one word.
 *
 * One alphabet wherever an identity is parsed, so that it means one thing
 * everywhere and ownership is an exact comparison:
 *
 *   [A-Za-z0-9_@] first, then [A-Za-z0-9._@-], 1..TG_IDENTITY_MAX bytes
 *
 * Left out on purpose: '/' separates an identity from the names it owns
 * (a certificate "alice/ops" would otherwise own "alice"'s sessions);
 * ':' is reserved for the relay's own "ssh:USER" identities of --stdio
 * links (a certificate may not pass for an ssh user); blanks and '#'
 * separate fields in the authorization file and the audit trail; control
 * bytes and non-ASCII would print ambiguously.
 */
#ifndef TRACEGATE_COMMON_IDENTITY_H
#define TRACEGATE_COMMON_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

/* A DNS name is at most 253 bytes, an X.509 CN at most 64. */
#define TG_IDENTITY_MAX 253
/* The prefix of the identities the relay makes for --stdio links. */
#define TG_IDENTITY_SSH_PREFIX "ssh:"

/* Whether the |n| bytes at |s| (no terminator needed) are an identity. On
 * false, *why (when |why| is not NULL) says what is wrong, as a static
 * string. */
bool tg_identity_valid(const char *s, size_t n, const char **why);

/* The same, or "ssh:" followed by an identity (an authorization file may
 * list those). */
bool tg_identity_valid_listed(const char *s, size_t n, const char **why);

/* "ssh:<user>" into |out| (|cap| bytes), or "ssh:uid-<uid>" when |user| is
 * NULL or not a valid identity. */
void tg_identity_ssh(char *out, size_t cap, const char *user, unsigned uid);

#endif /* TRACEGATE_COMMON_IDENTITY_H */
