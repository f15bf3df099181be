#!/bin/sh
# test_perf_symbolize: `tracegate symbolize` names the frames of a stripped
# workload from its debug file found by build id.
#
# The workload (main -> func_a -> func_b -> spin) is built with -g, its
# debug info split into DBG/.build-id/xx/yyyy.debug (objcopy
# --only-keep-debug) and the binary stripped, so that the host names none
# of its static functions. It is recorded through tracegated and
# tracegate-perf (as test_perf_e2e), then symbolized with --debug-dir DBG.
# trace_processor (PERFETTO_BIN) must then name every frame of the
# workload in stack_profile_symbol: with function, source file and line,
# or, for a sample in the PLT stub spin() calls, as `access@plt` with no
# line (a stub has none; its name comes from the stripped binary's PLT,
# which the debug file keeps only as SHT_NOBITS). No stackprofile_* stat
# (ModuleSymbols that match no mapping or frame), and the flame graph must
# name the chain. A sample in the stub is luck, so a synthetic trace with
# one frame at access@plt's address (objdump's) checks that naming every
# run. The module's own file
# (stripped, no .symtab) must not be taken for it, and a debug file whose
# build id differs must be refused. debuginfod is checked through a
# file:// server (libdebuginfod takes those), and a merged trace through
# the same recording moved to machine 1: its ModuleSymbols must carry
# machine_id 1, and machine 0's name none of its frames.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# where no C compiler, objcopy or objdump is found, and where PERFETTO_BIN
# is unset (after the recording and the symbolization, which must still
# succeed).
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
set -eu

PERF_TEST=test_perf_symbolize
. "$(dirname "$0")/perf_lib.sh"

need_cc
for t in objcopy strip readelf objdump; do
  command -v $t >/dev/null 2>&1 || { say "SKIPPED: no $t"; exit 77; }
done
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

# --- the workload, its debug file apart -----------------------------------
cat >"$WORK/work.c" <<'C'
#include <stdint.h>
#include <unistd.h>
static volatile uint64_t sink;
static const char *stop; /* runs until this file exists */
static __attribute__((noinline)) void spin(void) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 10000000; i++) sink += (uint64_t)i;
}
static __attribute__((noinline)) void func_b(void) { spin(); sink++; }
static __attribute__((noinline)) void func_a(void) { func_b(); sink++; }
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  stop = argv[1];
  func_a();
  return 0;
}
C
"$CC" -g -O1 -fno-omit-frame-pointer -Wl,--build-id -o "$WORK/symwork" \
  "$WORK/work.c" || die "cannot build the workload"
BID=$(readelf -n "$WORK/symwork" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$BID" ] || die "the workload has no build id"
DBG=$WORK/dbg
mkdir -p "$DBG/.build-id/$(echo "$BID" | cut -c1-2)"
DEBUG_FILE=$DBG/.build-id/$(echo "$BID" | cut -c1-2)/$(echo "$BID" | cut -c3-).debug
objcopy --only-keep-debug "$WORK/symwork" "$DEBUG_FILE" || die "objcopy --only-keep-debug"
strip --strip-all "$WORK/symwork" || die "strip"
objcopy --add-gnu-debuglink="$DEBUG_FILE" "$WORK/symwork" || die "objcopy --add-gnu-debuglink"
# A debug file of another build (another build id) in a second tree under
# the same name: it must be refused, whatever its place in the order.
OTHER=$WORK/other
mkdir -p "$(dirname "$OTHER/.build-id/${DEBUG_FILE#"$DBG"/.build-id/}")"
"$CC" -g -O0 -Wl,--build-id=0x0123456789abcdef -o "$WORK/other.bin" "$WORK/work.c" ||
  die "cannot build the other workload"
objcopy --only-keep-debug "$WORK/other.bin" "$OTHER/.build-id/${DEBUG_FILE#"$DBG"/.build-id/}"

# --- record -------------------------------------------------------------------
start_local
# The workload by its whole path: other tests (of other build trees on
# the same host) run workloads called symwork too.
cat >"$WORK/perf.pbtxt" <<CFG
buffers { size_kb: 16384 }
duration_ms: 3000
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/symwork" }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
    }
  }
}
CFG
TRACE=$WORK/perf.pftrace
rm -f "$WORK/stop"
"$WORK/symwork" "$WORK/stop" &
WL=$!
"$TGCLI" record --socket "$C" -c "$WORK/perf.pbtxt" --txt \
  -o "$TRACE" 2>"$WORK/record.log" || die "tracegate record: $(cat "$WORK/record.log")"
