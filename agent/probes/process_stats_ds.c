/* "linux.process_stats": a ProcessTree entry for every process the first
 * time it is seen (all of them at start with scan_all_processes_on_start),
 * with its threads (named with record_thread_names) and its start time
 * (record_process_age), and a ProcessStats of every process each
 * proc_stats_poll_ms (with smaps_rollup sizes under scan_smaps_rollup).
 * Runs on the sampler thread.
 *
 * On-demand dumps (process_stats.h): the pids linux.ftrace of the same
 * session hands over through the pid feed get entries too, so a sched
 * trace names the tasks that started after the initial scan. |seen| (the
 * tgids with a Process entry) and |tseen| (the tids with a Thread entry)
 * are shared by the scan and the on-demand path: neither writes what the
 * other already did. Both forget what has exited: |seen| is this round's
 * listing after each scan, and whenever either set has doubled since it
 * was last pruned, the ids whose /proc entry is gone leave it (a thread
 * by /proc/<tgid>/task/<tid>, so a tid the kernel gave to another process
 * is written again). Each set thus holds at most twice what is alive
 * (and PRUNE_MIN), and costs one stat per member per doubling.
 *
 * A process may exit at any point of a round: a file that is gone, empty
 * or half-written only drops that process from the round, quietly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/clock.h"
#include "agent/probes/metatrace.h"
#include "agent/probes/pid_feed.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_config.h"
#include "agent/probes/probes_packets.h"
#include "agent/sys/proc_pid.h"
#include "agent/sys/proc_read.h"
#include "agent/probes/process_stats.h"
#include "tracegate/error.h"
#include "common/log.h"

_Static_assert(sizeof(tg_process_stats_cfg_t) <= TG_PROBE_CFG_MAX,
               "config does not fit the sampler's slot");

#define STATUS_CAP (64u << 10)
/* Longer command lines are cut (ARG_MAX allows megabytes). */
#define CMDLINE_CAP (16u << 10)
/* All cmdlines of one round. */
#define ARENA_CAP (64u << 20)
/* A thread name: comm is at most 15 bytes and a newline. */
#define COMM_CAP 64
/* A seen set is not pruned below this many members. */
#define PRUNE_MIN 4096u

typedef struct pid_array {
  int32_t *v;
  size_t n, cap;
} pid_array_t;

/* A thread with a Thread entry, and its process. */
typedef struct tid_entry {
  int32_t tid, tgid;
} tid_entry_t;

typedef struct tid_array {
  tid_entry_t *v;
  size_t n, cap;
  size_t prune_at; /* 0: PRUNE_MIN */
} tid_array_t;

typedef struct proc_stats {
  tg_process_stats_cfg_t cfg;
  uint64_t ns_per_tick;
  bool first_round;
  uint64_t due_ms;
  pid_array_t seen;  /* sorted: pids with a ProcessTree entry */
  pid_array_t cur;   /* this round's listing */
  int32_t *fresh;    /* cur minus seen */
  size_t cap_fresh;
  tg_buf_t file;
  tg_buf_t arena;    /* cmdlines and names of this round's entries */
  tg_proc_entry_t *entries;
  size_t n_entries, cap_entries;
  /* Per entry, where its cmdline and name start in the arena (which may
   * move while it grows). */
  struct arena_off {
    size_t cmdline, name;
  } *offs;
  size_t cap_offs;
  pid_array_t tids; /* scratch: one process's /proc/<pid>/task listing */
  tg_thread_entry_t *threads;
  size_t n_threads, cap_threads;
  size_t *thread_name_offs; /* SIZE_MAX: no name */
  size_t cap_thread_name_offs;
  tg_proc_counters_t *counters;
  size_t n_counters, cap_counters;
  int last_list_err;
  /* On-demand dumps: NULL consumer when off. */
  tg_pid_feed_t *feed;
  tg_pid_feed_consumer_t *consumer;
  int32_t *demand;  /* TG_PID_FEED_CAP: one drain of the feed */
  tid_array_t tseen; /* sorted by tid: threads with a Thread entry */
  tid_array_t tnew;  /* scratch: the threads one drain or round wrote */
  size_t seen_prune_at; /* 0: PRUNE_MIN */
} proc_stats_t;

