/* What the merge left out of one host's part for a reason it names, as
 * problems of the host: the collector's snapshot rows (beside the data
 * sources of consumer/fleet/ds_problem.h, in the same "problems" array) and its
 * log. As JSON, each is
 *
 *   {"kind": "merge", "code": "TG-5060", "reason": "not_allowed",
 *    "packets": 3, "message": "InternedData", "field": 35,
 *    "field_name": "v8_isolate", "why": "..."}
 *
 * "reason" is a stable token, "code" the notice code of the same reason
 * (common/notice.h): "state_lost" (TG-5021: packets that need
 * incremental state their sequence no longer has), "not_allowed"
 * (TG-5060: a field the merge's allowlist does not keep; "message" and
 * "field" name the last one refused, "field_name" when Perfetto's schema
 * has one), "clock_unplaced" (TG-5061: times trace processor could not
 * place on the host's clocks) and "app_tracks" (TG-5062: app packets the
 * joined mode left out, merge.h's joined_refused, _clock, _pids and
 * _uuid). "packets" counts the packets left out for the reason; each of
 * them is in the host's loss too (merge.h: the merge's malformed and
 * state_lost counts, and tg_merge_joined_left_out()). The packets the screen
 * leaves out for another reason (not decoding, a wire type, a value rule)
 * count in the loss alone.
 */
#ifndef TRACEGATE_FLEET_MERGE_PROBLEM_H
#define TRACEGATE_FLEET_MERGE_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/notice.h"
#include "consumer/fleet/merge.h"
#include "consumer/fleet/reclock.h"

typedef enum tg_merge_left_reason {
  TG_MERGE_LEFT_STATE_LOST = 0,
  TG_MERGE_LEFT_NOT_ALLOWED,
  TG_MERGE_LEFT_CLOCK_UNPLACED,
  TG_MERGE_LEFT_APP_TRACKS,
  TG_MERGE_LEFT_REASON_COUNT
} tg_merge_left_reason_t;

/* "[TG-5060] 3 packets with a field ..." fits a host row's error. */
#define TG_MERGE_LEFT_WHY_MAX 400

typedef struct tg_merge_left_out {
  tg_merge_left_reason_t reason;
  uint64_t packets;
  /* not_allowed: the last field refused. |message| and |field_name| are
   * static (consumer/fleet/trace_schema.h); |field_name| NULL when the schema has
   * none. */
  const char *message;
  uint32_t field;
  const char *field_name;
  char why[TG_MERGE_LEFT_WHY_MAX + 1];
} tg_merge_left_out_t;

typedef struct tg_merge_left_outs {
  tg_merge_left_out_t items[TG_MERGE_LEFT_REASON_COUNT];
  size_t n;
} tg_merge_left_outs_t;

/* "state_lost", "not_allowed", "clock_unplaced", "app_tracks"; "?" out of
 * range. */
const char *tg_merge_left_reason_name(tg_merge_left_reason_t r);
/* TG_N_COLLECTOR_STATE_LOST, ...; TG_N_NONE out of range. */
tg_notice_t tg_merge_left_reason_code(tg_merge_left_reason_t r);

/* The reasons |mh| left packets out for, in the order above, each with
 * its count (none: n == 0). Read once tg_merge_host_end() ran, so that
 * state_lost is final. */
void tg_merge_left_outs(const tg_merge_host_t *mh, tg_merge_left_outs_t *out);

/* One as a JSON object (above); NULL out of memory. */
json_t *tg_merge_left_out_json(const tg_merge_left_out_t *l);

/* "[TG-5060] 3 packets ..." for a row's error or a log line, in |buf|
 * (|cap| bytes, cut to fit). Returns |buf|. */
const char *tg_merge_left_out_line(const tg_merge_left_out_t *l, char *buf,
                                   size_t cap);

/* What the merge saw of |mh|'s flows, read once tg_merge_links_end() ran,
 * as the collector's host row keeps it (docs/collector.md, "links"; the
 * names those of `record --summary-json`'s hosts[].links):
 *
 *   {"mode": "joined", "joined": 5120, "early": 0, "unclocked": 0,
 *    "shared": 0,
 *    "flows_started": 300, "flows_terminated": 0, "flows_unmatched": 2,
 *    "flows_unfollowed": 0, "flows_across": 298}
 *
 * NULL out of memory. */
json_t *tg_merge_links_json(tg_merge_app_tracks_t mode,
                            const tg_merge_host_t *mh);

/* How the second pass placed a host by its requests (reclock.h), as
 * `record --summary-json`'s hosts[].clock_from_requests and the
 * collector's host row's links.clock_from_requests say it:
 *
 *   {"samples_used": 298, "samples_rejected": 0, "anchor": false,
 *    "moved": true, "offset_us": -12.5, "drift_ppm": 3.1,
 *    "margin_us": 4.2, "packets_moved": 5120, "syncs_added": 14}
 *
 * offset, drift and margin are 0, 0 and null for a host not moved. JSON
 * null for |r| NULL (no second pass); NULL out of memory. */
json_t *tg_reclock_host_json(const tg_reclock_host_t *r);

/* The problem of |mh|'s flows whose other end is not in the file, or past
 * the merge's bound: NULL when it has none (or out of memory), else
 *
 *   {"kind": "links", "code": "TG-5063", "flows_unmatched": 2,
 *    "flows_unfollowed": 0, "flows_started": 300, "flows_terminated": 0,
 *    "why": "..."}
 *
 * Information, not a loss: the ends are in the file, and a ring's edge
 * or a request in flight leaves some at every snapshot. */
json_t *tg_merge_links_problem_json(const tg_merge_host_t *mh);

#endif /* TRACEGATE_FLEET_MERGE_PROBLEM_H */
