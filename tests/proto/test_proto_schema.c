/* Schema conformance tests for tg_proto: field numbers, wire types, oneofs
 * and RPC method order must match Perfetto, or real Perfetto peers and
 * tools (traced, perfetto, trace_processor, ui.perfetto.dev) misread us.
 * Byte strings below are hand-encoded from the protobuf wire format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include "pb/common/commit_data_request.pb-c.h"
#include "pb/common/trace_stats.pb-c.h"
#include "pb/config/trace_config.pb-c.h"
#include "pb/ipc/consumer_port.pb-c.h"
#include "pb/ipc/producer_port.pb-c.h"
#include "pb/ipc/wire_protocol.pb-c.h"
#include "pb/trace/trace.pb-c.h"
#include "pb/trace/trace_packet.pb-c.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Packs `msg` and asserts the exact encoding. */
static void assert_packs_to(const ProtobufCMessage *msg, const uint8_t *want,
                            size_t want_len) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  assert_int_equal(len, want_len);
  uint8_t *buf = malloc(len ? len : 1);
  assert_non_null(buf);
  assert_int_equal(protobuf_c_message_pack(msg, buf), want_len);
  assert_memory_equal(buf, want, want_len);
  free(buf);
}

static void assert_methods(const ProtobufCServiceDescriptor *svc,
                           const char *const *want, size_t n) {
  assert_int_equal(svc->n_methods, n);
  for (size_t i = 0; i < n; i++)
    assert_string_equal(svc->methods[i].name, want[i]);
}

static void producer_port_methods_in_abi_order(void **state) {
  (void)state;
  /* Perfetto assigns method ids 1..N in declaration order. */
  static const char *const want[] = {
      "InitializeConnection",
      "RegisterDataSource",
      "UnregisterDataSource",
      "CommitData",
      "GetAsyncCommand",
      "RegisterTraceWriter",
      "UnregisterTraceWriter",
      "NotifyDataSourceStarted",
      "NotifyDataSourceStopped",
      "ActivateTriggers",
      "Sync",
      "UpdateDataSource",
  };
  const ProtobufCServiceDescriptor *svc =
      &perfetto__protos__producer_port__descriptor;
  assert_string_equal(svc->name, "perfetto.protos.ProducerPort");
  assert_methods(svc, want, ARRAY_LEN(want));
  /* CommitData takes the shared CommitDataRequest message. */
  assert_ptr_equal(svc->methods[3].input,
                   &perfetto__protos__commit_data_request__descriptor);
}

static void consumer_port_methods_in_abi_order(void **state) {
  (void)state;
  static const char *const want[] = {
      "EnableTracing",
      "DisableTracing",
      "ReadBuffers",
      "FreeBuffers",
      "Flush",
      "StartTracing",
      "ChangeTraceConfig",
      "Detach",
      "Attach",
      "GetTraceStats",
      "ObserveEvents",
      "QueryServiceState",
      "QueryCapabilities",
      "SaveTraceForBugreport",
      "CloneSession",
  };
  const ProtobufCServiceDescriptor *svc =
      &perfetto__protos__consumer_port__descriptor;
  assert_string_equal(svc->name, "perfetto.protos.ConsumerPort");
  assert_methods(svc, want, ARRAY_LEN(want));
}

static void trace_packet_trusted_fields_encode_with_abi_tags(void **state) {
  (void)state;
  Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  pkt.optional_trusted_uid_case =
      PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_UID_TRUSTED_UID;
  pkt.trusted_uid = 1000;
  pkt.optional_trusted_packet_sequence_id_case =
      PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
  pkt.trusted_packet_sequence_id = 7;
  pkt.has_trusted_pid = 1;
  pkt.trusted_pid = 4321;
  pkt.has_machine_id = 1;
  pkt.machine_id = 5;
  static const uint8_t want[] = {
      0x18, 0xE8, 0x07,       /* 3: trusted_uid = 1000 */
      0x50, 0x07,             /* 10: trusted_packet_sequence_id = 7 */
      0xF8, 0x04, 0xE1, 0x21, /* 79: trusted_pid = 4321 */
      0x90, 0x06, 0x05,       /* 98: machine_id = 5 */
  };
  assert_packs_to(&pkt.base, want, sizeof(want));

  Perfetto__Protos__TracePacket *back =
      perfetto__protos__trace_packet__unpack(NULL, sizeof(want), want);
  assert_non_null(back);
  assert_int_equal(
      back->optional_trusted_uid_case,
      PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_UID_TRUSTED_UID);
  assert_int_equal(back->trusted_uid, 1000);
  assert_int_equal(back->trusted_packet_sequence_id, 7);
  assert_int_equal(back->trusted_pid, 4321);
  assert_int_equal(back->machine_id, 5);
  perfetto__protos__trace_packet__free_unpacked(back, NULL);
}

