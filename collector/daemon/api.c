/* The collector's HTTP API, /metrics and the web page (coll.h;
 * docs/collector.md, "HTTP API"). The transport is collector/http.h
 * (libwebsockets); this file maps requests to the collector and answers in
 * JSON.
 *
 *   GET  /                                 the web page (page.c)
 *   GET  /api/v1/hosts                     the shard's hosts and their state
 *   GET  /api/v1/snapshots?from=&to=&trigger=&host=&state=&before=&limit=
 *   GET  /api/v1/snapshots/ID              one snapshot and its hosts
 *   GET  /api/v1/snapshots/ID/trace        the merged trace (download)
 *   POST /api/v1/snapshots?reason=&group=&wait=1   trigger a snapshot
 *   POST /api/v1/snapshots/ID/pin?pinned=0|1
 *   GET  /metrics                          Prometheus text format
 *   GET  /healthz
 *
 * Every GET also answers HEAD (the HTTP layer leaves the body out).
 *
 * Who may do what: over plain HTTP (loopback only, config.c) everyone
 * everything; over HTTPS the client certificate's CN, looked up exactly in
 * the authz file: observe reads, record also triggers and pins.
 *
 * Untrusted input: ids go through tg_coll_id_parse() and nothing else
 * reaches the file system; a request under /api/v1 takes only its own
 * arguments, each once, and numbers and flags parsed whole (else 400);
 * text filters go to the catalog as bound parameters; every string echoed
 * back is JSON-escaped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/daemon/coll.h"
#include "collector/http.h"
#include "collector/snapshot_id.h"
#include "common/decimal.h"
#include "common/log.h"
#include "consumer/cli/json_out.h"
#include "consumer/fleet/merge.h"
#include "auth/authz.h"
#include "tracegate/error.h"

#define API "/api/v1"
/* What an id is, said in refusals (snapshot_id.h). */
#define ID_FORM "16 lowercase hex digits, 0000000000000001 to 7fffffffffffffff"
#define WAIT_MAX 256 /* requests waiting for a snapshot at once */
/* Host rows one GET of a snapshot carries (~1.2 KB each in memory while
 * it is built): a snapshot has at most TG_MERGE_MAX_HOSTS (one
 * collector's), so "hosts_truncated" is for a catalog edited by hand. */
#define HOSTS_MAX TG_MERGE_MAX_HOSTS

/* A POST with wait=1: answered when its snapshot is stored. */
typedef struct waiter {
  tg_list_t node;
  tg_http_exchange_t *x;
  uint64_t id; /* 0: folded into the queued snapshot, id not known yet */
} waiter_t;

static tg_list_t waiters; /* the loop thread's only */
static size_t n_waiters;

/* --- answers ------------------------------------------------------------------ */

typedef struct out {
  FILE *f;
  char *buf;
  size_t len;
} out_t;

static bool out_open(out_t *o) {
  o->buf = NULL;
  o->len = 0;
  o->f = open_memstream(&o->buf, &o->len);
  return o->f != NULL;
}

static void out_send(out_t *o, tg_http_exchange_t *x, int status,
                     const char *type) {
  fclose(o->f);
  if (tg_http_respond(x, status, type, o->buf, o->len) < 0)
    tg_http_respond(x, 500, NULL, NULL, 0);
  free(o->buf);
}

static void json_error(tg_http_exchange_t *x, int status, const char *why) {
  out_t o;
  if (!out_open(&o)) {
    tg_http_respond(x, 500, NULL, NULL, 0);
    return;
  }
  fputs("{\"error\":", o.f);
  cli_json_str(o.f, why);
  fputs("}\n", o.f);
  out_send(&o, x, status, "application/json");
}

static const char *arg(const tg_http_request_t *r, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < r->n_args; i++)
    if (!strncmp(r->args[i], name, n) && r->args[i][n] == '=')
      return r->args[i] + n + 1;
  return NULL;
}

