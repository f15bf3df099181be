/* `tracegate record` with a CLONE_SNAPSHOT trigger config, as
 * perfetto_cmd: the session traces as usual and its trace goes to OUT at
 * the end; each time one of its triggers fires, the service tells us
 * (ObservableEvents.clone_trigger_hit) and we clone the session on a
 * connection of its own and write the snapshot to OUT.0, OUT.1, ... while
 * the session runs on. The clone read-out engine (consumer/clone_read.h)
 * clones, reads and frees; everything here is driven by the loop, so
 * the CLI's waiting machines (step.h) are no fit: they run the loop
 * themselves, and this runs inside its callbacks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/record.h"
#include "consumer/clone_read.h"
#include "tracegate/error.h"

/* The snapshot does not grow: a read that brings nothing ends it. */
#define MAX_READS 64

typedef struct snapshot {
  record_t *r;
  tg_consumer_t *c;
  tg_clone_read_t e;
  cli_output_t out;
  bool has_out;
  char path[4096]; /* OUT.N, for messages */
  unsigned index;
  bool ok;
  char trigger[128], producer[128];
  int32_t producer_uid;
  uint64_t session_id;
} snapshot_t;

bool record_snapshot_mode(const Perfetto__Protos__TraceConfig *cfg) {
  return tg_recording_clone_snapshot_mode(cfg);
}

static void snap_fail(snapshot_t *s, const char *what, const char *msg) {
  fprintf(stderr, CLI_PROG ": %s snapshot %u (trigger '%s'): %s: %s\n",
          TG_NOTE(SNAPSHOT_FAILED), s->index, s->trigger, what, msg);
  s->ok = false;
  tg_clone_read_cancel(&s->e, -ECANCELED, what);
  tg_consumer_close(s->c);
}

static int on_packet(tg_clone_read_t *e, const uint8_t *p, size_t n) {
  snapshot_t *s = e->data;
  return cli_output_packet(&s->out, p, n);
}

/* A read whole: a file that cannot be written ends the reads. */
static int on_progress(tg_clone_read_t *e, uint64_t packets) {
  (void)packets;
  return ((snapshot_t *)e->data)->out.err;
}

/* Freed (or not: the snapshot also ends with the connection, and a
 * failure there loses nothing), or failed at the clone or a read. */
static void on_end(tg_clone_read_t *e, int status, const char *msg) {
  snapshot_t *s = e->data;
  if (status && tg_clone_read_failed_in(e) == TG_CLONE_CLONING) {
    snap_fail(s, "cannot clone the session", msg);
    return;
  }
  if (status && s->out.err) {
    snap_fail(s, "cannot write it", tg_strerror(s->out.err));
    return;
  }
  if (status) {
    snap_fail(s, "cannot read it", msg);
    return;
  }
  if (s->has_out) {
    s->has_out = false;
    if (cli_output_commit(&s->out) == 0)
      fprintf(stderr, CLI_PROG ": %s wrote snapshot %s (trigger '%s'): %llu "
              "packets; the session runs on\n", TG_NOTE(SNAPSHOT_WRITTEN),
              s->path, s->trigger,
              (unsigned long long)s->out.packets);
  }
  tg_consumer_close(s->c);
}

static const tg_clone_read_cbs_t engine_cbs = {.on_packet = on_packet,
                                               .on_progress = on_progress,
                                               .on_end = on_end};

static void on_ready(tg_consumer_t *c, int status, const char *msg) {
  snapshot_t *s = tg_consumer_data(c);
  if (status) return; /* on_close says why */
  (void)msg;
  tg_consumer_clone_args_t a = {
      .session_id = s->session_id,
      .clone_trigger_name = s->trigger,
      .clone_trigger_producer_name = s->producer,
      .clone_trigger_producer_uid = s->producer_uid,
  };
  int rv = tg_clone_read_start(&s->e, c, &a);
  if (rv < 0) snap_fail(s, "cannot clone the session", tg_strerror(rv));
}

static void on_close(tg_consumer_t *c, int status, const char *msg) {
  snapshot_t *s = tg_consumer_data(c);
  if (status && s->ok)
    fprintf(stderr, CLI_PROG ": %s snapshot %u (trigger '%s'): %s\n",
            TG_NOTE(SNAPSHOT_FAILED), s->index, s->trigger, msg);
  if (s->has_out) cli_output_discard(&s->out);
  s->r->snapshots_running--;
  free(s);
}

static const tg_consumer_cbs_t snapshot_cbs = {.on_ready = on_ready,
                                               .on_close = on_close};

/* One clone_trigger_hit: a snapshot on a connection of its own. */
static void start_snapshot(record_t *r,
                           const Perfetto__Protos__ObservableEvents__CloneTriggerHit *hit) {
  snapshot_t *s = calloc(1, sizeof(*s));
  if (!s) {
    fprintf(stderr, CLI_PROG ": snapshot: out of memory\n");
    return;
  }
  s->r = r;
  s->ok = true;
  s->index = r->snapshots_taken++;
  s->session_id = (uint64_t)hit->tracing_session_id;
  tg_printable(s->trigger, sizeof(s->trigger), hit->trigger_name ? hit->trigger_name : "");
  snprintf(s->producer, sizeof(s->producer), "%s",
           hit->producer_name ? hit->producer_name : "");
  s->producer_uid = hit->has_producer_uid ? hit->producer_uid : 0;
  tg_clone_read_opts_t o = {.max_reads = MAX_READS};
  tg_clone_read_init(&s->e, &tg_clock_monotonic, &o, &engine_cbs, s->trigger,
                     s);
  snprintf(s->path, sizeof(s->path), "%s.%u", r->o.out, s->index);
  if (cli_output_open(&s->out, s->path) < 0) { /* said why */
    free(s);
    return;
  }
  s->has_out = true;
  r->snapshots_running++;
  if (tg_consumer_connect(r->loop, r->o.socket, &snapshot_cbs, s, &s->c) < 0) {
    fprintf(stderr, CLI_PROG ": %s snapshot %u: cannot connect to %s\n",
            TG_NOTE(SNAPSHOT_FAILED), s->index, r->o.socket);
    cli_output_discard(&s->out);
    r->snapshots_running--;
    free(s);
  }
}

void record_snapshot_hit(record_t *r,
                         const Perfetto__Protos__ObservableEvents__CloneTriggerHit *hit) {
  if (r->finished) return;
  start_snapshot(r, hit);
}
