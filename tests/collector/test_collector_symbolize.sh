#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_collector_symbolize: the collector's `symbolize` names the frames
# of its snapshots from debug files found by build id.
#
# Two hosts on loopback (each a tracegated, a tracegate-relay over TLS and
# a tracegate-perf) sample a stripped workload (main -> func_a -> func_b ->
# spin, built with -g, its debug info split into DBG/.build-id/xx/yyyy.debug)
# in the collector's rings; both see the one workload process, so both
# machines of a snapshot have its frames. Three collectors take a
# snapshot of them in turn:
#  - symbolize = local with symbolize_debug_dir = DBG: the snapshot is
#    listed complete, its symbols come after (the API's "symbols" says
#    done), and the whole trace and each host's part (?host=) hold them:
#    trace_processor (PERFETTO_BIN) gives the workload's frames a
#    function, source file and line (stack_profile_symbol), with no
#    stackprofile_* stat (which a ModuleSymbols of a machine the part
#    does not hold would raise), each part's samples on its host's
#    machine alone;
#  - symbolize off: the download is the stored file, byte for byte, and
#    names no frame from debug files;
#  - symbolize = debuginfod: refused at start without DEBUGINFOD_URLS;
#  - symbolize = local with a debug directory that cannot be read: the
#    snapshot stays complete and downloads whole, the failure is in the
#    API ("failed" and why), in the host's row (a problem of code TG-5095)
#    and in the metrics.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# without a C compiler, objcopy, strip or readelf, and where PERFETTO_BIN
# is unset (after the snapshots and the API's checks, which must pass).
#
# Environment (set by tests/collector/CMakeLists.txt): BUILD_DIR SRC_DIR
# WORK CC
set -eu

PERF_TEST=test_collector_symbolize
. "$SRC_DIR/tests/perf/perf_lib.sh"
die() {
  say "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  say "files kept in $WORK"; cleanup; exit 1
}

need_cc
for t in objcopy strip readelf curl python3; do
  command -v $t >/dev/null 2>&1 || { say "SKIPPED: no $t"; exit 77; }
done
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

# --- the workload, its debug file apart ----------------------------------
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
objcopy --only-keep-debug "$WORK/symwork" \
  "$DBG/.build-id/$(echo "$BID" | cut -c1-2)/$(echo "$BID" | cut -c3-).debug" ||
  die "objcopy --only-keep-debug"
strip --strip-all "$WORK/symwork" || die "strip"

# --- certificates and the host ----------------------------------------------
(cd "$WORK" && sh "$SRC_DIR/deploy/certs/tg-certs" ca pki >/dev/null &&
  sh "$SRC_DIR/deploy/certs/tg-certs" host pki relay.test --ip 127.0.0.1 >/dev/null &&
  sh "$SRC_DIR/deploy/certs/tg-certs" client pki alice --role record >/dev/null) ||
  die "tg-certs failed"

# Waits until file $1 holds a line "ready N ..." and prints N.
ready_port() {
  i=0
  until grep -q '^ready ' "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 600 ] || die "no ready line in $1"; sleep 0.05
  done
  sed -n 's/^ready \([0-9]*\).*/\1/p' "$1" | head -n 1
}

rm -f "$WORK/stop"
"$WORK/symwork" "$WORK/stop" &
PIDS="$PIDS $!"
# Host $1: tracegated, its relay and its tracegate-perf. Sets HOST_$1.
host_start() {
  h=$1
  start_tracegated "$WORK/$h.p.sock" "$WORK/$h.c.sock" "$WORK/$h.tracegated.log" \
    "tracegated $h"
  "$BUILD_DIR/agent/perf/tracegate-perf" --socket "$WORK/$h.p.sock" \
    --name "perf-$h" >"$WORK/$h.perf.log" 2>&1 &
  PIDS="$PIDS $!"
  wait_registered "$WORK/$h.c.sock" linux.perf "linux.perf was not registered on $h"
  "$BUILD_DIR/relay/tracegate-relay" --listen 127.0.0.1:0 \
    --consumer-socket "$WORK/$h.c.sock" --cert "$WORK/pki/relay.test.pem" \
    --key "$WORK/pki/relay.test.key" --ca "$WORK/pki/ca.pem" \
    --authz "$WORK/pki/authz" --ready-fd 3 3>"$WORK/$h.relay.ready" \
    2>"$WORK/$h.relay.log" &
  PIDS="$PIDS $!"
  eval "HOST_$h=127.0.0.1:$(ready_port "$WORK/$h.relay.ready")"
}
host_start a
host_start b
printf '%s name=relay.test label=a\n%s name=relay.test label=b\n' "$HOST_a" \
  "$HOST_b" >"$WORK/hosts.txt"