/* Whether every argument of |r| is "name=value" with a name of |allowed|
 * (NULL-terminated), each name once. Otherwise answers 400 naming the
 * argument and returns false: a misspelt name would be ignored and a
 * repeated one would have one of its values taken, and the answer would
 * look like the one asked for. */
static bool args_ok(tg_http_exchange_t *x, const tg_http_request_t *r,
                    const char *const *allowed) {
  for (size_t i = 0; i < r->n_args; i++) {
    const char *a = r->args[i];
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    const char *why = NULL;
    size_t k = 0;
    while (allowed[k] && !(strlen(allowed[k]) == n && !memcmp(allowed[k], a, n)))
      k++;
    if (!allowed[k]) {
      why = "not an argument of this request";
    } else if (!eq) {
      why = "no value (name=value)";
    } else {
      for (size_t j = 0; j < i && !why; j++)
        if (!strncmp(r->args[j], a, n + 1)) why = "given twice";
    }
    if (!why) continue;
    /* The name is the client's: cut, and JSON-escaped by json_error(). */
    char msg[160];
    snprintf(msg, sizeof(msg), "%.*s: %s", n > 64 ? 64 : (int)n, a, why);
    json_error(x, 400, msg);
    return false;
  }
  return true;
}

static const char *const no_args[] = {NULL};

/* A decimal number, whole, within [lo, hi]. */
static bool num(const char *s, int64_t lo, int64_t hi, int64_t *v) {
  return s && tg_decimal_i64(s, lo, hi, v) == 0;
}

/* --- JSON of the collector's things --------------------------------------------- */

static void json_snapshot(FILE *f, const tg_coll_snapshot_t *s) {
  char id[TG_COLL_ID_STRLEN];
  tg_coll_id_format(s->id, id);
  fprintf(f, "{\"id\":\"%s\",\"state\":\"%s\",\"pinned\":%s,"
          "\"started_ms\":%" PRId64 ",\"finished_ms\":%" PRId64
          ",\"bytes\":%" PRIu64 ",\"crc32\":%" PRIu32 ",\"packets\":%" PRIu64
          ",\"loss\":%" PRIu64 ",\"hosts\":%" PRIu32 ",\"hosts_failed\":%" PRIu32
          ",\"trigger\":", id, tg_coll_state_name(s->state),
          s->pinned ? "true" : "false", s->started_ms, s->finished_ms, s->bytes,
          s->crc32, s->packets, s->loss, s->n_hosts, s->n_hosts_failed);
  cli_json_str(f, s->trigger);
  fputs(",\"reason\":", f);
  cli_json_str(f, s->reason);
  fputs(",\"origin\":", f);
  cli_json_str(f, s->origin);
  fputs(",\"failure\":", f);
  cli_json_str(f, s->failure);
  fputc('}', f);
}

static void json_snap_hosts(FILE *f, const tg_coll_host_t *h, size_t n) {
  fputc('[', f);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ",{\"host\":" : "{\"host\":", f);
    cli_json_str(f, h[i].host);
    fprintf(f, ",\"outcome\":\"%s\",\"error\":",
            tg_coll_host_outcome_name(h[i].outcome));
    cli_json_str(f, h[i].error);
    fprintf(f, ",\"bytes\":%" PRIu64 ",\"packets\":%" PRIu64
            ",\"loss\":%" PRIu64 ",\"window_first_ms\":%" PRId64
            ",\"window_last_ms\":%" PRId64 "}", h[i].bytes, h[i].packets,
            h[i].loss, h[i].window_first_ms, h[i].window_last_ms);
  }
  fputc(']', f);
}

/* --- routes ----------------------------------------------------------------------- */

