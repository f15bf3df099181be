/* The CLI's side of one host of `record -H` (fleet.h). The fleet engine
 * (consumer/fleet/host.h) drives the host: connections, preparation, the
 * link, reconnection, the recording. What its events do here is this
 * file's: lines on the terminal, the resume key, the host's own output or
 * the merged trace, loss counters for the summary. The engine connects
 * through remote.h's dialer (tg_remote_dialer).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/fleet.h"

static fleet_host_t *of(tg_fleet_host_t *c) { return c->data; }

/* --- the engine's events ------------------------------------------------------------ */

static void on_notice(tg_fleet_host_t *c, tg_fleet_notice_t kind,
                      const char *text) {
  fleet_host_t *h = of(c);
  const char *tag = kind == TG_FLEET_WARNING ? "warning: "
                    : kind == TG_FLEET_NOTE  ? "note: "
                                             : "";
  fleet_say(h->f, TG_N_NONE, "%s: %s%s", h->t->spec, tag, text);
}

static void on_state(tg_fleet_host_t *c, tg_link_state_t from) {
  fleet_host_t *h = of(c);
  tg_link_state_t to = c->report.link_state;
  /* The service's loss while the link was down shows in the first stats
   * after re-attaching, compared with the last before the drop. */
  if (from == TG_LINK_UP && to == TG_LINK_DROPPING)
    h->loss_before_drop = h->loss.total;
  if (from == TG_LINK_RESUMING && to == TG_LINK_UP) h->recheck_loss = true;
}

static void on_key_ready(tg_fleet_host_t *c) {
  fleet_host_t *h = of(c);
  h->f->run->show_key(h->f, h);
}

static void on_service_state(tg_fleet_host_t *c,
                             const Perfetto__Protos__TracingServiceState *st) {
  fleet_host_t *h = of(c);
  fleet_names_record(h->f, h, st);
}

static void on_names_settled(tg_fleet_host_t *c) {
  fleet_host_t *h = of(c);
  fleet_names_host(h->f, h, NULL);
}

static void on_tracing(tg_fleet_host_t *c) {
  fleet_t *f = of(c)->f;
  f->run->host_traced(f);
}

static int on_described(tg_fleet_host_t *c) {
  fleet_host_t *h = of(c);
  if (h->f->mode != FLEET_OUT_MERGE) return 0;
  return tg_merge_host_preamble(&h->f->merge, &h->merge, &c->report,
                                h->t->label);
}

static int on_clock_estimate(tg_fleet_host_t *c) {
  fleet_host_t *h = of(c);
  if (h->f->mode != FLEET_OUT_MERGE) return 0;
  return tg_merge_clock_sync(&h->f->merge, &h->merge, &c->report);
}

static int on_packet(tg_fleet_host_t *c, const uint8_t *p, size_t n) {
  fleet_host_t *h = of(c);
  tg_ftrace_loss_scan(&h->ftrace, p, n);
  return h->f->mode == FLEET_OUT_MERGE
             ? tg_merge_packet(&h->f->merge, &h->merge, p, n)
             : cli_output_packet(&h->own, p, n);
}

/* Loss items in the summary's list, next to the service's counters (not
 * in their total: these are replies, bytes and packets, not chunks). */
static void add_loss_item(cli_loss_t *l, const char *name, uint64_t v) {
  if (!v) return;
  l->transit += v;
  if (l->n == sizeof(l->items) / sizeof(l->items[0])) {
    l->omitted++;
    return;
  }
  snprintf(l->items[l->n].name, sizeof(l->items[0].name), "%s", name);
  l->items[l->n].value = v;
  l->n++;
}

static void on_stats(tg_fleet_host_t *c, const Perfetto__Protos__TraceStats *st,
                     const tg_rec_replay_stats_t *rs) {
  fleet_host_t *h = of(c);
  cli_loss_collect(st, &h->loss);
  /* The service's counters say nothing of the kernel's buffers: the
   * host's linux.ftrace stats in its packets do. */
  cli_ftrace_loss_add(&h->ftrace, &h->loss);
  /* What a lost link took and the relay's window could not give back:
   * the service never saw it, so only the relay's count says it. */
  add_loss_item(&h->loss, "lost in transit: frames (relay replay window)",
                rs->lost_frames);
  add_loss_item(&h->loss, "lost in transit: bytes", rs->lost_bytes);
  add_loss_item(&h->loss, "lost in transit: packets cut", rs->lost_packets);
  h->has_loss = true;
  if (h->recheck_loss) {
    h->recheck_loss = false;
    if (h->loss.total > h->loss_before_drop)
      h->loss_while_down += h->loss.total - h->loss_before_drop;
  }
}

/* The host's own file: kept whole, kept partial (a failure after some
 * packets, not an abort), or removed. */
static int on_closing(tg_fleet_host_t *c, bool failing) {
  fleet_host_t *h = of(c);
  if (!h->has_own) return 0;
  fleet_ui_clear(h->f);
  int rv = 0;
  if (!failing) {
    if (cli_output_commit(&h->own) < 0) rv = -EIO;
  } else if (h->own.packets > 0 && !h->f->aborting) {
    cli_output_keep_partial(&h->own);
    h->kept_partial = true;
  } else {
    cli_output_discard(&h->own);
  }
  h->has_own = false;
  return rv;
}

static void on_finished(tg_fleet_host_t *c) {
  fleet_t *f = of(c)->f;
  f->run->host_finished(f);
}

const tg_fleet_host_cbs_t fleet_host_cbs = {
    .on_notice = on_notice,
    .on_state = on_state,
    .on_key_ready = on_key_ready,
    .on_service_state = on_service_state,
    .on_names_settled = on_names_settled,
    .on_tracing = on_tracing,
    .on_described = on_described,
    .on_clock_estimate = on_clock_estimate,
    .on_packet = on_packet,
    .on_stats = on_stats,
    .on_closing = on_closing,
    .on_finished = on_finished,
};

void fleet_host_merge_end(fleet_host_t *h) {
  if (h->f->mode != FLEET_OUT_MERGE) return;
  tg_merge_host_end(&h->merge);
  /* Left out of the merged trace: counted with the host's loss, under a
   * name of its own (docs/merge.md, "Incremental state"). */
  add_loss_item(&h->loss, "incremental_state_lost", h->merge.state_lost);
  /* The joined mode's (docs/merge.md, "Links across hosts"). */
  add_loss_item(&h->loss, "app_tracks_left_out",
                tg_merge_joined_left_out(&h->merge));
}

/* --- setup ------------------------------------------------------------------------ */

void fleet_host_init(fleet_t *f, fleet_host_t *h, size_t index,
                     const tg_target_t *t) {
  memset(h, 0, sizeof(*h));
  h->f = f;
  tg_merge_host_init(&h->merge, index);
  h->t = t;
  /* Out of memory: tg_fleet_host_start() fails the host, which says so. */
  (void)tg_fleet_host_init(&f->core, &h->core, index, t->spec, t, h);
}

void fleet_host_free(fleet_host_t *h) {
  if (h->has_own) cli_output_discard(&h->own);
  h->has_own = false;
  free(h->path);
  h->path = NULL;
  tg_merge_host_free(&h->merge);
}
