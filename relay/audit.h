/* The relay's audit trail: one line per decision that matters.
 *
 *   TIME IDENTITY ADDRESS WHAT VERDICT CODE REASON...
 *   2024-05-02T10:11:12.345Z bob 10.0.0.7:51234 EnableTracing deny [TG-4027] role observe does not allow EnableTracing
 *   2024-05-02T10:11:12.001Z alice 10.0.0.5:40022 connect allow [TG-4001] role record
 *   2024-05-02T10:13:40.870Z alice 10.0.0.5:40022 disconnect end [TG-4036] the client closed the connection
 *
 * WHAT is a method name, or connect / disconnect for connections; VERDICT
 * is allow or deny (end for disconnects, suppressed for a count of lines
 * held back); CODE is the reason's notice code (common/notice.h), the
 * field a script matches: REASON's words may change. Fields are single
 * words with anything unprintable or blank replaced, so a client-chosen
 * string cannot forge a field or a second line; REASON is the rest of the
 * line.
 *
 * Lines go to a file (opened for append, one write() per line, reopened on
 * SIGHUP for log rotation), to syslog(3) (--stdio: the log is stderr, which
 * ssh carries back to the client, so audit lines must never go there), or
 * to the log as "audit: ..." at info level.
 *
 * Denials are rate-limited per connection (tg_relay_audit_limit_t): a
 * client sending refused calls in a loop gets a burst of lines
 * (--audit-burst, TG_AUDIT_DENIAL_BURST by default), then a steady rate
 * (--audit-lines-per-s, TG_AUDIT_DENIALS_PER_S), and one counted "N more
 * denials suppressed" line when the window reopens and at disconnect.
 */
#ifndef TRACEGATE_RELAY_AUDIT_H
#define TRACEGATE_RELAY_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/line_limit.h"
#include "common/notice.h"

typedef struct tg_relay_audit tg_relay_audit_t;

/* |path| NULL: audit lines go to the log. Returns 0 or -errno (the file
 * could not be opened; |err| says why). */
int tg_relay_audit_open(const char *path, tg_relay_audit_t **out, char *err,
                        size_t errlen);
/* Audit lines to syslog(3) (facility authpriv, ident |ident|, which must
 * outlive the audit trail), for --stdio without --audit-log. */
int tg_relay_audit_open_syslog(const char *ident, tg_relay_audit_t **out);
/* Reopens the file (after rotation). On failure the old file stays in use
 * and -errno is returned. */
int tg_relay_audit_reopen(tg_relay_audit_t *a, char *err, size_t errlen);
void tg_relay_audit_close(tg_relay_audit_t *a);

/* Writes one line. |identity|, |address|, |what| NULL or "" print as "-";
 * |code| is the reason's (TG_N_NONE prints as [TG-0000]). */
void tg_relay_audit(tg_relay_audit_t *a, const char *identity,
                    const char *address, const char *what, const char *verdict,
                    tg_notice_t code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* --- rate limit of denial lines, per connection --------------------------- */

/* The defaults of --audit-lines-per-s and --audit-burst. */
#define TG_AUDIT_DENIALS_PER_S 10
#define TG_AUDIT_DENIAL_BURST 50

/* The size of every budget of lines: |burst| at once, then |per_s| a
 * second (both > 0; the flags' bounds see to it). One per relay, set from
 * the flags and read by every bucket. */
typedef struct tg_relay_audit_budget {
  uint32_t burst;
  uint32_t per_s;
} tg_relay_audit_budget_t;

#define TG_RELAY_AUDIT_BUDGET_DEFAULT \
  ((tg_relay_audit_budget_t){TG_AUDIT_DENIAL_BURST, TG_AUDIT_DENIALS_PER_S})

/* common/line_limit.h's bucket, sized by a tg_relay_audit_budget_t.
 * Zeroed = full. */
typedef tg_line_limit_t tg_relay_audit_limit_t;

/* One denial at |now_ms| (a monotonic clock) against |budget|. Returns
 * true when its line may be written; then *suppressed_before is how many
 * were held back before it (write the count first; it is reset). Returns
 * false when the line is to be suppressed (counted). */
bool tg_relay_audit_limit_take(tg_relay_audit_limit_t *l,
                               const tg_relay_audit_budget_t *budget,
                               uint64_t now_ms,
                               uint64_t *suppressed_before);

/* Denials suppressed and not yet reported (reset to 0): for the count
 * line at disconnect. */
uint64_t tg_relay_audit_limit_flush(tg_relay_audit_limit_t *l);

#endif /* TRACEGATE_RELAY_AUDIT_H */
