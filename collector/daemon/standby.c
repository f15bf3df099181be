/* Standby connections (coll.h): one idle, bound consumer connection per
 * host, dialed once its ring traces, lent to a snapshot for its clone and
 * taken back after FreeBuffers. A trigger then costs one CloneSession
 * request per host, all sent in one loop iteration, with no TLS handshake
 * between the trigger and the clone (bench_collector measures what the
 * handshakes would add; docs/operations.md). Idle, it sends nothing: the relay's idle timeout may
 * close it, and it is dialed again RETRY_MS later (a snapshot meanwhile
 * dials a connection of its own, as without a standby).
 *
 *   NONE --want--> DIALING --bound--> READY --take--> BUSY --give back--> READY
 *   DIALING, READY, BUSY --closed (peer) / close--> CLOSING --released--> NONE
 *
 * Every change goes through set_state(), against that diagram's arrows
 * (coll_standby_transition_ok), under common/fsm.h's one policy.
 */
#include <errno.h>
#include <stdio.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/standby.h"
#include "common/fsm.h"
#include "common/log.h"

#define RETRY_MS 5000

static coll_host_t *of(tg_consumer_t *c) { return tg_consumer_data(c); }

#define S(x) TG_FSM_BIT(COLL_SB_##x)
/* Each state's arrows out of it (the diagram above). */
static const uint32_t kNext[] = {
    [COLL_SB_NONE] = S(DIALING),
    [COLL_SB_DIALING] = S(READY) | S(CLOSING),
    [COLL_SB_READY] = S(BUSY) | S(CLOSING),
    [COLL_SB_BUSY] = S(READY) | S(CLOSING),
    [COLL_SB_CLOSING] = S(NONE),
};
#undef S
static const char *const kNames[] = {"none", "dialing", "ready", "busy",
                                     "closing"};
_Static_assert(TG_FSM_COUNT(kNext) == COLL_SB_CLOSING + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == TG_FSM_COUNT(kNext), "a name per state");
static const tg_fsm_def_t kDef = {"standby connection of host",
                                  TG_FSM_COUNT(kNext), kNext, kNames};

bool coll_standby_transition_ok(coll_standby_state_t from,
                                coll_standby_state_t to) {
  return tg_fsm_allowed(&kDef, from, to);
}

/* The one transition, under common/fsm.h's policy: one the diagram has no
 * arrow for is a bug of this file's, refused, counted
 * (coll_counts_t.standby_bad_transitions) and logged. */
static void set_state(coll_host_t *h, coll_standby_state_t to,
                      const char *why) {
  unsigned st = h->sb.st;
  if (tg_fsm_move(&kDef, &st, to, &h->c->counts.standby_bad_transitions,
                  h->t.spec, why))
    h->sb.st = to;
}

static void on_retry(uv_timer_t *t) { coll_standby_want(t->data); }

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  coll_host_t *h = of(c);
  if (status) {
    TG_DEBUG("host %s: standby connection: %s", h->t.spec, msg);
    return; /* on_close follows */
  }
  if (h->sb.st == COLL_SB_DIALING) set_state(h, COLL_SB_READY, "bound");
}

static void on_gone(void *ctx, const char *detail) {
  coll_host_t *h = ctx;
  struct snap_host *user = h->sb.user;
  set_state(h, COLL_SB_NONE, "released");
  h->sb.c = NULL;
  h->sb.conn = NULL;
  h->sb.user = NULL;
  if (user) h->c->on.standby_gone(user, detail);
  if (!h->removed && !h->c->stopping)
    uv_timer_start(&h->sb.retry, on_retry, RETRY_MS, 0);
  else if (h->removed)
    h->c->on.standby_released(h); /* it may be freed now */
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  coll_host_t *h = of(c);
  set_state(h, COLL_SB_CLOSING, msg && msg[0] ? msg : "closed");
  if (h->sb.user) h->c->on.standby_closed(h->sb.user, status, msg);
  h->c->dialer.release(h->sb.conn, on_gone, h);
}

static const tg_consumer_cbs_t sb_cbs = {.on_ready = on_ready,
                                         .on_close = on_close};

void coll_standby_init(coll_host_t *h) {
  h->sb.st = COLL_SB_NONE;
  uv_timer_init(h->c->loop, &h->sb.retry);
  h->sb.retry.data = h;
}

void coll_standby_want(coll_host_t *h) {
  coll_t *c = h->c;
  if (h->sb.st != COLL_SB_NONE || h->removed || c->stopping || !h->fh) return;
  char err[512] = "";
  tg_consumer_t *cons = NULL;
  void *conn = NULL;
  int rv = c->dialer.open(c->dialer.ctx, h->fh, &sb_cbs, &cons, &conn, err,
                          sizeof(err));
  if (rv < 0) {
    TG_DEBUG("host %s: standby connection: %s", h->t.spec, err);
    uv_timer_start(&h->sb.retry, on_retry, RETRY_MS, 0);
    return;
  }
  tg_consumer_set_data(cons, h);
  h->sb.c = cons;
  h->sb.conn = conn;
  set_state(h, COLL_SB_DIALING, "the host traces");
}

bool coll_standby_take(coll_host_t *h, struct snap_host *user) {
  if (h->sb.st != COLL_SB_READY || !tg_consumer_ready(h->sb.c)) return false;
  set_state(h, COLL_SB_BUSY, "lent to a snapshot");
  h->sb.user = user;
  return true;
}

void coll_standby_give_back(coll_host_t *h) {
  if (h->sb.st != COLL_SB_BUSY) return;
  set_state(h, COLL_SB_READY, "given back");
  h->sb.user = NULL;
  /* Removed meanwhile: nothing more will borrow it. */
  if (h->removed) coll_standby_close(h);
}

void coll_standby_close(coll_host_t *h) {
  uv_timer_stop(&h->sb.retry);
  if (h->sb.c && h->sb.st != COLL_SB_CLOSING) tg_consumer_close(h->sb.c);
}

bool coll_standby_idle(const coll_host_t *h) {
  return h->sb.st == COLL_SB_NONE;
}
