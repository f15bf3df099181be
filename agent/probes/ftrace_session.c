/* A session's tracefs instance and its reads; see ftrace_session.h. */
#include "agent/probes/ftrace_session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/probes/ftrace_encode.h"
#include "agent/probes/ftrace_format.h"
#include "agent/probes/ftrace_page.h"
#include "agent/probes/ftrace_printk.h"
#include "agent/probes/ftrace_tracefs.h"
#include "agent/sys/proc_pid.h"
#include "common/log.h"
#include "tracegate/error.h"

/* TracePacket fields. */
#define PACKET_TIMESTAMP 8
#define PACKET_FTRACE_EVENTS 1
#define PACKET_FTRACE_STATS 34
/* FtraceStats and FtraceCpuStats. */
#define STATS_PHASE 1
#define STATS_CPU_STATS 2
#define STATS_KERNEL_SYMBOLS_PARSED 3
#define STATS_KERNEL_SYMBOLS_MEM_KB 4
#define STATS_UNKNOWN_EVENTS 6
#define STATS_FAILED_EVENTS 7
#define CPU_CPU 1
#define CPU_ENTRIES 2
#define CPU_OVERRUN 3
#define CPU_COMMIT_OVERRUN 4
#define CPU_BYTES_READ 5
#define CPU_OLDEST_TS 6
#define CPU_NOW_TS 7
#define CPU_DROPPED 8
#define CPU_READ_EVENTS 9

/* Format files are a few KiB; header_page far less. */
#define FORMAT_MAX 16384
/* Pages read before they are encoded, one CPU at a time. Reading a batch
 * and then encoding it, rather than alternating per page, keeps the
 * encoder's code and tables in cache across pages instead of having each
 * read(2) evict them (the kernel's read path is larger than the page). */
#define BATCH_PAGES 16
/* A bundle takes no more pages once it has written this much: a packet
 * the buffer cannot keep whole (a DISCARD buffer filling up, a ring
 * wrapping over its start) loses no more, while compact_sched's bundles
 * still span tens of pages (about a quarter of a page each). */
#define BUNDLE_BYTES (64u * 1024u)
/* Pages' worth of pids the set holds; distinct pids are usually far fewer
 * than its worst case, so it rarely fills before the drain ends. */
#define PID_PAGES 2
/* The same for (inode, device) pairs, up to a bound for the largest
 * sub-buffers (past it a page dense with inode fields may drop some,
 * counted). */
#define INODE_PAGES 2
/* Pids remembered as handed over: a host's live tasks, mostly; past it the
 * set starts again. */
#define HANDED_PIDS 8192u
#define INODE_SET_MAX 65536u

#define LAST_PID_PATH "/proc/sys/kernel/ns_last_pid"

/* The last pid the kernel gave out in this pid namespace, read from |fd|
 * (LAST_PID_PATH, kept open: one pread a reading), or -1. */
static int64_t read_last_pid(int fd) {
  char b[24];
  ssize_t n;
  int64_t v;
  if (fd < 0) return -1;
  while ((n = pread(fd, b, sizeof(b), 0)) < 0 && errno == EINTR) {
  }
  return n > 0 && tg_ns_last_pid_parse(b, (size_t)n, &v) == 0 ? v : -1;
}

/* A CPU's per_cpu stats as read once; |ok| false: unreadable then. */
typedef struct cpu_snap {
  tg_ftrace_cpu_stats_t cs;
  bool ok;
} cpu_snap_t;

typedef struct name_list {
  char **v;
  size_t n;
} name_list_t;

