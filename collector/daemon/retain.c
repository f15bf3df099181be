/* Retention (coll.h): the store's retention steps, after each snapshot
 * stored (snap.c) and on trigger.c's period. Below both: it calls
 * nothing of the daemon's but the store. */
#include <inttypes.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/retain.h"
#include "common/log.h"
#include "tracegate/error.h"

void coll_retain(coll_t *c) {
  /* A bounded number of steps per call: the loop serves others between. */
  for (int i = 0; i < 64; i++) {
    tg_coll_retained_t out;
    int rv = tg_coll_store_retain(c->store, &out);
    if (rv < 0) {
      TG_WARN("retention: %s", tg_strerror(rv));
      return;
    }
    if (rv == 0) return;
    TG_INFO("retention: snapshot %016" PRIx64 " (%" PRIu64
           " bytes) deleted (%s)", out.id, out.bytes,
           tg_coll_verdict_name(out.verdict));
  }
}
