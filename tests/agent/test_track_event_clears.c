/* Rings that stay readable while the app loses packets to a full SMB
 * (issue 82, point 11): the agent in this process (drop policy, a small
 * fixed SMB), a real tracegated in a child, and TG_DS_MAX_INSTANCES ring
 * sessions of one data source at once, so every event is written once per
 * session, by writers that share the one SMB. The data source is
 * "track_event", or, in the second test, one of the app's own that
 * interns through the public API (tg_ds_incremental_state_cleared(), each
 * packet saying it needs the sequence's state, the one after a clear
 * clearing it).
 *
 * The SMB fills for certain, whatever the speed of the machine: the
 * agent's thread is held in a callback (the start of another data
 * source) while two threads write far more than the SMB holds, so no
 * chunk goes to the service and every writer drops. The held thread also
 * serves no ClearIncrementalState, and the sessions ask for none: what
 * keeps the sequences readable after the loss is the writers' own restart
 * on their next event (agent/track_event.c, seq_state_t.drops_seen;
 * agent/data_source.c, tg_ds_incremental_state_cleared()).
 *
 * Each ring is read back the way trace processor (v50.1) follows
 * incremental state (and the collector's merge after it, docs/merge.md):
 * per sequence, valid from a packet that clears it, invalid from one with
 * previous_packet_dropped that does not. Asserted per ring:
 * - it holds a loss (a packet flagged previous_packet_dropped after its
 *   sequence's first one), so the test looked at what it means to;
 * - no packet needs state while its sequence's state is invalid after a
 *   clear was seen, nor on a sequence that never clears in the ring
 *   (what the merge counts as [TG-5021] state_lost); the packets before a
 *   sequence's first clear in the wrapped ring are its edge, not loss, as
 *   for the collector;
 * - every track event read resolves its category, name and annotation
 *   name iids on its own sequence since the last clear;
 * - the last event of each writing thread, written after the loss, is
 *   there and readable;
 * - with PERFETTO_BIN, trace processor reads the ring as a file and agrees:
 *   as many slices as events read, and no packet skipped but the edge
 *   (its tokenizer_skipped_packets also counts the interned data it
 *   refuses on an invalid sequence: verdict_t's tp_skips).
 * The rings wrapped (the service's bytes_overwritten) before the loss. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "te_harness.h"
#include "test_proc.h"
#include "test_service.h"
#include "tracegate/agent.h"
#include "tracegate/track_event.h"

#define NSESS TG_DS_MAX_INSTANCES
#define RING_KB 256u
#define SMB_KB 256u
#define THREADS 2
#define PAYLOAD 1000 /* bytes of each event's string annotation */
/* Events per thread and round: before the loss (rounds of A_EVENTS until
 * every ring overwrote its size); while the agent's thread is held (each
 * thread writes NSESS * B_EVENTS KiB, three times the SMB, so every writer
 * ends the phase dropping); after (THREADS * NSESS * C_EVENTS KiB, a
 * quarter of the SMB, and well inside each ring, which keeps the loss). */
#define A_EVENTS 50
#define A_ROUNDS_MAX 20000
#define B_EVENTS 100
#define C_EVENTS 4
#define SERVICE_SEQUENCE 1u
#define RING_BUFFER 1
#define DISCARD 2
#define MAX_IIDS 64
#define MAX_SEQS 64

TG_CATEGORY(cat_load, "load");

static const char *const k_names[] = {"parse", "render", "encode", "send"};

/* --- the agent's thread, held --------------------------------------------- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static bool g_held, g_release;

/* Runs on the agent's thread: holds it until the test releases it. */
static void holder_on_start(void *ctx, unsigned inst, const uint8_t *cfg,
                            size_t len) {
  (void)ctx, (void)inst, (void)cfg, (void)len;
  pthread_mutex_lock(&g_mu);
  g_held = true;
  pthread_cond_broadcast(&g_cv);
  while (!g_release) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
}

/* The app's own data source that interns (the second test). */
#define INTERNED_DS "test.interned"
static tg_ds_t *g_interned;

