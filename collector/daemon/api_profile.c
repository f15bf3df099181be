/* SPDX-License-Identifier: Apache-2.0 */
/* GET /api/v1/snapshots/ID/profile?host=H&format=pprof: one host's CPU
 * profile of a snapshot, as pprof (consumer/profile/profile.h;
 * docs/collector.md, "A host's CPU profile").
 *
 * Only the host's part is read (its extents in the host index, then its
 * symbols'), on a thread of libuv's pool: the loop goes on serving. The
 * host's bytes are hostile: the profile's tables are bounded
 * (tg_prof_limits_t defaults), at most PROFILES_MAX profiles are made at
 * once (503 past that), and the answer is built in memory, bounded by the
 * host's tables.
 *
 * GET /api/v1/snapshots/ID/profile/diff?host=H[&format=json|pprof]
 * [&base=1][&min_samples=N]: host H against the median of the snapshot's
 * other hosts (consumer/profile/profile_diff.h; docs/collector.md, "A
 * host against its peers"). The host's part is read first, for its
 * machine in the merged trace; then the whole trace and its symbols, in
 * one profile of every host, on the same worker and under the same cap.
 * With against=history&n=N, the host is compared with itself in its last N
 * snapshots before this one instead: the host's part of each (those
 * without an index, the host or its samples are skipped and counted). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/daemon/api_internal.h"
#include "collector/daemon/routes.h"
#include "collector/daemon/work.h"
#include "collector/catalog/snapshot_id.h"
#include "collector/store/store.h"
#include "common/buf.h"
#include "common/fd_write.h"
#include "common/log.h"
#include "common/decimal.h"
#include "common/json.h"
#include "consumer/profile/profile.h"
#include "consumer/profile/profile_diff.h"
#include "tracegate/error.h"

/* Profiles made at once: each takes a worker of the pool (shared with
 * bucket downloads and checks) and up to its tables' bounds of memory. */
#define PROFILES_MAX 2
#define READ_CHUNK (1u << 20)
/* against=history: snapshots of the host read at most (each a profile of
 * the host's part, all held at once). */
#define HISTORY_MAX 20
#define HISTORY_DEFAULT 5

/* One of the host's earlier snapshots (against=history). */
typedef struct past {
  uint64_t id;
  int fd, sfd;
  coll_part_t part;
  bool used; /* its host had samples: a peer of the diff */
} past_t;

typedef struct job {
  coll_work_t work; /* on the pool: counted (coll_work_queue) */
  tg_list_t node;
  coll_t *c;
  tg_http_exchange_t *x; /* NULL once abandoned */
  uint64_t id;
  int fd, sfd;
  coll_part_t part;
  tg_buf_t out;
  int rv;
  uint64_t samples;
  /* /profile/diff: the whole trace and its symbols, what to answer. */
  bool diff, base, pprof;
  uint64_t min_samples;
  tg_http_extent_t whole[2];
  size_t n_whole;
  json_t *doc;
  bool no_samples; /* the host has none: nothing to compare */
  /* against=history: how many wanted, those found, those skipped. */
  bool history;
  size_t n_want, n_past, n_skipped;
  past_t *past;
} job_t;

/* The extents' bytes into |p|, a chunk at a time. */
static int feed_extents(int tfd, int sfd, const tg_http_extent_t *ext,
                        size_t n_ext, tg_prof_t *p) {
  uint8_t *buf = malloc(READ_CHUNK);
  if (!buf) return -ENOMEM;
  int rv = 0;
  for (size_t i = 0; i < n_ext && !rv; i++) {
    const tg_http_extent_t *e = &ext[i];
    int fd = e->second ? sfd : tfd;
    uint64_t off = e->off, left = e->len;
    while (left && !rv) {
      size_t want = left < READ_CHUNK ? (size_t)left : READ_CHUNK;
      ssize_t n = pread(fd, buf, want, (off_t)off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        rv = n < 0 ? -errno : -EIO; /* the file is shorter than its index */
        break;
      }
      rv = tg_prof_feed(p, buf, (size_t)n);
      off += (uint64_t)n;
      left -= (uint64_t)n;
    }
  }
  free(buf);
  return rv;
}

/* A host's part (of the snapshot in |tfd|, its symbols in |sfd|) read
 * into a profile of its own, *p (the caller frees it, error or not); *h
 * the host with samples in it, NULL when none. */