static void trace_packet_sequence_fields_use_abi_tags(void **state) {
  (void)state;
  Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  pkt.has_timestamp = 1;
  pkt.timestamp = 1;
  pkt.has_sequence_flags = 1;
  pkt.sequence_flags =
      PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
  pkt.has_previous_packet_dropped = 1;
  pkt.previous_packet_dropped = 1;
  pkt.has_first_packet_on_sequence = 1;
  pkt.first_packet_on_sequence = 1;
  pkt.has_timestamp_clock_id = 1;
  pkt.timestamp_clock_id =
      PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_BOOTTIME;
  static const uint8_t want[] = {
      0x40, 0x01,       /* 8: timestamp */
      0x68, 0x01,       /* 13: sequence_flags */
      0xD0, 0x02, 0x01, /* 42: previous_packet_dropped */
      0xD0, 0x03, 0x06, /* 58: timestamp_clock_id = BOOTTIME */
      0xB8, 0x05, 0x01, /* 87: first_packet_on_sequence */
  };
  assert_packs_to(&pkt.base, want, sizeof(want));
}

static void trace_file_is_repeated_packet_field_1(void **state) {
  (void)state;
  Perfetto__Protos__TestEvent ev = PERFETTO__PROTOS__TEST_EVENT__INIT;
  ev.str = "hi";
  Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  pkt.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING;
  pkt.for_testing = &ev;
  Perfetto__Protos__TracePacket *pkts[] = {&pkt, &pkt};
  Perfetto__Protos__Trace trace = PERFETTO__PROTOS__TRACE__INIT;
  trace.n_packet = 2;
  trace.packet = pkts;
  /* for_testing = 900: key varint 7202 = A2 38. */
  static const uint8_t want[] = {
      0x0A, 0x07, 0xA2, 0x38, 0x04, 0x0A, 0x02, 'h', 'i',
      0x0A, 0x07, 0xA2, 0x38, 0x04, 0x0A, 0x02, 'h', 'i',
  };
  assert_packs_to(&trace.base, want, sizeof(want));

  /* Concatenated packets are also a valid Trace (streaming file writes). */
  Perfetto__Protos__Trace *back =
      perfetto__protos__trace__unpack(NULL, sizeof(want), want);
  assert_non_null(back);
  assert_int_equal(back->n_packet, 2);
  assert_int_equal(back->packet[1]->data_case,
                   PERFETTO__PROTOS__TRACE_PACKET__DATA_FOR_TESTING);
  assert_string_equal(back->packet[1]->for_testing->str, "hi");
  perfetto__protos__trace__free_unpacked(back, NULL);
}

static void track_event_core_fields_encode_with_abi_tags(void **state) {
  (void)state;
  uint64_t cat_iids[] = {1};
  Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
  te.n_category_iids = 1;
  te.category_iids = cat_iids;
  te.has_type = 1;
  te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
  te.has_track_uuid = 1;
  te.track_uuid = 1234;
  te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
  te.name = "foo";
  Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
  pkt.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
  pkt.track_event = &te;
  static const uint8_t want[] = {
      0x5A, 0x0D,                      /* 11: track_event, 13 bytes */
      0x18, 0x01,                      /* 3: category_iids (not packed) */
      0x48, 0x01,                      /* 9: type = TYPE_SLICE_BEGIN */
      0x58, 0xD2, 0x09,                /* 11: track_uuid = 1234 */
      0xBA, 0x01, 0x03, 'f', 'o', 'o', /* 23: name */
  };
  assert_packs_to(&pkt.base, want, sizeof(want));
  assert_int_equal(PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER, 4);
}

