/* Runs a real tracegated on temporary sockets for integration tests, and
 * the raw producer/consumer steps most tests share. */
#ifndef TRACEGATE_TESTS_TEST_SERVICE_H
#define TRACEGATE_TESTS_TEST_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "abi/smb.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "raw_ipc.h"
#include "pb/trace/trace.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"

typedef struct test_service {
  pid_t pid;
  char dir[64];
  char producer_sock[128];
  char consumer_sock[128];
  int exit_status; /* wait status, once terminated */
} test_service_t;

/* Starts tracegated (path from the TRACEGATED_PATH build definition) and
 * waits for its ready signal. Returns 0 or -1. */
int test_service_start(test_service_t *ts);
/* The two halves of test_service_start: make the directory and socket
 * paths, then run tracegated on them. */
int test_service_prepare(test_service_t *ts);
int test_service_launch(test_service_t *ts);
/* The same with more tracegated arguments (|extra_args|: NULL, or
 * NULL-terminated strings that need only last through the call; at most
 * 22) and a bound on the wait for its ready signal. Returns 0 or -1. */
int test_service_start_with(test_service_t *ts, const char *const *extra_args,
                            int ready_timeout_ms);
int test_service_launch_with(test_service_t *ts, const char *const *extra_args,
                             int ready_timeout_ms);
/* A cmocka fixture: *state = a started test_service_t; the teardown fails
 * unless the service exited with status 0 on SIGTERM (also when the test
 * terminated it itself). */
int test_service_setup(void **state);
int test_service_teardown(void **state);
/* SIGTERM, wait (bounded), remove the directory. Returns the exit status. */
int test_service_stop(test_service_t *ts);
/* SIGTERM and wait for the exit (bounded), keeping the directory; returns
 * the wait status. test_service_stop() then only cleans up. */
int test_service_terminate(test_service_t *ts);
/* Runs another tracegated on |ts|'s socket paths and waits (bounded) for
 * it to exit on its own. Returns the wait status (or -1 if it had to be
 * killed); its stderr goes to |err|. */
int test_service_run_again(const test_service_t *ts, char *err, size_t errlen);

/* A producer that writes its SMB by hand. */
typedef struct raw_producer {
  raw_conn_t conn;
  int64_t async_req;
  uint8_t *smb_map;
  size_t smb_size;
  tg_smb_t smb;
  uint64_t instance_id;
  uint32_t target_buffer;
  bool started;
  bool stopped;
  uint64_t last_flush_id;
  unsigned setups;       /* SetupDataSource commands seen */
  uint32_t page_size_kb; /* from SetupTracing */
  unsigned clears;       /* ClearIncrementalState commands seen */
  uint64_t last_clear_ids[8]; /* the last one's data_source_ids (first 8) */
  size_t n_last_clear_ids;
} raw_producer_t;

/* Connects, initializes (|page_kb|, |smb_kb| hints; 0 for defaults), opens
 * the command stream and registers |ds_name|. Returns 0 or -1. */
int raw_producer_connect(raw_producer_t *p, const test_service_t *ts,
                         const char *name, const char *ds_name,
                         uint32_t page_kb, uint32_t smb_kb,
                         bool will_notify_on_stop);
/* Processes one command (recorded in the fields above: setups, starts,
 * stops, flushes, incremental state clears). Returns 1 if something
 * arrived, 0 on timeout, -1 on error. Flush requests are NOT acked
 * automatically. */
int raw_producer_poll(raw_producer_t *p, int timeout_ms);
int raw_producer_wait_started(raw_producer_t *p, int timeout_ms);
/* Writes one chunk with the given fragments into (page, chunk) and marks it
 * Complete. Fragments: |frags[i]| of |lens[i]| bytes. The page is
 * partitioned with |layout| if it is free. Returns 0 or -1. */
int raw_producer_write_chunk(raw_producer_t *p, uint32_t page, unsigned chunk,
                             unsigned layout, uint16_t writer, uint32_t chunk_id,
                             unsigned flags, const uint8_t *const *frags,
                             const size_t *lens, unsigned n);
/* Like raw_producer_write_chunk; with |complete| false the chunk is left
 * BeingWritten (as by a writer that has not finished it). */
int raw_producer_write_chunk_ex(raw_producer_t *p, uint32_t page, unsigned chunk,
                                unsigned layout, uint16_t writer,
                                uint32_t chunk_id, unsigned flags,
                                const uint8_t *const *frags, const size_t *lens,
                                unsigned n, bool complete);
/* Writes |payload| verbatim after a header claiming |count| packets and
 * |flags| (garbage tests), and marks the chunk Complete. */
