/* Telling the service what the writers finished: RegisterTraceWriter and
 * UnregisterTraceWriter, then CommitData batches of moved chunks and
 * patches, from the arbiter's queues.
 *
 * Commits go out when the arbiter wakes the agent (a quarter of the SMB is
 * pending, a writer stalls, or writers find the SMB nearly full), on every
 * Flush and instance stop, and from a periodic timer that runs only while
 * some instance is started: with no session, nothing new is written and
 * the agent's thread stays asleep.
 *
 * Idle chunks. Every IDLE_SCAN_MS a tick first takes back the chunks of
 * writers idle for IDLE_MS (tg_trace_writers_reclaim_idle), so that a
 * thread that wrote once holds nothing and its data reaches the service.
 * IDLE_MS is long next to the gaps of a thread that writes steadily, even
 * slowly: such a thread fills the chunk it holds and returns it full. Were
 * it shorter, every burst of thousands of such threads would leave in a
 * chunk of its own, mostly empty: the SMB would churn chunks (and fill)
 * and the service's ring would hold padding instead of history. The pass
 * reads a line of every writer, so it does not run at every tick. The tick is
 * COMMIT_PERIOD_MS (or the app's commit_period_ms) while the SMB has chunks to spare for every writer,
 * and FAST_PERIOD_MS once writers outnumber half its default chunks: then
 * the chunks are small and the SMB's spare ones few, and a returned chunk
 * must reach the service (to be freed) without waiting a long tick. When
 * writers find the SMB nearly full (the arbiter's pressure flag), the
 * next commit first takes back the chunk of every writer between packets,
 * however recent its last one.
 * With commit_on_flush (tg_agent_set_commit_on_flush) the tick does not
 * run while a session is idle: a wake-up of the agent (a writer's
 * tg_ds_flush_thread, the arbiter) or the service's Flush starts it, and
 * the first tick that finds nothing to commit stops it.
 * Agent's thread only, except the counters and tg__agent_commit_timer_active.
 */
#include "abi/ipc_frame.h"
#include "agent/agent_internal.h"
#include "agent/agent_log.h"
#include "agent/data_source.h"
#include "agent/trace_writer.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "tracegate/error.h"

#define COMMIT_PERIOD_MS 10
#define FAST_PERIOD_MS 1
#define IDLE_MS 100
#define IDLE_SCAN_MS (IDLE_MS / 4)
/* mincore() over the whole SMB looks up every page not mapped here in
 * the memfd's page cache: ~2000 lookups for the 8 MiB reserve, which at
 * the fast tick made a many-writer producer spend a tenth of a core on a
 * statistic. Sampled at most this often instead. */
#define RESIDENT_PERIOD_MS 100
#define COMMIT_MAX_BYTES (120 * 1024)
#define WRITER_EVENTS_PER_PASS 64

static tg__agent_commit_t *const cm = &tg__agent.commit;

static void send_writer_events(tg_arbiter_t *arb) {
  tg_arbiter_writer_event_t ev[WRITER_EVENTS_PER_PASS];
  size_t n;
  while ((n = tg_arbiter_take_writer_events(arb, ev,
                                            WRITER_EVENTS_PER_PASS)) > 0) {
    for (size_t i = 0; i < n; i++) {
      if (ev[i].registered) {
        Perfetto__Protos__RegisterTraceWriterRequest r =
            PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
        r.has_trace_writer_id = r.has_target_buffer = true;
        r.trace_writer_id = ev[i].writer_id;
        r.target_buffer = ev[i].target_buffer;
        tg__conn_invoke("RegisterTraceWriter", &r.base, NULL, NULL);
      } else {
        Perfetto__Protos__UnregisterTraceWriterRequest r =
            PERFETTO__PROTOS__UNREGISTER_TRACE_WRITER_REQUEST__INIT;
        r.has_trace_writer_id = true;
        r.trace_writer_id = ev[i].writer_id;
        tg__conn_invoke("UnregisterTraceWriter", &r.base, NULL, NULL);
      }
    }
  }
}

