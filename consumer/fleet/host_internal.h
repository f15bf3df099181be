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

/* What one connection attempt owns, from its start (connect_now) to the
 * next attempt's: reset as a whole there (tg__fleet_conn_reset), so that
 * nothing one connection learnt (a relay, a key the relay took, a
 * service that ended) is taken for the next's. Between connections (a
 * backoff) it still says what the last one was, for the decision that
 * follows its release. */
typedef struct tg__fleet_conn {
  tg_consumer_t *c; /* NULL once its on_close ran */
  void *conn;       /* the dialer's; NULL once handed to release() */
  bool relay;       /* TracegateRelay bound on it */
  bool bound;       /* ConsumerPort bound on it */
  bool key_set;     /* the relay took the resume key */
  /* The relay said, taking the key, that the key's session ended with
   * the service's connection: a refused Attach is final
   * (proto/tracegate/relay.proto, SetSessionKeyResponse). */
  bool service_ended;
  unsigned prep_wait; /* parts of preparing not answered (host_prep.c) */
  /* Its clock burst: samples so far, the one in flight, the heartbeat's,
   * and whether the burst is held for the fleet (and until when). */
  unsigned syncs;
  tg_clock_sample_t cur;
  tg_clock_sample_t hb_sample;
  tg_fleet_clock_hold_t clock_hold;
  uint64_t clock_due_ms; /* a held burst goes on by then anyway; 0: none */
} tg__fleet_conn_t;

/* The engine's side of a host (host.h: the owner sees the report). */
struct tg__fleet_engine {
  tg_fleet_host_t *h;
  /* The link's state, its deadlines and reconnections (link.h); the one
   * timer below is armed for tg_link_deadline() (and cx.clock_due_ms). */
  tg_link_t link;
  uv_timer_t timer;
  tg_recording_t *rec; /* the session; NULL once the host finished */
  tg_fleet_slot_t slot; /* its place in an admission window (fleet.c) */
  tg__fleet_conn_t cx;  /* the current (or last) connection */
  tg_fleet_host_closed_cb closed; /* the owner's, at tg_fleet_host_close_cb */

  bool ever_connected; /* ConsumerPort was bound once */
  /* The host's boot at the first GetHostInfo ("" if the relay said none),
   * asked again after each reconnection: a new one means the host
   * rebooted, and its sessions with it. */
  char boot_id[64];
  bool rebooted;
  /* Likewise the tracing service's process behind the relay ("" if the
   * relay did not say): another one means it was restarted, sessions
   * lost, even where no relay remembers it (an --stdio relay over ssh
   * lives as long as its connection; a relay restarted too). */
  char service_instance[48];
  bool service_restarted;
  bool described;      /* on_described was called */
  bool key_shown;      /* on_key_ready was called */
  bool stop_requested; /* the owner's tg_fleet_host_stop */
  bool has_traced;     /* its recording reached TRACING once */
  bool names_settled;  /* on_names_settled was called */
  int write_err; /* the first error on_packet or a clock write returned */
};

static inline uint64_t tg__fleet_now(const tg_fleet_host_t *h) {
  return tg_clock_ms(&h->fleet->clock);
}



/* Whether a reply on |c| is news for the host: a reply from an older link
 * is not, nor one that only says the link went (on_close deals with
 * that). */
static inline bool tg__fleet_reply_is_news(const tg_fleet_host_t *h,
                                           const tg_consumer_t *c, int status) {
  return h->e->cx.c == c && status != TG_EPEER_CLOSED && status != -ECANCELED;
}

/* --- fleet.c ----------------------------------------------------------------- */

/* The admission's hooks, which tg_fleet_init (fleet.c) installs in
 * tg_fleet_t.hooks: host.c and host_prep.c call them before the owner
 * hears of the same event, and never call fleet.c, which starts them. */
struct tg__fleet_hooks {
  void (*link_changed)(tg_fleet_host_t *h, tg_link_state_t from);
  void (*traced)(tg_fleet_host_t *h);
  void (*burst_ended)(tg_fleet_host_t *h);
  /* A host finished: its place in a window, if it held one, is free. */
  void (*place_freed)(tg_fleet_t *f);
};

/* --- host.c ------------------------------------------------------------------ */

/* host_prep.c calls these back by design: it is host.c's preparation of a
 * connection, split out for size (host.c's header). */

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

/* A new connection attempt (host_prep.c): its state (cx) starts empty,
 * every part of preparing awaited (the last one's consumer and transport
 * are gone by then); its account of why it closes and the clock burst
 * start over too. */
void tg__fleet_conn_reset(tg_fleet_host_t *h);
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