struct tg_ftrace_session {
  char root[TG_TRACEFS_PATH_MAX];
  char dir[TG_TRACEFS_PATH_MAX];
  bool created;
  tg_ftrace_page_layout_t layout;
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
  /* The pids of the pages since the last hand-over to pids_cb: room for
   * PID_PAGES pages, handed over early when one more might not fit. */
  tg_pid_set_t pids;
  /* The pids handed over in the last TG_FTRACE_PIDS_AGAIN_DRAINS drains
   * (|handed_drains| counts them): left out until it is cleared. */
  tg_pid_set_t handed;
  unsigned handed_drains;
  /* The drain's pids not handed over lately, handed over at its end (one
   * wake of process_stats a drain): room for HANDED_PIDS. */
  int32_t *fresh;
  size_t n_fresh;
  bool handed_new; /* the last drain's fresh pids were taken, and the
                     * host had created tasks since (|last_pid|) */
  /* The pid namespace's last pid given out (LAST_PID_PATH, |last_pid_fd|)
   * as read by the last drain whose fresh pids were taken; -1:
   * unreadable. Fresh pids count as new processes only if it moved since:
   * a task seen for the first time (a kernel thread that rarely runs) is
   * not one. */
  int last_pid_fd;
  int64_t last_pid;
  tg_ftrace_pids_cb pids_cb;
  void *pids_ctx;
  /* The same for inodes; allocated at the first drain that wants them. */
  tg_inode_set_t inodes;
  tg_ftrace_inodes_want_cb inodes_want;
  tg_ftrace_inodes_cb inodes_cb;
  void *inodes_ctx;
  const tg_ksyms_t *ksyms; /* borrowed; NULL: addresses are not named */
  /* The strings of char pointer fields, read at start when an event of the
   * table writes one (empty otherwise, or when unreadable). */
  tg_printk_formats_t printk;
  bool no_generic;
  bool pollable;       /* buffer_percent set: the CPUs may be polled */
  bool throttle_rss;   /* the config's throttle_rss_stat */
  bool copies_markers; /* copy_trace_marker set: the top level's writes */
  bool holds_top;      /* counted in g_top.holders */
  bool rss_throttled;  /* the trigger is set: remove it at stop */
  unsigned n_cpus;
  int *fds; /* per CPU; -1: not readable */
  /* per CPU: the last written record's timestamp of its last bundle
   * (previous_bundle_end_timestamp of its next), 0: none yet */
  uint64_t *bundle_end;
  /* per CPU: the counters as tracing began, written in every START stats
   * so that each (START, END) pair spans the whole session */
  cpu_snap_t *start_stats;
  uint8_t *page; /* BATCH_PAGES pages */
  size_t page_len[BATCH_PAGES];
  char *text; /* FORMAT_MAX scratch for format files */
  name_list_t unknown, failed;
  tg_ftrace_session_stats_t st;
};

static int list_add(name_list_t *l, const char *s) {
  char **v = realloc(l->v, (l->n + 1) * sizeof(*v));
  if (!v) return -ENOMEM;
  l->v = v;
  if (!(v[l->n] = strdup(s))) return -ENOMEM;
  l->n++;
  return 0;
}

static void list_free(name_list_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  memset(l, 0, sizeof(*l));
}

static uint64_t boottime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int tg__ftrace_rss_throttle_on(const char *dir) {
  char id[32];
  long n = tg_tracefs_read(dir, "events/synthetic/rss_stat_throttled/id", id,
                           sizeof(id));
  if (n < 0) return (int)n;
  return tg_tracefs_write(dir, "events/kmem/rss_stat/trigger",
                          TG_FTRACE_RSS_TRIGGER);
}

int tg__ftrace_rss_throttle_off(const char *dir) {
  return tg_tracefs_write(dir, "events/kmem/rss_stat/trigger",
                          "!" TG_FTRACE_RSS_TRIGGER);
}

static int enable_event(void *ctx, const char *group, const char *name);

/* Applications write their markers to the top level's trace_marker, and
 * while the top level's tracing_on is 0 the kernel fails those writes
 * (EBADF) although it copies them into the instances that ask. So a
 * session that records them (copy_trace_marker) holds the top level's
 * tracing_on at 1, as Perfetto's probes do for every session (and as its
 * integration tests wait for). The last such session of this process puts
 * it back to 0 only if this process turned it on: the top level's state
 * is read once, at the first hold, and never relied on for recording. */
static struct {
  pthread_mutex_t mu;
  unsigned holders;
  bool turned_on;
} g_top = {PTHREAD_MUTEX_INITIALIZER, 0, false};

static void top_level_hold(tg_ftrace_session_t *s) {
  pthread_mutex_lock(&g_top.mu);
  if (g_top.holders++ == 0) {
    char v[8];
    long n = tg_tracefs_read(s->root, "tracing_on", v, sizeof(v));
    int rv = n < 0 ? (int)n : 0;
    if (rv == 0 && n > 0 && v[0] == '0') {
      rv = tg_tracefs_write(s->root, "tracing_on", "1");
      g_top.turned_on = rv == 0;
      if (rv == 0)
        TG_INFO("linux.ftrace: %s/tracing_on was 0: set to 1 while sessions "
                "record applications' trace_marker writes", s->root);
    }
    if (rv < 0)
      TG_WARN("linux.ftrace: cannot hold %s/tracing_on at 1 (%s): while it "
              "is 0, applications' trace_marker writes fail (they are still "
              "recorded)", s->root, tg_strerror(rv));
  }
  s->holds_top = true;
  pthread_mutex_unlock(&g_top.mu);
}