static void get_hosts(coll_t *c, tg_http_exchange_t *x) {
  out_t o;
  if (!out_open(&o)) return json_error(x, 500, "out of memory");
  fprintf(o.f, "{\"shard\":\"%u/%u\",\"inventory\":%zu,\"hosts\":[",
          c->cfg.shard_index, c->cfg.shard_count, c->inventory);
  for (size_t i = 0; i < c->n; i++) {
    const coll_host_t *h = c->hosts[i];
    fputs(i ? ",{\"host\":" : "{\"host\":", o.f);
    cli_json_str(o.f, h->t.spec);
    fputs(",\"state\":", o.f);
    cli_json_str(o.f, coll_host_state_name(h->state));
    fprintf(o.f, ",\"since_ms\":%" PRId64 ",\"ring\":%s,\"restarts\":%" PRIu64
            ",\"failures\":%" PRIu64 ",\"why\":", h->since_ms,
            h->ring_up ? "true" : "false", h->restarts, h->failures);
    cli_json_str(o.f, h->why);
    fputs(",\"hostname\":", o.f);
    cli_json_str(o.f, h->fh && h->fh->has_info ? h->fh->hostname : "");
    fputc('}', o.f);
  }
  fputs("]}\n", o.f);
  out_send(&o, x, 200, "application/json");
}

static void list_snapshots(coll_t *c, tg_http_exchange_t *x,
                           const tg_http_request_t *r) {
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  int64_t v;
  const char *s;
  if ((s = arg(r, "from"))) {
    if (!num(s, INT64_MIN, INT64_MAX, &v)) return json_error(x, 400, "from: epoch milliseconds");
    f.from_ms = v;
  }
  if ((s = arg(r, "to"))) {
    if (!num(s, INT64_MIN, INT64_MAX, &v)) return json_error(x, 400, "to: epoch milliseconds");
    f.to_ms = v;
  }
  if ((s = arg(r, "limit"))) {
    if (!num(s, 1, TG_COLL_LIST_MAX, &v)) return json_error(x, 400, "limit: 1..1000");
    f.limit = (uint32_t)v;
  } else {
    f.limit = 100;
  }
  if ((s = arg(r, "before"))) {
    uint64_t id;
    if (tg_coll_id_parse(s, strlen(s), &id) < 0)
      return json_error(x, 400, "before: " ID_FORM);
    f.before_id = id;
  }
  if ((s = arg(r, "state"))) {
    unsigned st = 0;
    for (int i = 0; i < TG_COLL_STATE_COUNT; i++)
      if (!strcmp(s, tg_coll_state_name((tg_coll_state_t)i))) st = TG_COLL_STATE_BIT(i);
    if (!st) return json_error(x, 400, "state: pending, complete, partial or failed");
    f.states = st;
  }
  f.trigger = arg(r, "trigger");
  f.host = arg(r, "host");
  if ((f.trigger && strlen(f.trigger) > TG_COLL_TRIGGER_MAX) ||
      (f.host && strlen(f.host) > TG_COLL_HOST_MAX))
    return json_error(x, 400, "trigger or host: too long");
  tg_coll_snapshot_t *rows = calloc(f.limit, sizeof(*rows));
  if (!rows) return json_error(x, 500, "out of memory");
  size_t n = 0;
  int rv = tg_coll_store_list(c->store, &f, rows, f.limit, &n);
  if (rv < 0) {
    free(rows);
    return json_error(x, 503, tg_strerror(rv));
  }
  out_t o;
  if (!out_open(&o)) {
    free(rows);
    return json_error(x, 500, "out of memory");
  }
  fputs("{\"snapshots\":[", o.f);
  for (size_t i = 0; i < n; i++) {
    if (i) fputc(',', o.f);
    json_snapshot(o.f, &rows[i]);
  }
  fputs("],\"next_before\":", o.f);
  if (n == f.limit && n) {
    char id[TG_COLL_ID_STRLEN];
    tg_coll_id_format(rows[n - 1].id, id);
    fprintf(o.f, "\"%s\"", id);
  } else {
    fputs("null", o.f);
  }
  fputs("}\n", o.f);
  free(rows);
  out_send(&o, x, 200, "application/json");
}

/* 404 for a snapshot that is not (or no longer) there, with its id: a
 * caller that waited for |id| learns it was stored, then deleted. */
