/* "linux.perf": agent callbacks and the reader thread; see perf_ds.h.
 *
 * The reader thread reads every CPU's ring and is the only writer of the
 * session's packets. With UNWIND_DWARF it copies each sample (registers,
 * stack, callchain) into the unwinder queue (perf_queue.h) instead of
 * unwinding it; the unwinder thread (perf_unwind_thread.h) hands the
 * frames back in the same entry and the reader names and writes them at
 * its next read, at a flush or at the stop, which wait for the queue to
 * empty first. Frame-pointer walks stay on the reader: the kernel did
 * them already. */
#include "agent/perf/perf_ds.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/clock.h"
#include "agent/perf/perf_config.h"
#include "agent/perf/perf_emit.h"
#include "agent/perf/perf_events.h"
#include "agent/perf/perf_procs.h"
#include "agent/perf/perf_record.h"
#ifdef TG_PERF_HAVE_DWARF
#include "agent/perf/perf_queue.h"
#include "agent/perf/perf_unwind.h"
#include "agent/perf/perf_unwind_thread.h"
#endif
#include "agent/sys/ftrace_ksyms.h"
#include "agent/sys/proc_pid.h"
#include "agent/sys/proc_read.h"
#include "agent/sys/tracefs_root.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/notice.h"
#include "tracegate/agent.h"
#include "tracegate/error.h"

#define DS_NAME "linux.perf"
#define CALLBACK_WAIT_MS 5000
#define COMMIT_EVERY_MS 1000
#define MAX_CPUS 1024
/* Frames kept of one callchain (the kernel's own cap is
 * kernel.perf_event_max_stack, 127 by default). */
#define MAX_FRAMES 512
#define KALLSYMS_PATH "/proc/kallsyms"
/* max_daemon_memory_kb: how often the producer's memory is read (as
 * traced_perf's guardrail). */
#define MEMORY_CHECK_MS 1000

typedef struct cpu_ring {
  int cpu;
  int fd; /* the timebase: the group's leader */
  uint8_t *base; /* the metadata page, then the data area; NULL: polling */
  size_t map_len;
  uint64_t data_size;
  int follower_fd[TG_PERF_MAX_FOLLOWERS];
  size_t n_followers; /* opened */
} cpu_ring_t;

typedef struct session {
  tg_perf_cfg_t cfg;
  cpu_ring_t *rings;
  size_t n_rings;
  uint64_t sample_type;
  uint32_t n_user_regs;
  tg_perf_emitter_t *emit;
  tg_perf_procs_t *procs;
  tg_ksyms_t *ksyms; /* with kernel frames */
#ifdef TG_PERF_HAVE_DWARF
  /* UNWIND_DWARF: the samples on their way to the unwinder thread and
   * back (|uthread| NULL: no queue). */
  tg_perf_queue_t queue;
  tg_perf_unwind_thread_t *uthread;
  /* Once the thread has stopped: */
  tg_perf_unwind_thread_stats_t ustats;
  tg_perf_queue_stats_t qstats;
#endif
  uint8_t *scratch;  /* one record that wraps the ring's end */
  /* One sample's frames, leaf first as read, then root first. */
  tg_perf_emit_mapping_t maps[MAX_FRAMES];
  tg_perf_emit_frame_t frames[MAX_FRAMES];
  /* Counts for the end's log line. */
  uint64_t samples, lost, throttles, out_of_scope, no_frames, bad_records;
  uint64_t polls, poll_failed; /* counter-only polling: group reads */
  uint64_t follower_counts[TG_PERF_MAX_FOLLOWERS]; /* one sample's */
  uint64_t skipped; /* processes whose maps could not be read */
  uint64_t enqueue_skipped; /* no room in the unwinder queue */
  /* When the rings were last read on the period, and the longest wait
   * between two such reads: a loss in full rings with a wait far past
   * ring_buffer_read_period_ms says the reader was kept off its CPU. */
  uint64_t read_ms, longest_wait_ms;
  bool force_clear; /* the tables failed: clear before the next packet */
  /* max_daemon_memory_kb */
  uint64_t mem_next_ms;
  bool mem_over;        /* above at the last check: caches were dropped */
  bool guardrail_stopped; /* sampling ended by the guardrail */
  uint64_t mem_drops;
} session_t;

typedef struct slot {
  /* Under the mutex: written by the callbacks. */
  uint32_t want_gen;
  bool want_active;
  uint8_t *want_cfg; /* the serialized DataSourceConfig */
  size_t want_len;
  uint32_t flush_req;
  /* Under the mutex: written by the thread. */
  uint32_t done_gen;
  uint32_t flush_done;
  /* The thread's own. */
  uint32_t have_gen;
  bool active;
  bool announced;
  session_t *sess; /* NULL: the start failed (logged) */
  uint64_t next_ms, started_ms, flushed_ms;
  bool unflushed;
} slot_t;

