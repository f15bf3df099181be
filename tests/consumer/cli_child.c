/* The tracegate CLI as a child process: see cli_child.h. */
#include "cli_child.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_proc.h"
#include "tracegate/pb_wire.h"
#include "pb/trace/test_event.pb-c.h"

#ifndef TRACEGATE_CLI_PATH
#error "TRACEGATE_CLI_PATH must name the tracegate binary"
#endif

/* --- the CLI as a child ------------------------------------------------------ */



/* Starts tracegate with |args| (NULL-terminated, without argv[0]). With
 * |err_tty| >= 0, stderr is that terminal instead of a pipe. */
static void spawn(child_t *c, const char *const *args, int err_tty,
                  int out_fd) {
  memset(c, 0, sizeof(*c));
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (out_fd < 0) assert_int_equal(pipe2(po, O_CLOEXEC), 0);
  if (err_tty < 0) assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
  c->pid = tg_test_spawn_cli(TRACEGATE_CLI_PATH, args,
                             out_fd >= 0 ? out_fd : po[1],
                             err_tty >= 0 ? err_tty : pe[1]);
  assert_true(c->pid > 0);
  if (out_fd < 0) close(po[1]);
  c->out_fd = po[0];
  if (err_tty < 0) {
    close(pe[1]);
    c->err_fd = pe[0];
  } else {
    c->err_fd = -1;
  }
}

void spawn_cli_tty(child_t *c, const char *const *args, int err_tty) {
  spawn(c, args, err_tty, -1);
}

void spawn_cli(child_t *c, const char *const *args) { spawn(c, args, -1, -1); }

void spawn_cli_out(child_t *c, const char *const *args, int out_fd) {
  spawn(c, args, -1, out_fd);
}

static void drain_fd(int *fd, char *buf, size_t cap, size_t *n) {
  ssize_t r = read(*fd, buf + *n, cap - 1 - *n);
  if (r > 0) {
    *n += (size_t)r;
    buf[*n] = 0;
    if (*n + 1 < cap) return;
  }
  if (r < 0 && errno == EINTR) return;
  close(*fd); /* EOF, EIO (a terminal without slave), or full */
  *fd = -1;
}

/* Collects the output until the child closed it, then reaps it. Returns
 * the exit code, or -1 (and kills it) after |timeout_ms|. |extra| >= 0 is
 * one more fd to collect into |extra_buf| (a terminal's master side). */
int wait_cli_ex(child_t *c, int timeout_ms, int extra, char *extra_buf,
                       size_t extra_cap) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  size_t n_extra = 0;
  if (extra_buf) extra_buf[0] = 0;
  bool killed = false;
  while (c->out_fd >= 0 || c->err_fd >= 0) {
    struct pollfd p[3];
    int np = 0, io = -1, ie = -1, ix = -1;
    if (c->out_fd >= 0) { io = np; p[np++] = (struct pollfd){c->out_fd, POLLIN, 0}; }
    if (c->err_fd >= 0) { ie = np; p[np++] = (struct pollfd){c->err_fd, POLLIN, 0}; }
    if (extra >= 0) { ix = np; p[np++] = (struct pollfd){extra, POLLIN, 0}; }
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0) {
      killed = true;
      break;
    }
    if (poll(p, (nfds_t)np, (int)left) < 0) continue;
    if (io >= 0 && p[io].revents) drain_fd(&c->out_fd, c->out, sizeof(c->out), &c->n_out);
    if (ie >= 0 && p[ie].revents) drain_fd(&c->err_fd, c->err, sizeof(c->err), &c->n_err);
    if (ix >= 0 && p[ix].revents) drain_fd(&extra, extra_buf, extra_cap, &n_extra);
  }
  if (c->out_fd >= 0) close(c->out_fd);
  if (c->err_fd >= 0) close(c->err_fd);
  c->out_fd = c->err_fd = -1;
  /* Output closed: the exit follows, bounded by what is left of the
   * deadline (at least a second, for a child that closed it just in time);
   * after a timeout it is killed at once. */
  int64_t left = deadline - tg_test_now_ms();
  c->status = tg_test_reap(c->pid, killed ? 0 : left > 1000 ? (int)left : 1000);
  if (c->status == -1) killed = true;
  if (killed) {
    print_message("tracegate timed out; stderr:\n%s\n", c->err);
    return -1;
  }
  /* Whatever the exit code, a sanitizer report is a failure. */
  if (strstr(c->err, "Sanitizer") || strstr(c->err, "runtime error"))
    print_message("tracegate stderr:\n%s\n", c->err);
  assert_null(strstr(c->err, "Sanitizer"));
  assert_null(strstr(c->err, "runtime error"));
  return WIFEXITED(c->status) ? WEXITSTATUS(c->status) : 128 + WTERMSIG(c->status);
}

