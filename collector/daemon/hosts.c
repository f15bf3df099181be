/* The collector's hosts (coll.h): the inventory of its shard, each host's
 * ring holder, and changes to the inventory while running.
 *
 * Every host is a fleet host (consumer/fleet/host.h) in hold mode: on its
 * first connection it attaches to its ring (detached under its key) or
 * enables the flight config named with that key when there is none (a
 * first start), and then only keeps the link: heartbeats, clock
 * estimates, loss counters, re-attaching after a lost link. Its trace is
 * never read here; snapshots clone it (snap.c).
 *
 * A holder that fails (a refusal, a reconnection deadline passed, its
 * ring ended) is made again after RESTART_MS: an always-on service has no
 * "done". The old holder's memory is kept until the next restart of the
 * same host, which comes a whole timer period later, when its closed
 * handles are long gone (libuv runs close callbacks within the iteration
 * that follows uv_close).
 *
 * The inventory is read again on SIGHUP and when its file changes (its
 * directory is watched: editors and config tools replace files by
 * renaming). Hosts that stay are not touched; new ones start in a fleet
 * of their own (a generation: the fleet library admits the hosts it was
 * made with); removed ones have their ring ended (FreeBuffers) and are
 * freed once their holder finished and no snapshot holds them. A file
 * that does not parse changes nothing (logged).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/standby.h"
#include "collector/config/shard.h"
#include "common/fnv1a.h"
#include "common/log.h"
#include "common/notice.h"
#include "consumer/fleet/merge.h"
#include "pb/config/trace_config.pb-c.h"
#include "tracegate/error.h"

#define RESTART_MS 5000
#define HOLD_HEARTBEAT_MS 2500
#define HOLD_STATS_MS 10000
#define MAX_INVENTORY 100000
/* A message about the inventory: its path, a line number and why. */
#define INVENTORY_ERR_MAX 1536
/* Edits come in bursts (write, rename, chmod): read once it settles. */
#define RELOAD_SETTLE_MS 300

static coll_host_t *of(tg_fleet_host_t *fh) { return fh->data; }
static void host_try_free(coll_host_t *h);

const char *coll_host_state_name(coll_host_state_t st) {
  switch (st) {
    case COLL_HOST_CONNECTING: return "connecting";
    case COLL_HOST_PREPARING: return "preparing";
    case COLL_HOST_IDLE: return "idle";
    case COLL_HOST_STARTING: return "starting";
    case COLL_HOST_TRACING: return "tracing";
    case COLL_HOST_STOPPING: return "stopping";
    case COLL_HOST_DRAINING: return "reading the end";
    case COLL_HOST_STATS: return "statistics";
    case COLL_HOST_DETACHED: return "detached";
    case COLL_HOST_RECONNECTING: return "reconnecting";
    case COLL_HOST_CLOSING: return "closing";
    case COLL_HOST_DONE: return "done";
    case COLL_HOST_FAILED: return "failed";
    case COLL_HOST_STATE_COUNT: break;
  }
  return "?";
}

/* A recording's state, once its link is up. */
static coll_host_state_t rec_state(tg_rec_state_t rec) {
  switch (rec) {
    case TG_REC_IDLE: return COLL_HOST_IDLE;
    case TG_REC_ATTACHING:
    case TG_REC_STARTING: return COLL_HOST_STARTING;
    case TG_REC_TRACING: return COLL_HOST_TRACING;
    case TG_REC_STOPPING: return COLL_HOST_STOPPING;
    case TG_REC_DRAINING: return COLL_HOST_DRAINING;
    case TG_REC_STATS: return COLL_HOST_STATS;
    case TG_REC_FREEING: return COLL_HOST_CLOSING;
    case TG_REC_FAILING: return COLL_HOST_FAILED;
    case TG_REC_DONE: return COLL_HOST_DONE;
    case TG_REC_DETACHED: return COLL_HOST_DETACHED;
    case TG_REC_FAILED: return COLL_HOST_FAILED;
  }
  return COLL_HOST_FAILED;
}