static void snapshot_gone(tg_http_exchange_t *x, uint64_t id, bool stored) {
  out_t o;
  if (!out_open(&o)) return json_error(x, 500, "out of memory");
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  fputs("{\"error\":", o.f);
  cli_json_str(o.f, stored ? "stored, then deleted (retention) before this answer"
                           : "no such snapshot");
  fprintf(o.f, ",\"id\":\"%s\",\"deleted\":%s}\n", idt,
          stored ? "true" : "false");
  out_send(&o, x, 404, "application/json");
}

/* Hosts room the first read takes; a snapshot with more is read again
 * whole (each read is one point in time). */
#define HOSTS_FIRST 64

/* |stored|: the caller knows the snapshot was stored (wait=1). */
static void answer_row(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                       bool stored) {
  tg_coll_snapshot_t s;
  size_t n = 0, cap = HOSTS_FIRST;
  tg_coll_host_t *hosts = NULL;
  int rv;
  for (;;) {
    free(hosts);
    hosts = calloc(cap, sizeof(*hosts));
    if (!hosts) return json_error(x, 500, "out of memory");
    rv = tg_coll_store_get_with_hosts(c->store, id, &s, hosts, cap, &n);
    if (rv < 0 || n <= cap || cap == HOSTS_MAX) break;
    cap = n < HOSTS_MAX ? n : HOSTS_MAX;
  }
  if (rv < 0) {
    free(hosts);
    if (rv == -ENOENT) return snapshot_gone(x, id, stored);
    return json_error(x, 503, tg_strerror(rv));
  }
  bool truncated = n > cap;
  if (truncated) n = cap;
  out_t o;
  if (!out_open(&o)) {
    free(hosts);
    return json_error(x, 500, "out of memory");
  }
  fputs("{\"snapshot\":", o.f);
  json_snapshot(o.f, &s);
  fputs(",\"hosts\":", o.f);
  json_snap_hosts(o.f, hosts, n);
  fprintf(o.f, ",\"hosts_truncated\":%s}\n", truncated ? "true" : "false");
  free(hosts);
  out_send(&o, x, 200, "application/json");
}

static void get_snapshot(coll_t *c, tg_http_exchange_t *x, uint64_t id) {
  answer_row(c, x, id, false);
}

static void get_trace(coll_t *c, tg_http_exchange_t *x, uint64_t id) {
  int fd;
  int rv = tg_coll_store_open_file(c->store, id, &fd);
  if (rv == -ENOENT) return json_error(x, 404, "no such snapshot, or it holds no trace");
  if (rv < 0) return json_error(x, 503, tg_strerror(rv));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return json_error(x, 500, "cannot read the snapshot");
  }
  char idt[TG_COLL_ID_STRLEN], name[64];
  tg_coll_id_format(id, idt);
  snprintf(name, sizeof(name), "tracegate-%s.pftrace", idt);
  if (tg_http_respond_file(x, 200, "application/octet-stream", fd,
                           (uint64_t)st.st_size, name) < 0)
    json_error(x, 500, "cannot send the snapshot");
}

static void answer_snapshot(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                            int status) {
  if (status == 200) return answer_row(c, x, id, true);
  out_t o;
  if (!out_open(&o)) return json_error(x, 500, "out of memory");
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  fprintf(o.f, "{\"id\":\"%s\"}\n", idt);
  char loc[64];
  snprintf(loc, sizeof(loc), API "/snapshots/%s", idt);
  tg_http_add_header(x, "Location", loc);
  out_send(&o, x, status, "application/json");
}