static void top_level_release(tg_ftrace_session_t *s) {
  if (!s->holds_top) return;
  s->holds_top = false;
  pthread_mutex_lock(&g_top.mu);
  if (--g_top.holders == 0 && g_top.turned_on) {
    g_top.turned_on = false;
    int rv = tg_tracefs_write(s->root, "tracing_on", "0");
    if (rv < 0)
      TG_WARN("linux.ftrace: cannot put %s/tracing_on back to 0: %s", s->root,
              tg_strerror(rv));
  }
  pthread_mutex_unlock(&g_top.mu);
}

/* kmem/rss_stat under throttle_rss_stat: its throttled synthetic event
 * where the kernel has one (tg__ftrace_rss_throttle_on). Returns 1 when
 * that was enabled instead, else 0 or -ENOMEM. */
static int enable_throttled_rss(tg_ftrace_session_t *s) {
  int rv = tg__ftrace_rss_throttle_on(s->dir);
  if (rv < 0) {
    TG_INFO("linux.ftrace: throttle_rss_stat: no rss_stat_throttled "
            "synthetic event here (%s): kmem/rss_stat is recorded "
            "unthrottled, as Perfetto's probes record it then",
            tg_strerror(rv));
    return 0;
  }
  s->rss_throttled = true;
  rv = enable_event(s, "synthetic", "rss_stat_throttled");
  return rv < 0 ? rv : 1;
}

/* Adds one event to the table and switches it on in the instance. */
static int enable_event(void *ctx, const char *group, const char *name) {
  tg_ftrace_session_t *s = ctx;
  if (s->throttle_rss && strcmp(group, "kmem") == 0 &&
      strcmp(name, "rss_stat") == 0) {
    if (s->rss_throttled) return 0; /* listed twice */
    int rv = enable_throttled_rss(s);
    if (rv != 0) return rv < 0 ? rv : 0;
  }
  char rel[TG_TRACEFS_PATH_MAX];
  snprintf(rel, sizeof(rel), "events/%s/%s/format", group, name);
  long n = tg_tracefs_read(s->root, rel, s->text, FORMAT_MAX);
  tg_ftrace_format_t fmt;
  if (n < 0 || tg_ftrace_format_parse(s->text, (size_t)n, &fmt) < 0) {
    TG_WARN("linux.ftrace: %s/%s: unreadable format file", group, name);
    snprintf(rel, sizeof(rel), "%s/%s", group, name);
    return list_add(&s->failed, rel);
  }
  int rv = tg_ftrace_table_add(&s->table, group, &fmt, s->no_generic);
  if (rv == -EEXIST) return 0; /* listed twice in the config */
  if (rv < 0) return rv;
  /* disable_generic_events: an event without a message of its own is
   * neither recorded nor enabled. */
  if (!s->table.by_id[fmt.id]) return 0;
  /* ftrace/print has no switch: an instance records what is written to
   * its trace_marker, and with copy_trace_marker also what is written to
   * the top-level one, where applications write. */
  if (strcmp(group, "ftrace") == 0) {
    if (strcmp(name, "print") != 0) return 0;
    rv = tg_tracefs_write(s->dir, "options/copy_trace_marker", "1");
    s->copies_markers = rv == 0;
    if (rv < 0)
      TG_WARN("linux.ftrace: this kernel does not copy trace_marker writes to "
              "instances (%s): ftrace/print sees only the instance's own "
              "trace_marker", tg_strerror(rv));
    return 0;
  }
  snprintf(rel, sizeof(rel), "events/%s/%s/enable", group, name);
  if ((rv = tg_tracefs_write(s->dir, rel, "1")) < 0) {
    TG_WARN("linux.ftrace: cannot enable %s/%s: %s", group, name,
            tg_strerror(rv));
    snprintf(rel, sizeof(rel), "%s/%s", group, name);
    return list_add(&s->failed, rel);
  }
  return 0;
}

static int setup_events(tg_ftrace_session_t *s, const tg_ftrace_cfg_t *cfg) {
  for (size_t i = 0; i < cfg->n_events; i++) {
    int rv = tg_tracefs_resolve_events(s->root, cfg->events[i], enable_event, s);
    if (rv < 0) return rv;
    if (rv == 0) {
      TG_WARN("linux.ftrace: no such event \"%s\"", cfg->events[i]);
      if ((rv = list_add(&s->unknown, cfg->events[i])) < 0) return rv;
    }
  }
  return 0;
}

/* Reads printk_formats for the events that write char pointers as their
 * strings. Without it they are written empty, as Perfetto's probes write
 * them then: logged here, once for the session. */
