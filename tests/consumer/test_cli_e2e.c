/* The `tracegate` binary end to end: a real tracegated, a raw producer
 * (tests/support) writing SMB chunks by hand, and the CLI as a child
 * process. Records in both output modes (the service writing the file, and
 * ReadBuffers over the connection), text configs, detach/attach, Ctrl-C,
 * the progress line on a terminal, queries, and the failures: no service,
 * a bad or refused config, an unwritable output path. Every wait is on an
 * event (a command from the service, the child's exit) with a deadline. */
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
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tracegate/pb_wire.h"
#include "cli_child.h"
#include "test_proc.h"

/* --- tests ---------------------------------------------------------------------------- */

static void record_quick_form_writes_the_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256], sum[256], want[300];
  snprintf(out, sizeof(out), "%s", out_in(ts, "quick.pftrace"));
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "quick.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "1s", "-b", "1mb", "--summary-json", sum,
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "quick", 10, 6);
  ack_flush(&p); /* the duration's final flush */
  assert_int_equal(wait_cli(&c), 0);
  assert_json(sum, "schema", "1");
  assert_json(sum, "exit_code", "0");
  snprintf(want, sizeof(want), "\"%s\"", out);
  assert_json(sum, "output", want);
  assert_json(sum, "hosts.0.host", "\"local\"");
  assert_json(sum, "hosts.0.outcome", "\"ok\"");
  assert_json(sum, "hosts.0.loss.total", "0");
  assert_json(sum, "hosts.0.clock_offset_ns", "null");
  assert_string_not_equal(tg_test_json(sum, "hosts.0.packets"), "0");
  unlink(sum);
  trace_file_t t;
  read_trace(out, "quick", &t);
  assert_int_equal(t.test_packets, 6);
  for (unsigned i = 0; i < 6; i++) assert_int_equal(t.values[i], 10 + i);
  assert_true(t.has_config);
  assert_int_equal(t.config_duration_ms, 1000);
  /* The config as written: the quick form asks for no write_into_file
   * (trace_processor flags one without flush_period_ms). */
  assert_false(t.config_write_into_file);
  assert_no_temp(ts->dir);
  unlink(out);
  raw_producer_close(&p);
}

/* A DISCARD buffer keeps the first data up to its size, as with Perfetto:
 * the trace is read once the session ended (reads while tracing would
 * free its room), the rest is counted as lost, and the config is recorded
 * as written. */
static void discard_buffer_keeps_the_first_data_up_to_its_size(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(
      raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256], sum[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "discard.pbtxt"));
  snprintf(out, sizeof(out), "%s", out_in(ts, "discard.pftrace"));
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "discard.json"));
  write_file(cfg,
             "buffers { size_kb: 16 fill_policy: DISCARD }\n"
             "data_sources { config { name: \"cli.ds\" } }\n");
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg,
                        "--txt", "-o", out, "--summary-json", sum, NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  /* 40 chunks of 8 packets: more than twice what the buffer holds. The
   * packets fill most of each chunk: the buffer keeps a chunk's written
   * bytes, not its size. */
  char d[101];
  memset(d, 'd', sizeof(d) - 1);
  d[sizeof(d) - 1] = '\0';
  for (uint32_t k = 0; k < 40; k++) commit_packets(&p, k, d, 8 * k, 8);
  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, d, &t);
  /* The first chunks' packets, in order, and not all of them. */
  print_message("kept %zu of 320 packets\n", t.test_packets);
  assert_true(t.test_packets > 0);
  assert_true(t.test_packets < 40 * 8 / 2);
  for (unsigned i = 0; i < t.test_packets; i++) assert_int_equal(t.values[i], i);
  assert_true(t.has_config);
  assert_false(t.config_write_into_file);
  /* Every chunk is kept or counted as discarded. */
  assert_int_equal(t.test_packets % 8, 0);
  char want[32];
  snprintf(want, sizeof(want), "%zu", 40 - t.test_packets / 8);
  assert_json(sum, "hosts.0.loss.counters.buffer 0 chunks_discarded", want);
  unlink(sum);
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

/* The quick form gives the probes' data sources sampling periods: without
 * them tracegate-probes (like traced_probes) would record nothing. */
