/* What the merge left out of a host's part: see merge_problem.h. */
#include "consumer/fleet/merge_problem.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "consumer/fleet/trace_schema.h"
#include "common/json.h"

static const struct {
  const char *name;
  tg_notice_t code;
} kReasons[TG_MERGE_LEFT_REASON_COUNT] = {
    [TG_MERGE_LEFT_STATE_LOST] = {"state_lost", TG_N_COLLECTOR_STATE_LOST},
    [TG_MERGE_LEFT_NOT_ALLOWED] = {"not_allowed", TG_N_COLLECTOR_NOT_ALLOWED},
    [TG_MERGE_LEFT_CLOCK_UNPLACED] = {"clock_unplaced",
                                      TG_N_COLLECTOR_CLOCK_UNPLACED},
    [TG_MERGE_LEFT_APP_TRACKS] = {"app_tracks", TG_N_COLLECTOR_APP_TRACKS},
};

const char *tg_merge_left_reason_name(tg_merge_left_reason_t r) {
  return (unsigned)r < TG_MERGE_LEFT_REASON_COUNT ? kReasons[r].name : "?";
}

tg_notice_t tg_merge_left_reason_code(tg_merge_left_reason_t r) {
  return (unsigned)r < TG_MERGE_LEFT_REASON_COUNT ? kReasons[r].code
                                                  : TG_N_NONE;
}

static tg_merge_left_out_t *add(tg_merge_left_outs_t *out,
                                tg_merge_left_reason_t r, uint64_t packets) {
  tg_merge_left_out_t *l = &out->items[out->n++];
  memset(l, 0, sizeof(*l));
  l->reason = r;
  l->packets = packets;
  return l;
}

void tg_merge_left_outs(const tg_merge_host_t *mh, tg_merge_left_outs_t *out) {
  out->n = 0;
  if (mh->state_lost) {
    tg_merge_left_out_t *l = add(out, TG_MERGE_LEFT_STATE_LOST, mh->state_lost);
    char past[96] = "";
    if (mh->state_untracked)
      snprintf(past, sizeof(past), ", %" PRIu64 " of them on sequences past "
               "the %u the merge follows", mh->state_untracked,
               TG_MERGE_HOST_MAX_STATE_SEQS);
    snprintf(l->why, sizeof(l->why), "%" PRIu64 " packets on %" PRIu32
             " sequences need incremental state the ring no longer holds%s "
             "(left out; the ring clears it too rarely, or lost data)",
             mh->state_lost, mh->state_lost_seqs, past);
  }
  if (mh->not_allowed) {
    tg_merge_left_out_t *l =
        add(out, TG_MERGE_LEFT_NOT_ALLOWED, mh->not_allowed);
    l->message = tg_trace_schema_message_name(mh->not_allowed_in);
    l->field = mh->not_allowed_field;
    l->field_name =
        tg_trace_schema_field_name(mh->not_allowed_in, mh->not_allowed_field);
    char field[96];
    snprintf(l->why, sizeof(l->why), "%" PRIu64 " packet%s with a field no "
             "Linux producer writes left out; the last: %s", mh->not_allowed,
             mh->not_allowed == 1 ? "" : "s",
             tg_merge_refused_field(mh, field, sizeof(field)));
  }
  if (mh->clock_unplaced) {
    tg_merge_left_out_t *l =
        add(out, TG_MERGE_LEFT_CLOCK_UNPLACED, mh->clock_unplaced);
    snprintf(l->why, sizeof(l->why), "%" PRIu64 " packet%s whose times trace "
             "processor could not place on the host's clocks left out",
             mh->clock_unplaced, mh->clock_unplaced == 1 ? "" : "s");
  }
  uint64_t app = tg_merge_joined_left_out(mh);
  if (app) {
    tg_merge_left_out_t *l = add(out, TG_MERGE_LEFT_APP_TRACKS, app);
    snprintf(l->why, sizeof(l->why), "%" PRIu64 " app packet%s the joined "
             "mode could not put on the collector's machine left out: %"
             PRIu64 " with a field not allowed there, %" PRIu64 " on a clock "
             "its estimate does not cover, %" PRIu64 " past the pids it "
             "maps, %" PRIu64 " naming another host's track uuid", app,
             app == 1 ? "" : "s", mh->joined_refused, mh->joined_clock,
             mh->joined_pids, mh->joined_uuid);
  }
}

