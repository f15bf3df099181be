# SPDX-License-Identifier: Apache-2.0
# perf_lib.sh: what the shell tests of tests/perf share, sourced (POSIX sh)
# after `set -eu` and after setting PERF_TEST to the test's name:
#   . "$(dirname "$0")/perf_lib.sh"
# It reads BUILD_DIR, WORK and CC from the environment (set by
# tests/perf/CMakeLists.txt). Every process a test starts in the background
# goes into PIDS, so that cleanup (run on EXIT and by die) stops them all.
# Skips exit 77 with the reason on stdout.

TGCLI=$BUILD_DIR/cli/tracegate
# Every script sourcing this one sits in a directory of tests/.
. "$(dirname "$0")/../support/other_user.sh"

say() { echo "$PERF_TEST: $*"; }
die() { say "FAILED: $*"; say "files kept in $WORK"; cleanup; exit 1; }
PIDS=""
cleanup() {
  # A workload still running ends once this file exists.
  [ -d "${WORK:-}" ] && touch "$WORK/stop"
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
  PIDS=""
  other_user_cleanup
}
trap cleanup EXIT

# Drops pid $1 from PIDS (it was stopped and waited for).
forget_pid() { PIDS=$(echo "$PIDS" | sed "s/\b$1\b//"); }

# Stops process $1 and requires a clean exit; $2 names it, $3 (optional) is
# a log file shown when it fails.
stop_clean() {
  kill "$1"
  st=0
  wait "$1" || st=$?
  [ "$st" = 0 ] || die "$2 exited with $st${3:+: $(cat "$3")}"
  forget_pid "$1"
}

need_cc() {
  command -v "$CC" >/dev/null 2>&1 || { say "SKIPPED: no C compiler ($CC)"; exit 77; }
}

fresh_work() {
  rm -rf "$WORK"
  mkdir -p "$WORK"
}

# Builds $WORK/can_perf: opens cpu-clock on every process of CPU 0, prints
# the error and exits 1 when refused.
build_can_perf() {
  cat >"$WORK/can_perf.c" <<'C'
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.size = sizeof(a);
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_CPU_CLOCK;
  a.sample_freq = 10;
  a.freq = 1;
  a.disabled = 1;
  long fd = syscall(SYS_perf_event_open, &a, -1, 0, -1, 0);
  if (fd < 0) {
    printf("%s\n", strerror(errno));
    return 1;
  }
  close((int)fd);
  return 0;
}
C
  "$CC" -o "$WORK/can_perf" "$WORK/can_perf.c" || die "cannot build the probe"
}

# Skips unless this process may sample every CPU; $1 (optional) ends the
# reason, after the uid.
skip_unless_can_perf() {
  build_can_perf
  if ! why=$("$WORK/can_perf"); then
    say "SKIPPED: perf_event_open(cpu-clock, all processes) refused: $why" \
        "(perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo '?'), uid $(id -u)${1:-})"
    exit 77
  fi
}

# Writes the two-thread workload source to $1: main -> func_a -> func_b ->
# spin, and a second thread in worker_spin, which makes system calls. It
# runs until the file named by its one argument exists.
write_workload() {
  cat >"$1" <<'C'
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile uint64_t sink;
static const char *stop; /* runs until this file exists */
__attribute__((noinline)) void spin(void) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 10000000; i++) sink += (uint64_t)i;
}
__attribute__((noinline)) void func_b(void) { spin(); sink++; }
__attribute__((noinline)) void func_a(void) { func_b(); sink++; }
__attribute__((noinline)) void worker_spin(void) {
  while (access(stop, F_OK) != 0)
    for (int i = 0; i < 1000; i++) sink += (uint64_t)syscall(SYS_getppid);
}
static void *worker(void *x) { (void)x; worker_spin(); return NULL; }
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  stop = argv[1];
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  func_a();
  pthread_join(t, NULL);
  return 0;
}
C
}

# The workload (write_workload) built with frame pointers as
# ${1:-$WORK}/perfwork, its source in $WORK/work.c; WORK_PROG names it.
build_workload() {
  write_workload "$WORK/work.c"
  WORK_PROG=${1:-$WORK}/perfwork
  "$CC" -O1 -fno-omit-frame-pointer -pthread -o "$WORK_PROG" "$WORK/work.c" ||
    die "cannot build the workload"
}

# Starts tracegated on producer socket $1 and consumer socket $2, its output
# into $3, and waits until both listen; $4 names it in the failure.
start_tracegated() {
  "$BUILD_DIR/service/tracegated" --producer-socket "$1" --consumer-socket "$2" \
    >"$3" 2>&1 &
  PIDS="$PIDS $!"
  i=0
  until [ -S "$2" ] && [ -S "$1" ]; do
    i=$((i + 1)); [ $i -lt 200 ] || die "$4 did not listen"; sleep 0.05
  done
}

# Waits until the service on consumer socket $1 lists data source or
# producer $2; else dies with $3 (and the contents of log $4, if given).
wait_registered() {
  i=0
  until "$TGCLI" query --json --socket "$1" | grep -q "\"name\": \"$2\""; do
    i=$((i + 1))
    [ $i -lt 200 ] || die "$3${4:+: $(cat "$4")}"
    sleep 0.05
  done
}