/* Refreshes the snapshot of the current arbiter's counters; |retire| adds
 * them to the past ones first and zeroes the snapshot. |in_use|: sample
 * the SMB's bytes in use too, a pass over every page header (the commit
 * tick does, the commits between ticks do not: under load they come many
 * times a millisecond, and the pass reads lines writers and the service
 * are writing). */
static void snapshot_arbiter_stats(tg_arbiter_t *arb, bool retire,
                                   bool in_use_too) {
  tg_arbiter_stats_t st = {0};
  if (arb) tg_arbiter_get_stats(arb, &st);
  if (retire) {
    atomic_fetch_add(&cm->chunks_past, st.chunks_committed);
    atomic_fetch_add(&cm->patches_past, st.patches);
    atomic_fetch_add(&cm->stalls_past, st.stalls);
    atomic_fetch_add(&cm->dropped_past, st.packets_dropped);
    atomic_fetch_add(&cm->markers_past, st.drop_markers);
    atomic_fetch_add(&cm->reclaimed_past, st.chunks_reclaimed);
    atomic_fetch_add(&cm->in_place_past, st.patches_in_place);
    st = (tg_arbiter_stats_t){0};
  }
  atomic_store(&cm->chunks_now, st.chunks_committed);
  atomic_store(&cm->patches_now, st.patches);
  atomic_store(&cm->stalls_now, st.stalls);
  atomic_store(&cm->dropped_now, st.packets_dropped);
  atomic_store(&cm->markers_now, st.drop_markers);
  atomic_store(&cm->reclaimed_now, st.chunks_reclaimed);
  atomic_store(&cm->in_place_now, st.patches_in_place);
  atomic_store(&cm->smb_size,
               arb && !retire ? tg_arbiter_smb(arb)->size : 0);
  atomic_store(&cm->smb_active,
               arb && !retire ? tg_arbiter_active_size(arb) : 0);
  if (retire) {
    atomic_store(&cm->smb_resident, 0);
    cm->resident_due_ms = 0; /* the next SMB's first tick samples it */
  }
  if (!retire && !in_use_too) return;
  size_t in_use = arb && !retire ? tg_arbiter_bytes_in_use(arb) : 0;
  atomic_store(&cm->smb_in_use, in_use);
  if (in_use > atomic_load(&cm->smb_in_use_peak))
    atomic_store(&cm->smb_in_use_peak, in_use);
}

static uint64_t now_ns(void) { return uv_hrtime(); }

void tg__commit_retire_arbiter_stats(void) {
  snapshot_arbiter_stats(tg__agent.session.arb, true, true);
}

/* Sends everything the writers queued: writer (un)registrations first (the
 * service must know a writer's target before its chunks), then CommitData
 * requests of at most COMMIT_MAX_BYTES, the last carrying |flush_id|. */
void tg__commit_all(uint64_t flush_id) {
  if (!tg__connection_ready()) return;
  tg_arbiter_t *arb = tg__agent.session.arb;
  tg_buf_t *buf = &cm->buf;
  if (!arb) {
    if (!flush_id) return;
    /* Nothing was ever written: acknowledge the flush alone. */
    Perfetto__Protos__CommitDataRequest r =
        PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
    r.has_flush_request_id = true;
    r.flush_request_id = flush_id;
    if (tg__conn_invoke("CommitData", &r.base, NULL, NULL) == 0)
      atomic_fetch_add(&cm->flushes_acked, 1);
    return;
  }
  /* Writers found the SMB nearly full: what idle writers hold goes out
   * with this commit. */
  if (tg_arbiter_take_pressure(arb))
    tg_trace_writers_reclaim_idle(arb, now_ns(), 0);
  send_writer_events(arb);
  for (;;) {
    tg_buf_reset(buf);
    int n = tg_arbiter_take_commit(arb, flush_id, COMMIT_MAX_BYTES, buf);
    if (n < 0) {
      tg__agent_log(TG_LOG_ERROR, "agent: commit batch: %s", tg_strerror(n));
      return;
    }
    bool more = tg_arbiter_commit_pending(arb);
    snapshot_arbiter_stats(arb, false, false);
    if (tg_buf_size(buf) > 0) {
      int rv = tg__conn_invoke_bytes("CommitData", tg_buf_begin(buf),
                                     tg_buf_size(buf), NULL, NULL);
      if (rv < 0) return;
      atomic_fetch_add(&cm->commits_sent, 1);
      if (flush_id && !more) atomic_fetch_add(&cm->flushes_acked, 1);
    }
    if (!more) return;
  }
}

