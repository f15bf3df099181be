/* The CLI's JSON (cli/json_out.h, summary_json.h): whatever bytes
 * a host's name, a reason or a loss counter's name hold, the output is
 * valid JSON (read back by Python's json module) with those values, bytes
 * that are not UTF-8 as U+FFFD, counts above INT64_MAX as strings; absent
 * figures are null; the summary file is replaced whole; a protobuf message
 * comes out whole (set fields only, enums by name, bytes in base64). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/json_out.h"
#include "cli/summary_json.h"
#include "pb/common/data_source_descriptor.pb-c.h"
#include "pb/common/trace_stats.pb-c.h"
#include "pb/common/tracing_service_capabilities.pb-c.h"
#include "test_proc.h"

static char g_dir[128];

static int setup(void **state) {
  (void)state;
  return tg_test_mkdtemp(g_dir, sizeof(g_dir), "sumjson") < 0 ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  return tg_test_rm_rf(g_dir) == 0 ? 0 : -1;
}

static void hostile_text_comes_back_as_it_was(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s/s.json", g_dir);
  /* Two counters listed and one more the list had no room for, and what
   * the relay lost in transit: the total counts them all. */
  cli_loss_t loss = {.n = 3, .omitted = 1, .total = 9, .transit = 5};
  snprintf(loss.items[0].name, sizeof(loss.items[0].name), "chunks\"lost\\");
  loss.items[0].value = 3;
  snprintf(loss.items[1].name, sizeof(loss.items[1].name), "a\tb\x01");
  loss.items[1].value = 4;
  snprintf(loss.items[2].name, sizeof(loss.items[2].name), "lost \xff");
  loss.items[2].value = UINT64_MAX;
  /* A host's problem whose name and why hold control bytes and bytes
   * that are not UTF-8. */
  tg_ds_problems_t ps = {0};
  const uint64_t refused = 3;
  tg_ds_problems_add(&ps, TG_DS_EVENTS_REFUSED, "linux.\xff\x1b", &refused,
                     "why \"%s\"", "x\xfe");
  const cli_summary_links_t links = {.mode = "joined", .joined = 7,
                                     .uuid = 2, .flows_started = 5,
                                     .flows_unmatched = 1,
                                     .flows_across = 2};
  cli_summary_host_t h[2] = {
      {.host = "h\"1\\:1", .name = "db \xff", .ok = false, .reason = "bad \xff\xfe\n\"bytes\"",
       .failure = "link_lost",
       .bytes = 10, .packets = 2, .loss = &loss, .reconnects = 3,
       .link_down_ms = 1500, .has_clock = true, .clock_offset_ns = -42,
       .clock_uncertainty_ns = 9, .compression = "zstd",
       .has_machine_id = true, .machine_id = 5, .path = NULL,
       .problems = &ps, .links = &links},
      {.host = "local-caf\xc3\xa9-\xe2\x9c\x93", .ok = true, .bytes = UINT64_MAX,
       .failure = "ignored when ok"},
  };
  cli_summary_t s = {.exit_code = 1, .elapsed_ms = 99, .output = NULL,
                     .hosts = h, .n_hosts = 2};
  assert_int_equal(cli_summary_json_write(path, &s), 0);
  assert_json(path, "schema", "1");
  assert_json(path, "exit_code", "1");
  assert_json(path, "elapsed_ms", "99");
  assert_json(path, "output", "null");
  assert_json(path, "hosts.0.host", "\"h\\\"1\\\\:1\"");
  assert_json(path, "hosts.0.name", "\"db \\ufffd\"");
  assert_json(path, "hosts.0.outcome", "\"failed\"");
  /* Bytes that are not UTF-8 come back as U+FFFD (common/json.h). */
  assert_json(path, "hosts.0.reason",
              "\"bad \\ufffd\\ufffd\\n\\\"bytes\\\"\"");
  assert_json(path, "hosts.0.failure", "\"link_lost\"");
  assert_json(path, "hosts.0.loss.total", "14");
  assert_json(path, "hosts.0.loss.counters_omitted", "1");
  /* Names made UTF-8 like any text; a count above INT64_MAX is the
   * string of its digits (common/json.h). */
  assert_json(path, "hosts.0.loss.counters",
              "{\"a\\tb\\u0001\": 4, \"chunks\\\"lost\\\\\": 3, "
              "\"lost \\ufffd\": \"18446744073709551615\"}");
  assert_json(path, "hosts.0.reconnects", "3");
  assert_json(path, "hosts.0.link_down_ms", "1500");
  assert_json(path, "hosts.0.clock_offset_ns", "-42");
  assert_json(path, "hosts.0.clock_uncertainty_ns", "9");
  assert_json(path, "hosts.0.machine_id", "5");
  assert_json(path, "hosts.0.path", "null");
  assert_json(path, "hosts.0.links.mode", "\"joined\"");
  assert_json(path, "hosts.0.links.joined", "7");
  assert_json(path, "hosts.0.links.uuid", "2");
  assert_json(path, "hosts.0.links.flows_started", "5");
  assert_json(path, "hosts.0.links.flows_unmatched", "1");
  assert_json(path, "hosts.0.links.flows_across", "2");
  assert_json(path, "hosts.0.links.refused", "0");
  assert_json(path, "hosts.1.links", "null");
  assert_json(path, "hosts.0.problems.0.kind", "\"data_source\"");
  assert_json(path, "hosts.0.problems.0.data_source", "\"linux.\\ufffd?\"");
  assert_json(path, "hosts.0.problems.0.code", "\"TG-7011\"");
  assert_json(path, "hosts.0.problems.0.reason", "\"events_refused\"");
  assert_json(path, "hosts.0.problems.0.why", "\"why \\\"x\\ufffd\\\"\"");
  assert_json(path, "hosts.0.problems.0.events", "3");
  /* Well-formed UTF-8 is the text it spells (not its bytes as code
   * points); Python writes it back escaped. */
  assert_json(path, "hosts.1.host", "\"local-caf\\u00e9-\\u2713\"");
  assert_json(path, "hosts.1.name", "null");
  assert_json(path, "hosts.1.outcome", "\"ok\"");
  assert_json(path, "hosts.1.bytes", "\"18446744073709551615\"");
  assert_json(path, "hosts.1.reason", "null");
  assert_json(path, "hosts.1.failure", "null");
  assert_json(path, "hosts.1.loss", "null");
  assert_json(path, "hosts.1.clock_offset_ns", "null");
  assert_json(path, "hosts.1.compression", "null");
  assert_json(path, "hosts.1.machine_id", "null");
  assert_json(path, "hosts.1.problems", "[]");
  /* Written again: replaced whole, nothing left beside it. */
  s.n_hosts = 0;
  assert_int_equal(cli_summary_json_write(path, &s), 0);
  assert_json(path, "hosts", "[]");
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(g_dir), 0); /* empty: no temporary file left */
  assert_int_equal(tg_test_mkdtemp(g_dir, sizeof(g_dir), "sumjson"), 0);
}