static void register_once(void) {
  static bool done;
  if (done) return;
  static tg_category_t *const cats[] = {&cat_load};
  assert_int_equal(tg_track_event_register(cats, 1), 0);
  tg_ds_options_t o = {.name = "test.holder",
                       .cbs = {.on_start = holder_on_start}};
  tg_ds_t *ds;
  assert_int_equal(tg_ds_register(&o, &ds), 0);
  tg_ds_options_t oi = {.name = INTERNED_DS,
                        .handles_incremental_state_clear = true};
  assert_int_equal(tg_ds_register(&oi, &g_interned), 0);
  done = true;
}

/* --- writers ----------------------------------------------------------------
 * The same two threads write every round, so that their sequences (one
 * per thread and session) live through the loss: a new thread would start
 * new sequences, cleared anyway. The main thread sets a round's events
 * (0: the threads exit) and opens and closes it with a barrier. */

static pthread_barrier_t g_round;
static int g_round_events;
static const char *g_round_last; /* the round's last event's name, or NULL */
static bool g_own_ds;            /* write to g_interned, not track events */

/* TracePacket and TestEvent fields; sequence_flags' bits. */
#define F_SEQUENCE_FLAGS 13
#define F_FOR_TESTING 900
#define TEST_STR 1
#define SEQ_CLEARED 1u
#define SEQ_NEEDS_STATE 2u

/* One packet of the app's own data source on each started instance: it
 * needs the sequence's state, and clears it when the agent says the state
 * must be written again. */
static void own_event(const char *str) {
  TG_DS_TRACE(g_interned, k, w) {
    uint32_t flags = SEQ_NEEDS_STATE;
    if (tg_ds_incremental_state_cleared(g_interned, k)) flags |= SEQ_CLEARED;
    tg_pbw_append_varint(w, F_SEQUENCE_FLAGS, flags);
    tg_pbw_begin_nested(w, F_FOR_TESTING);
    tg_pbw_append_string(w, TEST_STR, str);
    tg_pbw_end_nested(w);
  }
}

static void *writer_main(void *arg) {
  (void)arg;
  char payload[PAYLOAD + 1];
  memset(payload, 'x', PAYLOAD);
  payload[PAYLOAD] = 0;
  for (;;) {
    pthread_barrier_wait(&g_round);
    int n = g_round_events; /* set before the barrier */
    const char *last = g_round_last;
    for (int i = 0; i < n; i++) {
      const char *name = last && i == n - 1 ? last : k_names[i % 4];
      if (g_own_ds)
        own_event(name == last ? last : payload);
      else
        TG_INSTANT(cat_load, name, TG_ARG_STR("payload", payload));
    }
    pthread_barrier_wait(&g_round);
    if (!n) return NULL;
  }
}

static void round_run(int events, const char *last) {
  g_round_events = events;
  g_round_last = last;
  pthread_barrier_wait(&g_round);
  pthread_barrier_wait(&g_round);
}

/* --- sessions ----------------------------------------------------------------- */

typedef struct ring {
  raw_consumer_t c;
  simple_cfg_t sc;
  Perfetto__Protos__TracePacket **pk;
  size_t n;
} ring_t;

static void ring_begin(ring_t *r, const test_service_t *ts, uint32_t kb,
                       int policy, const char *ds) {
  memset(r, 0, sizeof(*r));
  simple_cfg_init(&r->sc, kb, policy, ds);
  assert_int_equal(raw_consumer_connect(&r->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&r->c, &r->sc.cfg, -1), 0);
}

/* Once answered, the service holds every chunk the agent committed or
 * could commit. */
static void flush_roundtrip(ring_t *r) {
  assert_int_equal(raw_consumer_flush(&r->c, 5000), 0);
}

static uint64_t bytes_overwritten(ring_t *r) {
  uint64_t v = 0;
  assert_int_equal(raw_consumer_bytes_overwritten(&r->c, &v), 0);
  return v;
}

static void ring_end(ring_t *r) {
  flush_roundtrip(r);
  assert_int_equal(raw_consumer_disable(&r->c, TE_WAIT_MS), 0);
  r->pk = raw_consumer_read(&r->c, &r->n);
  assert_non_null(r->pk);
}

