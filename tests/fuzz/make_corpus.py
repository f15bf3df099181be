#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets in tests/fuzz/corpus/.

    python3 tests/fuzz/make_corpus.py

Deterministic: rerunning it reproduces the committed files byte for byte
(stale files in the corpus directories are removed first, except the
regress-* inputs that fuzzers found, which are kept by hand). Seeds are
small (< 1 KiB) hand-built wire bytes; each name says what it exercises.
"""
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


# --- protobuf wire helpers ------------------------------------------------

def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def redundant_varint(v):
    """The writer's fixed 4-byte size header: 5 -> 85 80 80 00."""
    assert v <= 0x0FFFFFFF
    return bytes([(v & 0x7F) | 0x80, ((v >> 7) & 0x7F) | 0x80,
                  ((v >> 14) & 0x7F) | 0x80, (v >> 21) & 0x7F])


def tag(field, wire_type):
    return varint((field << 3) | wire_type)


def f_varint(field, v):
    return tag(field, 0) + varint(v)


def f_fixed64(field, v):
    return tag(field, 1) + struct.pack("<Q", v)


def f_fixed32(field, v):
    return tag(field, 5) + struct.pack("<I", v)


def f_len(field, payload):
    return tag(field, 2) + varint(len(payload)) + payload


def f_len_redundant(field, payload):
    return tag(field, 2) + redundant_varint(len(payload)) + payload


# --- IPC frames (perfetto/ipc/wire_protocol.proto) ------------------------

def ipc_frame(request_id, msg_field, msg):
    return f_varint(2, request_id) + f_len(msg_field, msg)


def bind_service(request_id, name):
    return ipc_frame(request_id, 3, f_len(1, name.encode()))


def bind_service_reply(request_id):
    methods = (f_len(3, f_varint(1, 1) + f_len(2, b"InitializeConnection")) +
               f_len(3, f_varint(1, 2) + f_len(2, b"CommitData")))
    return ipc_frame(request_id, 4, f_varint(1, 1) + f_varint(2, 1) + methods)


def invoke_method(request_id, service_id, method_id, args):
    return ipc_frame(request_id, 5, f_varint(1, service_id) +
                     f_varint(2, method_id) + f_len(3, args))


def invoke_reply(request_id, reply, has_more=False):
    body = f_varint(1, 1) + (f_varint(2, 1) if has_more else b"") + \
        f_len(3, reply)
    return ipc_frame(request_id, 6, body)


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def stream(split, stop, body):
    """fuzz_frame_decoder input: [split pattern][stop frame][stream]."""
    return bytes([split, stop]) + body


# Split patterns (see next_piece() in fuzz_frame_decoder.c).
BYTES = 0x00           # one byte per feed
FIXED_3 = 0x09         # (0x09 >> 2) + 1 = 3 bytes per feed
RANDOM = 0x06          # xorshift-sized feeds
SELF = 0x03            # sizes from the stream's own bytes, empty feeds too


def frame_corpus():
    bind = frame(bind_service(1, "ProducerPort"))
    reply = frame(bind_service_reply(1))
    commit = frame(invoke_method(2, 1, 2, f_len(1, f_varint(1, 0) +
                                                f_varint(2, 3))))
    too_large = struct.pack("<I", 131069)
    at_cap = struct.pack("<I", 131068)
    return {
        "bind_service_producer_port": stream(BYTES, 0, bind),
        "bind_service_whole": stream(0xFD, 0, bind),
        "two_frames_back_to_back": stream(FIXED_3, 0, bind + commit),
        "three_frames_self_split": stream(SELF, 0, bind + reply + commit),
        "reply_frames_random_split": stream(
            RANDOM, 0, reply + frame(invoke_reply(2, b"\x0a\x00", True)) +
            frame(invoke_reply(2, b""))),
        "zero_length_frame": stream(BYTES, 0, frame(b"") + bind + frame(b"")),
        "oversized_length": stream(FIXED_3, 0, bind + too_large + b"\x00" * 8),
        "oversized_length_first": stream(RANDOM, 0, b"\xff\xff\xff\xff"),
        "length_at_cap_partial": stream(SELF, 0, at_cap + b"\x10\x01" * 16),
        "split_header_tail": stream(BYTES, 0, bind + bind[:3]),
        "garbage_payload": stream(RANDOM, 0, frame(b"\xff" * 7) + bind),
        "callback_stops_at_second": stream(FIXED_3, 2, bind + commit + reply),
        "request_error": stream(SELF, 0, frame(
            ipc_frame(9, 7, f_len(1, b"unknown method")))),
        # The in-place reply reader's fallbacks: the reply twice (merged
        # by protobuf-c), a bool in two bytes, another oneof member after
        # the reply, an unknown field and a repeated reply_proto.
        "reply_twice": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(6, f_varint(1, 1)) +
            f_len(6, f_varint(2, 1) + f_len(3, b"ab")))),
        "reply_long_bool": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(6, tag(1, 0) + b"\x80\x01" +
                                   f_len(3, b"x")))),
        "reply_bool_past_64_bits": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(6, tag(2, 0) + b"\x80" * 9 + b"\x02"))),
        "reply_then_error": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(6, f_varint(1, 1)) +
            f_len(7, f_len(1, b"no")))),
        "invoke_twice": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(5, f_varint(1, 1)) +
            f_len(5, f_varint(2, 2) + f_len(3, b"ab")))),
        "invoke_service_id_past_32_bits": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(5, f_varint(1, 1 << 33) +
                                   f_varint(2, 1)))),
        "invoke_unknown_fields": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_len(5, f_varint(1, 1) + f_varint(2, 3) +
            f_fixed32(7, 9) + f_len(3, b"x") + f_len(3, b"yz") +
            f_varint(4, 1)))),
        "reply_unknown_fields": stream(0xFD, 0, frame(
            f_varint(2, 4) + f_fixed64(9, 1) + f_len(6, f_varint(1, 1) +
            f_len(3, b"one") + f_fixed32(5, 2) + f_len(3, b"two")))),
    }


# --- SMB chunks -----------------------------------------------------------

FIRST_CONT, LAST_CONT, NEEDS_PATCHING = 0x1, 0x2, 0x4
DROP = redundant_varint(0x0FFFFFFF)  # ff ff ff 7f
CHUNK_SIZE_DIV14 = 292              # ((4096 - 8) // 14) & ~3


def chunk_header(chunk_id, writer_id, count, flags):
    return struct.pack("<IHH", chunk_id, writer_id, count | (flags << 10))


def fragment(payload):
    return redundant_varint(len(payload)) + payload


def pad(chunk, size=CHUNK_SIZE_DIV14):
    assert len(chunk) <= size
    return chunk + b"\x00" * (size - len(chunk))


def trace_packet(seq, ts, name):
    track_event = f_varint(9, 1) + f_len(23, name)  # type, name
    return (f_varint(8, ts) + f_varint(10, seq) +
            f_len_redundant(11, track_event))


def chunk_corpus():
    p1 = trace_packet(1, 1000, b"frame")
    p2 = trace_packet(1, 1001, b"draw")
    p3 = trace_packet(1, 1002, b"swap")
    return {
        "clean_three_fragments": pad(chunk_header(1, 1, 3, 0) + fragment(p1) +
                                     fragment(p2) + fragment(p3)),
        "continuation_flags": pad(chunk_header(2, 1, 2,
                                               FIRST_CONT | LAST_CONT) +
                                  fragment(p1[5:]) + fragment(p2[:7])),
        "drop_marker_last": pad(chunk_header(3, 2, 2, FIRST_CONT) +
                                fragment(p1) + DROP),
        "drop_marker_not_last": pad(chunk_header(4, 2, 3, 0) + fragment(p1) +
                                    DROP + fragment(p2)),
        "fragment_overflow": chunk_header(5, 3, 2, 0) + fragment(p1) +
                             redundant_varint(200) + p2,
        "header_truncated": chunk_header(6, 3, 2, 0) + fragment(p1) +
                            b"\x85\x80",
        "bad_varint_five_bytes": chunk_header(7, 3, 1, 0) +
                                 b"\x85\x80\x80\x80\x00" + b"abcde",
        "open_last_fragment": pad(chunk_header(8, 4, 2, NEEDS_PATCHING) +
                                  fragment(p1) + redundant_varint(0)),
        "short_varint_sizes": chunk_header(9, 4, 3, 0) +
                              varint(len(p1)) + p1 + b"\x82\x00ab" + b"\x00",
        "writer_id_zero": chunk_header(10, 0, 1, 0) + fragment(p1),
        "flags_without_packets": pad(chunk_header(11, 5, 0, FIRST_CONT), 64),
        "unknown_flags": chunk_header(12, 5, 1, 0x28) + fragment(p3),
        "too_small": b"\x01\x00\x00\x00\x01",
        "header_only": chunk_header(13, 6, 0, 0),
    }


# --- protobuf messages ----------------------------------------------------

def pb_corpus():
    p1 = trace_packet(7, 123456789, b"main")
    nested = b"\x08\x01"
    for depth in range(10):
        nested = f_len(1, nested + f_varint(2, depth))
    interned = f_len(12, f_len(2, f_varint(1, 1) + f_len(2, b"cat")))
    return {
        "trace_packet": p1,
        "trace_two_packets": f_len(1, p1) +
                             f_len(1, trace_packet(7, 123456790, b"idle")),
        "all_wire_types": (f_varint(1, 150) + f_fixed64(2, 2**63 + 5) +
                           f_len(3, b"hello") + f_fixed32(4, 0xDEADBEEF) +
                           f_varint(5, 2**64 - 1)),
        "redundant_lengths": f_len_redundant(11, f_len_redundant(
            4, f_varint(1, 1))) + interned,
        "deep_nesting": nested,
        "max_field_id": f_varint(0x1FFFFFFF, 1) + f_len(0x1FFFFFFF, b"x"),
        "truncated_len": tag(3, 2) + varint(50) + b"short",
        "group_wire_type": f_varint(1, 1) + tag(2, 3) + tag(2, 4),
        "reserved_wire_type": f_varint(1, 1) + tag(2, 6) + b"\x00",
        "field_id_zero": b"\x00\x01",
        "varint_eleven_bytes": tag(1, 0) + b"\xff" * 10 + b"\x01",
        "tag_over_32_bits": b"\x80\x80\x80\x80\x80\x01",
        "fixed64_truncated": tag(1, 1) + b"\x01\x02\x03",
        "empty_len_fields": f_len(1, b"") + f_len(2, b"") + f_len(3, b""),
    }


# --- CommitDataRequest (see fuzz_commit_data.c) ---------------------------