static void load_printk(tg_ftrace_session_t *s) {
  if (!tg_ftrace_table_wants_strings(&s->table)) return;
  int n = tg_printk_formats_load(&s->printk, s->root);
  if (n < 0)
    TG_WARN("linux.ftrace: cannot read %s/" TG_PRINTK_FILE " (%s): string "
            "pointer fields (e.g. suspend_resume's action) are written empty",
            s->root, tg_strerror(n));
  else if (n == 0)
    TG_WARN("linux.ftrace: %s/" TG_PRINTK_FILE " lists no strings (%llu "
            "addresses read as 0, %llu bad lines): string pointer fields "
            "(e.g. suspend_resume's action) are written empty", s->root,
            (unsigned long long)s->printk.zero_addrs,
            (unsigned long long)s->printk.bad_lines);
  else
    TG_DEBUG("linux.ftrace: %d kernel strings from " TG_PRINTK_FILE
             " (%zu KiB, %llu bad lines)", n,
             tg_printk_formats_mem(&s->printk) / 1024,
             (unsigned long long)s->printk.bad_lines);
  s->enc.printk = &s->printk;
}

/* CPU |c|'s per_cpu stats into |out|; false when unreadable. */
static bool read_cpu_stats(tg_ftrace_session_t *s, unsigned c,
                           tg_ftrace_cpu_stats_t *out) {
  char rel[64];
  snprintf(rel, sizeof(rel), "per_cpu/cpu%u/stats", c);
  long n = tg_tracefs_read(s->dir, rel, s->text, FORMAT_MAX);
  if (n < 0) return false;
  tg_ftrace_cpu_stats_parse(s->text, (size_t)n, out);
  return true;
}

