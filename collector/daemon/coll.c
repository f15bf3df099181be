/* The collector's set-up (coll.h): the flight config, TLS, the store, the
 * hosts (hosts.c), the triggers and the API; and its stop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/catalog/catalog_pg.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/api.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/snap.h"
#include "collector/daemon/trigger.h"
#include "collector/daemon/work.h"
#include "collector/daemon/boost.h"
#include "collector/s3/s3_credentials.h"
#include "collector/daemon/import_check.h"
#include "collector/daemon/shares.h"
#include "collector/daemon/symbols.h"
#include "client/session_cache.h"
#include "collector/config/shard.h"
#include "common/fnv1a.h"
#include "common/log.h"
#include "common/notice.h"
#include "consumer/pbtxt.h"
#include "pb/config/trace_config.pb-c.h"
#include "tracegate/error.h"

#define FLIGHT_CONFIG_MAX (1u << 20)
/* TraceConfig.flush_timeout_ms when unset (Perfetto's, tracegated's). */
#define PERFETTO_DEFAULT_FLUSH_TIMEOUT_MS 5000
/* The longest trigger_timeout_ms Perfetto's traced accepts (7 days). */
#define RING_TRIGGER_TIMEOUT_MS (7u * 24 * 3600 * 1000)

static int read_all(const char *path, tg_buf_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rv = tg_buf_read_fd(out, fd);
  close(fd);
  return rv;
}

/* The flight config file |path| as a TraceConfig: read, parsed as pbtxt
 * and decoded. NULL after saying why (out of memory included). */
static Perfetto__Protos__TraceConfig *read_flight(const char *path) {
  Perfetto__Protos__TraceConfig *tc = NULL;
  tg_buf_t text, wire;
  tg_buf_init(&text, FLIGHT_CONFIG_MAX);
  tg_buf_init(&wire, FLIGHT_CONFIG_MAX);
  tg_pbtxt_error_t perr;
  int rv = read_all(path, &text);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": %s %s: %s\n",
            TG_NOTE(COLLECTOR_CONFIG_INVALID), path, tg_strerror(rv));
  } else if (tg_pbtxt_parse(&perfetto__protos__trace_config__descriptor,
                            (const char *)tg_buf_begin(&text),
                            tg_buf_size(&text), &wire, &perr) < 0) {
    fprintf(stderr, COLL_PROG ": %s %s: %s\n",
            TG_NOTE(COLLECTOR_CONFIG_INVALID), path, perr.msg);
  } else if (!(tc = perfetto__protos__trace_config__unpack(
                   NULL, tg_buf_size(&wire), tg_buf_begin(&wire)))) {
    fprintf(stderr, COLL_PROG ": %s %s: does not encode\n",
            TG_NOTE(COLLECTOR_CONFIG_INVALID), path);
  }
  tg_buf_free(&text);
  tg_buf_free(&wire);
  return tc;
}

/* --- what a flight config may not be: one predicate and its words each -- */

static bool no_buffers(const Perfetto__Protos__TraceConfig *tc) {
  return tc->n_buffers == 0;
}

static bool a_buffer_not_a_ring(const Perfetto__Protos__TraceConfig *tc) {
  for (size_t i = 0; i < tc->n_buffers; i++)
    if (tc->buffers[i]->has_fill_policy &&
        tc->buffers[i]->fill_policy !=
            PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER)
      return true;
  return false;
}

static bool has_duration(const Perfetto__Protos__TraceConfig *tc) {
  return tc->has_duration_ms && tc->duration_ms;
}

static bool writes_into_file(const Perfetto__Protos__TraceConfig *tc) {
  return tc->has_write_into_file && tc->write_into_file;
}

static bool no_data_sources(const Perfetto__Protos__TraceConfig *tc) {
  return tc->n_data_sources == 0;
}

static bool has_trigger_config(const Perfetto__Protos__TraceConfig *tc) {
  return tc->trigger_config != NULL;
}

