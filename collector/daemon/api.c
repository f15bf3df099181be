/* The collector's HTTP API, /metrics and the web page (coll.h;
 * docs/collector.md, "HTTP API"). The transport is collector/http/http.h
 * (libwebsockets); this file maps requests to the collector through its
 * table of routes (routes.h, the table at the end) and answers in JSON
 * (api_parts.h writes it).
 *
 *   GET  /                                 the web page (page.c)
 *   GET  /app.js, /style.css               its script and style
 *   GET  /api/v1/hosts                     the shard's hosts and their state
 *   GET  /api/v1/store                     the snapshot store and its health
 *   GET  /api/v1/snapshots?from=&to=&trigger=&host=&state=&before=&limit=
 *   GET  /api/v1/snapshots/ID              one snapshot and its hosts
 *   GET  /api/v1/snapshots/ID/trace?host=H[,H2]  the merged trace
 *                                          (download), or those hosts' part
 *   GET  /api/v1/snapshots/ID/profile?host=H&format=pprof  that host's CPU
 *                                          profile (api_profile.c)
 *   GET  /api/v1/functions?name=F&host=&min_share=&by=&from=&to=&limit=&after=
 *                                          a function's shares across
 *                                          snapshots (api_functions.c)
 *   POST /api/v1/snapshots?reason=&group=&wait=1   trigger a snapshot
 *   POST /api/v1/snapshots/ID/pin?pinned=0|1
 *   POST /api/v1/alertmanager              Alertmanager's webhook
 *   GET  /metrics                          Prometheus text format
 *   GET  /healthz
 *
 * Every GET also answers HEAD (the HTTP layer leaves the body out); any
 * other method of a known path is 405.
 *
 * Who may do what: over plain HTTP (loopback only, config.c) everyone
 * everything; over HTTPS the client certificate's CN, looked up exactly in
 * the authz file: observe reads, record also triggers and pins.
 *
 * Untrusted input: ids go through tg_coll_id_parse() and nothing else
 * reaches the file system; a request under /api/v1 takes only its own
 * arguments, each once, and numbers and flags parsed whole (else 400);
 * text filters go to the catalog as bound parameters; every answer is a
 * jansson tree written once, its text under common/json.h's rule.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/daemon/boost.h"
#include "collector/daemon/api_parts.h"
#include "collector/daemon/coll.h"
#include "collector/daemon/work.h"
#include "collector/daemon/access.h"
#include "collector/daemon/api.h"
#include "collector/daemon/api_internal.h"
#include "collector/daemon/hosts.h"
#include "collector/daemon/snap.h"
#include "collector/daemon/trigger.h"
#include "collector/daemon/webhook.h"
#include "collector/daemon/routes.h"
#include "collector/daemon/shares.h"
#include "collector/daemon/symbols.h"
#include "collector/http/http.h"
#include "collector/store/snap_index.h"
#include "collector/catalog/snapshot_id.h"
#include "common/decimal.h"
#include "common/json.h"
#include "common/log.h"
#include "consumer/fleet/merge.h"
#include "auth/authz.h"
#include "tracegate/error.h"

#define API "/api/v1"
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

/* Answers |x| with |doc| (taken: a new reference, or NULL when building
 * it ran out of memory, which is a 500 without a body), written once. */
static void respond_json(tg_http_exchange_t *x, int status, json_t *doc) {
  out_t o;
  int rv = doc && out_open(&o) ? 0 : -ENOMEM;
  if (rv == 0 && (rv = tg_json_dumpf_line(doc, o.f, JSON_COMPACT)) < 0) {
    fclose(o.f);
    free(o.buf);
  }
  json_decref(doc);
  if (rv < 0) {
    TG_WARN("http: cannot write a %d answer: %s", status, tg_strerror(rv));
    tg_http_respond(x, 500, NULL, NULL, 0);
    return;
  }
  out_send(&o, x, status, "application/json");
}

static void json_error(tg_http_exchange_t *x, int status, const char *why) {
  respond_json(x, status, json_pack("{s:o}", "error", tg_json_text(why)));
}

void coll_api_respond_json(tg_http_exchange_t *x, int status, json_t *doc) {
  respond_json(x, status, doc);
}

void coll_api_json_error(tg_http_exchange_t *x, int status, const char *why) {
  json_error(x, status, why);
}

static const char *arg(const tg_http_request_t *r, const char *name) {
  return coll_route_arg(r->args, r->n_args, name);
}

/* --- routes ----------------------------------------------------------------------- */

/* A host's ring's problems (coll.h): what its service does not offer,
 * then what its last snapshot found. */
static json_t *ring_problems(const coll_host_t *h) {
  json_t *a = json_array();
  const tg_ds_problems_t *lists[2] = {h->not_offered, h->seen};
  for (size_t l = 0; l < 2; l++)
    for (size_t i = 0; a && lists[l] && i < lists[l]->n; i++)
      a = tg_json_push(a, tg_ds_problem_json(&lists[l]->items[i]));
  return a;
}

static void get_hosts(coll_t *c, tg_http_exchange_t *x,
                      const tg_http_request_t *r, uint64_t id) {
  (void)r, (void)id;
  json_t *hosts = json_array();
  for (size_t i = 0; hosts && i < c->n; i++) {
    const coll_host_t *h = c->hosts[i];
    hosts = tg_json_push(
        hosts,
        json_pack("{s:o, s:o, s:s, s:I, s:b, s:o, s:o, s:o, s:o, s:o, s:o}",
                  "host", tg_json_text(h->t.spec),
                  "name", tg_json_text(h->t.label),
                  "state", coll_host_state_name(h->state),
                  "since_ms", (json_int_t)h->since_ms, "ring", h->ring_up,
                  "restarts", tg_json_u64(h->restarts),
                  "failures", tg_json_u64(h->failures),
                  "why", tg_json_text(h->why),
                  "hostname", tg_json_text(h->fh && h->fh->report.has_info
                                               ? h->fh->report.hostname : ""),
                  "problems", ring_problems(h),
                  "boost", coll_boost_host_json(c, h)));
  }
  char shard[32];
  snprintf(shard, sizeof(shard), "%u/%u", c->cfg.shard_index,
           c->cfg.shard_count);
  respond_json(x, 200, json_pack("{s:s, s:o, s:o}", "shard", shard,
                                 "inventory", tg_json_u64(c->inventory),
                                 "hosts", hosts));
}

