/* "linux.inode_file_map": the paths of the inodes linux.ftrace of the same
 * session sees, found by scanning the mounted file systems a batch at a
 * time (inode_file.h has the rounds). Runs on the sampler thread, which
 * owns everything here; only the feed is shared with the ftrace reader.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/clock.h"
#include "agent/probes/inode_cache.h"
#include "agent/probes/inode_feed.h"
#include "agent/probes/inode_file.h"
#include "agent/probes/inode_scan.h"
#include "agent/probes/inode_set.h"
#include "agent/probes/mountinfo.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "common/log.h"
#include "tracegate/error.h"

#define DS_NAME "linux.inode_file_map"
#define MOUNTINFO_PATH "/proc/self/mountinfo"

/* TracePacket, InodeFileMap and its Entry. */
#define PACKET_TIMESTAMP 8
#define PACKET_INODE_FILE_MAP 4
#define MAP_BLOCK_DEVICE_ID 1
#define MAP_MOUNT_POINTS 2
#define MAP_ENTRIES 3
#define ENTRY_INODE_NUMBER 1
#define ENTRY_PATHS 2
#define ENTRY_TYPE 3

/* The parsed config is too large for the sampler's slot: it keeps a
 * pointer to it (free_cfg). */
typedef struct cfg_ref {
  tg_inode_file_cfg_t *cfg;
} cfg_ref_t;
_Static_assert(sizeof(cfg_ref_t) <= TG_PROBE_CFG_MAX,
               "config does not fit the sampler's slot");

typedef enum scan_state {
  SCAN_IDLE,    /* nothing waits for a scan */
  SCAN_WAITING, /* pairs wait; the scan starts at due_ms */
  SCAN_RUNNING, /* a batch every scan_interval_ms */
} scan_state_t;

typedef struct inode_file {
  tg_inode_file_cfg_t *cfg; /* owned */
  tg_inode_feed_t *feed;
  tg_inode_feed_consumer_t *consumer; /* NULL: nothing comes */
  tg_inode_key_t *taken;              /* TG_INODE_FEED_CAP: one take */
  tg_inode_set_t next;                /* waiting for the next scan */
  tg_inode_set_t missing;             /* the running scan's */
  uint8_t *found;                     /* per member of |missing| */
  uint32_t remaining;                 /* members of |missing| not found yet */
  tg_inode_set_t not_found;           /* what full scans missed */
  tg_inode_cache_t *cache;
  tg_mountinfo_t mounts; /* sorted by mount point */
  bool mounts_warned;
  tg_inode_scan_t *scan;
  scan_state_t state;
  uint64_t due_ms;
  uint64_t now_ms; /* of the round or take in progress */
  /* The InodeFileMap packet being written: its device and entries. */
  const tg_probes_sink_t *sink;
  tg_pbw_t *w;
  uint64_t w_dev;
  uint32_t w_entries;
  tg_inode_file_stats_t st;
} inode_file_t;

/* --- config ------------------------------------------------------------- */

static int parse_cfg(const uint8_t *cfg, size_t len, void *out) {
  cfg_ref_t *ref = out;
  int rv = tg_inode_file_cfg_parse(cfg, len, &ref->cfg);
  if (rv == 0) tg_probes_warn_unacted(DS_NAME, cfg, len);
  return rv;
}

static void free_cfg(void *cfg) {
  cfg_ref_t *ref = cfg;
  tg_inode_file_cfg_free(ref->cfg);
  ref->cfg = NULL;
}

/* --- packets ------------------------------------------------------------ */

static void end_packet(inode_file_t *x) {
  if (!x->w) return;
  tg_pbw_end_nested(x->w);
  x->sink->end(x->sink->ctx);
  x->w = NULL;
  x->st.packets++;
}

static void load_mounts(inode_file_t *x) {
  int rv = tg_mountinfo_read(&x->mounts, MOUNTINFO_PATH);
  if (rv < 0 && !x->mounts_warned) {
    TG_WARN(DS_NAME ": cannot read " MOUNTINFO_PATH
                    " (%s): no mount points "
                    "to scan",
            tg_strerror(rv));
    x->mounts_warned = true;
  }
  tg_mountinfo_sort(&x->mounts);
}

/* Whether mount |i| of |mi| (sorted by point) repeats the point of an
 * earlier mount of its device: equal points are adjacent, in any order of
 * their devices. */
