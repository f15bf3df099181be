/* tracegated in a child process, and the raw producer/consumer steps. */
#include "test_service.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "test_proc.h"
#include "test_wait.h"
#include "tracegate/pb_wire.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "pb/trace/test_event.pb-c.h"
#include "pb/trace/trace.pb-c.h"

#ifndef TRACEGATED_PATH
#error "TRACEGATED_PATH must name the tracegated binary"
#endif

int test_service_prepare(test_service_t *ts) {
  memset(ts, 0, sizeof(*ts));
  ts->exit_status = -1;
  if (tg_test_mkdtemp(ts->dir, sizeof(ts->dir), "svc") < 0) return -1;
  snprintf(ts->producer_sock, sizeof(ts->producer_sock), "%s/producer", ts->dir);
  snprintf(ts->consumer_sock, sizeof(ts->consumer_sock), "%s/consumer", ts->dir);
  return 0;
}

/* Starts tracegated on |ts|'s paths; |ready_fd| and |err_fd| (or
 * TG_TEST_FD_INHERIT) are the child's ready pipe and stderr; |extra| (NULL
 * or NULL-terminated) follows the usual arguments. */
static pid_t spawn(const test_service_t *ts, int ready_fd, int err_fd,
                   const char *const *extra) {
  char fdarg[16];
  snprintf(fdarg, sizeof(fdarg), "%d", ready_fd);
  const char *lvl = getenv("TG_TEST_LOG_LEVEL");
  const char *argv[32] = {"tracegated", "--producer-socket", ts->producer_sock,
                          "--consumer-socket", ts->consumer_sock, "--ready-fd",
                          fdarg, "--log-level", lvl ? lvl : "warn"};
  size_t n = 9;
  for (size_t i = 0; extra && extra[i]; i++) {
    if (n + 1 >= sizeof(argv) / sizeof(argv[0])) return -E2BIG;
    argv[n++] = extra[i];
  }
  argv[n] = NULL;
  tg_test_spawn_t s = TG_TEST_SPAWN_INIT;
  s.path = TRACEGATED_PATH;
  s.argv = argv;
  s.stderr_fd = err_fd;
  s.keep_fd = ready_fd;
  return tg_test_spawn(&s);
}

int test_service_launch(test_service_t *ts) {
  return test_service_launch_with(ts, NULL, 10000);
}

int test_service_launch_with(test_service_t *ts, const char *const *extra_args,
                             int ready_timeout_ms) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) < 0) return -1;
  pid_t pid = spawn(ts, pfd[1], TG_TEST_FD_INHERIT, extra_args);
  close(pfd[1]);
  if (pid < 0) {
    close(pfd[0]);
    return -1;
  }
  ts->pid = pid;
  /* "ready" on the pipe, or EOF if it died; bounded. */
  int ok = tg_test_wait_line(pfd[0], "ready", ready_timeout_ms, NULL, 0);
  close(pfd[0]);
  if (ok != 1) {
    test_service_stop(ts);
    return -1;
  }
  return 0;
}

int test_service_start(test_service_t *ts) {
  if (test_service_prepare(ts) < 0) return -1;
  return test_service_launch(ts);
}

int test_service_start_with(test_service_t *ts, const char *const *extra_args,
                            int ready_timeout_ms) {
  if (test_service_prepare(ts) < 0) return -1;
  return test_service_launch_with(ts, extra_args, ready_timeout_ms);
}

int test_service_terminate(test_service_t *ts) {
  if (ts->pid <= 0) return -1;
  int status = tg_test_stop(ts->pid, SIGTERM, 10000);
  ts->pid = 0;
  ts->exit_status = status;
  return status;
}

int test_service_setup(void **state) {
  test_service_t *ts = calloc(1, sizeof(*ts));
  if (!ts || test_service_start(ts) < 0) {
    free(ts);
    return -1;
  }
  *state = ts;
  return 0;
}

int test_service_teardown(void **state) {
  test_service_t *ts = *state;
  if (ts->pid > 0) test_service_terminate(ts);
  int status = ts->exit_status;
  test_service_stop(ts);
  free(ts);
  return status == 0 ? 0 : -1;
}

int test_service_stop(test_service_t *ts) {
  int status = ts->pid > 0 ? test_service_terminate(ts) : ts->exit_status;
  /* Tests leave logs and outputs next to the sockets: remove it all. */
  tg_test_rm_rf(ts->dir);
  return status;
}