static void ring_free(ring_t *r) {
  free_packets(r->pk, r->n);
  raw_consumer_close(&r->c);
}

/* --- reading a ring as trace processor follows incremental state ---------- */

typedef struct iids {
  uint64_t v[MAX_IIDS];
  size_t n;
} iids_t;

typedef struct seq {
  uint32_t id;
  bool seen, cleared, valid;
  size_t pending; /* need state, before the first clear */
  iids_t names, cats, anns;
} seq_t;

typedef struct verdict {
  /* Need state, invalid: after a clear, or on a sequence that never
   * clears in the ring. */
  size_t lost;
  size_t edge; /* need state before the sequence's first clear */
  /* What trace processor (v50.1) counts as tokenizer_skipped_packets: one
   * for each packet that needs state while it is invalid, and one for each
   * packet's interned data that comes while it is invalid (refused and
   * counted apart), so such a packet that also needs state counts twice. */
  size_t tp_skips;
  size_t losses; /* previous_packet_dropped after a sequence's first packet */
  size_t events; /* read and resolved */
  size_t last_events;
} verdict_t;

static bool has_iid(const iids_t *t, uint64_t v) {
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i] == v) return true;
  return false;
}

static void add_iid(iids_t *t, uint64_t v) {
  if (has_iid(t, v)) return;
  assert_true(t->n < MAX_IIDS);
  t->v[t->n++] = v;
}

static seq_t *seq_of(seq_t *seqs, size_t *n, uint32_t id) {
  for (size_t i = 0; i < *n; i++)
    if (seqs[i].id == id) return &seqs[i];
  assert_true(*n < MAX_SEQS);
  seq_t *s = &seqs[(*n)++];
  memset(s, 0, sizeof(*s));
  s->id = id;
  return s;
}

/* The event's iids, on its sequence since the last clear. */
static void resolve(const seq_t *s, const Perfetto__Protos__TrackEvent *te) {
  assert_true(te->n_category_iids >= 1);
  for (size_t i = 0; i < te->n_category_iids; i++)
    assert_true(has_iid(&s->cats, te->category_iids[i]));
  assert_int_equal(te->name_field_case,
                   PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID);
  assert_true(has_iid(&s->names, te->name_iid));
  for (size_t i = 0; i < te->n_debug_annotations; i++) {
    const Perfetto__Protos__DebugAnnotation *a = te->debug_annotations[i];
    assert_int_equal(a->name_field_case,
                     PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID);
    assert_true(has_iid(&s->anns, a->name_iid));
  }
}

/* The iid the last event's name has on |s|, 0 if none. */
static uint64_t name_iid_of(const Perfetto__Protos__InternedData *id,
                            const char *name) {
  for (size_t k = 0; id && k < id->n_event_names; k++)
    if (id->event_names[k]->name && !strcmp(id->event_names[k]->name, name))
      return id->event_names[k]->iid;
  return 0;
}

