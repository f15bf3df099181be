/* The collector's set-up and its hosts' rings (coll.h).
 *
 * Every host of the shard is a fleet host (consumer/fleet/host.h) in hold
 * mode: on its first connection it attaches to the session detached under
 * the collector's key, or enables the flight-recorder config when there is
 * none (a first start), and then only keeps the link: heartbeats, clock
 * estimates, loss counters, re-attaching after a lost link. Its trace is
 * never read here; snapshots clone it (snap.c).
 *
 * A holder that fails (a refusal, a reconnection deadline passed) is made
 * again after RESTART_MS: an always-on service has no "done". The old
 * holder's memory is kept until the next restart of the same host, which
 * comes a whole timer period later, when its closed handles are long gone
 * (libuv runs close callbacks within the iteration that follows uv_close).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/catalog_pg.h"
#include "collector/daemon/coll.h"
#include "collector/shard.h"
#include "common/fnv1a.h"
#include "common/log.h"
#include "consumer/pbtxt.h"
#include "pb/config/trace_config.pb-c.h"
#include "tracegate/error.h"

#define RESTART_MS 5000
#define FLIGHT_CONFIG_MAX (1u << 20)
#define MAX_INVENTORY 100000
/* The longest trigger_timeout_ms Perfetto's traced accepts (7 days). */
#define RING_TRIGGER_TIMEOUT_MS (7u * 24 * 3600 * 1000)

static coll_host_t *of(tg_fleet_host_t *fh) { return fh->data; }

int64_t coll_now_ms(coll_t *c) {
  if (c->now_ms) return c->now_ms(c->clock_ctx);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_state(coll_host_t *h, const char *state, const char *why) {
  if (strcmp(h->state, state) != 0) h->since_ms = coll_now_ms(h->c);
  snprintf(h->state, sizeof(h->state), "%s", state);
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
  const char *st = tg_fleet_host_state(fh);
  switch (fh->link.state) {
    case TG_LINK_UP:
      set_state(h, tg_fleet_host_tracing(fh) ? "tracing" : st, "");
      /* Re-attached on a new connection: its triggers come there now. */
      if (h->ring_up && from != TG_LINK_PREPARING) coll_watch_host(h->c, h);
      break;
    case TG_LINK_DROPPING:
    case TG_LINK_BACKOFF:
    case TG_LINK_RECONNECTING:
    case TG_LINK_RESUMING:
      /* The state's "since" is the first loss, not each attempt. */
      if (strcmp(h->state, "reconnecting") != 0)
        set_state(h, "reconnecting", fh->lost_why[0] ? fh->lost_why : fh->conn_msg);
      else if (fh->retry_why[0])
        snprintf(h->why, sizeof(h->why), "%s", fh->retry_why);
      break;
    case TG_LINK_FAILING:
    case TG_LINK_FAILED: set_state(h, "failed", fh->why); break;
    default: set_state(h, st, ""); break;
  }
}

static void on_key_ready(tg_fleet_host_t *fh) { (void)fh; }

static void on_tracing(tg_fleet_host_t *fh) {
  coll_host_t *h = of(fh);
  h->ring_up = true;
  set_state(h, "tracing", "");
  TG_INFO("host %s: ring session under '%s' is tracing",
         h->t.spec, h->c->cfg.session_key);
  coll_watch_host(h->c, h);
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
  set_state(h, "failed", fh->why);
  if (h->c->stopping) return;
  TG_WARN("host %s: %s; starting again in %d s", h->t.spec,
         fh->why, RESTART_MS / 1000);
  uv_timer_start(&h->restart, on_restart, RESTART_MS, 0);
}

static const tg_fleet_host_cbs_t host_cbs = {
    .on_notice = on_notice,
    .on_state = on_state,
    .on_key_ready = on_key_ready,
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
  if (!fh) return -ENOMEM;
  int rv = tg_fleet_host_init(&h->c->fleet, fh, h->index, h->t.spec, &h->t, h);
  h->fh = fh;
  /* Attach mode: the host attaches by this key, else enables this. */
  snprintf(fh->key, sizeof(fh->key), "%s", h->key);
  fh->config = h->config;
  fh->config_len = h->config_len;
  return rv;
}

static void on_restart(uv_timer_t *t) {
  coll_host_t *h = t->data;
  if (h->c->stopping) return;
  if (h->old) free(h->old); /* closed a whole period ago (see the top) */
  tg_fleet_host_close(h->fh);
  h->old = h->fh;
  h->fh = NULL;
  h->restarts++;
  if (holder_new(h) < 0) {
    set_state(h, "failed", "out of memory");
    uv_timer_start(&h->restart, on_restart, RESTART_MS, 0);
    return;
  }
  set_state(h, "connecting", "");
  tg_fleet_host_start(h->fh);
}

coll_host_t *coll_host_by_name(coll_t *c, const char *spec) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->hosts[i].t.spec, spec)) return &c->hosts[i];
  return NULL;
}

