#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_perf_unit: tracegate-perf as its systemd unit runs it
# (deploy/systemd/tracegate-perf.service.in): another user (nobody) with
# CAP_PERFMON, CAP_SYS_PTRACE and CAP_SYSLOG only, run from a copy in a
# directory made for it, its producer socket there too
# (tests/support/other_user.sh), wherever the checkout lies:
#
#   sampling    a root workload's callstacks (cpu-clock, kernel frames,
#               user frames by frame pointer): nothing refused (no TG-800x
#               in its log), and with PERFETTO_BIN the workload's frames
#               named in trace_processor with no error or loss stat;
#   tracepoint  where tracefs is root's alone: a sched:sched_switch
#               timebase is refused with TG-8001 naming it, and
#               `tracegate record` exits 4;
#   polling     counter-only polling reads context-switches on every CPU
#               (with PERFETTO_BIN).
#
# Without CAP_PERFMON the session is refused: test_perf_not_started.
#
# Skipped (exit 77), with the reason, where it cannot run a program as
# another user, where perf_event_open is refused, without a C compiler;
# PERFETTO_BIN unset skips the trace_processor checks (said) after the
# recordings, which must succeed.
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
set -eu

PERF_TEST=test_perf_unit
. "$(dirname "$0")/perf_lib.sh"

other_user_or_skip "$PERF_TEST"
need_cc
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

# The sockets and the workload in OTHER_DIR: the other user must reach
# the producer socket, and the workload's file to name its frames.
other_user_dir perf-unit || die "no directory for the other user"
workload_and_service "$OTHER_DIR"
start_perf_as_unit +perfmon,+sys_ptrace,+syslog "$WORK/perf.log" \
  --socket "$P" --name perf-unit
wait_registered "$C" perf-unit "perf-unit did not connect" "$WORK/perf.log"

# Records config $1 into trace $2 (its log $3); requires exit 0, no loss.
record() {
  "$TGCLI" record --socket "$C" -c "$1" --txt -o "$2" 2>"$3" ||
    die "tracegate record $1: $(cat "$3")"
  grep -q 'TG-1006' "$3" || die "the recording of $1 reports a loss: $(cat "$3")"
}
# --- sampling a root workload -------------------------------------------------
workload_cfg sample 2000
rm -f "$WORK/stop"
"$OTHER_DIR/perfwork" "$WORK/stop" &
WORKLOAD_PID=$!
PIDS="$WORKLOAD_PID $PIDS"
SAMPLE_TRACE=$WORK/sample.pftrace
record "$WORK/sample.pbtxt" "$SAMPLE_TRACE" "$WORK/sample.log"
touch "$WORK/stop"
wait "$WORKLOAD_PID" || die "the workload failed"
forget_pid "$WORKLOAD_PID"
rm -f "$WORK/stop"
! grep -q 'TG-800' "$WORK/perf.log" ||
  die "tracegate-perf as its unit refused: $(cat "$WORK/perf.log")"
say "sampling: recorded, nothing refused"

# --- a tracepoint, where tracefs is root's alone ----------------------------------
TRACEFS=/sys/kernel/tracing
[ -e $TRACEFS/events ] || TRACEFS=/sys/kernel/debug/tracing
if [ -r $TRACEFS/events/sched/sched_switch/id ] &&
   ! other_user_run test -r $TRACEFS/events/sched/sched_switch/id 2>/dev/null; then
  perf_cfg tp 300 <<'CFG'
      timebase { period: 1 tracepoint { name: "sched:sched_switch" } }
CFG
  st=0
  "$TGCLI" record --socket "$C" -c "$WORK/tp.pbtxt" --txt \
    -o "$WORK/tp.pftrace" 2>"$WORK/tp.log" || st=$?
  [ "$st" = 4 ] || die "a tracepoint: tracegate record exited $st, not 4"
  grep -q 'TG-8001.*sched:sched_switch' "$WORK/perf.log" ||
    die "a tracepoint was not refused with TG-8001: $(cat "$WORK/perf.log")"
  say "tracepoint: refused (tracefs is root's), named"
else
  say "tracepoint part skipped: no sched:sched_switch, or tracefs readable by the other user"
fi

# --- counter-only polling ------------------------------------------------------------
perf_cfg poll 1500 <<'CFG'
      timebase { poll_period_ms: 100 counter: SW_CPU_CLOCK }
      followers { counter: SW_CONTEXT_SWITCHES }
CFG
POLL_TRACE=$WORK/poll.pftrace
record "$WORK/poll.pbtxt" "$POLL_TRACE" "$WORK/poll.log"
stop_clean "$NOBODY_PID" "tracegate-perf as its unit" "$WORK/perf.log"

# --- trace_processor ---------------------------------------------------------------
need_tp "the unit's recordings were made but not checked by trace_processor"
TRACE=$SAMPLE_TRACE
named=$(q "select count(*) from stack_profile_frame where name = 'func_b'")
[ "${named:-0}" -gt 0 ] || die "sampling: the workload's frames are not named"
bad=$(q "select name || '=' || value from stats where value > 0 and
         (severity in ('error', 'data_loss') or name like 'stackprofile%')")
[ -z "$bad" ] || die "sampling: trace_processor stats: $bad"
TRACE=$POLL_TRACE
NCPU=$(getconf _NPROCESSORS_CONF)
cpus=$(q "select count(distinct t.cpu) from counter c join perf_counter_track t
          on c.track_id = t.id where t.name = 'context-switches'")
[ "$cpus" = "$NCPU" ] || die "polling: read on $cpus CPUs of $NCPU"
say "PASSED: frames named ($named func_b), polling on $cpus CPUs"