touch "$WORK/stop"
wait "$WL" || die "the workload failed"
cleanup

# --- symbolize ------------------------------------------------------------------
T=$TGCLI
# Without the debug tree: the stripped module's own file has no names, so
# the workload's module is found nowhere.
"$T" symbolize "$TRACE" -o "$WORK/none.pftrace" --json >"$WORK/none.json" ||
  die "symbolize without --debug-dir failed"
# The other build's file first, then the right one: only the right one.
"$T" symbolize "$TRACE" -o "$WORK/sym.pftrace" --debug-dir "$OTHER" \
  --debug-dir "$DBG" --json >"$WORK/sym.json" 2>"$WORK/sym.err" ||
  die "symbolize failed: $(cat "$WORK/sym.err")"
python3 - "$WORK/none.json" "$WORK/sym.json" "$DEBUG_FILE" "$WORK/symwork" <<'PY' || die "the symbolize reports are wrong"
import json, sys
none = json.load(open(sys.argv[1]))
sym = json.load(open(sys.argv[2]))
def work(doc):
    ms = [m for m in doc["modules_detail"] if m["path"] == sys.argv[4]]
    assert len(ms) == 1, ("no frame of the workload's module, or several", doc)
    return ms[0]
n, s = work(none), work(sym)
assert n["source"] == "none" and n["frames_named"] == 0, n
assert s["source"] == "build_id" and s["debug_file"] == sys.argv[3], s
assert s["frames"] > 0 and s["frames_named"] == s["frames"], sym
# A stub is named without a line: frames_with_line does not count it.
assert sym["frames_with_line"] + sym["frames_plt"] <= sym["frames_named"], sym
assert sym["frames_plt"] == s["frames_plt"], sym
print("test_perf_symbolize: symbolize named %d of %d frames of the workload"
      " (%d in the PLT)" % (s["frames_named"], s["frames"], s["frames_plt"]))
PY
# One frame at access@plt (as objdump names the stripped binary's stub) on
# a sequence of its own: named access@plt from the binary, no line.
PLT=$(objdump -d "$WORK/symwork" | sed -n 's/^0*\([0-9a-f]*\) <access@plt>:$/\1/p')
[ -n "$PLT" ] || die "objdump names no access@plt in the workload"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(dirname "$0") python3 - "$WORK/symwork" "$BID" "$PLT" "$WORK/plt.pftrace" <<'PY'
import sys
from pb_lite import field_varint as f, field_bytes as b
path, bid, pc = sys.argv[1], bytes.fromhex(sys.argv[2]), int(sys.argv[3], 16)
parts = [p.encode() for p in path.split("/") if p]
it = b(16, f(1, 1) + b(2, bid))
for i, p in enumerate(parts):
    it += b(17, f(1, i + 1) + b(2, p))
it += b(19, f(1, 1) + f(2, 1) + b"".join(f(7, i + 1) for i in range(len(parts))))
it += b(6, f(1, 1) + f(3, 1) + f(4, pc))
it += b(7, f(1, 1) + f(2, 1))  # a callstack of that one frame
# PerfSample (66) of it: cpu, pid, tid, callstack_iid.
sample = f(1, 0) + f(2, 4242) + f(3, 4242) + f(4, 1)
pkt = f(8, 1000) + f(10, 7) + f(13, 1) + b(12, it) + b(66, sample)
open(sys.argv[4], "wb").write(b(1, pkt))
PY
"$T" symbolize "$WORK/plt.pftrace" -o "$WORK/pltsym.pftrace" --debug-dir "$DBG" \
  --json >"$WORK/plt.json" 2>"$WORK/plt.err" ||
  die "symbolize of the PLT frame failed: $(cat "$WORK/plt.err")"
