/* Retention runs (retain.c): below snap.c and trigger.c, which run them.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_RETAIN_H
#define TRACEGATE_COLLECTOR_DAEMON_RETAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

/* Retention steps now (after a snapshot, and periodically). */
void coll_retain(coll_t *c);

#endif /* TRACEGATE_COLLECTOR_DAEMON_RETAIN_H */