static int open_cpus(tg_ftrace_session_t *s) {
  long n = sysconf(_SC_NPROCESSORS_CONF);
  s->n_cpus = n > 0 && n < 4096 ? (unsigned)n : 1;
  s->bundle_end = calloc(s->n_cpus, sizeof(*s->bundle_end));
  if (!s->bundle_end) return -ENOMEM;
  s->start_stats = calloc(s->n_cpus, sizeof(*s->start_stats));
  if (!s->start_stats) return -ENOMEM;
  s->fds = malloc(s->n_cpus * sizeof(*s->fds));
  if (!s->fds) return -ENOMEM;
  unsigned opened = 0;
  for (unsigned c = 0; c < s->n_cpus; c++) {
    char p[TG_TRACEFS_PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/per_cpu/cpu%u/trace_pipe_raw", s->dir, c);
    s->fds[c] = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (s->fds[c] >= 0) opened++;
  }
  return opened ? 0 : -ENOENT;
}

int tg_ftrace_session_start(const tg_ftrace_cfg_t *cfg,
                            tg_ftrace_session_t **out) {
  *out = NULL;
  tg_ftrace_session_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->last_pid_fd = -1;
  s->no_generic = cfg->disable_generic_events;
  s->throttle_rss = cfg->throttle_rss_stat;
  int rv;
  if ((rv = tg_tracefs_find(s->root)) < 0) goto fail;
  int stale = tg_tracefs_remove_stale(s->root);
  if (stale > 0)
    TG_INFO("linux.ftrace: removed %d tracefs instance(s) left by dead runs",
            stale);
  if (!(s->text = malloc(FORMAT_MAX))) {
    rv = -ENOMEM;
    goto fail;
  }
  long n = tg_tracefs_read(s->root, "events/header_page", s->text, FORMAT_MAX);
  if (n < 0) {
    rv = (int)n;
    goto fail;
  }
  if ((rv = tg_ftrace_header_page_parse(s->text, (size_t)n, &s->layout)) < 0)
    goto fail;
  if ((rv = tg_ftrace_table_init(&s->table)) < 0) goto fail;
  if ((rv = tg_ftrace_encoder_init(&s->enc, &s->table, cfg->compact_sched,
                                   s->layout.page_size)) < 0)
    goto fail;
  uint32_t pid_cap = PID_PAGES * tg_ftrace_pids_per_page(s->layout.page_size);
  if ((rv = tg_pid_set_init(&s->pids, pid_cap)) < 0 ||
      (rv = tg_pid_set_init(&s->handed, HANDED_PIDS)) < 0)
    goto fail;
  if (!(s->fresh = malloc(HANDED_PIDS * sizeof(*s->fresh)))) {
    rv = -ENOMEM;
    goto fail;
  }
  s->last_pid_fd = open(LAST_PID_PATH, O_RDONLY | O_CLOEXEC);
  s->last_pid = read_last_pid(s->last_pid_fd);
  if (s->last_pid < 0)
    TG_INFO("linux.ftrace: " LAST_PID_PATH " unreadable: every drain that "
            "hands linux.process_stats pids not handed lately counts as new "
            "processes");
  if (!(s->page = malloc((size_t)s->layout.page_size * BATCH_PAGES))) {
    rv = -ENOMEM;
    goto fail;
  }
  if ((rv = tg_tracefs_instance_create(s->root, s->dir)) < 0) goto fail;
  s->created = true;
  /* The instance starts with tracing on; keep it off until set up. */
  char kb[16];
  snprintf(kb, sizeof(kb), "%u", cfg->buffer_size_kb);
  if ((rv = tg_tracefs_write(s->dir, "tracing_on", "0")) < 0 ||
      (rv = tg_tracefs_write(s->dir, "buffer_size_kb", kb)) < 0)
    goto fail;
  /* Packets are CLOCK_BOOTTIME; the events must be too. */
  /* A reader polling the CPUs is woken when a buffer is this full. */
  char pct[8];
  snprintf(pct, sizeof(pct), "%d", TG_FTRACE_WAKE_PERCENT);
  if ((rv = tg_tracefs_write(s->dir, "buffer_percent", pct)) < 0)
    TG_WARN("linux.ftrace: cannot set buffer_percent (%s): bursts are read "
            "at the drain period only", tg_strerror(rv));
  /* Without it a descriptor polls readable at every event: not polled. */
  s->pollable = rv == 0;
  if ((rv = tg_tracefs_write(s->dir, "trace_clock", "boot")) < 0) {
    TG_ERROR("linux.ftrace: the kernel has no boot trace_clock: %s",
             tg_strerror(rv));
    goto fail;
  }
  if ((rv = setup_events(s, cfg)) < 0) goto fail;
  load_printk(s);
  if ((rv = open_cpus(s)) < 0) goto fail;
  for (unsigned c = 0; c < s->n_cpus; c++)
    s->start_stats[c].ok = read_cpu_stats(s, c, &s->start_stats[c].cs);
  if ((rv = tg_tracefs_write(s->dir, "tracing_on", "1")) < 0) goto fail;
  if (s->copies_markers) top_level_hold(s);
  *out = s;
  return 0;
fail:
  tg_ftrace_session_stop(s);
  return rv;
}

void tg_ftrace_session_stop(tg_ftrace_session_t *s) {
  if (!s) return;
  top_level_release(s);
  for (unsigned c = 0; s->fds && c < s->n_cpus; c++)
    if (s->fds[c] >= 0) close(s->fds[c]);
  free(s->fds);
  free(s->bundle_end);
  free(s->start_stats);
  if (s->rss_throttled && tg__ftrace_rss_throttle_off(s->dir) < 0)
    TG_WARN("linux.ftrace: cannot remove the rss_stat_throttled trigger of "
            "%s", s->dir);
  if (s->created) {
    int rv = tg_tracefs_instance_remove(s->dir);
    if (rv < 0)
      TG_WARN("linux.ftrace: cannot remove %s: %s", s->dir, tg_strerror(rv));
  }
  tg_ftrace_encoder_free(&s->enc);
  tg_printk_formats_free(&s->printk);
  tg_pid_set_free(&s->pids);
  tg_pid_set_free(&s->handed);
  if (s->last_pid_fd >= 0) close(s->last_pid_fd);
  free(s->fresh);
  tg_inode_set_free(&s->inodes);
  tg_ftrace_table_free(&s->table);
  list_free(&s->unknown);
  list_free(&s->failed);
  free(s->page);
  free(s->text);
  free(s);
}

void tg_ftrace_session_on_pids(tg_ftrace_session_t *s, tg_ftrace_pids_cb cb,
                               void *ctx) {
  s->pids_cb = cb;
  s->pids_ctx = ctx;
}

void tg_ftrace_session_on_inodes(tg_ftrace_session_t *s,
                                 tg_ftrace_inodes_want_cb want,
                                 tg_ftrace_inodes_cb cb, void *ctx) {
  s->inodes_want = want;
  s->inodes_cb = cb;
  s->inodes_ctx = ctx;
}

void tg_ftrace_session_set_ksyms(tg_ftrace_session_t *s, const tg_ksyms_t *ks) {
  s->ksyms = ks;
}

/* Whether the host created tasks since the last reading (or that cannot
 * be told); remembers this one. */
static bool tasks_created(tg_ftrace_session_t *s) {
  int64_t now = read_last_pid(s->last_pid_fd);
  bool created = now < 0 || s->last_pid < 0 || now != s->last_pid;
  s->last_pid = now;
  return created;
}

/* Hands the drain's fresh pids over. */
static void hand_over_fresh(tg_ftrace_session_t *s) {
  /* Nobody took them (no process_stats yet): hand them over again. */
  if (s->n_fresh) {
    /* A drain may hand over twice (its pids outgrew the set midway):
     * either hand-over's new processes count for the drain. */
    if (s->pids_cb(s->pids_ctx, s->fresh, s->n_fresh)) {
      if (tasks_created(s)) s->handed_new = true;
    } else {
      tg_pid_set_clear(&s->handed);
    }
  }
  s->n_fresh = 0;
}

/* Moves the collected pids that were not handed over lately to the
 * drain's fresh ones, and empties the set. Fresh pids are members of
 * |handed| added since the last hand-over, so they fit in HANDED_PIDS
 * while |handed| is not cleared under them. */
static void collect_fresh(tg_ftrace_session_t *s) {
  size_t n = s->pids.base.n;
  if (n) {
    if (tg_pid_set_room(&s->handed) < n) {
      hand_over_fresh(s);
      tg_pid_set_clear(&s->handed);
    }
    s->n_fresh += tg_pid_set_add_new(&s->handed, s->pids.pids, n,
                                     s->fresh + s->n_fresh);
  }
  s->st.pids_dropped += s->pids.base.dropped;
  tg_pid_set_clear(&s->pids);
}

static void hand_over_inodes(tg_ftrace_session_t *s) {
  if (s->inodes.base.n)
    s->inodes_cb(s->inodes_ctx, s->inodes.keys, s->inodes.base.n);
  s->st.inodes_dropped += s->inodes.base.dropped;
  tg_inode_set_clear(&s->inodes);
}

/* The inode set for this drain, or NULL: none wanted (or no memory). */
static tg_inode_set_t *inodes_for_drain(tg_ftrace_session_t *s,
                                        int32_t *skip_pid) {
  *skip_pid = 0;
  if (!s->inodes_want || !s->inodes_want(s->inodes_ctx, skip_pid))
    return NULL;
  if (!s->inodes.base.slots) {
    uint32_t cap = INODE_PAGES * tg_ftrace_inodes_per_page(s->layout.page_size);
    int rv = tg_inode_set_init(&s->inodes,
                               cap < INODE_SET_MAX ? cap : INODE_SET_MAX);
    if (rv < 0) {
      TG_WARN("linux.ftrace: no memory to collect inodes: %s",
              tg_strerror(rv));
      s->inodes_want = NULL;
      return NULL;
    }
  }
  return &s->inodes;
}

/* Moves the pids collected so far to the drain's fresh ones, and hands
 * the inodes over, when the sets might not hold one more page's. */
static void make_room(tg_ftrace_session_t *s) {
  if (s->enc.pids &&
      tg_pid_set_room(&s->pids) < tg_ftrace_pids_per_page(s->layout.page_size))
    collect_fresh(s);
  if (s->enc.inodes && s->inodes.base.n &&
      tg_inode_set_room(&s->inodes) <
          tg_ftrace_inodes_per_page(s->layout.page_size))
    hand_over_inodes(s);
}

/* The bundle being written: its packet's writer (NULL: none open) and
 * whether its first page followed lost events. */
typedef struct open_bundle {
  tg_pbw_t *w;
  bool lost;
  uint64_t start;   /* tg_pbw_written() when it began */
  uint64_t last_ts; /* of its last record written, 0: none yet */
} open_bundle_t;

/* Ends CPU |cpu|'s open bundle's packet, with the names of its kernel
 * addresses: its events' indices resolve in it or earlier. Its last
 * record is where the CPU's next bundle says the previous one ended. */
static void end_bundle(tg_ftrace_session_t *s, const tg_probes_sink_t *sink,
                       unsigned cpu, open_bundle_t *b) {
  tg_ftrace_bundle_end(&s->enc, b->w, b->lost);
  tg_pbw_end_nested(b->w);
  if (s->ksyms)
    s->st.ksyms_written +=
        tg_ftrace_kaddrs_write_interned(&s->enc.kaddrs, s->ksyms, b->w);
  sink->end(sink->ctx);
  b->w = NULL;
  if (b->last_ts) s->bundle_end[cpu] = b->last_ts;
}

/* Writes |n| pages of CPU |cpu| (s->page) into |b|'s bundle, and into as
 * few more TracePackets { ftrace_events } as the bundle's bounds allow: a
 * new one begins past BUNDLE_BYTES, when the rows of one more page might
 * not fit, and at a page after lost events (the bundle's
 * lost_events flag says so of its first page). |b|'s bundle stays open
 * for the CPU's next pages. */
static void write_pages(tg_ftrace_session_t *s, const tg_probes_sink_t *sink,
                        unsigned cpu, size_t n, open_bundle_t *b) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t *page = s->page + i * s->layout.page_size;
    size_t len = s->page_len[i];
    bool page_lost = tg_ftrace_page_lost_events(&s->layout, page, len);
    if (b->w && (page_lost || tg_pbw_written(b->w) - b->start >= BUNDLE_BYTES ||
                 !tg_ftrace_bundle_has_room(&s->enc))) {
      end_bundle(s, sink, cpu, b);
    }
    make_room(s);
    if (!b->w) {
      if (!(b->w = sink->begin(sink->ctx))) return;
      tg_pbw_begin_nested(b->w, PACKET_FTRACE_EVENTS);
      tg_ftrace_bundle_begin_after(&s->enc, b->w, cpu, s->bundle_end[cpu]);
      b->lost = page_lost;
      b->start = tg_pbw_written(b->w);
      b->last_ts = 0;
    }
    tg_ftrace_bundle_result_t res;
    tg_ftrace_bundle_add_page(&s->enc, b->w, &s->layout, page, len, &res);
    s->st.events += res.events;
    s->st.skipped += res.skipped;
    s->st.lost_pages += res.lost_events;
    s->st.corrupt_pages += res.corrupt;
    if (res.last_ts) b->last_ts = res.last_ts;
  }
}