int raw_producer_write_chunk_raw(raw_producer_t *p, uint32_t page, unsigned chunk,
                                 unsigned layout, uint16_t writer,
                                 uint32_t chunk_id, unsigned count, unsigned flags,
                                 const uint8_t *payload, size_t len);
/* One chunk of |n| test packets ("str", first_value, first_value + 1...). */
int raw_producer_write_packets(raw_producer_t *p, uint32_t page, unsigned chunk,
                               uint16_t writer, uint32_t chunk_id,
                               const char *str, uint32_t first_value, unsigned n);
/* One chunk in a whole page (page 0, chunk 0, writer 1) of |n| test
 * packets (at most RAW_PADDED_MAX) whose str is "|tag|:" padded with 'x'
 * to |body| bytes (at most RAW_PADDED_BODY_MAX), values |first|,
 * |first| + 1..., then CommitData for it. Returns 0 or -1. */
#define RAW_PADDED_MAX 24
#define RAW_PADDED_BODY_MAX 1000
int raw_producer_commit_padded(raw_producer_t *p, uint32_t chunk_id,
                               const char *tag, uint32_t first, unsigned n,
                               size_t body);
/* CommitData moving |n| (page, chunk) pairs; optional flush ack id. */
int raw_producer_commit(raw_producer_t *p, const uint32_t *pages,
                        const uint32_t *chunks, size_t n, uint64_t flush_id);
/* The same without waiting: drop_reply=true, as SDK producers do. */
int raw_producer_commit_async(raw_producer_t *p, const uint32_t *pages,
                              const uint32_t *chunks, size_t n);
/* A patch of one chunk: one 4-byte patch at |offset| of its payload. */
typedef struct raw_patch {
  uint32_t target_buffer;
  uint32_t writer_id;
  uint32_t chunk_id;
  uint32_t offset;
  uint8_t data[4];
  bool has_more;
} raw_patch_t;
typedef struct raw_move {
  uint32_t page;
  uint32_t chunk;
  uint32_t target_buffer;
} raw_move_t;
/* The general CommitData. With |drop_reply| nothing is awaited (returns 0
 * once sent). Returns 0 or -1. */
int raw_producer_commit_ex(raw_producer_t *p, const raw_move_t *moves,
                           size_t n_moves, const raw_patch_t *patches,
                           size_t n_patches, uint64_t flush_id, bool drop_reply);
/* RegisterTraceWriter |writer| -> the producer's target buffer (what makes
 * its BeingWritten chunks scrapable). Returns 0 or -1. */
int raw_producer_register_writer(raw_producer_t *p, uint16_t writer);
/* RegisterTraceWriter with any |writer| id and |target_buffer| (refusal
 * tests). Returns 1 if accepted, 0 if refused, -1 on error. */
int raw_producer_register_writer_to(raw_producer_t *p, uint32_t writer,
                                    uint32_t target_buffer);
/* Polls commands until a Flush newer than |after_id| arrives; returns its
 * id, or 0 on timeout/error. */
uint64_t raw_producer_wait_flush(raw_producer_t *p, uint64_t after_id,
                                 int timeout_ms);
/* Polls commands until StopDataSource arrives. Returns 0 or -1. */
int raw_producer_wait_stopped(raw_producer_t *p, int timeout_ms);
void raw_producer_close(raw_producer_t *p);

/* Serialises a TracePacket with for_testing {str = s, seq_value = v}. */
size_t make_test_packet(uint8_t *out, size_t cap, const char *s, uint32_t v);
/* Serialises a TracePacket { timestamp, ftrace_stats { phase (1 start of
 * trace, 2 end), cpu_stats { cpu i, overrun[i] } for i < n_cpus (at most
 * 4) } } into |out| (at least 128 bytes). Returns its size, 0 if n_cpus
 * is too many. */
size_t make_ftrace_stats_packet(uint8_t *out, int phase,
                                const uint64_t *overrun, size_t n_cpus);
/* The same on packet sequence |seq| (trusted_packet_sequence_id; 0: not
 * set) with cpu_stats { cpu first_cpu + i, overrun[i] }. */
size_t make_ftrace_stats_packet_on(uint8_t *out, int phase, uint32_t seq,
                                   uint32_t first_cpu, const uint64_t *overrun,
                                   size_t n_cpus);
/* The producer packets (for_testing) among |pk|, in order; at most |max|. */
size_t test_packets(Perfetto__Protos__TracePacket **pk, size_t n,
                    Perfetto__Protos__TracePacket **out, size_t max);
/* The last trace_stats packet among |pk|, or NULL. */
const Perfetto__Protos__TraceStats *find_trace_stats(
    Perfetto__Protos__TracePacket **pk, size_t n);