static void post_snapshot(coll_t *c, tg_http_exchange_t *x,
                          const tg_http_request_t *r) {
  const char *reason = arg(r, "reason");
  const char *group = arg(r, "group");
  const char *wait = arg(r, "wait");
  if (!group) group = "all";
  if (reason && strlen(reason) > TG_COLL_REASON_MAX)
    return json_error(x, 400, "reason: at most 1024 bytes");
  if (strcmp(group, "all") != 0 && !tg_coll_config_group(&c->cfg, group))
    return json_error(x, 400, "group: not a group of the config");
  if (wait && strcmp(wait, "0") && strcmp(wait, "1"))
    return json_error(x, 400, "wait: 0 or 1");
  bool waiting = wait && !strcmp(wait, "1");
  if (waiting && n_waiters >= WAIT_MAX)
    return json_error(x, 503, "too many requests waiting for snapshots");
  char who[160];
  snprintf(who, sizeof(who), "%s%s", r->identity[0] ? r->identity : "",
           r->identity[0] ? "" : "local");
  coll_trigger_req_t t = {.trigger = "operator",
                          .reason = reason ? reason : "",
                          .origin = "",
                          .group = group};
  uint64_t id;
  int rv = coll_trigger(c, &t, &id);
  if (rv == -EAGAIN)
    return json_error(x, 429, "over the operators' budget "
                      "(operator_snapshots_per_minute): not taken");
  if (rv < 0) return json_error(x, 503, tg_strerror(rv));
  TG_INFO("snapshot requested over HTTP by %s%s", who,
          id ? "" : " (folded into the one queued)");
  if (!waiting) {
    if (id) return answer_snapshot(c, x, id, 202);
    return json_error(x, 202, "queued: it begins when the one under way ends");
  }
  waiter_t *w = calloc(1, sizeof(*w));
  if (!w) return json_error(x, 500, "out of memory");
  w->x = x;
  w->id = id;
  tg_list_insert_tail(&waiters, &w->node);
  n_waiters++;
  /* The snapshot may already have ended (no host to ask). */
  if (id && !coll_snap_under_way(c, id)) {
    tg_list_remove(&w->node);
    n_waiters--;
    free(w);
    answer_snapshot(c, x, id, 200);
  }
}

static void post_pin(coll_t *c, tg_http_exchange_t *x,
                     const tg_http_request_t *r, uint64_t id) {
  const char *p = arg(r, "pinned");
  /* One spelling per value, as documented: 0 or 1 (absent: 1). */
  if (p && strcmp(p, "0") && strcmp(p, "1"))
    return json_error(x, 400, "pinned: 0 or 1");
  bool pin = !p || !strcmp(p, "1");
  int rv = tg_coll_store_pin(c->store, id, pin);
  if (rv == -ENOENT) return json_error(x, 404, "no such snapshot");
  if (rv < 0) return json_error(x, 503, tg_strerror(rv));
  get_snapshot(c, x, id);
}

