/* A fleet's hosts admitted through its windows: see host.h ("The fleet's
 * admission") and admit.h. It starts the hosts (host.c); they tell it of
 * their events through the hooks it installs (host_internal.h). */
#include <errno.h>
#include <stdlib.h>

#include "common/clock_loop.h"
#include "consumer/fleet/host_internal.h"

static const struct tg__fleet_hooks fleet_hooks;

int tg_fleet_init(tg_fleet_t *f) {
  if (!f->loop) return -EINVAL; /* the clock below reads it */
  f->hooks = &fleet_hooks;
  tg_clock_loop_init(&f->clock, f->loop);
  f->hosts = calloc(f->n ? f->n : 1, sizeof(*f->hosts));
  if (!f->hosts) return -ENOMEM;
  tg_fleet_admit_init(&f->admit, f->n, 0, 0);
  return 0;
}

void tg_fleet_free(tg_fleet_t *f) {
  free(f->hosts);
  f->hosts = NULL;
}

/* A host counts from before its start, which may end it at once (and
 * give its place back). A host that fails at once finishes inside the
 * loop and asks for the next start: the loop itself takes it, so a fleet
 * of hosts that all fail at once does not recurse once per host. */
void tg_fleet_start(tg_fleet_t *f) {
  if (f->starting) return;
  f->starting = true;
  size_t i;
  while (tg_fleet_admit_start(&f->admit, &i)) {
    tg_fleet_host_t *h = f->hosts[i];
    if (!h || !h->e || h->report.link_state != TG_LINK_CONNECTING) {
      /* Not registered, stopped before its turn, or without an engine
       * (failed at its start): its place is free. */
      tg_fleet_slot_t none = TG_FLEET_SLOT_STARTING;
      tg_fleet_admit_release(&f->admit, &none);
      if (h && !h->e) tg_fleet_host_start(h);
      continue;
    }
    h->e->slot = TG_FLEET_SLOT_STARTING;
    tg_fleet_host_start(h);
  }
  f->starting = false;
}

void tg_fleet_halt(tg_fleet_t *f) { f->admit.halted = true; }

static void burst_more(tg_fleet_t *f) {
  size_t i;
  while (tg_fleet_admit_burst(&f->admit, &i)) {
    tg_fleet_host_t *h = f->hosts[i];
    tg_fleet_slot_t slot = TG_FLEET_SLOT_BURSTING;
    if (!h || !tg_fleet_host_resume_clock(h)) {
      tg_fleet_admit_release(&f->admit, &slot);
      continue;
    }
    h->e->slot = slot;
  }
}

/* A started host leaves CONNECTING and PREPARING once: a lost link
 * reconnects through RECONNECTING and RESUMING (link.h). A burst cut by a
 * lost link or an end gives its place back: a reconnection makes a whole
 * burst of its own. */
static void link_changed(tg_fleet_host_t *h, tg_link_state_t from) {
  tg_fleet_t *f = h->fleet;
  if (h->e->slot == TG_FLEET_SLOT_STARTING && tg_link_starting(from) &&
      !tg_link_starting(h->e->link.state))
    tg_fleet_admit_release(&f->admit, &h->e->slot);
  if (h->e->slot == TG_FLEET_SLOT_BURSTING && h->e->link.state != TG_LINK_UP) {
    tg_fleet_admit_release(&f->admit, &h->e->slot);
    burst_more(f);
  }
}

static void burst_ended(tg_fleet_host_t *h) {
  if (h->e->slot != TG_FLEET_SLOT_BURSTING) return;
  tg_fleet_admit_release(&h->fleet->admit, &h->e->slot);
  burst_more(h->fleet);
}

/* The last host to trace lets the held bursts and the deferred first
 * reads go on. */
static void traced(tg_fleet_host_t *h) {
  tg_fleet_t *f = h->fleet;
  tg_fleet_start(f);
  if (f->n < 2 || f->traced != f->n) return;
  burst_more(f);
  for (size_t i = 0; i < f->n; i++)
    if (f->hosts[i]) tg_fleet_host_fleet_started(f->hosts[i]);
}

static const struct tg__fleet_hooks fleet_hooks = {
    .link_changed = link_changed,
    .traced = traced,
    .burst_ended = burst_ended,
    .place_freed = tg_fleet_start,
};
