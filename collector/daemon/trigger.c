/* Where snapshots come from (coll.h): operators (HTTP, `tracegate
 * snapshot --collector`), hosts' CLONE_SNAPSHOT triggers (ObserveEvents
 * on each ring's holder connection: clone_trigger_hit), and the schedule.
 *
 * The shell of trigger_policy.h: it shows the policy the snapshots under
 * way, the queued one and the trigger's budgets, then does what the
 * policy decided. Storms: a trigger the snapshots under way or the queued
 * one serve costs a counter; one that costs a snapshot is paid from its
 * origin's budget, so a host firing thousands of triggers spends its own
 * budget and never an operator's or another host's.
 *
 * The queued snapshot of a host list keeps its hosts' specs (coll.h), not
 * their coll_host_t: a reload may free a host while it waits, and a spec
 * is looked up again when it begins.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/retain.h"
#include "collector/daemon/trigger.h"
#include "common/log.h"
#include "common/printable.h"
#include "tracegate/error.h"

#define RETENTION_PERIOD_MS 60000

static void start_queued(coll_t *c, coll_snap_t *ended, void *ctx);

static tg_trigger_origin_t origin_of(const coll_trigger_req_t *r) {
  if (r->from) return TG_TRIGGER_FROM_HOST;
  if (r->alertmanager) return TG_TRIGGER_FROM_ALERTMANAGER;
  return strcmp(r->trigger, "schedule") ? TG_TRIGGER_FROM_OPERATOR
                                        : TG_TRIGGER_FROM_SCHEDULE;
}

static tg_trigger_budget_t *own_budget(coll_t *c, const coll_trigger_req_t *r) {
  if (r->from) return &r->from->budget;
  return &c->budgets[tg_trigger_budget_of(origin_of(r))];
}

/* The snapshot is paid for from the trigger's budgets. */
static void charge(coll_t *c, const coll_trigger_req_t *r) {
  int64_t now = coll_loop_ms(c);
  tg_trigger_charge(own_budget(c, r), now);
  if (r->from) tg_trigger_charge(&c->budgets[TG_TRIGGER_BUDGET_HOSTS], now);
}

static int begin(coll_t *c, const coll_trigger_req_t *r, uint64_t *id) {
  coll_snap_t *s;
  return coll_snap_begin(c, r, start_queued, NULL, &s, id);
}

/* --- the queued snapshot's host list -------------------------------------- */

/* The queued spec after |p| (NULL: the first), or NULL past the last. */
static const char *queued_next(const coll_t *c, const char *p) {
  if (!c->n_queued_hosts) return NULL;
  const char *first = (const char *)tg_buf_begin(&c->queued_hosts);
  const char *end = first + tg_buf_size(&c->queued_hosts);
  const char *next = p ? p + strlen(p) + 1 : first;
  return next < end ? next : NULL;
}

static coll_host_t *host_of(const coll_t *c, const char *spec) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->hosts[i]->t.spec, spec)) return c->hosts[i];
  return NULL;
}

/* Empty, its memory freed; bounded by its count (join_hosts), not by the
 * buffer's cap. */
static void queued_hosts_clear(coll_t *c) {
  tg_buf_free(&c->queued_hosts);
  tg_buf_init(&c->queued_hosts, 0);
  c->n_queued_hosts = 0;
}

/* Keeps the queued specs that are in the inventory (their hosts into
 * |found|, when not NULL, in the list's order); those a reload removed
 * are dropped, and said. Returns how many are kept. */