static void read_ring(Perfetto__Protos__TracePacket *const *pk, size_t n,
                      const char *last, verdict_t *v) {
  static seq_t seqs[MAX_SEQS];
  uint64_t last_iid[MAX_SEQS] = {0};
  size_t nseqs = 0;
  memset(v, 0, sizeof(*v));
  for (size_t i = 0; i < n; i++) {
    const Perfetto__Protos__TracePacket *p = pk[i];
    if (p->trusted_packet_sequence_id == SERVICE_SEQUENCE) continue;
    seq_t *s = seq_of(seqs, &nseqs, p->trusted_packet_sequence_id);
    uint32_t flags = p->has_sequence_flags ? p->sequence_flags : 0;
    bool clears = (flags & SEQ_CLEARED) ||
                  (p->has_incremental_state_cleared &&
                   p->incremental_state_cleared);
    bool dropped =
        p->has_previous_packet_dropped && p->previous_packet_dropped;
    if (dropped && s->seen) v->losses++;
    s->seen = true;
    if (clears) {
      if (!s->cleared) v->edge += s->pending;
      s->pending = 0;
      s->cleared = s->valid = true;
      memset(&s->names, 0, sizeof(s->names));
      memset(&s->cats, 0, sizeof(s->cats));
      memset(&s->anns, 0, sizeof(s->anns));
      last_iid[s - seqs] = 0;
    } else if (dropped) {
      s->valid = false;
    }
    bool needs = flags & SEQ_NEEDS_STATE;
    if (!s->valid) v->tp_skips += (size_t)needs + (p->interned_data != NULL);
    if (needs && !s->valid) {
      if (s->cleared) v->lost++;
      else s->pending++;
      continue;
    }
    /* Interned data that comes while the state is invalid is refused. */
    const Perfetto__Protos__InternedData *id =
        s->valid ? p->interned_data : NULL;
    for (size_t k = 0; id && k < id->n_event_names; k++)
      add_iid(&s->names, id->event_names[k]->iid);
    for (size_t k = 0; id && k < id->n_event_categories; k++)
      add_iid(&s->cats, id->event_categories[k]->iid);
    for (size_t k = 0; id && k < id->n_debug_annotation_names; k++)
      add_iid(&s->anns, id->debug_annotation_names[k]->iid);
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
        p->for_testing->str &&
        !strcmp(p->for_testing->str, last))
      v->last_events++;
    uint64_t li = name_iid_of(id, last);
    if (li) last_iid[s - seqs] = li;
    if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT) {
      resolve(s, p->track_event);
      v->events++;
      if (last_iid[s - seqs] && p->track_event->name_iid == last_iid[s - seqs])
        v->last_events++;
    }
  }
  for (size_t i = 0; i < nseqs; i++) v->lost += seqs[i].pending;
}

/* --- trace processor ------------------------------------------------------------
 * With PERFETTO_BIN, the ring as a trace file is read by trace processor
 * itself: it must find every event the reader above read, and skip no
 * packet but those the reader counted as the ring's edge. */

static void tp_check(const char *dir, size_t i,
                     Perfetto__Protos__TracePacket **pk, size_t n,
                     const verdict_t *v) {
  Perfetto__Protos__Trace t = PERFETTO__PROTOS__TRACE__INIT;
  t.n_packet = n;
  t.packet = pk;
  size_t len = perfetto__protos__trace__get_packed_size(&t);
  uint8_t *buf = malloc(len ? len : 1);
  assert_non_null(buf);
  perfetto__protos__trace__pack(&t, buf);
  char path[256];
  snprintf(path, sizeof(path), "%s/ring%zu.pftrace", dir, i);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  free(buf);
  char out[256];
  int rv = tg_test_tp_answer(
      path,
      "select (select count(*) from slice) || ',' || (select ifnull("
      "sum(value), 0) from stats where name = 'tokenizer_skipped_packets')",
      out, sizeof(out));
  unlink(path);
  assert_int_not_equal(rv, -1);
  if (rv == 0) return; /* no PERFETTO_BIN: said on stderr */
  unsigned long long slices, skipped;
  /* The answer is one quoted string. */
  assert_int_equal(sscanf(out + (out[0] == '"'), "%llu,%llu", &slices, &skipped),
                   2);
  print_message("ring %zu: trace processor: %llu slices, %llu skipped\n", i,
                slices, skipped);
  assert_int_equal(slices, v->events);
  assert_int_equal(skipped, v->tp_skips);
}

/* --- the test ------------------------------------------------------------------ */

static bool all_started(void) {
  uint8_t want = (uint8_t)((1u << NSESS) - 1u);
  if (g_own_ds) return tg_ds_enabled_mask(g_interned) == want;
  return atomic_load_explicit(&cat_load.enabled, memory_order_relaxed) == want;
}