static void quick_form_asks_the_probes_to_sample(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.probes", "linux.sys_stats",
                                        4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "probes.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-t", "1s", "linux.sys_stats", "linux.process_stats",
                        NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "probes", 1, 1);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "probes", &t);
  assert_true(t.has_config);
  assert_int_equal(t.config_meminfo_ms, 1000);
  assert_int_equal(t.config_stat_ms, 1000);
  assert_int_equal(t.config_proc_poll_ms, 1000);
  unlink(out);
  raw_producer_close(&p);
}

static void record_over_read_buffers_reassembles_big_packets(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 32, 256, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "rb.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "--out", out,
                        "--time", "0", "--read-buffers", "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "rb", 1, 3);
  /* 150 KiB: more than one IPC frame, so ReadBuffers slices it. */
  enum { STR_LEN = 150 * 1024 };
  char *str = malloc(STR_LEN + 1);
  uint8_t *pkt = malloc(STR_LEN + 64);
  assert_non_null(str);
  assert_non_null(pkt);
  memset(str, 'x', STR_LEN);
  str[STR_LEN] = 0;
  size_t total = make_test_packet(pkt, STR_LEN + 64, str, 7);
  const size_t room = tg_smb_chunk_size(p.smb.page_size, TG_PAGE_DIV_1) -
                      TG_SMB_CHUNK_HEADER_SIZE - TG_PACKET_HEADER_SIZE;
  uint32_t id = 1;
  for (size_t off = 0; off < total; off += room, id++) {
    const uint8_t *frag = pkt + off;
    size_t len = total - off < room ? total - off : room;
    unsigned flags = (off ? TG_CHUNK_FIRST_PACKET_CONTINUES : 0) |
                     (off + len < total ? TG_CHUNK_LAST_PACKET_CONTINUES : 0);
    assert_int_equal(raw_producer_write_chunk(&p, 0, 0, TG_PAGE_DIV_1, 1, id, flags,
                                              &frag, &len, 1), 0);
    uint32_t page = 0, chunk = 0;
    assert_int_equal(raw_producer_commit(&p, &page, &chunk, 1, 0), 0);
  }
  commit_packets(&p, id, "rb", 4, 2);
  kill(c.pid, SIGINT);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "rb", &t);
  assert_int_equal(t.test_packets, 5);
  for (unsigned i = 0; i < 5; i++) assert_int_equal(t.values[i], 1 + i);
  assert_int_equal(t.big_len, STR_LEN);
  unlink(out);
  free(str);
  free(pkt);
  raw_producer_close(&p);
}

static const char txt_config[] =
    "# a text config, as Perfetto's --txt takes\n"
    "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
    "data_sources: {\n"
    "  config { name: \"cli.ds\" }\n"
    "}\n"
    "duration_ms: 1500\n";

static void record_with_a_text_config(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "config.pbtxt"));
  write_file(cfg, txt_config);
  snprintf(out, sizeof(out), "%s", out_in(ts, "txt.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "txt", 0, 4);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "txt", &t);
  assert_int_equal(t.test_packets, 4);
  assert_true(t.has_config);
  assert_int_equal(t.config_duration_ms, 1500);
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

/* --detach, packets, then --attach --stop; |read_buffers| picks the mode. */
static void detach_attach(test_service_t *ts, bool read_buffers, const char *key) {
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "detach.pbtxt"));
  /* The service writes the file only when the config asks it to. */
  write_file(cfg, read_buffers
                      ? "buffers { size_kb: 1024 }\n"
                        "data_sources { config { name: \"cli.ds\" } }\n"
                      : "buffers { size_kb: 1024 }\n"
                        "data_sources { config { name: \"cli.ds\" } }\n"
                        "write_into_file: true\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "detach.pftrace"));
  const char *detach[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                          "-o", out, "--detach", key,
                          read_buffers ? "--read-buffers" : NULL, NULL};
  child_t c;
  assert_int_equal(run_cli(&c, detach), 0);
  char want[64];
  snprintf(want, sizeof(want), "%s\n", key);
  assert_string_equal(c.out, want);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "detached", 20, 5);

  /* stats --attach gives the session back afterwards. */
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, "--attach", key, NULL};
  assert_int_equal(run_cli(&c, stats), 0);
  assert_non_null(strstr(c.out, "buffer 0"));
  assert_non_null(strstr(c.out, "bytes_written"));
  /* The same for scripts, and the session is given back again. */
  const char *stats_json[] = {"stats", "--socket", ts->consumer_sock,
                              "--attach", key, "--json", NULL};
  assert_int_equal(run_cli(&c, stats_json), 0);
  char js[256];
  snprintf(js, sizeof(js), "%s", out_in(ts, "stats.json"));
  write_file(js, c.out);
  snprintf(want, sizeof(want), "\"%s\"", key);
  assert_json(js, "session_key", want);
  assert_json(js, "trace_stats.buffer_stats.0.buffer_size", "1048576");
  assert_non_null(tg_test_json(js, "trace_stats.buffer_stats.0.bytes_written"));
  unlink(js);

  const char *attach[] = {"record", "--socket", ts->consumer_sock, "--attach", key,
                          "--stop", "-o", out, NULL};
  spawn_cli(&c, attach);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "detached", &t);
  assert_int_equal(t.test_packets, 5);
  for (unsigned i = 0; i < 5; i++) assert_int_equal(t.values[i], 20 + i);
  /* The key is free again: attaching once more fails. */
  assert_int_not_equal(run_cli(&c, attach), 0);
  assert_notice_with(c.err, TG_N_ATTACH_FAILED, key);
  unlink(out);
  unlink(cfg);
  raw_producer_close(&p);
}