int test_service_run_again(const test_service_t *ts, char *err, size_t errlen) {
  int efd[2], rfd[2];
  if (pipe2(efd, O_CLOEXEC) < 0) return -1;
  if (pipe2(rfd, O_CLOEXEC) < 0) {
    close(efd[0]);
    close(efd[1]);
    return -1;
  }
  pid_t pid = spawn(ts, rfd[1], efd[1], NULL);
  close(efd[1]);
  close(rfd[1]);
  close(rfd[0]); /* a second service must not get as far as "ready" */
  int status = pid < 0 ? -1 : tg_test_reap(pid, 10000);
  /* The child is gone: its stderr pipe holds all it wrote, then EOF. */
  size_t got = 0;
  ssize_t r;
  while (errlen > 1 && got < errlen - 1 &&
         (r = read(efd[0], err + got, errlen - 1 - got)) > 0)
    got += (size_t)r;
  if (errlen) err[got] = 0;
  close(efd[0]);
  return status;
}

/* --- producer --------------------------------------------------------------------- */

int raw_producer_connect(raw_producer_t *p, const test_service_t *ts,
                         const char *name, const char *ds_name, uint32_t page_kb,
                         uint32_t smb_kb, bool will_notify_on_stop) {
  memset(p, 0, sizeof(*p));
  if (raw_connect(&p->conn, ts->producer_sock) < 0) return -1;
  if (raw_bind(&p->conn, "ProducerPort") < 0) return -1;
  Perfetto__Protos__InitializeConnectionRequest init =
      PERFETTO__PROTOS__INITIALIZE_CONNECTION_REQUEST__INIT;
  init.producer_name = (char *)name;
  if (page_kb) {
    init.has_shared_memory_page_size_hint_bytes = 1;
    init.shared_memory_page_size_hint_bytes = page_kb * 1024;
  }
  if (smb_kb) {
    init.has_shared_memory_size_hint_bytes = 1;
    init.shared_memory_size_hint_bytes = smb_kb * 1024;
  }
  if (raw_call(&p->conn, "InitializeConnection", &init.base, -1, NULL, NULL, 5000) != 1)
    return -1;
  Perfetto__Protos__GetAsyncCommandRequest gac =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_REQUEST__INIT;
  p->async_req = raw_invoke(&p->conn, "GetAsyncCommand", &gac.base, -1, false);
  if (p->async_req <= 0) return -1;
  if (!ds_name) return 0;
  Perfetto__Protos__DataSourceDescriptor d = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  d.name = (char *)ds_name;
  d.has_will_notify_on_stop = 1;
  d.will_notify_on_stop = will_notify_on_stop;
  Perfetto__Protos__RegisterDataSourceRequest r =
      PERFETTO__PROTOS__REGISTER_DATA_SOURCE_REQUEST__INIT;
  r.data_source_descriptor = &d;
  return raw_call(&p->conn, "RegisterDataSource", &r.base, -1, NULL, NULL, 5000) == 1
             ? 0 : -1;
}