static bool repeats_point(const tg_mountinfo_t *mi, size_t i) {
  const tg_mount_t *m = &mi->v[i];
  for (size_t j = i; j > 0 && strcmp(mi->v[j - 1].point, m->point) == 0; j--)
    if (mi->v[j - 1].dev == m->dev) return true;
  return false;
}

/* The mount points come from the mountinfo of the last scan: every entry
 * written, from a scan or from the cache, was found by a scan. */
static void begin_packet(inode_file_t *x, uint64_t dev) {
  x->w = x->sink->begin(x->sink->ctx);
  if (!x->w) return;
  x->w_dev = dev;
  x->w_entries = 0;
  tg_pbw_append_varint(x->w, PACKET_TIMESTAMP, tg__clock_boottime());
  tg_pbw_begin_nested(x->w, PACKET_INODE_FILE_MAP);
  tg_pbw_append_varint(x->w, MAP_BLOCK_DEVICE_ID, dev);
  unsigned points = 0;
  for (size_t i = 0; i < x->mounts.n && points < TG_INODE_MAP_MAX_POINTS; i++) {
    const tg_mount_t *m = &x->mounts.v[i];
    if (m->dev != dev || repeats_point(&x->mounts, i)) continue;
    tg_pbw_append_bytes(x->w, MAP_MOUNT_POINTS, m->point, m->point_len);
    points++;
  }
}

/* One entry into the packet of |dev|: the current one, or a new one.
 * False when the sink gave no packet. */
static bool emit(inode_file_t *x, uint64_t dev, uint64_t ino, const char *path,
                 size_t len, uint8_t type) {
  if (x->w && (x->w_dev != dev || x->w_entries == TG_INODE_MAP_MAX_ENTRIES))
    end_packet(x);
  if (!x->w) begin_packet(x, dev);
  if (!x->w) return false;
  tg_pbw_begin_nested(x->w, MAP_ENTRIES);
  tg_pbw_append_varint(x->w, ENTRY_INODE_NUMBER, ino);
  tg_pbw_append_bytes(x->w, ENTRY_PATHS, path, len);
  tg_pbw_append_varint(x->w, ENTRY_TYPE, type);
  tg_pbw_end_nested(x->w);
  x->w_entries++;
  return true;
}

/* --- taking pairs from the feed ----------------------------------------- */

static int cmp_key(const void *a, const void *b) {
  const tg_inode_key_t *x = a, *y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  return (x->ino > y->ino) - (x->ino < y->ino);
}

/* One pair the kernel named: written from the cache, or left alone, or
 * queued for the next scan. Returns whether it was written. */
static bool take_one(inode_file_t *x, tg_inode_key_t k) {
  tg_inode_cache_entry_t *e = tg_inode_cache_get(x->cache, k.ino, k.dev);
  if (e) {
    if (e->written_ms && x->now_ms - e->written_ms < TG_INODE_REWRITE_MS)
      return false;
    if (!emit(x, k.dev, k.ino, e->path, e->path_len, e->type)) return false;
    e->written_ms = x->now_ms ? x->now_ms : 1;
    x->st.from_cache++;
    return true;
  }
  if (x->cfg->do_not_scan ||
      tg_inode_set_find(&x->not_found, k.ino, k.dev) >= 0) {
    x->st.not_scanned++;
    return false;
  }
  /* Already looked for by the running scan. */
  if (x->state == SCAN_RUNNING &&
      tg_inode_set_find(&x->missing, k.ino, k.dev) >= 0)
    return false;
  tg_inode_set_add(&x->next, k.ino, k.dev);
  return false;
}

size_t tg__inode_file_take(void *state, const tg_probes_sink_t *sink,
                           uint64_t now_ms) {
  inode_file_t *x = state;
  if (!x->consumer) return 0;
  size_t n =
      tg_inode_feed_drain(x->feed, x->consumer, x->taken, TG_INODE_FEED_CAP);
  if (!n) return 0;
  x->now_ms = now_ms;
  x->sink = sink;
  /* By device, so that each gets one packet. */
  qsort(x->taken, n, sizeof(*x->taken), cmp_key);
  size_t written = 0;
  for (size_t i = 0; i < n; i++) written += take_one(x, x->taken[i]);
  end_packet(x);
  x->sink = NULL; /* the caller's, for this take only */
  x->st.dropped += x->next.base.dropped;
  x->next.base.dropped = 0;
  if (x->state == SCAN_IDLE && x->next.base.n) {
    x->state = SCAN_WAITING;
    x->due_ms = now_ms + x->cfg->scan_delay_ms;
  }
  return written;
}