static void detach_then_attach_with_the_service_writing(void **state) {
  detach_attach(*state, false, "cli-key");
}

static void detach_then_attach_reading_buffers(void **state) {
  detach_attach(*state, true, "cli-key-rb");
}

static void sigint_stops_cleanly_and_keeps_the_file(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "sigint.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "sigint", 1, 3);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  assert_notice(c.err, TG_N_STOPPING);
  /* Ended well: the session was freed before the CLI exited. */
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  size_t np, nd, ns, nr;
  assert_int_equal(raw_consumer_query_all(&rc, WAIT_MS, &np, &nd, &ns, &nr), 0);
  assert_int_equal(ns, 0);
  raw_consumer_close(&rc);
  trace_file_t t;
  read_trace(out, "sigint", &t);
  assert_int_equal(t.test_packets, 3);
  assert_no_temp(ts->dir);
  unlink(out);
  raw_producer_close(&p);
}

/* A config file asking the service to write the trace into the file it is
 * handed (write_into_file), every 500 ms: the partial-file tests below
 * watch the service's writes. Returns its path (in out_in's buffer). */
static const char *service_writes_cfg(test_service_t *ts) {
  const char *cfg = out_in(ts, "service-writes.pbtxt");
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "data_sources { config { name: \"cli.ds\" } }\n"
             "write_into_file: true\n"
             "file_write_period_ms: 500\n"
             "flush_period_ms: 30000\n");
  return cfg;
}

/* Waits (on inotify events of |watch|, a watch on |dir|) until a partial
 * trace file in |dir| holds bytes. */
static void wait_partial_written(int watch, const char *dir) {
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  for (;;) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    bool written = false;
    while ((e = readdir(d))) {
      if (!strstr(e->d_name, ".partial-")) continue;
      char path[512];
      struct stat st;
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      written |= stat(path, &st) == 0 && st.st_size > 0;
    }
    closedir(d);
    if (written) return;
    struct pollfd pf = {watch, POLLIN, 0};
    int left = (int)(deadline - tg_test_now_ms());
    assert_true(left > 0);
    assert_int_equal(poll(&pf, 1, left), 1);
    char ev[4096];
    assert_true(read(watch, ev, sizeof(ev)) > 0);
  }
}

