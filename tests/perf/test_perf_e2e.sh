#!/bin/sh
# test_perf_e2e: tracegated + tracegate-perf + a workload with a known call
# tree (main -> func_a -> func_b -> spin, and a second thread in
# worker_spin, which makes system calls) built here with frame pointers, recorded with `tracegate
# record` and a linux.perf config (cpu-clock, kernel frames, user frames by
# frame pointer); then Perfetto's trace_processor (PERFETTO_BIN) must fill
# perf_sample and stack_profile_* with no import error or data loss stat,
# and its flame graph (linux.perf.samples) must hold the whole chain by
# name, both threads, and the kernel's frames.
#
# The functions are not named a and b: trace_processor demangles frame
# names, and "a" and "b" are the Itanium manglings of signed char and bool.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused
# (neither root nor CAP_PERFMON with perf_event_paranoid too high), where
# no C compiler is found, and where PERFETTO_BIN is unset (after the
# recording, which must still succeed).
#
# With PERF_DWARF=ON (a build with libdw), the workload is also built
# without frame pointers and unwound with UNWIND_DWARF: the same chain, and
# at least 95% of its samples (docs/perf.md's goal) unwound to main or the
# thread's function;
# with an unwinder queue of 1 KiB (max_enqueued_footprint_kb) every sample
# is skipped and trace_processor counts them (perf_samples_skipped_dataloss);
# with max_daemon_memory_kb of 1 the guardrail stops the session
# (TG-8009, perf_guardrail_stop_ts). Without libdw, UNWIND_DWARF must be
# refused (TG-8001).
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC PERF_DWARF
set -eu

PERF_TEST=test_perf_e2e
. "$(dirname "$0")/perf_lib.sh"

need_cc
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

build_workload

# --- the service and the producer ------------------------------------------
start_local

# Records |$2| into |$3| (stderr into |$4|) while the workload |$1| runs:
# started before the session and stopped after it, so that it runs for the
# whole of it however long the producer takes to start sampling. Sets
# WORKLOAD_PID.
record_with() {
  rm -f "$WORK/stop"
  "$1" "$WORK/stop" &
  WORKLOAD_PID=$!
  "$TGCLI" record --socket "$C" -c "$2" --txt \
    -o "$3" 2>"$4" || { touch "$WORK/stop"; die "tracegate record $2: $(cat "$4")"; }
  touch "$WORK/stop"
  wait "$WORKLOAD_PID" || die "the workload $1 failed"
}

# --- record -----------------------------------------------------------------
workload_cfg perf 3000
# Interned state cleared every 300 ms: samples after several clears.
sed -i '2a incremental_state_config { clear_period_ms: 300 }' "$WORK/perf.pbtxt"
TRACE=$WORK/perf.pftrace
record_with "$WORK/perfwork" "$WORK/perf.pbtxt" "$TRACE" "$WORK/record.log"
WORK_PID=$WORKLOAD_PID
grep -q 'TG-1006' "$WORK/record.log" ||
  die "the recording reports a loss: $(cat "$WORK/record.log")"

# Refusals are said, with their code, not recorded as empty sessions:
# UNWIND_DWARF (no DWARF unwinder in this build) and a hardware counter
# (this check only where the machine has no PMU for it). The producer does
# not confirm the start: the recording exits 4, linux.perf not_started.
refused() {
  printf 'buffers { size_kb: 1024 }\nduration_ms: 300\ndata_sources { config {\n  name: "linux.perf"\n  perf_event_config { %s }\n} }\n' \
    "$1" >"$WORK/refused.pbtxt"
  st=0
  "$TGCLI" record --socket "$C" -c "$WORK/refused.pbtxt" \
    --txt -o "$WORK/refused.pftrace" --summary-json "$WORK/refused.json" \
    2>>"$WORK/record.log" || st=$?
  [ "$st" = 4 ] || die "tracegate record of a refused config exited $st, not 4"
  grep -q '"reason": "not_started"' "$WORK/refused.json" ||
    die "a refused config is not a not_started problem: $(cat "$WORK/refused.json")"
}
if [ "$PERF_DWARF" != ON ]; then
  refused 'callstack_sampling { user_frames: UNWIND_DWARF }'
  grep -q 'TG-8001.*UNWIND_DWARF' "$WORK/perf.log" ||
    die "UNWIND_DWARF was not refused with TG-8001: $(cat "$WORK/perf.log")"
