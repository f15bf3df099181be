#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_perf_kaddr: no packet tracegate writes holds an address of the
# kernel's image (its KASLR base would follow), in any form: each trace is
# scanned (kaddr_scan.py) for a value in [_stext, _end] of /proc/kallsyms
# as a varint (plain or zigzag), a fixed64, a packed varint, 8 raw
# little-endian bytes at any offset, or 16 hex digits of text:
#
#   named     tracegate-perf as root, kernel frames of a workload making
#             system calls: the frames are named (from kallsyms) and carry
#             no address (rel_pc 0 under a mapping of no range);
#   unnamed   tracegate-perf as another user without CAP_SYSLOG (kallsyms
#             reads as zeros): the kernel frames carry neither a name nor
#             an address;
#   probes    tracegate-probes with linux.ftrace (sched, and events whose
#             fields hold kernel pointers: workqueue, timers, kmem, irq,
#             ftrace/print), linux.process_stats, linux.sys_stats and
#             linux.system_info.
#
# With PERFETTO_BIN, trace_processor must import the perf traces with no
# stackprofile, perf or error stat, and nest the kernel frames in the flame
# graph under the workload's thread that makes the system calls.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# without a C compiler, or where /proc/kallsyms gives no addresses; the
# unnamed part where no program can run as another user (said).
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
set -eu

PERF_TEST=test_perf_kaddr
. "$(dirname "$0")/perf_lib.sh"

need_cc
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

