/* Fixtures the probes' tests share, as static inline helpers: a sink that
 * decodes what a data source writes, a DataSourceConfig read as a probe
 * reads it, ftrace_fixtures.h's pages run through a real encoder, the
 * mount point of a device, and a child process with a thread whose tid
 * the test knows. Include after <cmocka.h>: every helper fails the running
 * test on error, so call them from a test only.
 *
 * Nothing here keeps a pointer it is given past the call, except what the
 * structs below hold, which are the caller's and must not move while in
 * use (a page_encoder_t's encoder points at its table; a sink_buf_t's
 * sink points at it).
 */
#ifndef TRACEGATE_TESTS_AGENT_PROBES_FIXTURES_H
#define TRACEGATE_TESTS_AGENT_PROBES_FIXTURES_H

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/probes/mountinfo.h"
#include "agent/probes/probes.h"
#include "agent/probes/probes_sink.h"
#include "ftrace_fixtures.h"
#include "pb/config/data_source_config.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"

/* --- a sink that decodes ------------------------------------------------- */

/* A tg_probes_sink_t that decodes each packet as it is completed and keeps
 * them in order until sink_buf_clear. Over 1 MiB: allocate it or make it
 * static. */
typedef struct sink_buf {
  uint8_t b[1 << 20];
  tg_pbw_t w;
  Perfetto__Protos__TracePacket *pk[256];
  size_t n;
} sink_buf_t;

static inline tg_pbw_t *sink_buf_begin(void *ctx) {
  sink_buf_t *s = ctx;
  tg_pbw_init(&s->w, s->b, sizeof(s->b), NULL, NULL);
  return &s->w;
}

static inline void sink_buf_end(void *ctx) {
  sink_buf_t *s = ctx;
  assert_int_equal(tg_pbw_error(&s->w), 0);
  assert_true(s->n < sizeof(s->pk) / sizeof(s->pk[0]));
  s->pk[s->n] = perfetto__protos__trace_packet__unpack(
      NULL, (size_t)tg_pbw_written(&s->w), s->b);
  assert_non_null(s->pk[s->n]);
  s->n++;
}

/* The sink writing into |s|. */
static inline tg_probes_sink_t sink_buf_sink(sink_buf_t *s) {
  return (tg_probes_sink_t){sink_buf_begin, sink_buf_end, s};
}

/* The last packet written, or NULL. */
static inline Perfetto__Protos__TracePacket *sink_buf_last(sink_buf_t *s) {
  return s->n ? s->pk[s->n - 1] : NULL;
}

/* Frees the packets kept. */
static inline void sink_buf_clear(sink_buf_t *s) {
  for (size_t i = 0; i < s->n; i++)
    perfetto__protos__trace_packet__free_unpacked(s->pk[i], NULL);
  s->n = 0;
}

/* --- a probe's config ---------------------------------------------------- */

/* |dsc| packed and read by |probe|'s parse_cfg into |cfg|
 * (TG_PROBE_CFG_MAX bytes, aligned as max_align_t), as the sampler does. */
static inline void probe_parse_cfg(
    const tg_probe_ops_t *probe, const Perfetto__Protos__DataSourceConfig *dsc,
    void *cfg) {
  size_t len = perfetto__protos__data_source_config__get_packed_size(dsc);
  uint8_t *b = malloc(len);
  assert_non_null(b);
  perfetto__protos__data_source_config__pack(dsc, b);
  assert_int_equal(probe->parse_cfg(b, len, cfg), 0);
  free(b);
}

/* --- pages through the encoder ------------------------------------------- */

typedef struct group_format {
  const char *group, *text; /* a format file's text, as tracefs has it */
} group_format_t;

/* A table of formats and linux.ftrace's encoder on it. */
typedef struct page_encoder {
  tg_ftrace_table_t table;
  tg_ftrace_encoder_t enc;
} page_encoder_t;

/* The |n| formats of |f| in the table; compact_sched if |compact|. Tests
 * set the encoder's collectors (pids, inodes) before encoding. */
static inline void page_encoder_init(page_encoder_t *pe,
                                     const group_format_t *f, size_t n,
                                     bool compact) {
  assert_int_equal(tg_ftrace_table_init(&pe->table), 0);
  for (size_t i = 0; i < n; i++) add_format(&pe->table, f[i].group, f[i].text);
  assert_int_equal(tg_ftrace_encoder_init(&pe->enc, &pe->table, compact, 4096),
                   0);
}

/* Encodes |p| (header_page_fixture's layout) as CPU 0's FtraceEventBundle
 * into |out| (|cap| bytes); the page must not be corrupt. Returns the bytes
 * written. */
