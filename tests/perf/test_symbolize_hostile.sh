#!/bin/sh
# test_symbolize_hostile: `tracegate symbolize` on traces a hostile host
# could send (issue 78 points 6-8), no perf_event_open needed.
#
# 1. A trace whose mappings name a FIFO, /proc/self/mem (also through a
#    link and as //proc/./self/mem) and a path with "..": symbolize ends
#    (bounded by timeout(1)), exit 0, names nothing from them, and says
#    the refusals per reason in --json's "refused" and with [TG-1069].
# 2. --timeout: IN a FIFO fed a packet every 0.1 s for a minute: the run
#    stops with exit 1 and [TG-1068], OUT not written.
# 3. debuginfod only with --debuginfod: DEBUGINFOD_URLS names a loopback
#    listener that counts connections; a module of a build id found
#    nowhere makes none without the flag (JSON debuginfod.lookups 0) and
#    one lookup with it. Skipped where libdebuginfod.so.1 is missing.
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
set -eu

PERF_TEST=test_symbolize_hostile
. "$(dirname "$0")/perf_lib.sh"
fresh_work
T=$TGCLI

# trace.py OUT PATH...: one sequence, a mapping per PATH (build id
# "bid-N", path "/" + PATH's words) and a frame in each.
cat >"$WORK/trace.py" <<'PY'
import sys
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
def uint(f, v): return varint(f << 3) + varint(v)
def msg(f, b): return varint(f << 3 | 2) + varint(len(b)) + b
def trace(paths):
    inter = b""
    for i, p in enumerate(paths, 1):
        inter += msg(16, uint(1, i) + msg(2, ("bid-%012d" % i).encode()))
        inter += msg(17, uint(1, i) + msg(2, p.lstrip("/").encode()))
        inter += msg(19, uint(1, i) + uint(2, i) + uint(7, i))
        inter += msg(6, uint(1, i) + uint(3, i) + uint(4, 0x1000))
    return msg(1, uint(10, 1) + uint(13, 1) + msg(12, inter))
if __name__ == "__main__":
    open(sys.argv[1], "wb").write(trace(sys.argv[2:]))
PY

# --- 1. named files refused --------------------------------------------------
mkfifo "$WORK/fifo"
ln -s /proc/self/mem "$WORK/mem"
mkdir "$WORK/sub"
python3 "$WORK/trace.py" "$WORK/named.pftrace" "$WORK/fifo" /proc/self/mem \
  "$WORK/mem" //proc/./self/mem "$WORK/sub/../fifo" "$WORK/sub"
rc=0
timeout 60 "$T" symbolize "$WORK/named.pftrace" -o "$WORK/named-sym.pftrace" \
  --json >"$WORK/named.json" 2>"$WORK/named.err" || rc=$?
[ "$rc" -eq 0 ] || die "symbolize of named files exited $rc: $(cat "$WORK/named.err")"
grep -q '\[TG-1069\]' "$WORK/named.err" || die "no [TG-1069]: $(cat "$WORK/named.err")"
python3 - "$WORK/named.json" <<'PY' || die "refusals not as expected: $(cat "$WORK/named.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["modules"] == 6 and doc["modules_found"] == 0, doc
assert doc["frames_named"] == 0, doc
assert doc["refused"] == {"dotdot": 1, "kernel_fs": 3, "not_regular": 2,
                          "split_dwarf": 0}, doc
why = sorted(m.get("refused") for m in doc["modules_detail"])
assert why == ["dotdot", "kernel_fs", "kernel_fs", "kernel_fs",
               "not_regular", "not_regular"], why
assert doc["debuginfod"]["lookups"] == 0, doc
PY

# --- 2. --timeout ------------------------------------------------------------
mkfifo "$WORK/slow"
python3 - "$WORK/slow" "$WORK" <<'PY' &
import sys, time
sys.path.insert(0, sys.argv[2])
from trace import msg, uint
rec = msg(1, uint(10, 1))  # a packet: its trusted_packet_sequence_id
try:
    with open(sys.argv[1], "wb", buffering=0) as f:
        for _ in range(600):
            f.write(rec)
            time.sleep(0.1)
except BrokenPipeError:
    pass
PY
writer=$!
PIDS="$PIDS $writer"
rc=0
timeout 60 "$T" symbolize "$WORK/slow" -o "$WORK/slow-sym.pftrace" --timeout 1 \
  2>"$WORK/slow.err" || rc=$?
[ "$rc" -eq 1 ] || die "--timeout 1 exited $rc, not 1: $(cat "$WORK/slow.err")"
grep -q '\[TG-1068\]' "$WORK/slow.err" || die "no [TG-1068]: $(cat "$WORK/slow.err")"
[ ! -e "$WORK/slow-sym.pftrace" ] || die "OUT written past --timeout"
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
forget_pid "$writer"

# --- 3. debuginfod only when asked -------------------------------------------
if ! ldconfig -p 2>/dev/null | grep -q 'libdebuginfod\.so\.1'; then
  say "debuginfod not checked: no libdebuginfod.so.1 on this machine"
  say "PASSED"
  exit 0
fi
python3 - "$WORK/port" "$WORK/conns" <<'PY' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
n = 0
while True:
    c, _ = s.accept()
    n += 1
    open(sys.argv[2], "w").write(str(n))
    c.recv(65536)
    c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    c.close()
PY
listener=$!
PIDS="$PIDS $listener"
i=0
while [ ! -s "$WORK/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$WORK/port" ] || die "the listener did not start"
URL="http://127.0.0.1:$(cat "$WORK/port")"
python3 "$WORK/trace.py" "$WORK/dbgf.pftrace" /nonexistent/libdbgf.so
mkdir -p "$WORK/cache"
DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$WORK/cache \
  timeout 60 "$T" symbolize "$WORK/dbgf.pftrace" -o "$WORK/dbgf-0.pftrace" --json \
  >"$WORK/dbgf0.json" 2>"$WORK/dbgf0.err" ||
  die "symbolize without --debuginfod failed: $(cat "$WORK/dbgf0.err")"
[ ! -s "$WORK/conns" ] || die "without --debuginfod, $(cat "$WORK/conns") connections to DEBUGINFOD_URLS"
DEBUGINFOD_URLS=$URL DEBUGINFOD_CACHE_PATH=$WORK/cache \
  timeout 60 "$T" symbolize "$WORK/dbgf.pftrace" -o "$WORK/dbgf-1.pftrace" --json \
  --debuginfod >"$WORK/dbgf1.json" 2>"$WORK/dbgf1.err" ||
  die "symbolize --debuginfod failed: $(cat "$WORK/dbgf1.err")"
[ -s "$WORK/conns" ] || die "with --debuginfod, no connection to the listener"
python3 - "$WORK/dbgf0.json" "$WORK/dbgf1.json" <<'PY' || die "debuginfod counts: $(cat "$WORK"/dbgf?.json)"
import json, sys
off, on = (json.load(open(f))["debuginfod"] for f in sys.argv[1:3])
assert off["lookups"] == 0, off
assert on["lookups"] == 1 and on["found"] == 0 and on["refused"] == 0, on
PY
say "PASSED"