def commit_data_corpus():
    def move(page, chunk, target, extra=b""):
        return f_len(1, f_varint(1, page) + f_varint(2, chunk) +
                     f_varint(3, target) + extra)

    def patch(target, writer, chunk_id, patches, more=None):
        body = f_varint(1, target) + f_varint(2, writer) + f_varint(3, chunk_id)
        for off, data in patches:
            body += f_len(4, f_varint(1, off) + f_len(2, data))
        if more is not None:
            body += f_varint(5, 1 if more else 0)
        return f_len(2, body)

    return {
        "moves_and_flush": move(0, 0, 1) + move(3, 2, 1) + f_varint(3, 42),
        "inline_data": move(0, 0, 1, f_len(4, bytes([1, 0, 0, 0, 1, 0, 0, 0])) +
                            f_varint(5, 1)),
        "patches": patch(1, 1, 7, [(4, b"abcd"), (12, b"efgh")], more=True),
        "moves_patches_interleaved": (patch(1, 2, 9, [(0, b"wxyz")]) +
                                      move(1, 0, 1) +
                                      patch(1, 2, 10, [], more=False)),
        "field_twice": move(1, 1, 1, f_varint(1, 5)) + f_varint(3, 1) +
                       f_varint(3, 2),
        "wide_varint": f_len(1, f_varint(1, 2**40 + 7)),
        "wrong_wire_type": f_len(1, f_fixed32(1, 3)),
        "wrong_wire_type_top": f_varint(1, 3),
        "bool_as_len": f_len(1, f_varint(1, 1) + f_len(5, b"\x01")),
        # Bools as protobuf-c reads them: set bits only past 64 (true), a
        # padded 0 (false).
        "bool_bits_past_64": f_len(1, f_varint(1, 1) + tag(5, 0) +
                                   b"\x80" * 9 + b"\x02") +
                             f_len(2, tag(5, 0) + b"\x80\x00"),
        # A 10-byte tag whose high bits fall off: protobuf-c refuses it.
        "tag_of_ten_bytes": bytes([0xF8] * 4 + [0x80] * 5 + [0x20, 0x5B]),
        # A length prefix padded to 6 bytes: protobuf-c refuses it too.
        "length_of_six_bytes": bytes([0x0A, 0x00, 0x0A] + [0x80] * 5 + [0x00]),
        "unknown_fields": f_len(1, f_varint(9, 1) + f_fixed64(10, 5)) +
                          f_len(7, b"zz"),
        "truncated_move": tag(1, 2) + varint(10) + f_varint(1, 1),
        "bad_patch_entry": f_len(2, f_len(4, tag(1, 0))),
        "empty": b"",
    }


# --- trace buffer programs (see fuzz_trace_buffer.c) -----------------------

TB_RAW, TB_BUILT, TB_PATCH, TB_READ, TB_GONE, TB_CLONE = range(6)
INCOMPLETE = 0x80


def tb_built(producer, chunk_id, writer, flags, sizes, pad=0):
    """A chunk built by the harness: ids are signed bytes (-1 = 0xFFFFFFFF),
    sizes 0xFF = drop marker, 0xFE = runs past the end."""
    return bytes([TB_BUILT, producer, chunk_id & 0xFF,
                  (writer - 1) | (flags << 2), len(sizes)] + sizes + [pad])


def tb_raw(producer, chunk):
    return bytes([TB_RAW, producer]) + struct.pack("<H", len(chunk)) + chunk


def tb_patch(producer, writer, chunk_id, patches, has_more=False):
    out = bytes([TB_PATCH, producer - 1, writer, chunk_id & 0xFF,
                 len(patches) | (0x80 if has_more else 0)])
    for off, data in patches:
        out += struct.pack("<H", off) + data
    return out


def tb_read(n=16):
    return bytes([TB_READ, n - 1])


def tb_gone(producer):
    return bytes([TB_GONE, producer - 1])


def tb_clone():
    return bytes([TB_CLONE])


def trace_buffer_corpus():
    ring_4k, discard_4k, ring_16k = 0x00, 0x01, 0x06
    wrap = b"".join(tb_built(0, i, 1 + i % 3, 0, [200, 100], 200) +
                    (tb_read(2) if i % 3 == 0 else b"") for i in range(12))
    return {
        "fragmented_across_three_chunks": bytes([ring_16k]) +
            tb_built(0, 0, 1, LAST_CONT, [10, 20]) +
            tb_built(0, 1, 1, FIRST_CONT | LAST_CONT, [30]) +
            tb_built(0, 2, 1, FIRST_CONT, [5, 7]) + tb_read(),
        "stall_then_continue": bytes([ring_16k]) +
            tb_built(0, 0, 1, LAST_CONT, [10, 20]) +
            tb_built(1, 0, 1, 0, [9, 9]) + tb_read() +
            tb_built(0, 1, 1, FIRST_CONT, [5]) + tb_read(),
        "ring_wraps": bytes([ring_4k]) + wrap + tb_read(),
        "discard_fills_up": bytes([discard_4k]) + wrap + tb_read() +
            tb_built(0, 20, 1, 0, [50], 100) + tb_read(),
        "needs_patching_then_patched": bytes([ring_16k]) +
            tb_built(0, 3, 2, NEEDS_PATCHING | LAST_CONT, [16, 16]) +
            tb_built(0, 4, 2, FIRST_CONT, [8]) + tb_read() +
            tb_patch(1, 2, 3, [(24, b"\x01\x02\x03\x04")], True) +
            tb_patch(1, 2, 3, [(0, b"\x88\x80\x80\x00")]) +
            tb_patch(2, 2, 3, [(60000, b"abcd")]) + tb_read(),
        "scraped_then_complete": bytes([ring_16k]) +
            tb_built(INCOMPLETE, 7, 1, 0, [12, 12, 0], 10) + tb_read() +
            tb_built(0, 7, 1, 0, [12, 12, 12], 10) + tb_read(),
        "producer_gone_mid_packet": bytes([ring_16k]) +
            tb_built(0, 0, 1, LAST_CONT, [10, 20]) +
            tb_built(INCOMPLETE | 1, 0, 3, 0, [4, 0]) + tb_read() +
            tb_gone(1) + tb_read() + tb_built(0, 1, 1, FIRST_CONT, [6]),
        "drop_marker_and_overflow": bytes([ring_16k]) +
            tb_built(0, 0, 1, LAST_CONT, [10, 20]) +
            tb_built(0, 1, 1, FIRST_CONT, [0xFF]) +
            tb_built(0, 2, 1, 0, [3, 0xFE, 4]) + tb_read(),
        "chunk_ids_wrap_out_of_order": bytes([ring_16k]) +
            tb_built(2, 1, 2, 0, [5]) + tb_built(2, -2, 2, 0, [6]) +
            tb_built(2, 0, 2, FIRST_CONT, [7]) +
            tb_built(2, -1, 2, LAST_CONT, [8]) + tb_read(),
        "raw_chunks": bytes([ring_4k]) +
            tb_raw(0, chunk_header(1, 1, 2, 0) + fragment(b"abc") +
                   fragment(b"defg")) +
            tb_raw(1, chunk_header(2, 0, 1, 0) + fragment(b"x")) +
            tb_raw(2, b"\x01\x02\x03") + tb_read(),
        "writer_ids_out_of_range": bytes([ring_4k]) +
            tb_raw(0, chunk_header(0, 0x8000, 1, 0) + fragment(b"high")) +
            tb_raw(0, chunk_header(0, 0xFFFF, 1, 0) + fragment(b"max")) +
            tb_raw(0, chunk_header(0, 0x7FFF, 1, 0) + fragment(b"last")) +
            tb_read(),
        "unpatched_then_producer_gone": bytes([ring_16k]) +
            tb_built(0, 0, 1, NEEDS_PATCHING, [10, 20]) +
            tb_built(0, 1, 1, 0, [6]) + tb_read() +
            tb_gone(1) + tb_gone(1) + tb_read(),
        # Part-full chunks (a few bytes, then up to 1 KiB of padding): each
        # record keeps its fragments only, so the ring holds many.
        "part_full_chunks_wrap": bytes([ring_4k]) + b"".join(
            tb_built(0, i, 1 + i % 2, 0, [20, 0xFF] if i == 9 else [20], 250) +
            (tb_read(1) if i % 7 == 0 else b"") for i in range(40)) +
            tb_patch(1, 1, 38, [(900, b"wxyz")]) + tb_read(),
        "clone_in_flight": bytes([ring_16k]) +
            tb_built(0, 0, 1, LAST_CONT, [10, 20], 100) +
            tb_built(INCOMPLETE, 0, 2, 0, [8, 0], 100) +
            tb_built(0, 0, 3, NEEDS_PATCHING, [6, 6], 100) +
            tb_built(0, 1, 3, 0, [0xFF], 100) + tb_clone() + tb_read() +
            tb_built(0, 1, 1, FIRST_CONT, [4]) + tb_clone() + tb_gone(1) +
            tb_clone() + tb_read(),
    }


# --- relay frame filter (see fuzz_relay_filter.c) ---------------------------

RF_CLIENT, RF_SERVICE = 0, 1
CP = 1            # ConsumerPort's id in the harness's synthetic bind
RELAY = 1000      # TracegateRelay
(M_ENABLE, M_DISABLE, M_READ, M_FREE, M_FLUSH, M_START, M_CHANGE, M_DETACH,
 M_ATTACH, M_STATS, M_OBSERVE, M_QUERY, M_CAPS, M_BUGREPORT,
 M_CLONE) = range(1, 16)


def rf(direction, payload):
    """One record: [dir][u16 LE len][IPCFrame payload]."""
    return bytes([direction]) + struct.pack("<H", len(payload)) + payload


def rf_call(request_id, service, method, args=b"", drop=False):
    body = (f_varint(1, service) + f_varint(2, method) + f_len(3, args) +
            (f_varint(4, 1) if drop else b""))
    return rf(RF_CLIENT, ipc_frame(request_id, 5, body))


def rf_reply(request_id, body=b"", success=True, more=False):
    msg = f_varint(1, 1 if success else 0) + \
        (f_varint(2, 1) if more else b"") + f_len(3, body)
    return rf(RF_SERVICE, ipc_frame(request_id, 6, msg))


def trace_config(extra=b""):
    # buffers { size_kb: 1024 } data_sources { config { name: "test.ds" } }
    return (f_len(1, f_varint(1, 1024)) +
            f_len(2, f_len(1, f_len(1, b"test.ds"))) + extra)


def enable_args(extra=b""):
    return f_len(1, trace_config(extra))


