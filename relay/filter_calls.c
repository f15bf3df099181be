/* The calls in flight and the learned method ids (filter_internal.h):
 * what frame_filter.c and own_calls.c both use. Below both, it calls
 * neither: frame_filter.c hands the replies of the relay's own calls to
 * own_calls.c, which adds its calls to the table here.
 */
#include <errno.h>
#include <string.h>

#include "relay/filter_internal.h"

int tg__relay_track(tg_relay_filter_t *f, uint64_t id,
                    tg_relay_track_kind_t kind) {
  if (f->n_tracked == TG_RELAY_FILTER_MAX_TRACKED) return -ENOSPC;
  f->tracked[f->n_tracked].request_id = id;
  f->tracked[f->n_tracked].kind = kind;
  f->n_tracked++;
  return 0;
}

tg_relay_track_kind_t tg__relay_tracked(const tg_relay_filter_t *f,
                                        uint64_t id, size_t *at) {
  for (size_t i = 0; i < f->n_tracked; i++)
    if (f->tracked[i].request_id == id) {
      *at = i;
      return f->tracked[i].kind;
    }
  return TG_TRACK_NONE;
}

void tg__relay_untrack(tg_relay_filter_t *f, size_t at) {
  f->tracked[at] = f->tracked[--f->n_tracked];
}

uint32_t tg__relay_consumer_method_id(const tg_relay_filter_t *f,
                                      const char *name) {
  for (size_t i = 0; i < f->n_methods; i++)
    if (!strcmp(f->methods[i].name, name)) return f->methods[i].id;
  return 0;
}
