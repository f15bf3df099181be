#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make fuzz-merge-tp: packets built from Perfetto's schema, merged beside a
good host, imported into Perfetto's trace processor.

    merge_tp.py --harness BIN --perfetto-bin DIR [--seconds N] [--seed S]
                [--corpus DIR] [--out DIR] [--save-corpus]
    merge_tp.py --harness BIN --perfetto-bin DIR --replay FILE...

Each round builds a short run of TracePackets from the messages of
perfetto_trace.proto (beside the binaries: DIR/../protos), stateful across
their sequences (a first packet that clears the sequence's incremental
state, later ones that need it, interned ids drawn from a small set so
that references hit, timestamps that grow), writes them as a fuzz_merge
input (tests/fuzz/fuzz_merge.c's records), merges it beside a good host
with merge_tp_harness (test_fleet_merge's trace_processor_reads_the_others
_beside_them, built alone) and imports the result into
trace_processor_shell under an address-space limit and a deadline. The
good host's slice must be there. A round that does not end so is a
finding, classified:

    import    trace processor refused the file (its error line)
    crash     it was killed by a signal (the signal and its last line)
    timeout   no end within --tp-timeout
    memory    it ran out of --tp-memory (bad_alloc)
    evidence  it imported, but the good host's slice is not there once
    harness   our merge itself failed or a sanitizer stopped it

A finding's signature is its class and its line with every number made N.
Before the search, every input of the corpus is replayed: the signatures
they still produce are known (the screen does not stop them yet), and a
finding with a known signature is counted, not failed. A finding with a
new signature is cut down (records, then fields, then fields of nested
messages, while the signature stays) and saved to --out as
regress-tp-<class>-<hash>; with --save-corpus into the corpus as well.
Exit status: 0 no new finding; 1 new findings (listed); 2 the job could
not run. Stdlib only: the schema is read by the small parser below.
"""
import argparse
import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# --- the schema -------------------------------------------------------------

SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32",
    "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string",
    "bytes",
}
TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|'
                   r"'(?:[^'\\]|\\.)*'|[A-Za-z_][\w.]*|-?\d[\w.]*|.", re.S)


class Field:
    __slots__ = ("name", "number", "label", "type", "packed", "scope")

    def __init__(self, name, number, label, type_, packed, scope):
        self.name, self.number, self.label = name, number, label
        self.type, self.packed, self.scope = type_, packed, scope


class Schema:
    """Messages and enums of one proto2 file, by full name (no package)."""

    def __init__(self, text):
        self.messages = {}  # name -> [Field]
        self.enums = {}     # name -> [values]
        self.toks = [t for t in TOKEN.findall(text)
                     if t.strip() and not t.startswith(("//", "/*"))]
        self.i = 0
        while self.i < len(self.toks):
            self.top("")
        for fields in self.messages.values():
            for f in fields:
                f.type = self.resolve(f.type, f.scope)

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def skip_statement(self):
        depth = 0
        while self.i < len(self.toks):
            t = self.take()
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth == 0:
                    return
            elif t == ";" and depth == 0:
                return

    def top(self, scope):
        t = self.peek()
        if t == "message":
            self.take()
            self.message(scope + self.take())
        elif t == "enum":
            self.take()
            self.enum(scope + self.take())
        elif t == ";":
            self.take()
        else:
            self.skip_statement()

    def enum(self, name):
        assert self.take() == "{"
        values = []
        while self.peek() != "}":
            t = self.take()
            if t == ";":
                continue
            if t in ("option", "reserved"):
                self.i -= 1
                self.skip_statement()
                continue
            assert self.take() == "="
            values.append(int(self.take(), 0))
            while self.take() != ";":
                pass
        self.take()
        self.enums[name] = values or [0]

    def message(self, name):
        assert self.take() == "{"
        fields = self.messages.setdefault(name, [])
        while self.peek() != "}":
            t = self.peek()
            if t == ";":  # an empty statement ("};")
                self.take()
            elif t in ("message", "enum"):
                self.top(name + ".")
            elif t == "oneof":
                self.take()
                self.take()
                assert self.take() == "{"
                while self.peek() != "}":
                    if self.peek() == "option":
                        self.skip_statement()
                    else:
                        self.field(name, fields, "optional")
                self.take()
            elif t in ("option", "reserved", "extensions", "extend"):
                self.skip_statement()
            else:
                self.field(name, fields, None)
        self.take()

    def field(self, scope, fields, label):
        t = self.take()
        if t in ("optional", "repeated", "required"):
            label, t = t, self.take()
        if t == "map":  # map<K, V> name = N;
            while self.take() != ">":
                pass
            fname = self.take()
            self.take()
            num = int(self.take(), 0)
            self.skip_statement()
            fields.append(Field(fname, num, "repeated", "bytes", False, scope))
            return
        fname = self.take()
        assert self.take() == "="
        num = int(self.take(), 0)
        packed = False
        if self.peek() == "[":
            while True:
                o = self.take()
                if o == "packed":
                    self.take()
                    packed = self.take() == "true"
                if o == "]":
                    break
        assert self.take() == ";"
        fields.append(Field(fname, num, label or "optional", t, packed, scope))

    def resolve(self, t, scope):
        if t in SCALARS:
            return t
        t = t.lstrip(".")
        if t.startswith("perfetto.protos."):
            t = t[len("perfetto.protos."):]
        parts = scope.split(".")
        for k in range(len(parts), -1, -1):
            cand = ".".join(parts[:k] + [t])
            if cand in self.messages or cand in self.enums:
                return cand
        return "bytes"  # a type of another file: opaque bytes


# --- wire encoding ----------------------------------------------------------

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num, wt):
    return varint(num << 3 | wt)


def zigzag(v, bits):
    return ((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1)


def read_varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields_of(b):
    """The (start, end, number, wire type, payload) of each field of |b|, or
    None when |b| is not a message."""
    out, i = [], 0
    try:
        while i < len(b):
            s = i
            k, i = read_varint(b, i)
            num, wt = k >> 3, k & 7
            if num == 0:
                return None
            if wt == 0:
                _, i = read_varint(b, i)
                payload = None
            elif wt == 1:
                i += 8
                payload = None
            elif wt == 5:
                i += 4
                payload = None
            elif wt == 2:
                n, i = read_varint(b, i)
                payload = (i, i + n)
                i += n
            else:
                return None
            if i > len(b):
                return None
            out.append((s, i, num, wt, payload))
    except ValueError:
        return None
    return out


# --- the generator ----------------------------------------------------------

INTERESTING = [0, 1, 2, 3, 4, 6, 7, 8, 15, 16, 64, 100, 127, 128, 255, 256,
               1000, 4095, 4096, 65535, 65536, 1 << 20, (1 << 31) - 1, 1 << 31,
               (1 << 32) - 1, 1 << 32, 1 << 53, (1 << 63) - 1, 1 << 63,
               (1 << 64) - 1, -1, -2, -(1 << 31), -(1 << 63), 5000,
               1000000000000, 2000000000000, 1700000000000000000]
STRINGS = [b"", b"a", b"\xff\xfe", b"%s%n%d", b"0", b"-1",
           b"com.example.app", b"/system/bin/sh", b"a" * 300, b"\x00",
           b"sched_switch", b"cpu0", b"main", b"ftrace"]
SEQ_CLEARED, SEQ_NEEDS = 1, 2


class Generator:
    def __init__(self, schema, rng):
        self.s, self.r = schema, rng
        packet = schema.messages["TracePacket"]
        self.packet_fields = packet
        skip = {"trusted_packet_sequence_id", "machine_id", "sequence_flags",
                "timestamp", "compressed_packets"}
        self.data_fields = [f for f in packet if f.name not in skip]
        # What Linux producers write, and what ties packets together
        # (clocks, tracks, interning): drawn a third of the time, so that
        # packets meet the state others left.
        hot = {"clock_snapshot", "ftrace_events", "track_event",
               "track_descriptor", "process_tree", "process_stats",
               "sys_stats", "perf_sample", "system_info", "trace_stats",
               "ftrace_stats", "remote_clock_sync", "profile_packet",
               "streaming_profile_packet", "module_symbols", "cpu_info",
               "service_event", "trace_config", "packages_list"}
        self.hot_fields = [f for f in packet if f.name in hot]

    def int_value(self, f):
        r = self.r
        if "iid" in f.name and r.random() < 0.8:
            return r.randint(0, 4)
        if f.name in ("cpu", "pid", "tid", "upid", "utid") and r.random() < 0.6:
            return r.choice([0, 1, 2, 3, 100, 1000])
        if "timestamp" in f.name and r.random() < 0.6:
            return self.ts + r.randint(-1000, 100000)
        x = r.random()
        if x < 0.55:
            return r.choice(INTERESTING)
        if x < 0.85:
            return r.randint(0, 300)
        return r.getrandbits(r.choice([8, 16, 32, 64]))

    def scalar(self, f):
        t, r = f.type, self.r
        if t in self.s.enums:
            vals = self.s.enums[t]
            v = r.choice(vals) if r.random() < 0.9 else r.choice([-1, 99, 1 << 31])
            return key(f.number, 0) + varint(v)
        if t == "bool":
            return key(f.number, 0) + varint(r.choice([0, 1, 1, 2]))
        if t in ("int32", "int64", "uint32", "uint64"):
            return key(f.number, 0) + varint(self.int_value(f))
        if t in ("sint32", "sint64"):
            bits = 32 if t == "sint32" else 64
            v = self.int_value(f)
            v = v - (1 << 64) if v >= 1 << 63 else v
            return key(f.number, 0) + varint(zigzag(v, bits))
        if t in ("fixed64", "sfixed64", "double"):
            if t == "double" and r.random() < 0.5:
                import struct
                return key(f.number, 1) + struct.pack(
                    "<d", r.choice([0.0, -1.0, 1e308, float("nan"), float("inf"), 0.5]))
            return key(f.number, 1) + (self.int_value(f) & (2**64 - 1)).to_bytes(8, "little")
        if t in ("fixed32", "sfixed32", "float"):
            return key(f.number, 5) + (self.int_value(f) & (2**32 - 1)).to_bytes(4, "little")
        if t in ("string", "bytes"):
            b = r.choice(STRINGS) if r.random() < 0.8 else r.randbytes(r.randint(0, 40))
            return key(f.number, 2) + varint(len(b)) + b
        raise AssertionError(t)

    def value(self, f, depth):
        if f.type in self.s.messages:
            body = self.message(f.type, depth + 1)
            return key(f.number, 2) + varint(len(body)) + body
        return self.scalar(f)

    def message(self, name, depth):
        fields = self.s.messages[name]
        if not fields or depth > 5:
            return b""
        r = self.r
        n = r.choice([0, 1, 1, 2, 2, 3, 4, 6]) if depth else r.choice([1, 2, 3])
        out = bytearray()
        for _ in range(n):
            f = r.choice(fields)
            reps = r.choice([1, 1, 1, 2, 3]) if f.label == "repeated" else 1
            for _ in range(reps):
                out += self.value(f, depth)
        return bytes(out)

    def service_event(self):
        """A TracingServiceEvent: flush and read markers (which drive trace
        processor's sorter) most of the time."""
        r = self.r
        body = bytearray()
        for _ in range(r.choice([1, 1, 2])):
            body += key(r.choice([3, 3, 4, 4, 1, 2, 5, 9]), 0) + varint(
                r.choice([1, 1, 1, 0, 2]))
        return key(69, 2) + varint(len(body)) + bytes(body)

    def clock_snapshot(self):
        """A ClockSnapshot near the round's time: builtin, sequence-scoped
        and producers' clocks, now and then with a unit, incremental, a
        clock twice, a value going back or a primary clock."""
        r = self.r
        ids = r.sample([1, 3, 4, 5, 6, 6, 64, 65, 128, 200],
                       r.randint(1, 4))
        if 6 not in ids and r.random() < 0.7:
            ids.append(6)
        body = bytearray()
        for cid in ids:
            c = key(1, 0) + varint(cid)
            v = self.ts + r.randint(-5000, 5000)
            c += key(2, 0) + varint(r.choice([v, v, v, 0, 1 << 40]))
            if r.random() < 0.1:
                c += key(3, 0) + varint(1)
            if r.random() < 0.1:
                c += key(4, 0) + varint(r.choice([0, 1, 1000]))
            body += key(1, 2) + varint(len(c)) + c
        if r.random() < 0.1:
            body += key(2, 0) + varint(r.choice([1, 3, 6]))
        return key(6, 2) + varint(len(body)) + bytes(body)

    def run(self):
        """One round: the packets (bytes) and the host byte of each, two
        hostile hosts interleaved, each with sequences of its own,
        stateful per host and sequence."""
        r = self.r
        self.ts = r.choice([0, 1000, 5000, 1000000000000, r.getrandbits(40)])
        seqs = {h: r.sample(range(1, 64), r.randint(1, 8)) for h in (0, 1)}
        started = set()
        packets, hosts, prev = [], [], []
        for _ in range(r.randint(1, 24)):
            if prev and r.random() < 0.1:
                p, h = r.choice(prev)  # a packet again, as rings do
                packets.append(p)
                hosts.append(h)
                continue
            h = r.randrange(2)
            seq = r.choice(seqs[h])
            out = bytearray()
            if r.random() < 0.05:  # a host's clock far from the others'
                self.ts = r.choice([0, 1, 1 << 40, (1 << 63) - 1, 1 << 62])
            self.ts += r.randint(-1000, 100000)
            self.ts &= (1 << 64) - 1
            if r.random() < 0.9:
                out += key(8, 0) + varint(self.ts)
            if r.random() < 0.2:
                out += key(58, 0) + varint(
                    r.choice([1, 2, 3, 4, 5, 6, 64, 65, 100, 128, 200]))
            x = r.random()
            if x < 0.06:
                # A service's flush: two flush markers and a read marker,
                # the run that makes trace processor's sorter sort what it
                # read so far for good.
                for field in (3, 3, 4):
                    p = (key(8, 0) + varint(self.ts) + key(69, 2) + varint(2)
                         + key(field, 0) + varint(1) + key(10, 0) + varint(seq))
                    packets.append(p)
                    hosts.append(h)
                continue
            if x < 0.12:
                out += self.service_event()
            elif x < 0.22:
                out += self.clock_snapshot()
            else:
                f = r.choice(self.hot_fields if r.random() < 0.35
                             else self.data_fields)
                out += self.value(f, 0)
            if (h, seq) not in started or r.random() < 0.1:
                started.add((h, seq))
                if r.random() < 0.8:
                    out += key(13, 0) + varint(SEQ_CLEARED)
                else:
                    out += key(41, 0) + varint(1)  # incremental_state_cleared
                if r.random() < 0.5:
                    body = self.message("InternedData", 1)
                    out += key(12, 2) + varint(len(body)) + body
                if r.random() < 0.3:
                    body = self.message("TracePacketDefaults", 1)
                    out += key(59, 2) + varint(len(body)) + body
            elif r.random() < 0.7:
                out += key(13, 0) + varint(SEQ_NEEDS)
                if r.random() < 0.3:
                    body = self.message("InternedData", 1)
                    out += key(12, 2) + varint(len(body)) + body
            if r.random() < 0.05:
                out += key(42, 0) + varint(1)  # previous_packet_dropped
            # The trusted fields a service writes, as a host may forge them.
            if r.random() < 0.3:
                out += key(3, 0) + varint(r.choice([0, 1000, (1 << 32) - 1]))
            if r.random() < 0.2:
                out += key(79, 0) + varint(r.choice([0, 1, 100, 1 << 31]))
            if r.random() < 0.97:
                out += key(10, 0) + varint(seq)
            if r.random() < 0.03:  # another sequence's id after it
                out += key(10, 0) + varint(r.choice(seqs[1 - h]))
            packets.append(bytes(out))
            hosts.append(h)
            prev.append((bytes(out), h))
        return packets, hosts


def records(packets, hosts=None):
    out = bytearray()
    for k, p in enumerate(packets):
        p = p[:65535]
        out += bytes([hosts[k] if hosts else 1]) + len(p).to_bytes(2, "little") + p
    return bytes(out)


def parse_records(b):
    out, at = [], 0
    while len(b) - at >= 3:
        h, n = b[at], b[at + 1] | b[at + 2] << 8
        at += 3
        n = min(n, len(b) - at)
        out.append((h, b[at:at + n]))
        at += n
    return out


# --- one round through the merge and trace processor ------------------------

class Runner:
    def __init__(self, args, work):
        # A copy: a rebuild of the tree during a long run must not pull
        # the binary from under it.
        self.harness = os.path.join(work, "merge_tp_harness")
        shutil.copy2(args.harness, self.harness)
        self.tp = os.path.join(args.perfetto_bin, "trace_processor_shell")
        self.timeout = args.tp_timeout
        self.memory = args.tp_memory
        self.work = work
        self.runs = 0
        # The good host imported alone (no input on the other hosts), in
        # each mode of the merge (the input's last byte even: machines,
        # odd: joined, as the harness reads it): what every round's merged
        # file must hold of it, unchanged.
        self.baselines = []
        for mode, data in (("machines", b""), ("joined", b"\x01")):
            empty = os.path.join(work, "empty-" + mode)
            alone = os.path.join(work, "alone-%s.pftrace" % mode)
            with open(empty, "wb") as f:
                f.write(data)
            subprocess.run([self.harness, empty, alone], check=True,
                           stdout=subprocess.DEVNULL)
            c, l, base = self.tp_run(alone)
            if c or not base.startswith("1:evidence@"):
                raise RuntimeError("the good host alone (%s): %s %s %s" % (
                    mode, c, l, base))
            self.baselines.append(base)

    def limits(self):
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (self.memory, self.memory))

    def run(self, data):
        """(class, line) of |data| as a fuzz_merge input; class None: fine."""
        self.runs += 1
        inp = os.path.join(self.work, "input")
        trace = os.path.join(self.work, "merged.pftrace")
        with open(inp, "wb") as f:
            f.write(data)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
                   UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
        h = subprocess.run([self.harness, inp, trace], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=60)
        if h.returncode != 0:
            return "harness", last_line(h.stderr.decode("utf-8", "replace"))
        c, l, out = self.tp_run(trace)
        if c:
            return c, l
        baseline = self.baselines[1 if data and data[-1] & 1 else 0]
        if out != baseline:
            slices, counters, stats = (out.split("|") + ["", "", ""])[:3]
            bs, bc, _ = (baseline.split("|") + ["", "", ""])[:3]
            if slices != bs or counters != bc:
                what = "slices" if slices != bs else "counters"
                return "evidence", "the good host's %s differ from its " \
                    "import alone" % what
            return "stat", "trace processor counted %s" % stats
        return None, ""

    def tp_run(self, trace):
        """(class, line, the good host's data) of importing |trace|."""
        p = subprocess.Popen(
            [self.tp, "-Q", GOOD_HOST_QUERY, trace], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, preexec_fn=self.limits)
        try:
            out, err = p.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return "timeout", "no end within %d s" % self.timeout, ""
        err = err.decode("utf-8", "replace")
        if "bad_alloc" in err or "Cannot allocate memory" in err:
            return "memory", why_of(err), ""
        if p.returncode < 0:
            return "crash", "%s: %s" % (signal.Signals(-p.returncode).name,
                                        why_of(err)), ""
        if p.returncode != 0:
            return "import", why_of(err), ""
        lines = out.decode("utf-8", "replace").strip().splitlines()
        return None, "", lines[-1].strip().strip('"') if lines else ""


# The good host (machine 1: the harness's host 0; in the joined mode its
# app tracks are on machine 0, by their names) as trace processor
# reads it: its slices and counters, and the whole file's stats no host
# may raise for the others (a refused ClockSnapshot, packets the sorter
# dropped). One line: "N:slices|N:counters|stats".
GOOD_HOST_QUERY = (
    "select (select count(*) || ':' || ifnull(group_concat(x, ';'), '') "
    "from (select s.name || '@' || s.ts || '+' || s.dur || '/' || s.depth "
    "as x from slice s join track t on s.track_id = t.id left join machine "
    "m on t.machine_id = m.id where m.raw_id = 1 or (ifnull(m.raw_id, 0) "
    "= 0 and t.name = 'evidence track') order by s.ts, s.name)) "
    "|| '|' || (select count(*) || ':' || ifnull(group_concat(x, ';'), '') "
    "from (select t.name || '@' || c.ts || '=' || c.value as x from "
    "counter c join track t on c.track_id = t.id left join machine m on "
    "t.machine_id = m.id where m.raw_id = 1 or (ifnull(m.raw_id, 0) = 0 "
    "and t.name = 'evidence counter') order by c.ts, t.name)) "
    "|| '|' || (select ifnull(group_concat(name || '=' || value, ','), '') "
    "from stats where value > 0 and name in ('invalid_clock_snapshots', "
    "'sorter_push_event_out_of_order'))")


def last_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if "ERROR:" in l or "runtime error" in l:
            return l.strip()[:300]
    return lines[-1].strip()[:300] if lines else "no output"


def why_of(err):
    """The line of trace processor's stderr that says why (as
    cli/snapshot_check.c picks it)."""
    best, rank, last = None, 0, None
    for line in re.split(r"[\r\n]", err):
        line = line.strip()
        if line.startswith("Loading trace"):
            m = line.find(" MB")
            if m < 0:
                continue
            line = line[m + 3:].strip()
        if not line:
            continue
        last = line
        r = 0
        if "Could not read trace file" in line:
            r = 3
            c = line.find("): ")
            if c >= 0:
                line = line[c + 3:]
        elif any(k in line for k in ("Check failed", "terminate called",
                                     "FATAL", "stack smashing")):
            r = 2
        if r > rank:
            best, rank = line, r
    return (best or last or "no reason given")[:300]


def signature(cls, line):
    line = re.sub(r"/[\w./-]+", "PATH", line)
    line = re.sub(r"0x[0-9a-fA-F]+|\d+", "N", line)
    line = re.sub(r"\[N\.N\] ", "", line)
    return "%s: %s" % (cls, line)


# --- cutting a finding down -------------------------------------------------

def minimize(runner, data, sig, budget):
    recs = parse_records(data)

    def same(rs):
        nonlocal budget
        if budget <= 0:
            return False
        budget -= 1
        c, l = runner.run(records([p for _, p in rs], [h for h, _ in rs]))
        return c is not None and signature(c, l) == sig

    # Whole records, one at a time from the end.
    i = len(recs) - 1
    while i >= 0 and len(recs) > 1:
        trial = recs[:i] + recs[i + 1:]
        if same(trial):
            recs = trial
        i -= 1

    # Fields of each packet, then fields of the messages in them.
    for k in range(len(recs)):
        h = recs[k][0]

        def packet_ok(new, k=k, h=h):
            return same(recs[:k] + [(h, new)] + recs[k + 1:])

        recs[k] = (h, shrink(recs[k][1], packet_ok, 0))
    return records([p for _, p in recs], [h for h, _ in recs])


def shrink(msg, ok, depth):
    """|msg| with every field whose removal keeps ok() true removed, then the
    same inside each field that is a message itself."""
    i = len(fields_of(msg) or []) - 1
    while i >= 0:
        fl = fields_of(msg) or []
        if i < len(fl):
            s, e = fl[i][0], fl[i][1]
            if ok(msg[:s] + msg[e:]):
                msg = msg[:s] + msg[e:]
        i -= 1
    if depth >= 8:
        return msg
    i = 0
    while i < len(fields_of(msg) or []):
        s, e, num, wt, payload = (fields_of(msg) or [])[i]
        if payload and payload[1] > payload[0] and fields_of(
                msg[payload[0]:payload[1]]):
            a, b = payload

            def wrap(inner, s=s, e=e, num=num, msg=msg):
                return msg[:s] + key(num, 2) + varint(len(inner)) + inner + msg[e:]

            inner = shrink(msg[a:b], lambda ni: ok(wrap(ni)), depth + 1)
            msg = wrap(inner)
        i += 1
    return msg


# --- the job ----------------------------------------------------------------

def corpus_files(d):
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, n) for n in os.listdir(d)
                  if not n.startswith(".") and os.path.isfile(os.path.join(d, n)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harness", required=True)
    ap.add_argument("--perfetto-bin", required=True)
    ap.add_argument("--proto", help="perfetto_trace.proto (default: beside "
                    "the binaries, ../protos)")
    ap.add_argument("--seconds", type=int, default=600)
    # A search bounded by its rounds as well: with a fixed seed, the same
    # inputs whatever the machine's speed (the self-test's bound).
    ap.add_argument("--rounds", type=int, default=0,
                    help="stop after this many rounds (0: no bound)")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--corpus", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_merge"))
    ap.add_argument("--out", default="build/fuzz-merge-tp")
    ap.add_argument("--save-corpus", action="store_true")
    ap.add_argument("--tp-timeout", type=int, default=30)
    ap.add_argument("--tp-memory", type=int, default=2 << 30)
    ap.add_argument("--minimize-budget", type=int, default=300)
    ap.add_argument("--replay", nargs="*")
    args = ap.parse_args()
    tp = os.path.join(args.perfetto_bin, "trace_processor_shell")
    proto = args.proto or os.path.join(args.perfetto_bin, "..", "protos",
                                       "perfetto_trace.proto")
    for path in (args.harness, tp, proto):
        if not os.path.exists(path):
            print("fuzz-merge-tp: %s is missing" % path, file=sys.stderr)
            return 2
    work = tempfile.mkdtemp(prefix="tg-merge-tp-")
    try:
        return job(args, proto, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def job(args, proto, work):
    runner = Runner(args, work)
    if args.replay is not None:
        bad = 0
        for path in args.replay:
            with open(path, "rb") as f:
                c, l = runner.run(f.read())
            print("%s: %s" % (path, signature(c, l) if c else "ok"))
            bad += c is not None
        return 1 if bad else 0
    with open(proto, encoding="utf-8") as f:
        schema = Schema(f.read())
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    gen = Generator(schema, rng)
    known = {}
    for path in corpus_files(args.corpus):
        with open(path, "rb") as f:
            c, l = runner.run(f.read())
        if c:
            known.setdefault(signature(c, l), os.path.basename(path))
    print("fuzz-merge-tp: seed %d, %d messages in the schema, %d signatures "
          "of corpus inputs known" % (seed, len(schema.messages), len(known)),
          flush=True)
    for s, name in sorted(known.items()):
        print("  known: %s (%s)" % (s, name))
    os.makedirs(args.out, exist_ok=True)
    started = time.monotonic()
    deadline = started + args.seconds
    rounds, found_known, new = 0, 0, {}
    said = time.monotonic()
    while time.monotonic() < deadline and not (
            args.rounds and rounds >= args.rounds):
        rounds += 1
        if time.monotonic() - said >= 60:
            said = time.monotonic()
            print("fuzz-merge-tp: %d rounds, %d imports, %d known, %d new" % (
                rounds, runner.runs, found_known, len(new)), flush=True)
        data = records(*gen.run())
        c, l = runner.run(data)
        if not c:
            continue
        sig = signature(c, l)
        if sig in known:
            found_known += 1
            continue
        if sig in new:
            continue
        # A finding counts once it comes again: a slow machine's timeout
        # that does not is said and dropped.
        c2, l2 = runner.run(data)
        if not c2 or signature(c2, l2) != sig:
            print("fuzz-merge-tp: not reproduced, dropped: %s" % sig, flush=True)
            continue
        small = minimize(runner, data, sig, args.minimize_budget)
        name = "regress-tp-%s-%s" % (c, hashlib.sha256(small).hexdigest()[:8])
        for d in [args.out] + ([args.corpus] if args.save_corpus else []):
            with open(os.path.join(d, name), "wb") as f:
                f.write(small)
        new[sig] = name
        print("fuzz-merge-tp: NEW after %d rounds: %s -> %s (%d bytes)" % (
            rounds, sig, os.path.join(args.out, name), len(small)), flush=True)
    print("fuzz-merge-tp: %d rounds in %d s (%d imports), %d findings already "
          "in the corpus, %d new" % (rounds, time.monotonic() - started,
                                     runner.runs,
                                     found_known, len(new)))
    for sig, name in sorted(new.items(), key=lambda x: x[1]):
        print("  new: %s: %s" % (name, sig))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
