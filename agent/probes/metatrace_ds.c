/* "perfetto.metatrace": tracegate-probes' own timings (metatrace.h),
 * written every DRAIN_MS from the sampler thread, and at each flush and at
 * the stop from the agent's thread, so a trace ends with the last of them.
 * Nothing to configure. */
#include <errno.h>
#include <stdlib.h>

#include "agent/probes/metatrace.h"
#include "agent/probes/probes.h"

#define DRAIN_MS 250

typedef struct metatrace {
  int unused;
} metatrace_t;

static int create(const void *cfg, void *ctx, void **state) {
  (void)cfg;
  (void)ctx;
  *state = calloc(1, sizeof(metatrace_t));
  if (!*state) return -ENOMEM;
  tg_meta_enable();
  return 0;
}

static void drain_into(tg_ds_t *ds, unsigned inst) {
  tg_probes_ds_target_t t = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&t);
  tg_meta_drain(&sink);
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  (void)state;
  drain_into(ds, inst);
  return now + DRAIN_MS;
}

static void destroy(void *state) {
  tg_meta_disable();
  free(state);
}

const tg_probe_ops_t tg_metatrace_probe = {
    .name = "perfetto.metatrace",
    .parse_cfg = tg_probe_no_cfg,
    .create = create,
    .tick = tick,
    .drain_now = drain_into,
    .destroy = destroy,
};