# Starts tracegate-perf as the other user (tests/support/other_user.sh) with
# only capabilities $1 (setpriv syntax, e.g. +sys_ptrace,+syslog), as its
# systemd unit runs it, from a copy in OTHER_DIR (made here if the test
# has none yet); its output into $2, its arguments after. Sets NOBODY_PID.
start_perf_as_unit() {
  caps=$1
  log=$2
  shift 2
  [ -n "$OTHER_DIR" ] || other_user_dir "$PERF_TEST" || die "no directory for the other user"
  [ -x "$OTHER_DIR/tracegate-perf" ] ||
    other_user_copy "$BUILD_DIR/agent/perf/tracegate-perf" >/dev/null ||
    die "cannot copy tracegate-perf for the other user"
  other_user_start "$caps" "$log" "$OTHER_DIR/tracegate-perf" "$@" ||
    die "cannot start tracegate-perf as the other user"
  NOBODY_PID=$OTHER_PID
  PIDS="$NOBODY_PID $PIDS"
}

# tracegated on $WORK/p.sock (P) and $WORK/c.sock (C), its output in
# $WORK/tracegated.log, and tracegate-perf (PERF_PID, output in
# $WORK/perf.log), once linux.perf is registered.
start_local() {
  P=$WORK/p.sock
  C=$WORK/c.sock
  start_tracegated "$P" "$C" "$WORK/tracegated.log" tracegated
  "$BUILD_DIR/agent/perf/tracegate-perf" --socket "$P" >"$WORK/perf.log" 2>&1 &
  PERF_PID=$!
  PIDS="$PERF_PID $PIDS"
  wait_registered "$C" linux.perf "linux.perf was not registered"
}

# Writes $WORK/$1.pbtxt: a session of $2 ms (default 1500) of linux.perf
# whose perf_event_config holds the lines read from stdin.
perf_cfg() {
  {
    # A flush answered late on a loaded machine is no finding of these
    # tests; one never answered still fails them (traced_flushes_failed).
    printf 'buffers { size_kb: 16384 }\nduration_ms: %s\nflush_timeout_ms: 30000\n' "${2:-1500}"
    printf 'data_sources {\n'
    printf '  config {\n    name: "linux.perf"\n    perf_event_config {\n'
    cat
    printf '    }\n  }\n}\n'
  } >"$WORK/$1.pbtxt"
}

# Builds the workload (write_workload, frame pointers) as $1/perfwork
# (WORK_PROG) and starts tracegated on P=$1/p.sock and C=$1/c.sock, its
# output in $WORK/tracegated.log.
workload_and_service() {
  build_workload "$1"
  P=$1/p.sock
  C=$1/c.sock
  start_tracegated "$P" "$C" "$WORK/tracegated.log" tracegated
}

# Writes $WORK/$1.pbtxt: perf_cfg of $2 ms sampling the workload
# ($WORK_PROG) on cpu-clock at 200 Hz, kernel frames and user frames by
# frame pointer, its ring read every 50 ms. The workload by its whole
# path: the other profiler tests run a perfwork of their own, which may
# exit (its maps unread: a sample skipped, perf_samples_skipped) in the
# middle of this one's recording.
workload_cfg() {
  perf_cfg "$1" "$2" <<CFG
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK_PROG" }
        kernel_frames: true
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
CFG
}

# Skips unless PERFETTO_BIN is set ($1: what is then not checked); sets TP.
need_tp() {
  if [ -z "${PERFETTO_BIN:-}" ]; then
    say "SKIPPED: PERFETTO_BIN not set: $1"
    exit 77
  fi
  TP=$PERFETTO_BIN/trace_processor_shell
}

# The rows of trace_processor's answer to $1 on trace $2 (default $TRACE),
# without the header (and without the empty line an INCLUDE statement
# answers).
q() {
  printf '%s\n' "$1" >"$WORK/q.sql"
  "$TP" -q "$WORK/q.sql" "${2:-$TRACE}" 2>"$WORK/tp.err" | sed '/^$/d' |
    tail -n +2 | tr -d '"' || die "trace_processor on ${2:-$TRACE}: $(cat "$WORK/tp.err")"
}

# The stats of trace $1 (default $TRACE) that say an import error, data
# loss, a perf or stack profile problem or a tokenizer skip, as name=value.
bad_stats() {
  q "select name || '=' || value from stats where value > 0 and
     (severity in ('error', 'data_loss') or name like 'stackprofile%'
      or name like 'perf_%' or name like 'tokenizer%')" "${1:-$TRACE}"
}

# How many nodes spin <- func_b <- func_a <- main the flame graph of $TRACE
# holds; $1 (optional) adds a condition on them (s, b, a, m).
chain_count() {
  q "INCLUDE PERFETTO MODULE linux.perf.samples;
  select count(*) from linux_perf_samples_summary_tree s
    join linux_perf_samples_summary_tree b on s.parent_id = b.id
    join linux_perf_samples_summary_tree a on b.parent_id = a.id
    join linux_perf_samples_summary_tree m on a.parent_id = m.id
  where s.name = 'spin' and b.name = 'func_b' and a.name = 'func_a'
    and m.name = 'main' ${1:-}"
}
