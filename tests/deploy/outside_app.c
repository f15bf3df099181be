/* An outside program built against an installed libtracegate-agent, as a
 * user of the library would build it: only the installed headers, the
 * pkg-config flags (or the CMake package) and the shared library. It must
 * link, start the agent against a socket where no service listens, write
 * events that no session enables, and shut down cleanly.
 *
 *   outside_app SOCKET_PATH   exits 0 on success, 1 with a reason otherwise
 */
#include <stdio.h>
#include <string.h>

#include "tracegate/agent.h"
#include "tracegate/error.h"
#include "tracegate/track_event.h"

TG_CATEGORY(cat_outside, "outside");

static int fail(const char *what, int rv) {
  fprintf(stderr, "outside_app: %s: %d (%s)\n", what, rv,
          rv < 0 ? tg_strerror(rv) : "unexpected");
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: outside_app SOCKET_PATH\n");
    return 2;
  }
  static tg_category_t *const cats[] = {&cat_outside};
  int rv = tg_track_event_register(cats, 1);
  if (rv < 0) return fail("tg_track_event_register", rv);

  tg_ds_t *ds = NULL;
  tg_ds_options_t dso = {.name = "com.example.outside"};
  rv = tg_ds_register(&dso, &ds);
  if (rv < 0) return fail("tg_ds_register", rv);

  tg_agent_options_t opts = {
      .socket_path = argv[1],
      .producer_name = "outside_app",
      .reconnect_min_ms = 10,
      .reconnect_max_ms = 50,
  };
  rv = tg_agent_init(&opts);
  if (rv < 0) return fail("tg_agent_init", rv);

  /* No service: waiting must time out, not hang and not succeed. */
  rv = tg_agent_wait_connected(100);
  if (rv != TG_ETIMEOUT) return fail("tg_agent_wait_connected", rv);
  if (tg_agent_connected()) return fail("tg_agent_connected", 1);

  /* Nothing is enabled: these must cost nothing and write nothing. */
  for (int i = 0; i < 1000; i++) {
    TG_SLICE_BEGIN(cat_outside, "frame", TG_ARG_INT("i", i));
    TG_INSTANT(cat_outside, "tick", TG_ARG_STR("s", "x"));
    TG_COUNTER(cat_outside, "depth", i);
    TG_SLICE_END(cat_outside);
    {
      TG_SCOPED_SLICE(cat_outside, "scoped", TG_ARG_BOOL("b", true));
    }
    TG_DS_TRACE(ds, inst, pbw) {
      tg_pbw_append_varint(pbw, 8, tg_track_event_now());
    }
  }

  tg_agent_stats_t st;
  memset(&st, 0xff, sizeof(st));
  tg_agent_get_stats(&st);
  tg_agent_shutdown();
  if (st.packets_written != 0 || st.connects != 0)
    return fail("stats: packets written or connected without a service", 1);
  printf("outside_app: ok (agent started, %s, nothing written, shut down)\n",
         tg_strerror(TG_ETIMEOUT));
  return 0;
}