/* Where snapshots go and, for a bucket, how it answered of late
 * (tg_s3_stats_t): the page shows a bucket that is not "ok". */
static void get_store(coll_t *c, tg_http_exchange_t *x,
                      const tg_http_request_t *r, uint64_t id) {
  (void)r, (void)id;
  tg_coll_store_desc_t d;
  tg_coll_store_describe(c->store, &d);
  if (!d.has_stats) {
    respond_json(x, 200, json_pack("{s:s, s:s}", "kind",
                                   tg_coll_store_kind_name(d.kind), "state",
                                   "ok"));
    return;
  }
  const tg_s3_stats_t *b = &d.stats;
  json_t *err = json_null();
  if (b->error_ms)
    err = json_pack("{s:I, s:s, s:i, s:o, s:o}", "at_ms",
                    (json_int_t)b->error_ms, "method", b->error_method,
                    "status", b->error_status, "code",
                    tg_json_text(b->error_code), "error",
                    tg_json_text(b->error_text));
  respond_json(x, 200,
               json_pack("{s:s, s:o, s:s, s:I, s:o, s:o, s:o, s:o, s:o}",
                         "kind", tg_coll_store_kind_name(d.kind), "bucket",
                         tg_json_text(d.url), "state",
                         tg_s3_health_name(b->health), "since_ms",
                         (json_int_t)b->since_ms, "requests",
                         tg_json_u64(b->requests), "retries",
                         tg_json_u64(b->retries), "throttled",
                         tg_json_u64(b->throttled), "failures",
                         tg_json_u64(b->failures), "last_error", err));
}

static void list_snapshots(coll_t *c, tg_http_exchange_t *x,
                           const tg_http_request_t *r, uint64_t no_id) {
  (void)no_id;
  tg_coll_filter_t f;
  const char *why;
  if (coll_list_filter(r->args, r->n_args, &f, &why) < 0)
    return json_error(x, 400, why);
  tg_coll_snapshot_t *rows = calloc(f.limit, sizeof(*rows));
  if (!rows) return json_error(x, 500, "out of memory");
  size_t n = 0;
  int rv = tg_coll_store_list(c->store, &f, rows, f.limit, &n);
  if (rv < 0) {
    free(rows);
    return json_error(x, 503, tg_strerror(rv));
  }
  json_t *list = json_array();
  for (size_t i = 0; list && i < n; i++)
    list = tg_json_push(list, coll_json_snapshot(&rows[i]));
  json_t *next = json_null();
  if (n == f.limit && n) {
    char id[TG_COLL_ID_STRLEN];
    tg_coll_id_format(rows[n - 1].id, id);
    next = json_string(id);
  }
  free(rows);
  respond_json(x, 200, json_pack("{s:o, s:o}", "snapshots", list,
                                 "next_before", next));
}

/* 404 for a snapshot that is not (or no longer) there, with its id: a
 * caller that waited for |id| learns it was stored, then deleted. */
static void snapshot_gone(tg_http_exchange_t *x, uint64_t id, bool stored) {
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  respond_json(x, 404, json_pack("{s:s, s:s, s:b}", "error",
                                 stored ? "stored, then deleted (retention) "
                                          "before this answer"
                                        : "no such snapshot",
                                 "id", idt, "deleted", stored));
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
  /* The hosts' links summed in the snapshot's (those shown, when
   * truncated). */
  json_t *snap = tg_json_put(coll_json_snapshot(&s), "links",
                             coll_json_snap_links(hosts, n));
  json_t *doc = json_pack("{s:o, s:o, s:b, s:o}", "snapshot", snap, "hosts",
                          coll_json_snap_hosts(hosts, n), "hosts_truncated",
                          truncated, "symbols", coll_symbols_json(c, id));
  free(hosts);
  respond_json(x, 200, doc);
}

static void get_snapshot(coll_t *c, tg_http_exchange_t *x,
                         const tg_http_request_t *r, uint64_t id) {
  (void)r;
  answer_row(c, x, id, false);
}

/* "tracegate-<id>-<host>.pftrace" (the host's bytes outside
 * [A-Za-z0-9._-] as '_'), or "-<n>-hosts" for several. */
static void part_name(char *out, size_t cap, const char *idt,
                      const char *host, size_t n_hosts) {
  if (n_hosts != 1) {
    snprintf(out, cap, "tracegate-%s-%zu-hosts.pftrace", idt, n_hosts);
    return;
  }
  char safe[TG_COLL_HOST_MAX + 1];
  size_t k = 0;
  for (; host[k] && k < TG_COLL_HOST_MAX; k++) {
    char ch = host[k];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
    safe[k] = ok ? ch : '_';
  }
  safe[k] = 0;
  snprintf(out, cap, "tracegate-%s-%s.pftrace", idt, safe);
}

/* ?host=H[,H2...]: those hosts' part of snapshot |id| (the file |fd| of
 * |size| bytes, taken): the trace's head and their bytes, in file order,
 * where the snapshot's host index says they are (collector/store/snap_index.h;
 * docs/collector.md, "One host's part"). The cost is the index's host
 * table and those hosts' extent lists, read on the loop, and their bytes,
 * streamed: never a pass over the whole file. */
