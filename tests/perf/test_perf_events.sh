#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_perf_events: the timebases and scopes of PerfEventConfig beyond a
# cpu-clock counter, recorded through tracegated and tracegate-perf with
# `tracegate record`, checked by Perfetto's trace_processor (PERFETTO_BIN):
#
#   tracepoint  timebase sched:sched_switch, period 1, with the filter
#               "prev_pid == P" of a workload P that sleeps in a known
#               call chain, kernel and user frames: perf_sample rows, every
#               one of P (the kernel applied the filter), a cpu of the
#               machine, ts in order on each CPU, callstacks through the
#               kernel's scheduler; the counter track named after the
#               tracepoint. An unknown tracepoint, and a filter the
#               kernel refuses, are refused (TG-8001, named) and the
#               recording says linux.perf did not start.
#   followers   a cpu-clock timebase with context-switches, page-faults
#               and (with tracefs) sched:sched_switch followers read as
#               one group: their counter tracks (perf_counter_track,
#               is_timebase 0) with counter rows.
#   polling     timebase.poll_period_ms with a follower and no callstacks:
#               the counters read every period, a counter track per CPU
#               for each, rows on every one.
#   raw         a raw timebase and follower (the software PMU's cpu-clock
#               and context-switches by type and config): callstacks of
#               the workload, counter tracks named after both.
#   sharding    scope.process_shard_count 2 and two spinning workloads of
#               pids of either parity: callstacks of the shard chosen (the
#               stat perf_chosen_process_shard) only; the other workload's
#               samples kept with no callstack (PROFILER_SKIP_NOT_IN_SCOPE)
#               and no stat.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# without a C compiler, and without PERFETTO_BIN. The tracepoint part is
# skipped (said) where tracefs has no sched:sched_switch.
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
# PERF_DWARF (ON in builds with libdw: the followers part runs twice)
set -eu

PERF_TEST=test_perf_events
. "$(dirname "$0")/perf_lib.sh"

need_cc
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"
need_tp "the timebases are checked by trace_processor"

build_workload
# The sleeper: main -> nap_a -> nap_b -> nap, which sleeps 1 ms at a time
# (a context switch each) until the file named by its argument exists.
cat >"$WORK/nap.c" <<'C'
#include <time.h>
#include <unistd.h>
static const char *stop;
__attribute__((noinline)) void nap(void) {
  struct timespec ts = {0, 1000000};
  while (access(stop, F_OK) != 0) nanosleep(&ts, NULL);
}
__attribute__((noinline)) void nap_b(void) { nap(); }
__attribute__((noinline)) void nap_a(void) { nap_b(); }
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  stop = argv[1];
  nap_a();
  return 0;
}
C
"$CC" -O1 -fno-omit-frame-pointer -o "$WORK/perfnap" "$WORK/nap.c" ||
  die "cannot build the sleeper"

start_local

# Records config $1 into trace $2 (its log $3); the workloads, if any, are
# already running. Requires exit 0 and no loss.
record() {
  "$TGCLI" record --socket "$C" -c "$1" --txt -o "$2" 2>"$3" ||
    die "tracegate record $1: $(cat "$3")"
  grep -q 'TG-1006' "$3" || die "the recording of $1 reports a loss: $(cat "$3")"
}

# Starts workload $1 in the background (stop file $WORK/stop); sets LAST.
run_workload() {
  "$1" "$WORK/stop" &
  LAST=$!
  PIDS="$LAST $PIDS"
}
stop_workloads() {
  touch "$WORK/stop"
  for p in $*; do wait "$p" || die "workload $p failed"; forget_pid "$p"; done
  rm -f "$WORK/stop"
}

NCPU=$(getconf _NPROCESSORS_CONF)