coll_host_state_t coll_host_state_of(tg_link_state_t link, bool has_rec,
                                     tg_rec_state_t rec) {
  switch (link) {
    case TG_LINK_CONNECTING: return COLL_HOST_CONNECTING;
    case TG_LINK_PREPARING: return COLL_HOST_PREPARING;
    /* Without a recording the link itself is the ring's holder. */
    case TG_LINK_UP: return has_rec ? rec_state(rec) : COLL_HOST_TRACING;
    case TG_LINK_DROPPING:
    case TG_LINK_BACKOFF:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING: return COLL_HOST_RECONNECTING;
    case TG_LINK_CLOSING: return COLL_HOST_CLOSING;
    case TG_LINK_FAILING:
    case TG_LINK_FAILED: return COLL_HOST_FAILED;
    case TG_LINK_DONE: return COLL_HOST_DONE;
  }
  return COLL_HOST_FAILED;
}

/* The only writer of h->state; |since_ms| moves only on a change. */
static void set_state(coll_host_t *h, coll_host_state_t st, const char *why) {
  if (h->state != st) h->since_ms = coll_wall_ms(h->c);
  h->state = st;
  snprintf(h->why, sizeof(h->why), "%s", why ? why : "");
}

/* --- the holders' events ------------------------------------------------ */

static void on_notice(tg_fleet_host_t *fh, tg_fleet_notice_t kind,
                      const char *text) {
  tg_log_level_t lv = kind == TG_FLEET_WARNING ? TG_LOG_WARN : TG_LOG_INFO;
  TG_LOG(lv, "host %s: %s", of(fh)->t.spec, text);
}

static void on_state(tg_fleet_host_t *fh, tg_link_state_t from) {
  coll_host_t *h = of(fh);
  if (fh != h->fh) return;
  const tg_recording_t *rec = tg_fleet_host_recording(fh);
  coll_host_state_t st = coll_host_state_of(
      fh->report.link_state, rec != NULL,
      rec ? tg_recording_state(rec) : TG_REC_IDLE);
  switch (fh->report.link_state) {
    case TG_LINK_UP:
      set_state(h, st, "");
      /* Re-attached on a new connection: its triggers come there now. */
      if (h->ring_up && from != TG_LINK_PREPARING) {
        h->c->on.host_tracing(h->c, h);
        coll_standby_want(h);
      }
      break;
    case TG_LINK_DROPPING:
    case TG_LINK_BACKOFF:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING:
      /* The state's "since" is the first loss, not each attempt. */
      if (h->state != COLL_HOST_RECONNECTING)
        set_state(h, st, fh->report.lost_why[0] ? fh->report.lost_why
                                                : fh->report.conn_why);
      else if (fh->report.retry_why[0])
        snprintf(h->why, sizeof(h->why), "%s", fh->report.retry_why);
      break;
    case TG_LINK_FAILING:
    case TG_LINK_FAILED: set_state(h, st, fh->report.why); break;
    default: set_state(h, st, ""); break;
  }
}

static void on_key_ready(tg_fleet_host_t *fh) { (void)fh; }

/* The data sources the host's service registered, asked each time the
 * holder connects, before its ring is enabled or attached again: those of
 * the flight config none offers do not run there. */
static void on_service_state(tg_fleet_host_t *fh,
                             const Perfetto__Protos__TracingServiceState *st) {
  coll_host_t *h = of(fh);
  tg_ds_problems_t ps = {0};
  tg_ds_problems_not_offered(&ps, h->c->flight, st);
  char line[TG_DS_WHY_MAX + TG_DS_NAME_MAX + 32];
  for (size_t i = 0; i < ps.n; i++)
    TG_WARN("host %s: %s", h->t.spec,
            tg_ds_problem_line(&ps.items[i], line, sizeof(line)));
  coll_host_set_problems(h, &h->not_offered, &ps);
}

void coll_host_set_problems(coll_host_t *h, tg_ds_problems_t **slot,
                            const tg_ds_problems_t *ps) {
  if (!ps || (!ps->n && !ps->omitted)) {
    free(*slot);
    *slot = NULL;
    return;
  }
  if (!*slot && !(*slot = malloc(sizeof(**slot)))) {
    TG_WARN("host %s: out of memory: its data source problems are not "
            "kept for /api/v1/hosts", h->t.spec);
    return;
  }
  **slot = *ps;
}

static void on_tracing(tg_fleet_host_t *fh) {
  coll_host_t *h = of(fh);
  h->ring_up = true;
  set_state(h, COLL_HOST_TRACING, "");
  TG_INFO("host %s: ring session under '%s' is tracing",
         h->t.spec, h->c->cfg.session_key);
  if (h->failures)
    TG_INFO("host %s: tracing again after %" PRIu64 " failures", h->t.spec,
            h->failures);
  h->failures = 0;
  h->warned[0] = '\0';
  h->c->on.host_tracing(h->c, h);
  coll_standby_want(h);
}