python3 - "$WORK/plt.json" <<'PY' || die "the PLT frame was not named access@plt"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["frames"] == 1 and doc["frames_named"] == 1, doc
assert doc["frames_plt"] == 1 and doc["frames_with_line"] == 0, doc
m = doc["modules_detail"][0]
assert m["source"] == "build_id" and m["frames_plt"] == 1, m
PY
# debuginfod, last in the order: a file:// server (libdebuginfod reads
# URL/buildid/HEX/debuginfo) and a cache of the test's own. Without
# DEBUGINFOD_URLS, --debuginfod is a usage error (2).
rc=0
env -u DEBUGINFOD_URLS "$T" symbolize "$TRACE" -o "$WORK/x.pftrace" --debuginfod \
  2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || die "--debuginfod without DEBUGINFOD_URLS exited $rc, not 2"
if ldconfig -p 2>/dev/null | grep -q 'libdebuginfod\.so\.1'; then
  mkdir -p "$WORK/srv/buildid/$BID" "$WORK/cache"
  cp "$DEBUG_FILE" "$WORK/srv/buildid/$BID/debuginfo"
  DEBUGINFOD_URLS="file://$WORK/srv" DEBUGINFOD_CACHE_PATH="$WORK/cache" \
    "$T" symbolize "$TRACE" -o "$WORK/dbgf.pftrace" --debuginfod --json \
    >"$WORK/dbgf.json" 2>"$WORK/dbgf.err" ||
    die "symbolize --debuginfod failed: $(cat "$WORK/dbgf.err")"
  python3 - "$WORK/dbgf.json" <<'PY' || die "debuginfod did not give the workload's file"
import json, sys
doc = json.load(open(sys.argv[1]))
m = [m for m in doc["modules_detail"] if m["path"].endswith("/symwork")][0]
assert m["source"] == "debuginfod" and m["frames_named"] == m["frames"], m
PY
else
  say "debuginfod not checked: no libdebuginfod.so.1 on this machine"
fi

# IN read in pieces: 60 copies of the trace (packets across the 64 KiB
# reads) give 60 times the packets and the same frames.
i=0
: >"$WORK/big.pftrace"
while [ $i -lt 60 ]; do cat "$TRACE" >>"$WORK/big.pftrace"; i=$((i + 1)); done
"$T" symbolize "$WORK/big.pftrace" -o "$WORK/bigsym.pftrace" --debug-dir "$DBG" \
  --json >"$WORK/big.json" || die "symbolize of a large trace failed"
python3 - "$WORK/sym.json" "$WORK/big.json" <<'PY' || die "the large trace was not read whole"
import json, sys
one, big = (json.load(open(f)) for f in sys.argv[1:3])
assert big["packets"] == 60 * one["packets"], (big["packets"], one["packets"])
assert big["frames"] == one["frames"] and big["frames_named"] == one["frames_named"]
PY

# OUT starts with IN, byte for byte.
size=$(stat -c %s "$TRACE")
cmp -n "$size" "$TRACE" "$WORK/sym.pftrace" || die "OUT does not start with IN"
[ "$(stat -c %s "$WORK/sym.pftrace")" -gt "$size" ] || die "nothing appended"