/* The extents of the symbols file |sfd| that go with |hosts| (names of
 * the trace's index), through the symbols' own index |sifd|: appended to
 * *ext (second file). Symbols without a usable index are left out of the
 * part (logged): the part is still the hosts' whole trace, unnamed. */
static int add_symbols(uint64_t id, int sfd, int sifd,
                       const tg_coll_index_t *ix, const size_t *want, size_t n,
                       tg_http_extent_t **ext, size_t *n_ext) {
  struct stat st;
  tg_coll_index_t six = {0};
  size_t *sw = NULL, k = 0;
  tg_coll_extent_t *plan = NULL;
  size_t n_plan = 0;
  uint64_t bytes;
  int rv = 0;
  if (sifd < 0 || fstat(sfd, &st) != 0 ||
      tg_coll_index_read(sifd, (uint64_t)st.st_size, &six) != 0) {
    TG_WARN("snapshot %016" PRIx64 ": its symbols have no usable host index: "
            "its host parts are served without them", id);
    goto out;
  }
  if (!(sw = calloc(n ? n : 1, sizeof(*sw)))) {
    rv = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    const char *name = ix->hosts[want[i]].name;
    if (tg_coll_index_find(&six, name, strlen(name), &sw[k]) == 0) k++;
  }
  if (k && (rv = tg_coll_index_plan(&six, sifd, sw, k, &plan, &n_plan,
                                    &bytes)) < 0) {
    if (rv == TG_EPARSE) {
      TG_WARN("snapshot %016" PRIx64 ": its symbols' host index does not "
              "describe them: its host parts are served without them", id);
      rv = 0;
    }
    n_plan = 0;
    goto out;
  }
  if (n_plan) {
    tg_http_extent_t *g = realloc(*ext, (*n_ext + n_plan) * sizeof(*g));
    if (!g) {
      rv = -ENOMEM;
      goto out;
    }
    *ext = g;
    for (size_t i = 0; i < n_plan; i++)
      g[(*n_ext)++] = (tg_http_extent_t){plan[i].off, plan[i].len, true};
  }
out:
  tg_coll_index_free(&six);
  free(sw);
  free(plan);
  return rv;
}

/* coll_api_plan_part's answers: none for a NULL |x| (a snapshot looked
 * at for another's sake: the caller skips it). */
static void part_respond(tg_http_exchange_t *x, int status, json_t *doc) {
  if (x) respond_json(x, status, doc);
  else json_decref(doc);
}

static void part_error(tg_http_exchange_t *x, int status, const char *why) {
  if (x) json_error(x, status, why);
}

/* A host index that cannot be used (|what| of it, or error |rv|): logged
 * with the snapshot, and 500 with what can still be downloaded. */
static void index_unusable(tg_http_exchange_t *x, const char *idt,
                           const char *what, int rv) {
  if (rv == TG_EPARSE)
    TG_ERROR("snapshot %s: its host index cannot be used: %s (damaged or "
             "edited)", idt, what);
  else
    TG_ERROR("snapshot %s: its host index cannot be used: %s", idt,
             tg_strerror(rv));
  part_error(x, 500, rv == TG_EPARSE
                         ? "this snapshot's host index is damaged (see the "
                           "collector's log): only its whole trace can be "
                           "downloaded"
                         : tg_strerror(rv));
}

int coll_api_open_index(coll_t *c, uint64_t id) {
  int fd = -1;
  int rv = tg_coll_store_open_index(c->store, id, &fd);
  return rv < 0 ? rv : fd;
}

int coll_api_plan_part(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                       const char *list, uint64_t size, int ifd, int sfd,
                       int sifd, coll_part_t *part) {
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  memset(part, 0, sizeof(*part));
  tg_coll_index_t ix = {0};
  size_t *want = NULL, n = 0;
  tg_coll_extent_t *plan = NULL;
  tg_http_extent_t *ext = NULL;
  int answered = -1;
  int rv = ifd < 0 ? ifd : 0;
  tg_coll_snapshot_t row;
  /* Deleted since its file was opened: the index went with it. */
  if (rv == -ENOENT && tg_coll_store_get(c->store, id, &row) == -ENOENT) {
    part_error(x, 404, "no such snapshot, or it holds no trace");
    goto out;
  }
  if (rv == -ENOENT) {
    part_respond(x, 409, json_pack("{s:s, s:s}", "error",
                                   "this snapshot has no host index: only its "
                                   "whole trace can be downloaded", "id", idt));
    goto out;
  }
  if (rv < 0) {
    part_error(x, 503, tg_strerror(rv));
    goto out;
  }
  rv = tg_coll_index_read(ifd, size, &ix);
  if (rv < 0) {
    index_unusable(x, idt, "it does not describe the trace", rv);
    goto out;
  }
  want = calloc(ix.n_hosts, sizeof(*want));
  if (!want) {
    part_error(x, 500, "out of memory");
    goto out;
  }
  const char *first = NULL;
  for (const char *p = list;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len < 1 || len > TG_COLL_HOST_MAX) {
      part_error(x, 400, "host: a comma-separated list of the snapshot's "
                         "hosts (each 1 to 320 bytes)");
      goto out;
    }
    size_t h;
    if (tg_coll_index_find(&ix, p, len, &h) < 0) {
      char name[TG_COLL_HOST_MAX + 1];
      snprintf(name, sizeof(name), "%.*s", (int)len, p);
      part_respond(x, 404, json_pack("{s:s, s:s, s:o}", "error",
                                     "no such host in this snapshot", "id", idt,
                                     "host", tg_json_text(name)));
      goto out;
    }
    bool again = false;
    for (size_t i = 0; i < n; i++) again |= want[i] == h;
    if (!again) want[n++] = h;
    if (!first) {
      first = ix.hosts[h].name;
      part->first_index = h;
    }
    if (!comma) break;
    p = comma + 1;
  }
  size_t n_ext;
  uint64_t bytes;
  rv = tg_coll_index_plan(&ix, ifd, want, n, &plan, &n_ext, &bytes);
  if (rv < 0) {
    index_unusable(x, idt, "an extent list does not describe the trace", rv);
    goto out;
  }
  ext = malloc((n_ext ? n_ext : 1) * sizeof(*ext));
  if (!ext) {
    part_error(x, 500, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < n_ext; i++)
    ext[i] = (tg_http_extent_t){plan[i].off, plan[i].len, false};
  if (sfd >= 0) {
    rv = add_symbols(id, sfd, sifd, &ix, want, n, &ext, &n_ext);
    if (rv < 0) {
      part_error(x, 500, rv == -ENOMEM ? "out of memory"
                                       : "cannot read the snapshot's symbols");
      goto out;
    }
  }
  part->ext = ext;
  part->n_ext = n_ext;
  part->n_hosts = n;
  part->n_index_hosts = ix.n_hosts;
  part->bytes = bytes;
  snprintf(part->first, sizeof(part->first), "%s", first);
  ext = NULL;
  answered = 0;
out:
  if (ifd >= 0) close(ifd);
  tg_coll_index_free(&ix);
  free(want);
  free(plan);
  free(ext);
  return answered;
}

