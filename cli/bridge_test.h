/* cli/bridge_test.h: tests' hook into the bridge's screens
 * (cli/bridge.h), kept out of the header the product includes. */
#ifndef TRACEGATE_CLI_BRIDGE_TEST_H
#define TRACEGATE_CLI_BRIDGE_TEST_H

#include "cli/bridge.h"

/* For tests: the next |n| connections act as if calloc had failed for
 * their screen (refused and closed at once), to exercise the refusal path
 * in-process. Replaces any count not yet used up. */
void tg__bridge_screen_fail_next_for_test(bridge_server_t *s, unsigned n);

#endif /* TRACEGATE_CLI_BRIDGE_TEST_H */