static const struct {
  bool (*bad)(const Perfetto__Protos__TraceConfig *tc);
  const char *why;
} flight_refusals[] = {
    {no_buffers, "no buffers"},
    {a_buffer_not_a_ring, "a buffer is not a ring (fill_policy: RING_BUFFER)"},
    {has_duration, "duration_ms: a flight recorder runs until stopped"},
    {writes_into_file, "write_into_file: the rings are read by snapshots only"},
    {no_data_sources, "no data_sources"},
    {has_trigger_config, "trigger_config: leave it out, the collector makes "
                         "it from the config's trigger lines"},
};

/* Why |tc| cannot be a flight recorder's config (the first refusal in
 * the table's order), or NULL. Pure. */
static const char *flight_refusal(const Perfetto__Protos__TraceConfig *tc) {
  for (size_t i = 0; i < sizeof(flight_refusals) / sizeof(flight_refusals[0]);
       i++)
    if (flight_refusals[i].bad(tc)) return flight_refusals[i].why;
  return NULL;
}

/* Producers' track events, interned names and the like need the
 * sequence's first packets (incremental state), which a ring that wraps
 * overwrites: trace processor then skips the rest of the sequence. A ring
 * whose config has producers clear their state now and then keeps every
 * sequence readable but for its oldest clear period (docs/collector.md,
 * "Sizing"). Adds ring_clear_period to a config without a clear period.
 * Returns 0 or -ENOMEM. */
static int add_ring_clear(const coll_t *c, Perfetto__Protos__TraceConfig *tc) {
  Perfetto__Protos__TraceConfig__IncrementalStateConfig *isc =
      tc->incremental_state_config;
  if (c->cfg.ring_clear_period_ms <= 0 ||
      (isc && isc->has_clear_period_ms && isc->clear_period_ms))
    return 0;
  if (!isc) {
    if (!(isc = calloc(1, sizeof(*isc)))) return -ENOMEM;
    perfetto__protos__trace_config__incremental_state_config__init(isc);
    tc->incremental_state_config = isc;
  }
  isc->has_clear_period_ms = true;
  isc->clear_period_ms = (uint32_t)c->cfg.ring_clear_period_ms;
  TG_INFO("%s %s: no incremental_state_config.clear_period_ms: the rings "
          "clear their producers' incremental state every %" PRId64
          " ms (ring_clear_period)", TG_NOTE(COLLECTOR_RING_CLEAR_ADDED),
          c->cfg.trace_config, c->cfg.ring_clear_period_ms);
  return 0;
}

/* A clone waits for its producers' flush up to the ring's flush timeout
 * (Perfetto's default when unset): a clone_timeout not above it fails
 * healthy hosts whose producers are slow to flush. Warns of that. */
static void check_flush_timeout(const coll_t *c,
                                const Perfetto__Protos__TraceConfig *tc) {
  uint32_t flush_ms = tc->has_flush_timeout_ms && tc->flush_timeout_ms
                          ? tc->flush_timeout_ms
                          : PERFETTO_DEFAULT_FLUSH_TIMEOUT_MS;
  if ((int64_t)flush_ms >= c->cfg.clone_timeout_ms)
    TG_WARN("%s: flush_timeout_ms %" PRIu32 " is not below clone_timeout "
            "(%" PRId64 " ms): a host whose producers flush slowly fails "
            "snapshots", c->cfg.trace_config, flush_ms,
            c->cfg.clone_timeout_ms);
}

/* The config's triggers snapshot the ring (CLONE_SNAPSHOT: the service
 * tells the session's consumer, trigger.c). Perfetto's traced wants a
 * trigger_timeout_ms of at most 7 days with any trigger mode, and ends the
 * session then: the holder fails and a fresh ring starts (coll.c's
 * restart). Built once here, owned by |tc| (freed with it, whatever of it
 * was built when out of memory). Returns 0 or -ENOMEM. */