# The workload by its whole path: other tests on this host (of other
# build trees) run a symwork of their own.
cat >"$WORK/flight.pbtxt" <<CFG
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 100 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/symwork" }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
    }
  }
}
CFG

# --- one collector, one snapshot ------------------------------------------------
# Collector $1 (its store and key) with the config lines $2: takes one
# snapshot once its host traces and the ring holds samples, writes its
# answer to $WORK/$1.snap.json, sets SNAP_ID, API and COLL_PID (left
# running).
snapshot() {
  name=$1
  cat >"$WORK/$name.conf" <<CONF
hosts = hosts.txt
ca = pki/ca.pem
cert = pki/alice.pem
key = pki/alice.key
tls_server_name = relay.test
trace_config = flight.pbtxt
store = store-$name
listen = 127.0.0.1:0
session_key = sym-$name
coalesce_window = 0s
$2
CONF
  "$BUILD_DIR/collector/daemon/tracegate-collector" --config "$WORK/$name.conf" \
    --ready-fd 3 3>"$WORK/$name.ready" >"$WORK/$name.log" 2>&1 &
  COLL_PID=$!
  PIDS="$COLL_PID $PIDS"
  API=http://127.0.0.1:$(ready_port "$WORK/$name.ready")/api/v1
  i=0
  until [ "$(curl -sf "$API/hosts" | grep -o '"state": *"tracing"' | wc -l)" -eq 2 ]; do
    i=$((i + 1)); [ $i -lt 600 ] || die "$name: the hosts do not trace: $(curl -s "$API/hosts")"
    sleep 0.05
  done
  # Samples in the ring: tracegate-perf reads its rings every 50 ms.
  sleep 2
  curl -sf -X POST "$API/snapshots?reason=sym&wait=1" -o "$WORK/$name.snap.json" ||
    die "$name: the snapshot request failed"
  SNAP_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"]["id"])' \
    "$WORK/$name.snap.json") || die "$name: no snapshot in $(cat "$WORK/$name.snap.json")"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["snapshot"]["state"] == "complete", d' \
    "$WORK/$name.snap.json" || die "$name: the snapshot is not complete"
}

# Waits until snapshot SNAP_ID's symbols are no longer waiting or
# running; prints the snapshot's answer.
symbols_settled() {
  i=0
  while :; do
    curl -sf "$API/snapshots/$SNAP_ID" -o "$WORK/row.json" || die "GET the snapshot"
    st=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["symbols"]["state"])' "$WORK/row.json")
    case $st in waiting|running) ;; *) cat "$WORK/row.json"; return ;; esac
    i=$((i + 1)); [ $i -lt 1200 ] || die "the symbols are still $st"
    sleep 0.05
  done
}

# The stored file of snapshot SNAP_ID of collector $1.
stored() { echo "$WORK/store-$1/snapshots/$SNAP_ID.pftrace"; }