/* A consumer that records one session. */
typedef struct raw_consumer {
  raw_conn_t conn;
  int64_t enable_req;
} raw_consumer_t;

int raw_consumer_connect(raw_consumer_t *c, const test_service_t *ts);
/* Sends EnableTracing (the reply comes when tracing ends). */
int raw_consumer_enable(raw_consumer_t *c, const Perfetto__Protos__TraceConfig *cfg,
                        int fd);
/* Waits for the EnableTracing reply; returns 1 if disabled without error,
 * 0 if it carried an error (copied into |err|), -1 on timeout/EOF. */
int raw_consumer_wait_disabled(raw_consumer_t *c, int timeout_ms, char *err,
                               size_t errlen);
/* ReadBuffers to the end; returns the packets unpacked (caller frees with
 * free_packets), or NULL on error. */
Perfetto__Protos__TracePacket **raw_consumer_read(raw_consumer_t *c, size_t *n);
void free_packets(Perfetto__Protos__TracePacket **pk, size_t n);

/* Reads the whole file at |path| into a malloc'd buffer of *len bytes (the
 * caller frees it); NULL with errno set on failure. */
uint8_t *tg_test_read_file(const char *path, size_t *len);
/* Unpacks the TracePacket at *p of a trace file that ends at |end| (field
 * 1 of Trace, length-delimited) and moves *p past it; the caller frees it
 * with perfetto__protos__trace_packet__free_unpacked. NULL, *p unchanged,
 * when the bytes at *p are not a whole packet. */
Perfetto__Protos__TracePacket *trace_file_next_packet(const uint8_t **p,
                                                      const uint8_t *end);
/* DisableTracing, then the EnableTracing reply. Returns 0 or -1. */
int raw_consumer_disable(raw_consumer_t *c, int timeout_ms);
/* GetTraceStats; the caller frees the result with
 * perfetto__protos__get_trace_stats_response__free_unpacked. */
Perfetto__Protos__GetTraceStatsResponse *raw_consumer_stats(raw_consumer_t *c);
/* A consumer Flush of the session, the service's wait bounded by
 * |timeout_ms|: 0 once answered with success (the service then holds
 * every chunk its producers committed, or could commit, before it), -1
 * otherwise. */
int raw_consumer_flush(raw_consumer_t *c, uint32_t timeout_ms);
/* The session's first buffer's bytes_overwritten (GetTraceStats) into
 * |*out|. Returns 0 or -1. */
int raw_consumer_bytes_overwritten(raw_consumer_t *c, uint64_t *out);
/* QueryServiceState; free with
 * perfetto__protos__query_service_state_response__free_unpacked. */
Perfetto__Protos__QueryServiceStateResponse *raw_consumer_query(
    raw_consumer_t *c, int timeout_ms);
/* QueryServiceState read to its last reply (a streaming method): adds up
 * the producers, data sources and sessions of every reply and counts the
 * replies. Returns 0 or -1. */
int raw_consumer_query_all(raw_consumer_t *c, int timeout_ms, size_t *producers,
                           size_t *data_sources, size_t *sessions,
                           size_t *replies);
void raw_consumer_close(raw_consumer_t *c);

/* COMPRESSION_TYPE_DEFLATE: the Trace the |n| compressed_packets wrappers
 * of |pk| hold, inflated (free with perfetto__protos__trace__free_unpacked);
 * NULL if one is not such a wrapper or does not inflate. */
Perfetto__Protos__Trace *test_inflate_trace(
    const Perfetto__Protos__TracePacket *const *pk, size_t n);

/* A config: one buffer of |kb| KiB with |policy|, one data source. */
void simple_config(Perfetto__Protos__TraceConfig *cfg,
                   Perfetto__Protos__TraceConfig__BufferConfig *buf,
                   Perfetto__Protos__TraceConfig__BufferConfig **bufp,
                   Perfetto__Protos__TraceConfig__DataSource *ds,
                   Perfetto__Protos__TraceConfig__DataSource **dsp,
                   Perfetto__Protos__DataSourceConfig *dsc, uint32_t kb,
                   int policy, const char *ds_name);

/* simple_config() in one object that holds every part. Not movable: it
 * points into itself. */
typedef struct simple_cfg {
  Perfetto__Protos__TraceConfig cfg;
  Perfetto__Protos__TraceConfig__BufferConfig buf, *bufp;
  Perfetto__Protos__TraceConfig__DataSource ds, *dsp;
  Perfetto__Protos__DataSourceConfig dsc;
} simple_cfg_t;
void simple_cfg_init(simple_cfg_t *sc, uint32_t kb, int policy, const char *ds_name);

#endif /* TRACEGATE_TESTS_TEST_SERVICE_H */