/* Prometheus text format 0.0.4. */
static void get_metrics(coll_t *c, tg_http_exchange_t *x) {
  out_t o;
  if (!out_open(&o)) return json_error(x, 500, "out of memory");
  size_t by[COLL_HOST_STATE_COUNT] = {0};
  for (size_t i = 0; i < c->n; i++) by[c->hosts[i]->state]++;
  fputs("# HELP tracegate_collector_hosts Hosts of this collector's shard by "
        "state.\n# TYPE tracegate_collector_hosts gauge\n", o.f);
  for (int j = 0; j < COLL_HOST_STATE_COUNT; j++)
    fprintf(o.f, "tracegate_collector_hosts{state=\"%s\"} %zu\n",
            coll_host_state_name((coll_host_state_t)j), by[j]);
  const coll_counts_t *k = &c->counts;
  fputs("# HELP tracegate_collector_snapshots_total Snapshots finished, by "
        "outcome.\n# TYPE tracegate_collector_snapshots_total counter\n", o.f);
  for (int s = 1; s < TG_COLL_STATE_COUNT; s++)
    fprintf(o.f, "tracegate_collector_snapshots_total{outcome=\"%s\"} %" PRIu64 "\n",
            tg_coll_state_name((tg_coll_state_t)s), k->snapshots[s]);
  fprintf(o.f, "tracegate_collector_snapshots_total{outcome=\"error\"} %" PRIu64 "\n",
          k->snapshot_errors);
  fprintf(o.f,
          "# HELP tracegate_collector_trigger_hits_total Triggers received.\n"
          "# TYPE tracegate_collector_trigger_hits_total counter\n"
          "tracegate_collector_trigger_hits_total %" PRIu64 "\n"
          "# HELP tracegate_collector_triggers_coalesced_total Triggers served "
          "by a snapshot already under way or queued.\n"
          "# TYPE tracegate_collector_triggers_coalesced_total counter\n"
          "tracegate_collector_triggers_coalesced_total %" PRIu64 "\n"
          "# HELP tracegate_collector_stored_bytes_total Bytes of snapshots "
          "stored.\n# TYPE tracegate_collector_stored_bytes_total counter\n"
          "tracegate_collector_stored_bytes_total %" PRIu64 "\n"
          "# HELP tracegate_collector_host_loss_total Loss counters of hosts' "
          "rings in snapshots (chunks discarded, patches failed, ABI "
          "violations, writer packet loss, malformed packets).\n"
          "# TYPE tracegate_collector_host_loss_total counter\n"
          "tracegate_collector_host_loss_total %" PRIu64 "\n",
          k->trigger_hits, k->triggers_coalesced, k->bytes_stored,
          k->host_loss);
  fputs("# HELP tracegate_collector_triggers_capped_total Triggers refused, "
        "by the budget that had nothing left.\n"
        "# TYPE tracegate_collector_triggers_capped_total counter\n", o.f);
  for (int b = 0; b < TG_TRIGGER_BUDGET_COUNT; b++)
    fprintf(o.f, "tracegate_collector_triggers_capped_total{budget=\"%s\"} %" PRIu64 "\n",
            tg_trigger_budget_name((tg_trigger_budget_id_t)b),
            k->triggers_capped[b]);
  fputs("# HELP tracegate_collector_snapshot_duration_seconds From trigger "
        "to stored.\n# TYPE tracegate_collector_snapshot_duration_seconds "
        "histogram\n", o.f);
  for (size_t i = 0; i < 8; i++)
    fprintf(o.f, "tracegate_collector_snapshot_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
            coll_dur_bounds_ms[i] / 1000.0, k->dur_buckets[i]);
  fprintf(o.f, "tracegate_collector_snapshot_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
          "tracegate_collector_snapshot_duration_seconds_sum %.3f\n"
          "tracegate_collector_snapshot_duration_seconds_count %" PRIu64 "\n",
          k->dur_count, k->dur_sum_s, k->dur_count);
  tg_http_server_stats_t hs = {0};
  if (c->http) tg_http_server_stats(c->http, &hs);
  fprintf(o.f,
          "# HELP tracegate_collector_http_refused_total HTTP(S) connections "
          "closed at accept, by the cap they were over.\n"
          "# TYPE tracegate_collector_http_refused_total counter\n"
          "tracegate_collector_http_refused_total{reason=\"per_source\"} "
          "%" PRIu64 "\n"
          "tracegate_collector_http_refused_total{reason=\"max_conns\"} "
          "%" PRIu64 "\n",
          hs.refused_per_source, hs.refused_max_conns);
  out_send(&o, x, 200, "text/plain; version=0.0.4");
}

/* /api/v1/snapshots/ID[/what]: the id's 16 digits, parsed, and the rest. */
static bool snapshot_path(const char *path, uint64_t *id, const char **rest) {
  const char *p = path + strlen(API "/snapshots/");
  const char *slash = strchr(p, '/');
  size_t n = slash ? (size_t)(slash - p) : strlen(p);
  if (tg_coll_id_parse(p, n, id) < 0) return false;
  *rest = slash ? slash : "";
  return true;
}

/* A web page the operator has open can send requests to a loopback
 * listener (a form, a no-cors fetch) or reach it under a name it controls
 * (DNS rebinding). So over plain HTTP the Host must be a loopback name
 * with this listener's port, and whatever the scheme an Origin, when
 * there is one, must be this listener's own (the web page's requests):
 * tools (python, curl, tracegate snapshot) send none. */