int raw_producer_poll(raw_producer_t *p, int timeout_ms) {
  raw_frame_t f;
  int rv = raw_wait(&p->conn, (uint64_t)p->async_req, timeout_ms, &f);
  if (rv != 1) return rv;
  rv = -1;
  if (f.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY) {
    ProtobufCBinaryData *b = &f.frame->msg_invoke_method_reply->reply_proto;
    Perfetto__Protos__GetAsyncCommandResponse *cmd =
        perfetto__protos__get_async_command_response__unpack(NULL, b->len, b->data);
    if (cmd) {
      rv = 1;
      switch (cmd->cmd_case) {
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING: {
          int fd = raw_take_fd(&p->conn);
          if (fd < 0) {
            rv = -1;
            break;
          }
          off_t sz = lseek(fd, 0, SEEK_END);
          p->smb_map = mmap(NULL, (size_t)sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
          close(fd);
          if (p->smb_map == MAP_FAILED) {
            p->smb_map = NULL;
            rv = -1;
            break;
          }
          p->smb_size = (size_t)sz;
          p->page_size_kb = cmd->setup_tracing->shared_buffer_page_size_kb;
          tg_smb_init(&p->smb, p->smb_map, p->smb_size,
                      cmd->setup_tracing->shared_buffer_page_size_kb * 1024);
          break;
        }
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE:
          p->instance_id = cmd->setup_data_source->new_instance_id;
          p->target_buffer = cmd->setup_data_source->config->target_buffer;
          p->setups++;
          break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE:
          p->instance_id = cmd->start_data_source->new_instance_id;
          p->target_buffer = cmd->start_data_source->config->target_buffer;
          p->started = true;
          break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE:
          p->stopped = true;
          break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH:
          p->last_flush_id = cmd->flush->request_id;
          break;
        case PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE: {
          const Perfetto__Protos__GetAsyncCommandResponse__ClearIncrementalState *c =
              cmd->clear_incremental_state;
          size_t n = c->n_data_source_ids < 8 ? c->n_data_source_ids : 8;
          if (n) memcpy(p->last_clear_ids, c->data_source_ids, n * sizeof(uint64_t));
          p->n_last_clear_ids = n;
          p->clears++;
          break;
        }
        default:
          break;
      }
      perfetto__protos__get_async_command_response__free_unpacked(cmd, NULL);
    }
  }
  tg_ipc_frame_free(f.frame);
  if (f.fd >= 0) close(f.fd);
  return rv;
}

int raw_producer_wait_started(raw_producer_t *p, int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  while (!p->started) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0 || raw_producer_poll(p, (int)left) < 0) return -1;
  }
  return p->smb_map ? 0 : -1;
}

int raw_producer_write_chunk_ex(raw_producer_t *p, uint32_t page, unsigned chunk,
                                unsigned layout, uint16_t writer, uint32_t chunk_id,
                                unsigned flags, const uint8_t *const *frags,
                                const size_t *lens, unsigned n, bool complete) {
  if (tg_smb_page_bitmap(&p->smb, page) == 0)
    tg_smb_try_partition_page(&p->smb, page, layout);
  tg_smb_chunk_t c;
  if (tg_smb_try_acquire_chunk_for_writing(&p->smb, page, chunk, chunk_id, writer, &c) < 0)
    return -1;
  size_t off = TG_SMB_CHUNK_HEADER_SIZE;
  for (unsigned i = 0; i < n; i++) {
    if (off + 4 + lens[i] > c.size) return -1;
    tg_pb_write_redundant_varint(c.begin + off, (uint32_t)lens[i]);
    memcpy(c.begin + off + 4, frags[i], lens[i]);
    off += 4 + lens[i];
  }
  tg_smb_chunk_set_packets(&c, n, flags);
  if (!complete) return 0;
  return tg_smb_release_chunk_as_complete(&p->smb, &c) < 0 ? -1 : 0;
}

int raw_producer_write_chunk(raw_producer_t *p, uint32_t page, unsigned chunk,
                             unsigned layout, uint16_t writer, uint32_t chunk_id,
                             unsigned flags, const uint8_t *const *frags,
                             const size_t *lens, unsigned n) {
  return raw_producer_write_chunk_ex(p, page, chunk, layout, writer, chunk_id,
                                     flags, frags, lens, n, true);
}

int raw_producer_write_chunk_raw(raw_producer_t *p, uint32_t page, unsigned chunk,
                                 unsigned layout, uint16_t writer,
                                 uint32_t chunk_id, unsigned count, unsigned flags,
                                 const uint8_t *payload, size_t len) {
  if (tg_smb_page_bitmap(&p->smb, page) == 0)
    tg_smb_try_partition_page(&p->smb, page, layout);
  tg_smb_chunk_t c;
  if (tg_smb_try_acquire_chunk_for_writing(&p->smb, page, chunk, chunk_id, writer, &c) < 0)
    return -1;
  if (TG_SMB_CHUNK_HEADER_SIZE + len > c.size) return -1;
  memcpy(c.begin + TG_SMB_CHUNK_HEADER_SIZE, payload, len);
  tg_smb_chunk_set_packets(&c, count, flags);
  return tg_smb_release_chunk_as_complete(&p->smb, &c) < 0 ? -1 : 0;
}

