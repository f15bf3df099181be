/* The end-to-end harness of the probes' kernel tests (probes_e2e.h). */
#include "probes_e2e.h"

#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/probes/ftrace_tracefs.h"
#include "test_proc.h"

#ifndef PROBES_PATH
#error "PROBES_PATH must name the tracegate-probes binary"
#endif


static char tracefs_root[TG_TRACEFS_PATH_MAX];

/* --- environment --------------------------------------------------------- */

static bool have_ftrace(char *why, size_t n) {
  if (geteuid() != 0) {
    snprintf(why, n, "not root (euid %d): tracefs needs root", (int)geteuid());
    return false;
  }
  int rv = tg_tracefs_find(tracefs_root);
  if (rv < 0) {
    snprintf(why, n, "tracefs is not available: %s", strerror(-rv));
    return false;
  }
  return true;
}

void e2e_require_ftrace(void) {
  char why[160];
  if (have_ftrace(why, sizeof(why))) return;
  if (getenv("TG_REQUIRE_FTRACE"))
    fail_msg("TG_REQUIRE_FTRACE is set but %s", why);
  fprintf(stderr, "skipped: %s\n", why);
  skip();
}

const char *e2e_tracefs_root(void) { return tracefs_root; }

/* --- clocks and files ---------------------------------------------------- */

uint64_t e2e_boottime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void e2e_sleep_ms(unsigned ms) {
  struct timespec ts = {.tv_sec = ms / 1000,
                        .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void e2e_read_text(const char *path, char *out, size_t cap) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = 0;
  fclose(f);
}

/* --- tracegate-probes ---------------------------------------------------- */

pid_t e2e_spawn_probes(const test_service_t *ts, const char *err_path,
                       bool drop_root) {
  /* nobody runs a copy in ts->dir: the build tree may be root's alone. */
  static char path[sizeof(ts->dir) + 64];
  snprintf(path, sizeof(path), "%s", PROBES_PATH);
  if (drop_root && tg_test_copy_program(PROBES_PATH, ts->dir, path,
                                        sizeof(path)) != 0)
    return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) dup2(fd, STDERR_FILENO);
  if (drop_root && tg_test_become_nobody() != 0)
    _exit(126);
  execl(path, path, "--socket", ts->producer_sock, "--log-level", "info",
        (char *)NULL);
  _exit(127);
}

pid_t e2e_start_probes(const test_service_t *ts, char *err_path, size_t cap,
                       const char *name, bool drop_root, size_t data_sources) {
  snprintf(err_path, cap, "%s/%s", ts->dir, name);
  pid_t probes = e2e_spawn_probes(ts, err_path, drop_root);
  assert_true(probes > 0);
  raw_consumer_t q;
  assert_int_equal(raw_consumer_connect(&q, ts), 0);
  bool listed = e2e_wait_data_sources(&q, data_sources);
  raw_consumer_close(&q);
  assert_true(listed);
  return probes;
}

void e2e_stop_probes(pid_t pid, const char *err_path) {
  int status = tg_test_stop(pid, SIGTERM, E2E_WAIT_MS);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    static char err[65536];
    e2e_read_text(err_path, err, sizeof(err));
    fail_msg("tracegate-probes exit status %#x; stderr:\n%s", status, err);
  }
}

bool e2e_wait_data_sources(raw_consumer_t *c, size_t n) {
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end) {
    size_t p, d, s, r;
    if (raw_consumer_query_all(c, E2E_WAIT_MS, &p, &d, &s, &r) == 0 && d >= n)
      return true;
    e2e_sleep_ms(20);
  }
  return false;
}

/* Counts the instances of |pid|; the path of the last one seen goes into
 * |last| (|cap| bytes) unless NULL. */
static size_t scan_instances(pid_t pid, char *last, size_t cap) {
  char dir[TG_TRACEFS_PATH_MAX + 16], prefix[48];
  snprintf(dir, sizeof(dir), "%s/instances", tracefs_root);
  snprintf(prefix, sizeof(prefix), TG_TRACEFS_INSTANCE_PREFIX "%d-", (int)pid);
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, prefix, strlen(prefix)) != 0) continue;
    if (last) snprintf(last, cap, "%s/%s", dir, de->d_name);
    n++;
  }
  closedir(d);
  return n;
}

size_t e2e_instances_of(pid_t pid) { return scan_instances(pid, NULL, 0); }

void e2e_only_instance_of(pid_t pid, char *dir, size_t cap) {
  assert_int_equal(scan_instances(pid, dir, cap), 1);
}