int wait_cli(child_t *c) { return wait_cli_ex(c, WAIT_MS, -1, NULL, 0); }

int run_cli(child_t *c, const char *const *args) {
  spawn_cli(c, args);
  return wait_cli(c);
}

/* --- trace files ---------------------------------------------------------------- */



/* Decodes |path| as a sequence of Trace.packet fields; every byte must
 * belong to a whole TracePacket. */
void read_trace(const char *path, const char *str, trace_file_t *t) {
  size_t n = 0;
  uint8_t *buf = tg_test_read_file(path, &n);
  if (!buf) fail_msg("cannot read %s: %s", path, strerror(errno));
  decode_trace(buf, n, str, t);
  free(buf);
}

void decode_trace(const uint8_t *buf, size_t n, const char *str,
                  trace_file_t *t) {
  memset(t, 0, sizeof(*t));
  assert_true(n > 0);
  const uint8_t *p = buf, *end = buf + n;
  while (p < end) {
    Perfetto__Protos__TracePacket *pk = trace_file_next_packet(&p, end);
    assert_non_null(pk);
    t->packets++;
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING &&
        pk->for_testing->str) {
      size_t sl = strlen(pk->for_testing->str);
      if (sl > t->big_len) t->big_len = sl;
      if (!strcmp(pk->for_testing->str, str) && t->test_packets < 256)
        t->values[t->test_packets++] = pk->for_testing->seq_value;
    }
    if (pk->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_CONFIG) {
      t->has_config = true;
      t->config_duration_ms = pk->trace_config->duration_ms;
      t->config_write_into_file = pk->trace_config->write_into_file;
      for (size_t d = 0; d < pk->trace_config->n_data_sources; d++) {
        const Perfetto__Protos__DataSourceConfig *dc =
            pk->trace_config->data_sources[d]->config;
        if (dc && dc->sys_stats_config) {
          t->config_meminfo_ms = dc->sys_stats_config->meminfo_period_ms;
          t->config_stat_ms = dc->sys_stats_config->stat_period_ms;
        }
        if (dc && dc->process_stats_config)
          t->config_proc_poll_ms = dc->process_stats_config->proc_stats_poll_ms;
      }
    }
    perfetto__protos__trace_packet__free_unpacked(pk, NULL);
  }
}

bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* No temporary file left behind in |dir|. */
void assert_no_temp(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    bool hidden = e->d_name[0] == '.' && strcmp(e->d_name, ".") &&
                  strcmp(e->d_name, "..");
    if (hidden || strstr(e->d_name, ".tmp-") || strstr(e->d_name, ".partial"))
      fail_msg("left behind: %s/%s", dir, e->d_name);
  }
  closedir(d);
}

/* --- producer steps ---------------------------------------------------------------- */

void commit_packets(raw_producer_t *p, uint32_t chunk_id, const char *str,
                           uint32_t first, unsigned n) {
  assert_int_equal(raw_producer_write_packets(p, 0, 0, 1, chunk_id, str, first, n), 0);
  uint32_t page = 0, chunk = 0;
  assert_int_equal(raw_producer_commit(p, &page, &chunk, 1, 0), 0);
}

/* Answers the next flush (the CLI's stop, or the end of the duration). */
void ack_flush(raw_producer_t *p) {
  uint64_t id = raw_producer_wait_flush(p, p->last_flush_id, WAIT_MS);
  assert_true(id > 0);
  assert_int_equal(raw_producer_commit(p, NULL, NULL, 0, id), 0);
}

static char out_path[256];

const char *out_in(const test_service_t *ts, const char *name) {
  snprintf(out_path, sizeof(out_path), "%s/%s", ts->dir, name);
  return out_path;
}