static int parse_cfg(const uint8_t *cfg, size_t len, void *out) {
  int rv = tg_process_stats_cfg_parse(cfg, len, out);
  if (rv == 0) tg_probes_warn_unacted("linux.process_stats", cfg, len);
  return rv;
}

/* |ctx| is the pid feed (NULL: no on-demand dumps). */
static int create(const void *cfg, void *ctx, void **state) {
  proc_stats_t *ps = calloc(1, sizeof(*ps));
  if (!ps) return -ENOMEM;
  memcpy(&ps->cfg, cfg, sizeof(ps->cfg));
  ps->ns_per_tick = tg_probes_ns_per_tick();
  ps->first_round = true;
  tg_buf_init(&ps->file, STATUS_CAP);
  tg_buf_init(&ps->arena, ARENA_CAP);
  ps->feed = ctx;
  if (ps->cfg.on_demand && ps->feed) {
    int rv = ps->cfg.tracing_session_id
                 ? tg_pid_feed_register(ps->feed, ps->cfg.tracing_session_id,
                                        &ps->consumer)
                 : -EINVAL;
    if (rv == -EINVAL)
      TG_INFO("linux.process_stats: the config has no tracing_session_id; "
              "the pids linux.ftrace sees are not resolved");
    else if (rv < 0)
      TG_WARN("linux.process_stats: the pids linux.ftrace sees are not "
              "resolved: %s", tg_strerror(rv));
  }
  if (!ps->cfg.poll_ms && !ps->cfg.scan_all_on_start && !ps->consumer)
    TG_INFO("linux.process_stats: neither proc_stats_poll_ms nor "
            "scan_all_processes_on_start set, nor on-demand dumps; nothing "
            "to record");
  *state = ps;
  return 0;
}

static void destroy(void *state) {
  proc_stats_t *ps = state;
  if (ps->consumer) {
    uint64_t dropped = tg_pid_feed_dropped(ps->feed, ps->consumer);
    if (dropped)
      TG_INFO("linux.process_stats: %llu pid(s) from linux.ftrace were not "
              "resolved (too many waiting at once)",
              (unsigned long long)dropped);
    tg_pid_feed_unregister(ps->feed, ps->consumer);
  }
  free(ps->demand);
  free(ps->tseen.v);
  free(ps->tnew.v);
  free(ps->seen.v);
  free(ps->cur.v);
  free(ps->fresh);
  tg_buf_free(&ps->file);
  tg_buf_free(&ps->arena);
  free(ps->entries);
  free(ps->offs);
  free(ps->tids.v);
  free(ps->threads);
  free(ps->thread_name_offs);
  free(ps->counters);
  free(ps);
}

static int reserve(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t ncap = *cap ? *cap : 64;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*arr, ncap * elem);
  if (!p) return -ENOMEM;
  *arr = p;
  *cap = ncap;
  return 0;
}

static bool sorted_has(const pid_array_t *a, int32_t pid) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid] < pid) lo = mid + 1;
    else if (a->v[mid] > pid) hi = mid;
    else return true;
  }
  return false;
}

/* Inserts |pid| into sorted |a|; returns 0 or -ENOMEM. */
static int sorted_insert(pid_array_t *a, int32_t pid) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid] < pid) lo = mid + 1;
    else hi = mid;
  }
  if (lo < a->n && a->v[lo] == pid) return 0;
  int rv = reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v));
  if (rv < 0) return rv;
  memmove(a->v + lo + 1, a->v + lo, (a->n - lo) * sizeof(*a->v));
  a->v[lo] = pid;
  a->n++;
  return 0;
}