static void rings_stay_readable(const test_service_t *ts, bool own_ds) {
  register_once();
  g_own_ds = own_ds;
  te_start_agent_with(ts, "track-event-clears", TG_AGENT_FULL_DROP,
                      SMB_KB * 1024u);
  static ring_t rings[NSESS];
  for (size_t i = 0; i < NSESS; i++)
    ring_begin(&rings[i], ts, RING_KB, RING_BUFFER,
               own_ds ? INTERNED_DS : "track_event");
  for (int i = 0; i < TE_WAIT_MS && !all_started(); i++) te_sleep_ms(1);
  assert_true(all_started());

  assert_int_equal(pthread_barrier_init(&g_round, NULL, THREADS + 1), 0);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, writer_main, NULL), 0);

  /* The rings wrap: rounds until the service says each one overwrote
   * data. The writers drop much of it (the SMB is small and they write
   * faster than the service reads); a Flush after each round has the
   * agent commit what they stored. Bounded. */
  size_t rounds = 0, wrapped = 0;
  while (wrapped < NSESS && rounds++ < A_ROUNDS_MAX) {
    round_run(A_EVENTS, NULL);
    flush_roundtrip(&rings[0]);
    for (wrapped = 0; wrapped < NSESS; wrapped++)
      if (bytes_overwritten(&rings[wrapped]) < RING_KB * 1024u) break;
  }
  print_message("the rings wrapped after %zu rounds\n", rounds);
  assert_int_equal(wrapped, NSESS);

  /* The agent's thread held: nothing leaves the SMB, every writer drops. */
  pthread_mutex_lock(&g_mu);
  g_held = g_release = false; /* before the holder can start */
  pthread_mutex_unlock(&g_mu);
  ring_t holder;
  ring_begin(&holder, ts, 64, DISCARD, "test.holder");
  pthread_mutex_lock(&g_mu);
  /* Bounded: the service starts the instance at once. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += TE_WAIT_MS / 1000;
  while (!g_held) {
    if (pthread_cond_timedwait(&g_cv, &g_mu, &until) != 0) break;
  }
  bool held = g_held;
  pthread_mutex_unlock(&g_mu);
  assert_true(held);
  tg_agent_stats_t st0;
  tg_agent_get_stats(&st0);
  round_run(B_EVENTS, NULL);
  pthread_mutex_lock(&g_mu);
  g_release = true;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);

  /* After the loss, the SMB emptied (a Flush answered: the agent committed
   * and the service took its chunks), a few events per writer, the last
   * of each thread "done", all of them fitting the SMB. A writer that
   * found the SMB full looks again after TG_TW_DROP_RETRY_NS (50 ms) at
   * the latest: the sleep outlasts it (a bound from below, which no speed
   * of the machine breaks), so their first packets find chunks. */
  for (size_t i = 0; i < NSESS; i++) flush_roundtrip(&rings[i]);
  te_sleep_ms(100);
  round_run(C_EVENTS, "done");
  round_run(0, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&g_round);
  for (size_t i = 0; i < NSESS; i++) ring_end(&rings[i]);
  tg_agent_stats_t st;
  tg_agent_get_stats(&st);
  assert_true(st.packets_dropped > st0.packets_dropped);

  for (size_t i = 0; i < NSESS; i++) {
    verdict_t v;
    read_ring(rings[i].pk, rings[i].n, "done", &v);
    print_message("ring %zu: %zu packets, %zu events read, %zu losses, "
                  "%zu edge, %zu lost, %zu skips by trace processor's count\n",
                  i, rings[i].n, v.events, v.losses, v.edge, v.lost,
                  v.tp_skips);
    assert_true(v.losses > 0);
    assert_int_equal(v.lost, 0);
    assert_int_equal(v.last_events, THREADS);
    tp_check(ts->dir, i, rings[i].pk, rings[i].n, &v);
    ring_free(&rings[i]);
  }
  assert_int_equal(raw_consumer_disable(&holder.c, TE_WAIT_MS), 0);
  raw_consumer_close(&holder.c);
}

static void track_events_stay_readable_after_the_smb_was_full(void **state) {
  rings_stay_readable(*state, false);
}

static void own_data_source_stays_readable_after_the_smb_was_full(
    void **state) {
  rings_stay_readable(*state, true);
}

/* A ring whose edge holds interned data, built by hand: trace processor
 * refuses the data and counts it as a skipped packet beside the packet's
 * own skip, which the reader's count must follow (a run where a packet
 * with new interned names fell in the edge once failed the comparison by
 * two). Sequence 7: two packets that need state before its first clear
 * (the first brings an event name), the clear (a track), then two events
 * that resolve. */
