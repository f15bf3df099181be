/* An app built against the installed libtracegate-agent-dev (pkg-config
 * or find_package), as a user of the Debian packages builds one, tracing
 * into the installed service. It writes one slice named
 * "deb_installed_app_frame" every millisecond, whenever a session enables
 * its category, until SIGTERM or the time given runs out.
 *
 *   traced_app SOCKET_PATH SECONDS
 *
 * Standard output: "connected\n" once the agent is connected, then at exit
 * one JSON line of the agent's counters. Exit 0 when it connected and shut
 * down cleanly, 1 otherwise (with a reason on standard error); whether its
 * events arrived is the recordings' to say. */
/* nanosleep, sigaction: POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tracegate/agent.h"
#include "tracegate/error.h"
#include "tracegate/track_event.h"

TG_CATEGORY(cat_deb, "deb");

static volatile sig_atomic_t stop;

static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: traced_app SOCKET_PATH SECONDS\n");
    return 2;
  }
  long seconds = strtol(argv[2], NULL, 10);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);

  static tg_category_t *const cats[] = {&cat_deb};
  int rv = tg_track_event_register(cats, 1);
  if (rv < 0) {
    fprintf(stderr, "traced_app: tg_track_event_register: %s\n", tg_strerror(rv));
    return 1;
  }
  tg_agent_options_t opts = {.socket_path = argv[1],
                             .producer_name = "deb_installed_app"};
  rv = tg_agent_init(&opts);
  if (rv < 0) {
    fprintf(stderr, "traced_app: tg_agent_init: %s\n", tg_strerror(rv));
    return 1;
  }
  rv = tg_agent_wait_connected(10000);
  if (rv < 0) {
    fprintf(stderr, "traced_app: not connected to %s: %s\n", argv[1],
            tg_strerror(rv));
    tg_agent_shutdown();
    return 1;
  }
  printf("connected\n");
  fflush(stdout);

  const struct timespec tick = {0, 1000000};
  for (long i = 0; !stop && i < seconds * 1000; i++) {
    TG_SLICE_BEGIN(cat_deb, "deb_installed_app_frame", TG_ARG_INT("i", i));
    TG_SLICE_END(cat_deb);
    nanosleep(&tick, NULL);
  }

  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  tg_agent_shutdown();
  printf("{\"connects\":%llu,\"disconnects\":%llu,\"chunks_committed\":%llu,"
         "\"packets_dropped\":%llu}\n",
         (unsigned long long)st.connects, (unsigned long long)st.disconnects,
         (unsigned long long)st.chunks_committed,
         (unsigned long long)st.packets_dropped);
  return 0;
}