/* |sfd| and |sifd| (-1: none) are the snapshot's symbols and their
 * index, taken like |fd|. */
static void get_host_trace(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                           const char *list, int fd, uint64_t size, int ifd,
                           int sfd, int sifd) {
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  coll_part_t part;
  if (coll_api_plan_part(c, x, id, list, size, ifd, sfd, sifd, &part) < 0) {
    close(fd);
    if (sfd >= 0) close(sfd);
    if (sifd >= 0) close(sifd);
    return;
  }
  if (sifd >= 0) close(sifd);
  char name[TG_COLL_HOST_MAX + 64];
  part_name(name, sizeof(name), idt, part.first, part.n_hosts);
  TG_DEBUG("snapshot %s: %zu host(s) of %zu: %zu extents, %" PRIu64
           " of %" PRIu64 " bytes", idt, part.n_hosts, part.n_index_hosts,
           part.n_ext, part.bytes, size);
  if (tg_http_respond_extents2(x, 200, "application/octet-stream", fd, sfd,
                               part.ext, part.n_ext, name) < 0)
    json_error(x, 500, "cannot send the snapshot");
  free(part.ext);
}

/* s3_presign: the whole trace from the bucket, the collector out of the
 * path: 302 to a URL that reads the object until it expires. */
static bool redirect_to_bucket(coll_t *c, tg_http_exchange_t *x, uint64_t id) {
  char url[4096];
  int64_t s = c->cfg.s3_presign_ms / 1000;
  int rv = tg_coll_store_presign(c->store, id, (uint32_t)s, url, sizeof(url));
  if (rv == -ENOENT) {
    json_error(x, 404, "no such snapshot, or it holds no trace");
    return true;
  }
  if (rv < 0) {
    TG_WARN("snapshot %016" PRIx64 ": no presigned URL (%s): served by the "
            "collector", id, tg_strerror(rv));
    return false;
  }
  if (tg_http_add_header(x, "Location", url) < 0) return false;
  respond_json(x, 302, json_pack("{s:s, s:I}", "url", url, "expires_s",
                                 (json_int_t)s));
  return true;
}

/* The answer to /trace once the snapshot's file is at hand (|rv| how
 * getting it went, |fd| it, |sfd| and |sifd| its symbols and their index
 * (-1: none), all taken; with |hosts|, |ifd| its host index, taken, or
 * how opening it failed (coll_api_plan_part), else -1). */
static void serve_trace(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                        const char *hosts, int rv, int fd, int ifd, int sfd,
                        int sifd) {
  struct stat st;
  if (!rv && fstat(fd, &st) != 0) rv = -EIO;
  if (rv < 0 || !hosts) {
    if (ifd >= 0) close(ifd);
    ifd = -1;
  }
  if (rv < 0) {
    if (fd >= 0) close(fd);
    if (sfd >= 0) close(sfd);
    if (sifd >= 0) close(sifd);
  }
  if (rv == -ENOENT) return json_error(x, 404, "no such snapshot, or it holds no trace");
  if (rv == -EIO) return json_error(x, 500, "cannot read the snapshot");
  if (rv < 0) return json_error(x, 503, tg_strerror(rv));
  if (hosts)
    return get_host_trace(c, x, id, hosts, fd, (uint64_t)st.st_size, ifd, sfd,
                          sifd);
  char idt[TG_COLL_ID_STRLEN], name[64];
  tg_coll_id_format(id, idt);
  snprintf(name, sizeof(name), "tracegate-%s.pftrace", idt);
  /* The trace, then its symbols when it has some: ModuleSymbols come
   * after the frames they name. */
  tg_http_extent_t ext[2] = {{0, (uint64_t)st.st_size, false}};
  size_t n_ext = 1;
  struct stat sst;
  if (sifd >= 0) close(sifd);
  if (sfd >= 0) {
    if (fstat(sfd, &sst) == 0 && sst.st_size > 0) {
      ext[n_ext++] = (tg_http_extent_t){0, (uint64_t)sst.st_size, true};
    } else {
      close(sfd);
      sfd = -1;
    }
  }
  if (tg_http_respond_extents2(x, 200, "application/octet-stream", fd, sfd,
                               ext, n_ext, name) < 0)
    json_error(x, 500, "cannot send the snapshot");
}