/* --- scanning ------------------------------------------------------------ */

static bool listed(char *const *v, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i], s) == 0) return true;
  return false;
}

/* Whether the scan of a device walks from mount |m|: scan_mount_points
 * (when set) names it. */
static bool allowed(const inode_file_t *x, const tg_mount_t *m) {
  return x->cfg->n_scan_mount_points == 0 ||
         listed(x->cfg->scan_mount_points, x->cfg->n_scan_mount_points,
                m->point);
}

static void add_root(inode_file_t *x, const char *path, uint64_t dev) {
  int rv = tg_inode_scan_add_root(x->scan, path, dev);
  if (rv < 0) TG_DEBUG(DS_NAME ": %s not scanned: %s", path, tg_strerror(rv));
}

bool tg__inode_mount_covers(const tg_mountinfo_t *mi, const tg_mount_t *c,
                            const tg_mount_t *m) {
  if (c->dev != m->dev) return false;
  /* |rest|: where |m|'s root lies below |c|'s, "" or starting with '/'. */
  const char *rest;
  size_t cl = strlen(c->root);
  if (strcmp(c->root, "/") == 0)
    rest = strcmp(m->root, "/") == 0 ? "" : m->root;
  else if (strncmp(m->root, c->root, cl) == 0 &&
           (m->root[cl] == '/' || m->root[cl] == '\0'))
    rest = m->root + cl;
  else
    return false;
  if (rest[0] == '\0') return true;
  /* That place in |c|'s view, and every directory on the way to it below
   * |c|'s point: none may be a mount point. */
  char path[PATH_MAX];
  const char *base = strcmp(c->point, "/") == 0 ? "" : c->point;
  int w = snprintf(path, sizeof(path), "%s%s", base, rest);
  if (w < 0 || (size_t)w >= sizeof(path)) return false;
  for (size_t i = strlen(base) + 1; i <= (size_t)w; i++)
    if ((i == (size_t)w || path[i] == '/') &&
        tg_mountinfo_is_point(mi, path, i))
      return false;
  return true;
}

/* Queues where the inodes of |dev| are looked for: a mount_point_mapping's
 * scan_roots for one of its mount points, else the mount points of |dev|
 * that no other covers (tg__inode_mount_covers): a device mounted whole
 * twice, or a bind mount of a part of it, is walked once. */
static void add_roots_of(inode_file_t *x, uint64_t dev) {
  const tg_mountinfo_t *mi = &x->mounts;
  for (size_t i = 0; i < mi->n; i++) {
    const tg_mount_t *m = &mi->v[i];
    if (m->dev != dev || !allowed(x, m)) continue;
    for (size_t j = 0; j < x->cfg->n_mappings; j++) {
      const tg_inode_mapping_t *map = &x->cfg->mappings[j];
      if (strcmp(map->mountpoint, m->point) != 0) continue;
      for (size_t r = 0; r < map->n_roots; r++) add_root(x, map->roots[r], dev);
      return;
    }
  }
  for (size_t i = 0; i < mi->n; i++) {
    const tg_mount_t *m = &mi->v[i];
    if (m->dev != dev || !allowed(x, m) || repeats_point(mi, i)) continue;
    bool covered = false;
    for (size_t j = 0; j < mi->n && !covered; j++) {
      const tg_mount_t *c = &mi->v[j];
      if (j == i || c->dev != dev || !allowed(x, c) || repeats_point(mi, j) ||
          !tg__inode_mount_covers(mi, c, m))
        continue;
      /* Of two that cover each other, the first is walked. */
      covered = j < i || !tg__inode_mount_covers(mi, m, c);
    }
    if (!covered) add_root(x, m->point, dev);
  }
}

static bool on_entry(void *ctx, uint64_t dev, uint64_t ino, const char *path,
                     size_t len, tg_inode_type_t type) {
  inode_file_t *x = ctx;
  int32_t i = tg_inode_set_find(&x->missing, ino, dev);
  if (i < 0 || x->found[i]) return true;
  x->found[i] = 1;
  x->remaining--;
  x->st.resolved++;
  tg_inode_cache_entry_t *e =
      tg_inode_cache_put(x->cache, ino, dev, path, len, (uint8_t)type);
  /* Not written (no packet): the next take writes it from the cache. */
  if (emit(x, dev, ino, path, len, (uint8_t)type) && e)
    e->written_ms = x->now_ms ? x->now_ms : 1;
  return x->remaining > 0;
}