bool coll_host_in_group(const coll_t *c, const coll_host_t *h,
                        const char *group) {
  return tg_coll_config_group_has(&c->cfg, group, h->t.spec);
}

/* --- set-up ------------------------------------------------------------- */

static int read_all(const char *path, tg_buf_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rv = tg_buf_read_fd(out, fd);
  close(fd);
  return rv;
}

/* The flight-recorder config: pbtxt, rings only, no end of its own, named
 * with the session key so that clones find it by name. */
static int load_flight(coll_t *c) {
  const char *path = c->cfg.trace_config;
  tg_buf_t text, wire;
  tg_buf_init(&text, FLIGHT_CONFIG_MAX);
  tg_buf_init(&wire, FLIGHT_CONFIG_MAX);
  int rv = read_all(path, &text);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": %s: %s\n", path, tg_strerror(rv));
    goto out;
  }
  tg_pbtxt_error_t perr;
  rv = tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                      (const char *)tg_buf_begin(&text), tg_buf_size(&text),
                      &wire, &perr);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": %s: %s\n", path, perr.msg);
    goto out;
  }
  Perfetto__Protos__TraceConfig *tc = perfetto__protos__trace_config__unpack(
      NULL, tg_buf_size(&wire), tg_buf_begin(&wire));
  if (!tc) {
    fprintf(stderr, COLL_PROG ": %s: does not encode\n", path);
    rv = -EINVAL;
    goto out;
  }
  const char *bad = NULL;
  if (tc->n_buffers == 0) bad = "no buffers";
  for (size_t i = 0; !bad && i < tc->n_buffers; i++)
    if (tc->buffers[i]->has_fill_policy &&
        tc->buffers[i]->fill_policy !=
            PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER)
      bad = "a buffer is not a ring (fill_policy: RING_BUFFER)";
  if (!bad && tc->has_duration_ms && tc->duration_ms)
    bad = "duration_ms: a flight recorder runs until stopped";
  if (!bad && tc->has_write_into_file && tc->write_into_file)
    bad = "write_into_file: the rings are read by snapshots only";
  if (!bad && tc->n_data_sources == 0) bad = "no data_sources";
  if (!bad && tc->trigger_config)
    bad = "trigger_config: leave it out, the collector makes it from the "
          "config's trigger lines";
  if (bad) {
    fprintf(stderr, COLL_PROG ": %s: %s\n", path, bad);
    perfetto__protos__trace_config__free_unpacked(tc, NULL);
    rv = -EINVAL;
    goto out;
  }
  /* The config's triggers snapshot the ring (CLONE_SNAPSHOT: the service
   * tells the session's consumer, trigger.c). Perfetto's traced wants a
   * trigger_timeout_ms of at most 7 days with any trigger mode, and ends
   * the session then: the holder fails and a fresh ring starts (coll.c's
   * restart). Built once here, owned by |tc| (freed with it). */
  if (c->cfg.n_triggers) {
    Perfetto__Protos__TraceConfig__TriggerConfig *trig = calloc(1, sizeof(*trig));
    Perfetto__Protos__TraceConfig__TriggerConfig__Trigger **tp =
        calloc(c->cfg.n_triggers, sizeof(*tp));
    if (!trig || !tp) {
      free(trig);
      free(tp);
      perfetto__protos__trace_config__free_unpacked(tc, NULL);
      rv = -ENOMEM;
      goto out;
    }
    perfetto__protos__trace_config__trigger_config__init(trig);
    trig->has_trigger_mode = true;
    trig->trigger_mode =
        PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT;
    trig->has_trigger_timeout_ms = true;
    trig->trigger_timeout_ms = RING_TRIGGER_TIMEOUT_MS;
    trig->triggers = tp;
    tc->trigger_config = trig;
    for (size_t i = 0; i < c->cfg.n_triggers; i++) {
      Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t =
          malloc(sizeof(*t));
      char *name = strdup(c->cfg.triggers[i].name);
      if (!t || !name) {
        free(t);
        free(name);
        perfetto__protos__trace_config__free_unpacked(tc, NULL);
        rv = -ENOMEM;
        goto out;
      }
      perfetto__protos__trace_config__trigger_config__trigger__init(t);
      t->name = name;
      tp[trig->n_triggers++] = t;
    }
  }
  c->flight = tc;
  rv = 0;
