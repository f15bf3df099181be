/* A relay connection's (bridge's) states and the arrows between them:
 * the table bridge.c's one setter checks every change against. Pure, so
 * that a test holds the table to this comment.
 */
#ifndef TRACEGATE_RELAY_BRIDGE_STATE_H
#define TRACEGATE_RELAY_BRIDGE_STATE_H

#include <stdbool.h>

#include "common/fsm.h"

/* A connection's one state, and its arrows (tg__bridge_transition_ok):
 *   HANDSHAKE  -> REFUSING, OPEN, NO_SERVICE, CLOSING, FREEING
 *   OPEN       -> REFUSING (the service went), DETACHING, CLOSING
 *   REFUSING, NO_SERVICE, DETACHING -> CLOSING
 *   CLOSING    -> FREEING (final)
 * HANDSHAKE -> FREEING: nothing was opened (the accept or the pipe
 * failed). Every write goes through tg__bridge_set_state(), under
 * common/fsm.h's policy: a move the table lacks is refused, counted and
 * logged. */
enum bridge_state {
  B_HANDSHAKE,  /* not admitted yet: the TLS handshake runs (or --stdio is
                 * being opened); no upstream yet */
  B_REFUSING,   /* verified but not authorized, or the service went away:
                 * telling the client why */
  B_OPEN,       /* frames flow both ways */
  B_NO_SERVICE, /* admitted, with no upstream: nothing listened on the
                 * service's socket. The relay's own service answers; a
                 * bind of the service's is refused as a service with
                 * nothing would refuse it, after a notice saying why
                 * (the bridge's |refusal|). Closes after
                 * NO_SERVICE_LINGER_MS. */
  B_DETACHING,  /* client gone; waiting for the service to detach */
  B_CLOSING,    /* waiting for the transports to close */
  B_FREEING,    /* both closed; the timer closes last, then the memory */
};

/* The table above, for tg_fsm_move(). */
extern const tg_fsm_def_t tg__bridge_fsm;
/* Whether the table above has an arrow |from| -> |to| (a state to
 * itself is none). */
bool tg__bridge_transition_ok(enum bridge_state from, enum bridge_state to);
/* "open", "no_service", ...; "?" for a value out of range. */
const char *tg__bridge_state_name(enum bridge_state s);

#endif /* TRACEGATE_RELAY_BRIDGE_STATE_H */