# The kernel image's range. _end is not listed by every kernel (data
# symbols need CONFIG_KALLSYMS_ALL): then the highest address of the image
# (a symbol not in a module) bounds it.
range=$(awk '$3 == "_stext" { lo = $1 } $3 == "_end" { end = $1 }
             NF == 3 && $1 > top { top = $1 }
             END { print lo, (end != "" ? end : top) }' /proc/kallsyms)
LO=${range% *}
HI=${range#* }
case "$LO" in
  ''|0000000000000000|' ')
    say "SKIPPED: /proc/kallsyms gives no address of _stext" \
        "(kptr_restrict=$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null || echo '?'), uid $(id -u))"
    exit 77 ;;
esac
say "kernel image: $LO..$HI"

# Sockets and the workload where another user can reach them (the unnamed
# part), else in WORK.
if why=$(other_user_unavailable); then
  say "unnamed part skipped: cannot run a program as another user: $why"
  DIR=$WORK
else
  other_user_dir perf-kaddr || die "no directory for the other user"
  DIR=$OTHER_DIR
fi
workload_and_service "$DIR"

# Records config $1 into trace $2 (stderr into $3) while the workload runs.
record_work() {
  rm -f "$WORK/stop"
  "$DIR/perfwork" "$WORK/stop" &
  wl=$!
  PIDS="$wl $PIDS"
  "$TGCLI" record --socket "$C" -c "$1" --txt -o "$2" 2>"$3" ||
    die "tracegate record $1: $(cat "$3")"
  touch "$WORK/stop"
  wait "$wl" || die "the workload failed"
  forget_pid "$wl"
}

# Fails when trace $1 holds a kernel address; $2 names it.
scan() {
  python3 "$(dirname "$0")/kaddr_scan.py" "$LO" "$HI" "$1" >"$WORK/scan.json" ||
    die "$2: kernel addresses in the trace: $(cat "$WORK/scan.json")"
  say "$2: $(cat "$WORK/scan.json")"
}

workload_cfg frames 2000

# --- named: tracegate-perf as root --------------------------------------------------
"$BUILD_DIR/agent/perf/tracegate-perf" --socket "$P" --name perf-root \
  >"$WORK/perf-root.log" 2>&1 &
PERF_PID=$!
PIDS="$PERF_PID $PIDS"
wait_registered "$C" perf-root "perf-root did not connect" "$WORK/perf-root.log"
NAMED=$WORK/named.pftrace
record_work "$WORK/frames.pbtxt" "$NAMED" "$WORK/named.log"
stop_clean "$PERF_PID" tracegate-perf "$WORK/perf-root.log"
! grep -q 'kallsyms gives no addresses' "$WORK/perf-root.log" ||
  die "root's tracegate-perf could not read kallsyms: $(cat "$WORK/perf-root.log")"
scan "$NAMED" named

# --- unnamed: without CAP_SYSLOG -------------------------------------------------------
UNNAMED=""
if [ "$DIR" != "$WORK" ]; then
  start_perf_as_unit +perfmon,+sys_ptrace "$WORK/perf-nosyslog.log" \
    --socket "$P" --name perf-nosyslog
  wait_registered "$C" perf-nosyslog "perf-nosyslog did not connect" \
    "$WORK/perf-nosyslog.log"
  UNNAMED=$WORK/unnamed.pftrace
  record_work "$WORK/frames.pbtxt" "$UNNAMED" "$WORK/unnamed.log"
  stop_clean "$NOBODY_PID" "tracegate-perf without CAP_SYSLOG" "$WORK/perf-nosyslog.log"
  grep -q 'kallsyms gives no addresses' "$WORK/perf-nosyslog.log" ||
    die "without CAP_SYSLOG, kallsyms was read: the unnamed case is not tested"
  scan "$UNNAMED" unnamed
fi

# --- tracegate-probes -------------------------------------------------------------
"$BUILD_DIR/agent/probes/tracegate-probes" --socket "$P" --log-level info \
  >"$WORK/probes.log" 2>&1 &
PROBES_PID=$!
PIDS="$PROBES_PID $PIDS"
wait_registered "$C" linux.ftrace "linux.ftrace was not registered" "$WORK/probes.log"
cat >"$WORK/probes.pbtxt" <<'CFG'
buffers { size_kb: 16384 }
duration_ms: 2000
data_sources {
  config {
    name: "linux.ftrace"
    ftrace_config {
      ftrace_events: "sched/sched_switch"
      ftrace_events: "sched/sched_waking"
      ftrace_events: "sched/sched_wakeup_new"
      ftrace_events: "sched/sched_process_exit"
      ftrace_events: "sched/sched_process_free"
      ftrace_events: "task/task_newtask"
      ftrace_events: "task/task_rename"
      ftrace_events: "power/cpu_frequency"
      ftrace_events: "power/cpu_idle"
      ftrace_events: "irq/irq_handler_entry"
      ftrace_events: "irq/irq_handler_exit"
      ftrace_events: "irq/softirq_entry"
      ftrace_events: "irq/softirq_exit"
      ftrace_events: "workqueue/workqueue_execute_start"
      ftrace_events: "workqueue/workqueue_execute_end"
      ftrace_events: "workqueue/workqueue_queue_work"
      ftrace_events: "timer/hrtimer_start"
      ftrace_events: "timer/hrtimer_expire_entry"
      ftrace_events: "timer/timer_start"
      ftrace_events: "timer/timer_expire_entry"
      ftrace_events: "kmem/kmalloc"
      ftrace_events: "kmem/kfree"
      ftrace_events: "ftrace/print"
      atrace_apps: "*"
    }
  }
}
data_sources {
  config {
    name: "linux.process_stats"
    process_stats_config { scan_all_processes_on_start: true proc_stats_poll_ms: 500 }
  }
}
data_sources {
  config {
    name: "linux.sys_stats"
    sys_stats_config {
      meminfo_period_ms: 500
      vmstat_period_ms: 500
      stat_period_ms: 500
      stat_counters: STAT_CPU_TIMES
      stat_counters: STAT_IRQ_COUNTS
      stat_counters: STAT_SOFTIRQ_COUNTS
      stat_counters: STAT_FORK_COUNT
    }
  }
}
data_sources { config { name: "linux.system_info" } }
CFG
# Markers written meanwhile (ftrace/print records the kernel's address of
# the write as its ip). tracefs is looked up at each write: on a machine
# just booted nothing mounts it before the probes' session does.
rm -f "$WORK/stop"
( while [ ! -e "$WORK/stop" ]; do
    for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
      if [ -e $t/trace_marker ]; then
        echo tg-kaddr >$t/trace_marker 2>/dev/null || true
        break
      fi
    done
    sleep 0.05
  done ) &
PIDS="$! $PIDS"
PROBES_TRACE=$WORK/probes.pftrace
record_work "$WORK/probes.pbtxt" "$PROBES_TRACE" "$WORK/probes-record.log"
stop_clean "$PROBES_PID" tracegate-probes "$WORK/probes.log"
scan "$PROBES_TRACE" probes

# --- trace_processor ------------------------------------------------------------------
need_tp "the traces hold no kernel address, but were not checked by trace_processor"
for TRACE in "$NAMED" $UNNAMED; do
  bad=$(bad_stats "$TRACE")
  [ -z "$bad" ] || die "$TRACE: trace_processor stats: $bad"
  # Kernel frames, none with an address, under the thread that makes the
  # system calls (worker) in the flame graph.
  kernel=$(q "select count(*) as n, sum(f.rel_pc != 0 or m.start != 0 or
                m.end != 0 or m.load_bias != 0 or m.exact_offset != 0) as bad
              from stack_profile_frame f join stack_profile_mapping m
              on f.mapping = m.id where m.name like '%kernel.kallsyms%'")
  [ "${kernel%,*}" -gt 0 ] || die "$TRACE: no kernel frame"
  [ "${kernel#*,}" = 0 ] || die "$TRACE: ${kernel#*,} kernel frames with an address"
  nested=$(q "INCLUDE PERFETTO MODULE linux.perf.samples;
    with recursive up(id, parent_id, name) as (
      select t.id, t.parent_id, t.name from linux_perf_samples_summary_tree t
      where t.mapping_name like '%kernel.kallsyms%' and t.cumulative_count > 0
      union all
      select t.id, t.parent_id, t.name from linux_perf_samples_summary_tree t
      join up on t.id = up.parent_id)
    select count(*) from up where name in ('worker', 'worker_spin')")
  [ "${nested:-0}" -gt 0 ] || die "$TRACE: no kernel frame under the worker thread in the flame graph"
done
named=$(q "select count(distinct f.name) from stack_profile_frame f join
           stack_profile_mapping m on f.mapping = m.id
           where m.name like '%kernel.kallsyms%' and f.name != ''" "$NAMED")
[ "${named:-0}" -gt 1 ] || die "named: $named distinct kernel function names, not several"
if [ -n "$UNNAMED" ]; then
  named=$(q "select count(*) from stack_profile_frame f join
             stack_profile_mapping m on f.mapping = m.id
             where m.name like '%kernel.kallsyms%' and f.name != ''" "$UNNAMED")
  [ "$named" = 0 ] || die "unnamed: $named kernel frames named without kallsyms"
fi
# The probes' trace holds the events whose fields are kernel addresses,
# so the scan saw them written some other way.
for ev in print kmalloc workqueue_execute_start; do
  n=$(q "select count(*) from ftrace_event where name = '$ev'" "$PROBES_TRACE")
  [ "${n:-0}" -gt 0 ] || die "probes: no $ev event in the trace"
done
say "ok"