bool e2e_wait_instances(pid_t pid, size_t n) {
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (tg_test_now_ms() < end) {
    if (e2e_instances_of(pid) == n) return true;
    e2e_sleep_ms(10);
  }
  return false;
}

/* --- recording ----------------------------------------------------------- */

void e2e_read_more(raw_consumer_t *c, e2e_packets_t *all) {
  size_t n = 0;
  Perfetto__Protos__TracePacket **pk = raw_consumer_read(c, &n);
  assert_non_null(pk);
  for (size_t i = 0; i < n; i++) {
    if (all->n == all->cap) {
      all->cap = all->cap ? all->cap * 2 : 1024;
      all->pk = realloc(all->pk, all->cap * sizeof(*all->pk));
      assert_non_null(all->pk);
    }
    all->pk[all->n++] = pk[i];
  }
  free(pk);
}

void e2e_packets_free(e2e_packets_t *all) {
  free_packets(all->pk, all->n);
  memset(all, 0, sizeof(*all));
}

void e2e_flush(raw_consumer_t *c) {
  Perfetto__Protos__FlushRequest fr = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  fr.has_timeout_ms = true;
  fr.timeout_ms = 5000;
  int64_t rid = raw_invoke(&c->conn, "Flush", &fr.base, -1, false);
  assert_true(rid > 0);
  raw_frame_t f;
  assert_int_equal(raw_wait(&c->conn, (uint64_t)rid, E2E_WAIT_MS, &f), 1);
  tg_ipc_frame_free(f.frame);
}

/* --- linux.ftrace sessions ----------------------------------------------- */

void e2e_session_config(e2e_session_t *s, char **events, size_t n,
                        bool compact) {
  memset(s, 0, sizeof(*s));
  simple_cfg_init(
      &s->sc, 32 * 1024,
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD,
      "linux.ftrace");
  perfetto__protos__ftrace_config__init(&s->fc);
  s->fc.n_ftrace_events = n;
  s->fc.ftrace_events = events;
  s->fc.has_buffer_size_kb = true;
  s->fc.buffer_size_kb = 2048;
  s->fc.has_drain_period_ms = true;
  s->fc.drain_period_ms = 50;
  perfetto__protos__ftrace_config__compact_sched_config__init(&s->cs);
  s->cs.has_enabled = true;
  s->cs.enabled = compact;
  s->fc.compact_sched = &s->cs;
  s->sc.dsc.ftrace_config = &s->fc;
}

void e2e_session_add_source(e2e_session_t *s,
                            Perfetto__Protos__DataSourceConfig *dsc) {
  perfetto__protos__trace_config__data_source__init(&s->ds2);
  s->ds2.config = dsc;
  s->dsp[0] = &s->sc.ds;
  s->dsp[1] = &s->ds2;
  s->sc.cfg.n_data_sources = 2;
  s->sc.cfg.data_sources = s->dsp;
}

void e2e_session_enable(e2e_session_t *s, const test_service_t *ts) {
  assert_int_equal(raw_consumer_connect(&s->c, ts), 0);
  assert_int_equal(raw_consumer_enable(&s->c, &s->sc.cfg, -1), 0);
}

void e2e_session_begin(e2e_session_t *s, const test_service_t *ts,
                       char **events, size_t n, bool compact) {
  e2e_session_config(s, events, n, compact);
  e2e_session_enable(s, ts);
}

void e2e_wait_started(e2e_session_t *s) {
  int64_t end = tg_test_now_ms() + E2E_WAIT_MS;
  while (!e2e_find_stats(&s->got, 1) && tg_test_now_ms() < end) {
    e2e_sleep_ms(20);
    e2e_read_more(&s->c, &s->got);
  }
  assert_non_null(e2e_find_stats(&s->got, 1));
}

void e2e_session_close(e2e_session_t *s) {
  e2e_packets_free(&s->got);
  raw_consumer_close(&s->c);
}

const Perfetto__Protos__FtraceEventBundle *e2e_bundle_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS
             ? p->ftrace_events
             : NULL;
}

static const Perfetto__Protos__FtraceStats *stats_of(
    const Perfetto__Protos__TracePacket *p) {
  return p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS
             ? p->ftrace_stats
             : NULL;
}

const Perfetto__Protos__FtraceStats *e2e_find_stats(const e2e_packets_t *p,
                                                    int phase) {
  for (size_t i = p->n; i-- > 0;) {
    const Perfetto__Protos__FtraceStats *s = stats_of(p->pk[i]);
    if (s && (int)s->phase == phase) return s;
  }
  return NULL;
}