static void second_sigint_aborts(void **state) {
  test_service_t *ts = *state;
  int watch = inotify_init1(IN_CLOEXEC);
  assert_true(watch >= 0);
  assert_true(inotify_add_watch(watch, ts->dir, IN_MODIFY | IN_CLOSE_WRITE) >= 0);
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  char cfg[256];
  snprintf(cfg, sizeof(cfg), "%s", service_writes_cfg(ts));
  snprintf(out, sizeof(out), "%s", out_in(ts, "abort.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-c", cfg, "--txt", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "abort", 1, 3);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  /* The CLI is stopping: its flush reached the producer, which does not
   * answer. The second Ctrl-C aborts. */
  assert_true(raw_producer_wait_flush(&p, 0, WAIT_MS) > 0);
  /* The service writes the committed packets into the CLI's partial file
   * within its write period: wait for that write before aborting. */
  wait_partial_written(watch, ts->dir);
  close(watch);
  assert_int_equal(kill(c.pid, SIGINT), 0);
  assert_int_equal(wait_cli(&c), 130);
  assert_notice(c.err, TG_N_ABORTED);
  assert_false(exists(out));
  /* What was recorded stays, under the visible name the message gives. */
  char partial[256];
  assert_true(tg_test_notice_last_word(c.err, TG_N_PARTIAL_KEPT, partial,
                                       sizeof(partial)));
  assert_non_null(strstr(partial, ts->dir));
  assert_true(strrchr(partial, '/')[1] != '.');
  assert_true(exists(partial));
  unlink(partial);
  assert_no_temp(ts->dir);
  raw_producer_close(&p);
}

/* SIGTERM stops the trace cleanly, as Ctrl-C does (and as Perfetto's CLI
 * takes it): the final flush, the whole file, exit status 0. */
static void sigterm_stops_the_trace_cleanly(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "term.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "term", 1, 3);
  assert_int_equal(kill(c.pid, SIGTERM), 0);
  ack_flush(&p);
  assert_int_equal(wait_cli(&c), 0);
  trace_file_t t;
  read_trace(out, "term", &t);
  assert_int_equal(t.test_packets, 3);
  unlink(out);
  assert_no_temp(ts->dir);
  raw_producer_close(&p);
}

/* SIGHUP (the terminal went away) ends the CLI at once: the partial file
 * is kept under its visible name, which the last message gives. */
static void sighup_keeps_the_partial_trace_and_names_it(void **state) {
  test_service_t *ts = *state;
  int watch = inotify_init1(IN_CLOEXEC);
  assert_true(watch >= 0);
  assert_true(inotify_add_watch(watch, ts->dir, IN_MODIFY | IN_CLOSE_WRITE) >= 0);
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  char cfg[256];
  snprintf(cfg, sizeof(cfg), "%s", service_writes_cfg(ts));
  snprintf(out, sizeof(out), "%s", out_in(ts, "hup.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out,
                        "-c", cfg, "--txt", NULL};
  child_t c;
  spawn_cli(&c, args);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "hup", 1, 3);
  wait_partial_written(watch, ts->dir);
  close(watch);
  assert_int_equal(kill(c.pid, SIGHUP), 0);
  assert_int_equal(wait_cli(&c), 128 + SIGHUP);
  assert_false(exists(out));
  char partial[256];
  assert_notice(c.err, TG_N_PARTIAL_KEPT);
  assert_true(tg_test_notice_last_word(c.err, TG_N_PARTIAL_KEPT, partial,
                                       sizeof(partial)));
  assert_true(strrchr(partial, '/')[1] != '.');
  /* The service may still be finishing its last write: only its size. */
  struct stat st;
  assert_int_equal(stat(partial, &st), 0);
  assert_true(st.st_size > 0);
  unlink(partial);
  assert_no_temp(ts->dir);
  raw_producer_close(&p);
}

static void progress_line_on_a_terminal(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  assert_true(slave >= 0);
  char out[256];
  snprintf(out, sizeof(out), "%s", out_in(ts, "tty.pftrace"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "-t", "0",
                        "cli.ds", NULL};
  child_t c;
  spawn_cli_tty(&c, args, slave);
  close(slave);
  assert_int_equal(raw_producer_wait_started(&p, WAIT_MS), 0);
  commit_packets(&p, 0, "tty", 1, 3);
  /* The progress line counts the packets the service wrote: wait for it
   * on the terminal, then stop. */
  char tty[16384] = "";
  size_t n = 0;
  int64_t deadline = tg_test_now_ms() + WAIT_MS;
  while (!strstr(tty, TG_NOTE(PROGRESS)) && tg_test_now_ms() < deadline) {
    struct pollfd pf = {master, POLLIN, 0};
    if (poll(&pf, 1, 200) == 1) {
      ssize_t r = read(master, tty + n, sizeof(tty) - 1 - n);
      if (r > 0) tty[n += (size_t)r] = 0;
    }
  }
  assert_non_null(strstr(tty, "\r\033[Ktracegate: "));
  assert_notice(tty, TG_N_PROGRESS);
  kill(c.pid, SIGINT);
  ack_flush(&p);
  char rest[16384];
  assert_int_equal(wait_cli_ex(&c, WAIT_MS, master, rest, sizeof(rest)), 0);
  assert_notice(rest, TG_N_NO_LOSS);
  close(master);
  unlink(out);
  raw_producer_close(&p);
}

static void missing_service_fails_with_a_message(void **state) {
  test_service_t *ts = *state;
  char sock[256], out[256];
  snprintf(sock, sizeof(sock), "%s/no-such-socket", ts->dir);
  snprintf(out, sizeof(out), "%s", out_in(ts, "none.pftrace"));
  const char *args[] = {"record", "--socket", sock, "-o", out,
                        "--summary-json", "-", "cli.ds", NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  /* The summary on standard output says so too. */
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "none.json"));
  write_file(sum, c.out);
  assert_json(sum, "exit_code", "1");
  assert_json(sum, "output", "null");
  assert_json(sum, "hosts.0.outcome", "\"failed\"");
  assert_json(sum, "hosts.0.loss", "null");
  assert_json(sum, "hosts.0.failure", "\"connect\"");
  unlink(sum);
  assert_notice_with(c.err, TG_N_SERVICE_UNREACHABLE, sock);
  assert_false(exists(out));
  assert_no_temp(ts->dir);
  const char *query[] = {"query", "--socket", sock, NULL};
  assert_int_not_equal(run_cli(&c, query), 0);
  assert_notice_with(c.err, TG_N_SERVICE_UNREACHABLE, sock);
}

static void bad_config_reports_line_and_column(void **state) {
  test_service_t *ts = *state;
  char cfg[256], out[256];
  snprintf(cfg, sizeof(cfg), "%s", out_in(ts, "bad.pbtxt"));
  write_file(cfg,
             "buffers { size_kb: 1024 }\n"
             "duration_ms: 1000\n"
             "  no_such_field: 3\n");
  snprintf(out, sizeof(out), "%s", out_in(ts, "bad.pftrace"));
  char sum[256];
  snprintf(sum, sizeof(sum), "%s", out_in(ts, "bad.json"));
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "--txt",
                        "-o", out, "--summary-json", sum, NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  char want[300];
  snprintf(want, sizeof(want), "%s: line 3, column 3", cfg);
  assert_notice_with(c.err, TG_N_CONFIG_INVALID, want);
  assert_false(exists(out));
  /* Refused before any session: the summary says which kind. */
  assert_json(sum, "hosts.0.failure", "\"config\"");
  assert_string_not_equal(tg_test_json(sum, "hosts.0.reason"), "null");

  /* A config the service refuses: its own words. */
  write_file(cfg, "duration_ms: 1000\nbuffers { size_kb: 1 }\n");
  assert_int_not_equal(run_cli(&c, args), 0);
  char line[512];
  assert_true(tg_test_notice_line(c.err, TG_N_SESSION_FAILED,
                                  "buffers[0].size_kb", line, sizeof(line)));
  assert_non_null(strstr(line, TG_NOTE(SERVICE_CONFIG_REFUSED)));
  assert_false(exists(out));
  assert_json(sum, "hosts.0.failure", "\"session\"");
  unlink(sum);
  assert_no_temp(ts->dir);

  /* A text file without --txt does not decode as binary. */
  const char *binary[] = {"record", "--socket", ts->consumer_sock, "-c", cfg, "-o", out,
                          NULL};
  write_file(cfg, "buffers { size_kb: 1024 }\n");
  assert_int_not_equal(run_cli(&c, binary), 0);
  assert_notice_with(c.err, TG_N_CONFIG_INVALID, cfg);
  unlink(cfg);

  /* Bad flags. */
  const char *bad_time[] = {"record", "-o", out, "-t", "ten", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, bad_time), 2);
  assert_non_null(strstr(c.err, "--time"));
  const char *stop_alone[] = {"record", "-o", out, "--stop", "cli.ds", NULL};
  assert_int_equal(run_cli(&c, stop_alone), 2);
  assert_notice_with(c.err, TG_N_USAGE, "--stop");
}