# --- symbolize = debuginfod needs DEBUGINFOD_URLS --------------------------------
cat >"$WORK/dbgf.conf" <<CONF
hosts = hosts.txt
ca = pki/ca.pem
cert = pki/alice.pem
key = pki/alice.key
tls_server_name = relay.test
trace_config = flight.pbtxt
store = store-dbgf
symbolize = debuginfod
CONF
rc=0
env -u DEBUGINFOD_URLS "$BUILD_DIR/collector/daemon/tracegate-collector" \
  --config "$WORK/dbgf.conf" --check-config >/dev/null 2>"$WORK/dbgf.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'TG-5001' "$WORK/dbgf.err" ||
  die "symbolize = debuginfod without DEBUGINFOD_URLS: exit $rc, $(cat "$WORK/dbgf.err")"
DEBUGINFOD_URLS="file://$WORK/nowhere" "$BUILD_DIR/collector/daemon/tracegate-collector" \
  --config "$WORK/dbgf.conf" --check-config >/dev/null 2>"$WORK/dbgf.err" ||
  die "symbolize = debuginfod with DEBUGINFOD_URLS refused: $(cat "$WORK/dbgf.err")"

# --- symbolize = local -----------------------------------------------------------
snapshot on "symbolize = local
symbolize_debug_dir = dbg"
symbols_settled >"$WORK/on.row.json"
python3 - "$WORK/on.row.json" <<'PY' || die "symbolize = local: $(cat "$WORK/on.row.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["symbols"]
assert s["state"] == "done", s
assert s["frames"] > 0 and s["frames_named"] > 0 and s["frames_with_line"] > 0, s
assert s["bytes"] > 0, s
assert d["snapshot"]["state"] == "complete", d
assert all(h["problems"] == [] for h in d["hosts"]), d["hosts"]
print("test_collector_symbolize: %d of %d frames named" % (s["frames_named"], s["frames"]))
PY
curl -sf "$API/snapshots/$SNAP_ID/trace" -o "$WORK/on.pftrace" || die "GET the trace"
curl -sf "$API/snapshots/$SNAP_ID/trace?host=$HOST_a" -o "$WORK/on-a.pftrace" ||
  die "GET host a's part"
curl -sf "$API/snapshots/$SNAP_ID/trace?host=$HOST_b" -o "$WORK/on-b.pftrace" ||
  die "GET host b's part"
size=$(wc -c <"$(stored on)")
sym=$(wc -c <"$WORK/store-on/snapshots/$SNAP_ID.symbols")
[ "$(wc -c <"$WORK/on.pftrace")" -eq $((size + sym)) ] ||
  die "the whole trace is not the stored file and its symbols"
cmp -n "$size" "$(stored on)" "$WORK/on.pftrace" || die "the whole trace does not begin with the stored file"
tail -c "$sym" "$WORK/on.pftrace" | cmp - "$WORK/store-on/snapshots/$SNAP_ID.symbols" ||
  die "the whole trace does not end with the symbols"
curl -sf "${API%/api/v1}/metrics" | grep -q '^tracegate_collector_symbolized_total{outcome="stored"} 1$' ||
  die "the metrics do not count the symbols stored"
stop_clean "$COLL_PID" "the collector (on)" "$WORK/on.log"

# --- symbolize off ------------------------------------------------------------------
snapshot off ""
symbols_settled >"$WORK/off.row.json"
grep -q '"symbols": *{"state": *"off"}' "$WORK/off.row.json" ||
  die "symbolize off: $(cat "$WORK/off.row.json")"
curl -sf "$API/snapshots/$SNAP_ID/trace" -o "$WORK/off.pftrace" || die "GET the trace"
cmp "$(stored off)" "$WORK/off.pftrace" || die "symbolize off: the download is not the stored file"
[ ! -e "$WORK/store-off/snapshots/$SNAP_ID.symbols" ] || die "symbolize off: symbols stored"
stop_clean "$COLL_PID" "the collector (off)" "$WORK/off.log"

# --- a debug directory that cannot be read -------------------------------------------
snapshot bad "symbolize = local
symbolize_debug_dir = no-such-dir"
symbols_settled >"$WORK/bad.row.json"
python3 - "$WORK/bad.row.json" <<'PY' || die "a failed symbolization: $(cat "$WORK/bad.row.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["symbols"]
assert s["state"] == "failed" and "no-such-dir" in s["why"], s
assert d["snapshot"]["state"] == "complete", d
assert len(d["hosts"]) == 2, d["hosts"]
for h in d["hosts"]:
    assert h["outcome"] == "ok", h
    assert [p["code"] for p in h["problems"] if p["kind"] == "symbolize"] == ["TG-5095"], h