/* --- the periodic commit ------------------------------------------------- */

/* The tick when writers are few: the app's, else COMMIT_PERIOD_MS. */
static uint64_t normal_period_ms(void) {
  uint32_t p = tg__agent.cfg.opts.commit_period_ms;
  return p ? p : COMMIT_PERIOD_MS;
}

/* The tick for |arb|'s writer count (see the file comment). */
static uint64_t period_ms(const tg_arbiter_t *arb) {
  if (arb && 2 * tg_arbiter_writer_count(arb) > tg_arbiter_base_chunks(arb))
    return FAST_PERIOD_MS;
  return normal_period_ms();
}

static void on_commit_timer(uv_timer_t *t) {
  tg_arbiter_t *arb = tg__agent.session.arb;
  uint64_t period = period_ms(arb);
  if (uv_timer_get_repeat(t) != period) uv_timer_set_repeat(t, period);
  if (!arb) {
    if (tg__agent.commit_on_flush) tg__commit_timer_stop();
    return;
  }
  uint64_t now = uv_now(t->loop);
  if (now >= cm->idle_due_ms) {
    tg_trace_writers_reclaim_idle(arb, now_ns(),
                                  (uint64_t)IDLE_MS * 1000000u);
    cm->idle_due_ms = now + IDLE_SCAN_MS;
  }
  bool found = tg_arbiter_commit_pending(arb);
  if (found) tg__commit_all(0);
  else send_writer_events(arb);
  /* Before the snapshot: a reader that sees this tick's counters sees a
   * resident size at most RESIDENT_PERIOD_MS older. */
  if (now >= cm->resident_due_ms) {
    atomic_store(&cm->smb_resident, tg_arbiter_resident_bytes(arb));
    cm->resident_due_ms = now + RESIDENT_PERIOD_MS;
  }
  snapshot_arbiter_stats(arb, false, true);
  /* commit_on_flush: the tick after the last activity ends the run. A
   * writer that flushed meanwhile and still saw the timer running left
   * its chunk to a tick: it is looked for again after the stop (the
   * fence pairs with the one in tg_ds_flush_thread: either the writer
   * sees the timer stopped and wakes the agent, or this sees its chunk). */
  if (!found && tg__agent.commit_on_flush) {
    tg__commit_timer_stop();
    atomic_thread_fence(memory_order_seq_cst);
    if (tg_arbiter_commit_pending(arb)) tg__commit_kick();
  }
}

/* |timer_active| is stored with the timer's state so that other threads
 * (tests) read it without touching the loop's handle; release pairs with
 * the acquire in tg__agent_commit_timer_active. */
static void timer_start(void) {
  if (uv_is_active((uv_handle_t *)&cm->timer)) return;
  uv_timer_start(&cm->timer, on_commit_timer, normal_period_ms(),
                 normal_period_ms());
  atomic_store_explicit(&cm->timer_active, true, memory_order_release);
}

void tg__commit_timer_stop(void) {
  uv_timer_stop(&cm->timer);
  atomic_store_explicit(&cm->timer_active, false, memory_order_release);
}

void tg__commit_timer_update(void) {
  if (!tg__ds_any_started()) tg__commit_timer_stop();
  else if (!tg__agent.commit_on_flush) timer_start();
}

void tg__commit_kick(void) {
  if (tg__agent.commit_on_flush && tg__ds_any_started())
    timer_start();
}

bool tg__agent_commit_timer_active(void) {
  return atomic_load_explicit(&cm->timer_active, memory_order_acquire);
}

void tg__commit_init(uv_loop_t *loop) {
  uv_timer_init(loop, &cm->timer);
  atomic_store_explicit(&cm->timer_active, false, memory_order_release);
  tg_buf_init(&cm->buf, TG_IPC_FRAME_BUFFER_SIZE);
}

void tg__commit_fini(void) { tg_buf_free(&cm->buf); }
