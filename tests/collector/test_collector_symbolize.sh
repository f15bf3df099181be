#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_collector_symbolize: the collector's `symbolize` names the frames
# of its snapshots from debug files found by build id.
#
# Two hosts on loopback (each a tracegated, a tracegate-relay over TLS and
# a tracegate-perf) sample a stripped workload (main -> func_a -> func_b ->
# spin, built with -g, its debug info split into DBG/.build-id/xx/yyyy.debug)
# in the collector's rings; both see the one workload process, so both
# machines of a snapshot have its frames. Four collectors take a
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
#    and in the metrics; a restart does not queue it again;
#  - symbolize = debuginfod against a server that never answers, the
#    collector killed (SIGKILL) while the symbolization runs, started
#    again with symbolize = local: the snapshot is queued again at start
#    and its frames named;
#  - symbolize = debuginfod against that server with
#    symbolize_debuginfod_time = 1s: the first lookup is cut short, the
#    others not made, and the snapshot symbolized all the same, the
#    counts in the API's "debuginfod" and the metrics.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# without a C compiler, objcopy, strip or readelf, and where PERFETTO_BIN
# is unset (after the snapshots and the API's checks, which must pass).
#
# Environment (set by tests/collector/CMakeLists.txt): BUILD_DIR SRC_DIR
# WORK CC
set -eu

PERF_TEST=test_collector_symbolize
SYM_WORKLOAD=symwork
. "$SRC_DIR/tests/perf/perf_lib.sh"
die() {
  say "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  say "files kept in $WORK"; cleanup; exit 1
}

. "$SRC_DIR/tests/collector/symbolize_lib.sh"

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
assert 0 <= s["frames_plt"] <= s["frames_named"] - s["frames_with_line"], s
assert s["bytes"] > 0, s
# Files the trace named and symbolize did not open, by reason, and what
# debuginfod was asked (nothing: symbolize = local).
assert sorted(s["refused"]) == ["dotdot", "kernel_fs", "not_regular",
                               "split_dwarf"], s
assert all(isinstance(v, int) for v in s["refused"].values()), s
assert s["debuginfod"]["lookups"] == 0 and s["debuginfod"]["refused"] == 0, s
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
curl -sf "${API%/api/v1}/metrics" >"$WORK/on.metrics" || die "GET /metrics"
grep -q '^tracegate_collector_symbolized_total{outcome="stored"} 1$' "$WORK/on.metrics" ||
  die "the metrics do not count the symbols stored"
for m in 'symbolize_refused_total{reason="not_regular"}' \
         'symbolize_refused_total{reason="split_dwarf"} 0' \
         'symbolize_debuginfod_lookups_total{outcome="refused"} 0' \
         'symbolize_debuginfod_bytes_total 0' 'symbolize_debuginfod_seconds_total'; do
  grep -qF "tracegate_collector_$m" "$WORK/on.metrics" ||
    die "the metrics lack tracegate_collector_$m"
done
# The function shares follow the symbols (shares.h): the workload's
# functions by the names the symbols gave.
for _ in $(seq 300); do
  curl -sf "${API%/api/v1}/metrics" |
    grep -q '^tracegate_collector_function_shares_total{outcome="stored"} 1$' &&
    break
  sleep 0.1
done
curl -sf "$API/functions?name=spin" -o "$WORK/on.functions.json" ||
  die "GET /functions?name=spin"
python3 - "$WORK/on.functions.json" <<'PY' || die "no function shares named by the symbols"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert rows and all(r["kind"] == "function" and r["total_samples"] > 0
                    and 0 < r["total_share"] <= 1 for r in rows), d
PY
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

# --- a symbolization cut short by SIGKILL, done after the restart ---------------
silent_debuginfod
snapshot rs "symbolize = debuginfod"
kill_while_running
unset DEBUGINFOD_URLS
[ ! -e "$WORK/store-rs/snapshots/$SNAP_ID.symbols" ] || die "symbols stored before the kill"
collector_start rs "symbolize = local
symbolize_debug_dir = dbg"
grep -q 'queued again' "$WORK/rs.log" || die "the snapshot was not queued again at start"
symbols_settled >"$WORK/rs.row.json"
python3 - "$WORK/rs.row.json" <<'PY' || die "after the restart: $(cat "$WORK/rs.row.json")"
import json, sys
s = json.load(open(sys.argv[1]))["symbols"]
assert s["state"] == "done" and s["frames_named"] > 0, s
PY
curl -sf "$API/snapshots/$SNAP_ID/trace" -o "$WORK/rs.pftrace" || die "GET the trace"
[ -z "$(ls "$WORK/store-rs/tmp")" ] || die "tmp/ keeps $(ls "$WORK/store-rs/tmp")"
stop_clean "$COLL_PID" "the collector (rs)" "$WORK/rs.log"

# --- debuginfod's time cap --------------------------------------------------------
# A server of its own (the port file is new, not the last one's) and an
# empty cache: each module found nowhere else is a lookup that hangs.
rm -f "$WORK/silent.port"
silent_debuginfod
export DEBUGINFOD_CACHE_PATH="$WORK/debuginfod-cache-cap"
snapshot cap "symbolize = debuginfod
symbolize_debuginfod_time = 1s"
symbols_settled >"$WORK/cap.row.json"
unset DEBUGINFOD_URLS
python3 - "$WORK/cap.row.json" <<'PY' || die "debuginfod's time cap: $(cat "$WORK/cap.row.json")"
import json, sys
s = json.load(open(sys.argv[1]))["symbols"]
assert s["state"] == "done", s
g = s["debuginfod"]
assert g["lookups"] == 1 and g["cut"] == 1 and g["found"] == 0, g
assert g["ms"] >= 1000, g
PY
curl -sf "${API%/api/v1}/metrics" |
  grep -q '^tracegate_collector_symbolize_debuginfod_lookups_total{outcome="cut"} 1$' ||
  die "the metrics do not count the lookup cut short"
stop_clean "$COLL_PID" "the collector (cap)" "$WORK/cap.log"
# A start with the symbols there and a failure recorded: nothing queued.
collector_start bad "symbolize = local
symbolize_debug_dir = no-such-dir"
! grep -q 'queued again' "$WORK/bad.log" || die "a failed symbolization was queued again"
stop_clean "$COLL_PID" "the collector (bad, again)" "$WORK/bad.log"
cleanup

need_tp "the snapshots were taken but not checked by trace_processor"
for t in on on-a on-b off bad bad-a rs; do
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
for t in on on-a on-b rs; do
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