int raw_producer_write_packets(raw_producer_t *p, uint32_t page, unsigned chunk,
                               uint16_t writer, uint32_t chunk_id,
                               const char *str, uint32_t first_value, unsigned n) {
  enum { MAX = 32 };
  uint8_t pk[MAX][256];
  const uint8_t *frags[MAX];
  size_t lens[MAX];
  if (n > MAX) return -1;
  for (unsigned i = 0; i < n; i++) {
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), str, first_value + i);
    if (!lens[i]) return -1;
    frags[i] = pk[i];
  }
  return raw_producer_write_chunk(p, page, chunk, TG_PAGE_DIV_4, writer, chunk_id,
                                  0, frags, lens, n);
}

int raw_producer_commit_ex(raw_producer_t *p, const raw_move_t *moves,
                           size_t n_moves, const raw_patch_t *patches,
                           size_t n_patches, uint64_t flush_id, bool drop_reply) {
  enum { MAX = 64 };
  if (n_moves > MAX || n_patches > MAX) return -1;
  Perfetto__Protos__CommitDataRequest req = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
  Perfetto__Protos__CommitDataRequest__ChunksToMove mv[MAX], *pmv[MAX];
  Perfetto__Protos__CommitDataRequest__ChunkToPatch cp[MAX], *pcp[MAX];
  Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch pt[MAX], *ppt[MAX];
  for (size_t i = 0; i < n_moves; i++) {
    perfetto__protos__commit_data_request__chunks_to_move__init(&mv[i]);
    mv[i].has_page = mv[i].has_chunk = mv[i].has_target_buffer = 1;
    mv[i].page = moves[i].page;
    mv[i].chunk = moves[i].chunk;
    mv[i].target_buffer = moves[i].target_buffer;
    pmv[i] = &mv[i];
  }
  for (size_t i = 0; i < n_patches; i++) {
    perfetto__protos__commit_data_request__chunk_to_patch__init(&cp[i]);
    perfetto__protos__commit_data_request__chunk_to_patch__patch__init(&pt[i]);
    pt[i].has_offset = 1;
    pt[i].offset = patches[i].offset;
    pt[i].has_data = 1;
    pt[i].data.data = (uint8_t *)patches[i].data;
    pt[i].data.len = 4;
    ppt[i] = &pt[i];
    cp[i].has_target_buffer = cp[i].has_writer_id = cp[i].has_chunk_id = 1;
    cp[i].target_buffer = patches[i].target_buffer;
    cp[i].writer_id = patches[i].writer_id;
    cp[i].chunk_id = patches[i].chunk_id;
    cp[i].n_patches = 1;
    cp[i].patches = &ppt[i];
    cp[i].has_has_more_patches = 1;
    cp[i].has_more_patches = patches[i].has_more;
    pcp[i] = &cp[i];
  }
  req.n_chunks_to_move = n_moves;
  req.chunks_to_move = pmv;
  req.n_chunks_to_patch = n_patches;
  req.chunks_to_patch = pcp;
  if (flush_id) {
    req.has_flush_request_id = 1;
    req.flush_request_id = flush_id;
  }
  if (drop_reply)
    return raw_invoke(&p->conn, "CommitData", &req.base, -1, true) > 0 ? 0 : -1;
  return raw_call(&p->conn, "CommitData", &req.base, -1, NULL, NULL, 5000) == 1 ? 0 : -1;
}

static int commit_moves(raw_producer_t *p, const uint32_t *pages,
                        const uint32_t *chunks, size_t n, uint64_t flush_id,
                        bool drop_reply) {
  raw_move_t mv[64];
  if (n > 64) return -1;
  for (size_t i = 0; i < n; i++)
    mv[i] = (raw_move_t){pages[i], chunks[i], p->target_buffer};
  return raw_producer_commit_ex(p, mv, n, NULL, 0, flush_id, drop_reply);
}

int raw_producer_commit(raw_producer_t *p, const uint32_t *pages,
                        const uint32_t *chunks, size_t n, uint64_t flush_id) {
  return commit_moves(p, pages, chunks, n, flush_id, false);
}

int raw_producer_commit_async(raw_producer_t *p, const uint32_t *pages,
                              const uint32_t *chunks, size_t n) {
  return commit_moves(p, pages, chunks, n, 0, true);
}

int raw_producer_register_writer(raw_producer_t *p, uint16_t writer) {
  Perfetto__Protos__RegisterTraceWriterRequest r =
      PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
  r.has_trace_writer_id = 1;
  r.trace_writer_id = writer;
  r.has_target_buffer = 1;
  r.target_buffer = p->target_buffer;
  return raw_call(&p->conn, "RegisterTraceWriter", &r.base, -1, NULL, NULL, 5000) == 1
             ? 0 : -1;
}