static int on_described(tg_fleet_host_t *fh) {
  (void)fh;
  return 0;
}

static int on_clock_estimate(tg_fleet_host_t *fh) {
  (void)fh;
  return 0;
}

static int on_packet(tg_fleet_host_t *fh, const uint8_t *p, size_t n) {
  (void)p;
  (void)n;
  /* Hold mode never reads: a packet here is a bug, not data to lose. */
  TG_ERROR("host %s: a packet read from a held ring",
         of(fh)->t.spec);
  return -EPROTO;
}

static void on_stats(tg_fleet_host_t *fh, const Perfetto__Protos__TraceStats *st,
                     const tg_rec_replay_stats_t *rs) {
  (void)fh;
  (void)st;
  (void)rs;
}

static void on_restart(uv_timer_t *t);

static void on_finished(tg_fleet_host_t *fh) {
  coll_host_t *h = of(fh);
  if (fh != h->fh) return;
  h->ring_up = false;
  h->finished = true;
  set_state(h, COLL_HOST_FAILED, fh->report.why);
  if (h->removed) {
    host_try_free(h);
    return;
  }
  if (h->c->stopping) return;
  h->failures++;
  /* A host that cannot be reached fails at every restart: said once, and
   * again only when the reason changes; /api/v1/hosts counts them all. */
  if (strcmp(h->warned, fh->report.why) != 0) {
    TG_WARN("%s host %s: %s; starting again every %d s (failure %" PRIu64
            "; said again when the reason changes)",
            TG_NOTE(COLLECTOR_HOST_FAILING), h->t.spec, fh->report.why,
            RESTART_MS / 1000, h->failures);
    snprintf(h->warned, sizeof(h->warned), "%s", fh->report.why);
  } else {
    TG_DEBUG("host %s: %s; starting again in %d s (failure %" PRIu64 ")",
             h->t.spec, fh->report.why, RESTART_MS / 1000, h->failures);
  }
  uv_timer_start(&h->restart, on_restart, RESTART_MS, 0);
}

static const tg_fleet_host_cbs_t host_cbs = {
    .on_notice = on_notice,
    .on_state = on_state,
    .on_key_ready = on_key_ready,
    .on_service_state = on_service_state,
    .on_tracing = on_tracing,
    .on_described = on_described,
    .on_clock_estimate = on_clock_estimate,
    .on_packet = on_packet,
    .on_stats = on_stats,
    .on_finished = on_finished,
};

/* |h|'s key and its copy of the flight config, named with it. */
static int host_ring(coll_t *c, coll_host_t *h) {
  uint64_t k = tg_fnv1a(TG_FNV1A_SEED, h->t.spec, strlen(h->t.spec));
  snprintf(h->key, sizeof(h->key), "%s-%016" PRIx64, c->cfg.session_key, k);
  char *old = c->flight->unique_session_name;
  c->flight->unique_session_name = h->key;
  h->config_len = perfetto__protos__trace_config__get_packed_size(c->flight);
  h->config = malloc(h->config_len);
  if (h->config) perfetto__protos__trace_config__pack(c->flight, h->config);
  c->flight->unique_session_name = old;
  return h->config ? 0 : -ENOMEM;
}

static int holder_new(coll_host_t *h) {
  tg_fleet_host_t *fh = calloc(1, sizeof(*fh));
  if (!fh) {
    /* The fleet must not keep admitting the closed one. */
    tg_fleet_t *f = &h->gen->fleet;
    if (f->hosts && h->index < f->n) f->hosts[h->index] = NULL;
    return -ENOMEM;
  }
  int rv = tg_fleet_host_init(&h->gen->fleet, fh, h->index, h->t.spec, &h->t, h);
  h->fh = fh;
  /* Asked again by the new holder, seen again by the next snapshot. */
  coll_host_set_problems(h, &h->not_offered, NULL);
  coll_host_set_problems(h, &h->seen, NULL);
  /* Attach mode: the host attaches by this key, else enables this. */
  snprintf(fh->key, sizeof(fh->key), "%s", h->key);
  fh->config = h->config;
  fh->config_len = h->config_len;
  return rv;
}

