/* "linux.ftrace": agent callbacks and the reader thread; see ftrace_ds.h. */
#include "agent/probes/ftrace_ds.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "agent/clock.h"
#include "agent/probes/ftrace_config.h"
#include "agent/probes/ftrace_kaddr.h"
#include "agent/sys/ftrace_ksyms.h"
#include "agent/probes/ftrace_session.h"
#include "agent/probes/ftrace_tracefs.h"
#include "agent/probes/metatrace.h"
#include "agent/probes/sampler.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/agent.h"
#include "tracegate/error.h"

#define DS_NAME "linux.ftrace"
/* Pages per CPU per round: bounds how long one busy CPU delays the others
 * (and the other sessions); a round that hits it is followed at once. */
#define PAGES_PER_ROUND 64
/* Descriptors the reader polls: its wake eventfd and the CPUs of the
 * sessions (beyond it, a session's CPUs are read at its period only). */
#define POLL_MAX 256
/* The longest a round's pages stay in the writer's chunk (see run_slot). */
#define COMMIT_EVERY_MS 1000
/* How long stop and flush callbacks wait for the reader thread. */
#define CALLBACK_WAIT_MS 5000
/* TracePacket.timestamp and .ftrace_stats, FtraceStats fields. */
#define PACKET_TIMESTAMP 8
#define PACKET_FTRACE_STATS 34
#define STATS_PHASE 1
#define STATS_FAILED_EVENTS 7

/* Where a session's pids go: its process_stats, found by session id. */
typedef struct pid_target {
  tg_pid_feed_t *feed;
  uint64_t session_id;
} pid_target_t;

/* Where its inodes go: its inode_file_map, found the same way. */
typedef struct inode_target {
  tg_inode_feed_t *feed;
  uint64_t session_id;
} inode_target_t;

typedef struct slot {
  /* Under the mutex: written by the callbacks. */
  uint32_t want_gen;
  bool want_active;
  tg_ftrace_cfg_t want_cfg; /* owned until the thread takes it */
  uint32_t flush_req;
  /* Under the mutex: written by the thread. */
  uint32_t done_gen;
  uint32_t flush_done;
  /* The thread's own. */
  uint32_t have_gen;
  tg_ftrace_cfg_t cfg;
  tg_ftrace_session_t *sess;
  pid_target_t pid_target;
  inode_target_t inode_target;
  bool uses_ksyms;  /* holds one of tg_ftrace_ds.ksyms_users */
  bool active;      /* a session, or a failed start still to report */
  bool announced;   /* start stats (or the failure) written */
  uint64_t next_ms;
  uint64_t started_ms;
  bool unflushed;   /* pages written since the last tg_ds_flush_thread */
  uint64_t flushed_ms;
  uint64_t new_pids_ms; /* the last drain that handed new pids; 0: none */
} slot_t;

struct tg_ftrace_ds {
  pthread_mutex_t mu;
  /* Wakes the thread from its poll: written after a change made under
   * the mutex, read by the thread before it looks at the changes. */
  int wake_fd;
  pthread_cond_t done_cv; /* wakes waiting callbacks; CLOCK_MONOTONIC */
  bool quit, changed;
  bool running;
  pthread_t thread;
  tg_ds_t *ds;
  tg_pid_feed_t *feed; /* borrowed; NULL: pids are not published */
  tg_inode_feed_t *inodes; /* borrowed; NULL: inodes are not published */
  slot_t slots[TG_DS_MAX_INSTANCES];
  /* The thread's own: the kernel's symbols, loaded for the first session
   * that symbolizes and shared by all that do; freed when the last of them
   * stops, unless one asked for KSYMS_RETAIN (Perfetto's ksyms_mem_policy). */
  tg_ksyms_t *ksyms;
  unsigned ksyms_users;
  bool ksyms_retain;
};

/* Only publishes: resolving them is the sampler thread's work. */
static bool publish_pids(void *ctx, const int32_t *pids, size_t n) {
  pid_target_t *t = ctx;
  return tg_pid_feed_publish(t->feed, t->session_id, pids, n) > 0;
}