int raw_producer_register_writer_to(raw_producer_t *p, uint32_t writer,
                                    uint32_t target_buffer) {
  Perfetto__Protos__RegisterTraceWriterRequest r =
      PERFETTO__PROTOS__REGISTER_TRACE_WRITER_REQUEST__INIT;
  r.has_trace_writer_id = 1;
  r.trace_writer_id = writer;
  r.has_target_buffer = 1;
  r.target_buffer = target_buffer;
  return raw_call(&p->conn, "RegisterTraceWriter", &r.base, -1, NULL, NULL, 5000);
}

uint64_t raw_producer_wait_flush(raw_producer_t *p, uint64_t after_id,
                                 int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  while (p->last_flush_id <= after_id) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0 || raw_producer_poll(p, (int)left) < 0) return 0;
  }
  return p->last_flush_id;
}

int raw_producer_wait_stopped(raw_producer_t *p, int timeout_ms) {
  int64_t deadline = tg_test_now_ms() + timeout_ms;
  while (!p->stopped) {
    int64_t left = deadline - tg_test_now_ms();
    if (left <= 0 || raw_producer_poll(p, (int)left) < 0) return -1;
  }
  return 0;
}

void raw_producer_close(raw_producer_t *p) {
  if (p->smb_map) munmap(p->smb_map, p->smb_size);
  p->smb_map = NULL;
  raw_close(&p->conn);
}

int raw_producer_commit_padded(raw_producer_t *p, uint32_t chunk_id,
                               const char *tag, uint32_t first, unsigned n,
                               size_t body) {
  size_t tl = strlen(tag);
  if (n > RAW_PADDED_MAX || body > RAW_PADDED_BODY_MAX || tl >= body) return -1;
  static uint8_t pk[RAW_PADDED_MAX][RAW_PADDED_BODY_MAX + 64];
  const uint8_t *frags[RAW_PADDED_MAX];
  size_t lens[RAW_PADDED_MAX];
  char str[RAW_PADDED_BODY_MAX + 1];
  memset(str, 'x', body);
  str[body] = 0;
  memcpy(str, tag, tl);
  str[tl] = ':';
  for (unsigned i = 0; i < n; i++) {
    lens[i] = make_test_packet(pk[i], sizeof(pk[i]), str, first + i);
    if (!lens[i]) return -1;
    frags[i] = pk[i];
  }
  uint32_t page = 0, chunk = 0;
  if (raw_producer_write_chunk(p, 0, 0, TG_PAGE_DIV_1, 1, chunk_id, 0, frags,
                               lens, n) < 0)
    return -1;
  return raw_producer_commit(p, &page, &chunk, 1, 0);
}

size_t make_ftrace_stats_packet(uint8_t *out, int phase,
                                const uint64_t *overrun, size_t n_cpus) {
  return make_ftrace_stats_packet_on(out, phase, 0, 0, overrun, n_cpus);
}

size_t make_ftrace_stats_packet_on(uint8_t *out, int phase, uint32_t seq,
                                   uint32_t first_cpu, const uint64_t *overrun,
                                   size_t n_cpus) {
  Perfetto__Protos__FtraceCpuStats cs[4], *csp[4];
  if (n_cpus > 4) return 0;
  for (size_t i = 0; i < n_cpus; i++) {
    perfetto__protos__ftrace_cpu_stats__init(&cs[i]);
    cs[i].has_cpu = cs[i].has_overrun = 1;
    cs[i].cpu = first_cpu + (uint32_t)i;
    cs[i].overrun = overrun[i];
    csp[i] = &cs[i];
  }
  Perfetto__Protos__FtraceStats st = PERFETTO__PROTOS__FTRACE_STATS__INIT;
  st.has_phase = 1;
  st.phase = (Perfetto__Protos__FtraceStats__Phase)phase;
  st.n_cpu_stats = n_cpus;
  st.cpu_stats = csp;
  Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  p.has_timestamp = 1;
  p.timestamp = 42;
  p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_STATS;
  p.ftrace_stats = &st;
  if (seq) {
    p.optional_trusted_packet_sequence_id_case =
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
    p.trusted_packet_sequence_id = seq;
  }
  return perfetto__protos__trace_packet__pack(&p, out);
}