static void on_restart(uv_timer_t *t) {
  coll_host_t *h = t->data;
  if (h->c->stopping || h->removed) return;
  /* A snapshot may still read the failed holder's clock estimate and
   * host info (snap.c keeps it): its memory stays until the snapshot
   * lets go. */
  if (h->busy) {
    uv_timer_start(&h->restart, on_restart, 1000, 0);
    return;
  }
  if (h->fh) { /* NULL: the last restart ran out of memory */
    free(h->old); /* closed a whole period ago (see the top) */
    tg_fleet_host_close(h->fh);
    h->old = h->fh;
    h->fh = NULL;
  }
  h->restarts++;
  if ((!h->config && host_ring(h->c, h) < 0) || holder_new(h) < 0) {
    set_state(h, COLL_HOST_FAILED, "out of memory");
    uv_timer_start(&h->restart, on_restart, RESTART_MS, 0);
    return;
  }
  h->finished = false;
  set_state(h, COLL_HOST_CONNECTING, "");
  tg_fleet_host_start(h->fh);
}

bool coll_host_in_group(const coll_t *c, const coll_host_t *h,
                        const char *group) {
  return tg_coll_config_group_has(&c->cfg, group, h->t.spec);
}

/* --- hosts coming and going ------------------------------------------------ */

/* One of the host's handles is closed; the last one frees it. */
static void host_handle_closed(coll_host_t *h) {
  if (--h->closing) return;
  free(h->fh);
  free(h->old);
  free(h->config);
  free(h->not_offered);
  free(h->seen);
  free(h);
}

static void host_closed(uv_handle_t *t) { host_handle_closed(t->data); }

static void holder_closed(tg_fleet_host_t *fh) { host_handle_closed(fh->data); }

/* A removed host goes once its holder finished and no snapshot holds it.
 * Its fleet forgets it first: the fleet's admission may look at its
 * slot again. */
static void host_try_free(coll_host_t *h) {
  if (!h->removed || !h->finished || h->busy || h->freeing ||
      !coll_standby_idle(h))
    return;
  h->freeing = true;
  tg_list_remove(&h->gone);
  tg_fleet_t *f = &h->gen->fleet;
  if (f->hosts && h->index < f->n && f->hosts[h->index] == h->fh)
    f->hosts[h->index] = NULL;
  /* Freed once every handle is closed, the holder's timer included. */
  h->closing = h->fh ? 3 : 2;
  if (h->fh) tg_fleet_host_close_cb(h->fh, holder_closed);
  uv_close((uv_handle_t *)&h->restart, host_closed);
  uv_close((uv_handle_t *)&h->sb.retry, host_closed);
}

void coll_host_check_free(coll_host_t *h) { host_try_free(h); }

void coll_host_release(coll_host_t *h) {
  if (h->busy) h->busy--;
  host_try_free(h);
}

static void host_remove(coll_t *c, coll_host_t *h) {
  TG_INFO("host %s: out of the inventory: its ring ends", h->t.spec);
  h->removed = true;
  uv_timer_stop(&h->restart);
  coll_standby_close(h);
  tg_list_insert_tail(&c->gone, &h->gone);
  if (h->fh && !h->finished) tg_fleet_host_abort(h->fh); /* on_finished */
  else h->finished = true;
  host_try_free(h);
}

static bool same_target(const tg_target_t *a, const tg_target_t *b) {
  return !strcmp(a->spec, b->spec) && !strcmp(a->server_name, b->server_name);
}

/* The inventory's hosts of this shard, named (tg_targets_name); why not
 * in |err|. */
static int read_inventory(coll_t *c, tg_target_t **out, size_t *n_out,
                          size_t *inventory, char *err, size_t errn) {
  tg_target_t *all = NULL;
  size_t n = 0;
  int rv = tg_targets_load(c->cfg.hosts, &all, &n, MAX_INVENTORY, err, errn);
  if (rv == 0) rv = tg_targets_name(all, n, err, errn);
  if (rv < 0) {
    free(all);
    return rv;
  }
  *inventory = n;
  tg_coll_shard_t sh = {.index = c->cfg.shard_index,
                        .count = c->cfg.shard_count};
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (tg_coll_shard_owns(&sh, all[i].spec, strlen(all[i].spec)))
      all[k++] = all[i];
  /* Group members the inventory does not have: a typo, said once. */
  for (size_t g = 0; g < c->cfg.n_groups; g++)
    for (size_t j = 0; j < c->cfg.groups[g].n_hosts; j++) {
      const char *hs = c->cfg.groups[g].hosts[j];
      size_t i = 0;
      while (i < k && strcmp(all[i].spec, hs) != 0) i++;
      if (i == k && c->cfg.shard_count == 1)
        TG_WARN("group %s: host %s is not in the inventory %s",
                c->cfg.groups[g].name, hs, c->cfg.hosts);
    }
  *out = all;
  *n_out = k;
  return 0;
}