/* Reads /proc/<pid>/<name> into ps->file. */
static int read_pid_file(proc_stats_t *ps, int32_t pid, const char *name,
                         size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
  ps->file.max = cap;
  return tg_proc_read_file(path, &ps->file);
}

static int add_entry(proc_stats_t *ps, const tg_pid_status_t *st) {
  size_t n = ps->n_entries;
  int rv = reserve((void **)&ps->entries, &ps->cap_entries, n + 1,
                   sizeof(*ps->entries));
  if (rv == 0)
    rv = reserve((void **)&ps->offs, &ps->cap_offs, n + 1, sizeof(*ps->offs));
  if (rv < 0) return rv;
  /* Cmdline: a truncated one (-ENOBUFS) is kept; an unreadable one is
   * empty, and the entry falls back to the name. */
  size_t cmd_off = tg_buf_size(&ps->arena), cmd_len = 0;
  rv = read_pid_file(ps, st->pid, "cmdline", CMDLINE_CAP);
  if (rv == 0 || rv == -ENOBUFS) {
    cmd_len = tg_buf_size(&ps->file);
    if (tg_buf_append(&ps->arena, tg_buf_begin(&ps->file), cmd_len) < 0)
      return -ENOMEM;
  } else if (tg_proc_vanished(rv)) {
    return rv;
  }
  size_t name_off = tg_buf_size(&ps->arena);
  if (tg_buf_append(&ps->arena, st->name, strlen(st->name) + 1) < 0)
    return -ENOMEM;
  ps->entries[n] = (tg_proc_entry_t){
      .pid = st->pid,
      .ppid = st->ppid,
      .has_uid = (st->present & TG_PID_STATUS_UID) != 0,
      .uid = st->uid,
      .cmdline_len = cmd_len,
  };
  if (ps->cfg.record_age) {
    tg_pid_stat_t pst;
    if (read_pid_file(ps, st->pid, "stat", STATUS_CAP) == 0 &&
        tg_pid_stat_parse((const char *)tg_buf_begin(&ps->file),
                          tg_buf_size(&ps->file), &pst) == 0) {
      ps->entries[n].has_start = true;
      ps->entries[n].start_ns = pst.starttime * ps->ns_per_tick;
    }
  }
  ps->offs[n].cmdline = cmd_off;
  ps->offs[n].name = name_off;
  ps->n_entries++;
  return 0;
}

/* Adds thread |tid| of process |tgid| named |name| (len bytes; NULL: no
 * name). */
static int add_thread(proc_stats_t *ps, int32_t tid, int32_t tgid,
                      const char *name, size_t len) {
  size_t n = ps->n_threads;
  int rv = reserve((void **)&ps->threads, &ps->cap_threads, n + 1,
                   sizeof(*ps->threads));
  if (rv == 0)
    rv = reserve((void **)&ps->thread_name_offs, &ps->cap_thread_name_offs,
                 n + 1, sizeof(*ps->thread_name_offs));
  if (rv < 0) return rv;
  size_t name_off = SIZE_MAX;
  if (name) {
    name_off = tg_buf_size(&ps->arena);
    if (tg_buf_append(&ps->arena, name, len) < 0 ||
        tg_buf_append(&ps->arena, "", 1) < 0)
      return -ENOMEM;
  }
  ps->threads[n] = (tg_thread_entry_t){.tid = tid, .tgid = tgid};
  ps->thread_name_offs[n] = name_off;
  ps->n_threads++;
  return 0;
}

/* Adds the threads of process |pid| other than its main thread, named
 * from /proc/<pid>/task/<tid>/comm when the config asks. A thread that
 * exits meanwhile is left out. */