# --- tracepoint timebase ------------------------------------------------------
TRACEFS=/sys/kernel/tracing
[ -r $TRACEFS/events/sched/sched_switch/id ] || TRACEFS=/sys/kernel/debug/tracing
if [ -r $TRACEFS/events/sched/sched_switch/id ]; then
  run_workload "$WORK/perfnap"
  NAP=$LAST
  perf_cfg tp <<CFG
      timebase {
        period: 1
        tracepoint { name: "sched:sched_switch" filter: "prev_pid == $NAP" }
      }
      callstack_sampling {
        kernel_frames: true
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
CFG
  TRACE=$WORK/tp.pftrace
  record "$WORK/tp.pbtxt" "$TRACE" "$WORK/tp.log"
  stop_workloads "$NAP"
  n=$(q "select count(*) from perf_sample")
  [ "$n" -gt 10 ] || die "sched_switch timebase: $n samples"
  # The filter ran in the kernel: every sample is the sleeper's.
  other=$(q "select count(*) from perf_sample s left join thread t using (utid)
             where t.tid is null or t.tid != $NAP")
  [ "$other" = 0 ] || die "sched_switch timebase: $other samples not of pid $NAP (the filter)"
  badcpu=$(q "select count(*) from perf_sample where cpu is null or cpu < 0
              or cpu >= $NCPU")
  [ "$badcpu" = 0 ] || die "sched_switch timebase: $badcpu samples of no CPU here"
  # The order the kernel wrote them in, CPU by CPU: non-decreasing ts.
  unordered=$(q "select count(*) from (select ts, lag(ts) over
                  (partition by cpu order by id) as prev from perf_sample)
                 where ts < prev")
  [ "$unordered" = 0 ] || die "sched_switch timebase: $unordered samples out of order on their CPU"
  stacks=$(q "select count(*) from perf_sample where callsite_id is not null")
  [ "$stacks" = "$n" ] || die "sched_switch timebase: $stacks of $n samples with a callstack"
  sched=$(q "select count(*) from stack_profile_frame where name like '%schedule%'")
  [ "$sched" -gt 0 ] || die "sched_switch timebase: no kernel scheduler frame"
  track=$(q "select count(*) from perf_counter_track where name = 'sched:sched_switch'
             and is_timebase = 1")
  [ "$track" -gt 0 ] || die "sched_switch timebase: no counter track named after it"
  bad=$(bad_stats)
  [ -z "$bad" ] || die "sched_switch timebase: trace_processor stats: $bad"
  say "tracepoint: $n samples of pid $NAP, in order, with callstacks"

  # An unknown tracepoint: refused with its name, nothing recorded.
  printf 'buffers { size_kb: 1024 }\nduration_ms: 300\ndata_sources { config {\n  name: "linux.perf"\n  perf_event_config { timebase { period: 1 tracepoint { name: "sched:no_such_event" } } }\n} }\n' \
    >"$WORK/unknown.pbtxt"
  st=0
  "$TGCLI" record --socket "$C" -c "$WORK/unknown.pbtxt" --txt \
    -o "$WORK/unknown.pftrace" --summary-json "$WORK/unknown.json" \
    2>"$WORK/unknown.log" || st=$?
  [ "$st" = 4 ] || die "an unknown tracepoint: tracegate record exited $st, not 4"
  grep -q '"reason": "not_started"' "$WORK/unknown.json" ||
    die "an unknown tracepoint is not a not_started problem: $(cat "$WORK/unknown.json")"
  grep -q 'TG-8001.*sched:no_such_event' "$WORK/perf.log" ||
    die "an unknown tracepoint was not refused with TG-8001 and its name: $(cat "$WORK/perf.log")"
  # A filter the kernel refuses: the same, naming the tracepoint.
  sed 's/name: "sched:no_such_event"/name: "sched:sched_switch" filter: "no_such_field =="/' \
    "$WORK/unknown.pbtxt" >"$WORK/badfilter.pbtxt"
  st=0
  "$TGCLI" record --socket "$C" -c "$WORK/badfilter.pbtxt" --txt \
    -o "$WORK/badfilter.pftrace" 2>"$WORK/badfilter.log" || st=$?
  [ "$st" = 4 ] || die "a refused filter: tracegate record exited $st, not 4"
  grep -q 'TG-8001.*sched:sched_switch' "$WORK/perf.log" ||
    die "a refused filter was not refused with TG-8001 and the tracepoint: $(cat "$WORK/perf.log")"
else
  say "tracepoint part skipped: no sched:sched_switch in tracefs"
fi

# --- followers ------------------------------------------------------------------
# Followers' counts travel with their sample: written at once by frame
# pointer, or carried through the unwinder's queue with UNWIND_DWARF.
followers() {
  run_workload "$WORK/perfwork"
  WORKLOAD=$LAST
  # With tracefs, a tracepoint follower too: the group then runs on
  # MONOTONIC_RAW (the kernel refuses BOOTTIME for a tracepoint).
  TP_FOLLOWER=
  FOLLOWER_TRACKS="cpu-clock context-switches faults"
  if [ -r $TRACEFS/events/sched/sched_switch/id ]; then
    TP_FOLLOWER='followers { tracepoint { name: "sched:sched_switch" } name: "switches" }'
    FOLLOWER_TRACKS="$FOLLOWER_TRACKS switches"
  fi
  # 4 MiB a CPU: a DWARF sample takes ~16.5 KiB, so the default 1 MiB
  # holds 300 ms of samples at 200 Hz, less than a loaded CI machine may
  # keep the reader off its CPU; a loss is this test's failure, not the
  # speed of the machine's.
  perf_cfg follow <<CFG
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      followers { counter: SW_CONTEXT_SWITCHES }
      followers { counter: SW_PAGE_FAULTS name: "faults" }
      $TP_FOLLOWER
      callstack_sampling {
        scope { target_cmdline: "$WORK_PROG" }
        user_frames: $1
      }
      ring_buffer_read_period_ms: 50
      ring_buffer_pages: 1024
CFG
  TRACE=$WORK/follow-$1.pftrace
  record "$WORK/follow.pbtxt" "$TRACE" "$WORK/follow-$1.log"
  stop_workloads "$WORKLOAD"
  n=$(q "select count(*) from perf_sample")
  [ "$n" -gt 10 ] || die "followers ($1): $n samples"
  for name in $FOLLOWER_TRACKS; do
    tb=1
    [ "$name" = cpu-clock ] || tb=0
    rows=$(q "select count(*) from counter c join perf_counter_track t
              on c.track_id = t.id where t.name = '$name' and t.is_timebase = $tb")
    [ "$rows" -gt 0 ] || die "followers ($1): no counter rows on a '$name' track (is_timebase $tb)"
  done
  switches=$(q "select cast(sum(c.value) as int) from counter c join perf_counter_track t
                on c.track_id = t.id where t.name = 'context-switches'")
  [ "$switches" -gt 0 ] || die "followers ($1): context-switches counted nothing"
  bad=$(bad_stats)
  [ -z "$bad" ] || die "followers ($1): trace_processor stats: $bad"
  say "followers ($1): $n samples, tracks: $FOLLOWER_TRACKS"
}
followers UNWIND_FRAME_POINTER
[ "${PERF_DWARF:-}" != ON ] || followers UNWIND_DWARF

# --- counter-only polling ---------------------------------------------------------
perf_cfg poll <<'CFG'
      timebase { poll_period_ms: 100 counter: SW_CPU_CLOCK }
      followers { counter: SW_CONTEXT_SWITCHES }
CFG
TRACE=$WORK/poll.pftrace
record "$WORK/poll.pbtxt" "$TRACE" "$WORK/poll.log"
for name in cpu-clock context-switches; do
  cpus=$(q "select count(distinct t.cpu) from counter c join perf_counter_track t
            on c.track_id = t.id where t.name = '$name'")
  [ "$cpus" = "$NCPU" ] || die "polling: '$name' read on $cpus CPUs of $NCPU"
  # At least two readings a CPU in a second at 100 ms (any CPU speed: the
  # reads are the producer's, stamped when made; one at the stop).
  few=$(q "select count(*) from (select t.cpu, count(*) as n from counter c
           join perf_counter_track t on c.track_id = t.id where t.name = '$name'
           group by t.cpu) where n < 2")
  [ "$few" = 0 ] || die "polling: '$name' has CPUs with fewer than two readings"
done
withproc=$(q "select count(*) from perf_sample where utid != 0 or callsite_id is not null")
[ "$withproc" = 0 ] || die "polling: $withproc readings carry a process or a callstack"
bad=$(bad_stats)
[ -z "$bad" ] || die "polling: trace_processor stats: $bad"
say "polling: cpu-clock and context-switches read on $NCPU CPUs"

# --- raw events ---------------------------------------------------------------------
# RawEvent's type and config go to perf_event_open as they are: this VM has
# no PMU, but the software PMU's events are raw events too (type 1,
# PERF_TYPE_SOFTWARE; config 0 cpu-clock, 3 context-switches). A raw group
# runs on MONOTONIC_RAW, as a hardware one would.
run_workload "$WORK/perfwork"
RAWW=$LAST
perf_cfg raw <<CFG
      timebase { frequency: 200 raw_event { type: 1 config: 0 } name: "rawclock" }
      followers { raw_event { type: 1 config: 3 } name: "rawswitches" }
      callstack_sampling {
        scope { target_cmdline: "$WORK_PROG" }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
CFG
TRACE=$WORK/raw.pftrace
record "$WORK/raw.pbtxt" "$TRACE" "$WORK/raw.log"
stop_workloads "$RAWW"
stacks=$(q "select count(*) from perf_sample s join thread t using (utid)
            join process p using (upid) where p.pid = $RAWW
            and s.callsite_id is not null")
[ "$stacks" -gt 0 ] || die "raw events: no callstack of the workload $RAWW"
for pair in rawclock:1 rawswitches:0; do
  name=${pair%:*} tb=${pair#*:}
  rows=$(q "select count(*) from counter c join perf_counter_track t
            on c.track_id = t.id where t.name = '$name' and t.is_timebase = $tb")
  [ "$rows" -gt 0 ] || die "raw events: no counter rows on a '$name' track (is_timebase $tb)"
done
bad=$(bad_stats)
[ -z "$bad" ] || die "raw events: trace_processor stats: $bad"
say "raw events: $stacks callstacks of the workload, tracks rawclock and rawswitches"

# --- process sharding ---------------------------------------------------------------
# Two spinning workloads whose pids differ in parity.
run_workload "$WORK/perfwork"
A=$LAST
B=
EXTRA=
while [ -z "$B" ]; do
  run_workload "$WORK/perfwork"
  if [ $(((LAST - A) % 2)) != 0 ]; then B=$LAST; else EXTRA="$EXTRA $LAST"; fi
done
[ -z "$EXTRA" ] || { for p in $EXTRA; do kill "$p"; wait "$p" 2>/dev/null || true; forget_pid "$p"; done; }
perf_cfg shard <<'CFG'
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { process_shard_count: 2 }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
CFG
TRACE=$WORK/shard.pftrace
record "$WORK/shard.pbtxt" "$TRACE" "$WORK/shard.log"
stop_workloads "$A" "$B"
count=$(q "select value from stats where name = 'perf_process_shard_count'")
chosen=$(q "select value from stats where name = 'perf_chosen_process_shard'")
[ "$count" = 2 ] || die "sharding: perf_process_shard_count is '$count', not 2"
case "$chosen" in 0|1) ;; *) die "sharding: perf_chosen_process_shard is '$chosen'" ;; esac
# Callstacks only for the shard chosen; the other processes' samples are
# written with their counts and no callstack (PROFILER_SKIP_NOT_IN_SCOPE,
# as traced_perf writes them), which trace_processor keeps as rows with
# no callsite and counts in no stat.
wrong=$(q "select count(*) from perf_sample s join thread t using (utid)
           join process p using (upid) where p.pid % 2 != $chosen
           and s.callsite_id is not null")
[ "$wrong" = 0 ] || die "sharding: $wrong callstacks of processes outside shard $chosen"
if [ $((A % 2)) = "$chosen" ]; then IN=$A OUT=$B; else IN=$B OUT=$A; fi
nin=$(q "select count(*) from perf_sample s join thread t using (utid)
         join process p using (upid) where p.pid = $IN
         and s.callsite_id is not null")
nout=$(q "select count(*) from perf_sample s join thread t using (utid)
          join process p using (upid) where p.pid = $OUT
          and s.callsite_id is not null")
kept=$(q "select count(*) from perf_sample s join thread t using (utid)
          join process p using (upid) where p.pid = $OUT
          and s.callsite_id is null")
[ "$nin" -gt 0 ] || die "sharding: no callstacks of pid $IN, in shard $chosen"
[ "$nout" = 0 ] || die "sharding: $nout callstacks of pid $OUT, outside shard $chosen"
[ "$kept" -gt 0 ] || die "sharding: the samples of pid $OUT, outside shard $chosen, are not in the trace"
# Not perf_samples_skipped: a process of the chosen shard that exits
# before its maps are read (any on this machine) is skipped at the read
# stage, as traced_perf skips it.
bad=$(q "select name || '=' || value from stats where value > 0 and
         name != 'perf_samples_skipped' and
         (severity in ('error', 'data_loss') or name like 'stackprofile%'
          or name like 'tokenizer%')")
[ -z "$bad" ] || die "sharding: trace_processor stats: $bad"
say "sharding: shard $chosen of 2: $nin callstacks of pid $IN; pid $OUT's $kept samples kept without one"

stop_clean "$PERF_PID" tracegate-perf "$WORK/perf.log"

# As its unit runs it (another user, three capabilities): test_perf_unit.
say PASSED