static void ipc_frame_bind_service_roundtrip(void **state) {
  (void)state;
  Perfetto__Protos__IPCFrame__BindService bind =
      PERFETTO__PROTOS__IPCFRAME__BIND_SERVICE__INIT;
  bind.service_name = "ProducerPort";
  Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
  frame.has_request_id = 1;
  frame.request_id = 1;
  frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE;
  frame.msg_bind_service = &bind;
  static const uint8_t want[] = {
      0x10, 0x01, /* 2: request_id = 1 */
      0x1A, 0x0E, /* 3: msg_bind_service, 14 bytes */
      0x0A, 0x0C, /* 1: service_name, 12 bytes */
      'P',  'r',  'o', 'd', 'u', 'c', 'e', 'r', 'P', 'o', 'r', 't',
  };
  assert_packs_to(&frame.base, want, sizeof(want));

  Perfetto__Protos__IPCFrame *back =
      perfetto__protos__ipcframe__unpack(NULL, sizeof(want), want);
  assert_non_null(back);
  assert_true(back->has_request_id);
  assert_int_equal(back->request_id, 1);
  assert_int_equal(back->msg_case,
                   PERFETTO__PROTOS__IPCFRAME__MSG_MSG_BIND_SERVICE);
  assert_string_equal(back->msg_bind_service->service_name, "ProducerPort");
  perfetto__protos__ipcframe__free_unpacked(back, NULL);
}

static void ipc_frame_invoke_and_peer_identity_tags(void **state) {
  (void)state;
  uint8_t args[] = {0x08, 0x01};
  Perfetto__Protos__IPCFrame__InvokeMethod inv =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD__INIT;
  inv.has_service_id = 1;
  inv.service_id = 1;
  inv.has_method_id = 1;
  inv.method_id = 4;
  inv.has_args_proto = 1;
  inv.args_proto.len = sizeof(args);
  inv.args_proto.data = args;
  inv.has_drop_reply = 1;
  inv.drop_reply = 1;
  Perfetto__Protos__IPCFrame frame = PERFETTO__PROTOS__IPCFRAME__INIT;
  frame.has_request_id = 1;
  frame.request_id = 2;
  frame.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD;
  frame.msg_invoke_method = &inv;
  static const uint8_t want_invoke[] = {
      0x10, 0x02, 0x2A, 0x0A, 0x08, 0x01, 0x10,
      0x04, 0x1A, 0x02, 0x08, 0x01, 0x20, 0x01,
  };
  assert_packs_to(&frame.base, want_invoke, sizeof(want_invoke));

  Perfetto__Protos__IPCFrame__SetPeerIdentity id =
      PERFETTO__PROTOS__IPCFRAME__SET_PEER_IDENTITY__INIT;
  id.has_pid = 1;
  id.pid = 10;
  id.has_uid = 1;
  id.uid = 20;
  id.machine_id_hint = "h";
  id.machine_name = "m";
  Perfetto__Protos__IPCFrame f2 = PERFETTO__PROTOS__IPCFRAME__INIT;
  f2.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_SET_PEER_IDENTITY;
  f2.set_peer_identity = &id;
  static const uint8_t want_id[] = {
      0x42, 0x0A, 0x08, 0x0A, 0x10, 0x14, 0x1A, 0x01, 'h', 0x22, 0x01, 'm',
  };
  assert_packs_to(&f2.base, want_id, sizeof(want_id));

  /* Reply with has_more for a streaming method. */
  Perfetto__Protos__IPCFrame__InvokeMethodReply rep =
      PERFETTO__PROTOS__IPCFRAME__INVOKE_METHOD_REPLY__INIT;
  rep.has_success = 1;
  rep.success = 1;
  rep.has_has_more = 1;
  rep.has_more = 1;
  Perfetto__Protos__IPCFrame f3 = PERFETTO__PROTOS__IPCFRAME__INIT;
  f3.msg_case = PERFETTO__PROTOS__IPCFRAME__MSG_MSG_INVOKE_METHOD_REPLY;
  f3.msg_invoke_method_reply = &rep;
  static const uint8_t want_rep[] = {0x32, 0x04, 0x08, 0x01, 0x10, 0x01};
  assert_packs_to(&f3.base, want_rep, sizeof(want_rep));
}

