/* linux.inode_file_map's rounds, for its data source (inode_file_ds.c) and
 * for tests, which run them on an instance of tg_inode_file_probe with a
 * plain sink and a clock of their own.
 *
 * An instance takes the (inode, device) pairs linux.ftrace of its session
 * publishes (inode_feed.h). A pair it resolved lately (inode_cache.h) is
 * written at once; one that a full scan already missed is dropped; the
 * rest wait for the next scan, which starts scan_delay_ms after the first
 * of them came and walks the mount points of their devices (or
 * mount_point_mapping's scan_roots), scan_batch_size entries per round,
 * one round every scan_interval_ms. Each round writes what it found as
 * TracePacket { inode_file_map }, one per device. What a full scan did not
 * find is not looked for again (until the set of such pairs fills up and
 * starts over). With do_not_scan only the cache answers.
 */
#ifndef TRACEGATE_PROBES_INODE_FILE_H
#define TRACEGATE_PROBES_INODE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/probes/mountinfo.h"
#include "agent/probes/probes_sink.h"

/* Resolved inodes kept per instance (Perfetto's probes keep 1000). */
#define TG_INODE_CACHE_CAP 1024
/* Pairs a full scan missed, remembered so as not to scan for them again. */
#define TG_INODE_NOT_FOUND_CAP 16384
/* Devices one scan walks; pairs on more wait for the next scan. */
#define TG_INODE_SCAN_MAX_DEVS 64
/* Entries per InodeFileMap packet; a round that finds more writes more
 * packets. */
#define TG_INODE_MAP_MAX_ENTRIES 2048
/* Mount points written per device. */
#define TG_INODE_MAP_MAX_POINTS 64
/* A cached entry is written again when the kernel names its inode and
 * it was last written this long ago (the older packet may have been
 * overwritten in a ring buffer). */
#define TG_INODE_REWRITE_MS 10000
/* How often an idle instance looks at the feed between wake-ups. */
#define TG_INODE_IDLE_POLL_MS 1000

typedef struct tg_inode_file_stats {
  uint64_t scans;       /* started */
  uint64_t rounds;      /* scan rounds (batches) */
  uint64_t resolved;    /* found by a scan */
  uint64_t from_cache;  /* written from the cache */
  uint64_t not_found;   /* missed by a full scan */
  uint64_t not_scanned; /* do_not_scan, or already missed by a scan */
  uint64_t dropped;     /* no room to wait for a scan, or in the feed */
  uint64_t packets;     /* InodeFileMap packets written */
} tg_inode_file_stats_t;

/* Sampler thread: takes what the feed holds for instance |state| (of
 * tg_inode_file_probe.create, with the feed as its ctx), writes what the
 * cache knows into |sink| and queues the rest for a scan. Returns the
 * entries written. */
size_t tg__inode_file_take(void *state, const tg_probes_sink_t *sink,
                           uint64_t now_ms);

/* Sampler thread: one round at |now_ms|: takes, then starts a scan that
 * is due or runs one batch of the running one. Returns when the next
 * round is due (absolute ms). */
uint64_t tg__inode_file_round(void *state, const tg_probes_sink_t *sink,
                              uint64_t now_ms);

const tg_inode_file_stats_t *tg__inode_file_stats(const void *state);

/* Whether a walk from mount |c| (of |mi|, sorted) reaches every directory
 * of mount |m| of the same device: |m|'s root lies in |c|'s tree, and no
 * mount point hides that place in |c|'s view (the walk does not enter
 * mount points). A scan walks only mounts that no other covers (of two
 * that cover each other, the first). */
bool tg__inode_mount_covers(const tg_mountinfo_t *mi, const tg_mount_t *c,
                            const tg_mount_t *m);

#endif /* TRACEGATE_PROBES_INODE_FILE_H */