static size_t keep_present(coll_t *c, coll_host_t **found) {
  if (!c->n_queued_hosts) return 0;
  char trig[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(trig, sizeof(trig), c->queued_trigger);
  char *base = (char *)tg_buf_begin(&c->queued_hosts);
  size_t size = tg_buf_size(&c->queued_hosts), kept = 0, bytes = 0;
  for (size_t at = 0; at < size;) {
    char *spec = base + at;
    size_t len = strlen(spec) + 1;
    at += len; /* before the move below, which may overwrite |spec| */
    coll_host_t *h = host_of(c, spec);
    if (!h) {
      TG_WARN("queued snapshot (%s): host %s left the inventory while it "
              "waited: dropped from it", trig, spec);
      continue;
    }
    if (found) found[kept] = h;
    memmove(base + bytes, spec, len); /* bytes <= spec's offset */
    bytes += len;
    kept++;
  }
  c->queued_hosts.len = c->queued_hosts.off + bytes;
  c->n_queued_hosts = kept;
  return kept;
}

/* |r|'s hosts join the queued list, each once. The list holds at most
 * one spec per inventory host: at that size, a new one means some spec
 * left the inventory, and those are dropped first. */
static int join_hosts(coll_t *c, const coll_trigger_req_t *r) {
  for (size_t i = 0; i < r->n_hosts; i++) {
    const char *spec = r->hosts[i]->t.spec;
    bool has = false;
    for (const char *p = queued_next(c, NULL); p && !has;
         p = queued_next(c, p))
      has = !strcmp(p, spec);
    if (has) continue;
    if (c->n_queued_hosts >= c->n) keep_present(c, NULL);
    int rv = tg_buf_append(&c->queued_hosts, spec, strlen(spec) + 1);
    if (rv < 0) return rv;
    c->n_queued_hosts++;
  }
  return 0;
}

/* The queued snapshot becomes one of every host. */
static void widen(coll_t *c) {
  queued_hosts_clear(c);
  snprintf(c->queued_group, sizeof(c->queued_group), "%s",
           TG_COLL_CONFIG_GROUP_ALL);
}

/* |r|'s hosts join the queued snapshot's; out of memory, it takes every
 * host, which still holds them. */
static void join_or_widen(coll_t *c, const coll_trigger_req_t *r) {
  int rv = join_hosts(c, r);
  if (rv == 0) return;
  char trig[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(trig, sizeof(trig), c->queued_trigger);
  TG_WARN("queued snapshot (%s): its host list cannot grow (%s): it takes "
          "every host", trig, tg_strerror(rv));
  widen(c);
}

/* The queued host list's hosts (*hosts, the caller's to free; *n), its
 * specs that left the inventory dropped. -ENXIO: none is left. */
static int queued_hosts_take(coll_t *c, coll_host_t ***hosts, size_t *n) {
  *hosts = calloc(c->n_queued_hosts, sizeof(**hosts));
  if (!*hosts) return -ENOMEM;
  *n = keep_present(c, *hosts);
  if (*n) return 0;
  free(*hosts);
  *hosts = NULL;
  return -ENXIO;
}

/* Whether each of |r|'s hosts is in |group|. */
static bool all_in_group(const coll_t *c, const coll_trigger_req_t *r,
                         const char *group) {
  for (size_t i = 0; i < r->n_hosts; i++)
    if (!coll_host_in_group(c, r->hosts[i], group)) return false;
  return true;
}

/* --- the queued snapshot ---------------------------------------------------- */

/* A snapshot ended: the queued one, if any, begins (it was paid for when
 * it was queued). */
static void start_queued(coll_t *c, coll_snap_t *ended, void *ctx) {
  (void)ended;
  (void)ctx;
  if (!c->queued || c->stopping) return;
  c->queued = false;
  coll_trigger_req_t r = {.trigger = c->queued_trigger,
                          .reason = c->queued_reason,
                          .origin = c->queued_origin,
                          .group = c->queued_group,
                          .producer_name = c->queued_producer,
                          .producer_uid = c->queued_producer_uid};
  char trig[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(trig, sizeof(trig), c->queued_trigger);
  coll_host_t **hosts = NULL;
  uint64_t id;
  int rv = 0;
  if (c->n_queued_hosts) {
    rv = queued_hosts_take(c, &hosts, &r.n_hosts);
    r.hosts = hosts;
    queued_hosts_clear(c);
    if (rv < 0) {
      c->counts.snapshot_errors++;
      TG_ERROR("queued snapshot (%s): %s", trig,
               rv == -ENXIO ? "none of its hosts is in the inventory any "
                              "more: not begun"
                            : tg_strerror(rv));
    }
  }
  if (rv == 0) {
    rv = begin(c, &r, &id);
    if (rv < 0) TG_ERROR("queued snapshot (%s): %s", trig, tg_strerror(rv));
  }
  free(hosts);
  if (rv < 0)
    c->on.queued_failed(c, rv);
  else
    c->on.queued_begun(c, id);
}

static void queue(coll_t *c, const coll_trigger_req_t *r) {
  c->queued = true;
  snprintf(c->queued_trigger, sizeof(c->queued_trigger), "%s", r->trigger);
  snprintf(c->queued_reason, sizeof(c->queued_reason), "%s",
           r->reason ? r->reason : "");
  snprintf(c->queued_origin, sizeof(c->queued_origin), "%s",
           r->origin ? r->origin : "");
  snprintf(c->queued_group, sizeof(c->queued_group), "%s",
           r->n_hosts ? "" : r->group);
  snprintf(c->queued_producer, sizeof(c->queued_producer), "%s",
           r->producer_name ? r->producer_name : "");
  c->queued_producer_uid = r->producer_uid;
  queued_hosts_clear(c);
  if (r->n_hosts) join_or_widen(c, r);
}

/* A storm costs a counter per trigger, not a log line: refusals are said
 * at the 1st, 2nd, 4th, 8th... of each budget in the collector's life. */
static void refused(coll_t *c, const coll_trigger_req_t *r,
                    tg_trigger_budget_id_t b) {
  uint64_t k = ++c->counts.triggers_capped[b];
  if ((k & (k - 1)) != 0) return;
  char safe[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(safe, sizeof(safe), r->trigger);
  TG_WARN("trigger '%s'%s%s: over the %s budget, not snapshotted (%" PRIu64
          " refused by it so far)", safe, r->from ? " of " : "",
          r->from ? r->from->t.spec : "", tg_trigger_budget_name(b), k);
}

int coll_trigger(coll_t *c, const coll_trigger_req_t *r, uint64_t *id) {
  *id = 0;
  c->counts.trigger_hits++;
  if (c->stopping) return -ESHUTDOWN;
  tg_trigger_snap_view_t views[COLL_RUNNING_MAX];
  for (size_t i = 0; i < c->n_running; i++)
    coll_snap_view(c->running[i], r->from, &views[i]);
  tg_trigger_state_t st = {
      .running = views,
      .n_running = c->n_running,
      .running_max = COLL_RUNNING_MAX,
      .queued = c->queued,
      .queued_host_list = c->n_queued_hosts > 0,
      .queued_group = c->queued_group,
      .coalesce_window_ms = c->cfg.coalesce_window_ms,
      .own = own_budget(c, r),
      .hosts = r->from ? &c->budgets[TG_TRIGGER_BUDGET_HOSTS] : NULL,
  };
  bool list = r->n_hosts > 0;
  tg_trigger_t t = {
      .from = origin_of(r),
      .group = list ? "" : r->group,
      .host_list = list,
      .in_queued_group = list && c->queued && !c->n_queued_hosts &&
                         all_in_group(c, r, c->queued_group),
  };
  tg_trigger_decision_t d = tg_trigger_decide(&st, &t, coll_loop_ms(c));
  switch (d.verdict) {
    case TG_TRIGGER_SERVE:
      c->counts.triggers_coalesced++;
      *id = coll_snap_id(c->running[d.snap]);
      return 0;
    case TG_TRIGGER_FOLD:
      c->counts.triggers_coalesced++;
      if (d.widen) widen(c);
      if (d.join) join_or_widen(c, r);
      return 0;
    case TG_TRIGGER_REFUSE:
      refused(c, r, d.budget);
      return -EAGAIN;
    case TG_TRIGGER_QUEUE:
      charge(c, r);
      queue(c, r);
      return 0;
    case TG_TRIGGER_BEGIN:
      break;
  }
  charge(c, r);
  return begin(c, r, id);
}

/* --- hosts' triggers ------------------------------------------------------ */

static void on_events(tg_consumer_t *cons, void *ctx, int status,
                      const char *msg, bool has_more,
                      const Perfetto__Protos__ObservableEvents *ev) {
  (void)msg;
  (void)has_more;
  coll_host_t *h = ctx;
  if (status || !ev || !ev->clone_trigger_hit || !h->fh ||
      tg_fleet_host_consumer(h->fh) != cons)
    return;
  const Perfetto__Protos__ObservableEvents__CloneTriggerHit *hit =
      ev->clone_trigger_hit;
  const char *name = hit->trigger_name ? hit->trigger_name : "";
  coll_t *c = h->c;
  const tg_coll_trigger_t *t = NULL;
  for (size_t i = 0; i < c->cfg.n_triggers && !t; i++)
    if (!strcmp(c->cfg.triggers[i].name, name)) t = &c->cfg.triggers[i];
  char safe[TG_COLL_TRIGGER_MAX + 1];
  tg_printable(safe, sizeof(safe), name);
  if (!t) {
    /* The ring's config names only the config's triggers: the service
     * or a relay sent something else. */
    TG_WARN("host %s: clone_trigger_hit for '%s', not a trigger "
           "of the config: ignored", h->t.spec, safe);
    return;
  }
  char reason[TG_COLL_REASON_MAX + 1];
  char prod[96];
  tg_printable(prod, sizeof(prod), hit->producer_name ? hit->producer_name : "");
  snprintf(reason, sizeof(reason), "trigger '%s' on %s%s%s", safe, h->t.spec,
           prod[0] ? " by " : "", prod);
  coll_trigger_req_t r = {.trigger = name,
                          .reason = reason,
                          .origin = h->t.spec,
                          .from = h,
                          .group = t->group,
                          .producer_name = hit->producer_name,
                          .producer_uid = hit->has_producer_uid ? hit->producer_uid : 0};
  uint64_t id;
  int rv = coll_trigger(c, &r, &id);
  if (rv < 0 && rv != -EAGAIN)
    TG_WARN("host %s: trigger '%s': %s", h->t.spec, safe, tg_strerror(rv));
  else if (rv == 0)
    TG_DEBUG("host %s: trigger '%s' -> snapshot %016" PRIx64, h->t.spec,
             safe, id);
}

void coll_watch_host(coll_t *c, coll_host_t *h) {
  if (!c->cfg.n_triggers || !h->fh || !tg_fleet_host_consumer(h->fh)) return;
  Perfetto__Protos__ObservableEvents__Type t =
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT;
  int rv = tg_consumer_observe_events(tg_fleet_host_consumer(h->fh), &t, 1,
                                      on_events, h);
  if (rv < 0)
    TG_WARN("host %s: cannot watch its triggers: %s", h->t.spec,
           tg_strerror(rv));
}

/* --- the schedule and retention -------------------------------------------- */

static void on_schedule(uv_timer_t *t) {
  coll_t *c = t->data;
  coll_trigger_req_t r = {.trigger = "schedule",
                          .reason = "snapshot_every",
                          .origin = "",
                          .group = "all"};
  uint64_t id;
  int rv = coll_trigger(c, &r, &id);
  if (rv < 0 && rv != -EAGAIN) /* refusals are counted and said there */
    TG_WARN("scheduled snapshot: %s", tg_strerror(rv));
}

static void on_retention(uv_timer_t *t) { coll_retain(t->data); }

void coll_trigger_budgets(coll_t *c) {
  c->budgets[TG_TRIGGER_BUDGET_HOSTS].limit = c->cfg.max_snapshots_per_minute;
  c->budgets[TG_TRIGGER_BUDGET_OPERATOR].limit =
      c->cfg.operator_snapshots_per_minute;
  c->budgets[TG_TRIGGER_BUDGET_SCHEDULE].limit =
      c->cfg.schedule_snapshots_per_minute;
  c->budgets[TG_TRIGGER_BUDGET_ALERTMANAGER].limit =
      c->cfg.am_snapshots_per_minute;
}

void coll_trigger_start(coll_t *c) {
  coll_trigger_budgets(c);
  uv_timer_init(c->loop, &c->schedule);
  uv_timer_init(c->loop, &c->retention);
  c->schedule.data = c->retention.data = c;
  if (c->cfg.snapshot_every_ms)
    uv_timer_start(&c->schedule, on_schedule,
                   (uint64_t)c->cfg.snapshot_every_ms,
                   (uint64_t)c->cfg.snapshot_every_ms);
  uv_timer_start(&c->retention, on_retention, RETENTION_PERIOD_MS,
                 RETENTION_PERIOD_MS);
  coll_retain(c);
}

void coll_trigger_stop(coll_t *c) {
  uv_close((uv_handle_t *)&c->schedule, NULL);
  uv_close((uv_handle_t *)&c->retention, NULL);
}