/* New hosts |t| (|n| of them) in a generation of their own, started
 * through its admission. */
static int add_hosts(coll_t *c, const tg_target_t *t, size_t n) {
  if (!n) return 0;
  if (c->n + n > c->cap) {
    size_t cap = c->cap ? c->cap : 16;
    while (cap < c->n + n) cap *= 2;
    coll_host_t **grown = realloc(c->hosts, cap * sizeof(*grown));
    if (!grown) return -ENOMEM;
    c->hosts = grown;
    c->cap = cap;
  }
  coll_gen_t *g = calloc(1, sizeof(*g));
  if (!g) return -ENOMEM;
  g->fleet = (tg_fleet_t){
      .loop = c->loop,
      /* Every host has its own config and key (host_ring): the fleet's
       * attach key only puts its hosts in attach mode. */
      .o = {.attach_key = c->cfg.session_key,
            .enable_if_absent = true,
            .hold = true,
            .compress_level = (int)c->cfg.compress_level,
            .reconnect_ms = (uint64_t)c->cfg.reconnect_ms,
            .dead_link_ms = (uint64_t)c->cfg.dead_link_ms,
            .clock_sync_ms = 60000,
            /* Idle links: a beat every 2.5 s (under the relay's 10 s
             * dead-link timeout by default), loss counters every 10 s. */
            .heartbeat_max_ms = HOLD_HEARTBEAT_MS,
            .stats_period_ms = HOLD_STATS_MS,
            /* Its data sources no producer offers (on_service_state), at
             * every connection: a reconnection may find them offered. */
            .check_names = true,
            .check_names_always = true},
      .dialer = c->dialer,
      .cbs = &host_cbs,
      .n = n,
  };
  if (tg_fleet_init(&g->fleet) < 0) {
    free(g);
    return -ENOMEM;
  }
  g->next = c->gens;
  c->gens = g;
  int rv = 0;
  for (size_t i = 0; i < n; i++) {
    coll_host_t *h = calloc(1, sizeof(*h));
    if (!h) {
      rv = -ENOMEM;
      break;
    }
    h->c = c;
    h->gen = g;
    h->index = i;
    h->t = t[i];
    tg_list_init(&h->gone);
    uv_timer_init(c->loop, &h->restart);
    h->restart.data = h;
    coll_standby_init(h);
    h->budget.limit = c->cfg.host_snapshots_per_minute;
    set_state(h, COLL_HOST_CONNECTING, "");
    c->hosts[c->n++] = h;
    if (host_ring(c, h) < 0 || holder_new(h) < 0) {
      /* Out of memory: this host tries again later, the others start. */
      set_state(h, COLL_HOST_FAILED, "out of memory");
      h->finished = true;
      uv_timer_start(&h->restart, on_restart, RESTART_MS, 0);
      rv = -ENOMEM;
    }
  }
  tg_fleet_start(&g->fleet);
  return rv;
}

int coll_hosts_start(coll_t *c) {
  tg_list_init(&c->gone);
  tg_target_t *t;
  size_t n;
  char err[INVENTORY_ERR_MAX];
  if (read_inventory(c, &t, &n, &c->inventory, err, sizeof(err)) < 0) {
    fprintf(stderr, COLL_PROG ": %s\n", err);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (t[i].kind == TG_TARGET_TLS && !c->tls) {
      fprintf(stderr, COLL_PROG ": %s: a TLS host needs ca, cert and key in "
              "the config\n", t[i].spec);
      free(t);
      return -1;
    }
  if (n > TG_MERGE_MAX_HOSTS) {
    /* A snapshot merges its hosts as machines 1..1024 (merge.h). */
    fprintf(stderr, COLL_PROG ": %s: %zu hosts in shard %u/%u; one collector "
            "snapshots at most %d: share the inventory (shard = i/N)\n",
            c->cfg.hosts, n, c->cfg.shard_index, c->cfg.shard_count,
            TG_MERGE_MAX_HOSTS);
    free(t);
    return -1;
  }
  int rv = c->check_only ? 0 : add_hosts(c, t, n);
  if (c->check_only) c->n = n;
  free(t);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": %s\n", tg_strerror(rv));
    return -1;
  }
  return 0;
}