struct tg_perf_ds {
  pthread_mutex_t mu;
  int wake_fd;
  pthread_cond_t done_cv; /* CLOCK_MONOTONIC */
  bool quit, changed, running;
  pthread_t thread;
  tg_ds_t *ds;
  slot_t slots[TG_DS_MAX_INSTANCES];
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void wake_thread(tg_perf_ds_t *d) {
  uint64_t one = 1;
  while (write(d->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

static struct timespec deadline_in(uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (ms % 1000) * 1000000u;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  return ts;
}

/* --- agent thread -------------------------------------------------------- */

static void wait_done(tg_perf_ds_t *d, const uint32_t *done, uint32_t want,
                      unsigned inst, const char *what) {
  struct timespec until = deadline_in(CALLBACK_WAIT_MS);
  while (d->running && (int32_t)(*done - want) < 0)
    if (pthread_cond_timedwait(&d->done_cv, &d->mu, &until) == ETIMEDOUT) {
      TG_WARN(DS_NAME ": instance %u: %s not done in %d ms", inst, what,
              CALLBACK_WAIT_MS);
      break;
    }
}

static void on_start(void *ctx, unsigned inst, const uint8_t *cfg, size_t len) {
  tg_perf_ds_t *d = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy) {
    TG_ERROR(DS_NAME ": instance %u: no memory for its config", inst);
    return;
  }
  if (len) memcpy(copy, cfg, len);
  pthread_mutex_lock(&d->mu);
  slot_t *sl = &d->slots[inst];
  free(sl->want_cfg);
  sl->want_cfg = copy;
  sl->want_len = len;
  sl->want_active = true;
  sl->want_gen++;
  d->changed = true;
  wake_thread(d);
  pthread_mutex_unlock(&d->mu);
}

static void on_stop(void *ctx, unsigned inst) {
  tg_perf_ds_t *d = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  pthread_mutex_lock(&d->mu);
  slot_t *sl = &d->slots[inst];
  free(sl->want_cfg);
  sl->want_cfg = NULL;
  sl->want_active = false;
  uint32_t gen = ++sl->want_gen;
  d->changed = true;
  wake_thread(d);
  /* The last samples go out before on_stop returns: after it, the agent
   * drops this instance's packets. */
  wait_done(d, &sl->done_gen, gen, inst, "stop");
  pthread_mutex_unlock(&d->mu);
}

static void on_flush(void *ctx, unsigned inst) {
  tg_perf_ds_t *d = ctx;
  if (inst >= TG_DS_MAX_INSTANCES) return;
  pthread_mutex_lock(&d->mu);
  slot_t *sl = &d->slots[inst];
  uint32_t req = ++sl->flush_req;
  d->changed = true;
  wake_thread(d);
  wait_done(d, &sl->flush_done, req, inst, "flush");
  pthread_mutex_unlock(&d->mu);
}

/* --- sessions ------------------------------------------------------------ */

static int online_cpus(uint32_t **out, size_t *n) {
  long m = sysconf(_SC_NPROCESSORS_CONF);
  if (m <= 0) m = 1;
  if (m > MAX_CPUS) m = MAX_CPUS;
  uint32_t *v = malloc((size_t)m * sizeof(*v));
  if (!v) return -ENOMEM;
  for (long i = 0; i < m; i++) v[i] = (uint32_t)i;
  *out = v;
  *n = (size_t)m;
  return 0;
}

static void close_ring(cpu_ring_t *r) {
  for (size_t i = 0; i < r->n_followers; i++) close(r->follower_fd[i]);
  r->n_followers = 0;
  if (r->base && r->base != MAP_FAILED) munmap(r->base, r->map_len);
  if (r->fd >= 0) close(r->fd);
  r->base = NULL;
  r->fd = -1;
}

#ifdef TG_PERF_HAVE_DWARF
/* Ends the unwinder thread (after it has done every entry committed) and
 * frees the queue: entries not yet written are dropped, which only the
 * callers that have already settled the queue, or that can no longer
 * write, may do. */
static void stop_unwinder(session_t *s) {
  if (!s->uthread) return;
  tg_perf_unwind_thread_stop(s->uthread, &s->ustats);
  s->uthread = NULL;
  tg_perf_queue_stats(&s->queue, &s->qstats, NULL);
  tg_perf_queue_destroy(&s->queue);
}

_Static_assert(TG_PERF_DEFAULT_FOOTPRINT_KB * 1024ull ==
                   TG_PERF_QUEUE_DEFAULT_BYTES,
               "the config's default footprint is the queue's");
/* The queue's bytes: max_enqueued_footprint_kb, else the default, at
 * most TG_PERF_QUEUE_MAX_BYTES. */
static size_t queue_bytes(const tg_perf_cfg_t *c) {
  uint64_t kb = c->max_enqueued_footprint_kb;
  if (!kb) return TG_PERF_QUEUE_DEFAULT_BYTES;
  if (kb > TG_PERF_QUEUE_MAX_BYTES / 1024) return TG_PERF_QUEUE_MAX_BYTES;
  return (size_t)kb * 1024;
}
#endif

static void session_free(session_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->n_rings; i++) close_ring(&s->rings[i]);
  free(s->rings);
  tg_perf_emitter_free(s->emit);
  tg_perf_procs_free(s->procs);
#ifdef TG_PERF_HAVE_DWARF
  stop_unwinder(s);
#endif
  if (s->ksyms) {
    tg_ksyms_free(s->ksyms);
    free(s->ksyms);
  }
  free(s->scratch);
  tg_perf_cfg_free(&s->cfg);
  free(s);
}

static const char *open_hint(int err, const tg_perf_event_t *ev) {
  if (err == -EACCES || err == -EPERM)
    return " (needs CAP_PERFMON, or CAP_SYS_ADMIN before Linux 5.8, or "
           "kernel.perf_event_paranoid low enough)";
  if (ev->hardware && (err == -ENOENT || err == -EOPNOTSUPP || err == -ENODEV))
    return " (no hardware PMU counter here: use a software counter such as "
           "SW_CPU_CLOCK)";
  return "";
}

/* What failed while opening a CPU's events, for the log. */
typedef struct open_fail {
  const tg_perf_event_t *event; /* NULL: the ring's mapping */
  const char *what; /* the call: perf_event_open, the filter's, mmap */
  bool filter;      /* the tracepoint filter was refused */
} open_fail_t;

static int perf_open(struct perf_event_attr *a, int cpu, int group_fd) {
  int fd = (int)syscall(SYS_perf_event_open, a, -1, cpu, group_fd,
                        PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

/* A tracepoint's filter, as `perf record --filter` sets it. */
static int set_filter(int fd, const tg_perf_event_t *ev) {
  if (ev->kind != TG_PERF_EVENT_TRACEPOINT || !ev->tp_filter) return 0;
  return ioctl(fd, PERF_EVENT_IOC_SET_FILTER, ev->tp_filter) < 0 ? -errno : 0;
}

/* Opens the timebase of |cpu| and its followers (one group), and maps the
 * leader's ring (not when polling: nothing samples). */
static int open_ring(session_t *s, int cpu, cpu_ring_t *r, open_fail_t *why) {
  const tg_perf_cfg_t *c = &s->cfg;
  struct perf_event_attr a;
  tg_perf_attr_leader(c, s->sample_type, &a);
#ifdef TG_PERF_HAVE_DWARF
  if (c->callstacks && c->user_frames == TG_PERF_USER_DWARF) {
    /* The user registers and the top of the user stack, unwound here;
     * the callchain keeps the kernel's frames. */
    a.sample_regs_user = tg_perf_unwind_regs_mask();
    a.sample_stack_user = TG_PERF_UNWIND_STACK_BYTES;
  }
#endif
  r->cpu = cpu;
  *why = (open_fail_t){&c->timebase, "perf_event_open", false};
  int rv = perf_open(&a, cpu, -1);
  if (rv < 0) return rv;
  r->fd = rv;
  *why = (open_fail_t){&c->timebase, "PERF_EVENT_IOC_SET_FILTER", true};
  if ((rv = set_filter(r->fd, &c->timebase)) < 0) goto fail;
  for (size_t i = 0; i < c->n_followers; i++) {
    struct perf_event_attr fa;
    tg_perf_attr_follower(c, i, &a, &fa);
    *why = (open_fail_t){&c->followers[i], "perf_event_open", false};
    if ((rv = perf_open(&fa, cpu, r->fd)) < 0) goto fail;
    r->follower_fd[r->n_followers++] = rv;
    *why = (open_fail_t){&c->followers[i], "PERF_EVENT_IOC_SET_FILTER", true};
    if ((rv = set_filter(rv, &c->followers[i])) < 0) goto fail;
  }
  if (c->poll_period_ms) return 0;
  *why = (open_fail_t){NULL, "mmap", false};
  long page = sysconf(_SC_PAGESIZE);
  r->data_size = (uint64_t)c->ring_pages * (uint64_t)page;
  r->map_len = (size_t)r->data_size + (size_t)page;
  r->base = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (r->base == MAP_FAILED) {
    rv = -errno;
    r->base = NULL;
    goto fail;
  }
  return 0;
fail:
  close_ring(r);
  return rv;
}

/* The process shard of a session: the one already chosen for another
 * instance of the same tracing session and shard count, else a random one
 * (traced_perf chooses once per tracing session). */
static uint32_t choose_shard(const tg_perf_ds_t *d, const tg_perf_cfg_t *c) {
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    const session_t *o = d->slots[k].sess;
    if (o && o->cfg.tracing_session_id == c->tracing_session_id &&
        o->cfg.shard_count == c->shard_count)
      return o->cfg.chosen_shard;
  }
  uint32_t v;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
    /* The entropy pool is not ready yet (early boot): any value spreads
     * the choice as well, the nanoseconds of the clock will do. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (uint32_t)ts.tv_nsec;
  }
  return v % c->shard_count;
}

/* A tracepoint that cannot be resolved refuses the config, naming it. */
static int resolve_tracepoints(tg_perf_cfg_t *c, unsigned k) {
  if (!tg_perf_cfg_has_tracepoints(c)) return 0;
  char root[256];
  const tg_perf_event_t *bad = NULL;
  int rv = tg_tracefs_mounted(root, sizeof(root)); /* never mounts */
  if (rv == 0) rv = tg_perf_cfg_resolve(c, root, &bad);
  if (rv == 0) return 0;
  const char *tp = bad ? bad->tp_name : NULL;
  if (!tp) {
    for (size_t i = 0; !tp && i <= c->n_followers; i++) {
      const tg_perf_event_t *ev = i ? &c->followers[i - 1] : &c->timebase;
      if (ev->kind == TG_PERF_EVENT_TRACEPOINT) tp = ev->tp_name;
    }
  }
  TG_ERROR("%s " DS_NAME ": instance %u: PerfEventConfig tracepoint \"%s\": "
           "%s; nothing is recorded", TG_NOTE(PERF_CONFIG_REFUSED), k,
           tp ? tp : "?",
           rv == -ENOENT && bad ? "no such tracepoint in tracefs (events/)"
           : rv == -ENOENT      ? "tracefs is not mounted"
           : rv == -EACCES || rv == -EPERM
               ? "tracefs refuses to be read (its events/*/id files need "
                 "CAP_DAC_READ_SEARCH or tracefs' gid= mount option)"
               : tg_strerror(rv));
  return -ENOTSUP;
}

static int session_start(tg_perf_ds_t *d, const uint8_t *cfgb, size_t len,
                         unsigned k, session_t **out) {
  *out = NULL;
  session_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  int rv = tg_perf_cfg_parse(cfgb, len, &s->cfg);
  if (rv < 0) {
    TG_ERROR("%s " DS_NAME ": instance %u: the config does not decode: %s",
             TG_NOTE(PERF_CONFIG_REFUSED), k, tg_strerror(rv));
    free(s);
    return rv;
  }
  tg_perf_cfg_t *c = &s->cfg;
  if (c->refused) {
    TG_ERROR("%s " DS_NAME ": instance %u: PerfEventConfig.%s; nothing is "
             "recorded", TG_NOTE(PERF_CONFIG_REFUSED), k, c->refused);
    session_free(s);
    return -ENOTSUP;
  }
  if ((rv = resolve_tracepoints(c, k)) < 0) goto fail;
  if (c->shard_count) c->chosen_shard = choose_shard(d, c);
  for (size_t i = 0; i < c->n_ignored; i++)
    TG_WARN("%s " DS_NAME ": instance %u: PerfEventConfig.%s is ignored",
            TG_NOTE(PERF_FIELDS_IGNORED), k, c->ignored[i]);
  if (c->callstacks && c->user_frames_defaulted)
    TG_WARN("%s " DS_NAME ": instance %u: user frames by frame pointer",
            TG_NOTE(PERF_USER_FRAMES_DEFAULT), k);
  /* READ, as traced_perf: the counter's running value per CPU is
   * PerfSample.timebase_count, which trace_processor plots as the
   * timebase's counter track. */
  s->sample_type = TG_PERF_SAMPLE_IP | TG_PERF_SAMPLE_TID |
                   TG_PERF_SAMPLE_TIME | TG_PERF_SAMPLE_CPU |
                   TG_PERF_SAMPLE_READ;
  if (c->callstacks) s->sample_type |= TG_PERF_SAMPLE_CALLCHAIN;
  bool dwarf = c->callstacks && c->user_frames == TG_PERF_USER_DWARF;
  if (!dwarf && c->footprint_given)
    TG_WARN("%s " DS_NAME ": instance %u: PerfEventConfig."
            "max_enqueued_footprint_kb is ignored: no unwinder queue without "
            "UNWIND_DWARF", TG_NOTE(PERF_FIELDS_IGNORED), k);
  if (!dwarf && c->unwind_state_clear_period_ms)
    TG_WARN("%s " DS_NAME ": instance %u: PerfEventConfig."
            "unwind_state_clear_period_ms is ignored: no unwinder state "
            "without UNWIND_DWARF", TG_NOTE(PERF_FIELDS_IGNORED), k);
#ifdef TG_PERF_HAVE_DWARF
  if (dwarf) {
    s->sample_type |= TG_PERF_SAMPLE_REGS_USER | TG_PERF_SAMPLE_STACK_USER;
    s->n_user_regs = tg_perf_unwind_n_regs();
    if ((rv = tg_perf_queue_init(&s->queue, queue_bytes(c))) < 0) goto fail;
    rv = tg_perf_unwind_thread_start(&s->queue, c->unwind_state_clear_period_ms,
                                     MAX_FRAMES, &s->uthread);
    if (rv < 0) {
      tg_perf_queue_destroy(&s->queue);
      goto fail;
    }
  }
#endif
  if (!c->n_cpus && (rv = online_cpus(&c->cpus, &c->n_cpus)) < 0) goto fail;
  s->emit = tg_perf_emitter_new(0);
  s->procs = tg_perf_procs_new(NULL, NULL);
  s->scratch = malloc(65536);
  s->rings = calloc(c->n_cpus, sizeof(*s->rings));
  if (!s->emit || !s->procs || !s->scratch || !s->rings) {
    rv = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < c->n_cpus; i++) s->rings[i].fd = -1;
  for (size_t i = 0; i < c->n_cpus; i++) {
    cpu_ring_t *r = &s->rings[s->n_rings];
    open_fail_t why;
    rv = open_ring(s, (int)c->cpus[i], r, &why);
    if (rv == -ENODEV && !c->hardware && why.event == &c->timebase) {
      TG_WARN(DS_NAME ": instance %u: cpu %u is not online: not sampled", k,
              c->cpus[i]);
      continue;
    }
    if (rv == -EINVAL && why.filter) {
      TG_ERROR("%s " DS_NAME ": instance %u: PerfEventConfig tracepoint "
               "\"%s\": the kernel refuses its filter \"%s\"; nothing is "
               "recorded", TG_NOTE(PERF_CONFIG_REFUSED), k, why.event->tp_name,
               why.event->tp_filter);
      goto fail;
    }
    if (rv < 0) {
      const char *ev_name = !why.event                  ? "the ring"
                            : why.event == &c->timebase ? "the timebase"
                                                        : "a follower";
      TG_ERROR("%s " DS_NAME ": instance %u: cpu %u: %s of %s: %s%s; "
               "nothing is recorded", TG_NOTE(PERF_OPEN_FAILED), k,
               c->cpus[i], why.what, ev_name, tg_strerror(rv),
               why.event ? open_hint(rv, why.event) : "");
      goto fail;
    }
    s->n_rings++;
  }
  if (!s->n_rings) {
    rv = -ENODEV;
    TG_ERROR("%s " DS_NAME ": instance %u: no CPU of the config is online",
             TG_NOTE(PERF_OPEN_FAILED), k);
    goto fail;
  }
  if (c->callstacks && c->kernel_frames) {
    if (!(s->ksyms = malloc(sizeof(*s->ksyms)))) {
      rv = -ENOMEM;
      goto fail;
    }
    int n = tg_ksyms_load(s->ksyms, KALLSYMS_PATH);
    if (n <= 0) {
      if (n < 0) tg_ksyms_init(s->ksyms);
      TG_WARN(DS_NAME ": instance %u: " KALLSYMS_PATH " gives no addresses "
              "(%s): kernel frames are not named (CAP_SYSLOG, "
              "kptr_restrict)", k, n < 0 ? tg_strerror(n) : "all read as 0");
    }
  }
  for (size_t i = 0; i < s->n_rings; i++)
    ioctl(s->rings[i].fd, PERF_EVENT_IOC_ENABLE, 0);
  static const char *const user_modes[] = {"none", "frame pointer", "DWARF"};
  char tuning[160] = "";
#ifdef TG_PERF_HAVE_DWARF
  if (s->uthread)
    snprintf(tuning, sizeof(tuning), "; unwinder queue %zu KiB, caches "
             "cleared every %u ms (0: never)", s->queue.cap / 1024,
             c->unwind_state_clear_period_ms);
#endif
  snprintf(tuning + strlen(tuning), sizeof(tuning) - strlen(tuning),
           "; memory cap %u KiB", c->max_daemon_memory_kb);
  TG_INFO(DS_NAME ": instance %u: %zu CPU(s), %s %u/%#llx%s%s, %zu "
          "follower(s), %s %llu, shard %u of %u, callstacks %s (user "
          "frames: %s%s)%s", k, s->n_rings,
          c->timebase.kind == TG_PERF_EVENT_TRACEPOINT ? "tracepoint"
          : c->timebase.kind == TG_PERF_EVENT_RAW      ? "raw event"
                                                       : "counter",
          c->timebase.attr_type, (unsigned long long)c->timebase.attr_config,
          c->timebase.tp_name ? " " : "",
          c->timebase.tp_name ? c->timebase.tp_name : "", c->n_followers,
          c->poll_period_ms ? "polled every ms"
          : c->frequency    ? "frequency"
                            : "period",
          (unsigned long long)(c->poll_period_ms ? c->poll_period_ms
                               : c->frequency    ? c->frequency
                                                 : c->period),
          c->chosen_shard, c->shard_count,
          c->callstacks ? "on" : "off",
          c->callstacks ? user_modes[c->user_frames] : "none",
          c->callstacks && c->kernel_frames ? ", kernel frames" : "", tuning);
  *out = s;
  return 0;
fail:
  session_free(s);
  return rv;
}

/* --- writing ------------------------------------------------------------- */

/* Begins a packet; first a defaults packet when the sequence's state was
 * cleared (the writer's first packet included) or the interning tables
 * must start over. The clear is only known once the writer exists, so
 * the packet begun first carries the defaults. NULL: not writable now. */
static tg_pbw_t *begin(tg_perf_ds_t *d, unsigned k, session_t *s,
                       uint64_t ts) {
  tg_pbw_t *w = tg_ds_packet_begin(d->ds, k);
  if (!w) return NULL;
  bool cleared = tg_ds_incremental_state_cleared(d->ds, k);
  if (!cleared && !s->force_clear && !tg_perf_emitter_full(s->emit)) return w;
  tg_perf_emitter_reset(s->emit);
  const tg_perf_cfg_t *c = &s->cfg;
  tg_perf_timebase_desc_t tb = {
      .frequency = c->frequency,
      .period = c->period,
      .counter = c->counter,
      .perf_clock = c->perf_clock,
      .name = c->name,
      .builtin_clock = c->builtin_clock,
      .event = &c->timebase,
      .poll_period_ms = c->poll_period_ms,
      .followers = c->followers,
      .n_followers = c->n_followers,
      .shard_count = c->shard_count,
      .chosen_shard = c->chosen_shard,
  };
  tg_perf_emit_defaults(w, ts, &tb);
  tg_ds_packet_end(d->ds, k);
  w = tg_ds_packet_begin(d->ds, k);
  s->force_clear = w == NULL;
  return w;
}

/* The fields of |r| every sample packet carries (no frames); the
 * followers' counts go to s->follower_counts. */
static size_t follower_counts(const session_t *s, const tg_perf_record_t *r,
                              uint64_t *out);
static tg_perf_emit_sample_t sample_of(session_t *s,
                                       const tg_perf_record_t *r) {
  size_t nf = follower_counts(s, r, s->follower_counts);
  return (tg_perf_emit_sample_t){
      .ts = r->u.sample.time,
      .cpu = r->u.sample.cpu,
      .pid = r->u.sample.pid,
      .tid = r->u.sample.tid,
      .cpu_mode = r->misc & TG_PERF_MISC_CPUMODE_MASK,
      .timebase_count = r->u.sample.read_value,
      .follower_counts = s->follower_counts,
      .n_follower_counts = nf,
  };
}

/* Writes a sample read but not written with its frames, with its counts,
 * as traced_perf does (PerfSample.sample_skipped_reason); the caller
 * counts it. */
static void skip_emit(tg_perf_ds_t *d, unsigned k, session_t *s,
                      const tg_perf_emit_sample_t *smp, uint32_t reason) {
  tg_pbw_t *w = begin(d, k, s, smp->ts);
  if (!w) return;
  tg_perf_emit_skipped(w, smp, reason);
  tg_ds_packet_end(d->ds, k);
}

static void skip_sample(tg_perf_ds_t *d, unsigned k, session_t *s,
                        const tg_perf_record_t *r, uint32_t reason) {
  tg_perf_emit_sample_t smp = sample_of(s, r);
  skip_emit(d, k, s, &smp, reason);
}

/* Callchain entry |i| of |ips| (host order, maybe unaligned). */
static uint64_t ip_at(const uint8_t *ips, size_t i) {
  uint64_t v;
  memcpy(&v, ips + 8 * i, sizeof(v));
  return v;
}

/* Appends to s->frames, from |n| on, the frames of the callchain |ips|
 * (|nr| entries, context markers included) of |pid|. Returns the new
 * count, or -1 when it has user frames and the process's maps cannot be
 * read. */
static long chain_frames(session_t *s, uint32_t pid, const uint8_t *ips,
                         uint64_t nr, size_t n) {
  const tg_perf_cfg_t *c = &s->cfg;
  /* Kernel frames carry no address, as traced_perf writes them: the
   * function's name (rel_pc 0) under a mapping of no range. An address
   * would give every reader of the trace the host's KASLR base, named or
   * not; without kallsyms (no CAP_SYSLOG) the frame is unnamed, one for
   * all the kernel's functions. */
  static const tg_perf_emit_mapping_t kernel_map = {
      .start = 0, .end = 0, .path = "[kernel.kallsyms]"};
  bool kernel = false, first_in_ctx = true;
  for (uint64_t i = 0; i < nr && n < MAX_FRAMES; i++) {
    uint64_t ip = ip_at(ips, (size_t)i);
    if (ip >= TG_PERF_CONTEXT_MAX) {
      kernel = ip == TG_PERF_CONTEXT_KERNEL;
      first_in_ctx = true;
      continue;
    }
    if (!kernel && tg_perf_procs_load(s->procs, pid) < 0) return -1;
    if (kernel) {
      if (!c->kernel_frames) continue;
      s->maps[n] = kernel_map;
      s->frames[n] = (tg_perf_emit_frame_t){.mapping = &s->maps[n]};
      if (s->ksyms)
        s->frames[n].function =
            tg_ksyms_lookup(s->ksyms, ip, &s->frames[n].function_len);
    } else {
      tg_perf_procs_frame(s->procs, pid, ip, !first_in_ctx, &s->maps[n],
                          &s->frames[n]);
      s->frames[n].mapping = &s->maps[n];
    }
    first_in_ctx = false;
    n++;
  }
  return (long)n;
}

/* The followers' counts a sample read with its leader (PERF_FORMAT_GROUP),
 * in config order, into |out|; returns how many. */
static size_t follower_counts(const session_t *s, const tg_perf_record_t *r,
                              uint64_t *out) {
  size_t nf = 0;
  for (; nf < s->cfg.n_followers && nf + 1 < r->u.sample.read_nr; nf++)
    out[nf] = tg_perf_read_value_at(r, nf + 1);
  return nf;
}

/* Writes a sample whose |n| frames are in s->frames, leaf first (none:
 * counter only). */
static void write_frames(tg_perf_ds_t *d, unsigned k, session_t *s,
                         tg_perf_emit_sample_t *smp, size_t n) {
  tg_perf_emit_frame_t *frames = s->frames;
  if (s->cfg.callstacks) {
    if (!n) {
      /* As traced_perf: a thread with no user state (idle, a kernel
       * thread) is out of scope when no kernel frames are asked for; a
       * sample with no frames otherwise (user mode under a kernel-only
       * config) keeps its counts under the empty callstack. */
      s->no_frames++;
      if (!s->cfg.kernel_frames) {
        skip_emit(d, k, s, smp, TG_PERF_SKIP_NOT_IN_SCOPE);
        return;
      }
    }
    /* The kernel lists the leaf first; Perfetto's callstacks the root.
     * Each frame keeps pointing at its own mapping. */
    for (size_t i = 0; i < n / 2; i++) {
      tg_perf_emit_frame_t f = frames[i];
      frames[i] = frames[n - 1 - i];
      frames[n - 1 - i] = f;
    }
  }
  smp->frames = frames;
  smp->n_frames = n;
  tg_pbw_t *w = begin(d, k, s, smp->ts);
  if (!w) return;
  int rv = tg_perf_emit_sample(s->emit, w, smp);
  tg_ds_packet_end(d->ds, k);
  if (rv < 0) {
    /* No memory for the tables: this sample is lost and the sequence
     * starts over at the next one (reset, then a defaults packet). */
    s->force_clear = true;
    return;
  }
  s->samples++;
}

#ifdef TG_PERF_HAVE_DWARF
_Static_assert(TG_PERF_QENTRY_FOLLOWERS == TG_PERF_MAX_FOLLOWERS,
               "a queue entry carries every follower's count");

/* Copies an UNWIND_DWARF sample into the unwinder queue; without room it
 * is written as skipped (PROFILER_SKIP_UNWIND_ENQUEUE), as traced_perf
 * does when its queue is past max_enqueued_footprint_kb. */
static void enqueue_sample(tg_perf_ds_t *d, unsigned k, session_t *s,
                           const tg_perf_record_t *r) {
  uint64_t nr = r->u.sample.nr < MAX_FRAMES ? r->u.sample.nr : MAX_FRAMES;
  /* The parser bounds the stack copy by the record's size (< 64 KiB). */
  uint32_t stack_len = (uint32_t)r->u.sample.stack_dyn_size;
  tg_perf_qentry_t *e =
      tg_perf_queue_reserve(&s->queue, (uint32_t)nr, s->n_user_regs, stack_len);
  if (!e) {
    s->enqueue_skipped++;
    skip_sample(d, k, s, r, TG_PERF_SKIP_UNWIND_ENQUEUE);
    return;
  }
  e->ts = r->u.sample.time;
  e->timebase_count = r->u.sample.read_value;
  e->cpu = r->u.sample.cpu;
  e->pid = r->u.sample.pid;
  e->tid = r->u.sample.tid;
  e->misc = r->misc;
  e->n_followers = (uint32_t)follower_counts(s, r, e->followers);
  if (nr) memcpy(tg_perf_qentry_ips(e), r->u.sample.ips, (size_t)nr * 8);
  uint64_t *regs = tg_perf_qentry_regs(e);
  for (uint32_t i = 0; i < s->n_user_regs; i++)
    regs[i] = tg_perf_user_reg_at(r, i);
  if (stack_len) memcpy(tg_perf_qentry_stack(e), r->u.sample.stack, stack_len);
  tg_perf_queue_commit(&s->queue);
}

/* Writes the samples the unwinder is done with, in the order read.
 * Returns how many entries left the queue. */
static size_t retire(tg_perf_ds_t *d, unsigned k, session_t *s) {
  size_t done = 0;
  if (!s->uthread) return 0;
  tg_perf_qentry_t *e;
  while ((e = tg_perf_queue_next_done(&s->queue))) {
    done++;
    if (e->kind == TG_PERF_Q_SAMPLE) {
      long n = chain_frames(s, e->pid, (const uint8_t *)tg_perf_qentry_ips(e),
                            e->n_ips, 0);
      if (n < 0) n = 0; /* a DWARF sample's callchain is the kernel's */
      const uint64_t *pcs = tg_perf_qentry_pcs(e);
      for (int32_t i = 0; i < e->n_pcs && n < MAX_FRAMES; i++, n++) {
        tg_perf_procs_frame(s->procs, e->pid, pcs[i], i > 0, &s->maps[n],
                            &s->frames[n]);
        s->frames[n].mapping = &s->maps[n];
      }
      tg_perf_emit_sample_t smp = {
          .ts = e->ts,
          .cpu = e->cpu,
          .pid = e->pid,
          .tid = e->tid,
          .cpu_mode = e->misc & TG_PERF_MISC_CPUMODE_MASK,
          .timebase_count = e->timebase_count,
          .follower_counts = e->followers,
          .n_follower_counts = e->n_followers,
      };
      write_frames(d, k, s, &smp, (size_t)n);
    }
    tg_perf_queue_release(&s->queue);
  }
  return done;
}

/* Waits for the unwinder to finish what was queued, then writes it:
 * before a flush's commit and at the stop, so that every sample read is
 * in the trace. */
static void settle(tg_perf_ds_t *d, unsigned k, session_t *s) {
  if (!s->uthread) return;
  tg_perf_queue_wait_idle(&s->queue);
  retire(d, k, s);
}
#endif

static void write_sample(tg_perf_ds_t *d, unsigned k, session_t *s,
                         const tg_perf_record_t *r) {
  const tg_perf_cfg_t *c = &s->cfg;
  uint32_t pid = r->u.sample.pid;
  if (tg_perf_cfg_has_scope(c) &&
      (pid == 0 ||
       !tg_perf_cfg_in_scope(c, (int32_t)pid,
                             (c->n_target_cmdline || c->n_exclude_cmdline)
                                 ? tg_perf_procs_argv0(s->procs, pid)
                                 : NULL))) {
    /* Written with its counts and no frames, as traced_perf writes a
     * rejected process's samples: the events are per CPU, and the
     * counter tracks keep every reading. */
    s->out_of_scope++;
    skip_sample(d, k, s, r, TG_PERF_SKIP_NOT_IN_SCOPE);
    return;
  }
#ifdef TG_PERF_HAVE_DWARF
  if (s->uthread && r->u.sample.n_regs == s->n_user_regs) {
    /* The process's maps are read now, while it still runs: its frames
     * are named from them when the unwinder hands the sample back. As
     * traced_perf when a process's /proc files cannot be read: a sample
     * skipped at the read stage, counted by trace_processor
     * (perf_samples_skipped). */
    if (tg_perf_procs_load(s->procs, pid) < 0) {
      s->skipped++;
      skip_sample(d, k, s, r, TG_PERF_SKIP_READ_STAGE);
      return;
    }
    enqueue_sample(d, k, s, r);
    return;
  }
#endif
  size_t n = 0;
  if (c->callstacks) {
    long m = chain_frames(s, pid, r->u.sample.ips, r->u.sample.nr, 0);
    if (m < 0) {
      s->skipped++;
      skip_sample(d, k, s, r, TG_PERF_SKIP_READ_STAGE);
      return;
    }
    n = (size_t)m;
  }
  tg_perf_emit_sample_t smp = sample_of(s, r);
  write_frames(d, k, s, &smp, n);
}

/* |pid|'s mappings changed (a new executable mapping, an exec). */
static void forget(session_t *s, uint32_t pid, bool exec) {
  tg_perf_procs_invalidate(s->procs, pid, exec);
#ifdef TG_PERF_HAVE_DWARF
  /* In order with the samples queued before it. */
  if (s->uthread) tg_perf_queue_forget(&s->queue, pid);
#endif
}

static void handle(tg_perf_ds_t *d, unsigned k, session_t *s, int cpu,
                   const uint8_t *rec, size_t len) {
  tg_perf_record_t r;
  tg_perf_layout_t lay = {.sample_type = s->sample_type,
                          .sample_id_all = true,
                          .n_user_regs = s->n_user_regs,
                          .read_group = s->cfg.n_followers > 0};
  if (tg_perf_record_parse(rec, len, &lay, &r) < 0) {
    s->bad_records++;
    return;
  }
  switch (r.type) {
    case TG_PERF_RECORD_SAMPLE:
      write_sample(d, k, s, &r);
      break;
    case TG_PERF_RECORD_LOST: {
      s->lost += r.u.lost.lost;
      tg_pbw_t *w = begin(d, k, s, r.id.time);
      if (!w) break;
      tg_perf_emit_lost(w, r.id.time, (uint32_t)cpu, r.u.lost.lost);
      tg_ds_packet_end(d->ds, k);
      break;
    }
    case TG_PERF_RECORD_THROTTLE:
      s->throttles++;
      break;
    case TG_PERF_RECORD_MMAP2:
      if (r.u.mmap2.prot & 4 /* PROT_EXEC */) forget(s, r.u.mmap2.pid, false);
      break;
    case TG_PERF_RECORD_COMM:
      if (r.misc & TG_PERF_MISC_COMM_EXEC) forget(s, r.u.comm.pid, true);
      break;
    default:
      break;
  }
}

/* Reads what every CPU's ring holds now. Returns the records read. */
static size_t drain(tg_perf_ds_t *d, unsigned k, session_t *s) {
  size_t n = 0;
  if (s->guardrail_stopped) return 0;
  tg_perf_procs_new_round(s->procs, now_ms());
  for (size_t i = 0; i < s->n_rings; i++) {
    cpu_ring_t *r = &s->rings[i];
    struct perf_event_mmap_page *meta = (void *)r->base;
    tg_perf_ring_view_t v = {
        /* The data area follows the one metadata page. */
        .data = r->base + (r->map_len - r->data_size),
        .size = r->data_size,
        .head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE),
    };
    uint64_t tail = meta->data_tail;
    const uint8_t *rec;
    size_t len;
    int rv;
    while ((rv = tg_perf_ring_next(&v, &tail, s->scratch, 65536, &rec, &len)) ==
           1) {
      handle(d, k, s, r->cpu, rec, len);
      n++;
    }
    if (rv < 0) s->bad_records++;
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  return n;
}

/* Counter-only polling: one reading of every CPU's group, stamped now on
 * the boot clock. Returns the readings written. */
static size_t poll_counts(tg_perf_ds_t *d, unsigned k, session_t *s) {
  size_t n = 0;
  for (size_t i = 0; i < s->n_rings; i++) {
    cpu_ring_t *r = &s->rings[i];
    uint64_t buf[2 + TG_PERF_MAX_FOLLOWERS], v[1 + TG_PERF_MAX_FOLLOWERS];
    ssize_t got;
    while ((got = read(r->fd, buf, sizeof(buf))) < 0 && errno == EINTR) {
    }
    size_t m = 0;
    if (got < 0 ||
        tg_perf_group_read_parse((const uint8_t *)buf, (size_t)got, v,
                                 1 + TG_PERF_MAX_FOLLOWERS, &m) < 0 ||
        m == 0) {
      s->poll_failed++;
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    tg_pbw_t *w = begin(d, k, s, now);
    if (!w) continue;
    tg_perf_emit_counts(w, now, (uint32_t)r->cpu, v[0], v + 1, m - 1);
    tg_ds_packet_end(d->ds, k);
    s->polls++;
    n++;
  }
  return n;
}

/* What the session's CPUs hold now: their rings, or a polled reading. */
static size_t read_cpus(tg_perf_ds_t *d, unsigned k, session_t *s) {
  return s->cfg.poll_period_ms ? poll_counts(d, k, s) : drain(d, k, s);
}

static void end_slot(tg_perf_ds_t *d, unsigned k) {
  slot_t *sl = &d->slots[k];
  session_t *s = sl->sess;
  if (s) {
    for (size_t i = 0; i < s->n_rings; i++)
      ioctl(s->rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
    if (sl->announced) {
      read_cpus(d, k, s);
#ifdef TG_PERF_HAVE_DWARF
      settle(d, k, s);
#endif
      tg_ds_flush_thread(d->ds, k);
    }
    uint64_t unwound = 0, unwind_failed = 0;
#ifdef TG_PERF_HAVE_DWARF
    /* Settled above when announced; else nothing was ever read. */
    stop_unwinder(s);
    const tg_perf_queue_stats_t *qs = &s->qstats;
    unwound = s->ustats.unwound;
    unwind_failed = s->ustats.unwind_failed;
    if (qs->committed || qs->full)
      TG_INFO(DS_NAME ": instance %u: unwinder queue: %" PRIu64 " entries "
              "(samples and forgotten processes), "
              "peak %zu KiB of %zu KiB; caches cleared %" PRIu64 " times on "
              "the period, %" PRIu64 " on request (%" PRIu64 " forgets "
              "without room); %" PRIu64 " forgets of processes without a "
              "cache not sent%s; %" PRIu64 " samples unwound with a cache "
              "whose rebuild was rate-limited", k, qs->committed,
              qs->peak_bytes / 1024, queue_bytes(&s->cfg) / 1024,
              s->ustats.periodic_clears, s->ustats.requested_drops,
              qs->forgets_folded, qs->forgets_filtered,
              qs->filter_off ? " (filter off: too many processes)" : "",
              s->ustats.rebuilds_deferred);
#endif
    const tg_perf_procs_stats_t *ps = tg_perf_procs_stats(s->procs);
    TG_INFO(DS_NAME ": instance %u: %llu samples written, %llu skipped (maps "
            "unreadable), %llu out of scope, %llu without frames, %llu unreadable records, %llu unwound by "
            "DWARF (%llu processes not reported); %llu of %llu user "
            "addresses named, %llu outside any mapping; %llu maps and %llu "
            "files read (%llu and %llu unreadable)", k,
            (unsigned long long)s->samples,
            (unsigned long long)s->skipped,
            (unsigned long long)s->out_of_scope,
            (unsigned long long)s->no_frames,
            (unsigned long long)s->bad_records,
            (unsigned long long)unwound,
            (unsigned long long)unwind_failed,
            (unsigned long long)ps->named_pcs,
            (unsigned long long)ps->resolved_pcs,
            (unsigned long long)ps->unknown_pcs,
            (unsigned long long)ps->maps_reads,
            (unsigned long long)ps->files_read,
            (unsigned long long)ps->maps_failed,
            (unsigned long long)ps->files_failed);
    const uint64_t *why = ps->files_refused;
    if (ps->files_failed || ps->maps_rereads_deferred ||
        ps->files_over_budget || ps->syms_dropped)
      TG_INFO(DS_NAME ": instance %u: files unreadable: %" PRIu64 " missing, "
              "%" PRIu64 " empty or too large; %" PRIu64 " symbols past a "
              "file's caps, %" PRIu64 " files' symbols past the session's "
              "budget; %" PRIu64 " lookups on older maps (rereads "
              "rate-limited)", k, why[TG_PERF_OPEN_MISSING],
              why[TG_PERF_OPEN_OK], ps->syms_dropped, ps->files_over_budget,
              ps->maps_rereads_deferred);
    if (why[TG_PERF_OPEN_NOT_REGULAR] || why[TG_PERF_OPEN_OTHER_FILE] ||
        why[TG_PERF_OPEN_ESCAPE])
      TG_WARN("%s " DS_NAME ": instance %u: mapped files refused: %" PRIu64
              " not_regular, %" PRIu64 " other_file, %" PRIu64 " escape",
              TG_NOTE(PERF_FILES_REFUSED), k, why[TG_PERF_OPEN_NOT_REGULAR],
              why[TG_PERF_OPEN_OTHER_FILE], why[TG_PERF_OPEN_ESCAPE]);
    if (s->cfg.poll_period_ms)
      TG_INFO(DS_NAME ": instance %u: %llu counter readings written, %llu "
              "unreadable", k, (unsigned long long)s->polls,
              (unsigned long long)s->poll_failed);
    if (s->lost || s->throttles || s->enqueue_skipped)
      TG_WARN("%s " DS_NAME ": instance %u: %llu records lost in full rings "
              "(the longest wait between reads %llu ms, the period %u ms), "
              "%llu throttles by the kernel (kernel.perf_event_max_sample_rate), "
              "%llu samples skipped with no room in the unwinder queue "
              "(max_enqueued_footprint_kb)",
              TG_NOTE(PERF_DATA_LOSS), k, (unsigned long long)s->lost,
              (unsigned long long)s->longest_wait_ms,
              (unsigned)s->cfg.read_period_ms,
              (unsigned long long)s->throttles,
              (unsigned long long)s->enqueue_skipped);
    session_free(s);
    sl->sess = NULL;
  }
  sl->active = false;
}

/* The producer's memory as traced_perf's guardrail counts it: resident
 * anonymous pages and swap (mapped files are the page cache's), in KiB;
 * -1 when /proc/self/status cannot be read or has no RssAnon (kernels
 * before 4.5). */
#define STATUS_CAP (64u << 10)

static long anon_and_swap_kb(void) {
  tg_buf_t text;
  tg_buf_init(&text, STATUS_CAP);
  tg_pid_status_t st;
  int rv = tg_proc_read_file("/proc/self/status", &text);
  if (rv == 0)
    rv = tg_pid_status_parse((const char *)tg_buf_begin(&text),
                             tg_buf_size(&text), &st);
  tg_buf_free(&text);
  if (rv < 0 || !(st.present & TG_PID_STATUS_RSS_ANON)) return -1;
  uint64_t kb = st.rss_anon_kb +
                (st.present & TG_PID_STATUS_VM_SWAP ? st.vm_swap_kb : 0);
  return kb > (uint64_t)LONG_MAX ? LONG_MAX : (long)kb;
}

/* Past max_daemon_memory_kb the unwinder's caches go first; still past
 * it a check later, the session stops sampling as traced_perf's does
 * (the guardrail's packet says so in the trace): what was read until
 * then is written, the events are disabled and the unwinder's memory is
 * freed. The session stays until the service stops it. */
static void check_memory(tg_perf_ds_t *d, unsigned k, session_t *s,
                         uint64_t now) {
  const tg_perf_cfg_t *c = &s->cfg;
  if (!c->max_daemon_memory_kb || s->guardrail_stopped || now < s->mem_next_ms)
    return;
  s->mem_next_ms = now + MEMORY_CHECK_MS;
  long kb = anon_and_swap_kb();
  if (kb < 0 || (uint64_t)kb <= c->max_daemon_memory_kb) {
    s->mem_over = false;
    return;
  }
  if (!s->mem_over) {
    s->mem_over = true;
    s->mem_drops++;
#ifdef TG_PERF_HAVE_DWARF
    if (s->uthread) tg_perf_queue_request_drop(&s->queue);
#endif
    TG_WARN("%s " DS_NAME ": instance %u: %ld KiB of memory (RssAnon and "
            "swap) above max_daemon_memory_kb %u: the unwinder's caches are "
            "dropped", TG_NOTE(PERF_MEMORY_GUARDRAIL), k, kb,
            c->max_daemon_memory_kb);
    return;
  }
  for (size_t i = 0; i < s->n_rings; i++)
    ioctl(s->rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
  drain(d, k, s);
#ifdef TG_PERF_HAVE_DWARF
  settle(d, k, s);
  stop_unwinder(s);
#endif
  s->guardrail_stopped = true;
  struct timespec ts;
  clock_gettime(c->clockid, &ts);
  uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  tg_pbw_t *w = begin(d, k, s, t);
  if (w) {
    tg_perf_emit_guardrail_stop(w, t);
    tg_ds_packet_end(d->ds, k);
  }
  tg_ds_flush_thread(d->ds, k);
  TG_ERROR("%s " DS_NAME ": instance %u: %ld KiB of memory (RssAnon and "
           "swap) still above max_daemon_memory_kb %u after the caches were "
           "dropped: sampling stops for this session",
           TG_NOTE(PERF_MEMORY_GUARDRAIL), k, kb, c->max_daemon_memory_kb);
}

static void run_slot(tg_perf_ds_t *d, unsigned k, uint64_t now) {
  slot_t *sl = &d->slots[k];
  if (!sl->announced) {
    /* Packets begun before the agent marks the instance enabled are
     * dropped; the kernel keeps the samples meanwhile. */
    if (!(tg_ds_enabled_mask(d->ds) & (1u << k))) {
      sl->next_ms = now + (now - sl->started_ms < 1000 ? 2 : 50);
      return;
    }
    sl->announced = true;
  }
  if (!sl->sess) {
    sl->next_ms = UINT64_MAX;
    return;
  }
  session_t *s = sl->sess;
#ifdef TG_PERF_HAVE_DWARF
  if (retire(d, k, s)) sl->unflushed = true;
#endif
  if (read_cpus(d, k, s)) sl->unflushed = true;
  if (s->read_ms && now - s->read_ms > s->longest_wait_ms)
    s->longest_wait_ms = now - s->read_ms;
  s->read_ms = now;
  check_memory(d, k, s, now);
  if (sl->unflushed && now - sl->flushed_ms >= COMMIT_EVERY_MS) {
    tg_ds_flush_thread(d->ds, k);
    sl->unflushed = false;
    sl->flushed_ms = now;
  }
  sl->next_ms = now + sl->sess->cfg.read_period_ms;
}

/* Under d->mu on entry and exit. */
static void apply_changes(tg_perf_ds_t *d) {
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &d->slots[k];
    if (sl->have_gen == sl->want_gen) continue;
    uint32_t gen = sl->want_gen;
    bool start = sl->want_active;
    uint8_t *cfg = sl->want_cfg;
    size_t len = sl->want_len;
    sl->want_cfg = NULL;
    pthread_mutex_unlock(&d->mu);
    if (sl->active) end_slot(d, k);
    sl->have_gen = gen;
    if (start) {
      /* Only a session that opened confirms its start: one refused (its
       * config, perf_event_open) is named in the trace as not started
       * by the service, and logged here with its notice. */
      if (session_start(d, cfg, len, k, &sl->sess) == 0)
        tg_ds_notify_started(d->ds, k);
      sl->active = true;
      sl->announced = false;
      sl->started_ms = sl->flushed_ms = now_ms();
      sl->next_ms = sl->started_ms;
    }
    free(cfg);
    pthread_mutex_lock(&d->mu);
    sl->done_gen = gen;
    pthread_cond_broadcast(&d->done_cv);
  }
}

/* Under d->mu on entry and exit. */
static void serve_flushes(tg_perf_ds_t *d) {
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &d->slots[k];
    if (sl->flush_done == sl->flush_req) continue;
    uint32_t req = sl->flush_req;
    pthread_mutex_unlock(&d->mu);
    if (sl->active && sl->sess) {
      uint64_t now = now_ms();
      run_slot(d, k, now);
#ifdef TG_PERF_HAVE_DWARF
      if (sl->announced) settle(d, k, sl->sess);
#endif
      if (sl->announced) {
        tg_ds_flush_thread(d->ds, k);
        sl->unflushed = false;
        sl->flushed_ms = now;
      }
    }
    pthread_mutex_lock(&d->mu);
    sl->flush_done = req;
    pthread_cond_broadcast(&d->done_cv);
  }
}

static void wait_for_work(tg_perf_ds_t *d, uint64_t next) {
  struct pollfd pfd = {.fd = d->wake_fd, .events = POLLIN};
  int timeout = -1;
  if (next != UINT64_MAX) {
    uint64_t now = now_ms();
    timeout = next <= now ? 0 : next - now > INT32_MAX ? INT32_MAX
                                                       : (int)(next - now);
  }
  if (poll(&pfd, 1, timeout) > 0 && pfd.revents) {
    uint64_t v;
    while (read(d->wake_fd, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
}

static void *reader_main(void *arg) {
  tg_perf_ds_t *d = arg;
  pthread_mutex_lock(&d->mu);
  while (!d->quit) {
    if (d->changed) {
      d->changed = false;
      apply_changes(d);
      serve_flushes(d);
    }
    pthread_mutex_unlock(&d->mu);
    uint64_t next = UINT64_MAX;
    for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
      slot_t *sl = &d->slots[k];
      if (!sl->active) continue;
      uint64_t now = now_ms();
      if (sl->next_ms <= now) run_slot(d, k, now);
      if (sl->next_ms < next) next = sl->next_ms;
    }
    pthread_mutex_lock(&d->mu);
    if (d->changed || d->quit) continue;
    pthread_mutex_unlock(&d->mu);
    wait_for_work(d, next);
    pthread_mutex_lock(&d->mu);
  }
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

/* --- lifecycle ----------------------------------------------------------- */

int tg_perf_ds_new(tg_perf_ds_t **out) {
  tg_perf_ds_t *d = calloc(1, sizeof(*d));
  if (!d) return -ENOMEM;
  if ((d->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    int rv = -errno;
    free(d);
    return rv;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&d->done_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&d->mu, NULL);
  tg_ds_options_t o = {
      .name = DS_NAME,
      .handles_incremental_state_clear = true,
      .cbs = {.on_start = on_start, .on_stop = on_stop, .on_flush = on_flush,
              .ctx = d},
  };
  int rv = tg_ds_register_flags(&o, TG_DS_WILL_NOTIFY_ON_START, &d->ds);
  if (rv < 0) goto fail;
  if ((rv = -pthread_create(&d->thread, NULL, reader_main, d)) < 0) goto fail;
  d->running = true;
  *out = d;
  return 0;
fail:
  close(d->wake_fd);
  pthread_cond_destroy(&d->done_cv);
  pthread_mutex_destroy(&d->mu);
  free(d);
  return rv;
}

void tg_perf_ds_free(tg_perf_ds_t *d) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->quit = true;
  wake_thread(d);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  d->running = false;
  for (unsigned k = 0; k < TG_DS_MAX_INSTANCES; k++) {
    slot_t *sl = &d->slots[k];
    session_free(sl->sess); /* the agent is gone: no packets */
    sl->sess = NULL;
    free(sl->want_cfg);
  }
  close(d->wake_fd);
  pthread_cond_destroy(&d->done_cv);
  pthread_mutex_destroy(&d->mu);
  free(d);
}
