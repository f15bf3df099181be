/* One fleet snapshot (snap.c): a clone of every host of a group, read
 * out, merged and stored. Below trigger.c and api.c; a snapshot ended is
 * told up through coll_t.on.snapshot_done. Its perf boosts (boost.c,
 * below it) tell it of their packets and their end through coll_t.on.
 */
#ifndef TRACEGATE_COLLECTOR_DAEMON_SNAP_H
#define TRACEGATE_COLLECTOR_DAEMON_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/daemon/coll.h"

/* A standby connection a snapshot borrowed closed (|status|, |msg| as
 * the consumer's on_close gave them), then its transport was released:
 * coll_events_t's standby_closed, standby_gone. */
void coll_snap_standby_closed(struct snap_host *sh, int status, const char *msg);
void coll_snap_standby_gone(struct snap_host *sh, const char *detail);

/* coll_events_t's boost_packet: one boost packet of host |k| (its
 * sequence already moved), merged on the host's machine as its ring's
 * are; *stored grows by the bytes it took in the file. 0, or an error
 * that fails the boost (TG_ETOO_MANY_SEQUENCES, -ENOMEM, the file's). */
int coll_snap_merge_boost(coll_snap_t *s, size_t k, const uint8_t *p,
                          size_t n, uint64_t *stored);
/* coll_events_t's boost_released: a boost's connection was released, the
 * snapshot may finish. */
void coll_snap_boost_released(coll_snap_t *s);

typedef struct coll_trigger_req {
  const char *trigger; /* the trigger's name, "operator", "schedule" */
  const char *reason;
  const char *origin;  /* the host that fired it, "" for none */
  coll_host_t *from;   /* that host (borrowed), NULL for an operator's or
                        * the schedule's (|trigger| says which) */
  const char *group;   /* "all" or a group of the config */
  /* A CLONE_SNAPSHOT trigger of a host: the clone of |origin| carries it. */
  const char *producer_name;
  int32_t producer_uid;
  /* The Alertmanager webhook's (alertmanager.c): its own budget. */
  bool alertmanager;
  /* When |n_hosts| > 0: exactly these hosts (borrowed for the call) in
   * place of |group|'s. Such a trigger is served only by a snapshot of
   * "all" under way; queued, the queue keeps their specs (coll_t's
   * queued_hosts), and a second host list folded into it adds its own. */
  coll_host_t *const *hosts;
  size_t n_hosts;
} coll_trigger_req_t;

/* Called once the snapshot is in the store (or could not be): |id| 0
 * when it never began. */
typedef void (*coll_snap_done_fn)(coll_t *c, coll_snap_t *s, void *ctx);

/* Begins a snapshot of |r|'s group: the row, then a clone of every host
 * (each requested before this returns, but those dialing a connection
 * first). Returns 0 (and *id), or a negative error with nothing begun
 * (-EBUSY: COLL_RUNNING_MAX under way). |done| may run before it returns
 * (no host to ask). */
int coll_snap_begin(coll_t *c, const coll_trigger_req_t *r,
                    coll_snap_done_fn done, void *ctx, coll_snap_t **out,
                    uint64_t *id);
uint64_t coll_snap_id(const coll_snap_t *s);
/* The outcome once done: 0 and the stored state, or the store's error. */
int coll_snap_result(const coll_snap_t *s, tg_coll_state_t *state);
/* Stops waiting for hosts (collector stopping): the snapshot is finished
 * with what came. */
void coll_snap_cut(coll_snap_t *s);
/* What the trigger policy sees of |s| for a trigger from |from| (NULL:
 * not a host's). The view borrows |s|'s group. */
void coll_snap_view(const coll_snap_t *s, const coll_host_t *from,
                    tg_trigger_snap_view_t *v);
/* Whether snapshot |id| is under way. */
bool coll_snap_under_way(const coll_t *c, uint64_t id);

#endif /* TRACEGATE_COLLECTOR_DAEMON_SNAP_H */