/* Another mount's point is another file system, or another view of this
 * one: the walk stays out of it. */
static bool skip_dir(void *ctx, const char *path, size_t len) {
  inode_file_t *x = ctx;
  return tg_mountinfo_is_point(&x->mounts, path, len);
}

/* The pairs the scan did not find are not looked for again. */
static void finish_scan(inode_file_t *x, uint64_t now) {
  tg_inode_scan_reset(x->scan);
  for (uint32_t i = 0; i < x->missing.base.n; i++) {
    if (x->found[i]) continue;
    if (tg_inode_set_room(&x->not_found) == 0)
      tg_inode_set_clear(&x->not_found);
    tg_inode_set_add(&x->not_found, x->missing.keys[i].ino,
                     x->missing.keys[i].dev);
    x->st.not_found++;
  }
  tg_inode_set_clear(&x->missing);
  x->remaining = 0;
  if (x->next.base.n) {
    x->state = SCAN_WAITING;
    x->due_ms = now + x->cfg->scan_delay_ms;
  } else {
    x->state = SCAN_IDLE;
  }
}

static void start_scan(inode_file_t *x) {
  load_mounts(x);
  /* What waited is now the scan's. */
  tg_inode_set_t t = x->missing;
  x->missing = x->next;
  x->next = t;
  tg_inode_set_clear(&x->next);
  memset(x->found, 0, x->missing.base.n);
  x->remaining = x->missing.base.n;
  uint64_t devs[TG_INODE_SCAN_MAX_DEVS];
  size_t n_devs = 0;
  for (uint32_t i = 0; i < x->missing.base.n; i++) {
    uint64_t dev = x->missing.keys[i].dev;
    size_t d = 0;
    while (d < n_devs && devs[d] != dev) d++;
    if (d < n_devs) continue;
    if (n_devs == TG_INODE_SCAN_MAX_DEVS) {
      /* Not this time: back to wait for the next scan. */
      x->found[i] = 1;
      x->remaining--;
      tg_inode_set_add(&x->next, x->missing.keys[i].ino, dev);
      continue;
    }
    devs[n_devs++] = dev;
    add_roots_of(x, dev);
  }
  x->st.scans++;
  x->state = SCAN_RUNNING;
  TG_DEBUG(DS_NAME ": scanning for %u inode(s) on %zu device(s)", x->remaining,
           n_devs);
}

static void run_batch(inode_file_t *x, uint64_t now) {
  bool done = false;
  x->now_ms = now;
  tg_inode_scan_step(x->scan, x->cfg->scan_batch_size, &done);
  end_packet(x);
  x->st.rounds++;
  if (done || x->remaining == 0) finish_scan(x, now);
}

uint64_t tg__inode_file_round(void *state, const tg_probes_sink_t *sink,
                              uint64_t now) {
  inode_file_t *x = state;
  tg__inode_file_take(x, sink, now);
  if (x->state == SCAN_WAITING && now >= x->due_ms) start_scan(x);
  if (x->state == SCAN_RUNNING) {
    x->sink = sink; /* for this batch only */
    run_batch(x, now);
    x->sink = NULL;
    if (x->state == SCAN_RUNNING) return now + x->cfg->scan_interval_ms;
  }
  uint64_t idle = now + TG_INODE_IDLE_POLL_MS;
  return x->state == SCAN_WAITING && x->due_ms < idle ? x->due_ms : idle;
}

const tg_inode_file_stats_t *tg__inode_file_stats(const void *state) {
  const inode_file_t *x = state;
  return &x->st;
}

/* --- the data source ----------------------------------------------------- */