out:
  tg_buf_free(&text);
  tg_buf_free(&wire);
  return rv;
}

static int load_hosts(coll_t *c) {
  cli_target_t *all = NULL;
  size_t n = 0;
  if (cli_targets_load(c->cfg.hosts, &all, &n, MAX_INVENTORY) < 0 ||
      cli_targets_name(all, n) < 0) {
    free(all);
    return -1;
  }
  c->inventory = n;
  c->hosts = calloc(n ? n : 1, sizeof(*c->hosts));
  if (!c->hosts) {
    free(all);
    return -1;
  }
  tg_coll_shard_t sh = {.index = c->cfg.shard_index,
                        .count = c->cfg.shard_count};
  for (size_t i = 0; i < n; i++) {
    if (!tg_coll_shard_owns(&sh, all[i].spec, strlen(all[i].spec))) continue;
    coll_host_t *h = &c->hosts[c->n];
    h->c = c;
    h->index = c->n++;
    h->t = all[i];
    set_state(h, "connecting", "");
  }
  /* Group members the inventory does not have: a typo, said once. */
  for (size_t g = 0; g < c->cfg.n_groups; g++)
    for (size_t k = 0; k < c->cfg.groups[g].n_hosts; k++) {
      const char *hs = c->cfg.groups[g].hosts[k];
      size_t i = 0;
      while (i < n && strcmp(all[i].spec, hs) != 0) i++;
      if (i == n)
        TG_WARN("group %s: host %s is not in the inventory %s",
                c->cfg.groups[g].name, hs, c->cfg.hosts);
    }
  free(all);
  return 0;
}