size_t make_test_packet(uint8_t *out, size_t cap, const char *s, uint32_t v) {
  Perfetto__Protos__TestEvent ev = PERFETTO__PROTOS__TEST_EVENT__INIT;
  ev.str = (char *)s;
  ev.has_seq_value = 1;
  ev.seq_value = v;
  Perfetto__Protos__TracePacket pk = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  pk.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING;
  pk.for_testing = &ev;
  size_t n = perfetto__protos__trace_packet__get_packed_size(&pk);
  if (n > cap) return 0;
  return perfetto__protos__trace_packet__pack(&pk, out);
}

size_t test_packets(Perfetto__Protos__TracePacket **pk, size_t n,
                    Perfetto__Protos__TracePacket **out, size_t max) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING) continue;
    if (k < max) out[k] = pk[i];
    k++;
  }
  return k < max ? k : max;
}

const Perfetto__Protos__TraceStats *find_trace_stats(
    Perfetto__Protos__TracePacket **pk, size_t n) {
  const Perfetto__Protos__TraceStats *st = NULL;
  for (size_t i = 0; i < n; i++)
    if (pk[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
      st = pk[i]->trace_stats;
  return st;
}

/* --- consumer --------------------------------------------------------------------- */

int raw_consumer_connect(raw_consumer_t *c, const test_service_t *ts) {
  memset(c, 0, sizeof(*c));
  if (raw_connect(&c->conn, ts->consumer_sock) < 0) return -1;
  return raw_bind(&c->conn, "ConsumerPort");
}

int raw_consumer_enable(raw_consumer_t *c, const Perfetto__Protos__TraceConfig *cfg,
                        int fd) {
  Perfetto__Protos__EnableTracingRequest req =
      PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
  req.trace_config = (Perfetto__Protos__TraceConfig *)cfg;
  c->enable_req = raw_invoke(&c->conn, "EnableTracing", &req.base, fd, false);
  return c->enable_req > 0 ? 0 : -1;
}

int raw_consumer_wait_disabled(raw_consumer_t *c, int timeout_ms, char *err,
                               size_t errlen) {
  raw_frame_t f;
  if (raw_wait(&c->conn, (uint64_t)c->enable_req, timeout_ms, &f) != 1) return -1;
  int rv = -1;
  if (f.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY) {
    ProtobufCBinaryData *b = &f.frame->msg_invoke_method_reply->reply_proto;
    Perfetto__Protos__EnableTracingResponse *r =
        perfetto__protos__enable_tracing_response__unpack(NULL, b->len, b->data);
    if (r) {
      rv = r->error && r->error[0] ? 0 : 1;
      if (err && errlen) snprintf(err, errlen, "%s", r->error ? r->error : "");
      perfetto__protos__enable_tracing_response__free_unpacked(r, NULL);
    }
  }
  tg_ipc_frame_free(f.frame);
  if (f.fd >= 0) close(f.fd);
  return rv;
}

Perfetto__Protos__TracePacket **raw_consumer_read(raw_consumer_t *c, size_t *n) {
  Perfetto__Protos__ReadBuffersRequest req = PERFETTO__PROTOS__READ_BUFFERS_REQUEST__INIT;
  int64_t rid = raw_invoke(&c->conn, "ReadBuffers", &req.base, -1, false);
  if (rid <= 0) return NULL;
  size_t cap = 64, count = 0;
  Perfetto__Protos__TracePacket **out = calloc(cap, sizeof(*out));
  tg_buf_t cur;
  tg_buf_init(&cur, 0);
  bool more = true, ok = true;
  while (more && ok) {
    raw_frame_t f;
    if (raw_wait(&c->conn, (uint64_t)rid, 10000, &f) != 1) {
      ok = false;
      break;
    }
    Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
        f.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY
            ? f.frame->msg_invoke_method_reply : NULL;
    if (!r || !r->success) {
      ok = false;
    } else {
      more = r->has_more;
      Perfetto__Protos__ReadBuffersResponse *rb =
          perfetto__protos__read_buffers_response__unpack(NULL, r->reply_proto.len,
                                                          r->reply_proto.data);
      for (size_t i = 0; rb && i < rb->n_slices; i++) {
        tg_buf_append(&cur, rb->slices[i]->data.data, rb->slices[i]->data.len);
        if (!rb->slices[i]->last_slice_for_packet) continue;
        if (count == cap) out = realloc(out, (cap *= 2) * sizeof(*out));
        out[count] = perfetto__protos__trace_packet__unpack(NULL, tg_buf_size(&cur),
                                                            tg_buf_begin(&cur));
        if (!out[count]) ok = false;
        else count++;
        tg_buf_reset(&cur);
      }
      if (rb) perfetto__protos__read_buffers_response__free_unpacked(rb, NULL);
      else ok = false;
    }
    tg_ipc_frame_free(f.frame);
    if (f.fd >= 0) close(f.fd);
  }
  tg_buf_free(&cur);
  if (!ok) {
    free_packets(out, count);
    return NULL;
  }
  *n = count;
  return out;
}

uint8_t *tg_test_read_file(const char *path, size_t *len) {
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) == 0 && (buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
      if (k <= 0) {
        if (k == 0) errno = EIO;
        free(buf);
        buf = NULL;
        break;
      }
      got += (size_t)k;
    }
    *len = buf ? got : 0;
  }
  int e = errno;
  close(fd);
  errno = e;
  return buf;
}

