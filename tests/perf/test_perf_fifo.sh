#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_perf_fifo: a process that maps a library, deletes it and puts FIFOs
# where it was (at its path and at the "PATH (deleted)" name its maps line
# shows) must not stop the profiler: a session sampling every process,
# with that one running in the library, still records another workload's
# samples (its whole call chain, checked by trace_processor when
# PERFETTO_BIN is set), the producer says at the session's end that it
# refused a file that is not regular (TG-8012), and SIGTERM still stops
# it. With PERF_DWARF=ON the same under UNWIND_DWARF, whose unwinder opens
# module files too. Every wait is bounded: a blocked producer fails the
# test, never hangs it.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused or
# no C compiler is found.
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR WORK CC PERF_DWARF
set -eu

PERF_TEST=test_perf_fifo
. "$(dirname "$0")/perf_lib.sh"

need_cc
fresh_work
skip_unless_can_perf "; needs root or CAP_PERFMON"

build_workload
cat >"$WORK/fifolib.c" <<'C'
#include <stdint.h>
#include <unistd.h>
volatile uint64_t fifo_sink;
__attribute__((noinline)) void fifo_spin(const char *stop) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 10000000; i++) fifo_sink += (uint64_t)i;
}
C
cat >"$WORK/fifovictim.c" <<'C'
/* fifovictim LIB STOP READY: maps LIB, deletes it, puts FIFOs at its path
 * and at "LIB (deleted)", says so by creating READY, then runs in LIB's
 * code until STOP exists. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  void *h = dlopen(argv[1], RTLD_NOW);
  void (*spin)(const char *) = h ? (void (*)(const char *))dlsym(h, "fifo_spin") : NULL;
  if (!spin) return 3;
  char deleted[4200];
  snprintf(deleted, sizeof(deleted), "%s (deleted)", argv[1]);
  if (unlink(argv[1]) != 0 || mkfifo(argv[1], 0666) != 0 ||
      mkfifo(deleted, 0666) != 0)
    return 4;
  int fd = open(argv[3], O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return 5;
  close(fd);
  spin(argv[2]);
  return 0;
}
C
"$CC" -O1 -fno-omit-frame-pointer -shared -fPIC -o "$WORK/fifolib.so.build" "$WORK/fifolib.c" ||
  die "cannot build the library"
"$CC" -O1 -fno-omit-frame-pointer -o "$WORK/fifovictim" "$WORK/fifovictim.c" -ldl ||
  die "cannot build the victim"

start_local

# Records config $1 into trace $2 while the victim and the workload run.
record_round() {
  rm -f "$WORK/stop" "$WORK/ready" "$WORK/lib" -r
  mkdir -p "$WORK/lib"
  cp "$WORK/fifolib.so.build" "$WORK/lib/fifolib.so"
  "$WORK/fifovictim" "$WORK/lib/fifolib.so" "$WORK/stop" "$WORK/ready" &
  VICTIM_PID=$!
  PIDS="$PIDS $VICTIM_PID"
  "$WORK/perfwork" "$WORK/stop" &
  WORKLOAD_PID=$!
  PIDS="$PIDS $WORKLOAD_PID"
  i=0
  until [ -e "$WORK/ready" ]; do
    kill -0 "$VICTIM_PID" 2>/dev/null || die "the victim failed"
    i=$((i + 1)); [ $i -lt 200 ] || die "the victim did not start"; sleep 0.05
  done
  [ -p "$WORK/lib/fifolib.so (deleted)" ] || die "no FIFO at the deleted name"
  # `timeout`: a session whose producer hangs must fail here, not wait.
  timeout 60 "$TGCLI" record --socket "$C" -c "$1" --txt -o "$2" \
    2>"$WORK/record.log" || { touch "$WORK/stop"; die "tracegate record $1: $(cat "$WORK/record.log")"; }
  touch "$WORK/stop"
  wait "$VICTIM_PID" || die "the victim failed"
  wait "$WORKLOAD_PID" || die "the workload failed"
  forget_pid "$VICTIM_PID"
  forget_pid "$WORKLOAD_PID"
}

# Every process, user frames: the victim's samples lie in the FIFO's
# mapping, so the producer must look at it.
perf_cfg fp 2000 <<'CFG'
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      callstack_sampling { user_frames: UNWIND_FRAME_POINTER }
      ring_buffer_read_period_ms: 50
CFG
TRACE=$WORK/fp.pftrace
record_round "$WORK/fp.pbtxt" "$TRACE"
if [ "$PERF_DWARF" = ON ]; then
  sed 's/UNWIND_FRAME_POINTER/UNWIND_DWARF/' "$WORK/fp.pbtxt" >"$WORK/dwarf.pbtxt"
  record_round "$WORK/dwarf.pbtxt" "$WORK/dwarf.pftrace"
fi

# The refusals were counted and said, by their code, at each session's end.
n=$(grep -c 'TG-8012.* [1-9][0-9]* not_regular' "$WORK/perf.log" || true)
want=1
[ "$PERF_DWARF" = ON ] && want=2
[ "$n" -ge "$want" ] ||
  die "$n sessions of $want refused the FIFO with TG-8012: $(cat "$WORK/perf.log")"

# SIGTERM still stops the producer, within a bound.
kill "$PERF_PID"
i=0
while kill -0 "$PERF_PID" 2>/dev/null; do
  i=$((i + 1))
  [ $i -lt 300 ] || die "tracegate-perf did not stop on SIGTERM within 15 s"
  sleep 0.05
done
st=0
wait "$PERF_PID" || st=$?
forget_pid "$PERF_PID"
[ "$st" = 0 ] || die "tracegate-perf exited with $st: $(cat "$WORK/perf.log")"

if [ -z "${PERFETTO_BIN:-}" ]; then
  say "PASSED (the samples themselves not checked: PERFETTO_BIN not set)"
  exit 0
fi
need_tp "the samples"
# The other workload's samples, named: the reader was never held up.
TRACES=$WORK/fp.pftrace
[ "$PERF_DWARF" = ON ] && TRACES="$TRACES $WORK/dwarf.pftrace"
for TRACE in $TRACES; do
  n=$(chain_count)
  [ "${n:-0}" -ge 1 ] || die "no spin <- func_b <- func_a <- main chain in $TRACE"
done
say "PASSED"