static bool host_ok(const coll_t *c, const char *host) {
  char name[300];
  const char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
  size_t n = colon ? (size_t)(colon - host) + (host[0] == '[') : strlen(host);
  if (n >= sizeof(name)) return false;
  memcpy(name, host, n);
  name[n] = 0;
  if (colon) {
    uint64_t port;
    if (tg_decimal_u64(colon + (host[0] == '[' ? 2 : 1), 65535, &port) < 0 ||
        port != tg_http_server_port(c->http))
      return false;
  }
  return !strcmp(name, "127.0.0.1") || !strcasecmp(name, "localhost") ||
         !strcmp(name, "[::1]") || !strcmp(name, c->cfg.listen_host);
}

static bool origin_ok(const tg_http_request_t *r) {
  if (!r->origin[0]) return true;
  char own[320];
  snprintf(own, sizeof(own), "%s://%s", r->tls ? "https" : "http", r->host);
  return !strcmp(r->origin, own);
}

static void handle(void *ctx, tg_http_exchange_t *x,
                   const tg_http_request_t *r) {
  coll_t *c = ctx;
  /* HEAD: download tools ask a trace's size with it. */
  bool get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
  bool post = !strcmp(r->method, "POST");
  /* HTTPS: the layer refused every identity without a role. */
  tg_authz_role_t role = r->tls ? r->role : TG_ROLE_RECORD;
  TG_DEBUG("http %s %s (%s)", r->method, r->path, r->tls ? r->identity : "plain");
  if (role == TG_ROLE_NONE)
    return json_error(x, 403, "this certificate's identity has no role here");
  if ((!r->tls && !host_ok(c, r->host)) || !origin_ok(r))
    return json_error(x, 403, "another site's request (Host or Origin)");
  if (post && role != TG_ROLE_RECORD)
    return json_error(x, 403, "triggering and pinning need the record role");
  const char *p = r->path;
  if (!strcmp(p, "/") || !strcmp(p, "/index.html")) {
    if (!get) return json_error(x, 405, "GET only");
    return coll_page_send(c, x);
  }
  if (!strcmp(p, "/app.js")) {
    if (!get) return json_error(x, 405, "GET only");
    return coll_app_js_send(c, x);
  }
  if (!strcmp(p, "/healthz")) {
    static const char ok[] = "{\"status\":\"ok\"}\n";
    tg_http_respond(x, 200, "application/json", ok, sizeof(ok) - 1);
    return;
  }
  if (!strcmp(p, "/metrics")) {
    if (!get) return json_error(x, 405, "GET only");
    return get_metrics(c, x);
  }
  if (!strcmp(p, API "/hosts")) {
    if (!get) return json_error(x, 405, "GET only");
    if (!args_ok(x, r, no_args)) return;
    return get_hosts(c, x);
  }
  if (!strcmp(p, API "/snapshots")) {
    static const char *const list_args[] = {"from",  "to",      "limit", "before",
                                            "state", "trigger", "host",  NULL};
    static const char *const post_args[] = {"reason", "group", "wait", NULL};
    if (!get && !post) return json_error(x, 405, "GET or POST");
    if (!args_ok(x, r, get ? list_args : post_args)) return;
    if (get) return list_snapshots(c, x, r);
    return post_snapshot(c, x, r);
  }
  uint64_t id;
  const char *rest;
  if (!strncmp(p, API "/snapshots/", strlen(API "/snapshots/"))) {
    if (!snapshot_path(p, &id, &rest))
      return json_error(x, 404, "not a snapshot id: " ID_FORM);
    if (!*rest) {
      if (!get) return json_error(x, 405, "GET only");
      if (!args_ok(x, r, no_args)) return;
      return get_snapshot(c, x, id);
    }
    if (!strcmp(rest, "/trace")) {
      if (!get) return json_error(x, 405, "GET only");
      if (!args_ok(x, r, no_args)) return;
      return get_trace(c, x, id);
    }
    if (!strcmp(rest, "/pin")) {
      static const char *const pin_args[] = {"pinned", NULL};
      if (!post) return json_error(x, 405, "POST only");
      if (!args_ok(x, r, pin_args)) return;
      return post_pin(c, x, r, id);
    }
  }
  json_error(x, 404, "no such resource");
}