fi
if [ ! -e /sys/bus/event_source/devices/cpu ]; then
  refused 'timebase { frequency: 10 counter: HW_CPU_CYCLES }'
  grep -q 'TG-8002.*PMU' "$WORK/perf.log" ||
    die "a hardware counter without a PMU was not refused with TG-8002"
fi

# Ring loss: one page per CPU, read once a second, at 1000 Hz: the kernel
# drops records, and says how many (PERF_RECORD_LOST), which reach the
# trace as traced_perf writes them (kernel_records_lost) and the log at the
# end (TG-8004).
LOSS_TRACE=$WORK/loss.pftrace
cat >"$WORK/loss.pbtxt" <<CFG
buffers { size_kb: 4096 }
duration_ms: 2000
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 1000 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK_PROG" }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_pages: 1
      ring_buffer_read_period_ms: 1000
    }
  }
}
CFG
record_with "$WORK/perfwork" "$WORK/loss.pbtxt" "$LOSS_TRACE" "$WORK/loss-record.log"
grep -q 'TG-8004' "$WORK/perf.log" ||
  die "a one-page ring at 1000 Hz lost nothing, or did not say so: $(cat "$WORK/perf.log")"

# UNWIND_DWARF (builds with libdw): the same workload built without frame
# pointers (-O2 -fomit-frame-pointer), unwound from the copied stacks.
DWARF_TRACE=$WORK/dwarf.pftrace
if [ "$PERF_DWARF" = ON ]; then
  "$CC" -O2 -fomit-frame-pointer -pthread -o "$WORK/perfwork-nofp" "$WORK/work.c" ||
    die "cannot build the workload without frame pointers"
  # 4 MiB a CPU: a sample takes ~16.5 KiB (every CPU's samples carry
  # their stack, the workload's or not), so the default 1 MiB holds 300 ms
  # of samples at 200 Hz, less than a loaded CI machine may keep the
  # reader off its CPU (CI once lost 14 records so). 4 MiB holds 1.2 s,
  # and CI kept it off longer once too (1,471 records on 2026-11-30, the
  # ASan tests four at a time beside the profiler's spinning workloads):
  # a loss of a full ring is the kernel's, and only has to be reported,
  # which the one-page ring's test checks; below it is a note, and every
  # other loss or unwinding problem fails.
  sed 's/UNWIND_FRAME_POINTER/UNWIND_DWARF/; s|/perfwork"|/perfwork-nofp"|
       s/ring_buffer_read_period_ms: 50/& ring_buffer_pages: 1024/' \
    "$WORK/perf.pbtxt" >"$WORK/dwarf.pbtxt"
  record_with "$WORK/perfwork-nofp" "$WORK/dwarf.pbtxt" "$DWARF_TRACE" \
    "$WORK/dwarf-record.log"
  NOFP_PID=$WORKLOAD_PID
  # An unwinder queue of 1 KiB holds no 16 KiB stack copy: every sample
  # of the workload is skipped as traced_perf skips it
  # (PROFILER_SKIP_UNWIND_ENQUEUE), counted in the log (TG-8004).
  sed 's/ring_buffer_read_period_ms: 50/& max_enqueued_footprint_kb: 1/' \
    "$WORK/dwarf.pbtxt" >"$WORK/tiny.pbtxt"
  TINY_TRACE=$WORK/tiny.pftrace
  record_with "$WORK/perfwork-nofp" "$WORK/tiny.pbtxt" "$TINY_TRACE" \
    "$WORK/tiny-record.log"
  TINY_PID=$WORKLOAD_PID
  grep -q 'TG-8004.* [1-9][0-9]* samples skipped with no room' "$WORK/perf.log" ||
    die "a 1 KiB unwinder queue skipped nothing, or did not say so: $(cat "$WORK/perf.log")"
  # Past max_daemon_memory_kb the caches go, then the session stops
  # sampling a check later (TG-8009), as traced_perf's guardrail.
  sed 's/ring_buffer_read_period_ms: 50/& max_daemon_memory_kb: 1/' \
    "$WORK/dwarf.pbtxt" >"$WORK/guard.pbtxt"
  GUARD_TRACE=$WORK/guard.pftrace
  record_with "$WORK/perfwork-nofp" "$WORK/guard.pbtxt" "$GUARD_TRACE" \
    "$WORK/guard-record.log"
  grep -q 'TG-8009.*sampling stops' "$WORK/perf.log" ||
    die "max_daemon_memory_kb of 1 did not stop the session: $(cat "$WORK/perf.log")"
