#!/usr/bin/env python3
"""Writes consumer/fleet/trace_schema_table.inc: for every message reachable from
TracePacket in Perfetto's trace proto, its fields' numbers and the wire
type each must arrive with (consumer/fleet/trace_schema.h says why); for the
screened messages (TracePacket, InternedData), which of their fields the
allowlist keeps, and the names of their fields, by which an operator
trusts the producers with more (merge_allow_fields).

    python3 consumer/fleet/trace_schema_gen.py \
        ../shared/perfetto/protos/perfetto_trace.proto \
        consumer/fleet/trace_allowlist.txt > consumer/fleet/trace_schema_table.inc

    python3 consumer/fleet/trace_schema_gen.py --check consumer/fleet/trace_allowlist.txt \
        consumer/fleet/trace_schema_table.inc

checks that the table is what the list and the .proto give (the .proto:
$PERFETTO_BIN/../protos/perfetto_trace.proto; without PERFETTO_BIN it
says it skipped and exits 77, which ctest reports as skipped, not
passed), so that a list edited without regenerating fails.

Only numbers, and the screened messages' field names, leave the .proto.
Deterministic: the same .proto and list give the same bytes. A path of
the list that the .proto does not have is an error: the list follows the
schema it is generated with.
"""
import re
import sys

SCALAR_KIND = {
    "int32": "V", "int64": "V", "uint32": "V", "uint64": "V",
    "sint32": "V", "sint64": "V", "bool": "V",
    "fixed64": "F64", "sfixed64": "F64", "double": "F64",
    "fixed32": "F32", "sfixed32": "F32", "float": "F32",
    "string": "L", "bytes": "L",
}
ROOT = "perfetto.protos.TracePacket"
# Messages consumer/fleet/trace_schema.c holds value rules for: their indices are
# named in the table.
SCREENED = ["TracePacket", "InternedData"]
NAMED = ["TracePacket", "InternedData", "FtraceEventBundle", "FtraceStats", "PerfSample",
         "VulkanMemoryEvent", "TrackDescriptor", "InternedString", "Mapping",
         "SysStats.CpuTimes", "SysStats.CpuIdleState",
         "KernelWakelockData.Wakelock", "ClockSnapshot", "ClockSnapshot.Clock"]