/* Durations and sizes in common/units.h's grammar: what parses goes on to
 * the connection (exit 1: no service here), what does not is a usage
 * error (exit 2) before any connection. */
static void record_flags_take_the_one_grammar(void **state) {
  test_service_t *ts = *state;
  char sock[256], out[256];
  snprintf(sock, sizeof(sock), "%s/no-such-socket", ts->dir);
  snprintf(out, sizeof(out), "%s", out_in(ts, "units.pftrace"));
  static const struct {
    const char *flag, *value;
    int exit_code;
  } cases[] = {
      {"-t", "1d", 1},           {"-t", "1m30s", 1},   {"-t", "90", 1},
      {"-t", "1.5s", 1},         {"-t", "49d17h2m47s295ms", 1},
      {"-t", "49d17h2m47s296ms", 2}, /* past TraceConfig's uint32 */
      {"-t", "1m30", 2},         {"-t", "1.0005s", 2}, {"-t", "-1s", 2},
      {"-b", "4T", 2},           /* past BufferConfig's uint32 KiB */
      {"-b", "1T", 1},
      {"-b", "64KiB", 1},        {"-b", "64K", 1},     {"-b", "1.5M", 1},
      {"-b", "4095", 2},         {"-b", "1.1k", 2},    {"-b", "64kk", 2},
      {"-s", "1T", 1},           {"-s", "2tib", 1},    {"-s", "4k", 1},
      {"-s", "1k", 2},
      {"--grace", "1m30s", 1},   {"--grace", "0", 2},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *args[] = {"record", "--socket", sock, "-o", out,
                          cases[i].flag, cases[i].value, "cli.ds", NULL};
    child_t c;
    int rv = run_cli(&c, args);
    if (rv != cases[i].exit_code)
      fail_msg("%s %s: exit %d: %s", cases[i].flag, cases[i].value, rv, c.err);
    assert_false(exists(out));
  }
}