fi

stop_clean "$PERF_PID" tracegate-perf "$WORK/perf.log"

# As its unit runs it (another user, three capabilities): test_perf_unit.
cleanup
[ "$(grep -c 'TG-800[12]' "$WORK/perf.log")" -le 2 ] ||
  die "tracegate-perf refused the main session: $(cat "$WORK/perf.log")"
[ -s "$TRACE" ] || die "no trace written"

# --- trace_processor ---------------------------------------------------------
need_tp "the trace was recorded but not checked by trace_processor"

samples=$(q "select count(*) from perf_sample s join thread t using(utid)
             join process p using(upid) where p.pid > 0")
[ "${samples:-0}" -gt 0 ] || die "perf_sample is empty"
frames=$(q "select count(*) from stack_profile_frame")
[ "${frames:-0}" -gt 0 ] || die "stack_profile_frame is empty"

bad=$(bad_stats "$TRACE")
[ -z "$bad" ] || die "trace_processor stats: $bad"

# The flame graph: a node spin whose ancestors are func_b, func_a, main.
chain=$(chain_count "and s.cumulative_count > 0")
[ "${chain:-0}" -gt 0 ] || die "no spin <- func_b <- func_a <- main in the flame graph"
worker=$(q "INCLUDE PERFETTO MODULE linux.perf.samples;
  select count(*) from linux_perf_samples_summary_tree where name = 'worker_spin'")
[ "${worker:-0}" -gt 0 ] || die "the second thread's worker_spin is missing"
threads=$(q "select count(distinct utid) from perf_sample join thread
             using(utid) join process using(upid) where pid = $WORK_PID")
[ "${threads:-0}" -eq 2 ] || die "samples of $threads threads of the workload, not 2"
# The worker's system calls: kernel frames, named from kallsyms.
kernel=$(q "select count(*) from stack_profile_frame f join stack_profile_mapping
            m on f.mapping = m.id where m.name like '%kernel.kallsyms%'
            and f.name is not null and f.name != ''")
[ "${kernel:-0}" -gt 0 ] || die "no named kernel frame"
# Mappings carry the workload's path and a build id.
bid=$(q "select count(*) from stack_profile_mapping where name like '%/perfwork'
         and build_id is not null and build_id != ''")
[ "${bid:-0}" -gt 0 ] || die "the workload's mapping has no build id"
# tracegate profile (docs/profiles.md) of the same recording: every sample
# trace_processor has (those skipped as outside the scope included), and
# spin's as leaf; its pprof read by go tool pprof when there is one.
all_tp=$(q "select count(*) from perf_sample")
spin_tp=$(q "select count(*) from perf_sample s join stack_profile_callsite c
             on c.id = s.callsite_id join stack_profile_frame f
             on f.id = c.frame_id where f.name = 'spin'")
"$TGCLI" profile "$TRACE" --json >"$WORK/profile.json" 2>"$WORK/profile.err" ||
  die "tracegate profile: $(cat "$WORK/profile.err")"
python3 - "$WORK/profile.json" "$all_tp" "$spin_tp" <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["hosts"]) == 1, d["hosts"]
h = d["hosts"][0]
assert h["counts"]["samples"] == int(sys.argv[2]), (h["counts"], sys.argv[2])
assert h["frequency_hz_max"] > 0 and h["cpu_ns"] > 0, h
spin = [f for f in h["top_functions"] if f["name"] == "spin"]
assert spin and spin[0]["self"] == int(sys.argv[3]), (spin, sys.argv[3])
PY
  die "tracegate profile's summary: $(cat "$WORK/profile.json")"
"$TGCLI" profile "$TRACE" --pprof -o "$WORK/perf.pb.gz" 2>/dev/null ||
  die "tracegate profile --pprof"
if command -v go >/dev/null 2>&1; then
  HOME=$WORK GOCACHE=$WORK/gocache go tool pprof -symbolize=none \
    -sample_index=samples -top -nodecount=1000 "$WORK/perf.pb.gz" \
    >"$WORK/perf.top" 2>&1 || die "go tool pprof: $(cat "$WORK/perf.top")"
  spin_pp=$(awk '$NF == "spin" { print $1 }' "$WORK/perf.top")
  [ "${spin_pp:-0}" = "$spin_tp" ] ||
    die "spin as leaf: pprof ${spin_pp:-0}, trace_processor $spin_tp"
else
  echo "$PERF_TEST: note: no go: the recording's pprof not read by go tool pprof" >&2
fi
if [ "$PERF_DWARF" = ON ]; then
  TRACE=$DWARF_TRACE
  chain=$(chain_count)
  [ "${chain:-0}" -gt 0 ] || die "DWARF: no spin <- func_b <- func_a <- main"
  # Nearly every sample of the workload unwinds to main or the thread's
  # function (a sample taken in the vDSO may stop at its leaf).
  all=$(q "select count(*) from perf_sample join thread using(utid)
           join process using(upid) where pid = $NOFP_PID")
  deep=$(q "select count(*) from perf_sample s join thread using(utid)
            join process using(upid) where pid = $NOFP_PID and exists (
              select 1 from experimental_ancestor_stack_profile_callsite(s.callsite_id) a
              join stack_profile_frame f on a.frame_id = f.id
              where f.name in ('main', 'worker'))")
  [ "${all:-0}" -gt 0 ] || die "DWARF: no sample of the workload"
  [ $((deep * 100)) -ge $((all * 95)) ] ||
    die "DWARF: only $deep of $all samples unwound to main or worker"
  bad=$(q "select name || '=' || value from stats where value > 0 and
           (severity in ('error', 'data_loss') or name like 'stackprofile%')
           and name != 'perf_cpu_lost_records'")
  [ -z "$bad" ] || die "DWARF: trace_processor stats: $bad"
  ring_lost=$(q "select sum(value) from stats where name = 'perf_cpu_lost_records'")
  if [ "${ring_lost:-0}" != 0 ]; then
    say "note: DWARF: $ring_lost records lost in full rings, reported in the trace"
    grep 'TG-8004' "$WORK/perf.log" >&2 || true
  fi
  say "DWARF: $deep of $all samples unwound to main or worker"
  # The tiny queue: trace_processor imports the skipped samples without an
  # error and counts them as the producer's own data loss; none of the
  # workload's samples has a callstack.
  TRACE=$TINY_TRACE
  lost=$(q "select value from stats where name = 'perf_samples_skipped_dataloss'")
  [ "${lost:-0}" -gt 0 ] || die "tiny queue: no perf_samples_skipped_dataloss"
  unwound=$(q "select count(*) from perf_sample join thread using(utid)
               join process using(upid) where pid = $TINY_PID
               and callsite_id is not null")
  [ "${unwound:-0}" -eq 0 ] || die "tiny queue: $unwound samples unwound through a 1 KiB queue"
  bad=$(q "select name || '=' || value from stats where value > 0 and
           (severity = 'error' or name like 'stackprofile%' or name like 'tokenizer%'
            or (severity = 'data_loss' and name != 'perf_samples_skipped_dataloss'))")
  [ -z "$bad" ] || die "tiny queue: trace_processor stats: $bad"
  say "tiny queue: $lost samples skipped (perf_samples_skipped_dataloss)"
  # The guardrail's stop: trace_processor records when (per session).
  TRACE=$GUARD_TRACE
  stop_ts=$(q "select count(*) from stats where name = 'perf_guardrail_stop_ts' and value > 0")
  [ "${stop_ts:-0}" -gt 0 ] || die "guardrail: no perf_guardrail_stop_ts in the trace"
fi
TRACE=$LOSS_TRACE
lost=$(q "select sum(value) from stats where name = 'perf_cpu_lost_records'")
[ "${lost:-0}" -gt 0 ] || die "no perf_cpu_lost_records in the trace of a lossy ring"
say "ok: $samples samples, $frames frames"