static void commit_data_request_field_numbers(void **state) {
  (void)state;
  Perfetto__Protos__CommitDataRequest__ChunksToMove mv =
      PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNKS_TO_MOVE__INIT;
  mv.has_page = 1;
  mv.page = 1;
  mv.has_chunk = 1;
  mv.chunk = 2;
  mv.has_target_buffer = 1;
  mv.target_buffer = 3;
  Perfetto__Protos__CommitDataRequest__ChunksToMove *mvs[] = {&mv};

  uint8_t patch_bytes[] = {0xAB};
  Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch patch =
      PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__PATCH__INIT;
  patch.has_offset = 1;
  patch.offset = 7;
  patch.has_data = 1;
  patch.data.len = 1;
  patch.data.data = patch_bytes;
  Perfetto__Protos__CommitDataRequest__ChunkToPatch__Patch *patches[] = {
      &patch};
  Perfetto__Protos__CommitDataRequest__ChunkToPatch ctp =
      PERFETTO__PROTOS__COMMIT_DATA_REQUEST__CHUNK_TO_PATCH__INIT;
  ctp.has_target_buffer = 1;
  ctp.target_buffer = 4;
  ctp.has_writer_id = 1;
  ctp.writer_id = 5;
  ctp.has_chunk_id = 1;
  ctp.chunk_id = 6;
  ctp.n_patches = 1;
  ctp.patches = patches;
  ctp.has_has_more_patches = 1;
  ctp.has_more_patches = 1;
  Perfetto__Protos__CommitDataRequest__ChunkToPatch *ctps[] = {&ctp};

  Perfetto__Protos__CommitDataRequest req =
      PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
  req.n_chunks_to_move = 1;
  req.chunks_to_move = mvs;
  req.n_chunks_to_patch = 1;
  req.chunks_to_patch = ctps;
  req.has_flush_request_id = 1;
  req.flush_request_id = 9;
  static const uint8_t want[] = {
      0x0A, 0x06, 0x08, 0x01, 0x10, 0x02, 0x18, 0x03, /* chunks_to_move */
      0x12, 0x0F, 0x08, 0x04, 0x10, 0x05, 0x18, 0x06, /* chunks_to_patch */
      0x22, 0x05, 0x08, 0x07, 0x12, 0x01, 0xAB,       /*   patches */
      0x28, 0x01,                                     /*   has_more_patches */
      0x18, 0x09,                                     /* flush_request_id */
  };
  assert_packs_to(&req.base, want, sizeof(want));

  /* SMB-emulation fields of ChunksToMove. */
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field_by_name(
          &perfetto__protos__commit_data_request__chunks_to_move__descriptor,
          "data");
  assert_non_null(f);
  assert_int_equal(f->id, 4);
  assert_int_equal(f->type, PROTOBUF_C_TYPE_BYTES);
  f = protobuf_c_message_descriptor_get_field_by_name(
      &perfetto__protos__commit_data_request__chunks_to_move__descriptor,
      "chunk_incomplete");
  assert_non_null(f);
  assert_int_equal(f->id, 5);
  assert_int_equal(f->type, PROTOBUF_C_TYPE_BOOL);
}

static void trace_config_buffers_and_fill_policy(void **state) {
  (void)state;
  Perfetto__Protos__TraceConfig__BufferConfig buf =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__INIT;
  buf.has_size_kb = 1;
  buf.size_kb = 1024;
  buf.has_fill_policy = 1;
  buf.fill_policy =
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
  Perfetto__Protos__TraceConfig__BufferConfig *bufs[] = {&buf};
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  dsc.name = "track_event";
  Perfetto__Protos__TraceConfig__DataSource ds =
      PERFETTO__PROTOS__TRACE_CONFIG__DATA_SOURCE__INIT;
  ds.config = &dsc;
  Perfetto__Protos__TraceConfig__DataSource *dss[] = {&ds};
  Perfetto__Protos__TraceConfig cfg = PERFETTO__PROTOS__TRACE_CONFIG__INIT;
  cfg.n_buffers = 1;
  cfg.buffers = bufs;
  cfg.n_data_sources = 1;
  cfg.data_sources = dss;
  cfg.has_duration_ms = 1;
  cfg.duration_ms = 10000;
  static const uint8_t want[] = {
      0x0A, 0x05, 0x08, 0x80, 0x08, 0x20, 0x01, /* buffers */
      0x12, 0x0F, 0x0A, 0x0D, 0x0A, 0x0B,       /* data_sources.config.name */
      't',  'r',  'a',  'c',  'k',  '_',  'e',
      'v',  'e',  'n',  't',  0x18, 0x90, 0x4E, /* duration_ms = 10000 */
  };
  assert_packs_to(&cfg.base, want, sizeof(want));
  assert_int_equal(
      PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD, 2);
}