static int add_triggers(const coll_t *c, Perfetto__Protos__TraceConfig *tc) {
  if (!c->cfg.n_triggers) return 0;
  Perfetto__Protos__TraceConfig__TriggerConfig *trig = calloc(1, sizeof(*trig));
  Perfetto__Protos__TraceConfig__TriggerConfig__Trigger **tp =
      calloc(c->cfg.n_triggers, sizeof(*tp));
  if (!trig || !tp) {
    free(trig);
    free(tp);
    return -ENOMEM;
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
      return -ENOMEM;
    }
    perfetto__protos__trace_config__trigger_config__trigger__init(t);
    t->name = name;
    tp[trig->n_triggers++] = t;
  }
  return 0;
}

/* The flight-recorder config: pbtxt, rings only, no end of its own, named
 * with the session key so that clones find it by name. Read, refused or
 * completed (ring clears, triggers), each by its own function. */
static int load_flight(coll_t *c) {
  const char *path = c->cfg.trace_config;
  Perfetto__Protos__TraceConfig *tc = read_flight(path);
  if (!tc) return -EINVAL;
  const char *bad = flight_refusal(tc);
  int rv = -EINVAL;
  if (bad) {
    fprintf(stderr, COLL_PROG ": %s %s: %s\n",
            TG_NOTE(COLLECTOR_CONFIG_INVALID), path, bad);
    goto fail;
  }
  if ((rv = add_ring_clear(c, tc)) < 0) goto fail;
  check_flush_timeout(c, tc);
  if ((rv = add_triggers(c, tc)) < 0) goto fail;
  c->flight = tc;
  return 0;
fail:
  perfetto__protos__trace_config__free_unpacked(tc, NULL);
  return rv;
}

/* The calls back up (coll_events_t): each lower file's events to the
 * function of the file above that acts on them. */
static void coll_wire(coll_t *c) {
  c->on = (coll_events_t){
      .standby_closed = coll_snap_standby_closed,
      .standby_gone = coll_snap_standby_gone,
      .standby_released = coll_host_check_free,
      .boost_packet = coll_snap_merge_boost,
      .boost_released = coll_snap_boost_released,
      .host_tracing = coll_watch_host,
      .snapshot_done = coll_api_snapshot_done,
      .queued_begun = coll_api_queued_begun,
      .queued_failed = coll_api_queued_failed,
  };
}

int coll_prepare(coll_t *c, uv_loop_t *loop, tg_coll_config_t *cfg) {
  c->loop = loop;
  coll_clock_init(c, loop);
  coll_wire(c);
  c->cfg = *cfg;
  memset(cfg, 0, sizeof(*cfg));
  if (load_flight(c) < 0 || coll_boost_prepare(c) < 0) return -1;

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
    /* Saved sessions, in memory only: a snapshot's clone connection and
     * a holder's reconnection resume from the relay's ticket instead of
     * a full handshake each (1000 hosts: seconds of public-key work on
     * both ends at every snapshot). */
    uint8_t own[TG_TLS_FINGERPRINT_SIZE], ca[TG_TLS_FINGERPRINT_SIZE];
    tg_tls_config_fingerprints(c->tls, own, ca);
    if (tg_session_cache_new(own, ca, &c->sessions) < 0) {
      fprintf(stderr, COLL_PROG ": out of memory\n");
      return -1;
    }
  }
  c->env = (tg_remote_env_t){
      .loop = loop,
      .tls = c->tls,
      .server_name = c->cfg.tls_server_name[0] ? c->cfg.tls_server_name : NULL,
      .dead_link_timeout_s = (uint32_t)((c->cfg.dead_link_ms + 999) / 1000),
      .sessions = c->sessions,
      .ca_setting = "`ca` (the collector's config)",
  };
  c->dialer = tg_remote_dialer(&c->env);
  return 0;
}