/* A bucket's snapshot is downloaded on a worker thread (the loop goes on
 * serving rings and requests), its symbols with it (and its host index, for
 * a host's part), then served as a file is. With s3_presign, the worker
 * first asks whether the snapshot has symbols: without, the answer is the
 * redirect; with, the trace and its symbols are streamed through the
 * collector (a presigned URL names one object, and a client that follows it
 * would get the frames unnamed: docs/collector.md, "Symbols of each
 * snapshot"). */
typedef struct fetch {
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  tg_list_t node;
  coll_t *c;
  tg_http_exchange_t *x; /* NULL once abandoned */
  uint64_t id;
  char *hosts; /* ?host=, copied; NULL: the whole trace */
  tg_coll_fetch_t *f;
  bool redirect; /* s3_presign: redirect unless it has symbols */
  bool plain;    /* it has none: redirect */
  int fd, sfd, sifd, rv;
  int ifd; /* with |hosts|: the host index, or how fetching it failed */
} fetch_t;

static void fetch_close(fetch_t *f) {
  if (f->ifd >= 0) close(f->ifd);
  f->ifd = -1;
  if (f->fd >= 0) close(f->fd);
  if (f->sfd >= 0) close(f->sfd);
  if (f->sifd >= 0) close(f->sifd);
  f->fd = f->sfd = f->sifd = -1;
}

static void fetch_work(uv_work_t *w) {
  fetch_t *f = w->data;
  if (f->redirect && tg_coll_fetch_has_symbols(f->f) == -ENOENT) {
    f->plain = true;
    return;
  }
  f->rv = tg_coll_fetch_run(f->f, &f->fd);
  if (f->rv) return;
  /* Symbols the bucket holds but cannot give now fail the download: a
   * trace served without them would look unsymbolized for good. */
  int rv = tg_coll_fetch_symbols(f->f, &f->sfd, &f->sifd);
  if (rv && rv != -ENOENT) {
    fetch_close(f);
    f->rv = rv;
    return;
  }
  /* A host's part: its index, or why not (coll_api_plan_part answers). */
  if (f->hosts && (rv = tg_coll_fetch_index(f->f, &f->ifd)) < 0) f->ifd = rv;
}

static bool redirect_to_bucket(coll_t *c, tg_http_exchange_t *x, uint64_t id);

static void fetch_done(uv_work_t *w, int status) {
  fetch_t *f = w->data;
  tg_list_remove(&f->node);
  /* Back after coll_stop: the API is gone, nothing more is asked of the
   * pool or answered. */
  if (f->c->stopping) f->x = NULL;
  if (status && !f->rv) {
    fetch_close(f);
    f->rv = status;
    f->plain = false;
  }
  /* A redirect that cannot be made is served by the collector after
   * all, as without symbols: one more round on the worker. */
  if (f->x && f->plain && !redirect_to_bucket(f->c, f->x, f->id)) {
    f->redirect = f->plain = false;
    tg_list_insert_tail(&f->c->api.fetches, &f->node);
    if (coll_work_queue(f->c, &f->work, fetch_work, fetch_done) == 0)
      return;
    tg_list_remove(&f->node);
    json_error(f->x, 503, "no worker");
  } else if (f->x && !f->plain) {
    serve_trace(f->c, f->x, f->id, f->hosts, f->rv, f->fd, f->ifd, f->sfd,
                f->sifd);
    f->fd = f->ifd = f->sfd = f->sifd = -1;
  }
  fetch_close(f);
  tg_coll_fetch_free(f->f);
  free(f->hosts);
  free(f);
}

static void fetch_trace(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                        const char *hosts, bool redirect) {
  int rv = tg_coll_store_live(c->store, id);
  if (rv < 0) return serve_trace(c, x, id, hosts, rv, -1, -1, -1, -1);
  fetch_t *f = calloc(1, sizeof(*f));
  if (!f || (hosts && !(f->hosts = strdup(hosts)))) {
    if (f) free(f);
    return json_error(x, 500, "out of memory");
  }
  f->c = c;
  f->x = x;
  f->id = id;
  f->redirect = redirect;
  f->fd = f->ifd = f->sfd = f->sifd = -1;
  f->work.req.data = f;
  if ((rv = tg_coll_store_fetch_new(c->store, id, &f->f)) < 0 ||
      (rv = coll_work_queue(c, &f->work, fetch_work, fetch_done)) < 0) {
    tg_coll_fetch_free(f->f);
    free(f->hosts);
    free(f);
    return json_error(x, 503, tg_strerror(rv));
  }
  tg_list_insert_tail(&c->api.fetches, &f->node);
}

static void get_trace(coll_t *c, tg_http_exchange_t *x,
                      const tg_http_request_t *r, uint64_t id) {
  const char *hosts = arg(r, "host");
  if (tg_coll_store_remote(c->store))
    return fetch_trace(c, x, id, hosts,
                       !hosts && tg_coll_store_can_presign(c->store) &&
                           c->cfg.s3_presign_ms > 0);
  int fd = -1, ifd = -1, sfd = -1, sifd = -1;
  int rv = tg_coll_store_open_file(c->store, id, &fd);
  if (!rv && tg_coll_store_open_symbols(c->store, id, &sfd, &sifd) != 0)
    sfd = sifd = -1;
  if (!rv && hosts) ifd = coll_api_open_index(c, id);
  serve_trace(c, x, id, hosts, rv, fd, ifd, sfd, sifd);
}

static void answer_snapshot(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                            int status) {
  if (status == 200) return answer_row(c, x, id, true);
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(id, idt);
  char loc[64];
  snprintf(loc, sizeof(loc), API "/snapshots/%s", idt);
  tg_http_add_header(x, "Location", loc);
  respond_json(x, status, json_pack("{s:s}", "id", idt));
}