# --- trace_processor --------------------------------------------------------------
need_tp "the symbolized trace was not checked by trace_processor"
TRACE=$WORK/sym.pftrace
bad=$(q "select name || '=' || value from stats where value > 0 and
         (severity in ('error', 'data_loss') or name like 'stackprofile%'
          or name like 'symbolization%')")
[ -z "$bad" ] || die "trace_processor stats: $bad"
all=$(q "select count(*) from stack_profile_frame f join stack_profile_mapping m
         on f.mapping = m.id where m.name like '%/symwork'")
named=$(q "select count(*) from stack_profile_frame f join stack_profile_mapping m
           on f.mapping = m.id where m.name like '%/symwork' and exists (
             select 1 from stack_profile_symbol s where s.symbol_set_id = f.symbol_set_id
             and s.name in ('main', 'func_a', 'func_b', 'spin')
             and s.source_file like '%/work.c' and s.line_number > 0)")
stub=$(q "select count(*) from stack_profile_frame f join stack_profile_mapping m
          on f.mapping = m.id where m.name like '%/symwork' and exists (
            select 1 from stack_profile_symbol s where s.symbol_set_id = f.symbol_set_id
            and s.name = 'access@plt' and coalesce(s.line_number, 0) = 0)")
[ "${all:-0}" -gt 0 ] || die "no frame of the workload"
say "trace_processor: $named of $all frames of the workload named with function, file and line, $stub as access@plt"
[ $((named + stub)) -eq "$all" ] || die "only $named + $stub of $all frames named"
TRACE=$WORK/pltsym.pftrace
pltname=$(q "select s.name || ':' || coalesce(s.line_number, 0) from stack_profile_frame f
             join stack_profile_symbol s using(symbol_set_id)")
[ "$pltname" = "access@plt:0" ] || die "the PLT frame's symbol: '$pltname'"
pltbad=$(q "select name || '=' || value from stats where value > 0 and
            (name like 'stackprofile%' or name like 'symbolization%')")
[ -z "$pltbad" ] || die "trace_processor stats of the PLT frame's trace: $pltbad"
TRACE=$WORK/sym.pftrace
chain=$(chain_count "and s.cumulative_count > 0")
[ "${chain:-0}" -gt 0 ] || die "no spin <- func_b <- func_a <- main in the flame graph"
# A merged trace: every packet on machine 1 (as the fleet merge appends
# machine_id). The ModuleSymbols must carry machine 1 to match its
# mappings: those of the single-host run (machine 0) match none there.
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$(dirname "$0") python3 - "$WORK/perf.pftrace" "$WORK/m1.pftrace" <<'PY'
import sys
from pb_lite import read_varint as rv, varint as wv
src = open(sys.argv[1], "rb").read()
out = bytearray()
i = 0
while i < len(src):
    tag, i = rv(src, i)
    n, i = rv(src, i)
    pkt = src[i:i + n] + wv(98 << 3) + wv(1)
    i += n
    out += wv(tag) + wv(len(pkt)) + pkt
open(sys.argv[2], "wb").write(out)
PY
"$T" symbolize "$WORK/m1.pftrace" -o "$WORK/m1sym.pftrace" --debug-dir "$DBG" \
  2>"$WORK/m1.err" || die "symbolize of the merged trace failed: $(cat "$WORK/m1.err")"
TRACE=$WORK/m1sym.pftrace
m1all=$(q "select count(*) from stack_profile_frame")
m1named=$(q "select count(*) from stack_profile_frame f where exists (
               select 1 from stack_profile_symbol s
               where s.symbol_set_id = f.symbol_set_id
               and (s.line_number > 0 or s.name like '%@plt'))")
m1bad=$(q "select count(*) from stats where value > 0 and name like 'stackprofile%'")
m1machine=$(q "select count(distinct p.machine_id) from perf_sample join thread
               using(utid) join process p using(upid) where p.machine_id = 1")
[ "${m1machine:-0}" -eq 1 ] || die "the merged trace's samples are not on machine 1"
[ "${m1all:-0}" -gt 0 ] && [ "$m1named" -eq "$m1all" ] && [ "$m1bad" -eq 0 ] ||
  die "machine 1: $m1named of $m1all frames named, $m1bad stackprofile stats"
cat "$WORK/m1.pftrace" >"$WORK/mixed.pftrace"
tail -c +$((size + 1)) "$WORK/sym.pftrace" >>"$WORK/mixed.pftrace"
TRACE=$WORK/mixed.pftrace
mixed=$(q "select count(*) from stack_profile_frame f where exists (
             select 1 from stack_profile_symbol s where s.symbol_set_id = f.symbol_set_id)")
[ "${mixed:-1}" -eq 0 ] || die "machine 0's symbols named machine 1's frames"

# Before symbolization the stripped workload's frames had no such names.
TRACE=$WORK/perf.pftrace
before=$(q "select count(*) from stack_profile_frame where name in ('func_a', 'func_b', 'spin')")
[ "${before:-0}" -eq 0 ] || die "the stripped workload was named before symbolization"
say "ok"