/* "TG-5063" from the notice's tag "[TG-5063]". */
static void notice_code(tg_notice_t n, char code[16]) {
  const char *tag = tg_notice_tag(n);
  snprintf(code, 16, "%.*s", (int)strlen(tag) - 2, tag + 1);
}

json_t *tg_merge_left_out_json(const tg_merge_left_out_t *l) {
  char code[16];
  notice_code(tg_merge_left_reason_code(l->reason), code);
  json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:o}", "kind", "merge", "code",
                        code, "reason", tg_merge_left_reason_name(l->reason),
                        "packets", tg_json_u64(l->packets), "why",
                        tg_json_text(l->why));
  if (o && l->reason == TG_MERGE_LEFT_NOT_ALLOWED) {
    o = tg_json_put(o, "message", json_string(l->message));
    o = tg_json_put(o, "field", json_integer(l->field));
    if (l->field_name)
      o = tg_json_put(o, "field_name", json_string(l->field_name));
  }
  return o;
}

json_t *tg_merge_links_json(tg_merge_app_tracks_t mode,
                            const tg_merge_host_t *mh) {
  return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                   "mode", tg_merge_app_tracks_name(mode), "joined",
                   tg_json_u64(mh->joined), "early",
                   tg_json_u64(mh->joined_early), "unclocked",
                   tg_json_u64(mh->joined_unclocked), "shared",
                   tg_json_u64(mh->joined_shared), "flows_started",
                   tg_json_u64(mh->flows_started), "flows_terminated",
                   tg_json_u64(mh->flows_terminated), "flows_unmatched",
                   tg_json_u64(mh->flows_unmatched), "flows_unfollowed",
                   tg_json_u64(mh->flows_unfollowed), "flows_across",
                   tg_json_u64(mh->flows_across));
}

json_t *tg_reclock_host_json(const tg_reclock_host_t *r) {
  if (!r) return json_null();
  return json_pack(
      "{s:o, s:o, s:b, s:b, s:f, s:f, s:o, s:o, s:o}", "samples_used",
      tg_json_u64(r->samples_used), "samples_rejected",
      tg_json_u64(r->samples_rejected), "anchor", r->anchor, "moved",
      r->moved, "offset_us", r->moved ? r->offset_us : 0.0, "drift_ppm",
      r->moved ? r->drift_ppm : 0.0, "margin_us",
      r->moved ? json_real(r->margin_us) : json_null(), "packets_moved",
      tg_json_u64(r->packets_moved), "syncs_added",
      tg_json_u64(r->syncs_added));
}

json_t *tg_merge_links_problem_json(const tg_merge_host_t *mh) {
  if (!mh->flows_unmatched && !mh->flows_unfollowed) return NULL;
  char code[16], why[TG_MERGE_LEFT_WHY_MAX + 1];
  notice_code(TG_N_COLLECTOR_FLOW_ENDS_UNMATCHED, code);
  snprintf(why, sizeof(why), "%" PRIu64 " flow end%s without the other in "
           "the snapshot (its peer host not in it, a ring's edge, a request "
           "in flight), %" PRIu64 " past the flows the merge follows; of %"
           PRIu64 " started, %" PRIu64 " ended", mh->flows_unmatched,
           mh->flows_unmatched == 1 ? "" : "s", mh->flows_unfollowed,
           mh->flows_started, mh->flows_terminated);
  return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "kind", "links",
                   "code", code, "flows_unmatched",
                   tg_json_u64(mh->flows_unmatched), "flows_unfollowed",
                   tg_json_u64(mh->flows_unfollowed), "flows_started",
                   tg_json_u64(mh->flows_started), "flows_terminated",
                   tg_json_u64(mh->flows_terminated), "why",
                   tg_json_text(why));
}

const char *tg_merge_left_out_line(const tg_merge_left_out_t *l, char *buf,
                                   size_t cap) {
  if (!cap) return "";
  snprintf(buf, cap, "%s %s",
           tg_notice_tag(tg_merge_left_reason_code(l->reason)), l->why);
  return buf;
}