static void get_async_command_response_oneof_numbers(void **state) {
  (void)state;
  Perfetto__Protos__DataSourceConfig dsc =
      PERFETTO__PROTOS__DATA_SOURCE_CONFIG__INIT;
  dsc.name = "x";
  dsc.has_target_buffer = 1;
  dsc.target_buffer = 1;
  Perfetto__Protos__GetAsyncCommandResponse__StartDataSource start =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__START_DATA_SOURCE__INIT;
  start.has_new_instance_id = 1;
  start.new_instance_id = 42;
  start.config = &dsc;
  Perfetto__Protos__GetAsyncCommandResponse cmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  cmd.cmd_case =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_START_DATA_SOURCE;
  cmd.start_data_source = &start;
  static const uint8_t want_start[] = {
      0x0A, 0x09, 0x08, 0x2A, 0x12, 0x05, 0x0A, 0x01, 'x', 0x10, 0x01,
  };
  assert_packs_to(&cmd.base, want_start, sizeof(want_start));

  /* Flush: repeated ids are NOT packed (proto2 default, as in Perfetto). */
  uint64_t ids[] = {1, 2};
  Perfetto__Protos__GetAsyncCommandResponse__Flush flush =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__FLUSH__INIT;
  flush.n_data_source_ids = 2;
  flush.data_source_ids = ids;
  flush.has_request_id = 1;
  flush.request_id = 3;
  flush.has_flags = 1;
  flush.flags = 1;
  Perfetto__Protos__GetAsyncCommandResponse fcmd =
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__INIT;
  fcmd.cmd_case = PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH;
  fcmd.flush = &flush;
  static const uint8_t want_flush[] = {
      0x2A, 0x08, 0x08, 0x01, 0x08, 0x02, 0x10, 0x03, 0x18, 0x01,
  };
  assert_packs_to(&fcmd.base, want_flush, sizeof(want_flush));

  Perfetto__Protos__GetAsyncCommandResponse *back =
      perfetto__protos__get_async_command_response__unpack(
          NULL, sizeof(want_flush), want_flush);
  assert_non_null(back);
  assert_int_equal(back->cmd_case,
                   PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_FLUSH);
  assert_int_equal(back->flush->n_data_source_ids, 2);
  assert_int_equal(back->flush->request_id, 3);
  perfetto__protos__get_async_command_response__free_unpacked(back, NULL);

  assert_int_equal(
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_STOP_DATA_SOURCE, 2);
  assert_int_equal(
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_TRACING, 3);
  assert_int_equal(
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_SETUP_DATA_SOURCE, 6);
  assert_int_equal(
      PERFETTO__PROTOS__GET_ASYNC_COMMAND_RESPONSE__CMD_CLEAR_INCREMENTAL_STATE,
      7);
}

static void read_buffers_response_slices_use_field_2(void **state) {
  (void)state;
  uint8_t data[] = {0x40, 0x01};
  Perfetto__Protos__ReadBuffersResponse__Slice s =
      PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__SLICE__INIT;
  s.has_data = 1;
  s.data.len = sizeof(data);
  s.data.data = data;
  s.has_last_slice_for_packet = 1;
  s.last_slice_for_packet = 1;
  Perfetto__Protos__ReadBuffersResponse__Slice *ss[] = {&s};
  Perfetto__Protos__ReadBuffersResponse r =
      PERFETTO__PROTOS__READ_BUFFERS_RESPONSE__INIT;
  r.n_slices = 1;
  r.slices = ss;
  static const uint8_t want[] = {0x12, 0x06, 0x0A, 0x02,
                                 0x40, 0x01, 0x10, 0x01};
  assert_packs_to(&r.base, want, sizeof(want));

  Perfetto__Protos__EnableTracingResponse e =
      PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
  e.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
  e.disabled = 1;
  e.error = "e";
  static const uint8_t want_e[] = {0x08, 0x01, 0x1A, 0x01, 'e'};
  assert_packs_to(&e.base, want_e, sizeof(want_e));
}

struct field_expect {
  const ProtobufCMessageDescriptor *desc;
  const char *name;
  unsigned id;
  ProtobufCType type;
};

