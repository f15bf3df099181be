/* The relay's audit trail: one line per decision that matters.
 *
 *   TIME IDENTITY ADDRESS WHAT VERDICT REASON...
 *   2024-05-02T10:11:12.345Z bob 10.0.0.7:51234 EnableTracing deny role observe does not allow EnableTracing
 *   2024-05-02T10:11:12.001Z alice 10.0.0.5:40022 connect allow role record
 *   2024-05-02T10:13:40.870Z alice 10.0.0.5:40022 disconnect end peer closed the connection (...)
 *
 * WHAT is a method name, or connect / disconnect for connections; VERDICT
 * is allow or deny (end for disconnects). Fields are single words with
 * anything unprintable or blank replaced, so a client-chosen string cannot
 * forge a field or a second line; REASON is the rest of the line.
 *
 * Lines go to a file (opened for append, one write() per line, reopened on
 * SIGHUP for log rotation) or, without one, to the log as "audit: ..." at
 * info level.
 */
#ifndef TRACEGATE_RELAY_AUDIT_H
#define TRACEGATE_RELAY_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tg_relay_audit tg_relay_audit_t;

/* |path| NULL: audit lines go to the log. Returns 0 or -errno (the file
 * could not be opened; |err| says why). */
int tg_relay_audit_open(const char *path, tg_relay_audit_t **out, char *err,
                        size_t errlen);
/* Reopens the file (after rotation). On failure the old file stays in use
 * and -errno is returned. */
int tg_relay_audit_reopen(tg_relay_audit_t *a, char *err, size_t errlen);
void tg_relay_audit_close(tg_relay_audit_t *a);

/* Writes one line. |identity|, |address|, |what| NULL or "" print as "-". */
void tg_relay_audit(tg_relay_audit_t *a, const char *identity,
                    const char *address, const char *what, const char *verdict,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#endif /* TRACEGATE_RELAY_AUDIT_H */