/* Reads the next page of CPU |c| into |buf|. Returns its length, 0 when
 * the CPU has none ready, -1 after an error (the CPU is then closed). */
static ssize_t read_page(tg_ftrace_session_t *s, unsigned c, uint8_t *buf) {
  for (;;) {
    ssize_t r = read(s->fds[c], buf, s->layout.page_size);
    if (r > 0) {
      s->st.pages++;
      s->st.bytes += (uint64_t)r;
      return r;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno != EAGAIN) {
      s->st.read_errors++;
      TG_WARN("linux.ftrace: cpu %u: %s; not read any more", c,
              strerror(errno));
      close(s->fds[c]);
      s->fds[c] = -1;
      return -1;
    }
    return 0;
  }
}

/* A page that is less than half full was the writer's current one: the
 * CPU is drained. Reading on would chase the events our own reads cause
 * (e.g. raw_syscalls) one tiny page at a time. */
static bool last_page(const tg_ftrace_session_t *s, const uint8_t *page,
                      size_t len) {
  tg_ftrace_page_iter_t it;
  tg_ftrace_page_header_t hdr;
  return tg_ftrace_page_begin(&s->layout, page, len, &it, &hdr) < 0 ||
         hdr.data_len < (s->layout.page_size - s->layout.data_offset) / 2;
}

