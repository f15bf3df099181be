/* The bridge's transition table (bridge_state.h). */
#include "relay/bridge_state.h"

const char *tg__bridge_state_name(enum bridge_state s) {
  switch (s) {
  case B_HANDSHAKE: return "handshake";
  case B_REFUSING: return "refusing";
  case B_OPEN: return "open";
  case B_NO_SERVICE: return "no_service";
  case B_DETACHING: return "detaching";
  case B_CLOSING: return "closing";
  case B_FREEING: return "freeing";
  }
  return "?";
}

#define S(x) (1u << (x))
/* Each state's arrows out of it (bridge_state.h). */
static const unsigned kNext[] = {
    [B_HANDSHAKE] = S(B_REFUSING) | S(B_OPEN) | S(B_NO_SERVICE) |
                    S(B_CLOSING) | S(B_FREEING),
    [B_REFUSING] = S(B_CLOSING),
    [B_OPEN] = S(B_REFUSING) | S(B_DETACHING) | S(B_CLOSING),
    [B_NO_SERVICE] = S(B_CLOSING),
    [B_DETACHING] = S(B_CLOSING),
    [B_CLOSING] = S(B_FREEING),
    [B_FREEING] = 0,
};
#undef S

bool tg__bridge_transition_ok(enum bridge_state from, enum bridge_state to) {
  if ((unsigned)from > B_FREEING || (unsigned)to > B_FREEING) return false;
  return (kNext[from] & (1u << to)) != 0;
}