Perfetto__Protos__TracePacket *trace_file_next_packet(const uint8_t **p,
                                                      const uint8_t *end) {
  const uint8_t *q = *p;
  uint64_t len = 0;
  if (q >= end || q[0] != 0x0A) return NULL; /* field 1, length-delimited */
  size_t k = tg_pb_read_varint(q + 1, end, &len);
  if (k == 0 || len > (uint64_t)(end - q - 1 - (ptrdiff_t)k)) return NULL;
  Perfetto__Protos__TracePacket *pk =
      perfetto__protos__trace_packet__unpack(NULL, (size_t)len, q + 1 + k);
  if (pk) *p = q + 1 + k + len;
  return pk;
}

void free_packets(Perfetto__Protos__TracePacket **pk, size_t n) {
  for (size_t i = 0; pk && i < n; i++)
    perfetto__protos__trace_packet__free_unpacked(pk[i], NULL);
  free(pk);
}

int raw_consumer_disable(raw_consumer_t *c, int timeout_ms) {
  Perfetto__Protos__DisableTracingRequest req =
      PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
  if (raw_call(&c->conn, "DisableTracing", &req.base, -1, NULL, NULL, timeout_ms) != 1)
    return -1;
  return raw_consumer_wait_disabled(c, timeout_ms, NULL, 0) == 1 ? 0 : -1;
}

Perfetto__Protos__GetTraceStatsResponse *raw_consumer_stats(raw_consumer_t *c) {
  Perfetto__Protos__GetTraceStatsRequest req =
      PERFETTO__PROTOS__GET_TRACE_STATS_REQUEST__INIT;
  ProtobufCMessage *r = NULL;
  if (raw_call(&c->conn, "GetTraceStats", &req.base, -1,
               &perfetto__protos__get_trace_stats_response__descriptor, &r,
               5000) != 1) {
    if (r) protobuf_c_message_free_unpacked(r, NULL);
    return NULL;
  }
  return (Perfetto__Protos__GetTraceStatsResponse *)r;
}

int raw_consumer_flush(raw_consumer_t *c, uint32_t timeout_ms) {
  Perfetto__Protos__FlushRequest req = PERFETTO__PROTOS__FLUSH_REQUEST__INIT;
  req.has_timeout_ms = true;
  req.timeout_ms = timeout_ms;
  ProtobufCMessage *r = NULL;
  int rv = raw_call(&c->conn, "Flush", &req.base, -1,
                    &perfetto__protos__flush_response__descriptor, &r,
                    (int)timeout_ms + 5000);
  if (r) protobuf_c_message_free_unpacked(r, NULL);
  return rv == 1 ? 0 : -1;
}

int raw_consumer_bytes_overwritten(raw_consumer_t *c, uint64_t *out) {
  Perfetto__Protos__GetTraceStatsResponse *r = raw_consumer_stats(c);
  int rv = -1;
  if (r && r->trace_stats && r->trace_stats->n_buffer_stats >= 1) {
    *out = r->trace_stats->buffer_stats[0]->bytes_overwritten;
    rv = 0;
  }
  if (r) perfetto__protos__get_trace_stats_response__free_unpacked(r, NULL);
  return rv;
}