def relay_filter_corpus():
    slices = f_len(2, f_len(1, b"\x0a\x02hi") + f_varint(2, 1))
    return {
        "bind_and_query": rf(RF_CLIENT, bind_service(2, "ConsumerPort")) +
            rf(RF_SERVICE, bind_service_reply(2)) +
            rf_call(3, CP, M_QUERY) + rf_reply(3, b"", more=True) +
            rf_reply(3),
        "enable_then_disabled": rf_call(4, CP, M_ENABLE, enable_args()) +
            rf_call(5, CP, M_FLUSH, f_varint(1, 1000)) + rf_reply(5) +
            rf_call(6, CP, M_DISABLE) + rf_reply(6) +
            rf_reply(4, f_varint(1, 1)),
        "enable_write_into_file": rf_call(7, CP, M_ENABLE,
                                          enable_args(f_varint(8, 1))),
        "enable_output_path": rf_call(8, CP, M_ENABLE,
                                      enable_args(f_len(29, b"/tmp/t"))),
        "enable_bad_args": rf_call(9, CP, M_ENABLE, b"\x0a\x7f\x08"),
        "detach_with_key": rf_call(10, CP, M_DETACH, f_len(1, b"k")) +
            rf_reply(10) + rf_call(11, CP, M_ATTACH, f_len(1, b"k")) +
            rf_reply(11, f_len(1, trace_config())),
        "attach_foreign_key": rf_call(12, CP, M_ATTACH, f_len(1, b"bob/k")) +
            rf_call(13, CP, M_ATTACH, f_len(1, b"")) +
            rf_call(14, CP, M_DETACH, f_len(1, b"a b")),
        "relay_service_calls": rf(RF_CLIENT, bind_service(15,
                                                          "TracegateRelay")) +
            rf_call(16, RELAY, 1) + rf_call(17, RELAY, 2) +
            rf_call(18, RELAY, 3, f_len(1, b"resume")) +
            rf_call(19, RELAY, 3, f_len(1, b"x/y")) + rf_call(20, RELAY, 9),
        "session_key_enable_then_drop": rf_call(21, RELAY, 3,
                                                f_len(1, b"r1")) +
            rf_call(22, CP, M_ENABLE, enable_args()) +
            rf_reply(2**64 - 1, b"", True),
        "reserved_request_id": rf_call(21, RELAY, 3, f_len(1, b"r2")) +
            rf_call(22, CP, M_ENABLE, enable_args()) +
            rf_call(2**64 - 1, CP, M_READ) + rf_reply(2**64 - 1, b"", True),
        "read_buffers_stream": rf_call(23, CP, M_READ) +
            rf_reply(23, slices, more=True) + rf_reply(23, slices) +
            rf_reply(23, slices),
        "client_sends_replies_and_identity": rf(RF_CLIENT,
                                                bind_service_reply(24)) +
            rf(RF_CLIENT, ipc_frame(25, 6, f_varint(1, 1))) +
            rf(RF_CLIENT, ipc_frame(26, 7, f_len(1, b"err"))) +
            rf(RF_CLIENT, ipc_frame(27, 8, f_varint(2, 0) +
                                    f_len(4, b"root"))) +
            rf(RF_CLIENT, f_len(1, b"data_for_testing")),
        "unknown_service_and_methods": rf(RF_CLIENT,
                                          bind_service(28, "ProducerPort")) +
            rf_call(29, 5, 1) + rf_call(30, CP, 99) +
            rf_call(31, CP, M_BUGREPORT) + rf_call(32, CP, M_CLONE, b"",
                                                   drop=True),
        "garbage": rf(RF_CLIENT, b"\xff" * 9) +
            rf(RF_CLIENT, b"\x1a\x10\x0a") +
            rf(RF_SERVICE, b"\x10\x80\x80") +
            rf(RF_CLIENT, invoke_method(33, CP, M_QUERY, b"") + b"\x98\x06"),
    }


# --- fuzz_ftrace_page -------------------------------------------------------

FT_GENERIC_FORMAT = (
    b"name: hrtimer_start\nID: 90\nformat:\n"
    b"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    b"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    b"\tfield:s64 expires;\toffset:8;\tsize:8;\tsigned:1;\n"
    b"\tfield:__data_loc char[] name;\toffset:16;\tsize:4;\tsigned:0;\n")