static int read_part(int tfd, int sfd, const coll_part_t *part, tg_prof_t **p,
                     const tg_prof_host_t **h) {
  *h = NULL;
  *p = tg_prof_new(NULL);
  if (!*p) return -ENOMEM;
  int rv = feed_extents(tfd, sfd, part->ext, part->n_ext, *p);
  if (!rv) rv = tg_prof_end(*p);
  /* The part holds the collector's head (machine 0) and the host's
   * machine: the samples are the host's. */
  for (size_t i = 0; !rv && i < tg_prof_n_hosts(*p) && !*h; i++)
    if (tg_prof_host(*p, i)->counts.samples) *h = tg_prof_host(*p, i);
  return rv;
}

/* The diff of |h| against |peers| into the job's answer. */
static int diff_answer(job_t *j, const tg_prof_host_t *h,
                       const tg_prof_host_t *const *peers, size_t np) {
  tg_prof_diff_opts_t o = {.min_samples = j->min_samples};
  tg_prof_diff_t *d = NULL;
  int rv = tg_prof_diff(h, peers, np, &o, &d);
  j->samples = h->counts.samples;
  if (!rv && j->pprof) rv = tg_prof_diff_pprof(d, j->base, &j->out);
  if (!rv && !j->pprof) {
    json_t *doc = tg_prof_diff_json(d, TG_PROF_DIFF_MIN_SHARE);
    doc = tg_json_put(doc, "against",
                      json_string(j->history ? "history" : "peers"));
    if (j->history) {
      json_t *ids = json_array();
      for (size_t i = 0; i < j->n_past && ids; i++) {
        char idt[TG_COLL_ID_STRLEN];
        tg_coll_id_format(j->past[i].id, idt);
        if (j->past[i].used) ids = tg_json_push(ids, json_string(idt));
      }
      doc = tg_json_put(doc, "snapshots", ids);
      doc = tg_json_put(doc, "snapshots_skipped",
                        json_integer((json_int_t)j->n_skipped));
    }
    j->doc = doc;
    if (!j->doc) rv = -ENOMEM;
  }
  tg_prof_diff_free(d);
  return rv;
}

/* /profile/diff: the host (machine k + 1 of the trace, k its place in
 * the host index) against every other host with samples in the whole
 * snapshot, read once. */
static int diff_work(job_t *j) {
  uint64_t machine = (uint64_t)j->part.first_index + 1;
  const tg_prof_host_t *h;
  tg_prof_t *p = tg_prof_new(NULL);
  if (!p) return -ENOMEM;
  int rv = feed_extents(j->fd, j->sfd, j->whole, j->n_whole, p);
  if (!rv) rv = tg_prof_end(p);
  size_t n = tg_prof_n_hosts(p), np = 0;
  const tg_prof_host_t **peers = calloc(n ? n : 1, sizeof(*peers));
  if (!rv && !peers) rv = -ENOMEM;
  h = NULL;
  for (size_t i = 0; !rv && i < n; i++) {
    const tg_prof_host_t *x = tg_prof_host(p, i);
    if (x->machine_id == machine) h = x;
    else if (x->counts.samples) peers[np++] = x;
  }
  j->no_samples = !rv && (!h || !h->counts.samples);
  if (!rv && !j->no_samples) rv = diff_answer(j, h, peers, np);
  free(peers);
  tg_prof_free(p);
  return rv;
}

/* against=history: the host against itself in its earlier snapshots,
 * each read from its part alone. */
static int history_work(job_t *j) {
  tg_prof_t *p0 = NULL, **pp = calloc(j->n_past + 1, sizeof(*pp));
  const tg_prof_host_t *h = NULL;
  const tg_prof_host_t **peers = calloc(j->n_past + 1, sizeof(*peers));
  int rv = pp && peers ? read_part(j->fd, j->sfd, &j->part, &p0, &h) : -ENOMEM;
  j->no_samples = !rv && !h;
  size_t np = 0;
  for (size_t i = 0; i < j->n_past && !rv && h; i++) {
    past_t *q = &j->past[i];
    const tg_prof_host_t *x;
    int r = read_part(q->fd, q->sfd, &q->part, &pp[i], &x);
    if (r == -ENOMEM) rv = r;
    q->used = !r && x;
    if (q->used) peers[np++] = x;
    else j->n_skipped++; /* unreadable, or no samples then */
  }
  if (!rv && h) rv = diff_answer(j, h, peers, np);
  for (size_t i = 0; pp && i < j->n_past; i++) tg_prof_free(pp[i]);
  tg_prof_free(p0);
  free(pp);
  free(peers);
  return rv;
}