size_t tg_ftrace_session_drain(tg_ftrace_session_t *s,
                               const tg_probes_sink_t *sink, size_t max_pages,
                               bool *more) {
  size_t total = 0;
  *more = false;
  s->handed_new = false;
  s->enc.pids = sink && s->pids_cb ? &s->pids : NULL;
  s->enc.inodes = sink ? inodes_for_drain(s, &s->enc.inode_skip_pid) : NULL;
  for (unsigned c = 0; c < s->n_cpus; c++) {
    size_t k = 0;
    bool drained = false;
    open_bundle_t b = {NULL, false, 0, 0};
    while (!drained && k < max_pages && s->fds[c] >= 0) {
      /* Without a sink the pages are dropped: one buffer does. */
      size_t cap = sink ? BATCH_PAGES : 1, n = 0;
      if (cap > max_pages - k) cap = max_pages - k;
      while (n < cap) {
        uint8_t *buf = s->page + (sink ? n * s->layout.page_size : 0);
        ssize_t r = read_page(s, c, buf);
        if (r <= 0) {
          drained = true;
          break;
        }
        s->page_len[n++] = (size_t)r;
        if (last_page(s, buf, (size_t)r)) {
          drained = true;
          break;
        }
      }
      if (sink && n) write_pages(s, sink, c, n, &b);
      k += n;
    }
    if (b.w) end_bundle(s, sink, c, &b);
    if (k >= max_pages) *more = true;
    total += k;
  }
  if (s->enc.pids) {
    collect_fresh(s);
    hand_over_fresh(s);
    if (++s->handed_drains >= TG_FTRACE_PIDS_AGAIN_DRAINS) {
      s->handed_drains = 0;
      tg_pid_set_clear(&s->handed);
    }
  }
  s->enc.pids = NULL;
  if (s->enc.inodes) hand_over_inodes(s);
  s->enc.inodes = NULL;
  /* As Perfetto's probes after each read tick: the indices start again,
   * so their names are written again (after SEQ_INCREMENTAL_STATE_CLEARED)
   * and a reader that lost older packets loses only this drain's. */
  s->st.kaddrs_dropped += s->enc.kaddrs.dropped;
  tg_ftrace_kaddrs_reset(&s->enc.kaddrs);
  return total;
}

