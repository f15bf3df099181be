/* "linux.system_info": once per instance, right after its start, the
 * machine's CPUs (cpu_info.h), as Perfetto's traced_probes writes them.
 * Nothing to configure; nothing more to write after the first round. */
#include <errno.h>
#include <stdlib.h>

#include "agent/clock.h"
#include "agent/probes/cpu_info.h"
#include "agent/probes/probes.h"
#include "common/log.h"
#include "tracegate/error.h"

typedef struct system_info {
  int unused;
} system_info_t;

static int create(const void *cfg, void *ctx, void **state) {
  (void)ctx;
  (void)cfg;
  *state = calloc(1, sizeof(system_info_t));
  return *state ? 0 : -ENOMEM;
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  (void)state;
  (void)now;
  tg_cpu_info_t ci;
  int rv = tg_cpu_info_read("/proc/cpuinfo", "/sys/devices/system/cpu", &ci);
  if (rv < 0) {
    TG_WARN("linux.system_info: /proc/cpuinfo: %s; no cpu_info written",
            tg_strerror(rv));
    return UINT64_MAX;
  }
  tg_pbw_t *w = tg_ds_packet_begin(ds, inst);
  if (w) {
    tg_cpu_info_write(w, tg__clock_boottime(), &ci);
    tg_ds_packet_end(ds, inst);
  }
  tg_cpu_info_free(&ci);
  return UINT64_MAX; /* once */
}

static void destroy(void *state) { free(state); }

const tg_probe_ops_t tg_system_info_probe = {
    .name = "linux.system_info",
    .parse_cfg = tg_probe_no_cfg,
    .create = create,
    .tick = tick,
    .destroy = destroy,
};