def ft_rec(delta, payload):
    """A data record: type_len words, or type_len 0 with a length word."""
    payload += b"\0" * (-len(payload) % 4)
    if len(payload) <= 112:
        return struct.pack("<I", (len(payload) // 4) | delta << 5) + payload
    return struct.pack("<II", delta << 5, len(payload) + 4) + payload


def ft_switch(prev, prev_pid, next_, next_pid):
    return (struct.pack("<HBBi", 372, 1, 0, prev_pid) +
            prev.ljust(16, b"\0") + struct.pack("<iiq", prev_pid, 120, 1) +
            next_.ljust(16, b"\0") + struct.pack("<ii", next_pid, 120))


def ft_page(ts, records, lost=False, commit=None):
    body = b"".join(records)
    size = len(body) if commit is None else commit
    return struct.pack("<QQ", ts, size | (1 << 31 if lost else 0)) + body


# Groups of fuzz_ftrace_page.c's groups[], by flag bits 1-3.
FT_GROUPS = ["fuzz", "sched", "power", "irq", "raw_syscalls", "ftrace",
             "task", "block"]


def ft_input(page, fmt=b"", compact=False, group="fuzz", segment=4):
    flags = (1 if compact else 0) | FT_GROUPS.index(group) << 1
    flags |= (segment - 4) // 2 << 4
    return bytes([flags]) + struct.pack("<H", len(fmt)) + fmt + page


def ft_format(name, id_, fields):
    """A format file: common_type, common_flags, common_pid, then |fields|
    as (declaration, offset, size, signed)."""
    out = (b"name: %s\nID: %d\nformat:\n" % (name, id_) +
           b"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
           b"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
           b"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n")
    for decl, off, size, signed in fields:
        out += b"\tfield:%s;\toffset:%d;\tsize:%d;\tsigned:%d;\n" % (
            decl, off, size, signed)
    return out


def ft_head(id_, pid):
    return struct.pack("<HBBi", id_, 1, 0, pid)


# Formats of Perfetto's events, to seed their field plans: every layout a
# plan reads (scalars of each size and sign, char[16], __data_loc, a tail,
# an array).
FT_FREQ_FORMAT = ft_format(b"cpu_frequency", 200, [
    (b"u32 state", 8, 4, 0), (b"u32 cpu_id", 12, 4, 0)])
FT_SYS_ENTER_FORMAT = ft_format(b"sys_enter", 201, [
    (b"long id", 8, 8, 1), (b"unsigned long args[6]", 16, 48, 0)])
FT_IRQ_FORMAT = ft_format(b"irq_handler_entry", 202, [
    (b"short irq", 8, 2, 1), (b"__data_loc char[] name", 12, 4, 0)])
FT_PRINT_FORMAT = ft_format(b"print", 203, [
    (b"unsigned long ip", 8, 8, 0), (b"char buf[]", 16, 0, 0)])
FT_WAKING_FORMAT = ft_format(b"sched_waking", 204, [
    (b"char comm[16]", 8, 16, 0), (b"pid_t pid", 24, 4, 1),
    (b"int prio", 28, 4, 1), (b"int target_cpu", 32, 4, 1)])
FT_TASK_FORMAT = ft_format(b"task_newtask", 205, [
    (b"pid_t pid", 8, 4, 1), (b"char comm[12]", 12, 12, 0),
    (b"unsigned long clone_flags", 24, 8, 0), (b"s8 oom_score_adj", 32, 1, 1)])


def ftrace_page_corpus():
    sw = [ft_rec(10, ft_switch(b"bash", 42, b"kworker/0:1", 7)),
          ft_rec(5, ft_switch(b"kworker/0:1", 7, b"bash", 42))]
    generic = struct.pack("<HBBiqI", 90, 0, 0, 3, -5, (4 << 16) | 20) + b"tmr\0"
    return {
        "switches": ft_input(ft_page(1000, sw)),
        "switches_compact": ft_input(ft_page(1000, sw), compact=True),
        "time_records": ft_input(ft_page(0, [
            sw[0],
            struct.pack("<II", 30 | 7 << 5, 3),          # time extend
            struct.pack("<II", 29 | 1 << 5, 8) + b"\0" * 4,  # padding
            struct.pack("<II", 31 | 9 << 5, 2),          # absolute stamp
            sw[1],
            struct.pack("<I", 29)])),                    # end padding
        "long_record": ft_input(ft_page(5, [ft_rec(1, generic + b"x" * 120)]),
                                FT_GENERIC_FORMAT),
        "generic": ft_input(ft_page(5, [ft_rec(1, generic)]), FT_GENERIC_FORMAT),
        "lost": ft_input(ft_page(9, sw, lost=True), compact=True),
        "commit_past_end": ft_input(ft_page(9, sw, commit=4000)),
        "length_past_end": ft_input(ft_page(9, [struct.pack("<II", 0, 999)])),
        "truncated_header": ft_input(b"\x01\x02\x03"),
        "plan_scalars": ft_input(ft_page(1 << 40, [
            ft_rec(1, ft_head(200, 0) + struct.pack("<II", 2400000, 3)),
            ft_rec(2, ft_head(200, 0) + struct.pack("<II", 0xffffffff, 0)),
            ft_rec(3, ft_head(200, 0) + struct.pack("<I", 5))]),  # truncated
            FT_FREQ_FORMAT, group="power", segment=10),
        "plan_array": ft_input(ft_page(7, [
            ft_rec(1, ft_head(201, 9) + struct.pack(
                "<q6Q", -1, 0, 127, 128, 1 << 56, 2**64 - 1, 2**63 + 5))]),
            FT_SYS_ENTER_FORMAT, group="raw_syscalls", segment=6),
        "plan_data_loc": ft_input(ft_page(7, [
            ft_rec(1, ft_head(202, 0) + struct.pack("<hHI", -7, 0, 5 << 16 | 16)
                   + b"acpi\0")]),
            FT_IRQ_FORMAT, group="irq", segment=12),
        "plan_tail": ft_input(ft_page(2**60, [
            ft_rec(1, ft_head(203, 77) + struct.pack("<Q", 0xffffffff81234567)
                   + b"hello marker\n\0")]),
            FT_PRINT_FORMAT, group="ftrace", segment=8),
        "plan_chars": ft_input(ft_page(3, [
            ft_rec(1, ft_head(205, 1) + struct.pack("<i", 42) +
                   b"twelve-bytes" + struct.pack("<Qb", 0x11, -3))]),
            FT_TASK_FORMAT, group="task", segment=20),
        "compact_waking": ft_input(ft_page(3, sw + [
            ft_rec(1, ft_head(204, 7) + b"0123456789abcdef" +
                   struct.pack("<iii", 42, 120, 1))]),
            FT_WAKING_FORMAT, compact=True, group="sched", segment=34),
    }


def sc_entry(host, sni, expires, session, own=b"\x01" * 32, ca=b"\x09" * 32):
    return (struct.pack("<H", len(host)) + host + struct.pack("<H", len(sni)) +
            sni + own + ca + struct.pack("<QI", expires, len(session)) +
            session)


def sc_file(entries, count=None):
    n = len(entries) if count is None else count
    return b"TGSESS\x00\x01" + struct.pack("<I", n) + b"".join(entries)


def session_cache_corpus():
    # fuzz_session_cache.c parses at NOW = 1700000000.
    now = 1700000000
    live = sc_entry(b"relay.test:7467", b"relay.test", now + 3600, b"S" * 40)
    other = sc_entry(b"[::1]:7467", b"", now + 60, b"T" * 8,
                     own=b"\x02" * 32)
    return {
        "one": sc_file([live]),
        "two": sc_file([live, other]),
        "stale": sc_file([sc_entry(b"h:1", b"n", now - 1, b"x")]),
        "too_far": sc_file([sc_entry(b"h:1", b"n", now + 10**6, b"x")]),
        "duplicate": sc_file([live, live]),
        "truncated": sc_file([live])[:-5],
        "trailing": sc_file([live]) + b"\x00",
        "count_too_big": sc_file([live], count=0xFFFFFFFF),
        "empty_session": sc_file([sc_entry(b"h:1", b"n", now + 5, b"")]),
        "bad_host": sc_file([sc_entry(b"h\x00:1", b"n", now + 5, b"x")]),
        "bad_magic": b"TGSESS\x00\x02" + b"\x00" * 4,
        "empty": b"",
    }


# --- fuzz_tls_record ---------------------------------------------------------

# ctl byte (see fuzz_tls_record.c): cipher, mode B, pieces, damage.
TR_AES128, TR_AES256, TR_CHACHA = 0, 1, 2
TR_MODE_B, TR_PIECES, TR_FLIP, TR_CUT = 0x04, 0x08, 0x10, 0x20
TR_MFL512 = 0x40


def tr_header(rtype, length, version=b"\x03\x03"):
    return bytes([rtype]) + version + struct.pack(">H", length)


def tr_a(ctl, seed, ciphertext):
    """Mode A: [ctl][seed u16 LE][hostile ciphertext]. The key is the
    harness's, so these only reach the header checks and the tag check."""
    return bytes([ctl]) + struct.pack("<H", seed) + ciphertext


def tr_b(ctl, seed, ops, pos=0, xor=0):
    """Mode B: [ctl][seed][pos u24 LE][xor][script]; the harness seals it."""
    return (bytes([ctl | TR_MODE_B]) + struct.pack("<H", seed) +
            struct.pack("<I", pos)[:3] + bytes([xor]) + ops)


def tr_write(data):
    assert 0 < len(data) < 0x8000
    return struct.pack("<H", len(data)) + data


def tr_fill(n, byte):
    assert 0 < n < 0x8000
    return struct.pack("<H", 0x8000 | n) + bytes([byte])


def tr_alert(level, desc):
    return struct.pack("<H", 0x8000) + bytes([level, desc])


def tr_raw(rtype, body):
    return struct.pack("<H", 0) + bytes([rtype, len(body)]) + body


def tls_record_corpus():
    # Sealed sizes: GCM 5 + 8 + n + 16, CHACHA20-POLY1305 5 + n + 16.
    hello = tr_write(b"hello, world\n")
    return {
        "a_empty": tr_a(TR_AES128, 0, b""),
        "a_gcm128_app_data": tr_a(TR_AES128, 1000,
                                  tr_header(23, 32) + bytes(range(32))),
        "a_gcm256_two_records_pieces": tr_a(
            TR_AES256 | TR_PIECES, 3,
            tr_header(23, 40) + b"\x01" * 40 + tr_header(21, 26) +
            b"\x02" * 26),
        "a_chacha_alert": tr_a(TR_CHACHA, 50, tr_header(21, 18) + b"\x00" * 18),
        "a_chacha_too_short": tr_a(TR_CHACHA, 7, tr_header(23, 15) +
                                   b"\x00" * 15),
        "a_gcm_too_short": tr_a(TR_AES256, 7, tr_header(23, 23) +
                                b"\x00" * 23),
        "a_handshake_type": tr_a(TR_AES128, 9, tr_header(22, 28) +
                                 b"\x00" * 28),
        "a_bad_version": tr_a(TR_AES128, 9, tr_header(23, 32, b"\x03\x01") +
                              b"\x00" * 32),
        "a_oversized_length": tr_a(TR_AES128, 9, tr_header(23, 16409) +
                                   b"\x00" * 64),
        "a_max_length_partial": tr_a(TR_CHACHA, 9, tr_header(23, 16408) +
                                     b"\x00" * 100),
        "a_header_split_pieces": tr_a(TR_AES128 | TR_PIECES, 0,
                                      tr_header(23, 40) + b"\xaa" * 40),
        "b_gcm128_hello": tr_b(TR_AES128, 100, hello),
        "b_gcm256_lines": tr_b(TR_AES256, 20, tr_write(b"line one\n") +
                               tr_write(b"line two\n") + hello),
        "b_chacha_fill_two_records": tr_b(TR_CHACHA, 19999,
                                          tr_fill(20000, 0x41) +
                                          tr_write(b"tail")),
        "b_gcm_max_record": tr_b(TR_AES128, 16383, tr_fill(16384, 0x07) +
                                 tr_fill(16385, 0x08)),
        "b_cap_one_pieces": tr_b(TR_AES256 | TR_PIECES, 0,
                                 tr_write(b"x" * 64) + tr_fill(300, 7)),
        "b_warning_then_close": tr_b(TR_CHACHA, 5, tr_write(b"before") +
                                     tr_alert(1, 90) + tr_write(b"after") +
                                     tr_alert(1, 0) + tr_write(b"ignored")),
        "b_fatal_alert": tr_b(TR_AES128, 5, tr_write(b"data") +
                              tr_alert(2, 40) + hello),
        "b_empty_records": tr_b(TR_CHACHA, 5, tr_raw(23, b"") +
                                tr_raw(23, b"") + tr_write(b"z") +
                                tr_raw(23, b"")),
        "b_hello_request": tr_b(TR_AES256, 5, tr_write(b"a") +
                                tr_raw(22, b"\x00\x00\x00\x00")),
        "b_alert_wrong_size": tr_b(TR_AES128, 5, tr_raw(21, b"\x01")),
        "b_raw_warning_alert": tr_b(TR_CHACHA, 5, tr_raw(21, b"\x01\x64") +
                                    hello),
        "b_flip_tag": tr_b(TR_AES128 | TR_FLIP, 30, hello + hello, pos=80,
                           xor=0x01),
        "b_flip_type": tr_b(TR_CHACHA | TR_FLIP, 30, hello, pos=0, xor=0x02),
        "b_flip_version": tr_b(TR_AES256 | TR_FLIP, 30, hello, pos=2,
                               xor=0x01),
        "b_flip_length_grows": tr_b(TR_AES128 | TR_FLIP, 30, hello + hello,
                                    pos=3, xor=0x10),
        "b_flip_explicit_nonce_pieces": tr_b(TR_AES256 | TR_FLIP |
                                             TR_PIECES, 7, hello + hello,
                                             pos=47, xor=0x80),
        "b_cut_mid_record": tr_b(TR_CHACHA | TR_CUT, 30, hello + hello,
                                 pos=50),
        "b_cut_in_header": tr_b(TR_AES128 | TR_CUT, 30, hello + hello,
                                pos=44),
        "b_four_empty_records": tr_b(TR_CHACHA, 5, tr_raw(23, b"") * 3 +
                                     tr_write(b"z") + tr_raw(23, b"") * 4 +
                                     hello),
        "b_six_warnings": tr_b(TR_AES128, 5, tr_alert(1, 100) * 5 +
                               tr_write(b"ok") + tr_alert(1, 100) * 6 +
                               hello),
        "b_mfl512_split_writes": tr_b(TR_AES256 | TR_MFL512, 700,
                                      tr_fill(3000, 0x33) + hello),
        "a_mfl512_oversized": tr_a(TR_AES128 | TR_MFL512, 9,
                                   tr_header(23, 513 + 24) + b"\x00" * 100),
        "a_chacha_over_plain_max": tr_a(TR_CHACHA, 9, tr_header(23, 16408) +
                                        b"\x00" * 100),
    }


# --- fuzz_tls_ecdsa ---------------------------------------------------------

# ctl byte (see fuzz_tls_ecdsa.c): curve (% 3), bit 2 near a valid signature.
EC_P256, EC_P384, EC_P521, EC_NEAR = 0, 1, 2, 4


def ec_input(ctl, digest, rest=b""):
    return bytes([ctl, len(digest) - 1]) + digest + rest


def der_int(v):
    b = v.to_bytes((v.bit_length() + 8) // 8 or 1, "big")
    return b"\x02" + bytes([len(b)]) + b


def ec_der(r, s, extra=b""):
    body = der_int(r) + der_int(s)
    return b"\x30" + bytes([len(body)]) + body + extra


def tls_ecdsa_corpus():
    d32 = bytes(range(32))
    d48 = bytes(range(100, 148))
    d64 = bytes(range(200, 256)) + bytes(8)
    one_bit = bytes(20) + b"\x01" + bytes(51)
    return {
        "near_valid_p256": ec_input(EC_NEAR | EC_P256, d32),
        "near_valid_p384": ec_input(EC_NEAR | EC_P384, d48),
        "near_valid_p521": ec_input(EC_NEAR | EC_P521, d64),
        "near_long_digest_p256": ec_input(EC_NEAR | EC_P256, d64),
        "near_short_digest_p384": ec_input(EC_NEAR | EC_P384, b"\x07"),
        "near_one_bit_p256": ec_input(EC_NEAR | EC_P256, d32, one_bit),
        "near_extra_bytes_p256": ec_input(EC_NEAR | EC_P256, d32,
                                          bytes(72) + b"\x00\x00"),
        "raw_small_ints": ec_input(EC_P256, d32, ec_der(1, 1)),
        "raw_zero_ints": ec_input(EC_P384, d48, ec_der(0, 0)),
        "raw_order_sized": ec_input(EC_P256, d32, ec_der(2**256 - 1,
                                                         2**255 + 19)),
        "raw_trailing": ec_input(EC_P256, d32, ec_der(5, 7, b"\x00")),
        "raw_not_der": ec_input(EC_P521, d64, b"\x30\x81\x06\x02\x01\x01"
                                b"\x02\x01\x01"),
        "raw_empty": ec_input(EC_P256, d32),
    }


def trace_filter_corpus():
    """fuzz_trace_filter input: [n][n words, 3 bytes LE][mode][cut a][cut b]
    [packet]. The words are filter opcodes, (field << 3) | op."""
    def words(ws):
        return bytes([len(ws)]) + b"".join(w.to_bytes(3, "little") for w in ws)

    def op(field, code):
        return (field << 3) | code

    # Trace {1: TracePacket}; TracePacket {1 simple, 2: Sub, 3 string,
    # 200..210 simple}; Sub {1 simple, 2: Sub}.
    schema = words([op(1, 3), 1, 0,
                    op(1, 1), op(2, 3), 2, op(3, 4), op(200, 2), 10, 0,
                    op(1, 1), op(2, 3), 2, 0])
    nested = f_len(2, f_varint(1, 7) + f_len(2, f_varint(1, 9) + f_varint(5, 1)))
    packet = (f_varint(1, 150) + f_varint(7, 5) + f_fixed32(4, 1) +
              f_fixed64(5, 2) + f_len(3, b"B|1|secret") + nested +
              f_varint(205, 3))
    return {
        "schema_packet": schema + b"\x00\x03\x07" + packet,
        "schema_bad_checksum": schema + b"\x01\x00\x00" + packet,
        "redundant_varints": schema + b"\x00\x01\x01" + bytes([0x88, 0x80, 0x00, 0x81, 0x80, 0x00]),
        "nested_too_long": schema + b"\x00\x00\x00" + bytes([0x12, 4, 0x12, 5, 0x08, 1]),
        "group_wire_type": schema + b"\x00\x02\x00" + bytes([0x08, 1, 0x13, 0]),
        "unclosed_message": words([op(1, 1)]) + b"\x00\x00\x00" + f_varint(1, 1),
        "nested_index_out_of_range": words([op(1, 3), 9, 0]) + b"\x00\x00\x00" + nested,
        "empty_packet": schema + b"\x00\x00\x00",
    }


def units_corpus():
    """Durations and sizes (common/units.h): every unit, fractions, terms,
    the edges of 64 bits, and what is refused."""
    texts = {
        "ms": b"500ms", "seconds": b"10s", "fraction": b"1.5s",
        "leading_point": b".5s", "minutes": b"2m", "min": b"2min",
        "hours": b"1h", "days": b"1d", "terms": b"1m30s",
        "all_terms": b"1d2h3m4s5ms", "upper": b"10S", "bare": b"90",
        "bare_fraction": b"1.25", "zero": b"0", "max_ms": b"18446744073709551615ms",
        "overflow_ms": b"18446744073709551616ms", "overflow_terms": b"213503982334d1d",
        "bytes": b"4096", "k": b"64k", "kb": b"64KB", "kib": b"64KiB",
        "mb": b"64mb", "g": b"1.5G", "t": b"16777215T", "overflow_t": b"16777216T",
        "b": b"7B", "too_fine": b"1.0005s", "many_digits": b"1.000000000000000000001s",
        "sign": b"-1s", "blank": b" 1s", "trailing": b"1s ", "bare_term": b"1m30",
        "unknown_unit": b"1w", "exponent": b"1e3", "hex": b"0x10",
        "empty": b"", "dot": b".", "nul_inside": b"1s\x002s",
        "utf8_digit": "\u0663s".encode(),
    }
    return texts


def json_text_corpus():
    """Bytes made JSON text (common/json.h): UTF-8 of every length, each
    kind of ill-formed sequence, and counts in their two forms."""
    return {
        "ascii": b"host-1:7467", "controls": b"a\x01\x1b[2J\x7f",
        "utf8": "caf\u00e9 \u2713 \U0001f600".encode(),
        "max_code_point": b"\xf4\x8f\xbf\xbf",
        "table_3_8": b"a\xf1\x80\x80\xe1\x80\xc2b\x80c\x80\xbfd",
        "overlong": b"\xc0\xaf\xe0\x80\xaf", "surrogate": b"\xed\xa0\x80",
        "too_high": b"\xf4\x90\x80\x80\xf5\x80", "cut": b"\xf0\x9f\x98",
        "lone_bytes": b"\xff\xfe\x80", "count_int64": b"9223372036854775807",
        "count_above": b"9223372036854775808",
        "count_max": b"18446744073709551615",
        "count_over": b"18446744073709551616", "count_zero_led": b"01",
        "nul_inside": b"ok\x00\xff",
    }


def traceparent_corpus():
    """W3C traceparent values (agent/trace_context.c): valid ones, each
    invalid form level 1 names, and future versions longer than 55."""
    t = b"4bf92f3577b34da6a3ce929d0cf0e4f7"
    p = b"00f067aa0ba902b7"
    return {
        "valid": b"00-" + t + b"-" + p + b"-01",
        "valid_unsampled": b"00-" + t + b"-" + p + b"-00",
        "version_ff": b"ff-" + t + b"-" + p + b"-01",
        "uppercase": b"00-" + t.upper() + b"-" + p + b"-01",
        "short": b"00-" + t + b"-" + p + b"-0",
        "zero_trace": b"00-" + b"0" * 32 + b"-" + p + b"-01",
        "zero_parent": b"00-" + t + b"-" + b"0" * 16 + b"-01",
        "v00_trailing": b"00-" + t + b"-" + p + b"-01-x",
        "future_exact": b"cc-" + t + b"-" + p + b"-01",
        "future_long": b"cc-" + t + b"-" + p + b"-01-what-the-future-will-be",
        "future_no_dash": b"cc-" + t + b"-" + p + b"-01what",
        "bad_delimiter": b"00_" + t + b"-" + p + b"-01",
        "empty": b"",
    }


def emit_rpc_corpus():
    """tracegate-emit's rpc lines (agent/emit/rpc_wire.c): a connection's
    bytes, requests and answers alike: calls, pings, garbage, a line at
    and past the maximum, half a request, and pongs."""
    tp = (b"00-4bf92f3577b34da6a3ce929d0cf0e4f7-00f067aa0ba902b7-01")
    call = b"traceparent: " + tp + b"\n"
    return {
        "call": call,
        "calls_and_ping": call + b"ping\n" + call,
        "call_crlf_tabs": b"traceparent:\t" + tp + b" \t\r\n",
        "call_future": b"traceparent: cc" + tp[2:] + b"-more\n",
        "call_uppercase": b"traceparent: " + tp.upper() + b"\n",
        "call_no_space": b"traceparent:" + tp + b"\n",
        "call_zero_trace": b"traceparent: 00-" + b"0" * 32 + tp[35:] + b"\n",
        "garbage_then_call": b"\x00\xff hello\n" + call,
        "half": call[:30],
        "at_max": b"x" * 255 + b"\n",
        "past_max": b"x" * 256 + b"\n" + call,
        "empty_lines": b"\n\n\r\n",
        "ok": b"ok\n",
        "error": b"error\n",
        "pong": b"pong recording=1 served=18446744073709551615 malformed=0\n",
        "pong_over": b"pong recording=1 served=18446744073709551616 malformed=0\n",
        "pong_zero_led": b"pong recording=0 served=01 malformed=0\n",
        "pong_recording_2": b"pong recording=2 served=1 malformed=0\n",
        "pong_extra": b"pong recording=0 served=1 malformed=0 x\n",
    }


def write(target, files):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        # regress-*: inputs a fuzzer found, kept by hand, not made here.
        if not old.startswith("regress-"):
            os.remove(os.path.join(d, old))
    for name, data in sorted(files.items()):
        assert len(data) < 1024, (target, name, len(data))
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


# --- fuzz_snap_index ----------------------------------------------------------

def snap_index(trace, head, hosts, fix=True, header_extra=b""):
    """An index file (collector/store/snap_index.h) of |hosts|: (name, [(off,
    len)...]) pairs, with right checksums unless |fix| is False. The
    control byte before it asks the harness to fix them again (bit 0)."""
    table = b""
    at = 48 + sum(20 + len(n) for n, _ in hosts)
    lists = b""
    for name, ext in hosts:
        raw = b"".join(struct.pack("<QQ", o, n) for o, n in ext)
        table += struct.pack("<HHIQI", len(name), 0, len(ext), at,
                             zlib.crc32(raw) if fix else 0) + name
        at += len(raw)
        lists += raw
    head_bytes = b"TGSIDX01" + struct.pack("<QQIIIII", trace, head, len(hosts),
                                           len(table), zlib.crc32(table), 0, 0)
    head_bytes += header_extra
    head_bytes += struct.pack("<I", zlib.crc32(head_bytes) if fix else 0)
    return head_bytes + table + lists


def snap_index_corpus():
    """Good indexes (one host, three interleaved, a host with no data),
    then ones each check refuses: stale size, extents out of order,
    touching, overlapping the head, past the trace, duplicate names,
    checksums left wrong (control byte 0), a table cut short."""
    three = [(b"a.example:7467", [(100, 100), (510, 90)]),
             (b"b.example:7467", [(200, 300), (1000, 9000)]),
             (b"ssh://u@c", [(500, 10), (600, 400)])]
    return {
        "one_host": b"\x01" + snap_index(200, 100, [(b"h", [(100, 100)])]),
        "three_hosts": b"\x00" + snap_index(10000, 100, three),
        "no_data_host": b"\x00" + snap_index(164, 64, [(b"a", [(64, 100)]),
                                                       (b"b", [])]),
        "stale_size": b"\x02" + snap_index(10000, 100, three),
        "unordered": b"\x01" + snap_index(300, 10, [(b"h", [(200, 10), (20, 5)])]),
        "touching": b"\x01" + snap_index(300, 10, [(b"h", [(10, 10), (20, 5)])]),
        "in_head": b"\x01" + snap_index(300, 100, [(b"h", [(50, 100)])]),
        "past_end": b"\x01" + snap_index(300, 10, [(b"h", [(290, 11)])]),
        "dup_names": b"\x01" + snap_index(300, 10, [(b"h", [(10, 5)]),
                                                    (b"h", [(20, 5)])]),
        "bad_crc": b"\x00" + snap_index(200, 100, [(b"h", [(100, 100)])],
                                        fix=False),
        "short": b"\x01" + snap_index(10000, 100, three)[:80],
    }


# --- fuzz_snap_meta -------------------------------------------------------------

def snap_meta_corpus():
    """A sidecar (collector/store/snap_meta.h) of a partial snapshot, one of a
    complete one, a host failed part-way, non-ASCII text; then ones the
    parser refuses: a count over 64 bits' signed range, a state the
    hosts do not give, an id not the object's, a duplicate key, text cut
    short, nothing."""
    import json
    base = {"format": "tracegate-snapshot-meta", "version": 1,
            "id": "000000000000002a",
            "object": "snapshots/000000000000002a.pftrace",
            "state": "partial", "pinned": True, "started_ms": 42,
            "finished_ms": 99, "trigger": "oom", "reason": "why",
            "origin": "o", "bytes": 600, "crc32": 4277009102,
            "etag": "\"e-1\"", "index": True, "packets": 6, "loss": 5,
            "n_hosts_failed": 1,
            "hosts": [{"host": "alpha:7000", "name": "a", "outcome": "ok",
                       "error": "", "problems": "", "bytes": 600,
                       "packets": 6, "loss": 2, "window_first_ms": -10,
                       "window_last_ms": 20},
                      {"host": "beta:7000", "name": "", "outcome": "failed",
                       "error": "gone", "problems": "[]", "bytes": 0,
                       "packets": 0, "loss": 3, "window_first_ms": 0,
                       "window_last_ms": 0}]}

    def text(obj):
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()

    def edit(**kv):
        c = json.loads(json.dumps(base))
        c.update(kv)
        return c
    partial_host = edit()
    partial_host["hosts"][1]["outcome"] = "partial"
    return {
        "partial": text(base),
        "complete": text(edit(state="complete", hosts=base["hosts"][:1],
                              loss=2, n_hosts_failed=0)),
        "partial_host": text(partial_host),
        "utf8": text(edit(reason="caf\u00e9 \ufffd")),
        "big_bytes": text(edit(bytes="18446744073709551615")),
        "state_wrong": text(edit(state="complete")),
        "id_not_object": text(edit(id="000000000000002b")),
        "dup_key": b'{"version":1,"version":1}',
        "truncated": text(base)[:200],
        "empty": b"",
    }


# --- fuzz_cli_ftrace_loss ------------------------------------------------------

def ftrace_stats(phase, overruns):
    cpus = b"".join(f_len(2, f_varint(1, c) + f_varint(3, o))
                    for c, o in enumerate(overruns))
    return f_len(34, f_varint(1, phase) + cpus)


def stats_on(seq, phase, overruns):
    """A Trace's packet (field 1): the stats, then the sequence id the
    service appends."""
    return f_len(1, ftrace_stats(phase, overruns) + f_varint(10, seq))


def setup_on(seq, overruns, failed=(), unknown=(), atrace=None, phase=1):
    """A stats packet with setup errors (FtraceStats fields 5 to 7)."""
    cpus = b"".join(f_len(2, f_varint(1, c) + f_varint(3, o))
                    for c, o in enumerate(overruns))
    errs = ((f_len(5, atrace) if atrace is not None else b"") +
            b"".join(f_len(6, u) for u in unknown) +
            b"".join(f_len(7, f) for f in failed))
    return f_len(1, f_len(34, f_varint(1, phase) + cpus + errs) +
                 f_varint(10, seq))


def flush_pairs(seq, start, ends):
    """linux.ftrace's pair at every flush: the same START each time."""
    return b"".join(stats_on(seq, 1, start) + stats_on(seq, 2, e)
                    for e in ends)


def cli_ftrace_loss_corpus():
    return {
        "start": f_varint(8, 42) + ftrace_stats(1, [5, 7]),
        "end": f_varint(8, 43) + ftrace_stats(2, [105, 57]),
        "bundle_then_stats": f_len(1, f_varint(1, 0)) + ftrace_stats(2, [1]),
        "redundant_sizes": f_len_redundant(34, f_varint(1, 2) +
                                           f_len_redundant(2, f_varint(3, 9))),
        "cut_short": ftrace_stats(2, [3])[:-2],
        "no_phase": f_len(34, f_len(2, f_varint(3, 4))),
        "pair_on_seq": flush_pairs(7, [5, 7], [[105, 57]]),
        "flush_pairs": flush_pairs(7, [2, 3], [[12, 3], [22, 13], [32, 23]]),
        "two_seqs": (stats_on(5, 1, [1, 1]) + stats_on(6, 1, [100, 200]) +
                     stats_on(5, 2, [11, 1]) + stats_on(6, 2, [100, 240])),
        "end_below_start": flush_pairs(4, [50, 50], [[10, 60]]),
        "end_without_start": stats_on(9, 2, [3, 4]),
        "huge_overruns": flush_pairs(2, [0], [[2**64 - 1, 2**64 - 1]]),
        "seq_past_the_table": b"".join(flush_pairs(100 + s, [0], [[1]])
                                       for s in range(17)),
        # Setup errors: an instance that never opened a ring buffer
        # (every event failed, no CPU counters), one that runs without an
        # unknown event, atrace's errors, and names past the kept bounds.
        "not_started": setup_on(3, [], failed=[b"sched/sched_switch",
                                               b"sched/sched_waking"]),
        "unknown_event": setup_on(4, [1, 2], unknown=[b"no/such"]) +
                         setup_on(4, [1, 2], unknown=[b"no/such"], phase=2),
        "atrace_errors": setup_on(5, [0], atrace=b"atrace: no categories"),
        "long_names": setup_on(6, [], failed=[bytes([65 + i]) * 120 + b"\x1b\xff"
                                              for i in range(6)]),
        # The service's report of data sources whose producer did not
        # acknowledge the start (TracingServiceEvent, field 7): once, as
        # at every flush (the same pair again), many pairs with long
        # names, and the linux.ftrace its stats already say did not start.
        "slow_start": slow_start([(b"tracegate-perf", b"linux.perf")]),
        "slow_start_every_flush": b"".join(
            f_len(1, slow_start([(b"tracegate-perf", b"linux.perf")]))
            for _ in range(3)),
        "slow_start_many": f_len(1, slow_start(
            [(b"p%d" % i + b"\x1b" * 30, b"ds.%d" % i + b"n" * 70)
             for i in range(7)])),
        "slow_start_and_ftrace": (
            setup_on(3, [], failed=[b"sched/sched_switch"]) +
            f_len(1, slow_start([(b"traced_probes", b"linux.ftrace")]))),
        "slow_start_cut_short": slow_start([(b"tracegate-perf",
                                             b"linux.perf")])[:-4],
    }


def slow_start(pairs):
    """A service packet: TracingServiceEvent.slow_starting_data_sources
    naming each (producer, data source) of |pairs|."""
    sources = b"".join(f_len(1, f_len(1, p) + f_len(2, d)) for p, d in pairs)
    return (f_varint(8, 1000) + f_len(69, f_len(7, sources)) +
            f_varint(10, 1))


# --- fuzz_merge ------------------------------------------------------------------

def mg(host, packet):
    """One record: the host, the packet's length, its bytes."""
    return bytes([host]) + struct.pack("<H", len(packet)) + packet


def mg_packet(ts, seqs, extra=b""):
    return f_varint(8, ts) + extra + b"".join(f_varint(10, s) for s in seqs)


def mg_wrapper(packets, own_seq=77):
    trace = b"".join(f_len(1, p) for p in packets)
    # Level 0 (stored blocks): the same bytes from every zlib.
    return f_len(50, zlib.compress(trace, 0)) + f_varint(10, own_seq)


def merge_corpus():
    return {
        "in_range": mg(0, mg_packet(1, [5])) + mg(1, mg_packet(2, [5])),
        "no_id": mg(2, mg_packet(3, [])),
        "zero_id_needs_state": mg(0, mg_packet(4, [0], f_varint(13, 2))),
        "seq_clock_no_id": mg(1, f_varint(8, 5) + f_varint(58, 64)),
        "snapshot_seq_clock": mg(2, f_len(6, f_len(1, f_varint(1, 64) +
                                                   f_varint(2, 5)))),
        "id_fixed32": mg(0, f_fixed32(10, 0x100001) + f_varint(13, 2)),
        "id_len": mg(1, f_len(10, b"x") + f_varint(13, 2)),
        "repeated_ids": mg(0, mg_packet(5, [3, 7])),
        "overflow": (mg(0, mg_packet(6, [0xFFFFF])) +
                     mg(1, mg_packet(7, [0xFFFFF])) +
                     mg(0, mg_packet(8, [0xFFFFF])) +
                     mg(2, mg_packet(9, [0xFFFFFFFF]))),
        "own_machine_id": mg(0, mg_packet(10, [4], f_varint(98, 3))),
        "wrapper": mg(1, mg_wrapper([mg_packet(11, [9]),
                                     mg_packet(12, [0xFFFFF]),
                                     mg_packet(13, [])])),
        "nested_wrapper": mg(2, mg_wrapper([mg_wrapper([mg_packet(14, [4])]),
                                            mg_packet(15, [4])])),
        "wrapper_not_zlib": mg(0, f_len(50, b"junk")),
        "wrapper_not_len": (mg(1, mg_packet(16, [2], f_varint(50, 5))) +
                            mg(2, mg_packet(17, [2], f_fixed32(50, 7))) +
                            mg(0, mg_packet(18, [2], f_len(50, b"")))),
        "does_not_decode": mg(0, b"\x40\xff\xff") + mg(2, b"\x0f\x01"),
        "empty": mg(1, b""),
        # Values trace processor v50.1 refuses the file for or crashes on
        # (consumer/fleet/trace_schema.c), each in a packet of its own.
        "tp_values": b"".join(mg(i % 3, mg_packet(20 + i, [1], body))
                              for i, body in enumerate(tp_value_cases())),
        # Fields of another wire type than Perfetto's schema: the
        # VulkanMemoryEvent's operation length-delimited (SIGSEGV), a
        # TrackEvent's type as fixed64.
        "tp_wire_types": (mg(0, mg_packet(40, [1], f_len(62, f_len(2, b"x"))))
                          + mg(1, mg_packet(41, [1], f_len(11, f_fixed64(9, 1))))),
        # Clocks across packets (consumer/fleet/clock_model.h): a bundle on
        # the global clock placed by its own pair, then one of another CPU
        # without; the same after a ClockSnapshot naming the sequence's
        # clock 64; a snapshot moving the trace clock to REALTIME, then a
        # bundle on the boot clock with a previous bundle's end.
        "clock-global-pair": (
            mg(0, mg_bundle(f_varint(1, 0) + f_varint(5, 2) + f_varint(6, 100)
                            + f_varint(7, 200) + f_varint(10, 5000)))
            + mg(0, mg_bundle(f_varint(1, 1) + f_varint(5, 2)
                              + f_varint(10, 5000)))),
        "clock-global-seq-named": (
            mg(0, f_len(6, mg_clock(64, 1, 1) + mg_clock(6, 1)) + f_varint(10, 3))
            + mg(0, mg_bundle(f_varint(1, 0) + f_varint(5, 2) + f_varint(6, 100)
                              + f_varint(7, 200) + f_varint(10, 5000)))),
        "clock-primary-realtime": (
            mg(0, f_len(6, f_varint(2, 1)) + f_varint(10, 3))
            + mg(0, mg_bundle(f_varint(1, 0) + f_varint(10, 5000)))),
    }


def mg_bundle(body):
    """An ftrace bundle on sequence 3."""
    return f_len(1, body) + f_varint(10, 3)


def mg_clock(clock_id, ts, incremental=0):
    c = f_varint(1, clock_id) + f_varint(2, ts)
    return f_len(1, c + (f_varint(3, 1) if incremental else b""))


def tp_value_cases():
    return [
        f_len(34, f_len(2, f_varint(1, 0) + f_varint(3, 5))),  # no phase
        f_len(34, f_varint(1, 2) + f_varint(9, 4)),  # parse errors
        f_len(1, f_varint(1, 1024)),  # bundle cpu
        f_len(1, f_varint(1, 0) + f_varint(5, 3)),  # ftrace_clock local
        f_len(66, f_varint(1, 4096) + f_varint(2, 5)),  # perf_sample cpu
        f_len(62, f_varint(2, 2**31)),  # vulkan operation
        f_len(60, f_varint(1, 99) + f_varint(11, 4)),  # child_ordering
        f_len(37, f_len(1, f_varint(1, 0) + f_len(2, b"x"))),  # iid 0
        f_len(37, f_len(4, f_varint(4, 100))),  # mapping start > end
        f_len(7, f_len(3, f_varint(1, 2**31))),  # cpu_stat cpu_id
        f_len(111, f_len(1, b"x")),  # pixel modem token database
        f_len(72, f_len(1, f_len(1, f_len(7, b"")))),  # extension descriptor
    ]


# --- fuzz_coll_window ------------------------------------------------------

def cw(*packets):
    """A Trace: each packet as field 1."""
    return b"".join(f_len(1, p) for p in packets)


def cw_snapshot(seq, t, inc_clock=64, boot=True):
    clocks = b""
    if boot:
        clocks += f_len(1, f_varint(1, 6) + f_varint(2, t))
    clocks += f_len(1, f_varint(1, inc_clock) + f_varint(2, t) + f_varint(3, 1))
    return f_varint(8, t) + f_varint(58, 6) + f_varint(10, seq) + f_len(6, clocks)


def cw_start(seq, t):
    defaults = f_len(59, f_varint(58, 64))
    return [f_varint(10, seq) + f_varint(13, 1) + defaults, cw_snapshot(seq, t)]


def cw_event(seq, delta):
    return f_varint(8, delta) + f_varint(10, seq) + f_varint(13, 2)


def coll_window_corpus():
    t = 5000000000000
    return {
        "boottime": cw(f_varint(8, t) + f_varint(10, 2),
                       f_varint(8, t + 9) + f_varint(10, 3)),
        "track_events": cw(*cw_start(7, t), cw_event(7, 1000), cw_event(7, 5)),
        "never_cleared": cw(cw_event(9, 12), cw_event(9, 30)),
        "service_seq": cw(f_varint(8, t) + f_varint(10, 1)),
        "snapshot_without_boottime": cw(
            f_varint(10, 4) + f_varint(13, 1) + f_len(59, f_varint(58, 64)),
            cw_snapshot(4, t, boot=False), cw_event(4, 3)),
        "multiplier": cw(
            f_varint(10, 5) + f_varint(13, 1),
            f_varint(10, 5) + f_len(6, f_len(1, f_varint(1, 6) + f_varint(2, t)) +
                                    f_len(1, f_varint(1, 65) + f_varint(2, 10) +
                                          f_varint(4, 1000))),
            f_varint(8, 7) + f_varint(58, 65) + f_varint(10, 5)),
        "overflow": cw(*cw_start(6, 2**64 - 2), cw_event(6, 2**63)),
        "other_clock": cw(f_varint(8, t) + f_varint(58, 3) + f_varint(10, 8)),
        "cut_short": cw(f_varint(8, t) + f_varint(10, 2))[:-1],
    }


# --- fuzz_boost_seq --------------------------------------------------------

def boost_seq_corpus():
    """One boost packet each: samples, the service's, edges of the range."""
    sample = f_len(66, f_varint(1, 1) + f_varint(2, 100))
    return {
        "sample": f_varint(8, 5000000000000) + f_varint(10, 7) + sample,
        "service_clocks": f_varint(10, 1) + f_len(6, f_len(1, f_varint(1, 6) +
                                                           f_varint(2, 9))),
        "service_stats": f_varint(10, 1) + f_len(35, f_varint(1, 4096)),
        "highest": f_varint(10, (1 << 20) - 2 - (1 << 19)) + sample,
        "too_high": f_varint(10, (1 << 20) - 1 - (1 << 19)),
        "two_ids": f_varint(10, 9) + f_varint(8, 1) + f_varint(10, 4),
        "no_id": f_varint(8, 5) + sample,
        "id_as_bytes": f_len(10, b"\x07"),
        "cut_short": (f_varint(10, 7) + sample)[:-1],
    }


# --- fuzz_perf_record, fuzz_perf_maps, fuzz_perf_elf -------------------------

def pf_hdr(rtype, misc, size):
    return struct.pack("<IHH", rtype, misc, size)


def pf_id(pid, tid, t, cpu):
    return struct.pack("<IIQII", pid, tid, t, cpu, 0)


def pf_sample(ips, misc=2):
    body = struct.pack("<QIIQIIQQ", 0x401136, 100, 101, 5000000000, 1, 0,
                       250000, len(ips))
    body += b"".join(struct.pack("<Q", ip) for ip in ips)
    return pf_hdr(9, misc, 8 + len(body)) + body


def pf_with_id(rtype, misc, body):
    body = body + pf_id(100, 100, 5000000100, 1)
    return pf_hdr(rtype, misc, 8 + len(body)) + body


def pf_ring(records, ctl=3, tail=0, size=None):
    data = b"".join(records)
    size = size or max(8, 1 << (len(data) - 1).bit_length())
    data = data.ljust(size, b"\0")
    # Rotate so that the records start at |tail| in the ring.
    at = tail % size
    data = data[size - at:] + data[:size - at]
    return bytes([ctl]) + struct.pack("<H", tail) + data


def perf_record_corpus():
    kernel, user = 2**64 - 128, 2**64 - 512
    sample = pf_sample([kernel, 0xffffffff81000010, user, 0x401136, 0x401180])
    lost = pf_with_id(2, 0, struct.pack("<QQ", 7, 42))
    throttle = pf_with_id(5, 0, struct.pack("<QQQ", 5000000200, 7, 7))
    comm = pf_with_id(3, 1 << 13, struct.pack("<II", 100, 100) + b"work\0\0\0\0")
    mmap2 = pf_with_id(10, 2, struct.pack("<IIQQQIIQQII", 100, 100, 0x400000,
                                          0x2000, 0x1000, 8, 1, 1234, 1, 5, 2)
                       + b"/tmp/w\0\0")
    mmap2_bid = pf_with_id(10, 2 | 1 << 14,
                           struct.pack("<IIQQQ", 100, 100, 0x400000, 0x2000,
                                       0x1000) + bytes([20, 0, 0, 0]) +
                           bytes(range(20)) + struct.pack("<II", 5, 2) +
                           b"/tmp/w\0\0")
    # UNWIND_DWARF's samples: ctl bit 2, two registers (bits 4-7: 1).
    regs_stack = (struct.pack("<QIIQIIQ", 0x401136, 100, 100, 6000000000, 0,
                              0, 10000) +
                  struct.pack("<QQQ", 2, 0x7ffb0000, 0x401136) +
                  struct.pack("<Q", 16) + bytes(range(1, 17)) +
                  struct.pack("<Q", 12))
    dwarf = pf_hdr(9, 2, 8 + len(regs_stack)) + regs_stack
    kthread = struct.pack("<QIIQIIQQQ", 1, 0, 0, 1, 0, 0, 1, 0, 0)
    return {
        "dwarf_regs_stack": pf_ring([dwarf], ctl=1 | 4 | 1 << 4),
        "dwarf_kernel_thread": pf_ring([pf_hdr(9, 1, 8 + len(kthread)) +
                                        kthread], ctl=1 | 4 | 1 << 4),
        "read_value": pf_ring([pf_hdr(9, 2, 48) + struct.pack(
            "<QIIQIIQ", 0x401136, 7, 8, 99, 1, 0, 123456789)], ctl=1 | 8),
        # A group's READ (tail's top bit): nr 3, leader then followers.
        "read_group": pf_ring([pf_hdr(9, 2, 80) + struct.pack(
            "<QIIQIIQQQQQ", 0x401136, 7, 8, 99, 1, 0, 250000, 3, 1000, 20,
            30)],
            ctl=1 | 8, tail=0x8000),
        "sample_callchain": pf_ring([sample]),
        "every_type": pf_ring([sample, lost, throttle, comm, mmap2]),
        "wraps_the_end": pf_ring([lost, comm, throttle], tail=100, size=256),
        "build_id_mmap2": pf_ring([mmap2_bid]),
        "no_callchain": pf_ring([pf_sample([])[:-8]], ctl=1),
        "nr_too_big": pf_ring([pf_sample([1, 2])[:-8]]),
        "size_zero": pf_ring([pf_hdr(9, 0, 0) + b"\0" * 24]),
        "no_sample_id_all": pf_ring([lost[:-24]], ctl=2),
    }


def perf_config_corpus():
    """DataSourceConfig { perf_event_config (111) { ... } }."""
    def ds(pec):
        return f_len(1, b"linux.perf") + f_len(111, pec)

    def timebase(*fields):
        return f_len(15, b"".join(fields))

    def tracepoint(name, filt=None):
        return f_len(1, name) + (f_len(2, filt) if filt is not None else b"")

    def raw(t, config, c1=0, c2=0):
        return (f_varint(1, t) + f_varint(2, config) + f_varint(3, c1) +
                f_varint(4, c2))

    callstacks = f_len(16, f_varint(2, 1) + f_varint(3, 3))
    return {
        "tracepoint_timebase": ds(
            timebase(f_varint(1, 1), f_len(3, tracepoint(
                b"sched:sched_switch", b"prev_pid > 0"))) + callstacks),
        "tracepoint_bad_names": ds(
            timebase(f_varint(1, 1), f_len(3, tracepoint(b"sched/../x")))),
        "raw_timebase": ds(timebase(f_varint(2, 99), f_len(5, raw(1, 3, 7, 9)),
                                    f_varint(11, 4))),
        "followers": ds(timebase(f_varint(2, 200), f_varint(4, 1)) +
                        f_len(19, f_varint(1, 4)) +
                        f_len(19, f_len(2, tracepoint(b"sched/sched_wakeup"))
                              + f_len(4, b"wakeups")) +
                        f_len(19, f_len(3, raw(1, 2))) + callstacks),
        "polling": ds(timebase(f_varint(6, 100), f_varint(4, 1)) +
                      f_len(19, f_varint(1, 4))),
        "polling_with_callstacks": ds(timebase(f_varint(6, 100)) + callstacks),
        "shards": ds(f_len(16, f_len(1, f_varint(6, 2) + f_varint(1, 7) +
                                     f_varint(3, 8)) + f_varint(3, 3))),
    }


def perf_maps_corpus():
    return {
        "maps": (b"55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1234 /tmp/w\n"
                 b"55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1234 /tmp/w\n"
                 b"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
                 b"7f1000028000-7f100019d000 r-xp 00028000 fe:00 393267    "
                 b"      /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                 b"7ffd1000a000-7ffd1000c000 r-xp 00000000 00:00 0 [vdso]\n"),
        "unsorted": (b"3000-4000 r-xp 0 0:0 0 /c\n1000-2000 r-xp 0 0:0 0 /a\n"
                     b"2000-3000 r-xs 0 0:0 0 /b (deleted)"),
        "malformed": (b"1-0 r-xp 0 0:0 0 /x\n11111111111111111-2 r-xp 0 0:0 0\n"
                      b"1-2 rxxp 0 0:0 0\n1-2 r-xp 0 0-0 0\n1-2 r-xp 0 0:0 x\n"),
        "path_with_nul": b"1000-2000 r-xp 0 0:0 0 /a\0b\n",
        "empty_range": b"1000-1000 r-xp 0 0:0 0 /e\n",
    }


def pe_elf(notes_in_segment=True, cut=None):
    """A 64-bit ELF of 616 bytes: two loads, a note, .symtab, .strtab."""
    ehdr_size, ph, sh = 64, 56, 64
    notes_at, symtab_at, strtab_at, shdrs_at = 232, 304, 400, 424
    notes = (struct.pack("<III", 4, 16, 1) + b"GNU\0" + b"\0" * 16 +
             struct.pack("<III", 4, 20, 3) + b"GNU\0" + bytes(range(20)))
    strs = b"\0alpha\0beta\0gamma\0"
    phnum = 3 if notes_in_segment else 2
    e = bytearray(616)
    e[0:16] = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    e[16:64] = struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, ehdr_size, shdrs_at,
                           0, ehdr_size, ph, phnum, sh, 3, 0)
    phdrs = [(1, 4, 0, 0, 0x1000, 0x1000),
             (1, 5, 0x1000, 0x401000, 0x1000, 0x1000),
             (4, 4, notes_at, notes_at, len(notes), 4)]
    for i, (t, fl, off, va, sz, al) in enumerate(phdrs):
        e[64 + i * ph:64 + (i + 1) * ph] = struct.pack(
            "<IIQQQQQQ", t, fl, off, va, va, sz, sz, al)
    e[notes_at:notes_at + len(notes)] = notes
    syms = [(0, 0, 0, 0, 0), (1, 0x12, 1, 0x401000, 0x10),
            (7, 0x12, 1, 0x401010, 0), (12, 0x11, 1, 0x401800, 8)]
    for i, (n, info, shndx, val, size) in enumerate(syms):
        e[symtab_at + i * 24:symtab_at + (i + 1) * 24] = struct.pack(
            "<IBBHQQ", n, info, 0, shndx, val, size)
    e[strtab_at:strtab_at + len(strs)] = strs
    shdrs = [(0, 0, 0, 0, 0, 0) if notes_in_segment else
             (7, notes_at, len(notes), 0, 4, 0),
             (2, symtab_at, 4 * 24, 2, 8, 24),
             (3, strtab_at, len(strs), 0, 1, 0)]
    for i, (t, off, size, link, align, ent) in enumerate(shdrs):
        e[shdrs_at + i * sh:shdrs_at + (i + 1) * sh] = struct.pack(
            "<IIQQQQIIQQ", 0, t, 0, 0, off, size, link, 0, align, ent)
    return bytes(e[:cut])


def perf_elf_corpus():
    bad_strtab = bytearray(pe_elf())
    bad_strtab[304 + 24:304 + 28] = struct.pack("<I", 0x1000)
    return {
        "elf": pe_elf(),
        "note_section": pe_elf(notes_in_segment=False),
        "cut_in_notes": pe_elf(cut=260),
        "cut_in_symtab": pe_elf(cut=350),
        "name_past_strtab": bytes(bad_strtab),
        "elf32": b"\x7fELF\x01\x01\x01" + b"\0" * 57,
        "notes_align8": (b"\x01" + b"\0" * 3 + struct.pack("<III", 4, 8, 3) +
                         b"GNU\0" + bytes(8)),
    }


# --- fuzz_elf_plt ----------------------------------------------------------------

def plt_elf(ibt=False, nobits=False, cut=None):
    """An x86-64 ELF with the PLT sections of tests/common/test_elf_plt.c:
    dynsym access, puts, __cxa_finalize; .rela.plt access, an IRELATIVE
    slot, puts; .rela.dyn a GLOB_DAT for __cxa_finalize; .plt at 0x1020,
    with |ibt| .plt.sec at 0x1100 and 16-byte .plt.got entries (endbr64,
    bnd jmp), else 8-byte ones; |nobits|: the tables as SHT_NOBITS, as
    objcopy --only-keep-debug leaves them."""
    shstr = b"\0.shstrtab\0.dynsym\0.dynstr\0.rela.plt\0.rela.dyn\0.plt\0.plt.sec\0.plt.got\0"
    dynstr = b"\0access\0puts\0__cxa_finalize\0"
    def sn(name):
        return shstr.index(name + b"\0")
    def dn(name):
        return dynstr.index(name + b"\0")
    syms = bytes(24) + b"".join(
        struct.pack("<IBBHQQ", dn(n), 0x12, 0, 0, 0, 0)
        for n in (b"access", b"puts", b"__cxa_finalize"))
    def rela(off, sym, typ):
        return struct.pack("<QQq", off, sym << 32 | typ, 0)
    rela_plt = rela(0x4000, 1, 7) + rela(0x4008, 0, 37) + rela(0x4010, 2, 7)
    rela_dyn = rela(0x3fd0, 0, 8) + rela(0x3fe0, 3, 6)
    es = 16 if ibt else 8
    pre = b"\xf3\x0f\x1e\xfa\xf2" if ibt else b""
    disp = 0x3fe0 - (0x1200 + len(pre) + 6)
    got = (pre + b"\xff\x25" + struct.pack("<i", disp)).ljust(es, b"\x90")
    got += bytes(es)
    blobs = [shstr, syms, dynstr, rela_plt, rela_dyn, got]
    offs, at = [], 64
    for b in blobs:
        offs.append(at)
        at += (len(b) + 7) & ~7
    shoff = at
    nob = 8 if nobits else None
    # (name, type, addr, off, size, link, entsize)
    secs = [(0, 0, 0, 0, 0, 0, 0),
            (sn(b".shstrtab"), 3, 0, offs[0], len(shstr), 0, 0),
            (sn(b".dynsym"), nob or 11, 0, offs[1], len(syms), 3, 24),
            (sn(b".dynstr"), nob or 3, 0, offs[2], len(dynstr), 0, 0),
            (sn(b".rela.plt"), nob or 4, 0, offs[3], len(rela_plt), 2, 24),
            (sn(b".rela.dyn"), nob or 4, 0, offs[4], len(rela_dyn), 2, 24),
            (sn(b".plt"), nob or 1, 0x1020, 0, 0x40, 0, 16),
            (sn(b".plt.got"), nob or 1, 0x1200, offs[5], 2 * es, 0, es)]
    if ibt:
        secs.append((sn(b".plt.sec"), 1, 0x1100, 0, 0x30, 0, 16))
    e = bytearray(struct.pack("<4sBBB9xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1,
                              3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                              len(secs), 1))
    for b, off in zip(blobs, offs):
        e[len(e):off] = bytes(off - len(e))
        e += b
    e[len(e):shoff] = bytes(shoff - len(e))
    for name, typ, addr, off, size, link, ent in secs:
        e += struct.pack("<IIQQQQIIQQ", name, typ, 0, addr, off, size, link,
                         0, 8, ent)
    return bytes(e if cut is None else e[:cut])


def elf_plt_corpus():
    bad_link = bytearray(plt_elf())
    shoff = struct.unpack_from("<Q", bad_link, 40)[0]
    struct.pack_into("<I", bad_link, shoff + 4 * 64 + 40, 200)
    return {
        "lazy_plt": plt_elf(),
        "ibt_plt_sec": plt_elf(ibt=True),
        "only_keep_debug": plt_elf(nobits=True),
        "cut_in_sections": plt_elf(cut=len(plt_elf()) - 100),
        "rela_link_past_sections": bytes(bad_link),
    }


# --- fuzz_symbolize -------------------------------------------------------------

def sym_len(field, data):
    return tag(field, 2) + varint(len(data)) + data


def sym_interned(build_ids=(), paths=(), mappings=(), frames=()):
    """InternedData: build_ids (16), mapping_paths (17) as (iid, bytes),
    mappings (19) as (iid, build iid, [path iids], packed), frames (6) as
    (iid, mapping iid, rel_pc)."""
    out = b""
    for iid, s in build_ids:
        out += sym_len(16, f_varint(1, iid) + sym_len(2, s))
    for iid, s in paths:
        out += sym_len(17, f_varint(1, iid) + sym_len(2, s))
    for iid, bid, parts, packed in mappings:
        m = f_varint(1, iid) + f_varint(2, bid)
        if packed:
            m += sym_len(7, b"".join(varint(p) for p in parts))
        else:
            m += b"".join(f_varint(7, p) for p in parts)
        out += sym_len(19, m)
    for iid, mapping, pc in frames:
        out += sym_len(6, f_varint(1, iid) + f_varint(3, mapping) +
                       f_varint(4, pc))
    return out


def sym_packet(seq, interned=b"", flags=0, machine=0, extra=b""):
    p = f_varint(10, seq)
    if flags:
        p += f_varint(13, flags)
    if interned:
        p += sym_len(12, interned)
    p += extra
    if machine:
        p += f_varint(98, machine)
    return sym_len(1, p)


def symbolize_corpus():
    full = sym_interned(build_ids=[(1, bytes(range(20)))],
                        paths=[(1, b"usr"), (2, b"bin"), (3, b"work")],
                        mappings=[(4, 1, [1, 2, 3], False)],
                        frames=[(1, 4, 0x1130), (2, 4, 0x1150), (3, 4, 0x1130)])
    packed = sym_interned(paths=[(1, b"lib"), (2, b"libc.so.6")],
                          mappings=[(9, 0, [1, 2], True)],
                          frames=[(1, 9, 0x29d90)])
    frames_first = (sym_len(6, f_varint(1, 1) + f_varint(3, 4) +
                            f_varint(4, 0x10)) +
                    sym_interned(paths=[(1, b"x")],
                                 mappings=[(4, 0, [1], False)]))
    return {
        "one_module": sym_packet(7, full, flags=1),
        "two_machines": (sym_packet(7, full, flags=1, machine=1) +
                         sym_packet(7, full, flags=1, machine=2)),
        "packed_paths": sym_packet(3, packed, flags=1),
        "frames_first": sym_packet(3, frames_first),
        "cleared_then_frame": (sym_packet(7, full, flags=1) +
                               sym_packet(7, flags=1) +
                               sym_packet(7, sym_interned(
                                   frames=[(5, 4, 0x99)]))),
        "module_symbols": sym_packet(1, extra=sym_len(61, sym_len(1, b"/x"))),
        "truncated": sym_packet(7, full)[:-5],
    }


def config_text(line_max, lines_max, text):
    """fuzz_config_text input: [line_max][lines_max - 1][text]."""
    return bytes([line_max, lines_max - 1]) + text


def config_text_corpus():
    collector = (b"# tracegate-collector\n"
                 b"hosts = /etc/tracegate-collector/hosts\n"
                 b"catalog = postgresql://u:p#w@db/tg   # '#' inside is data\n"
                 b"group = db db1 db2\r\n"
                 b"\n  trigger=oom db\n")
    return {
        "collector": config_text(200, 32, collector),
        "bom_crlf": config_text(64, 8, b"\xef\xbb\xbfcert = a.pem\r\nkey=b\r\n"),
        "words": config_text(80, 8, b"10.0.0.5:7467  name=h5.example # relay\n"
                                    b"\tssh://admin@db1\tlabel=db1\n"),
        "authz": config_text(80, 8, b"# identity role\nalice record\n bob observe\n"),
        "no_equals": config_text(80, 8, b"just words\n"),
        "empty_key": config_text(80, 8, b" = value\n"),
        "empty_value": config_text(80, 8, b"ca =\nca = # none\n"),
        "hash_data": config_text(80, 8, b"a=#b\nc = d#e#f\n#g\n"),
        "long_line": config_text(8, 8, b"ok = 1\nkey = 123456789\n"),
        "crlf_at_limit": config_text(5, 8, b"a = b\r\n"),
        "nul": config_text(80, 8, b"a = b\nc\x00 = d\n"),
        "nul_in_comment": config_text(80, 8, b"a = b # \x00\n"),
        "too_many_lines": config_text(80, 3, b"a\n\n# c\nd\n"),
        "last_line_no_newline": config_text(80, 2, b"a = b\nc = d"),
        "too_large": config_text(80, 256, b"x = y\n" * 100),
        "empty": config_text(0, 1, b""),
    }


def main():
    write("fuzz_frame_decoder", frame_corpus())
    write("fuzz_chunk_validator", chunk_corpus())
    write("fuzz_pb_reader", pb_corpus())
    write("fuzz_trace_buffer", trace_buffer_corpus())
    write("fuzz_trace_filter", trace_filter_corpus())
    write("fuzz_commit_data", commit_data_corpus())
    write("fuzz_relay_filter", relay_filter_corpus())
    write("fuzz_ftrace_page", ftrace_page_corpus())
    write("fuzz_session_cache", session_cache_corpus())
    write("fuzz_tls_record", tls_record_corpus())
    write("fuzz_tls_ecdsa", tls_ecdsa_corpus())
    write("fuzz_units", units_corpus())
    write("fuzz_traceparent", traceparent_corpus())
    write("fuzz_emit_rpc", emit_rpc_corpus())
    write("fuzz_json_text", json_text_corpus())
    write("fuzz_cli_ftrace_loss", cli_ftrace_loss_corpus())
    write("fuzz_merge", merge_corpus())
    write("fuzz_snap_index", snap_index_corpus())
    write("fuzz_snap_meta", snap_meta_corpus())
    write("fuzz_coll_window", coll_window_corpus())
    write("fuzz_boost_seq", boost_seq_corpus())
    write("fuzz_perf_record", perf_record_corpus())
    write("fuzz_perf_config", perf_config_corpus())
    write("fuzz_perf_maps", perf_maps_corpus())
    write("fuzz_perf_elf", perf_elf_corpus())
    write("fuzz_elf_plt", elf_plt_corpus())
    write("fuzz_config_text", config_text_corpus())
    write("fuzz_symbolize", symbolize_corpus())
    return 0


if __name__ == "__main__":
    sys.exit(main())
