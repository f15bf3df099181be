/* SPDX-License-Identifier: Apache-2.0 */
/* See bench_session.h. */
#include "bench_session.h"

#include <stdio.h>
#include <time.h>

int bench_session_start(const char *prog, const test_service_t *ts,
                        raw_consumer_t *c, const char *ds_name,
                        const tg_category_t *cat, const tg_ds_t *ds) {
  simple_cfg_t sc;
  raw_consumer_connect(c, ts);
  simple_cfg_init(&sc, 64 * 1024, 1 /* RING_BUFFER */, "track_event");
  Perfetto__Protos__TrackEventConfig te =
      PERFETTO__PROTOS__TRACK_EVENT_CONFIG__INIT;
  char *enabled[] = {"bench"};
  char *disabled[] = {"*"};
  te.n_enabled_categories = 1;
  te.enabled_categories = enabled;
  te.n_disabled_categories = 1;
  te.disabled_categories = disabled;
  sc.dsc.track_event_config = &te;
  Perfetto__Protos__TraceConfig__DataSource ds2 =
      PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT;
  Perfetto__Protos__DataSourceConfig dsc2 =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  dsc2.name = (char *)ds_name;
  ds2.config = &dsc2;
  Perfetto__Protos__TraceConfig__DataSource *dss[] = {&sc.ds, &ds2};
  sc.cfg.n_data_sources = 2;
  sc.cfg.data_sources = dss;
  raw_consumer_enable(c, &sc.cfg, -1);
  for (int i = 0;
       i < 1000 && !(tg_category_enabled(cat) && tg_ds_enabled_mask(ds)); i++) {
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  if (!tg_category_enabled(cat) || !tg_ds_enabled_mask(ds)) {
    fprintf(stderr, "%s: the session did not start\n", prog);
    return -1;
  }
  return 0;
}