static inline size_t page_encoder_encode(page_encoder_t *pe, const page_t *p,
                                         uint8_t *out, size_t cap,
                                         tg_ftrace_bundle_result_t *res) {
  tg_ftrace_page_layout_t l;
  assert_int_equal(tg_ftrace_header_page_parse(header_page_fixture,
                                               strlen(header_page_fixture), &l),
                   0);
  tg_pbw_t w;
  tg_pbw_init(&w, out, cap, NULL, NULL);
  tg_ftrace_encode_bundle(&pe->enc, &w, 0, &l, p->b, sizeof(p->b), res);
  assert_int_equal(tg_pbw_error(&w), 0);
  assert_false(res->corrupt);
  return (size_t)tg_pbw_written(&w);
}

static inline void page_encoder_free(page_encoder_t *pe) {
  tg_ftrace_encoder_free(&pe->enc);
  tg_ftrace_table_free(&pe->table);
}

/* --- file systems -------------------------------------------------------- */

/* The mount point of |dev| with the whole file system ("/" as root). */
static inline void mount_point_of(uint64_t dev, char *out, size_t cap) {
  tg_mountinfo_t mi;
  memset(&mi, 0, sizeof(mi));
  assert_true(tg_mountinfo_read(&mi, "/proc/self/mountinfo") > 0);
  out[0] = '\0';
  for (size_t i = 0; i < mi.n; i++)
    if (mi.v[i].dev == dev && strcmp(mi.v[i].root, "/") == 0)
      snprintf(out, cap, "%s", mi.v[i].point);
  tg_mountinfo_free(&mi);
  assert_true(out[0] != '\0');
}

/* --- a child with a known thread ----------------------------------------- */

typedef struct kid {
  pid_t pid;
  int32_t tid; /* its named thread */
  int quit_fd; /* write a byte: the kid exits */
} kid_t;

typedef struct kid_thread_args {
  int tid_fd, quit_fd;
} kid_thread_args_t;

/* The kid's thread: born named (see kid_start), reports its tid, then
 * blocks and wakes every millisecond (so it is switched in and out) until
 * told to quit. */
static inline void *kid_thread(void *arg) {
  const kid_thread_args_t *a = arg;
  int32_t tid = gettid();
  if (write(a->tid_fd, &tid, sizeof(tid)) != (ssize_t)sizeof(tid)) _exit(3);
  struct pollfd p = {.fd = a->quit_fd, .events = POLLIN};
  while (poll(&p, 1, 1) == 0) {
  }
  return NULL;
}

/* A child process with a second thread named |thread_name| that runs until
 * kid_stop or kid_kill; returns once its tid is known. The child dies with
 * the test (PR_SET_PDEATHSIG). The child's main thread takes the name
 * before it creates the thread, which inherits it: the thread never runs
 * under another name, so the probes cannot see it under the process's
 * (a rename in the thread itself raced its first sched_switch). The
 * process's own name (its main thread's) is then |thread_name| too. */
static inline void kid_start(kid_t *k, const char *thread_name) {
  int tid_pipe[2], quit_pipe[2];
  assert_int_equal(pipe2(tid_pipe, O_CLOEXEC), 0);
  assert_int_equal(pipe2(quit_pipe, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, thread_name);
    kid_thread_args_t a = {tid_pipe[1], quit_pipe[0]};
    pthread_t t;
    if (pthread_create(&t, NULL, kid_thread, &a) != 0) _exit(2);
    pthread_join(t, NULL);
    _exit(0);
  }
  assert_true(pid > 0);
  close(tid_pipe[1]);
  close(quit_pipe[0]);
  k->pid = pid;
  assert_int_equal(read(tid_pipe[0], &k->tid, sizeof(k->tid)),
                   (ssize_t)sizeof(k->tid));
  close(tid_pipe[0]);
  k->quit_fd = quit_pipe[1];
}

/* Tells the kid to quit; it must exit with status 0. */
static inline void kid_stop(kid_t *k) {
  assert_int_equal(write(k->quit_fd, "q", 1), 1);
  close(k->quit_fd);
  int status;
  assert_int_equal(waitpid(k->pid, &status, 0), k->pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* SIGKILLs the kid and reaps it. */
static inline void kid_kill(kid_t *k) {
  assert_int_equal(kill(k->pid, SIGKILL), 0);
  assert_int_equal(waitpid(k->pid, NULL, 0), k->pid);
  close(k->quit_fd);
}

#endif /* TRACEGATE_TESTS_AGENT_PROBES_FIXTURES_H */