void coll_hosts_reload(coll_t *c, const char *why) {
  if (c->stopping) return;
  tg_target_t *t;
  size_t n, inventory;
  char err[INVENTORY_ERR_MAX];
  if (read_inventory(c, &t, &n, &inventory, err, sizeof(err)) < 0) {
    TG_WARN("inventory %s (%s): not read again: %s; the hosts stay as they "
            "were", c->cfg.hosts, why, err);
    return;
  }
  /* Keep, or remove (compacting the array). */
  size_t kept = 0, removed = 0;
  bool *seen = calloc(n ? n : 1, sizeof(*seen));
  if (!seen) {
    free(t);
    TG_WARN("inventory %s: out of memory; the hosts stay as they were",
            c->cfg.hosts);
    return;
  }
  for (size_t i = 0; i < c->n; i++) {
    coll_host_t *h = c->hosts[i];
    size_t j = 0;
    while (j < n && (seen[j] || !same_target(&h->t, &t[j]))) j++;
    if (j < n) {
      seen[j] = true;
      /* A host kept may have been given another label= (or lost one). */
      memcpy(h->t.given_label, t[j].given_label, sizeof(h->t.given_label));
      memcpy(h->t.label, t[j].label, sizeof(h->t.label));
      c->hosts[kept++] = h;
    } else {
      host_remove(c, h);
      removed++;
    }
  }
  c->n = kept;
  size_t added = 0;
  for (size_t j = 0; j < n; j++)
    if (!seen[j]) {
      if (t[j].kind == TG_TARGET_TLS && !c->tls) {
        TG_WARN("inventory: %s: a TLS host needs ca, cert and key in the "
                "config: left out", t[j].spec);
        continue;
      }
      t[added++] = t[j];
    }
  free(seen);
  if (kept + added > TG_MERGE_MAX_HOSTS) {
    TG_WARN("inventory %s: %zu hosts would be over the %d one collector "
            "snapshots: %zu new ones left out (shard = i/N shares them)",
            c->cfg.hosts, kept + added, TG_MERGE_MAX_HOSTS,
            kept + added - TG_MERGE_MAX_HOSTS);
    added = kept < TG_MERGE_MAX_HOSTS ? TG_MERGE_MAX_HOSTS - kept : 0;
  }
  int rv = add_hosts(c, t, added);
  free(t);
  c->inventory = inventory;
  if (rv < 0)
    TG_ERROR("inventory %s: %s while adding hosts", c->cfg.hosts,
             tg_strerror(rv));
  TG_INFO("inventory %s (%s): %zu hosts kept, %zu added, %zu removed",
          c->cfg.hosts, why, kept, added, removed);
}

/* --- watching the inventory ------------------------------------------------- */

static void on_settled(uv_timer_t *t) { coll_hosts_reload(t->data, "changed"); }

static void on_fs_event(uv_fs_event_t *e, const char *name, int events,
                        int status) {
  (void)events;
  coll_t *c = e->data;
  if (status < 0 || !name || strcmp(name, c->hosts_base) != 0) return;
  uv_timer_start(&c->reload_timer, on_settled, RELOAD_SETTLE_MS, 0);
}

void coll_hosts_watch(coll_t *c) {
  uv_timer_init(c->loop, &c->reload_timer);
  c->reload_timer.data = c;
  const char *slash = strrchr(c->cfg.hosts, '/');
  char dir[TG_COLL_CONFIG_PATH_MAX + 1];
  if (slash) {
    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - c->cfg.hosts),
             c->cfg.hosts);
    if (!dir[0]) snprintf(dir, sizeof(dir), "/");
  } else {
    snprintf(dir, sizeof(dir), ".");
  }
  snprintf(c->hosts_base, sizeof(c->hosts_base), "%s",
           slash ? slash + 1 : c->cfg.hosts);
  uv_fs_event_init(c->loop, &c->watch);
  c->watch.data = c;
  int rv = uv_fs_event_start(&c->watch, on_fs_event, dir, 0);
  if (rv < 0)
    TG_WARN("inventory %s: cannot watch %s (%s): changes are read on SIGHUP "
            "only", c->cfg.hosts, dir, uv_strerror(rv));
}

void coll_hosts_unwatch(coll_t *c) {
  uv_fs_event_stop(&c->watch);
  uv_timer_stop(&c->reload_timer);
}