static int add_threads(proc_stats_t *ps, int32_t pid) {
  char dir[48];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  int rv = tg_proc_list_pids(dir, &ps->tids.v, &ps->tids.n, &ps->tids.cap);
  if (rv < 0) return tg_proc_vanished(rv) ? 0 : rv;
  for (size_t i = 0; i < ps->tids.n; i++) {
    int32_t tid = ps->tids.v[i];
    if (tid == pid) continue;
    const char *comm = NULL;
    size_t len = 0;
    if (ps->cfg.thread_names) {
      char path[80];
      snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
      ps->file.max = COMM_CAP;
      if (tg_proc_read_file(path, &ps->file) < 0) continue;
      len = tg_buf_size(&ps->file);
      comm = (const char *)tg_buf_begin(&ps->file);
      if (len && comm[len - 1] == '\n') len--;
    }
    if ((rv = add_thread(ps, tid, pid, comm, len)) < 0) return rv;
  }
  return 0;
}

static int add_counters(proc_stats_t *ps, const tg_pid_status_t *st) {
  tg_proc_counters_t c = {.pid = st->pid};
  tg_proc_counters_from_status(&c, st);
  int64_t adj;
  if (read_pid_file(ps, st->pid, "oom_score_adj", STATUS_CAP) == 0 &&
      tg_oom_score_adj_parse((const char *)tg_buf_begin(&ps->file),
                             tg_buf_size(&ps->file), &adj) == 0) {
    c.has_oom_score_adj = true;
    c.oom_score_adj = adj;
  }
  if (ps->cfg.record_runtime) {
    tg_pid_stat_t pst;
    if (read_pid_file(ps, st->pid, "stat", STATUS_CAP) == 0 &&
        tg_pid_stat_parse((const char *)tg_buf_begin(&ps->file),
                          tg_buf_size(&ps->file), &pst) == 0) {
      c.has_runtime = true;
      c.utime_ticks = pst.utime;
      c.stime_ticks = pst.stime;
    }
  }
  if (ps->cfg.smaps_rollup &&
      read_pid_file(ps, st->pid, "smaps_rollup", STATUS_CAP) == 0 &&
      tg_smaps_rollup_parse((const char *)tg_buf_begin(&ps->file),
                            tg_buf_size(&ps->file), &c.smr) == 0)
    c.has_smaps_rollup = true;
  /* Kernel threads have no memory counters: nothing to say about them. */
  if (!c.present && !c.has_runtime) return 0;
  int rv = reserve((void **)&ps->counters, &ps->cap_counters,
                   ps->n_counters + 1, sizeof(*ps->counters));
  if (rv < 0) return rv;
  ps->counters[ps->n_counters++] = c;
  return 0;
}

static void point_entries(proc_stats_t *ps);

/* Reads every listed process; fills entries (new ones) and counters.
 * Leaves in ps->cur the pids that are now "seen". */
static void collect(proc_stats_t *ps, bool tree, bool stats) {
  size_t n_fresh = 0;
  if (reserve((void **)&ps->fresh, &ps->cap_fresh, ps->cur.n,
              sizeof(*ps->fresh)) == 0)
    n_fresh = tg_pids_new(ps->seen.v, ps->seen.n, ps->cur.v, ps->cur.n,
                          ps->fresh);
  else
    tree = false;
  size_t keep = 0, f = 0;
  for (size_t i = 0; i < ps->cur.n; i++) {
    int32_t pid = ps->cur.v[i];
    bool is_new = f < n_fresh && ps->fresh[f] == pid;
    if (is_new) f++;
    if (!(tree && is_new) && !stats) {
      if (!is_new) ps->cur.v[keep++] = pid;
      continue;
    }
    tg_pid_status_t st;
    int rv = read_pid_file(ps, pid, "status", STATUS_CAP);
    if (rv == 0)
      rv = tg_pid_status_parse((const char *)tg_buf_begin(&ps->file),
                               tg_buf_size(&ps->file), &st);
    if (rv < 0) {
      /* Gone, or a half-written status of a dying process. A new one is
       * not "seen" yet: it gets its entry when it reads well. */
      if (!tg_proc_vanished(rv))
        TG_DEBUG("linux.process_stats: pid %d: status: %s", (int)pid,
                 tg_strerror(rv));
      if (!is_new) ps->cur.v[keep++] = pid;
      continue;
    }
    if (tree && is_new) {
      if (add_entry(ps, &st) < 0) continue;
      if (add_threads(ps, pid) < 0)
        TG_DEBUG("linux.process_stats: pid %d: threads not listed", (int)pid);
    }
    if (!is_new || tree) ps->cur.v[keep++] = pid;
    if (stats) add_counters(ps, &st);
  }
  ps->cur.n = keep;
  point_entries(ps);
}

