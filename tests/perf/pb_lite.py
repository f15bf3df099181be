# SPDX-License-Identifier: Apache-2.0
"""Protobuf wire format for the perf tests' hand-made traces: varints and
fields, written and read. Python's standard library has none, and the
tests need no more than this."""


def varint(x):
    out = bytearray()
    while x >= 0x80:
        out.append(x & 0x7f | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def read_varint(buf, i):
    """The varint at |buf|[i]: (value, index after it)."""
    v = shift = 0
    while True:
        c = buf[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def field_varint(n, x):
    return varint(n << 3) + varint(x)


def field_bytes(n, x):
    return varint(n << 3 | 2) + varint(len(x)) + x
