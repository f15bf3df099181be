// SPDX-License-Identifier: Apache-2.0
/* tracegate-collector --rebuild-catalog (coll.h, coll_rebuild): the store
 * as the config names it, its catalog made again from the bucket's
 * sidecars (store.h, tg_coll_store_rebuild). Progress goes to stderr, at
 * most once a second; what was done to stdout as one JSON line, for
 * scripts. Runs once and exits: no hosts, no listener. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "collector/daemon/coll.h"
#include "collector/catalog/snapshot_id.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/json.h"
#include "common/log.h"
#include "tracegate/error.h"

/* Snapshots named one by one in the summary; past that, counted. */
#define NAMED_MAX 1000

typedef struct progress {
  json_t *named; /* [{"id", "what", "why"}] */
  uint64_t left_out;
  int64_t last_ms;
} progress_t;

static void on_one(void *ctx, uint64_t i, uint64_t total, uint64_t id,
                   tg_coll_rebuilt_t what, const char *why) {
  progress_t *p = ctx;
  if (what != TG_COLL_REBUILT_INSERTED && what != TG_COLL_REBUILT_PRESENT) {
    if (json_array_size(p->named) < NAMED_MAX) {
      char idtext[TG_COLL_ID_STRLEN];
      tg_coll_id_format(id, idtext);
      json_t *o = json_object();
      o = tg_json_put(o, "id", json_string(idtext));
      o = tg_json_put(o, "what", json_string(tg_coll_rebuilt_name(what)));
      o = tg_json_put(o, "why", tg_json_text(why));
      p->named = tg_json_push(p->named, o);
    } else {
      p->left_out++;
    }
  }
  /* A span (a line a second at most), in a command without a loop: the
   * monotonic clock, not the wall's. */
  int64_t now = (int64_t)tg_clock_ms(&tg_clock_monotonic);
  if (i == total || now - p->last_ms >= 1000) {
    fprintf(stderr, COLL_PROG ": rebuild: %llu of %llu snapshots\n",
            (unsigned long long)i, (unsigned long long)total);
    p->last_ms = now;
  }
}

int coll_rebuild(coll_t *c, tg_coll_config_t *cfg) {
  c->cfg = *cfg;
  memset(cfg, 0, sizeof(*cfg));
  if (!c->cfg.s3_bucket[0]) {
    fprintf(stderr, COLL_PROG ": --rebuild-catalog: the config names no "
                    "bucket (bucket = s3://BUCKET/PREFIX): a directory "
                    "store's snapshots have no sidecars to rebuild from\n");
    tg_coll_config_free(&c->cfg);
    return TG_EXIT_FAIL;
  }
  if (coll_store_open(c) < 0) {
    tg_coll_catalog_close(c->shared);
    tg_coll_config_free(&c->cfg);
    return TG_EXIT_FAIL;
  }
  progress_t p = {.named = json_array(), .last_ms = (int64_t)tg_clock_ms(&tg_clock_monotonic)};
  tg_coll_rebuild_t r;
  int err = tg_coll_store_rebuild(c->store, on_one, &p, &r);
  char max_id[TG_COLL_ID_STRLEN] = "", max_unreserved[TG_COLL_ID_STRLEN] = "";
  if (r.max_id) tg_coll_id_format(r.max_id, max_id);
  if (r.max_unreserved_id)
    tg_coll_id_format(r.max_unreserved_id, max_unreserved);
  char bucket[sizeof(c->cfg.s3_bucket) + sizeof(c->cfg.s3_prefix) + 8];
  snprintf(bucket, sizeof bucket, "s3://%s/%s", c->cfg.s3_bucket,
           c->cfg.s3_prefix);
  json_t *o = json_object();
  o = tg_json_put(o, "rebuild", json_string(err ? "stopped" : "done"));
  o = tg_json_put(o, "bucket", tg_json_text(bucket));
  o = tg_json_put(o, "total", tg_json_u64(r.total));
  for (int k = TG_COLL_REBUILT_INSERTED; k <= TG_COLL_REBUILT_NO_SIDECAR; k++)
    o = tg_json_put(o, tg_coll_rebuilt_name((tg_coll_rebuilt_t)k),
                    tg_json_u64(r.count[k]));
  o = tg_json_put(o, "max_id", json_string(max_id));
  o = tg_json_put(o, "unreserved", tg_json_u64(r.unreserved));
  o = tg_json_put(o, "max_unreserved_id", json_string(max_unreserved));
  o = tg_json_put(o, "bytes_read", tg_json_u64(r.bytes_read));
  o = tg_json_put(o, "problems", p.named);
  o = tg_json_put(o, "problems_left_out", tg_json_u64(p.left_out));
  if (err) o = tg_json_put(o, "error", json_string(tg_strerror(err)));
  int werr = o ? tg_json_dumpf_line(o, stdout, JSON_COMPACT) : -ENOMEM;
  if (!werr && fflush(stdout) != 0) werr = -EIO;
  json_decref(o);
  tg_coll_store_close(c->store);
  c->store = NULL;
  tg_coll_catalog_close(c->shared);
  c->shared = NULL;
  tg_coll_config_free(&c->cfg);
  if (werr) {
    fprintf(stderr, COLL_PROG ": --rebuild-catalog: stdout: %s\n",
            tg_strerror(werr));
    return TG_EXIT_FAIL;
  }
  if (err) return TG_EXIT_FAIL;
  bool clean = !r.count[TG_COLL_REBUILT_FAILED] &&
               !r.count[TG_COLL_REBUILT_REFUSED] &&
               !r.count[TG_COLL_REBUILT_NO_SIDECAR];
  return clean ? TG_EXIT_OK : 3;
}
