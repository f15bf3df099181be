#!/bin/sh
# test_perf_truth: the share of samples per function that tracegate-perf
# finds matches what Linux's own `perf record -g` finds in the same run.
#
# A workload with a known call tree (main -> func_a -> func_b -> spin, and a
# second thread worker -> worker_spin), built with frame pointers, runs
# once; tracegate-perf (through tracegated and `tracegate record`,
# UNWIND_FRAME_POINTER, target_pid) and `perf record -g -a` sample it at
# the same time, both with cpu-clock per CPU at the same frequency.
#
# Both threads compute in their own functions: a thread making system
# calls through libc's syscall() (no frame pointer) loses its caller from
# frame-pointer stacks, and how its samples then split between the caller
# and its caller's caller differed between the two tools by up to 10
# points from run to run (docs/perf.md). Both files are imported by trace_processor (PERFETTO_BIN) into
# the same tables (perf_sample, stack_profile_*). trace_processor does not
# name the frames of a perf.data file, so the frames of both are named the
# same way: by their rel_pc against the workload's symbol table (nm).
# For each function of the workload, its self share (samples whose
# deepest frame in the workload's file is that function) and its
# inclusive share (samples with that function anywhere on the stack) must
# agree within TOL points.
#
# Samples are proportional to the CPU time the workload gets, not to the
# wall time: the window doubles (3 s, 6 s, ... 48 s) until each tool has
# at least MIN_SAMPLES, so that the test passes on a slow or busy machine.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# where `perf` (Debian's linux-perf) or a C compiler or nm is missing, and
# where PERFETTO_BIN is unset.
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC
set -eu

MIN_SAMPLES=1000
TOL=5
FREQ=199

PERF_TEST=test_perf_truth
. "$(dirname "$0")/perf_lib.sh"

need_cc
command -v nm >/dev/null 2>&1 || { say "SKIPPED: no nm (binutils)"; exit 77; }
PERF=$(command -v perf 2>/dev/null) ||
  { say "SKIPPED: no perf on PATH (Debian's linux-perf)"; exit 77; }
# Debian's /usr/bin/perf is a wrapper that fails when no perf matches the
# running kernel.
"$PERF" --version >/dev/null 2>&1 ||
  { say "SKIPPED: perf does not run with this kernel: $("$PERF" --version 2>&1 | head -1)"; exit 77; }
need_tp "nothing can import both recordings"
fresh_work
skip_unless_can_perf ""

# --- the workload (runs until $1 exists) -----------------------------------
cat >"$WORK/work.c" <<'C'
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
static volatile uint64_t sink;
static const char *stop;
__attribute__((noinline)) void spin(void) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 10000000; i++) sink += (uint64_t)i;
}
__attribute__((noinline)) void func_b(void) { spin(); sink++; }
__attribute__((noinline)) void func_a(void) { func_b(); sink++; }
__attribute__((noinline)) void worker_spin(void) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 10000000; i++) sink += (uint64_t)i * 3;
}
__attribute__((noinline)) void *worker(void *x) {
  (void)x;
  worker_spin();
  sink++;
  return NULL;
}
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  stop = argv[1];
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  func_a();
  pthread_join(t, NULL);
  sink++;
  return 0;
}
C
"$CC" -O1 -fno-omit-frame-pointer -pthread -o "$WORK/truthwork" "$WORK/work.c" ||
  die "cannot build the workload"
# The workload's functions: start address and name, sorted, for naming a
# rel_pc (the address in the ELF's terms) by the symbol that covers it.
nm -t d --defined-only "$WORK/truthwork" |
  awk '$2 ~ /^[tT]$/ { print $1 + 0, $3 }' | sort -n >"$WORK/syms"

# --- the service and the producer ------------------------------------------
start_local

# Per function of the workload, the self and inclusive share (in percent)
# of the samples of the process $2 in the file $1, as "name self incl"
# lines, the first line "samples N".
shares() {
  q "select s.callsite_id from perf_sample s join thread using(utid)
     join process using(upid) where pid = $2 and s.callsite_id is not null" \
    "$1" >"$WORK/samples.txt"
  q "select id, ifnull(parent_id, -1), frame_id from stack_profile_callsite" \
    "$1" >"$WORK/callsites.txt"
  q "select f.id, f.rel_pc from stack_profile_frame f join stack_profile_mapping m
     on f.mapping = m.id where m.name like '%/truthwork'" "$1" >"$WORK/frames.txt"
  awk -F, '
    FILENAME == ARGV[1] { split($0, a, " "); addr[NR] = a[1] + 0;
                          sym[NR] = a[2]; nsym = NR; next }
    FILENAME == ARGV[2] { pc[$1] = $2 + 0; next }
    FILENAME == ARGV[3] { parent[$1] = $2; frame[$1] = $3; next }
    {
      n++
      delete seen
      leaf = ""
      for (c = $1; c != -1 && c != ""; c = parent[c]) {
        f = frame[c]
        if (!(f in pc)) continue
        name = "?"
        for (i = nsym; i >= 1; i--) if (addr[i] <= pc[f]) { name = sym[i]; break }
        if (leaf == "") leaf = name
        seen[name] = 1
      }
      if (leaf != "") self[leaf]++
      for (k in seen) incl[k]++
    }
    END {
      print "samples", n + 0
      for (k in incl) printf "%s %.1f %.1f\n", k, 100 * self[k] / n, 100 * incl[k] / n
    }' "$WORK/syms" "$WORK/frames.txt" "$WORK/callsites.txt" "$WORK/samples.txt"
}