def tokens(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    return re.findall(r'[A-Za-z_][A-Za-z0-9_.]*|-?\d+|""|[{}=;\[\]<>,()]',
                      text)


class Parser:
    def __init__(self, toks):
        self.t = toks
        self.i = 0
        self.messages = {}  # full name -> [(label, type, number, scope)]
        self.enums = set()
        self.names = {}  # (message, number) -> field name

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.t[self.i]
        if want is not None and tok != want:
            raise SystemExit("expected %r at token %d, got %r" %
                             (want, self.i, tok))
        self.i += 1
        return tok

    def skip_statement(self):
        depth = 0
        while True:
            tok = self.take()
            if tok in "[(":
                depth += 1
            elif tok in "])":
                depth -= 1
            elif tok == ";" and depth == 0:
                return
            elif tok == "{" and depth == 0:
                self.skip_block()
                return

    def skip_block(self):
        depth = 1
        while depth:
            tok = self.take()
            depth += tok == "{"
            depth -= tok == "}"

    def file(self, package):
        while self.peek() is not None:
            tok = self.peek()
            if tok == "message":
                self.message(package)
            elif tok == "enum":
                self.enum(package)
            else:
                self.skip_statement()

    def enum(self, scope):
        self.take("enum")
        self.enums.add(scope + "." + self.take())
        self.take("{")
        self.skip_block()

    def message(self, scope):
        self.take("message")
        name = scope + "." + self.take()
        self.take("{")
        fields = self.messages.setdefault(name, [])
        self.body(name, fields, "}")

    def body(self, name, fields, end):
        while self.peek() != end:
            tok = self.peek()
            if tok == "message":
                self.message(name)
            elif tok == "enum":
                self.enum(name)
            elif tok == "oneof":
                self.take()
                self.take()
                self.take("{")
                self.body(name, fields, "}")
            elif tok in ("option", "reserved", "extensions", "extend"):
                self.skip_statement()
            elif tok == ";":  # an empty statement ("};")
                self.take()
            else:
                self.field(name, fields)
        self.take(end)

    def field(self, scope, fields):
        label = "optional"
        if self.peek() in ("optional", "repeated", "required"):
            label = self.take()
        typ = self.take()
        if typ == "map":  # entries of a key and a value: not looked into
            while self.take() != ">":
                pass
            typ = "bytes"
        fname = self.take()
        self.take("=")
        number = int(self.take())
        packed = False
        if self.peek() == "[":
            opts = []
            while self.peek() != "]":
                opts.append(self.take())
            self.take("]")
            packed = "packed" in opts
        self.take(";")
        fields.append((label, typ, number, scope, packed))
        self.names[(scope, number)] = fname

    def resolve(self, typ, scope):
        """protobuf's scoping: the innermost scope outwards."""
        if typ.startswith("."):
            typ = typ[1:]
            return typ if typ in self.messages or typ in self.enums else None
        parts = scope.split(".")
        while parts:
            cand = ".".join(parts) + "." + typ
            if cand in self.messages or cand in self.enums:
                return cand
            parts.pop()
        return typ if typ in self.messages or typ in self.enums else None


def wrapped(items):
    """Initializer items, as many to a line as fit in 78 columns."""
    lines, line = [], "   "
    for item in items:
        if len(line) + len(item) > 78:
            lines.append(line)
            line = "   "
        line += item
    lines.append(line)
    return lines


def allowlist(path, p, package):
    """The list's paths as {message: {number}}; every screened message
    has an entry."""
    keep = {package + "." + short: set() for short in SCREENED}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        msg, _, field = line.rpartition(".")
        full = package + "." + msg
        if full not in keep:
            raise SystemExit("%s:%d: %s is not a screened message" %
                             (path, n, msg))
        nums = [num for (scope, num), name in p.names.items()
                if scope == full and name == field]
        if not nums:
            raise SystemExit("%s:%d: %s has no field %s" % (path, n, msg, field))
        keep[full].add(nums[0])
    return keep


def check(list_path, table_path):
    import io
    import os
    bin_dir = os.environ.get("PERFETTO_BIN")
    if not bin_dir:
        print("trace_schema_gen: skipped: PERFETTO_BIN (the directory of "
              "Perfetto's binaries, beside its protos/) is not set")
        return 77
    proto = os.path.join(bin_dir, "..", "protos", "perfetto_trace.proto")
    out = io.StringIO()
    saved = sys.stdout
    sys.argv = [sys.argv[0], proto, list_path]
    sys.stdout = out
    try:
        main()
    finally:
        sys.stdout = saved
    if out.getvalue() != open(table_path, encoding="utf-8").read():
        print("trace_schema_gen: %s is not what %s and %s give: run\n"
              "  python3 consumer/fleet/trace_schema_gen.py %s %s > %s"
              % (table_path, list_path, proto, proto, list_path, table_path))
        return 1
    print("trace_schema_gen: %s is current" % table_path)
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    text = open(sys.argv[1], encoding="utf-8").read()
    m = re.search(r"^package\s+([A-Za-z0-9_.]+)\s*;", text, re.M)
    p = Parser(tokens(text))
    p.file(m.group(1))
    keep = allowlist(sys.argv[2], p, m.group(1))

    order, index = [], {}

    def visit(name):
        if name in index:
            return
        index[name] = len(order)
        order.append(name)
        for label, typ, number, scope, packed in p.messages[name]:
            if typ in SCALAR_KIND:
                continue
            full = p.resolve(typ, scope)
            if full is None:
                raise SystemExit("%s: unknown type %s" % (name, typ))
            if full in p.messages:
                visit(full)

    visit(ROOT)
    rows, spans = [], []
    for name in order:
        first = len(rows)
        seen = {}
        for label, typ, number, scope, packed in p.messages[name]:
            if typ in SCALAR_KIND:
                kind, child = SCALAR_KIND[typ], 0
            else:
                full = p.resolve(typ, scope)
                if full in p.messages:
                    kind, child = "M", index[full]
                else:
                    kind, child = "V", 0  # an enum
            # Trace processor reads a field as its .proto declares it: a
            # [packed = true] one only as one length-delimited run, any
            # other repeated number one by one (a run there would read as
            # a pointer's bits, as would a lone number in a packed one).
            if packed and kind in ("V", "F64", "F32"):
                kind = "L"
            if number in seen:
                raise SystemExit("%s: field %d twice" % (name, number))
            seen[number] = True
            refused = name in keep and number not in keep[name]
            rows.append((number, kind, child, refused))
        rows[first:] = sorted(rows[first:])
        spans.append((first, len(rows) - first))
    if len(order) > 65535:
        raise SystemExit("too many messages for a 16-bit index")

    # Dense: a slot per field number up to the message's highest, so the
    # walk finds a field by indexing (the numbers are small: the highest
    # in any message is under 1024).
    slots, dense = [], []
    for first, count in spans:
        top = max([r[0] for r in rows[first:first + count]] or [0])
        if top >= 1024:
            raise SystemExit("a field number past 1023: not dense")
        base = len(slots)
        slots.extend([("NONE", 0, 0)] * (top + 1))
        for number, kind, child, refused in rows[first:first + count]:
            slots[base + number] = (kind, int(refused), child)
        dense.append((base, top + 1))

    out = []
    out.append("/* Generated by consumer/fleet/trace_schema_gen.py from Perfetto's trace "
               "proto (%d\n * messages, %d fields). Never edited by hand. "
               "*/" % (len(order), len(rows)))
    out.append("#define TG_TS_N_MESSAGES %d" % len(order))
    for short in NAMED:
        out.append("#define TG_TS_MSG_%s %d" %
                   (short.replace(".", "_"), index["perfetto.protos." + short]))
    out.append("#define TG_TS_N_SLOTS %d" % len(slots))
    out.append("static const tg_ts_slot_t tg_ts_slots[TG_TS_N_SLOTS] = {")
    out.extend(wrapped(" {TG_TS_%s, %d, %d}," % s for s in slots))
    out.append("};")
    out.append("static const tg_ts_message_t tg_ts_messages[TG_TS_N_MESSAGES]"
               " = {")
    out.extend(wrapped(" {%d, %d}," % d for d in dense))
    out.append("};")
    # The screened messages' field names, for the operator's trust.
    for short in SCREENED:
        full = m.group(1) + "." + short
        named = sorted((p.names[(full, num)], num)
                       for (_, _, num, _, _) in p.messages[full])
        ident = short.replace(".", "_")
        out.append("static const tg_ts_name_t tg_ts_names_%s[] = {" % ident)
        out.extend(wrapped(' {"%s", %d},' % nn for nn in named))
        out.append("};")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