int coll_store_open(coll_t *c) {
  tg_coll_store_config_t sc = {
      .dir = c->cfg.store,
      .retention = {.max_bytes = c->cfg.retention_max_bytes,
                    .max_age_ms = c->cfg.retention_max_age_ms},
  };
  /* bucket: the keys from the file, systemd's credential or the
   * environment, copied by the store at open and wiped here after it. */
  tg_s3_credentials_t keys;
  tg_coll_s3_config_t s3;
  char endpoint[TG_COLL_CONFIG_URL_MAX + 64];
  memset(&keys, 0, sizeof keys);
  if (c->cfg.s3_bucket[0]) {
    char why[256];
    if (tg_s3_credentials_load(c->cfg.s3_credentials_file, &keys, why,
                               sizeof why) < 0) {
      fprintf(stderr, COLL_PROG ": the bucket's credentials (%s): %s\n",
              c->cfg.s3_credentials_file[0]
                  ? c->cfg.s3_credentials_file
                  : "systemd's credential " TG_S3_CREDENTIAL_NAME
                    " or the environment",
              why);
      return -1;
    }
    if (c->cfg.s3_endpoint[0])
      snprintf(endpoint, sizeof endpoint, "%s", c->cfg.s3_endpoint);
    else
      snprintf(endpoint, sizeof endpoint, "https://s3.%s.amazonaws.com",
               c->cfg.s3_region);
    s3 = (tg_coll_s3_config_t){
        .client = {.endpoint = endpoint,
                   .region = c->cfg.s3_region,
                   .bucket = c->cfg.s3_bucket,
                   .access_key = keys.access_key,
                   .secret_key = keys.secret_key},
        .prefix = c->cfg.s3_prefix,
    };
    sc.s3 = &s3;
  }
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
  tg_s3_credentials_clear(&keys);
  if (rv < 0) {
    fprintf(stderr, COLL_PROG ": the store %s: %s\n", c->cfg.store,
            tg_strerror(rv));
    return -1;
  }
  if (rec.interrupted || rec.tmp_removed || rec.orphans_removed || rec.lost ||
      rec.uploads_aborted)
    TG_WARN(
           "store %s: repaired at start: %u snapshots interrupted, %u partial "
           "files and %u orphans removed, %u lost, %u uploads aborted",
           c->cfg.store, rec.interrupted, rec.tmp_removed,
           rec.orphans_removed, rec.lost, rec.uploads_aborted);
  if (rec.unrowed_kept)
    TG_WARN("%s store %s: %u objects in the bucket have no row in the "
            "catalog; kept", TG_NOTE(COLLECTOR_BUCKET_UNROWED), c->cfg.store,
            rec.unrowed_kept);
  return 0;
}

int coll_start(coll_t *c, uv_loop_t *loop, tg_coll_config_t *cfg) {
  if (coll_prepare(c, loop, cfg) < 0) return -1;
  if (coll_symbols_check(c) < 0) return -1;
  /* --check-config: the inventory is read, nothing started. */
  if (c->check_only) return coll_hosts_start(c);
  if (coll_store_open(c) < 0) return -1;
  coll_symbols_resume(c);
  if (coll_hosts_start(c) < 0) return -1;
  TG_INFO("%zu of %zu hosts in shard %u/%u; rings under '%s'",
         c->n, c->inventory, c->cfg.shard_index, c->cfg.shard_count,
         c->cfg.session_key);
  coll_trigger_start(c);
  coll_hosts_watch(c);
  return coll_api_start(c) < 0 ? -1 : 0;
}

void coll_stop(coll_t *c) {
  if (c->stopping) return;
  c->stopping = true;
  TG_INFO("stopping: the rings stay on the hosts under '%s'",
          c->cfg.session_key);
  coll_api_stop(c);
  coll_import_check_stop(c);
  coll_symbols_stop(c);
  coll_shares_stop(c);
  coll_trigger_stop(c);
  coll_hosts_unwatch(c);
  for (size_t i = 0; i < c->n; i++) uv_timer_stop(&c->hosts[i]->restart);
  /* The snapshots under way are finished with what came (snap.c stops
   * the loop once the last is stored); else the loop stops now. The
   * hosts' connections go with the process: each relay detaches its ring
   * under the key, for the next start to attach to, exactly as after a
   * crash. A copy: a snapshot cut may leave |running| at once. */
  coll_snap_t *cut[COLL_RUNNING_MAX];
  size_t n = c->n_running;
  memcpy(cut, c->running, n * sizeof(cut[0]));
  for (size_t i = 0; i < n; i++) coll_snap_cut(cut[i]);
  coll_stop_if_idle(c);
}