# --- record, both at once ------------------------------------------------------
window=3
while :; do
  rm -f "$WORK/stop" "$WORK/perf.data"
  "$WORK/truthwork" "$WORK/stop" &
  WORK_PID=$!
  PIDS="$PIDS $WORK_PID"
  cat >"$WORK/tg.pbtxt" <<CFG
buffers { size_kb: 65536 }
duration_ms: $((window * 1000))
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: $FREQ counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_pid: $WORK_PID }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
    }
  }
}
CFG
  # perf first: it attaches to the running threads at once; its window
  # holds tracegate-perf's.
  "$PERF" record -q -g --sample-cpu -e cpu-clock -F $FREQ -a \
    -o "$WORK/perf.data" >"$WORK/perf-record.log" 2>&1 &
  PERF_REC=$!
  PIDS="$PIDS $PERF_REC"
  "$TGCLI" record --socket "$C" -c "$WORK/tg.pbtxt" \
    --txt -o "$WORK/tg.pftrace" 2>"$WORK/record.log" ||
    die "tracegate record: $(cat "$WORK/record.log")"
  kill -INT "$PERF_REC"
  # perf record writes its file on SIGINT, then exits 130.
  rc=0; wait "$PERF_REC" || rc=$?
  [ $rc = 0 ] || [ $rc = 130 ] ||
    die "perf record failed ($rc): $(cat "$WORK/perf-record.log")"
  touch "$WORK/stop"
  wait "$WORK_PID" || die "the workload failed"
  PIDS=$(echo "$PIDS" | sed "s/\b$PERF_REC\b//; s/\b$WORK_PID\b//")
  [ -s "$WORK/tg.pftrace" ] || die "tracegate record wrote no trace"
  [ -s "$WORK/perf.data" ] || die "perf record wrote no perf.data"
  shares "$WORK/tg.pftrace" "$WORK_PID" >"$WORK/tg.shares"
  shares "$WORK/perf.data" "$WORK_PID" >"$WORK/perf.shares"
  n_tg=$(awk '$1 == "samples" { print $2 }' "$WORK/tg.shares")
  n_perf=$(awk '$1 == "samples" { print $2 }' "$WORK/perf.shares")
  say "window ${window} s: tracegate-perf $n_tg samples, perf record $n_perf"
  if [ "$n_tg" -ge $MIN_SAMPLES ] && [ "$n_perf" -ge $MIN_SAMPLES ]; then break; fi
  [ $window -lt 48 ] ||
    die "fewer than $MIN_SAMPLES samples in a ${window} s window (tracegate-perf $n_tg, perf $n_perf)"
  window=$((window * 2))
done

# --- compare ----------------------------------------------------------------------
bad=$(bad_stats "$WORK/tg.pftrace")
[ -z "$bad" ] || die "trace_processor stats of tracegate's trace: $bad"

printf '%-12s %8s %8s %6s   %8s %8s %6s\n' function "self:tg" perf diff \
  "incl:tg" perf diff
awk -v tol=$TOL '
  FILENAME == ARGV[1] && $1 != "samples" { ts[$1] = $2; ti[$1] = $3; fn[$1] = 1 }
  FILENAME == ARGV[2] && $1 != "samples" { ps[$1] = $2; pi[$1] = $3; fn[$1] = 1 }
  END {
    split("main func_a func_b spin worker worker_spin", want, " ")
    for (i = 1; i <= 6; i++) if (!(want[i] in ti) || !(want[i] in pi)) {
      printf "missing %s in %s\n", want[i], (want[i] in ti) ? "perf" : "tracegate"
      bad = 1
    }
    for (k in fn) {
      ds = ts[k] - ps[k]; di = ti[k] - pi[k]
      printf "%-12s %8.1f %8.1f %+6.1f   %8.1f %8.1f %+6.1f\n", k, ts[k], ps[k],
             ds, ti[k], pi[k], di
      if (ds > tol || ds < -tol || di > tol || di < -tol) bad = 1
    }
    exit bad
  }' "$WORK/tg.shares" "$WORK/perf.shares" >"$WORK/table.txt" && ok=1 || ok=0
sort "$WORK/table.txt"
[ $ok = 1 ] || die "a share differs by more than $TOL points (or a function is missing)"
say "ok: every function's self and inclusive share within $TOL points of perf record ($n_tg and $n_perf samples)"
