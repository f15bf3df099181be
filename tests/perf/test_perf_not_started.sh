#!/bin/sh
# test_perf_not_started: tracegate-perf run as nobody without CAP_PERFMON
# (as its unit would run with the capability left out) refuses the session
# (TG-8002 in its log, naming CAP_PERFMON) and does not acknowledge its
# start; tracegated names linux.perf in the trace
# (TracingServiceEvent.slow_starting_data_sources), and `tracegate record`
# exits 4 with a not_started problem for linux.perf in --summary-json.
# With PERFETTO_BIN, trace_processor imports the trace without an error
# and lists the data source in its metadata (slow_start_data_source).
#
# Skipped (exit 77), with the reason, when it cannot run a program as
# another user (tests/support/other_user.sh), and when tracegate-perf as nobody
# would be allowed to sample anyway (perf_event_paranoid below 2 lets an
# unprivileged user open cpu-clock on its own processes, not all CPUs, so
# the session is still refused; only a kernel with paranoid -1 would
# accept it).
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK
set -eu

PERF_TEST=test_perf_not_started
. "$(dirname "$0")/perf_lib.sh"

other_user_or_skip "$PERF_TEST"
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)
[ "$paranoid" != -1 ] || {
  say "SKIPPED: perf_event_paranoid is -1: anyone may sample every CPU"; exit 77; }

fresh_work
# The other user reaches the producer socket in OTHER_DIR
# (tests/support/other_user.sh), wherever the checkout is.
other_user_dir perf-ns || die "no directory for the other user"
P=$OTHER_DIR/p.sock
C=$OTHER_DIR/c.sock
start_tracegated "$P" "$C" "$WORK/tracegated.log" tracegated
# As deploy/systemd/tracegate-perf.service.in, less CAP_PERFMON.
start_perf_as_unit +sys_ptrace,+syslog "$WORK/perf.log" --socket "$P"
wait_registered "$C" linux.perf "linux.perf was not registered" "$WORK/perf.log"

cat >"$WORK/perf.pbtxt" <<'CFG'
buffers { size_kb: 1024 }
duration_ms: 500
data_sources {
  config {
    name: "linux.perf"
    perf_event_config { timebase { frequency: 19 counter: SW_CPU_CLOCK } }
  }
}
CFG
TRACE=$WORK/perf.pftrace
status=0
"$TGCLI" record --socket "$C" -c "$WORK/perf.pbtxt" --txt \
  -o "$TRACE" --summary-json "$WORK/summary.json" 2>"$WORK/record.log" || status=$?
[ "$status" = 4 ] || die "tracegate record exited $status, not 4: $(cat "$WORK/record.log")"
grep -q 'TG-8002.*CAP_PERFMON' "$WORK/perf.log" ||
  die "no TG-8002 naming CAP_PERFMON in the producer's log: $(cat "$WORK/perf.log")"
python3 - "$WORK/summary.json" <<'PY' || die "summary: $(cat "$WORK/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["exit_code"] == 4, s["exit_code"]
probs = [p for h in s["hosts"] for p in h["problems"]]
hit = [p for p in probs if p["data_source"] == "linux.perf"]
assert len(hit) == 1, probs
p = hit[0]
assert p["kind"] == "data_source" and p["reason"] == "not_started", p
assert p["code"] == "TG-7010", p
PY
grep -q 'TG-7010.*linux\.perf' "$WORK/tracegated.log" ||
  die "the service's log has no TG-7010 naming linux.perf: $(cat "$WORK/tracegated.log")"
grep -q 'TG-7010.*linux\.perf' "$WORK/record.log" ||
  die "the summary has no TG-7010 line naming linux.perf: $(cat "$WORK/record.log")"
cleanup

if [ -z "${PERFETTO_BIN:-}" ]; then
  say "ok (trace_processor not run: PERFETTO_BIN unset)"
  exit 0
fi
TP=$PERFETTO_BIN/trace_processor_shell
bad=$(q "select name || '=' || value from stats where value > 0 and
         severity in ('error', 'data_loss')")
[ -z "$bad" ] || die "trace_processor stats: $bad"
slow=$(q "select count(*) from metadata where name = 'slow_start_data_source'
          and str_value like '%linux.perf'")
[ "${slow:-0}" -gt 0 ] || die "trace_processor's metadata has no slow_start_data_source for linux.perf"
say "ok"