/* Asked once per drain: a session without an inode_file_map collects
 * nothing. */
static bool want_inodes(void *ctx, int32_t *skip_pid) {
  inode_target_t *t = ctx;
  return tg_inode_feed_wanted(t->feed, t->session_id, skip_pid);
}

static void publish_inodes(void *ctx, const tg_inode_key_t *keys, size_t n) {
  inode_target_t *t = ctx;
  tg_inode_feed_publish(t->feed, t->session_id, keys, n);
}

static void wake_thread(tg_ftrace_ds_t *f) {
  uint64_t one = 1;
  /* EAGAIN: the counter is already set, the thread will wake. */
  while (write(f->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

static struct timespec deadline_in(uint64_t ms) {
  uint64_t due = tg_probes_now_ms() + ms;
  struct timespec ts = {.tv_sec = (time_t)(due / 1000),
                        .tv_nsec = (long)(due % 1000) * 1000000L};
  return ts;
}

/* --- agent thread -------------------------------------------------------- */

static void on_start(void *ctx, unsigned inst, const uint8_t *cfg, size_t len) {
  tg_ftrace_ds_t *f = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  tg_ftrace_cfg_t parsed;
  int rv = tg_ftrace_cfg_parse(cfg, len, &parsed);
  if (rv < 0)
    TG_WARN(DS_NAME ": instance %u: unusable config (%s); it stays idle", inst,
            tg_strerror(rv));
  pthread_mutex_lock(&f->mu);
  slot_t *sl = &f->slots[inst];
  tg_ftrace_cfg_free(&sl->want_cfg);
  sl->want_active = rv == 0;
  if (rv == 0) sl->want_cfg = parsed;
  sl->want_gen++;
  f->changed = true;
  wake_thread(f);
  pthread_mutex_unlock(&f->mu);
}

static void on_stop(void *ctx, unsigned inst) {
  tg_ftrace_ds_t *f = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  pthread_mutex_lock(&f->mu);
  slot_t *sl = &f->slots[inst];
  tg_ftrace_cfg_free(&sl->want_cfg);
  sl->want_active = false;
  uint32_t gen = ++sl->want_gen;
  f->changed = true;
  wake_thread(f);
  /* The last pages and the stats go out before on_stop returns: after
   * it, the agent drops this instance's packets. */
  struct timespec until = deadline_in(CALLBACK_WAIT_MS);
  while (f->running && (int32_t)(sl->done_gen - gen) < 0)
    if (pthread_cond_timedwait(&f->done_cv, &f->mu, &until) == ETIMEDOUT) {
      TG_WARN(DS_NAME ": instance %u: stop not done in %d ms", inst,
              CALLBACK_WAIT_MS);
      break;
    }
  pthread_mutex_unlock(&f->mu);
}

static void on_flush(void *ctx, unsigned inst) {
  tg_ftrace_ds_t *f = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  pthread_mutex_lock(&f->mu);
  slot_t *sl = &f->slots[inst];
  uint32_t req = ++sl->flush_req;
  f->changed = true;
  wake_thread(f);
  struct timespec until = deadline_in(CALLBACK_WAIT_MS);
  while (f->running && (int32_t)(sl->flush_done - req) < 0)
    if (pthread_cond_timedwait(&f->done_cv, &f->mu, &until) == ETIMEDOUT) break;
  pthread_mutex_unlock(&f->mu);
}

/* --- reader thread ------------------------------------------------------- */

static void log_unsupported(unsigned k, const tg_ftrace_cfg_t *cfg) {
  for (size_t i = 0; i < cfg->n_unsupported; i++)
    TG_WARN(DS_NAME ": instance %u: FtraceConfig.%s is not supported by "
            "tracegate-probes; ignored", k, cfg->unsupported[i]);
  if (cfg->events_truncated)
    TG_WARN(DS_NAME ": instance %u: only the first %d ftrace_events are used",
            k, TG_FTRACE_MAX_EVENT_SPECS);
}

/* A session that could not start still answers in the trace: a start
 * FtraceStats listing every requested event as failed. */
static void write_failure(tg_ftrace_ds_t *f, unsigned k) {
  tg_pbw_t *w = tg_ds_packet_begin(f->ds, k);
  if (!w) return;
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, tg__clock_boottime());
  tg_pbw_begin_nested(w, PACKET_FTRACE_STATS);
  tg_pbw_append_varint(w, STATS_PHASE, TG_FTRACE_STATS_START);
  const tg_ftrace_cfg_t *cfg = &f->slots[k].cfg;
  for (size_t i = 0; i < cfg->n_events; i++)
    tg_pbw_append_string(w, STATS_FAILED_EVENTS, cfg->events[i]);
  tg_pbw_end_nested(w);
  tg_ds_packet_end(f->ds, k);
}

#define KALLSYMS_PATH "/proc/kallsyms"

/* The shared symbols, loaded on first use. NULL only without memory. */
static const tg_ksyms_t *ksyms_acquire(tg_ftrace_ds_t *f, unsigned k) {
  if (!f->ksyms) {
    if (!(f->ksyms = malloc(sizeof(*f->ksyms)))) return NULL;
    uint64_t meta = tg_meta_begin();
    int n = tg_ksyms_load(f->ksyms, KALLSYMS_PATH);
    tg_meta_end(TG_META_KALLSYMS, meta);
    if (n < 0) {
      TG_WARN(DS_NAME ": instance %u: cannot read " KALLSYMS_PATH
              " (%s): kernel addresses are not symbolized", k, tg_strerror(n));
      tg_ksyms_init(f->ksyms);
    } else if (n == 0) {
      TG_WARN(DS_NAME ": instance %u: " KALLSYMS_PATH " has no usable "
              "function addresses (%llu read as 0: kptr_restrict, or not "
              "root): kernel addresses are not symbolized", k,
              (unsigned long long)f->ksyms->zero_addrs);
    } else {
      TG_INFO(DS_NAME ": %d kernel symbols loaded (%zu KiB)", n,
              tg_ksyms_mem(f->ksyms) / 1024);
    }
  }
  f->ksyms_users++;
  return f->ksyms;
}

static void ksyms_release(tg_ftrace_ds_t *f) {
  if (--f->ksyms_users > 0 || f->ksyms_retain) return;
  tg_ksyms_free(f->ksyms);
  free(f->ksyms);
  f->ksyms = NULL;
}

/* As traced_probes at every flush and at stop: the START stats again (the
 * session's first counters) and an END with the current ones. A clone
 * (which holds no stop) then carries the overruns up to its flush, and
 * the last pair of any trace the whole session's; the periodic commit
 * writes none, so a ring is not filled with them. */
static void write_stats_pair(tg_ftrace_session_t *sess,
                             const tg_probes_sink_t *sink) {
  tg_ftrace_session_write_stats(sess, sink, TG_FTRACE_STATS_START);
  tg_ftrace_session_write_stats(sess, sink, TG_FTRACE_STATS_END);
}

static void end_slot(tg_ftrace_ds_t *f, unsigned k) {
  slot_t *sl = &f->slots[k];
  if (sl->sess) {
    tg_probes_ds_target_t c = {f->ds, k};
    tg_probes_sink_t sink = tg_probes_ds_sink(&c);
    if (sl->announced) {
      bool more = true;
      /* Everything up to now, bounded in case the kernel keeps writing. */
      for (int i = 0; i < 64 && more; i++)
        tg_ftrace_session_drain(sl->sess, &sink, PAGES_PER_ROUND, &more);
      write_stats_pair(sl->sess, &sink);
      tg_ds_flush_thread(f->ds, k);
    }
    const tg_ftrace_session_stats_t *st = tg_ftrace_session_stats(sl->sess);
    TG_INFO(DS_NAME ": instance %u: %llu pages, %llu events, %llu lost, "
            "%llu corrupt, %llu pids and %llu inodes not handed over, %llu "
            "kernel symbols interned, %llu kernel addresses over the "
            "table's %d written as 0", k,
            (unsigned long long)st->pages, (unsigned long long)st->events,
            (unsigned long long)st->lost_pages,
            (unsigned long long)st->corrupt_pages,
            (unsigned long long)st->pids_dropped,
            (unsigned long long)st->inodes_dropped,
            (unsigned long long)st->ksyms_written,
            (unsigned long long)st->kaddrs_dropped, TG_FTRACE_KADDRS_CAP);
    tg_ftrace_session_stop(sl->sess);
    sl->sess = NULL;
  }
  if (sl->uses_ksyms) {
    sl->uses_ksyms = false;
    ksyms_release(f);
  }
  tg_ftrace_cfg_free(&sl->cfg);
  sl->active = false;
}

static void begin_slot(tg_ftrace_ds_t *f, unsigned k, uint64_t now) {
  slot_t *sl = &f->slots[k];
  log_unsupported(k, &sl->cfg);
  int rv = tg_ftrace_session_start(&sl->cfg, &sl->sess);
  if (rv < 0) {
    TG_ERROR("%s " DS_NAME ": instance %u: cannot trace the kernel: %s%s",
             TG_NOTE(PROBES_FTRACE_UNAVAILABLE), k, tg_strerror(rv),
             rv == -EACCES || rv == -EPERM
                 ? " (writing tracefs needs root or CAP_DAC_OVERRIDE)"
                 : rv == -ENOENT ? " (no tracefs in this kernel)" : "");
    sl->sess = NULL;
  } else {
    /* Without a session id there is no process_stats to find. */
    sl->pid_target = (pid_target_t){f->feed, sl->cfg.tracing_session_id};
    if (f->feed && sl->cfg.tracing_session_id)
      tg_ftrace_session_on_pids(sl->sess, publish_pids, &sl->pid_target);
    sl->inode_target = (inode_target_t){f->inodes, sl->cfg.tracing_session_id};
    if (f->inodes && sl->cfg.tracing_session_id)
      tg_ftrace_session_on_inodes(sl->sess, want_inodes, publish_inodes,
                                  &sl->inode_target);
    if (sl->cfg.symbolize_ksyms) {
      f->ksyms_retain |= sl->cfg.ksyms_retain;
      const tg_ksyms_t *ks = ksyms_acquire(f, k);
      sl->uses_ksyms = ks != NULL;
      tg_ftrace_session_set_ksyms(sl->sess, ks);
    }
    TG_INFO(DS_NAME ": instance %u: %zu event(s) in %s", k,
            tg_ftrace_session_n_events(sl->sess),
            tg_ftrace_session_dir(sl->sess));
  }
  sl->active = true;
  sl->announced = false;
  sl->started_ms = now;
  sl->next_ms = now;
  sl->new_pids_ms = 0;
}

static void run_slot(tg_ftrace_ds_t *f, unsigned k, uint64_t now) {
  slot_t *sl = &f->slots[k];
  if (!sl->announced) {
    /* Packets begun before the agent marks the instance enabled are
     * dropped; the kernel keeps the events meanwhile. */
    if (!(tg_ds_enabled_mask(f->ds) & (1u << k))) {
      sl->next_ms = now + (now - sl->started_ms < 1000 ? 2 : 50);
      return;
    }
    sl->announced = true;
    if (!sl->sess) {
      write_failure(f, k);
      tg_ds_flush_thread(f->ds, k);
      sl->next_ms = UINT64_MAX;
      return;
    }
    tg_probes_ds_target_t c = {f->ds, k};
    tg_probes_sink_t sink = tg_probes_ds_sink(&c);
    tg_ftrace_session_write_stats(sl->sess, &sink, TG_FTRACE_STATS_START);
    /* Sent now, as the failure above: with the agent's commit_on_flush a
     * quiet instance would otherwise hold it until the first Flush, and a
     * reader could not tell a started session from one still starting. */
    tg_ds_flush_thread(f->ds, k);
  }
  if (!sl->sess) return;
  tg_probes_ds_target_t c = {f->ds, k};
  tg_probes_sink_t sink = tg_probes_ds_sink(&c);
  bool more = false;
  uint64_t meta = tg_meta_begin();
  size_t pages = tg_ftrace_session_drain(sl->sess, &sink, PAGES_PER_ROUND, &more);
  tg_meta_end(TG_META_FTRACE_DRAIN, meta);
  /* Chunks that fill up are committed as they do; the rest of a round's
   * pages at most every COMMIT_EVERY_MS, not at every drain (which would
   * wake the agent's thread as often as this one), and at every flush and
   * stop. */
  if (pages) sl->unflushed = true;
  if (sl->unflushed && now - sl->flushed_ms >= COMMIT_EVERY_MS) {
    tg_ds_flush_thread(f->ds, k);
    sl->unflushed = false;
    sl->flushed_ms = now;
  }
  if (tg_ftrace_session_handed_new_pids(sl->sess)) sl->new_pids_ms = now;
  uint32_t wait = tg_ftrace_drain_wait_ms(
      sl->cfg.drain_period_ms, sl->cfg.drain_period_asked,
      tg_ftrace_session_pollable(sl->sess),
      sl->new_pids_ms ? now - sl->new_pids_ms : UINT64_MAX);
  sl->next_ms = more ? now : now + wait;
}

/* Under f->mu on entry and exit. */
static void apply_changes(tg_ftrace_ds_t *f) {
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &f->slots[k];
    if (sl->have_gen == sl->want_gen) continue;
    uint32_t gen = sl->want_gen;
    bool start = sl->want_active;
    tg_ftrace_cfg_t cfg = sl->want_cfg;
    memset(&sl->want_cfg, 0, sizeof(sl->want_cfg));
    pthread_mutex_unlock(&f->mu);
    if (sl->active) end_slot(f, k);
    sl->have_gen = gen;
    if (start) {
      sl->cfg = cfg;
      begin_slot(f, k, tg_probes_now_ms());
    }
    pthread_mutex_lock(&f->mu);
    sl->done_gen = gen;
    pthread_cond_broadcast(&f->done_cv);
  }
}

/* Under f->mu on entry and exit. */
static void serve_flushes(tg_ftrace_ds_t *f) {
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &f->slots[k];
    if (sl->flush_done == sl->flush_req) continue;
    uint32_t req = sl->flush_req;
    pthread_mutex_unlock(&f->mu);
    if (sl->active && sl->announced && sl->sess) {
      sl->next_ms = 0;
      uint64_t now = tg_probes_now_ms();
      run_slot(f, k, now);
      tg_probes_ds_target_t c = {f->ds, k};
      tg_probes_sink_t sink = tg_probes_ds_sink(&c);
      write_stats_pair(sl->sess, &sink);
      tg_ds_flush_thread(f->ds, k);
      sl->unflushed = false;
      sl->flushed_ms = now;
    } else if (sl->active && sl->announced) {
      /* The failure again, as the stats pair of a running instance: a
       * ring that wrapped past the first still says the instance did
       * not start, in every clone and at every flush. */
      write_failure(f, k);
      tg_ds_flush_thread(f->ds, k);
    }
    pthread_mutex_lock(&f->mu);
    sl->flush_done = req;
    pthread_cond_broadcast(&f->done_cv);
  }
}