static void write_cpu_stats(tg_pbw_t *w, unsigned c,
                            const tg_ftrace_cpu_stats_t *cs) {
  tg_pbw_begin_nested(w, STATS_CPU_STATS);
  tg_pbw_append_varint(w, CPU_CPU, c);
  tg_pbw_append_varint(w, CPU_ENTRIES, cs->entries);
  tg_pbw_append_varint(w, CPU_OVERRUN, cs->overrun);
  tg_pbw_append_varint(w, CPU_COMMIT_OVERRUN, cs->commit_overrun);
  tg_pbw_append_varint(w, CPU_BYTES_READ, cs->bytes);
  tg_pbw_append_double(w, CPU_OLDEST_TS, cs->oldest_event_ts);
  tg_pbw_append_double(w, CPU_NOW_TS, cs->now_ts);
  tg_pbw_append_varint(w, CPU_DROPPED, cs->dropped_events);
  tg_pbw_append_varint(w, CPU_READ_EVENTS, cs->read_events);
  tg_pbw_end_nested(w);
}

void tg_ftrace_session_write_stats(tg_ftrace_session_t *s,
                                   const tg_probes_sink_t *sink, int phase) {
  tg_pbw_t *w = sink->begin(sink->ctx);
  if (!w) return;
  tg_pbw_append_varint(w, PACKET_TIMESTAMP, boottime_ns());
  tg_pbw_begin_nested(w, PACKET_FTRACE_STATS);
  tg_pbw_append_varint(w, STATS_PHASE, (uint64_t)phase);
  for (unsigned c = 0; c < s->n_cpus; c++) {
    tg_ftrace_cpu_stats_t now;
    if (phase == TG_FTRACE_STATS_START) {
      if (s->start_stats[c].ok) write_cpu_stats(w, c, &s->start_stats[c].cs);
    } else if (read_cpu_stats(s, c, &now)) {
      write_cpu_stats(w, c, &now);
    }
  }
  /* As traced_probes does: what symbolize_ksyms had to name addresses
   * with (none parsed tells a reader why the names are missing). */
  if (s->ksyms) {
    tg_pbw_append_varint(w, STATS_KERNEL_SYMBOLS_PARSED, s->ksyms->syms.n);
    tg_pbw_append_varint(w, STATS_KERNEL_SYMBOLS_MEM_KB,
                         tg_ksyms_mem(s->ksyms) / 1024);
  }
  if (phase == TG_FTRACE_STATS_START) {
    for (size_t i = 0; i < s->unknown.n; i++)
      tg_pbw_append_string(w, STATS_UNKNOWN_EVENTS, s->unknown.v[i]);
    for (size_t i = 0; i < s->failed.n; i++)
      tg_pbw_append_string(w, STATS_FAILED_EVENTS, s->failed.v[i]);
  }
  tg_pbw_end_nested(w);
  sink->end(sink->ctx);
}

size_t tg_ftrace_session_fds(const tg_ftrace_session_t *s, int *out,
                             size_t cap) {
  size_t n = 0;
  for (unsigned c = 0; s->pollable && c < s->n_cpus && n < cap; c++)
    if (s->fds[c] >= 0) out[n++] = s->fds[c];
  return n;
}

bool tg_ftrace_session_pollable(const tg_ftrace_session_t *s) {
  return s->pollable;
}

uint32_t tg_ftrace_drain_wait_ms(uint32_t period_ms, bool period_asked,
                                 bool pollable, uint64_t ms_since_new_pids) {
  bool churn = ms_since_new_pids < TG_FTRACE_NEW_PIDS_HOLD_MS;
  return period_asked || !pollable || churn ? period_ms
                                            : TG_FTRACE_QUIET_WAIT_MS;
}

bool tg_ftrace_session_handed_new_pids(const tg_ftrace_session_t *s) {
  return s->handed_new;
}

const tg_ftrace_session_stats_t *tg_ftrace_session_stats(
    const tg_ftrace_session_t *s) {
  return &s->st;
}

const char *tg_ftrace_session_dir(const tg_ftrace_session_t *s) {
  return s->dir;
}

size_t tg_ftrace_session_n_events(const tg_ftrace_session_t *s) {
  return s->table.n;
}