int coll_start(coll_t *c, uv_loop_t *loop, tg_coll_config_t *cfg) {
  c->loop = loop;
  c->cfg = *cfg;
  memset(cfg, 0, sizeof(*cfg));
  if (load_flight(c) < 0 || load_hosts(c) < 0) return -1;

  if (c->cfg.tls) {
    tg_tls_opts_t o = {.server = false,
                       .cert_file = c->cfg.cert,
                       .key_file = c->cfg.key,
                       .ca_file = c->cfg.ca};
    char err[512] = "";
    if (tg_tls_config_new(&o, &c->tls, err, sizeof(err)) < 0) {
      fprintf(stderr, COLL_PROG ": TLS: %s\n", err);
      return -1;
    }
  }
  c->env = (cli_remote_env_t){
      .loop = loop,
      .tls = c->tls,
      .server_name = c->cfg.tls_server_name[0] ? c->cfg.tls_server_name : NULL,
      .dead_link_timeout_s = (uint32_t)((c->cfg.dead_link_ms + 999) / 1000),
  };
  for (size_t i = 0; i < c->n; i++)
    if (c->hosts[i].t.kind == CLI_TARGET_TLS && !c->tls) {
      fprintf(stderr, COLL_PROG ": %s: a TLS host needs ca, cert and key in "
              "the config\n", c->hosts[i].t.spec);
      return -1;
    }
  if (c->check_only) return 0;

  tg_coll_store_config_t sc = {
      .dir = c->cfg.store,
      .retention = {.max_bytes = c->cfg.retention_max_bytes,
                    .max_age_ms = c->cfg.retention_max_age_ms},
      .now_ms = c->now_ms,
      .clock_ctx = c->clock_ctx,
  };
  if (strcmp(c->cfg.catalog, "sqlite") != 0) {
    int rv = tg_coll_catalog_pg_open(c->cfg.catalog, c->cfg.shard_index,
                                     &c->shared);
    if (rv < 0) {
      fprintf(stderr, COLL_PROG ": the PostgreSQL catalog: %s\n",
              tg_strerror(rv));
      return -1;
    }
    sc.catalog = c->shared;
  }
  tg_coll_recovery_t rec;
  int rv = tg_coll_store_open(&sc, &c->store, &rec);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": the store %s: %s\n", c->cfg.store,
            tg_strerror(rv));
    return -1;
  }
  if (rec.interrupted || rec.tmp_removed || rec.orphans_removed || rec.lost)
    TG_WARN(
           "store %s: repaired at start: %u snapshots interrupted, %u partial "
           "files and %u orphans removed, %u lost", c->cfg.store,
           rec.interrupted, rec.tmp_removed, rec.orphans_removed, rec.lost);

  c->fleet = (tg_fleet_t){
      .loop = loop,
      /* Every host has its own config and key (host_ring): the fleet's
       * attach key only puts the hosts in attach mode. */
      .o = {.attach_key = c->cfg.session_key,
            .enable_if_absent = true,
            .hold = true,
            .compress_level = (int)c->cfg.compress_level,
            .reconnect_ms = (uint64_t)c->cfg.reconnect_ms,
            .dead_link_ms = (uint64_t)c->cfg.dead_link_ms,
            .clock_sync_ms = 60000},
      .dialer = cli_remote_dialer(&c->env),
      .cbs = &host_cbs,
      .n = c->n,
  };
  if (tg_fleet_init(&c->fleet) < 0) return -1;
  for (size_t i = 0; i < c->n; i++) {
    coll_host_t *h = &c->hosts[i];
    if (host_ring(c, h) < 0) return -1;
    uv_timer_init(loop, &h->restart);
    h->restart.data = h;
    if (holder_new(h) < 0) return -1;
  }
  TG_INFO("%zu of %zu hosts in shard %u/%u; rings under '%s'",
         c->n, c->inventory, c->cfg.shard_index, c->cfg.shard_count,
         c->cfg.session_key);
  coll_trigger_start(c);
  if (coll_api_start(c) < 0) return -1;
  tg_fleet_start(&c->fleet);
  return 0;
}

void coll_stop(coll_t *c) {
  if (c->stopping) return;
  c->stopping = true;
  TG_INFO("stopping: the rings stay on the hosts under '%s'",
          c->cfg.session_key);
  coll_api_stop(c);
  coll_trigger_stop(c);
  for (size_t i = 0; i < c->n; i++) uv_timer_stop(&c->hosts[i].restart);
  /* A snapshot under way is finished with what came (snap.c stops the
   * loop then); else the loop stops now. The hosts' connections go with
   * the process: each relay detaches its ring under the key, for the
   * next start to attach to, exactly as after a crash. */
  if (c->current) coll_snap_cut(c->current);
  else uv_stop(c->loop);
}
