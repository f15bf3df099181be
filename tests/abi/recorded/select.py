#!/usr/bin/env python3
"""Cuts recordings down to a fixture: the fewest small packets that hold
every (message, field, wire type) the recordings hold, taking for each the
smallest packet (at most CAP bytes) that has it.

    python3 tests/abi/recorded/select.py OUT CAP PROTO TRACE...

PROTO is Perfetto's perfetto_trace.proto (the schema the walk follows).
Prints how many of the recordings' (message, field, wire type) the
fixture holds; the screened messages' (TracePacket, InternedData) must all
be there.
"""
import importlib.util
import os
import sys


def load_gen():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "consumer", "fleet", "trace_schema_gen.py")
    spec = importlib.util.spec_from_file_location("gen", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        t, i = varint(b, i)
        f, w = t >> 3, t & 7
        if w == 0:
            _, i = varint(b, i)
            yield f, w, None
        elif w == 1:
            i += 8
            yield f, w, None
        elif w == 5:
            i += 4
            yield f, w, None
        elif w == 2:
            n, i = varint(b, i)
            yield f, w, b[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % w)


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    out, cap, proto, traces = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        sys.argv[4:]
    gen = load_gen()
    text = open(proto, encoding="utf-8").read()
    p = gen.Parser(gen.tokens(text))
    p.file("perfetto.protos")
    child = {}
    for name, fl in p.messages.items():
        for _label, typ, num, scope, _packed in fl:
            if typ not in gen.SCALAR_KIND:
                full = p.resolve(typ, scope)
                if full in p.messages:
                    child[(name, num)] = full

    def walk(msg, b, acc):
        for f, w, v in fields(b):
            acc.add((msg, f, w))
            sub = child.get((msg, f))
            if sub and w == 2:
                try:
                    walk(sub, v, acc)
                except (ValueError, IndexError):
                    pass  # bytes that only looked like a message

    best, every = {}, set()
    for path in traces:
        data = open(path, "rb").read()
        for f, w, v in fields(data):
            if f != 1 or w != 2:
                continue
            acc = set()
            walk("perfetto.protos.TracePacket", v, acc)
            every |= acc
            if len(v) > cap:
                continue
            for key in acc:
                if key not in best or len(best[key]) > len(v):
                    best[key] = v
    kept = list(dict.fromkeys(best.values()))
    blob = b"".join(b"\x0a" + enc(len(k)) + k for k in kept)
    with open(out, "wb") as f:
        f.write(blob)
    screened = {"perfetto.protos.TracePacket", "perfetto.protos.InternedData"}
    missing = sorted(k for k in every - set(best) if k[0] in screened)
    print("%s: %d packets, %d bytes; %d of %d (message, field, wire type)"
          % (out, len(kept), len(blob), len(best), len(every)))
    if missing:
        raise SystemExit("screened fields only in packets over CAP: %s" %
                         missing)


def enc(v):
    o = b""
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            o += bytes([c | 0x80])
        else:
            return o + bytes([c])


if __name__ == "__main__":
    main()
