/* Shared by host.c (the link, the recording, the end of a host) and
 * host_prep.c (preparing a connection, the clocks, the heartbeat). Not
 * for owners: host.h is their interface. */
#ifndef TRACEGATE_CONSUMER_FLEET_HOST_INTERNAL_H
#define TRACEGATE_CONSUMER_FLEET_HOST_INTERNAL_H

#include <errno.h>

#include "common/notice.h"
#include "consumer/fleet/host.h"
#include "tracegate/error.h"

#define TG_FLEET_RELAY_SERVICE "TracegateRelay"

static inline uint64_t tg__fleet_now(const tg_fleet_host_t *h) {
  return uv_now(h->fleet->loop);
}

/* Whether a reply on |c| is news for the host: a reply from an older link
 * is not, nor one that only says the link went (on_close deals with
 * that). */
static inline bool tg__fleet_reply_is_news(const tg_fleet_host_t *h,
                                           const tg_consumer_t *c, int status) {
  return h->c == c && status != TG_EPEER_CLOSED && status != -ECANCELED;
}

/* --- fleet.c ----------------------------------------------------------------- */

/* The admission's hooks, called by host.c and host_prep.c before the
 * owner hears of the same event. */
void tg__fleet_link_changed(tg_fleet_host_t *h, tg_link_state_t from);
void tg__fleet_traced(tg_fleet_host_t *h);
void tg__fleet_burst_ended(tg_fleet_host_t *h);

/* --- host.c ------------------------------------------------------------------ */

/* Tells the owner (and the info log) one line about |h|, its text led by
 * |code|'s tag (common/notice.h). */
void tg__fleet_notice(tg_fleet_host_t *h, tg_fleet_notice_t kind,
                      tg_notice_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Ends |h| with an error of kind |kind| (FAILING; the session and
 * connection go). The first failure's kind and words stay. */
void tg__fleet_fail(tg_fleet_host_t *h, tg_fleet_failure_t kind,
                    const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "cannot write OUT: why" for a failed write of |h|'s packets. */
void tg__fleet_fail_write(tg_fleet_host_t *h, int err);
/* A preparation call failed (|status|, |msg|): a reconnection attempt is
 * dropped, a first connection fails; a closing connection is on_close's. */
void tg__fleet_prep_failed(tg_fleet_host_t *h, int status, const char *msg);
/* A reconnection attempt did not work out: its connection goes. */
void tg__fleet_drop_attempt(tg_fleet_host_t *h, const char *why);
/* Every part of preparing is in: the session starts or comes back. */
void tg__fleet_after_prep(tg_fleet_host_t *h);
/* Durations in notices: "12.3s", "2m05s". */
void tg__fleet_format_ms(char *out, size_t n, uint64_t ms);

/* --- host_prep.c --------------------------------------------------------------- */

/* A new connection attempt: the preparation starts over. */
void tg__fleet_prep_reset(tg_fleet_host_t *h);
/* The attempt's consumer is open: TracegateRelay is bound in the same
 * round trip as ConsumerPort. */
void tg__fleet_prep_begin(tg_fleet_host_t *h);
/* The consumer's on_ready: ConsumerPort is bound. */
void tg__fleet_on_ready(tg_consumer_t *c, int status, const char *msg);
/* The link asks for a heartbeat (a ClockSync). */
void tg__fleet_send_heartbeat(tg_fleet_host_t *h);
/* on_described, once, when the clock burst is not held. */
int tg__fleet_describe(tg_fleet_host_t *h);

#endif /* TRACEGATE_CONSUMER_FLEET_HOST_INTERNAL_H */