static void post_snapshot(coll_t *c, tg_http_exchange_t *x,
                          const tg_http_request_t *r, uint64_t no_id) {
  (void)no_id;
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
  if (waiting && c->api.n_waiters >= WAIT_MAX)
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
  tg_list_insert_tail(&c->api.waiters, &w->node);
  c->api.n_waiters++;
  /* The snapshot may already have ended (no host to ask). */
  if (id && !coll_snap_under_way(c, id)) {
    tg_list_remove(&w->node);
    c->api.n_waiters--;
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
  answer_row(c, x, id, false);
}

/* Prometheus text format 0.0.4. */
static void get_metrics(coll_t *c, tg_http_exchange_t *x,
                        const tg_http_request_t *r, uint64_t id) {
  (void)r, (void)id;
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
  tg_coll_store_desc_t d;
  tg_coll_store_describe(c->store, &d);
  if (d.has_stats) {
    const tg_s3_stats_t *b = &d.stats;
    fprintf(o.f,
            "# HELP tracegate_collector_bucket_requests_total Requests to "
            "the snapshot bucket, retries included.\n"
            "# TYPE tracegate_collector_bucket_requests_total counter\n"
            "tracegate_collector_bucket_requests_total %" PRIu64 "\n"
            "# HELP tracegate_collector_bucket_retries_total Requests to the "
            "bucket made again after a 5xx answer or a transport failure.\n"
            "# TYPE tracegate_collector_bucket_retries_total counter\n"
            "tracegate_collector_bucket_retries_total %" PRIu64 "\n"
            "# HELP tracegate_collector_bucket_throttled_total Retries after "
            "503 SlowDown.\n"
            "# TYPE tracegate_collector_bucket_throttled_total counter\n"
            "tracegate_collector_bucket_throttled_total %" PRIu64 "\n"
            "# HELP tracegate_collector_bucket_failures_total Requests to "
            "the bucket that failed after their retries.\n"
            "# TYPE tracegate_collector_bucket_failures_total counter\n"
            "tracegate_collector_bucket_failures_total %" PRIu64 "\n",
            b->requests, b->retries, b->throttled, b->failures);
  }
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
          "tracegate_collector_host_loss_total %" PRIu64 "\n"
          "# HELP tracegate_collector_ring_edge_packets_total Packets left "
          "out of snapshots before their sequence's first clear of "
          "incremental state (the rings' oldest edge, not loss).\n"
          "# TYPE tracegate_collector_ring_edge_packets_total counter\n"
          "tracegate_collector_ring_edge_packets_total %" PRIu64 "\n"
          "# HELP tracegate_collector_flows_across_hosts_total Flows (requests "
          "across hosts) of snapshots whose two ends are on two hosts.\n"
          "# TYPE tracegate_collector_flows_across_hosts_total counter\n"
          "tracegate_collector_flows_across_hosts_total %" PRIu64 "\n"
          "# HELP tracegate_collector_flow_ends_unmatched_total Flow ends of "
          "snapshots' hosts whose other end is not in the snapshot "
          "([TG-5063]).\n"
          "# TYPE tracegate_collector_flow_ends_unmatched_total counter\n"
          "tracegate_collector_flow_ends_unmatched_total %" PRIu64 "\n"
          "# HELP tracegate_collector_snapshots_reclocked_total Snapshots "
          "written again with their hosts placed by the requests between "
          "them.\n"
          "# TYPE tracegate_collector_snapshots_reclocked_total counter\n"
          "tracegate_collector_snapshots_reclocked_total %" PRIu64 "\n"
          "# HELP tracegate_collector_snapshots_reclock_failed_total "
          "Snapshots whose pass over their requests failed (kept as "
          "ClockSync placed their hosts).\n"
          "# TYPE tracegate_collector_snapshots_reclock_failed_total "
          "counter\n"
          "tracegate_collector_snapshots_reclock_failed_total %" PRIu64 "\n",
          k->trigger_hits, k->triggers_coalesced, k->bytes_stored,
          k->host_loss, k->ring_edge_packets, k->flows_across,
          k->flow_ends_unmatched, k->snapshots_reclocked,
          k->snapshots_reclock_failed);
  fputs("# HELP tracegate_collector_data_source_failures_total Data sources "
        "that did not run as asked, in snapshots' host rows, by reason "
        "(consumer/fleet/ds_problem.h).\n"
        "# TYPE tracegate_collector_data_source_failures_total counter\n", o.f);
  for (int i = 0; i < TG_DS_REASON_COUNT; i++)
    fprintf(o.f, "tracegate_collector_data_source_failures_total{reason=\"%s\"} "
            "%" PRIu64 "\n", tg_ds_reason_name((tg_ds_reason_t)i),
            k->ds_failures[i]);
  fputs("# HELP tracegate_collector_perf_boosts_total Perf boosts of "
        "snapshots' hosts (perf_boost_window), by how they ended.\n"
        "# TYPE tracegate_collector_perf_boosts_total counter\n", o.f);
  for (int i = 0; i < COLL_BOOST_STATE_COUNT; i++)
    fprintf(o.f, "tracegate_collector_perf_boosts_total{state=\"%s\"} "
            "%" PRIu64 "\n", coll_boost_state_name((coll_boost_state_t)i),
            k->perf_boosts[i]);
  fputs("# HELP tracegate_collector_perf_boost_refusals_total Perf boosts "
        "not started: a budget had no room for one more window "
        "(perf_boost_host_percent, perf_boost_fleet_percent), by budget.\n"
        "# TYPE tracegate_collector_perf_boost_refusals_total counter\n", o.f);
  for (int v = COLL_BOOST_BUDGET_HOST; v <= COLL_BOOST_BUDGET_FLEET; v++)
    fprintf(o.f, "tracegate_collector_perf_boost_refusals_total{budget=\"%s\"} "
            "%" PRIu64 "\n", coll_boost_budget_name((coll_boost_verdict_t)v),
            k->perf_boost_refused[v]);
  coll_boost_fleet_t bf;
  coll_boost_fleet(c, &bf);
  fprintf(o.f,
          "# HELP tracegate_collector_perf_boost_seconds_total Seconds hosts "
          "sampled at the boost's rate, summed over hosts, as boosts end.\n"
          "# TYPE tracegate_collector_perf_boost_seconds_total counter\n"
          "tracegate_collector_perf_boost_seconds_total %.3f\n"
          "# HELP tracegate_collector_perf_boost_budget_used_seconds The "
          "hosts' boost seconds within perf_boost_budget_window, boosts under "
          "way counted to their window's end.\n"
          "# TYPE tracegate_collector_perf_boost_budget_used_seconds gauge\n"
          "tracegate_collector_perf_boost_budget_used_seconds %.3f\n"
          "# HELP tracegate_collector_perf_boost_budget_limit_seconds The "
          "most the hosts may use together (perf_boost_fleet_percent of "
          "their time in the window).\n"
          "# TYPE tracegate_collector_perf_boost_budget_limit_seconds gauge\n"
          "tracegate_collector_perf_boost_budget_limit_seconds %.3f\n"
          "# HELP tracegate_collector_perf_boost_hosts_over_budget Hosts "
          "whose own budget has no room for a boost now.\n"
          "# TYPE tracegate_collector_perf_boost_hosts_over_budget gauge\n"
          "tracegate_collector_perf_boost_hosts_over_budget %zu\n",
          (double)k->perf_boost_ms / 1e3, (double)bf.used_ms / 1e3,
          (double)bf.limit_ms / 1e3, bf.hosts_full);
  /* Each machine's refused moves (docs/architecture.md, "State
   * machines"): a bug's sign, 0 in every test. */
  const struct {
    const char *machine;
    uint64_t n;
  } refused[] = {
      {"snapshot", k->snap_bad_transitions},
      {"snapshot_host", k->snap_host_bad_transitions},
      {"standby", k->standby_bad_transitions},
      {"perf_boost", k->boost_bad_transitions},
      {"symbolize", coll_symbols_bad_transitions(c)},
  };
  fputs("# HELP tracegate_collector_state_moves_refused_total State changes "
        "a machine's table has no arrow for, refused and logged (a bug), by "
        "machine.\n"
        "# TYPE tracegate_collector_state_moves_refused_total counter\n", o.f);
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    fprintf(o.f, "tracegate_collector_state_moves_refused_total{machine=\"%s\"} "
            "%" PRIu64 "\n", refused[i].machine, refused[i].n);
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
  coll_metrics_http(o.f, &hs);
  coll_alertmanager_metrics(c, o.f);
  coll_symbols_metrics(c, o.f);
  coll_shares_metrics(c, o.f);
  out_send(&o, x, 200, "text/plain; version=0.0.4");
}