static void schema_field_numbers_match_perfetto(void **state) {
  (void)state;
  const struct field_expect want[] = {
      {&perfetto__protos__initialize_connection_request__descriptor,
       "shared_memory_page_size_hint_bytes", 1, PROTOBUF_C_TYPE_UINT32},
      {&perfetto__protos__initialize_connection_request__descriptor,
       "smb_scraping_mode", 4, PROTOBUF_C_TYPE_ENUM},
      {&perfetto__protos__initialize_connection_request__descriptor,
       "producer_provided_shmem", 6, PROTOBUF_C_TYPE_BOOL},
      {&perfetto__protos__initialize_connection_request__descriptor,
       "sdk_version", 8, PROTOBUF_C_TYPE_STRING},
      {&perfetto__protos__data_source_descriptor__descriptor, "id", 7,
       PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__data_source_descriptor__descriptor, "no_flush", 9,
       PROTOBUF_C_TYPE_BOOL},
      {&perfetto__protos__data_source_config__descriptor, "tracing_session_id",
       4, PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__data_source_config__descriptor, "track_event_config",
       113, PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__data_source_config__descriptor, "legacy_config", 1000,
       PROTOBUF_C_TYPE_STRING},
      {&perfetto__protos__trace_config__descriptor, "builtin_data_sources", 20,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_config__descriptor, "write_into_file", 8,
       PROTOBUF_C_TYPE_BOOL},
      {&perfetto__protos__trace_config__descriptor, "output_path", 29,
       PROTOBUF_C_TYPE_STRING},
      {&perfetto__protos__trace_config__descriptor,
       "data_source_stop_timeout_ms", 23, PROTOBUF_C_TYPE_UINT32},
      {&perfetto__protos__trace_config__descriptor, "unique_session_name", 22,
       PROTOBUF_C_TYPE_STRING},
      {&perfetto__protos__trace_config__descriptor, "incremental_state_config",
       21, PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_stats__buffer_stats__descriptor,
       "chunks_overwritten", 3, PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__trace_stats__buffer_stats__descriptor,
       "chunks_discarded", 18, PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__trace_stats__buffer_stats__descriptor,
       "trace_writer_packet_loss", 19, PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__trace_stats__buffer_stats__descriptor,
       "padding_bytes_written", 15, PROTOBUF_C_TYPE_UINT64},
      {&perfetto__protos__trace_packet__descriptor, "trace_config", 33,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_packet__descriptor, "trace_stats", 35,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_packet__descriptor, "synchronization_marker",
       36, PROTOBUF_C_TYPE_BYTES},
      {&perfetto__protos__trace_packet__descriptor, "compressed_packets", 50,
       PROTOBUF_C_TYPE_BYTES},
      {&perfetto__protos__trace_packet__descriptor, "service_event", 69,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_packet__descriptor, "track_descriptor", 60,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__trace_packet__descriptor, "interned_data", 12,
       PROTOBUF_C_TYPE_MESSAGE},
      {&perfetto__protos__clone_session_response__descriptor,
       "was_write_into_file", 5, PROTOBUF_C_TYPE_BOOL},
  };
  for (size_t i = 0; i < ARRAY_LEN(want); i++) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(want[i].desc,
                                                        want[i].name);
    assert_non_null(f);
    assert_int_equal(f->id, want[i].id);
    assert_int_equal(f->type, want[i].type);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(producer_port_methods_in_abi_order),
      cmocka_unit_test(consumer_port_methods_in_abi_order),
      cmocka_unit_test(trace_packet_trusted_fields_encode_with_abi_tags),
      cmocka_unit_test(trace_packet_sequence_fields_use_abi_tags),
      cmocka_unit_test(trace_file_is_repeated_packet_field_1),
      cmocka_unit_test(track_event_core_fields_encode_with_abi_tags),
      cmocka_unit_test(ipc_frame_bind_service_roundtrip),
      cmocka_unit_test(ipc_frame_invoke_and_peer_identity_tags),
      cmocka_unit_test(commit_data_request_field_numbers),
      cmocka_unit_test(trace_config_buffers_and_fill_policy),
      cmocka_unit_test(get_async_command_response_oneof_numbers),
      cmocka_unit_test(read_buffers_response_slices_use_field_2),
      cmocka_unit_test(schema_field_numbers_match_perfetto),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