Perfetto__Protos__QueryServiceStateResponse *raw_consumer_query(raw_consumer_t *c,
                                                                int timeout_ms) {
  Perfetto__Protos__QueryServiceStateRequest req =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
  ProtobufCMessage *r = NULL;
  if (raw_call(&c->conn, "QueryServiceState", &req.base, -1,
               &perfetto__protos__query_service_state_response__descriptor, &r,
               timeout_ms) != 1) {
    if (r) protobuf_c_message_free_unpacked(r, NULL);
    return NULL;
  }
  return (Perfetto__Protos__QueryServiceStateResponse *)r;
}

int raw_consumer_query_all(raw_consumer_t *c, int timeout_ms, size_t *producers,
                           size_t *data_sources, size_t *sessions,
                           size_t *replies) {
  Perfetto__Protos__QueryServiceStateRequest req =
      PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;
  int64_t rid = raw_invoke(&c->conn, "QueryServiceState", &req.base, -1, false);
  if (rid <= 0) return -1;
  *producers = *data_sources = *sessions = *replies = 0;
  for (bool more = true; more;) {
    raw_frame_t f;
    if (raw_wait(&c->conn, (uint64_t)rid, timeout_ms, &f) != 1) return -1;
    Perfetto__Protos__IPCFrame__InvokeMethodReply *r =
        f.frame->msg_case == PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY
            ? f.frame->msg_invoke_method_reply : NULL;
    Perfetto__Protos__QueryServiceStateResponse *q =
        r && r->success ? perfetto__protos__query_service_state_response__unpack(
                              NULL, r->reply_proto.len, r->reply_proto.data)
                        : NULL;
    more = r && r->has_more;
    if (q && q->service_state) {
      *producers += q->service_state->n_producers;
      *data_sources += q->service_state->n_data_sources;
      *sessions += q->service_state->n_tracing_sessions;
    }
    (*replies)++;
    if (q) perfetto__protos__query_service_state_response__free_unpacked(q, NULL);
    tg_ipc_frame_free(f.frame);
    if (f.fd >= 0) close(f.fd);
    if (!q) return -1;
  }
  return 0;
}

void raw_consumer_close(raw_consumer_t *c) { raw_close(&c->conn); }

void simple_config(Perfetto__Protos__TraceConfig *cfg,
                   Perfetto__Protos__TraceConfig__BufferConfig *buf,
                   Perfetto__Protos__TraceConfig__BufferConfig **bufp,
                   Perfetto__Protos__TraceConfig__DataSource *ds,
                   Perfetto__Protos__TraceConfig__DataSource **dsp,
                   Perfetto__Protos__DataSourceConfig *dsc, uint32_t kb,
                   int policy, const char *ds_name) {
  perfetto__protos__trace_config__init(cfg);
  perfetto__protos__trace_config__buffer_config__init(buf);
  perfetto__protos__trace_config__data_source__init(ds);
  perfetto__protos__data_source_config__init(dsc);
  buf->has_size_kb = 1;
  buf->size_kb = kb;
  buf->has_fill_policy = 1;
  buf->fill_policy = policy;
  *bufp = buf;
  dsc->name = (char *)ds_name;
  ds->config = dsc;
  *dsp = ds;
  cfg->n_buffers = 1;
  cfg->buffers = bufp;
  cfg->n_data_sources = 1;
  cfg->data_sources = dsp;
}

void simple_cfg_init(simple_cfg_t *sc, uint32_t kb, int policy, const char *ds_name) {
  simple_config(&sc->cfg, &sc->buf, &sc->bufp, &sc->ds, &sc->dsp, &sc->dsc, kb,
                policy, ds_name);
}

Perfetto__Protos__Trace *test_inflate_trace(
    const Perfetto__Protos__TracePacket *const *pk, size_t n) {
  size_t cap = 16u << 20, len = 0;
  uint8_t *all = malloc(cap);
  if (!all) return NULL;
  for (size_t i = 0; i < n; i++) {
    uLongf out = (uLongf)(cap - len);
    if (pk[i]->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_COMPRESSED_PACKETS ||
        uncompress(all + len, &out, pk[i]->compressed_packets.data,
                   pk[i]->compressed_packets.len) != Z_OK) {
      free(all);
      return NULL;
    }
    len += out;
  }
  Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, len, all);
  free(all);
  return t;
}
