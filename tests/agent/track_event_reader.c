/* Reading track_event packets like a trace processor (see the header). */
#include "track_event_reader.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/track_event.h"

#define SEQ_CLEARED 1u
#define SEQ_NEEDS_STATE 2u
#define SERVICE_SEQUENCE 1u

static const char *lookup(const intern_tab_t *t, uint64_t iid, const char *what,
                          uint32_t seq) {
  for (size_t i = 0; i < t->n; i++)
    if (t->iid[i] == iid) return t->name[i];
  fail_msg("sequence %u: %s iid %llu not interned on this sequence", seq, what,
           (unsigned long long)iid);
  return NULL;
}

static void intern_add(intern_tab_t *t, uint64_t iid, const char *name,
                       const char *what, uint32_t seq) {
  assert_non_null(name);
  for (size_t i = 0; i < t->n; i++)
    if (t->iid[i] == iid) {
      /* Re-interning the same iid must not change its meaning. */
      if (strcmp(t->name[i], name) != 0)
        fail_msg("sequence %u: %s iid %llu was '%s', now '%s'", seq, what,
                 (unsigned long long)iid, t->name[i], name);
      return;
    }
  assert_true(t->n < TE_MAX_INTERN);
  t->iid[t->n] = iid;
  t->name[t->n++] = name;
}

static const track_t *find_track(const seq_state_t *s, uint64_t uuid) {
  for (size_t i = 0; i < s->n_tracks; i++)
    if (s->tracks[i].uuid == uuid) return &s->tracks[i];
  return NULL;
}

static seq_state_t *seq_for(trace_t *t, uint32_t id) {
  for (size_t i = 0; i < t->n_seqs; i++)
    if (t->seqs[i].id == id) return &t->seqs[i];
  assert_true(t->n_seqs < TE_MAX_SEQS);
  seq_state_t *s = &t->seqs[t->n_seqs++];
  memset(s, 0, sizeof(*s));
  s->id = id;
  return s;
}

static void on_descriptor(seq_state_t *s,
                          const Perfetto__Protos__TrackDescriptor *d) {
  assert_true(d->has_uuid);
  assert_true(s->n_tracks < TE_MAX_TRACKS);
  track_t *tr = &s->tracks[s->n_tracks];
  memset(tr, 0, sizeof(*tr));
  tr->uuid = d->uuid;
  if (d->process) {
    assert_true(d->process->has_pid);
    assert_int_equal(d->process->pid, getpid());
    tr->kind = TRACK_PROCESS;
  } else if (d->thread) {
    assert_true(d->thread->has_pid && d->thread->has_tid);
    assert_int_equal(d->thread->pid, getpid());
    /* The parent is this process's track, described on this sequence. */
    assert_true(d->has_parent_uuid);
    const track_t *parent = find_track(s, d->parent_uuid);
    if (!parent || parent->kind != TRACK_PROCESS)
      fail_msg(
          "sequence %u: thread track's parent %llx is not a process "
          "track of this sequence",
          s->id, (unsigned long long)d->parent_uuid);
    /* One sequence is one thread. */
    if (s->tid) assert_int_equal(d->thread->tid, s->tid);
    s->tid = d->thread->tid;
    s->thread_descriptors++;
    tr->kind = TRACK_THREAD;
    tr->tid = d->thread->tid;
  } else if (d->counter) {
    assert_non_null(d->name);
    tr->kind = TRACK_COUNTER;
    tr->name = d->name;
  } else {
    fail_msg("sequence %u: track descriptor without process/thread/counter",
             s->id);
  }
  s->n_tracks++;
}