static void unwritable_output_fails_before_tracing(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  char out[256];
  snprintf(out, sizeof(out), "%s/no-such-dir/x.pftrace", ts->dir);
  const char *args[] = {"record", "--socket", ts->consumer_sock, "-o", out, "cli.ds", NULL};
  child_t c;
  assert_int_not_equal(run_cli(&c, args), 0);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, out);
  /* No session was ever created: the producer was not told to start, and
   * the service has no session. */
  assert_int_equal(raw_producer_poll(&p, 200), 0);
  assert_false(p.started);
  raw_consumer_t rc;
  assert_int_equal(raw_consumer_connect(&rc, ts), 0);
  size_t np, nd, ns, nr;
  assert_int_equal(raw_consumer_query_all(&rc, WAIT_MS, &np, &nd, &ns, &nr), 0);
  assert_int_equal(ns, 0);
  raw_consumer_close(&rc);
  /* A directory as output. */
  const char *dir_args[] = {"record", "--socket", ts->consumer_sock, "-o", ts->dir,
                            "cli.ds", NULL};
  assert_int_not_equal(run_cli(&c, dir_args), 0);
  assert_notice_with(c.err, TG_N_OUTPUT_UNWRITABLE, ts->dir);
  raw_producer_close(&p);
}

static void query_and_stats_print_tables(void **state) {
  test_service_t *ts = *state;
  raw_producer_t p;
  assert_int_equal(raw_producer_connect(&p, ts, "cli.producer", "cli.ds", 4, 64, false), 0);
  child_t c;
  const char *query[] = {"query", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, query), 0);
  assert_non_null(strstr(c.out, "PRODUCERS (1)"));
  assert_non_null(strstr(c.out, "cli.producer"));
  assert_non_null(strstr(c.out, "DATA SOURCES (1)"));
  assert_non_null(strstr(c.out, "cli.ds"));
  assert_non_null(strstr(c.out, "TRACING SESSIONS (0"));
  /* Perfetto's spelling. */
  const char *pquery[] = {"--query", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, pquery), 0);
  assert_non_null(strstr(c.out, "cli.producer"));
  const char *stats[] = {"stats", "--socket", ts->consumer_sock, NULL};
  assert_int_equal(run_cli(&c, stats), 0);
  assert_non_null(strstr(c.out, "no tracing sessions"));
  const char *missing[] = {"stats", "--socket", ts->consumer_sock, "--session", "99", NULL};
  assert_int_not_equal(run_cli(&c, missing), 0);
  assert_notice_with(c.err, TG_N_NO_SUCH_SESSION, " 99");
  /* --json: the same facts for scripts, valid JSON. */
  char js[256];
  snprintf(js, sizeof(js), "%s", out_in(ts, "query.json"));
  const char *qjson[] = {"query", "--socket", ts->consumer_sock, "--json", NULL};
  assert_int_equal(run_cli(&c, qjson), 0);
  write_file(js, c.out);
  assert_json(js, "schema", "1");
  assert_json(js, "service_state.producers.0.name", "\"cli.producer\"");
  assert_json(js, "service_state.data_sources.0.ds_descriptor.name",
              "\"cli.ds\"");
  assert_json(js, "capabilities.has_clone_session", "true");
  assert_json(js, "capabilities_error", "null");
  const char *sjson[] = {"stats", "--socket", ts->consumer_sock, "--json", NULL};
  assert_int_equal(run_cli(&c, sjson), 0);
  write_file(js, c.out);
  assert_json(js, "tracing_sessions", "[]");
  const char *both[] = {"query", "--socket", ts->consumer_sock, "--json",
                        "--raw", NULL};
  assert_int_equal(run_cli(&c, both), 2);
  unlink(js);
  raw_producer_close(&p);
}

