/* The relay bridge's transition table (relay/bridge_state.h): every arrow
 * the header writes out is in it, and nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "relay/bridge_state.h"

#define N_STATES (B_FREEING + 1)

/* The header's table, written out again. */
static const struct { enum bridge_state from, to; } kArrows[] = {
    {B_HANDSHAKE, B_REFUSING}, {B_HANDSHAKE, B_OPEN},
    {B_HANDSHAKE, B_NO_SERVICE}, {B_HANDSHAKE, B_CLOSING},
    {B_HANDSHAKE, B_FREEING},  {B_OPEN, B_REFUSING},
    {B_OPEN, B_DETACHING},     {B_OPEN, B_CLOSING},
    {B_REFUSING, B_CLOSING},   {B_NO_SERVICE, B_CLOSING},
    {B_DETACHING, B_CLOSING},  {B_CLOSING, B_FREEING},
};

static bool listed(enum bridge_state from, enum bridge_state to) {
  for (size_t i = 0; i < sizeof(kArrows) / sizeof(kArrows[0]); i++)
    if (kArrows[i].from == from && kArrows[i].to == to) return true;
  return false;
}

static void bridge_table_has_exactly_the_header_arrows(void **state) {
  (void)state;
  for (int f = 0; f < N_STATES; f++)
    for (int t = 0; t < N_STATES; t++)
      assert_int_equal(tg__bridge_transition_ok(f, t), listed(f, t));
}

static void bridge_freeing_is_final_and_no_state_loops(void **state) {
  (void)state;
  for (int s = 0; s < N_STATES; s++) {
    assert_false(tg__bridge_transition_ok(B_FREEING, s));
    assert_false(tg__bridge_transition_ok(s, s));
    assert_false(tg__bridge_transition_ok(s, B_HANDSHAKE));
  }
}

static void bridge_rejects_states_out_of_range(void **state) {
  (void)state;
  assert_false(tg__bridge_transition_ok(N_STATES, B_CLOSING));
  assert_false(tg__bridge_transition_ok(B_OPEN, N_STATES));
  assert_string_equal(tg__bridge_state_name(N_STATES), "?");
}

static void bridge_names_every_state(void **state) {
  (void)state;
  for (int s = 0; s < N_STATES; s++) {
    assert_string_not_equal(tg__bridge_state_name(s), "?");
    for (int o = 0; o < s; o++)
      assert_string_not_equal(tg__bridge_state_name(s),
                              tg__bridge_state_name(o));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bridge_table_has_exactly_the_header_arrows),
      cmocka_unit_test(bridge_freeing_is_final_and_no_state_loops),
      cmocka_unit_test(bridge_rejects_states_out_of_range),
      cmocka_unit_test(bridge_names_every_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