static void job_work(uv_work_t *w) {
  job_t *j = w->data;
  if (j->diff) {
    j->rv = j->history ? history_work(j) : diff_work(j);
    return;
  }
  tg_prof_t *p = tg_prof_new(NULL);
  if (!p) {
    j->rv = -ENOMEM;
    return;
  }
  j->rv = feed_extents(j->fd, j->sfd, j->part.ext, j->part.n_ext, p);
  if (!j->rv) j->rv = tg_prof_end(p);
  /* The part holds the collector's head (machine 0) and the host's
   * machine: the samples are the host's. A host without samples gets a
   * profile without samples, not an error: that is what it holds. */
  size_t hosts[1], n = 0;
  for (size_t i = 0; !j->rv && i < tg_prof_n_hosts(p); i++) {
    const tg_prof_host_t *h = tg_prof_host(p, i);
    if (h->counts.samples && !n) {
      hosts[n++] = i;
      j->samples = h->counts.samples;
    }
  }
  tg_prof_pprof_opts_t o = {.hosts = hosts, .n_hosts = n};
  if (!j->rv) j->rv = tg_prof_pprof(p, &o, &j->out);
  tg_prof_free(p);
}

static void job_free(job_t *j) {
  if (j->fd >= 0) close(j->fd);
  if (j->sfd >= 0) close(j->sfd);
  free(j->part.ext);
  for (size_t i = 0; i < j->n_past; i++) {
    if (j->past[i].fd >= 0) close(j->past[i].fd);
    if (j->past[i].sfd >= 0) close(j->past[i].sfd);
    free(j->past[i].part.ext);
  }
  free(j->past);
  tg_buf_free(&j->out);
  json_decref(j->doc);
  free(j);
}

static void job_done(uv_work_t *w, int status) {
  job_t *j = w->data;
  tg_list_remove(&j->node);
  j->c->api.n_profiles--;
  if (status && !j->rv) j->rv = status;
  if (j->c->stopping) j->x = NULL; /* back after coll_stop: the API is gone */
  char idt[TG_COLL_ID_STRLEN];
  tg_coll_id_format(j->id, idt);
  if (j->rv) {
    TG_WARN("snapshot %s: host %s: no profile: %s", idt, j->part.first,
            tg_strerror(j->rv));
  }
  if (!j->x) {
    job_free(j);
    return;
  }
  if (j->rv == TG_EPARSE || j->rv == TG_EBAD_COMPRESSED || j->rv == -EIO) {
    coll_api_json_error(j->x, 500, j->diff
                                       ? "this snapshot does not read as a "
                                         "trace (see the collector's log)"
                                       : "this host's part of the snapshot "
                                         "does not read as a trace (see the "
                                         "collector's log)");
  } else if (j->rv == -ENOSPC && j->diff) {
    coll_api_json_error(j->x, 500, "the hosts' call paths together are past "
                                   "the diff's bound (docs/profiles.md)");
  } else if (j->rv) {
    coll_api_json_error(j->x, 500, tg_strerror(j->rv));
  } else if (j->diff && j->no_samples) {
    coll_api_json_error(j->x, 409, "this host has no CPU profile samples in "
                                   "the snapshot: nothing to compare");
  } else if (j->diff && !j->pprof) {
    coll_api_respond_json(j->x, 200, j->doc);
    j->doc = NULL;
  } else {
    char name[TG_COLL_HOST_MAX + 96], safe[TG_COLL_HOST_MAX + 1];
    size_t k = 0;
    for (const char *h = j->part.first; *h && k < TG_COLL_HOST_MAX; h++, k++) {
      char ch = *h;
      bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
      safe[k] = ok ? ch : '_';
    }
    safe[k] = 0;
    snprintf(name, sizeof(name), "tracegate-%s-%s%s.pb.gz", idt, safe,
             !j->diff ? "" : j->base ? "-peers" : "-diff");
    TG_DEBUG("snapshot %s: host %s: a profile of %" PRIu64 " samples, %zu "
             "bytes", idt, j->part.first, j->samples, tg_buf_size(&j->out));
    /* Served as a file is, under its download name: the profile goes to
     * a memory file first (the HTTP layer streams files). */
    int mfd = memfd_create("tracegate-profile", MFD_CLOEXEC);
    size_t len = tg_buf_size(&j->out);
    if (mfd < 0 || tg_write_all(mfd, tg_buf_begin(&j->out), len) < 0) {
      if (mfd >= 0) close(mfd);
      coll_api_json_error(j->x, 500, "cannot hold the profile");
    } else {
      tg_http_extent_t e = {0, len, false};
      if (tg_http_respond_extents2(j->x, 200, "application/octet-stream", mfd,
                                   -1, &e, 1, name) < 0)
        coll_api_json_error(j->x, 500, "cannot send the profile");
    }
  }
  job_free(j);
}

