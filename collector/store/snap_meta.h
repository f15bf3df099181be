/* A snapshot's sidecar: its catalog row as a small JSON object stored
 * beside its trace in a bucket (<prefix>snapshots/<id>.meta), so that a
 * lost catalog can be made again from the bucket alone
 * (docs/collector.md, "Rebuilding the catalog from the bucket").
 *
 *   {"format": "tracegate-snapshot-meta", "version": 1,
 *    "id": "000000000000002a", "object": "snapshots/000000000000002a.pftrace",
 *    "state": "complete", "pinned": false,
 *    "started_ms": ..., "finished_ms": ...,
 *    "trigger": "...", "reason": "...", "origin": "...",
 *    "bytes": ..., "crc32": ..., "etag": "\"...\"", "index": true,
 *    "packets": ..., "loss": ..., "n_hosts_failed": ...,
 *    "hosts": [{"host", "name", "outcome": "ok", "error", "problems",
 *               "boost", "links" (each absent in older sidecars: none),
 *               "bytes", "packets", "loss", "window_first_ms",
 *               "window_last_ms"}, ...]}
 *
 * Text follows common/json.h's rule (bytes that are not UTF-8 become
 * U+FFFD, as in the API). "object" is relative to the store's prefix, so a
 * bucket's snapshots can move under another prefix.
 *
 * A sidecar read back is untrusted (another writer may share the bucket):
 * the parser bounds its size and tree, checks every field's type, range
 * and length against the catalog's caps, and checks that the fields agree
 * (the state and loss are those the hosts give, the id is the key's).
 * No I/O here.
 */
#ifndef TRACEGATE_COLLECTOR_STORE_SNAP_META_H
#define TRACEGATE_COLLECTOR_STORE_SNAP_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/catalog/catalog.h"

#define TG_COLL_META_FORMAT "tracegate-snapshot-meta"
#define TG_COLL_META_VERSION 1
#define TG_COLL_META_SUFFIX ".meta"
/* Longest sidecar text read: a fleet's snapshot of thousands of hosts,
 * each with its error and problems at their caps, stays below. */
#define TG_COLL_META_MAX (16u << 20)
/* Most host rows in one sidecar. */
#define TG_COLL_META_HOSTS_MAX 100000u
/* An ETag as S3 gives it, quotes included. */
#define TG_COLL_META_ETAG_MAX 128

/* A parsed sidecar. Its strings and |hosts| point into storage the
 * sidecar owns until tg_coll_meta_free(). */
typedef struct tg_coll_meta {
  uint64_t id;
  tg_coll_state_t state; /* COMPLETE or PARTIAL */
  bool pinned;
  int64_t started_ms, finished_ms;
  const char *trigger, *reason, *origin;
  uint64_t bytes, packets, loss;
  uint32_t crc32, n_hosts_failed;
  const char *object; /* "snapshots/<id>.pftrace" */
  const char *etag;   /* the trace object's, "" if unknown */
  bool index;         /* a host index object was stored with it */
  tg_coll_host_result_t *hosts;
  size_t n_hosts;
  void *doc_; /* private: the parsed tree */
} tg_coll_meta_t;

/* What a sidecar is made from at a snapshot's commit (or when its row
 * changes). Borrowed for the call. */
typedef struct tg_coll_meta_in {
  uint64_t id;
  bool pinned;
  int64_t started_ms;
  const tg_coll_begin_t *begin;
  const tg_coll_finish_t *finish; /* with finished_ms */
  const char *etag;               /* NULL: "" */
  bool index;
} tg_coll_meta_in_t;

/* "snapshots/<id>.pftrace": the trace's key below the prefix. */
void tg_coll_meta_object_name(uint64_t id, char out[64]);

/* The sidecar's text, with a final newline: 0, *out (free() it) and *len;
 * -EINVAL (a row finish() would make FAILED, or what the catalog's checks
 * refuse), -ENOMEM. */
int tg_coll_meta_format(const tg_coll_meta_in_t *in, char **out, size_t *len);

/* Parses |len| bytes of |text_untrusted|. 0 and *out (free with
 * tg_coll_meta_free), or -EINVAL with the reason in |why| (|cap| bytes,
 * naming the field), -E2BIG (over TG_COLL_META_MAX or its tree's bound),
 * -ENOMEM. */
int tg_coll_meta_parse(const char *text_untrusted, size_t len,
                       tg_coll_meta_t *out, char *why, size_t cap);
void tg_coll_meta_free(tg_coll_meta_t *m); /* NULL-safe, idempotent */

#endif /* TRACEGATE_COLLECTOR_STORE_SNAP_META_H */