enum { SYN_SEQ = 7, SYN_TRACK = 42 };

static void syn_packet(Perfetto__Protos__TracePacket *p, uint64_t ts,
                       uint32_t flags) {
  perfetto__protos__trace_packet__init(p);
  p->optional_trusted_packet_sequence_id_case =
      PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
  p->trusted_packet_sequence_id = SYN_SEQ;
  p->has_timestamp = true;
  p->timestamp = ts;
  p->has_sequence_flags = true;
  p->sequence_flags = flags;
}

static void syn_event(Perfetto__Protos__TracePacket *p,
                      Perfetto__Protos__TrackEvent *te, uint64_t *cat) {
  perfetto__protos__track_event__init(te);
  te->has_type = true;
  te->type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
  te->has_track_uuid = true;
  te->track_uuid = SYN_TRACK;
  te->n_category_iids = 1;
  te->category_iids = cat;
  te->name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
  te->name_iid = 1;
  p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
  p->track_event = te;
}

static void the_reader_counts_skips_as_trace_processor_does(void **state) {
  (void)state;
  uint64_t cat = 1;
  Perfetto__Protos__EventName name = PERFETTO__PROTOS__EVENT_NAME__INIT;
  name.has_iid = true;
  name.iid = 1;
  name.name = "edge";
  Perfetto__Protos__EventName *names[] = {&name};
  Perfetto__Protos__EventCategory ec = PERFETTO__PROTOS__EVENT_CATEGORY__INIT;
  ec.has_iid = true;
  ec.iid = 1;
  ec.name = "cat";
  Perfetto__Protos__EventCategory *cats[] = {&ec};
  Perfetto__Protos__InternedData old = PERFETTO__PROTOS__INTERNED_DATA__INIT;
  old.n_event_names = 1;
  old.event_names = names;
  Perfetto__Protos__InternedData fresh = PERFETTO__PROTOS__INTERNED_DATA__INIT;
  fresh.n_event_names = 1;
  fresh.event_names = names;
  fresh.n_event_categories = 1;
  fresh.event_categories = cats;
  Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
  th.has_pid = th.has_tid = true;
  th.pid = 10;
  th.tid = 11;
  Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
  td.has_uuid = true;
  td.uuid = SYN_TRACK;
  td.thread = &th;
  Perfetto__Protos__TrackEvent te[4];

  Perfetto__Protos__TracePacket p[5];
  Perfetto__Protos__TracePacket *pk[5] = {&p[0], &p[1], &p[2], &p[3], &p[4]};
  syn_packet(&p[0], 1000, SEQ_NEEDS_STATE);
  syn_event(&p[0], &te[0], &cat);
  p[0].interned_data = &old;
  syn_packet(&p[1], 1001, SEQ_NEEDS_STATE);
  syn_event(&p[1], &te[1], &cat);
  syn_packet(&p[2], 1002, SEQ_CLEARED);
  p[2].data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
  p[2].track_descriptor = &td;
  syn_packet(&p[3], 1003, SEQ_NEEDS_STATE);
  syn_event(&p[3], &te[2], &cat);
  p[3].interned_data = &fresh;
  syn_packet(&p[4], 1004, SEQ_NEEDS_STATE);
  syn_event(&p[4], &te[3], &cat);

  verdict_t v;
  read_ring(pk, 5, "none", &v);
  assert_int_equal(v.edge, 2);
  assert_int_equal(v.lost, 0);
  assert_int_equal(v.events, 2);
  assert_int_equal(v.tp_skips, 3);
  char dir[64];
  assert_int_equal(tg_test_mkdtemp(dir, sizeof(dir), "clears"), 0);
  tp_check(dir, 0, pk, 5, &v);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_reader_counts_skips_as_trace_processor_does),
      cmocka_unit_test_setup_teardown(
          track_events_stay_readable_after_the_smb_was_full,
          test_service_setup, te_teardown),
      cmocka_unit_test_setup_teardown(
          own_data_source_stays_readable_after_the_smb_was_full,
          test_service_setup, te_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
