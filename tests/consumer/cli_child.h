/* The `tracegate` binary as a child process for end-to-end tests: spawn it,
 * collect its stdout and stderr until it exits (with a deadline), decode
 * the trace files it writes, and the raw producer steps those tests share.
 * Every wait is on an event (the child's output or exit) with a deadline. */
#ifndef TRACEGATE_TESTS_CONSUMER_CLI_CHILD_H
#define TRACEGATE_TESTS_CONSUMER_CLI_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "test_notice.h"
#include "test_service.h"

#define WAIT_MS 20000


typedef struct child {
  pid_t pid;
  int out_fd, err_fd;
  char out[16384], err[16384];
  size_t n_out, n_err;
  int status; /* wait status */
} child_t;

/* Starts tracegate with |args| (NULL-terminated, without argv[0]). With
 * |err_tty| >= 0, stderr is that terminal instead of a pipe. */
void spawn_cli_tty(child_t *c, const char *const *args, int err_tty);
void spawn_cli(child_t *c, const char *const *args);
/* The same with the child's stdout being |out_fd| (not collected). */
void spawn_cli_out(child_t *c, const char *const *args, int out_fd);
/* Collects the output until the child closed it, then reaps it. Returns
 * the exit code (128 + signal when killed by one), or -1 (and kills it)
 * after |timeout_ms|. |extra| >= 0 is one more fd to collect into
 * |extra_buf| (a terminal's master side). A sanitizer report fails. */
int wait_cli_ex(child_t *c, int timeout_ms, int extra, char *extra_buf,
                size_t extra_cap);
int wait_cli(child_t *c);
int run_cli(child_t *c, const char *const *args);

typedef struct trace_file {
  size_t packets;       /* all packets */
  size_t test_packets;  /* for_testing with |str| */
  uint32_t values[256]; /* their seq_values, in order */
  size_t big_len;       /* the longest for_testing str */
  bool has_config;      /* a trace_config packet */
  uint32_t config_duration_ms;
  /* What the quick form asked of the probes' data sources (0: absent). */
  uint32_t config_meminfo_ms, config_stat_ms, config_proc_poll_ms;
  bool config_write_into_file; /* as the service recorded the config */
} trace_file_t;

/* Decodes |path| as a sequence of Trace.packet fields; every byte must
 * belong to a whole TracePacket. */
void read_trace(const char *path, const char *str, trace_file_t *t);
/* The same for |n| bytes in memory. */
void decode_trace(const uint8_t *buf, size_t n, const char *str,
                  trace_file_t *t);

bool exists(const char *path);
void write_file(const char *path, const char *text);
/* No temporary or hidden file left behind in |dir|. */
void assert_no_temp(const char *dir);

/* One chunk of |n| test packets, committed. */
void commit_packets(raw_producer_t *p, uint32_t chunk_id, const char *str,
                    uint32_t first, unsigned n);
/* Answers the next flush (the CLI's stop, or the end of the duration). */
void ack_flush(raw_producer_t *p);

/* |name| in |ts|'s directory (a static buffer: copy it). */
const char *out_in(const test_service_t *ts, const char *name);

#endif /* TRACEGATE_TESTS_CONSUMER_CLI_CHILD_H */