/* The arena is complete: points the entries into it. */
static void point_entries(proc_stats_t *ps) {
  const char *base = (const char *)tg_buf_begin(&ps->arena);
  for (size_t i = 0; i < ps->n_entries; i++) {
    ps->entries[i].cmdline = base + ps->offs[i].cmdline;
    ps->entries[i].name = base + ps->offs[i].name;
  }
  for (size_t i = 0; i < ps->n_threads; i++)
    ps->threads[i].name = ps->thread_name_offs[i] == SIZE_MAX
                              ? NULL
                              : base + ps->thread_name_offs[i];
}

/* The round's entries as one ProcessTree packet, if there are any. */
static void write_tree(proc_stats_t *ps, const tg_probes_sink_t *sink,
                       uint64_t ts, uint64_t end) {
  if (!ps->n_entries && !ps->n_threads) return;
  tg_pbw_t *w = sink->begin(sink->ctx);
  if (!w) return;
  tg_process_tree_t t = {.procs = ps->entries,
                         .n_procs = ps->n_entries,
                         .threads = ps->threads,
                         .n_threads = ps->n_threads};
  tg_probes_write_process_tree(w, ts, &t, end);
  sink->end(sink->ctx);
}

static int cmp_tid(const void *a, const void *b) {
  int32_t x = ((const tid_entry_t *)a)->tid, y = ((const tid_entry_t *)b)->tid;
  return (x > y) - (x < y);
}

static bool tseen_has(const tid_array_t *a, int32_t tid) {
  size_t lo = 0, hi = a->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->v[mid].tid < tid) lo = mid + 1;
    else if (a->v[mid].tid > tid) hi = mid;
    else return true;
  }
  return false;
}

/* False once |path| is gone as a process's entry goes (any other error
 * keeps it: the id may still be alive). */
static bool proc_path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 || !tg_proc_vanished(-errno);
}

/* Forgets the threads whose /proc/<tgid>/task/<tid> is gone. */
static void tseen_prune(tid_array_t *a) {
  size_t keep = 0;
  for (size_t i = 0; i < a->n; i++) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)a->v[i].tgid,
             (int)a->v[i].tid);
    if (proc_path_exists(path)) a->v[keep++] = a->v[i];
  }
  a->n = keep;
  a->prune_at = 2 * keep > PRUNE_MIN ? 2 * keep : PRUNE_MIN;
}

/* The threads this round or resolve just wrote (each tid once among
 * them) join |tseen|: sorted apart, then merged into it from the back, a
 * tid in both keeping the new tgid (the kernel gave the tid to another
 * process since), so a drain costs its own sort and one pass, not a sort
 * of everything seen. |tseen| is pruned once it doubled. */
