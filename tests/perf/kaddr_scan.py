# SPDX-License-Identifier: Apache-2.0
"""Finds kernel addresses in a trace: every value in [LO, HI] (the
kernel image, _stext.._end) that the file holds in any form a reader could
take it from.

  python3 kaddr_scan.py LO HI TRACE...   (LO, HI in hex)

Walks the protobuf wire format with no schema: every varint (as is and
zigzag-decoded), every fixed64, and every length-delimited field both as a
message (when it parses as one) and as packed varints (when it parses as
those). The raw bytes are also scanned at every offset for an 8-byte
little-endian value in range, and the text for 16-digit hex numbers in
range (an address printed into a string).

Prints one JSON line: {"file", "values", "messages", "found": [...]} per
trace, each finding with its field path; exits 1 when anything is found,
2 on a file that is not a trace."""
import json
import re
import struct
import sys

MAX_FOUND = 20


def read_varint(buf, i, end):
    v = shift = 0
    while i < end and shift < 70:
        c = buf[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v & 0xffffffffffffffff, i
    return None, i


class Scan:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        self.values = self.messages = 0
        self.found = []
        self.seen = set()  # each value is reported once, where first met

    def report(self, x, path, form):
        if x in self.seen or len(self.found) >= MAX_FOUND:
            return
        self.seen.add(x)
        self.found.append({"path": path, "form": form, "value": "%#x" % x})

    def check(self, v, path, how):
        self.values += 1
        for x, form in ((v, how), ((v >> 1) ^ -(v & 1) & 0xffffffffffffffff,
                                   how + "/zigzag")):
            if self.lo <= x <= self.hi:
                self.report(x, path, form)

    def fields(self, buf, i, end):
        """The fields of a message in buf[i:end], or None if it is not
        one."""
        out = []
        while i < end:
            key, i = read_varint(buf, i, end)
            if key is None or key >> 3 == 0:
                return None
            wt, num = key & 7, key >> 3
            if wt == 0:
                v, i = read_varint(buf, i, end)
                if v is None:
                    return None
                out.append((num, wt, v))
            elif wt == 1:
                if i + 8 > end:
                    return None
                out.append((num, wt, struct.unpack_from("<Q", buf, i)[0]))
                i += 8
            elif wt == 2:
                n, i = read_varint(buf, i, end)
                if n is None or i + n > end:
                    return None
                out.append((num, wt, (i, i + n)))
                i += n
            elif wt == 5:
                if i + 4 > end:
                    return None
                out.append((num, wt, struct.unpack_from("<I", buf, i)[0]))
                i += 4
            else:
                return None
        return out

    def message(self, buf, i, end, path, depth=0):
        fields = self.fields(buf, i, end)
        if fields is None:
            return False
        self.messages += 1
        for num, wt, v in fields:
            p = "%s.%d" % (path, num) if path else str(num)
            if wt == 0:
                self.check(v, p, "varint")
            elif wt == 1:
                self.check(v, p, "fixed64")
            elif wt == 2:
                s, e = v
                if e > s and depth < 64:
                    self.message(buf, s, e, p, depth + 1)
                self.packed(buf, s, e, p)
        return True

    def packed(self, buf, i, end, path):
        vals = []
        while i < end:
            v, i = read_varint(buf, i, end)
            if v is None:
                return
            vals.append(v)
        for v in vals:
            if v > 0xffffffff:  # the others are no address
                self.check(v, path, "packed")

    def raw(self, buf):
        if self.lo >> 32 == self.hi >> 32:
            # Only where the upper half matches: the offsets to look at.
            top = struct.pack("<I", self.lo >> 32)
            offs, p = [], buf.find(top, 4)
            while p >= 0:
                offs.append(p - 4)
                p = buf.find(top, p + 1)
        else:
            offs = range(0, max(0, len(buf) - 7))
        for off in offs:
            v = struct.unpack_from("<Q", buf, off)[0]
            if self.lo <= v <= self.hi:
                self.report(v, "@%d" % off, "le64")
        for m in re.finditer(rb"(?<![0-9a-fA-F])([0-9a-fA-F]{16})(?![0-9a-fA-F])",
                             buf):
            v = int(m.group(1), 16)
            if self.lo <= v <= self.hi:
                self.report(v, "@%d" % m.start(), "hex text")


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lo, hi = int(argv[1], 16), int(argv[2], 16)
    bad = False
    for name in argv[3:]:
        with open(name, "rb") as f:
            buf = f.read()
        s = Scan(lo, hi)
        if not buf or not s.message(buf, 0, len(buf), ""):
            print(json.dumps({"file": name, "error": "not a trace"}))
            return 2
        s.raw(buf)
        print(json.dumps({"file": name, "values": s.values,
                          "messages": s.messages, "found": s.found}))
        bad = bad or bool(s.found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