static void destroy(void *state) {
  inode_file_t *x = state;
  if (x->consumer) {
    x->st.dropped += tg_inode_feed_dropped(x->feed, x->consumer);
    tg_inode_feed_unregister(x->feed, x->consumer);
  }
  /* Debug only: destroy runs after the stop, when tracegate-probes may be
   * shutting down the agent, which sets the log sink unsynchronized. */
  if (x->st.scans || x->st.from_cache || x->st.dropped)
    TG_DEBUG(DS_NAME
             ": %llu scan(s) in %llu round(s): %llu inode(s) found, "
             "%llu from the cache, %llu not found, %llu not scanned for, "
             "%llu dropped (too many waiting)",
             (unsigned long long)x->st.scans, (unsigned long long)x->st.rounds,
             (unsigned long long)x->st.resolved,
             (unsigned long long)x->st.from_cache,
             (unsigned long long)x->st.not_found,
             (unsigned long long)x->st.not_scanned,
             (unsigned long long)x->st.dropped);
  const tg_inode_scan_stats_t *ss = x->scan ? tg_inode_scan_stats(x->scan)
                                            : NULL;
  if (ss && ss->dirs)
    TG_DEBUG(DS_NAME
             ": walked %llu entries in %llu directories; left out: %llu too "
             "deep, %llu paths too long, %llu on another device, %llu that "
             "did not open, %llu changed between batches",
             (unsigned long long)ss->entries, (unsigned long long)ss->dirs,
             (unsigned long long)ss->too_deep,
             (unsigned long long)ss->too_long,
             (unsigned long long)ss->other_dev,
             (unsigned long long)ss->open_errors,
             (unsigned long long)ss->changed);
  tg_inode_scan_free(x->scan);
  tg_inode_cache_free(x->cache);
  tg_mountinfo_free(&x->mounts);
  tg_inode_set_free(&x->next);
  tg_inode_set_free(&x->missing);
  tg_inode_set_free(&x->not_found);
  free(x->found);
  free(x->taken);
  tg_inode_file_cfg_free(x->cfg);
  free(x);
}

/* |ctx| is the inode feed (NULL: nothing to resolve). Takes the config. */
static int create(const void *cfg, void *ctx, void **state) {
  inode_file_t *x = calloc(1, sizeof(*x));
  if (!x) return -ENOMEM;
  const tg_inode_scan_cbs_t cbs = {on_entry, skip_dir, x};
  int rv;
  if ((rv = tg_inode_set_init(&x->next, TG_INODE_FEED_CAP)) < 0 ||
      (rv = tg_inode_set_init(&x->missing, TG_INODE_FEED_CAP)) < 0 ||
      (rv = tg_inode_set_init(&x->not_found, TG_INODE_NOT_FOUND_CAP)) < 0 ||
      (rv = tg_inode_cache_new(TG_INODE_CACHE_CAP, &x->cache)) < 0 ||
      (rv = tg_inode_scan_new(&cbs, &x->scan)) < 0) {
    destroy(x);
    return rv;
  }
  x->found = calloc(TG_INODE_FEED_CAP, 1);
  x->taken = malloc(TG_INODE_FEED_CAP * sizeof(*x->taken));
  if (!x->found || !x->taken) {
    destroy(x);
    return -ENOMEM;
  }
  /* Ours from here on (free_cfg is not called after a create that
   * succeeds). */
  x->cfg = ((const cfg_ref_t *)cfg)->cfg;
  x->feed = ctx;
  if (x->cfg->truncated)
    TG_WARN(DS_NAME
            ": only the first %d scan_mount_points, "
            "mount_point_mapping entries and scan_roots are used",
            TG_INODE_CFG_LIST_MAX);
  if (x->feed) {
    rv = x->cfg->tracing_session_id
             ? tg_inode_feed_register(x->feed, x->cfg->tracing_session_id,
                                      (int32_t)gettid(), &x->consumer)
             : -EINVAL;
    if (rv == -EINVAL)
      TG_INFO(DS_NAME
              ": the config has no tracing_session_id; the inodes "
              "linux.ftrace sees are not resolved");
    else if (rv < 0)
      TG_WARN(DS_NAME ": the inodes linux.ftrace sees are not resolved: %s",
              tg_strerror(rv));
  }
  *state = x;
  return 0;
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  tg_probes_ds_target_t t = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&t);
  return tg__inode_file_round(state, &sink, now);
}

/* Inodes came: the cache answers now; a scan waits for its round. */
static void wake(void *state, tg_ds_t *ds, unsigned inst) {
  tg_probes_ds_target_t t = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&t);
  tg__inode_file_take(state, &sink, tg_probes_now_ms());
}

const tg_probe_ops_t tg_inode_file_probe = {
    .name = DS_NAME,
    .parse_cfg = parse_cfg,
    .create = create,
    .free_cfg = free_cfg,
    .tick = tick,
    .wake = wake,
    .destroy = destroy,
};