/* A web page the operator has open can send requests to a loopback
 * listener (a form, a no-cors fetch) or reach it under a name it controls
 * (DNS rebinding). So over plain HTTP the Host must be a loopback name
 * with this listener's port, and whatever the scheme an Origin, when
 * there is one, must be this listener's own, scheme included (the web
 * page's requests). A browser sends one with every POST; tools (python,
 * curl, `tracegate snapshot`, cli/snapshot.c) send none, and a
 * request without one is served: the CSRF it guards against needs a
 * browser, and a browser says where its request comes from. */
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

/* --- the routes (routes.h) -------------------------------------------------------- */

static void route_page(coll_t *c, tg_http_exchange_t *x,
                       const tg_http_request_t *r, uint64_t id) {
  (void)r, (void)id;
  coll_page_send(c, x);
}

static void route_asset(coll_t *c, tg_http_exchange_t *x,
                        const tg_http_request_t *r, uint64_t id) {
  (void)c, (void)id;
  coll_asset_send(x, r->path);
}

static void route_healthz(coll_t *c, tg_http_exchange_t *x,
                          const tg_http_request_t *r, uint64_t id) {
  (void)c, (void)r, (void)id;
  respond_json(x, 200, json_pack("{s:s}", "status", "ok"));
}

static const char *const no_args[] = {NULL};
static const char *const list_args[] = {"from",  "to",      "limit", "before",
                                        "state", "trigger", "host",  NULL};
static const char *const post_args[] = {"reason", "group", "wait", NULL};
static const char *const pin_args[] = {"pinned", NULL};
static const char *const trace_args[] = {"host", NULL};
static const char *const profile_args[] = {"host", "format", NULL};
static const char *const diff_args[] = {"host",        "format",  "base",
                                        "min_samples", "against", "n",
                                        NULL};
static const char *const functions_args[] = {
    "name", "host", "min_share", "by", "from", "to", "limit", "after", NULL};

/* The page, its files and /metrics take no arguments but ignore them (a
 * browser's reload may add some); everything under /api/v1 checks its
 * own. */