/* The descriptors to wait on: the wake eventfd first, then the CPUs of
 * every announced session, whose slot goes in |owner|. */
static nfds_t poll_set(tg_ftrace_ds_t *f, struct pollfd *pfd, unsigned *owner,
                       nfds_t cap) {
  pfd[0] = (struct pollfd){.fd = f->wake_fd, .events = POLLIN};
  nfds_t n = 1;
  int fds[POLL_MAX];
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES && n < cap; k++) {
    slot_t *sl = &f->slots[k];
    if (!sl->active || !sl->announced || !sl->sess) continue;
    size_t m = tg_ftrace_session_fds(sl->sess, fds, cap - n);
    for (size_t i = 0; i < m; i++) {
      owner[n] = k;
      pfd[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    }
  }
  return n;
}

/* Sleeps until |next| (CLOCK_MONOTONIC ms; UINT64_MAX: no deadline), a
 * callback's wake, or a session's CPU buffer filling up
 * (TG_FTRACE_WAKE_PERCENT), whose slot is then due at once. */
static void wait_for_work(tg_ftrace_ds_t *f, uint64_t next) {
  struct pollfd pfd[POLL_MAX];
  unsigned owner[POLL_MAX];
  nfds_t n = poll_set(f, pfd, owner, POLL_MAX);
  int timeout = -1;
  if (next != UINT64_MAX) {
    uint64_t now = tg_probes_now_ms();
    timeout = next <= now ? 0 : next - now > INT32_MAX ? INT32_MAX
                                                       : (int)(next - now);
  }
  if (poll(pfd, n, timeout) <= 0) return;
  if (pfd[0].revents) {
    uint64_t v;
    while (read(f->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
  for (nfds_t i = 1; i < n; i++) {
    if (!pfd[i].revents) continue;
    f->slots[owner[i]].next_ms = 0;
  }
}

static void *reader_main(void *arg) {
  tg_ftrace_ds_t *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->quit) {
    if (f->changed) {
      f->changed = false;
      apply_changes(f);
      serve_flushes(f);
    }
    pthread_mutex_unlock(&f->mu);

    uint64_t next = UINT64_MAX;
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
      slot_t *sl = &f->slots[k];
      if (!sl->active) continue;
      uint64_t now = tg_probes_now_ms();
      if (sl->next_ms <= now) run_slot(f, k, now);
      if (sl->next_ms < next) next = sl->next_ms;
    }

    /* A callback that changes something after this check also writes the
     * eventfd, so the poll below returns at once. */
    pthread_mutex_lock(&f->mu);
    if (f->changed || f->quit) continue;
    pthread_mutex_unlock(&f->mu);
    wait_for_work(f, next);
    pthread_mutex_lock(&f->mu);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

/* --- lifecycle ----------------------------------------------------------- */

int tg_ftrace_ds_new(tg_pid_feed_t *feed, tg_inode_feed_t *inodes,
                     tg_ftrace_ds_t **out) {
  /* A run that was killed left its instances (and their ring buffers)
   * behind; remove them now rather than at the first session. */
  char root[TG_TRACEFS_PATH_MAX];
  if (tg_tracefs_find_mounted(root) == 0) {
    int stale = tg_tracefs_remove_stale(root);
    if (stale > 0)
      TG_INFO(DS_NAME ": removed %d tracefs instance(s) left by dead runs",
              stale);
  }
  tg_ftrace_ds_t *f = calloc(1, sizeof(*f));
  if (!f) return -ENOMEM;
  f->feed = feed;
  f->inodes = inodes;
  if ((f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    int rv = -errno;
    free(f);
    return rv;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&f->done_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&f->mu, NULL);
  tg_ds_options_t o = {
      .name = DS_NAME,
      .cbs = {.on_start = on_start, .on_stop = on_stop, .on_flush = on_flush,
              .ctx = f},
  };
  int rv = tg_ds_register(&o, &f->ds);
  if (rv < 0) goto fail;
  if ((rv = -pthread_create(&f->thread, NULL, reader_main, f)) < 0) goto fail;
  f->running = true;
  *out = f;
  return 0;
fail:
  close(f->wake_fd);
  pthread_cond_destroy(&f->done_cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
  return rv;
}

void tg_ftrace_ds_free(tg_ftrace_ds_t *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  f->quit = true;
  wake_thread(f);
  pthread_mutex_unlock(&f->mu);
  pthread_join(f->thread, NULL);
  f->running = false;
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &f->slots[k];
    tg_ftrace_session_stop(sl->sess); /* the agent is gone: no packets */
    sl->sess = NULL;
    tg_ftrace_cfg_free(&sl->cfg);
    tg_ftrace_cfg_free(&sl->want_cfg);
  }
  if (f->ksyms) tg_ksyms_free(f->ksyms);
  free(f->ksyms);
  close(f->wake_fd);
  pthread_cond_destroy(&f->done_cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}