static void help_of_every_command(void **state) {
  (void)state;
  static const struct {
    const char *args[4];
    const char *mentions[10];
  } cases[] = {
      {{"--help"}, {"record", "query", "stats", "help"}},
      {{"help"}, {"record", "query", "stats"}},
      {{"record", "--help"},
       {"--config", "--txt", "--out", "--time", "--buffer", "--detach", "--attach",
        "--stop", "--socket", "-c = --config"}},
      {{"help", "record"}, {"--config", "--detach", "examples"}},
      {{"query", "--help"}, {"--socket"}},
      {{"stats", "--help"}, {"--session", "--attach", "--socket"}},
      {{"help", "stats"}, {"--session"}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    child_t c;
    assert_int_equal(run_cli(&c, cases[i].args), 0);
    for (size_t k = 0; k < 10 && cases[i].mentions[k]; k++) {
      if (!strstr(c.out, cases[i].mentions[k]))
        print_message("'%s' missing from:\n%s\n", cases[i].mentions[k], c.out);
      assert_non_null(strstr(c.out, cases[i].mentions[k]));
    }
  }
  child_t c;
  const char *none[] = {NULL};
  assert_int_equal(run_cli(&c, none), 2);
  const char *unknown[] = {"frobnicate", NULL};
  assert_int_equal(run_cli(&c, unknown), 2);
  assert_non_null(strstr(c.err, "'frobnicate'"));
}

int main(void) {
#define SVC(t) cmocka_unit_test_setup_teardown(t, test_service_setup, test_service_teardown)
  const struct CMUnitTest tests[] = {
      SVC(record_quick_form_writes_the_packets),
      SVC(quick_form_asks_the_probes_to_sample),
      SVC(discard_buffer_keeps_the_first_data_up_to_its_size),
      SVC(record_over_read_buffers_reassembles_big_packets),
      SVC(record_with_a_text_config),
      SVC(detach_then_attach_with_the_service_writing),
      SVC(detach_then_attach_reading_buffers),
      SVC(sigint_stops_cleanly_and_keeps_the_file),
      SVC(second_sigint_aborts),
      SVC(sigterm_stops_the_trace_cleanly),
      SVC(sighup_keeps_the_partial_trace_and_names_it),
      SVC(progress_line_on_a_terminal),
      SVC(missing_service_fails_with_a_message),
      SVC(bad_config_reports_line_and_column),
      SVC(record_flags_take_the_one_grammar),
      SVC(unwritable_output_fails_before_tracing),
      SVC(query_and_stats_print_tables),
      cmocka_unit_test(help_of_every_command),
  };
#undef SVC
  return cmocka_run_group_tests(tests, NULL, NULL);
}
