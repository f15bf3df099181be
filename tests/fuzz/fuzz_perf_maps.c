/* Fuzzes tracegate-perf's /proc/PID/maps parser (agent/perf/perf_maps.h):
 * the paths in it are any file name a process mapped.
 *
 * Every mapping kept must have start < end, a NUL-terminated path shorter
 * than TG_PERF_MAP_PATH_MAX, be executable when only those are asked for,
 * come sorted and disjoint, and be found again by its first and last
 * address; kept plus bad lines must not exceed the lines given. Nothing
 * may crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/perf/perf_maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  for (int exec_only = 0; exec_only < 2; exec_only++) {
    tg_perf_maps_t m = {0};
    int n = tg_perf_maps_parse((const char *)data, size, exec_only, &m);
    if (n < 0) return 0; /* out of memory */
    if ((size_t)n != m.n || m.n + m.bad_lines > lines) abort();
    for (size_t i = 0; i < m.n; i++) {
      const tg_perf_map_t *p = &m.v[i];
      if (p->start >= p->end || strlen(p->path) >= TG_PERF_MAP_PATH_MAX)
        abort();
      if (exec_only && !p->x) abort();
      if (i && m.v[i - 1].end > p->start) abort();
      if (tg_perf_maps_find(&m, p->start) != p ||
          tg_perf_maps_find(&m, p->end - 1) != p)
        abort();
    }
    tg_perf_maps_free(&m);
  }
  return 0;
}
