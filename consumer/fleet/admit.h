/* A fleet's two admission windows: how many hosts connect and prepare at
 * once, and how many held clock bursts go on at once.
 *
 * Start window: a TLS handshake is milliseconds of CPU at each end, so a
 * thousand begun together all progress slowly and all hit the connect
 * guard together, while a window of them completes steadily. A host holds
 * its place while it connects and prepares (round trips that wait more
 * than they compute), so the window is wider than the cores.
 *
 * Burst window: once every host traces, the rest of each held clock burst
 * (host.h, TG_FLEET_CLOCK_HELD) goes on a few hosts at a time: bursts
 * taken all at once queue behind each other and the first reads in the
 * owner's loop, and half a sample's round trip bounds the estimate's
 * error.
 *
 * Pure (no libuv, no hosts): host.c asks for the next index to start or
 * to burst, and gives a place back through the host's slot. Hosts are
 * admitted in index order, each at most once per window. One writer: the
 * fleet's loop thread.
 */
#ifndef TRACEGATE_CONSUMER_FLEET_ADMIT_H
#define TRACEGATE_CONSUMER_FLEET_ADMIT_H

#include <stdbool.h>
#include <stddef.h>

#define TG_FLEET_STARTING_MAX 128
#define TG_FLEET_BURSTING_MAX 16

/* Which window counts a host: at most one at a time. */
typedef enum tg_fleet_slot {
  TG_FLEET_SLOT_NONE,
  TG_FLEET_SLOT_STARTING, /* connecting or preparing its first link */
  TG_FLEET_SLOT_BURSTING, /* taking the rest of its held clock burst */
} tg_fleet_slot_t;

typedef struct tg_fleet_admit {
  size_t n;                    /* hosts */
  size_t start_max, burst_max; /* the windows */
  size_t next_start, starting; /* hosts before next_start were admitted */
  size_t next_burst, bursting;
  bool halted;                 /* no more starts (the owner stops) */
} tg_fleet_admit_t;

/* |n| hosts; a zero |start_max| or |burst_max| takes the default above. */
void tg_fleet_admit_init(tg_fleet_admit_t *a, size_t n, size_t start_max,
                         size_t burst_max);
/* The next host to start, counted in the start window (*slot becomes
 * STARTING): true and its index, or false when the window is full, the
 * fleet halted, or every host was admitted. */
bool tg_fleet_admit_start(tg_fleet_admit_t *a, size_t *index);
/* The same for the burst window (the caller sets the slot BURSTING when
 * the host does take a burst; else it gives the place back at once). */
bool tg_fleet_admit_burst(tg_fleet_admit_t *a, size_t *index);
/* Gives back the place |*slot| holds (none: nothing), *slot NONE after. */
void tg_fleet_admit_release(tg_fleet_admit_t *a, tg_fleet_slot_t *slot);

#endif /* TRACEGATE_CONSUMER_FLEET_ADMIT_H */
