/* The "rpc" category of tracegate-emit's requests (rpc.h), in a file of
 * its own: the writers (worker.c) look at it to know whether to run, and
 * the server and client write into it, so neither owns it. */
#include "agent/emit/rpc.h"

TG_CATEGORY(emit_rpc_cat, "rpc");

int emit_rpc_register_category(void) {
  static tg_category_t *const cats[] = {&emit_rpc_cat};
  return tg_track_event_register(cats, 1);
}