static void note_threads(proc_stats_t *ps) {
  tid_array_t *a = &ps->tseen, *b = &ps->tnew;
  size_t m = ps->n_threads;
  if (!m ||
      reserve((void **)&a->v, &a->cap, a->n + m, sizeof(*a->v)) < 0 ||
      reserve((void **)&b->v, &b->cap, m, sizeof(*b->v)) < 0)
    return;
  for (size_t k = 0; k < m; k++)
    b->v[k] = (tid_entry_t){ps->threads[k].tid, ps->threads[k].tgid};
  qsort(b->v, m, sizeof(*b->v), cmp_tid);
  /* Invariant: w >= i + j, so a write never lands on an unread old
   * entry; a tid in both leaves a gap, closed below. */
  size_t i = a->n, j = m, w = a->n + m;
  while (j > 0) {
    if (i > 0 && a->v[i - 1].tid > b->v[j - 1].tid) {
      a->v[--w] = a->v[--i];
    } else {
      if (i > 0 && a->v[i - 1].tid == b->v[j - 1].tid) i--;
      a->v[--w] = b->v[--j];
    }
  }
  size_t merged = a->n + m - w;
  if (w > i) memmove(a->v + i, a->v + w, merged * sizeof(*a->v));
  a->n = i + merged;
  if (a->n >= (a->prune_at ? a->prune_at : PRUNE_MIN)) tseen_prune(a);
}

/* The processes in |seen| whose /proc entry is gone leave it. */
static void seen_prune(proc_stats_t *ps) {
  pid_array_t *a = &ps->seen;
  size_t keep = 0;
  for (size_t i = 0; i < a->n; i++) {
    char path[32];
    snprintf(path, sizeof(path), "/proc/%d", (int)a->v[i]);
    if (proc_path_exists(path)) a->v[keep++] = a->v[i];
  }
  a->n = keep;
  ps->seen_prune_at = 2 * keep > PRUNE_MIN ? 2 * keep : PRUNE_MIN;
}

/* The on-demand path's inserts grow |seen| between rounds (or without
 * any): pruned once it doubled. */
static void seen_maybe_prune(proc_stats_t *ps) {
  if (ps->seen.n >= (ps->seen_prune_at ? ps->seen_prune_at : PRUNE_MIN))
    seen_prune(ps);
}

void tg__process_stats_prune(void *state) {
  proc_stats_t *ps = state;
  seen_prune(ps);
  tseen_prune(&ps->tseen);
}

size_t tg__process_stats_known(const void *state, size_t *threads) {
  const proc_stats_t *ps = state;
  if (threads) *threads = ps->tseen.n;
  return ps->seen.n;
}

/* Reads and parses /proc/<pid>/status into |st|; false when it is gone
 * or does not parse (logged unless gone). */
static bool read_status(proc_stats_t *ps, int32_t pid, tg_pid_status_t *st) {
  int rv = read_pid_file(ps, pid, "status", STATUS_CAP);
  if (rv == 0)
    rv = tg_pid_status_parse((const char *)tg_buf_begin(&ps->file),
                             tg_buf_size(&ps->file), st);
  if (rv < 0 && !tg_proc_vanished(rv))
    TG_DEBUG("linux.process_stats: pid %d: status: %s", (int)pid,
             tg_strerror(rv));
  return rv == 0;
}

/* One pid of the feed: a Process for its tgid if not seen yet, and a
 * Thread if it is not the main thread. */
static void resolve_one(proc_stats_t *ps, int32_t pid) {
  if (pid <= 0 || sorted_has(&ps->seen, pid) || tseen_has(&ps->tseen, pid))
    return;
  tg_pid_status_t st;
  if (!read_status(ps, pid, &st)) return;
  /* A status without Tgid (kernels before 2.6.0) names a process. */
  int32_t tgid = (st.present & TG_PID_STATUS_TGID) && st.tgid > 0 ? st.tgid
                                                                  : pid;
  if (!sorted_has(&ps->seen, tgid)) {
    /* The process's own status: a thread's Name is the thread's. */
    tg_pid_status_t pst = st;
    if ((tgid == pid || read_status(ps, tgid, &pst)) &&
        add_entry(ps, &pst) == 0 && sorted_insert(&ps->seen, tgid) < 0)
      ps->n_entries--; /* unrecorded, so never written: tried again later */
  }
  if (pid == tgid) return;
  /* Joins |tseen| with the others of this drain (note_threads). */
  const char *name = ps->cfg.thread_names ? st.name : NULL;
  add_thread(ps, pid, tgid, name, name ? strlen(name) : 0);
}