static const coll_route_t routes[] = {
    {COLL_ROUTE_GET, "/", TG_ROLE_OBSERVE, NULL, route_page},
    {COLL_ROUTE_GET, "/index.html", TG_ROLE_OBSERVE, NULL, route_page},
    {COLL_ROUTE_GET, "/app.js", TG_ROLE_OBSERVE, NULL, route_asset},
    {COLL_ROUTE_GET, "/style.css", TG_ROLE_OBSERVE, NULL, route_asset},
    {COLL_ROUTE_GET, "/healthz", TG_ROLE_OBSERVE, NULL, route_healthz},
    {COLL_ROUTE_GET, "/metrics", TG_ROLE_OBSERVE, NULL, get_metrics},
    {COLL_ROUTE_GET, API "/hosts", TG_ROLE_OBSERVE, no_args, get_hosts},
    {COLL_ROUTE_GET, API "/store", TG_ROLE_OBSERVE, no_args, get_store},
    {COLL_ROUTE_GET, API "/snapshots", TG_ROLE_OBSERVE, list_args, list_snapshots},
    {COLL_ROUTE_POST, API "/snapshots", TG_ROLE_RECORD, post_args,
     post_snapshot},
    {COLL_ROUTE_GET, API "/snapshots/{id}", TG_ROLE_OBSERVE, no_args,
     get_snapshot},
    {COLL_ROUTE_GET, API "/snapshots/{id}/trace", TG_ROLE_OBSERVE, trace_args,
     get_trace},
    /* The same role as the trace it is made of. */
    {COLL_ROUTE_GET, API "/snapshots/{id}/profile", TG_ROLE_OBSERVE,
     profile_args, coll_api_get_profile},
    {COLL_ROUTE_GET, API "/snapshots/{id}/profile/diff", TG_ROLE_OBSERVE,
     diff_args, coll_api_get_profile_diff},
    {COLL_ROUTE_POST, API "/snapshots/{id}/pin", TG_ROLE_RECORD, pin_args,
     post_pin},
    /* What the profiles of the snapshots hold: their readers' role. */
    {COLL_ROUTE_GET, API "/functions", TG_ROLE_OBSERVE, functions_args,
     coll_api_get_functions},
    {COLL_ROUTE_POST, API "/alertmanager", TG_ROLE_RECORD, no_args,
     coll_alertmanager_post},
};

const coll_route_t *coll_api_routes(size_t *n) {
  *n = sizeof(routes) / sizeof(routes[0]);
  return routes;
}

static void handle(void *ctx, tg_http_exchange_t *x,
                   const tg_http_request_t *r) {
  coll_t *c = ctx;
  /* HTTPS: the layer refused every identity without a role. */
  tg_authz_role_t role = r->tls ? r->role : TG_ROLE_RECORD;
  TG_DEBUG("http %s %s (%s)", r->method, r->path, r->tls ? r->identity : "plain");
  if (role == TG_ROLE_NONE)
    return json_error(x, 403, "this certificate's identity has no role here");
  if ((!r->tls && !host_ok(c, r->host)) || !origin_ok(r))
    return json_error(x, 403, "another site's request (Host or Origin)");
  coll_route_match_t m;
  if (coll_route_find(routes, sizeof(routes) / sizeof(routes[0]), r->method,
                      r->path, role, &m) != 0)
    return json_error(x, m.status, m.why);
  char why[160];
  if (m.route->args &&
      coll_route_args_check(m.route->args, r->args, r->n_args, why,
                            sizeof(why)) < 0)
    return json_error(x, 400, why); /* the client's name: escaped there */
  m.route->fn(c, x, r, m.id);
}

static void on_abandon(void *ctx, tg_http_exchange_t *x) {
  coll_t *c = ctx;
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->api.waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->x != x) continue;
    tg_list_remove(&w->node);
    c->api.n_waiters--;
    free(w);
  }
  /* A download under way is left to end; its answer is not sent. */
  tg_list_foreach_safe(it, tmp, &c->api.fetches) {
    fetch_t *f = TG_CONTAINER_OF(it, fetch_t, node);
    if (f->x == x) f->x = NULL;
  }
  coll_api_profile_abandon(c, x);
}

void coll_api_snapshot_done(coll_t *c, coll_snap_t *s) {
  uint64_t id = coll_snap_id(s);
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->api.waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id != id) continue;
    tg_list_remove(&w->node);
    c->api.n_waiters--;
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
  tg_list_foreach_safe(it, tmp, &c->api.waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id) continue;
    w->id = id;
    if (!over) continue;
    tg_list_remove(&w->node);
    c->api.n_waiters--;
    tg_http_exchange_t *x = w->x;
    free(w);
    answer_snapshot(c, x, id, 200);
  }
}

void coll_api_queued_failed(coll_t *c, int err) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->api.waiters) {
    waiter_t *w = TG_CONTAINER_OF(it, waiter_t, node);
    if (w->id) continue;
    tg_list_remove(&w->node);
    c->api.n_waiters--;
    json_error(w->x, 503, tg_strerror(err));
    free(w);
  }
}

static void write_ready(coll_t *c) {
  if (c->ready_fd <= 0) return;
  char line[48];
  int n = c->health
              ? snprintf(line, sizeof(line), "ready %u health %u\n",
                         (unsigned)tg_http_server_port(c->http),
                         (unsigned)tg_http_server_port(c->health))
              : snprintf(line, sizeof(line), "ready %u\n",
                         (unsigned)tg_http_server_port(c->http));
  ssize_t w = write(c->ready_fd, line, (size_t)n);
  (void)w; /* a parent that went away is told nothing either way */
  close(c->ready_fd);
  c->ready_fd = 0;
}

int coll_api_start(coll_t *c) {
  tg_list_init(&c->api.waiters);
  tg_list_init(&c->api.fetches);
  tg_list_init(&c->api.profiles);
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
      /* Alertmanager's payloads are the largest bodies taken. */
      .max_body = g->am_max_bytes > 64 * 1024 ? g->am_max_bytes : 64 * 1024,
      .max_conns = g->http_max_conns,
      .max_conns_per_source = g->http_max_conns_per_source,
      /* Whole seconds, rounded up: the HTTP layer counts in seconds. */
      .timeout_s = (unsigned)((g->http_timeout_ms + 999) / 1000),
      .min_rate = g->http_min_rate,
      .authz = authz,
      .crl = crl,
      .clock = c->clock,
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
  if (coll_health_start(c) < 0) return -1;
  write_ready(c);
  return 0;
}

void coll_api_stop(coll_t *c) {
  coll_health_stop(c);
  if (c->http) tg_http_server_stop(c->http, NULL, NULL);
  c->http = NULL;
}