void coll_api_profile_abandon(coll_t *c, tg_http_exchange_t *x) {
  tg_list_t *it, *tmp;
  tg_list_foreach_safe(it, tmp, &c->api.profiles) {
    job_t *j = TG_CONTAINER_OF(it, job_t, node);
    if (j->x == x) j->x = NULL;
  }
}

/* against=history: the host's part in each of its last j->n_want
 * snapshots before j->id, planned here (the catalog and the files are the
 * loop's); a snapshot without an index or without the host is skipped
 * and counted. 0, or -errno of the catalog's read. */
static int plan_history(coll_t *c, job_t *j, const char *host) {
  tg_coll_filter_t f = TG_COLL_FILTER_INIT;
  f.host = host;
  f.states = TG_COLL_LIVE_STATES;
  f.before_id = j->id;
  f.limit = (uint32_t)j->n_want;
  tg_coll_snapshot_t *rows = calloc(j->n_want, sizeof(*rows));
  j->past = calloc(j->n_want, sizeof(*j->past));
  size_t n = 0;
  int rv = rows && j->past ? tg_coll_store_list(c->store, &f, rows, j->n_want,
                                                &n)
                           : -ENOMEM;
  for (size_t i = 0; !rv && i < n; i++) {
    past_t *q = &j->past[j->n_past];
    int sifd = -1;
    struct stat st;
    q->fd = q->sfd = -1;
    q->id = rows[i].id;
    if (tg_coll_store_open_file(c->store, q->id, &q->fd) < 0 ||
        fstat(q->fd, &st) != 0) {
      if (q->fd >= 0) close(q->fd);
      j->n_skipped++;
      continue;
    }
    if (tg_coll_store_open_symbols(c->store, q->id, &q->sfd, &sifd) != 0)
      q->sfd = sifd = -1;
    int r = coll_api_plan_part(c, NULL, q->id, host, (uint64_t)st.st_size,
                               coll_api_open_index(c, q->id), q->sfd, sifd,
                               &q->part);
    if (sifd >= 0) close(sifd);
    if (r < 0) {
      close(q->fd);
      if (q->sfd >= 0) close(q->sfd);
      j->n_skipped++;
      continue;
    }
    j->n_past++;
  }
  free(rows);
  return rv;
}

/* Opens the snapshot, plans the host's part, queues |j| (filled with what
 * to answer): the two endpoints' common path. Answers |x| itself on any
 * failure (|j| freed). */