PY
curl -sf "$API/snapshots/$SNAP_ID/trace" -o "$WORK/bad.pftrace" || die "GET the trace"
cmp "$(stored bad)" "$WORK/bad.pftrace" || die "a failed symbolization: the download is not the stored file"
curl -sf "$API/snapshots/$SNAP_ID/trace?host=$HOST_a" -o "$WORK/bad-a.pftrace" ||
  die "a failed symbolization: GET a host's part"
curl -sf "${API%/api/v1}/metrics" | grep -q '^tracegate_collector_symbolized_total{outcome="failed"} 1$' ||
  die "the metrics do not count the failure"
grep -q 'TG-5095.*no-such-dir' "$WORK/bad.log" || die "the failure is not in the log"
stop_clean "$COLL_PID" "the collector (bad)" "$WORK/bad.log"
cleanup

need_tp "the snapshots were taken but not checked by trace_processor"
# The workload's frames in trace $1, and how many of them have a symbol
# with a source file and a line, or are its PLT stub (`access@plt`, which
# has no line: a sample there is luck). trace_processor applies a ModuleSymbols
# only to the mappings of its packet's machine (one of a machine the trace
# does not hold is a stackprofile_* stat, which bad_stats refuses).
named() {
  q "select count(distinct f.id) || ' ' || count(distinct case when (s.source_file
       like '%work.c' and s.line_number > 0) or s.name = 'access@plt'
       then f.id end) as n
     from stack_profile_frame f
     join stack_profile_mapping mp on mp.id = f.mapping
     left join stack_profile_symbol s on s.symbol_set_id = f.symbol_set_id
     where mp.name like '%/symwork'" "$1"
}
# Samples of trace $1 on machine raw_id $2, and on any other.
machines() {
  q "select sum(m.raw_id = $2) || ' ' || sum(coalesce(m.raw_id, 0) != $2) as n
     from perf_sample p join thread t using(utid)
     left join machine m on m.id = t.machine_id" "$1"
}
for t in on on-a on-b off bad bad-a; do
  bad=$(bad_stats "$WORK/$t.pftrace")
  [ -z "$bad" ] || die "trace_processor stats of $t: $bad"
done
# Each host's part holds its machine's samples alone; the whole traces
# both machines'.
for t in on-a:1 on-b:2 bad-a:1; do
  set -- $(machines "$WORK/${t%:*}.pftrace" "${t#*:}")
  [ "$1" -gt 0 ] && [ "$2" -eq 0 ] ||
    die "${t%:*}: $1 samples on machine ${t#*:}, $2 on others"
done
for t in on off bad; do
  for m in 1 2; do
    set -- $(machines "$WORK/$t.pftrace" $m)
    [ "$1" -gt 0 ] || die "$t: no samples on machine $m"
  done
done
for t in on on-a on-b; do
  set -- $(named "$WORK/$t.pftrace")
  say "$t: $2 of the workload's $1 frames named (file and line, or the PLT stub)"
  [ "$1" -gt 0 ] && [ $(($2 * 10)) -ge $(($1 * 9)) ] ||
    die "$t: $2 of $1 frames named with file and line"
done
for t in off bad bad-a; do
  set -- $(named "$WORK/$t.pftrace")
  [ "$1" -gt 0 ] && [ "$2" -eq 0 ] || die "$t: $2 of $1 frames named from debug files"
done
for t in on-a on-b; do
  names=$(q "select distinct s.name from stack_profile_symbol s order by 1" "$WORK/$t.pftrace" | tr '\n' ' ')
  for f in main func_a func_b spin; do
    echo " $names" | grep -q " $f " || die "$t names no $f: $names"
  done
done
say "ok"