static void on_track_event(trace_t *t, seq_state_t *s, uint64_t ts,
                           const Perfetto__Protos__TrackEvent *te,
                           uint64_t t_lo, uint64_t t_hi) {
  event_t *e = &t->ev[t->n_ev++];
  memset(e, 0, sizeof(*e));
  e->seq = s->id;
  e->clear_no = s->clears;
  assert_true(te->has_type);
  e->type = (int)te->type;
  e->ts = ts;
  if (ts < s->last_ts)
    fail_msg("sequence %u: timestamp %llu after %llu", s->id,
             (unsigned long long)ts, (unsigned long long)s->last_ts);
  s->last_ts = ts;
  if (ts < t_lo || ts > t_hi)
    fail_msg(
        "timestamp %llu outside the recording's CLOCK_BOOTTIME window "
        "[%llu, %llu]",
        (unsigned long long)ts, (unsigned long long)t_lo,
        (unsigned long long)t_hi);
  assert_int_equal(te->n_category_iids + te->n_categories, 1);
  e->cat = te->n_category_iids
               ? lookup(&s->cats, te->category_iids[0], "category", s->id)
               : te->categories[0];
  if (te->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID)
    e->name = lookup(&s->names, te->name_iid, "event name", s->id);
  else if (te->name_field_case ==
           PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME)
    e->name = te->name;
  /* Like trace processor: without its own track_uuid an event is on the
   * sequence's default track (TracePacketDefaults). */
  uint64_t uuid = te->has_track_uuid ? te->track_uuid : s->default_track;
  if (!uuid) fail_msg("sequence %u: an event with no track", s->id);
  const track_t *tr = find_track(s, uuid);
  if (!tr)
    fail_msg(
        "sequence %u: track %llx has no descriptor on this sequence "
        "since its last clear",
        s->id, (unsigned long long)uuid);
  e->track_kind = tr->kind;
  e->tid = tr->tid;
  if (e->type == TG_TE_COUNTER) {
    assert_int_equal(tr->kind, TRACK_COUNTER);
    assert_int_equal(
        te->counter_value_field_case,
        PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE);
    e->counter_name = tr->name;
    e->counter_value = te->counter_value;
  } else {
    assert_int_equal(tr->kind, TRACK_THREAD);
    if (e->type == TG_TE_SLICE_END)
      assert_null(e->name);
    else
      assert_non_null(e->name);
  }
  assert_true(te->n_debug_annotations <= TE_MAX_ARGS);
  for (size_t i = 0; i < te->n_debug_annotations; i++) {
    const Perfetto__Protos__DebugAnnotation *da = te->debug_annotations[i];
    arg_t *a = &e->args[e->n_args++];
    a->name = da->name_field_case ==
                      PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID
                  ? lookup(&s->anns, da->name_iid, "annotation name", s->id)
                  : da->name;
    assert_non_null(a->name);
    switch (da->value_case) {
      case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE:
        a->type = TG_ARG_TYPE_INT, a->i = da->int_value;
        break;
      case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE:
        a->type = TG_ARG_TYPE_UINT, a->u = da->uint_value;
        break;
      case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_DOUBLE_VALUE:
        a->type = TG_ARG_TYPE_DOUBLE, a->d = da->double_value;
        break;
      case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_BOOL_VALUE:
        a->type = TG_ARG_TYPE_BOOL, a->b = da->bool_value;
        break;
      case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE:
        a->type = TG_ARG_TYPE_STRING, a->s = da->string_value;
        break;
      default:
        fail_msg("annotation '%s' has value case %d", a->name,
                 (int)da->value_case);
    }
  }
}

#define CLOCK_BOOTTIME_ID 6

/* A snapshot relating one sequence-scoped clock to BOOTTIME (the only
 * kind the agent writes): its origin, and whether it counts deltas. */
static void on_clock_snapshot(seq_state_t *s,
                              const Perfetto__Protos__ClockSnapshot *cs) {
  const Perfetto__Protos__ClockSnapshot__Clock *boot = NULL, *own = NULL;
  for (size_t i = 0; i < cs->n_clocks; i++) {
    const Perfetto__Protos__ClockSnapshot__Clock *c = cs->clocks[i];
    assert_true(c->has_clock_id && c->has_timestamp);
    if (c->clock_id == CLOCK_BOOTTIME_ID) boot = c;
    else if (c->clock_id >= 64 && c->clock_id <= 127) own = c;
    else fail_msg("sequence %u: snapshot of clock %u", s->id, c->clock_id);
  }
  assert_non_null(boot);
  assert_non_null(own);
  /* ns, like BOOTTIME: the agent's deltas are nanoseconds. */
  assert_false(own->has_unit_multiplier_ns && own->unit_multiplier_ns != 1);
  s->seq_clock = own->clock_id;
  s->seq_clock_incremental = own->has_is_incremental && own->is_incremental;
  s->seq_clock_now = own->timestamp;
  s->seq_clock_to_boot = (int64_t)(boot->timestamp - own->timestamp);
}

/* The packet's time on BOOTTIME: its clock is its own timestamp_clock_id,
 * else the sequence's default, else BOOTTIME; a sequence-scoped clock
 * goes through the last snapshot (a delta first adds to the running
 * value, as trace processor's ClockTracker does). */
static uint64_t boottime_of(seq_state_t *s,
                            const Perfetto__Protos__TracePacket *p) {
  uint32_t clock = p->has_timestamp_clock_id ? p->timestamp_clock_id
                   : s->default_clock      ? s->default_clock
                                           : CLOCK_BOOTTIME_ID;
  if (clock == CLOCK_BOOTTIME_ID) {
    if (s->default_clock) s->absolute_events++;
    return p->timestamp;
  }
  if (clock != s->seq_clock)
    fail_msg("sequence %u: timestamp on clock %u, no snapshot of it", s->id,
             clock);
  uint64_t v = p->timestamp;
  if (s->seq_clock_incremental) v = s->seq_clock_now += p->timestamp;
  return v + (uint64_t)s->seq_clock_to_boot;
}