static void start_job(coll_t *c, tg_http_exchange_t *x, uint64_t id,
                      const char *host, job_t *j) {
  j->fd = j->sfd = -1;
  tg_buf_init(&j->out, 0);
  if (tg_coll_store_remote(c->store)) {
    job_free(j);
    return coll_api_json_error(x, 501, "profiles of snapshots kept in a "
                                       "bucket are not made here: download "
                                       "the host's part (/trace?host=) and "
                                       "run tracegate profile on it");
  }
  if (c->api.n_profiles >= PROFILES_MAX) {
    job_free(j);
    return coll_api_json_error(x, 503, "too many profiles being made: try "
                                       "again");
  }
  int sifd = -1;
  int rv = tg_coll_store_open_file(c->store, id, &j->fd);
  struct stat st, sst;
  if (!rv && fstat(j->fd, &st) != 0) rv = -EIO;
  if (rv < 0) {
    job_free(j);
    if (rv == -ENOENT)
      return coll_api_json_error(x, 404, "no such snapshot, or it holds no "
                                         "trace");
    return coll_api_json_error(x, rv == -EIO ? 500 : 503, tg_strerror(rv));
  }
  if (tg_coll_store_open_symbols(c->store, id, &j->sfd, &sifd) != 0)
    j->sfd = sifd = -1;
  /* The whole trace, then its symbols: the diff's second reading. */
  j->whole[j->n_whole++] = (tg_http_extent_t){0, (uint64_t)st.st_size, false};
  if (j->sfd >= 0 && fstat(j->sfd, &sst) == 0 && sst.st_size > 0)
    j->whole[j->n_whole++] = (tg_http_extent_t){0, (uint64_t)sst.st_size, true};
  rv = coll_api_plan_part(c, x, id, host, (uint64_t)st.st_size,
                          coll_api_open_index(c, id), j->sfd, sifd,
                          &j->part);
  if (sifd >= 0) close(sifd);
  if (rv < 0) { /* answered */
    job_free(j);
    return;
  }
  j->c = c;
  j->x = x;
  j->id = id;
  if (j->history && (rv = plan_history(c, j, host)) < 0) {
    job_free(j);
    return coll_api_json_error(x, 503, tg_strerror(rv));
  }
  j->work.req.data = j;
  if ((rv = coll_work_queue(c, &j->work, job_work, job_done)) < 0) {
    job_free(j);
    return coll_api_json_error(x, 503, tg_strerror(rv));
  }
  tg_list_insert_tail(&c->api.profiles, &j->node);
  c->api.n_profiles++;
}

void coll_api_get_profile(coll_t *c, tg_http_exchange_t *x,
                          const tg_http_request_t *r, uint64_t id) {
  const char *host = coll_route_arg(r->args, r->n_args, "host");
  const char *format = coll_route_arg(r->args, r->n_args, "format");
  if (!host || !host[0] || strchr(host, ','))
    return coll_api_json_error(x, 400, "host: one host of the snapshot");
  if (format && strcmp(format, "pprof"))
    return coll_api_json_error(x, 400, "format: pprof");
  job_t *j = calloc(1, sizeof(*j));
  if (!j) return coll_api_json_error(x, 500, "out of memory");
  start_job(c, x, id, host, j);
}

void coll_api_get_profile_diff(coll_t *c, tg_http_exchange_t *x,
                               const tg_http_request_t *r, uint64_t id) {
  const char *host = coll_route_arg(r->args, r->n_args, "host");
  const char *format = coll_route_arg(r->args, r->n_args, "format");
  const char *base = coll_route_arg(r->args, r->n_args, "base");
  const char *min = coll_route_arg(r->args, r->n_args, "min_samples");
  const char *against = coll_route_arg(r->args, r->n_args, "against");
  const char *nstr = coll_route_arg(r->args, r->n_args, "n");
  uint64_t min_samples = 0, n_want = HISTORY_DEFAULT;
  if (!host || !host[0] || strchr(host, ','))
    return coll_api_json_error(x, 400, "host: one host of the snapshot");
  if (format && strcmp(format, "pprof") && strcmp(format, "json"))
    return coll_api_json_error(x, 400, "format: json or pprof");
  if (base && strcmp(base, "0") && strcmp(base, "1"))
    return coll_api_json_error(x, 400, "base: 0 or 1 (1: the peers' median "
                                       "profile, with format=pprof)");
  bool pprof = format && !strcmp(format, "pprof");
  if (base && !strcmp(base, "1") && !pprof)
    return coll_api_json_error(x, 400, "base=1 goes with format=pprof");
  if (min && (tg_decimal_u64(min, 1000000000, &min_samples) < 0 ||
              !min_samples))
    return coll_api_json_error(x, 400, "min_samples: 1 to 1000000000");
  if (against && strcmp(against, "peers") && strcmp(against, "history"))
    return coll_api_json_error(x, 400, "against: peers (the snapshot's other "
                                       "hosts) or history (the host's last n "
                                       "snapshots)");
  bool history = against && !strcmp(against, "history");
  if (nstr && (!history || tg_decimal_u64(nstr, HISTORY_MAX, &n_want) < 0 ||
               !n_want))
    return coll_api_json_error(x, 400, "n: 1 to 20, with against=history");
  job_t *j = calloc(1, sizeof(*j));
  if (!j) return coll_api_json_error(x, 500, "out of memory");
  j->diff = true;
  j->history = history;
  j->n_want = (size_t)n_want;
  j->pprof = pprof;
  j->base = base && !strcmp(base, "1");
  j->min_samples = min_samples;
  start_job(c, x, id, host, j);
}
