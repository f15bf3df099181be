#!/usr/bin/env python3
"""Holds what names ConsumerPort methods to abi/consumer_port_methods.h's
table (TG_CPORT_METHODS):

    docs/check-methods.py --check   exit 1, saying what differs

- proto/ipc/consumer_port.proto declares the same methods, each with its
  <Name>Request and <Name>Response;
- docs/security.md's table of principals lists, for role observe, exactly
  the methods whose row says OBSERVE, for role record exactly those that
  say RECORD, and names each NONE method among what record cannot do.

The table is the source: edit a row there, then the proto and the page.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
HEADER = os.path.join(SRC, "abi", "consumer_port_methods.h")
PROTO = os.path.join(SRC, "proto", "ipc", "consumer_port.proto")
SECURITY = os.path.join(HERE, "security.md")

ROW = re.compile(r"X\((\d+),\s*(\w+),\s*(\w+),\s*(OBSERVE|RECORD|NONE),"
                 r"\s*(CONTROL|POLL|BULK),\s*(NOTE|DISABLED|ERROR|MSG)\)")
RPC = re.compile(r"rpc\s+(\w+)\s*\(\s*(\w+)\s*\)\s*returns\s*\(\s*(?:stream\s+)?"
                 r"(\w+)\s*\)")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def table_rows(text):
    body = text[text.index("#define TG_CPORT_METHODS(X)"):]
    body = body[:body.index("\n\n")]
    return [(int(i), n, role) for i, n, _s, role, _t, _r in ROW.findall(body)]


def check_table(rows):
    errs = []
    ids = [r[0] for r in rows]
    if ids != list(range(1, len(rows) + 1)):
        errs.append("ids are not 1..%d in row order: %s" % (len(rows), ids))
    names = [r[1] for r in rows]
    if len(set(names)) != len(names):
        errs.append("a method has two rows")
    return errs


def check_proto(rows, proto):
    errs = []
    rpcs = {m: (req, rep) for m, req, rep in RPC.findall(proto)}
    names = {r[1] for r in rows}
    for m in sorted(names - set(rpcs)):
        errs.append("%s: a row of the table, not an rpc of the proto" % m)
    for m in sorted(set(rpcs) - names):
        errs.append("%s: an rpc of the proto, no row of the table" % m)
    for m in sorted(names & set(rpcs)):
        if rpcs[m] != (m + "Request", m + "Response"):
            errs.append("%s: the proto takes %s and returns %s, not "
                        "%sRequest and %sResponse" % ((m,) + rpcs[m] + (m, m)))
    return errs


def security_row(page, role):
    for line in page.splitlines():
        if line.startswith("|") and "role **%s**" % role in line:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            return cells
    return None


def check_security(rows, page):
    errs = []
    names = {r[1] for r in rows}
    for role in ("observe", "record"):
        cells = security_row(page, role)
        if not cells or len(cells) < 3:
            errs.append("security.md: no table row for role **%s**" % role)
            continue
        listed = set(re.findall(r"`(\w+)`", cells[1])) & names
        want = {r[1] for r in rows if r[2] == role.upper()}
        for m in sorted(want - listed):
            errs.append("security.md, role %s: %s is missing" % (role, m))
        for m in sorted(listed - want):
            errs.append("security.md, role %s: %s is listed, its row says "
                        "otherwise" % (role, m))
        if role == "record":
            cannot = set(re.findall(r"`(\w+)`", cells[2]))
            for r in rows:
                if r[2] == "NONE" and r[1] not in cannot:
                    errs.append("security.md, role record: %s (no role may "
                                "call it) is not among what it cannot do"
                                % r[1])
    return errs


def main(argv):
    if argv[1:] not in ([], ["--check"]):
        sys.stderr.write(__doc__)
        return 2
    rows = table_rows(read(HEADER))
    if not rows:
        print("%s: no TG_CPORT_METHODS rows found" % HEADER)
        return 1
    errs = (check_table(rows) + check_proto(rows, read(PROTO)) +
            check_security(rows, read(SECURITY)))
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