void te_decode(Perfetto__Protos__TracePacket *const *pk, size_t n,
               uint64_t t_lo, uint64_t t_hi, trace_t *t) {
  memset(t, 0, sizeof(*t));
  t->ev = calloc(n ? n : 1, sizeof(*t->ev));
  assert_non_null(t->ev);
  for (size_t i = 0; i < n; i++) {
    const Perfetto__Protos__TracePacket *p = pk[i];
    assert_int_equal(
        p->optional_trusted_packet_sequence_id_case,
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID);
    if (p->trusted_packet_sequence_id == SERVICE_SEQUENCE) continue;
    seq_state_t *sq = seq_for(t, p->trusted_packet_sequence_id);
    bool is_event =
        p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
    bool is_desc =
        p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
    bool is_clock =
        p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
    /* Every packet the agent writes says something. */
    if (!is_event && !is_desc && !is_clock && !p->interned_data)
      fail_msg(
          "sequence %u: packet %zu carries no track event, descriptor "
          "or interned data (data case %d)",
          sq->id, i, (int)p->data_case);
    uint32_t flags = p->has_sequence_flags ? p->sequence_flags : 0;
    if (flags & SEQ_CLEARED) {
      memset(&sq->names, 0, sizeof(sq->names));
      memset(&sq->cats, 0, sizeof(sq->cats));
      memset(&sq->anns, 0, sizeof(sq->anns));
      sq->n_tracks = 0;
      sq->default_track = 0;
      sq->default_clock = 0;
      sq->seq_clock = 0; /* a cleared sequence snapshots its clock again */
      sq->clears++;
    }
    const Perfetto__Protos__TracePacketDefaults *d = p->trace_packet_defaults;
    if (d && d->track_event_defaults &&
        d->track_event_defaults->has_track_uuid)
      sq->default_track = d->track_event_defaults->track_uuid;
    if (d && d->has_timestamp_clock_id) sq->default_clock = d->timestamp_clock_id;
    if (is_clock) on_clock_snapshot(sq, p->clock_snapshot);
    if ((flags & SEQ_NEEDS_STATE) && sq->clears == 0)
      fail_msg(
          "sequence %u: packet %zu needs incremental state before any "
          "SEQ_INCREMENTAL_STATE_CLEARED",
          sq->id, i);
    const Perfetto__Protos__InternedData *id = p->interned_data;
    for (size_t k = 0; id && k < id->n_event_names; k++)
      intern_add(&sq->names, id->event_names[k]->iid, id->event_names[k]->name,
                 "event name", sq->id);
    for (size_t k = 0; id && k < id->n_event_categories; k++)
      intern_add(&sq->cats, id->event_categories[k]->iid,
                 id->event_categories[k]->name, "category", sq->id);
    for (size_t k = 0; id && k < id->n_debug_annotation_names; k++)
      intern_add(&sq->anns, id->debug_annotation_names[k]->iid,
                 id->debug_annotation_names[k]->name, "annotation name",
                 sq->id);
    if (is_desc) on_descriptor(sq, p->track_descriptor);
    if (is_event) {
      assert_true(p->has_timestamp);
      assert_true(flags & SEQ_NEEDS_STATE);
      on_track_event(t, sq, boottime_of(sq, p), p->track_event, t_lo, t_hi);
    }
  }
}

void te_trace_free(trace_t *t) { free(t->ev); }

const seq_state_t *te_seq_of_tid(const trace_t *t, int32_t tid) {
  const seq_state_t *found = NULL;
  for (size_t i = 0; i < t->n_seqs; i++)
    if (t->seqs[i].tid == tid) {
      assert_null(found); /* one sequence per thread and session */
      found = &t->seqs[i];
    }
  assert_non_null(found);
  return found;
}

size_t te_count_in_cat(const trace_t *t, const char *cat) {
  size_t n = 0;
  for (size_t i = 0; i < t->n_ev; i++)
    if (strcmp(t->ev[i].cat, cat) == 0) n++;
  return n;
}

size_t te_events_of(const trace_t *t, uint32_t seq, const event_t **out,
                    size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < t->n_ev; i++)
    if (t->ev[i].seq == seq) {
      assert_true(n < max);
      out[n++] = &t->ev[i];
    }
  return n;
}
