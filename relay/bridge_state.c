/* The bridge's transition table (bridge_state.h). */
#include "relay/bridge_state.h"

#define S(x) TG_FSM_BIT(x)
/* Each state's arrows out of it (bridge_state.h). */
static const uint32_t kNext[] = {
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

static const char *const kNames[] = {
    [B_HANDSHAKE] = "handshake", [B_REFUSING] = "refusing",
    [B_OPEN] = "open",           [B_NO_SERVICE] = "no_service",
    [B_DETACHING] = "detaching", [B_CLOSING] = "closing",
    [B_FREEING] = "freeing",
};
_Static_assert(TG_FSM_COUNT(kNext) == B_FREEING + 1, "arrows per state");
_Static_assert(TG_FSM_COUNT(kNames) == B_FREEING + 1, "a name per state");

const tg_fsm_def_t tg__bridge_fsm = {"bridge", TG_FSM_COUNT(kNext), kNext,
                                     kNames};

const char *tg__bridge_state_name(enum bridge_state s) {
  return tg_fsm_name(&tg__bridge_fsm, s);
}

bool tg__bridge_transition_ok(enum bridge_state from, enum bridge_state to) {
  return tg_fsm_allowed(&tg__bridge_fsm, from, to);
}