size_t tg__process_stats_resolve(void *state, const tg_probes_sink_t *sink) {
  proc_stats_t *ps = state;
  if (!ps->consumer) return 0;
  if (!ps->demand &&
      !(ps->demand = malloc(TG_PID_FEED_CAP * sizeof(*ps->demand))))
    return 0;
  size_t n = tg_pid_feed_drain(ps->feed, ps->consumer, ps->demand,
                               TG_PID_FEED_CAP);
  if (!n) return 0;
  uint64_t meta = tg_meta_begin();
  uint64_t ts = tg__clock_boottime();
  ps->n_entries = ps->n_counters = ps->n_threads = 0;
  tg_buf_reset(&ps->arena);
  for (size_t i = 0; i < n; i++) resolve_one(ps, ps->demand[i]);
  point_entries(ps);
  write_tree(ps, sink, ts, tg__clock_boottime());
  note_threads(ps);
  seen_maybe_prune(ps);
  tg_meta_end(TG_META_PS_RESOLVE, meta);
  return ps->n_entries + ps->n_threads;
}

static void wake(void *state, tg_ds_t *ds, unsigned inst) {
  tg_probes_ds_target_t c = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&c);
  tg__process_stats_resolve(state, &sink);
}

/* The scan of /proc and the ProcessStats poll. */
static uint64_t scan_round(proc_stats_t *ps, const tg_probes_sink_t *sink,
                           uint64_t now) {
  const tg_process_stats_cfg_t *c = &ps->cfg;
  bool stats = c->poll_ms > 0;
  /* Without polling, only the dump at start. */
  bool tree = stats || (ps->first_round && c->scan_all_on_start);
  ps->first_round = false;
  if (!tree) return UINT64_MAX;

  uint64_t meta = tg_meta_begin();
  uint64_t ts = tg__clock_boottime();
  ps->n_entries = ps->n_counters = ps->n_threads = 0;
  tg_buf_reset(&ps->arena);
  int rv = tg_proc_list_pids("/proc", &ps->cur.v, &ps->cur.n, &ps->cur.cap);
  if (rv != ps->last_list_err && rv < 0)
    TG_WARN("linux.process_stats: listing /proc: %s", tg_strerror(rv));
  ps->last_list_err = rv;
  if (rv == 0) {
    collect(ps, tree, stats);
    uint64_t end = tg__clock_boottime();
    write_tree(ps, sink, ts, end);
    note_threads(ps);
    if (stats && ps->n_counters) {
      tg_pbw_t *w = sink->begin(sink->ctx);
      if (w) {
        tg_probes_write_process_stats(w, ts, ps->counters, ps->n_counters,
                                      end, ps->ns_per_tick);
        sink->end(sink->ctx);
      }
    }
    /* What this round saw becomes the reference for "new". */
    pid_array_t t = ps->seen;
    ps->seen = ps->cur;
    ps->cur = t;
  }
  tg_meta_end(TG_META_PS_SCAN, meta);
  if (!stats) return UINT64_MAX;
  uint64_t next = (ps->due_ms ? ps->due_ms : now) + c->poll_ms;
  ps->due_ms = next <= now ? now + c->poll_ms : next;
  return ps->due_ms;
}

static uint64_t tick(void *state, tg_ds_t *ds, unsigned inst, uint64_t now) {
  proc_stats_t *ps = state;
  tg_probes_ds_target_t c = {ds, inst};
  tg_probes_sink_t sink = tg_probes_ds_sink(&c);
  uint64_t next = scan_round(ps, &sink, now);
  /* Pids that came before the instance was enabled wait for this. */
  tg__process_stats_resolve(ps, &sink);
  return next;
}

const tg_probe_ops_t tg_process_stats_probe = {
    .name = "linux.process_stats",
    .parse_cfg = parse_cfg,
    .create = create,
    .tick = tick,
    .wake = wake,
    .destroy = destroy,
};