/* A directory that cannot be written: an error, said, and no file. */
static void unwritable_place_is_an_error(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s/no/such/dir/s.json", g_dir);
  cli_summary_t s = {.exit_code = 0};
  assert_true(cli_summary_json_write(path, &s) < 0);
}

/* A TraceStats with a buffer, a repeated and an unset field, and a
 * capabilities message with an enum list. */
static void protobuf_messages_come_out_whole(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s/pb.json", g_dir);
  Perfetto__Protos__TraceStats__BufferStats b =
      PERFETTO__PROTOS__TRACE_STATS__BUFFER_STATS__INIT;
  b.has_buffer_size = true;
  b.buffer_size = 1u << 20;
  b.has_bytes_written = true;
  b.bytes_written = UINT64_MAX;
  Perfetto__Protos__TraceStats__BufferStats *bs[] = {&b, &b};
  Perfetto__Protos__TraceStats st = PERFETTO__PROTOS__TRACE_STATS__INIT;
  st.n_buffer_stats = 2;
  st.buffer_stats = bs;
  st.has_producers_seen = true;
  st.producers_seen = 3;
  Perfetto__Protos__ObservableEvents__Type ev[] = {
      PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED,
      (Perfetto__Protos__ObservableEvents__Type)12345};
  Perfetto__Protos__TracingServiceCapabilities caps =
      PERFETTO__PROTOS__TRACING_SERVICE_CAPABILITIES__INIT;
  caps.has_has_clone_session = true;
  caps.has_clone_session = true;
  caps.n_observable_events = 2;
  caps.observable_events = ev;
  /* Bytes fields in base64 (RFC 4648, padded): 1, 2 and 3 bytes. */
  static const uint8_t raw[] = {0xfb, 0xff, 0x00};
  Perfetto__Protos__DataSourceDescriptor dsd =
      PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
  dsd.has_gpu_counter_descriptor = true;
  dsd.gpu_counter_descriptor = (ProtobufCBinaryData){1, (uint8_t *)raw};
  dsd.has_track_event_descriptor = true;
  dsd.track_event_descriptor = (ProtobufCBinaryData){2, (uint8_t *)raw};
  dsd.has_ftrace_descriptor = true;
  dsd.ftrace_descriptor = (ProtobufCBinaryData){3, (uint8_t *)raw};
  dsd.has_protovm_program = true;
  dsd.protovm_program = (ProtobufCBinaryData){0, NULL};
  json_t *doc = json_pack("{s:o, s:o, s:o, s:o}", "stats",
                          cli_json_pb(&st.base), "caps",
                          cli_json_pb(&caps.base), "none", cli_json_pb(NULL),
                          "dsd", cli_json_pb(&dsd.base));
  assert_non_null(doc);
  assert_int_equal(cli_json_doc_write(path, doc, 0), 0);
  json_decref(doc);
  assert_json(path, "stats.producers_seen", "3");
  assert_json(path, "stats.buffer_stats.1.buffer_size", "1048576");
  /* Above INT64_MAX: the string of its digits (common/json.h). */
  assert_json(path, "stats.buffer_stats.1.bytes_written",
              "\"18446744073709551615\"");
  /* Unset fields are left out. */
  assert_null(tg_test_json(path, "stats.buffer_stats.0.chunks_discarded"));
  assert_null(tg_test_json(path, "stats.producers_connected"));
  assert_json(path, "caps.has_clone_session", "true");
  assert_json(path, "caps.observable_events",
              "[\"TYPE_ALL_DATA_SOURCES_STARTED\", 12345]");
  assert_json(path, "none", "null");
  assert_json(path, "dsd.gpu_counter_descriptor", "\"+w==\"");
  assert_json(path, "dsd.track_event_descriptor", "\"+/8=\"");
  assert_json(path, "dsd.ftrace_descriptor", "\"+/8A\"");
  assert_json(path, "dsd.protovm_program", "\"\"");
  assert_int_equal(unlink(path), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hostile_text_comes_back_as_it_was),
      cmocka_unit_test(unwritable_place_is_an_error),
      cmocka_unit_test(protobuf_messages_come_out_whole),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