static void on_abandon(void *ctx, tg_http_exchange_t *x) {
  (void)ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->x != x) continue;
    tg_list_remove(&w->node);
    n_waiters--;
    free(w);
  }
}

void coll_api_snapshot_done(coll_t *c, coll_snap_t *s) {
  uint64_t id = coll_snap_id(s);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id != id) continue;
    tg_list_remove(&w->node);
    n_waiters--;
    tg_http_exchange_t *x = w->x;
    free(w);
    tg_coll_state_t st;
    if (coll_snap_result(s, &st) < 0)
      json_error(x, 500, "the snapshot could not be stored (see the log)");
    else
      answer_snapshot(c, x, id, 200);
  }
}

void coll_api_queued_begun(coll_t *c, uint64_t id) {
  /* It may have ended inside its begin (no host to ask, a store error):
   * then its waiters are answered now, nothing else would. */
  bool over = !coll_snap_under_way(c, id);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id) continue;
    w->id = id;
    if (!over) continue;
    tg_list_remove(&w->node);
    n_waiters--;
    tg_http_exchange_t *x = w->x;
    free(w);
    answer_snapshot(c, x, id, 200);
  }
}

void coll_api_queued_failed(coll_t *c, int err) {
  (void)c;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id) continue;
    tg_list_remove(&w->node);
    n_waiters--;
    json_error(w->x, 503, tg_strerror(err));
    free(w);
  }
}

static void write_ready(coll_t *c) {
  if (c->ready_fd <= 0) return;
  char line[32];
  int n = snprintf(line, sizeof(line), "ready %u\n",
                   (unsigned)tg_http_server_port(c->http));
  ssize_t w = write(c->ready_fd, line, (size_t)n);
  (void)w; /* a parent that went away is told nothing either way */
  close(c->ready_fd);
  c->ready_fd = 0;
}

int coll_api_start(coll_t *c) {
  tg_list_init(&waiters);
  const tg_coll_config_t *g = &c->cfg;
  tg_authz_t *authz;
  tg_crl_t *crl;
  char err[640];
  if (coll_access_load(g, &authz, &crl, err, sizeof(err)) < 0) {
    fprintf(stderr, COLL_PROG ": %s\n", err);
    return -1;
  }
  tg_http_server_config_t hc = {
      /* The layer binds IP literals; the config also takes "localhost". */
      .host = strcasecmp(g->listen_host, "localhost") ? g->listen_host
                                                      : "127.0.0.1",
      .port = g->listen_port,
      .cert = g->https ? g->http_cert : NULL,
      .key = g->https ? g->http_key : NULL,
      .ca = g->https ? g->http_ca : NULL,
      .max_body = 64 * 1024,
      .max_conns = g->http_max_conns,
      .max_conns_per_source = g->http_max_conns_per_source,
      /* Whole seconds, rounded up: the HTTP layer counts in seconds. */
      .timeout_s = (unsigned)((g->http_timeout_ms + 999) / 1000),
      .min_rate = g->http_min_rate,
      .authz = authz,
      .crl = crl,
  };
  int rv = tg_http_server_start(c->loop, &hc, handle, on_abandon, c, &c->http);
  if (rv < 0) {
    tg_authz_free(authz);
    tg_crl_free(crl);
    fprintf(stderr, COLL_PROG ": cannot listen on %s:%u: %s\n", g->listen_host,
            (unsigned)g->listen_port, tg_strerror(rv));
    return -1;
  }
  TG_INFO("listening on %s://%s:%u/", g->https ? "https" : "http",
          g->listen_host, (unsigned)tg_http_server_port(c->http));
  write_ready(c);
  return 0;
}

void coll_api_stop(coll_t *c) {
  if (c->http) tg_http_server_stop(c->http, NULL, NULL);
  c->http = NULL;
}
