/* Limits of the consumer protocol that more than one program enforces.
 *
 * tracegated refuses what is over them, and the relay and the CLI must
 * not make what tracegated would refuse; a limit copied by hand into each
 * drifts, so each is written once, here.
 *
 *   Detach / Attach / SetDisconnectLease key   <= TG_DETACH_KEY_MAX bytes
 *       at tracegated; through a relay the key is "<identity>/<key>",
 *       and the relay checks that the whole fits
 *   TracegateRelay.SetSessionKey key           <= TG_RELAY_SESSION_KEY_MAX
 *       bytes, before the relay namespaces it (the CLI makes its resume
 *       keys within it)
 */
#ifndef TRACEGATE_ABI_PROTOCOL_LIMITS_H
#define TRACEGATE_ABI_PROTOCOL_LIMITS_H

#define TG_DETACH_KEY_MAX 256
#define TG_RELAY_SESSION_KEY_MAX 128

_Static_assert(TG_RELAY_SESSION_KEY_MAX < TG_DETACH_KEY_MAX,
               "a namespaced resume key must be able to fit a detach key");

#endif /* TRACEGATE_ABI_PROTOCOL_LIMITS_H */
