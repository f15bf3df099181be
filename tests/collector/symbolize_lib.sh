# SPDX-License-Identifier: Apache-2.0
# symbolize_lib.sh: what test_collector_symbolize.sh and
# test_collector_symbolize_s3.sh share, sourced (POSIX sh) after `set -eu`,
# PERF_TEST, tests/perf/perf_lib.sh and a die() of the test's own: the
# stripped workload (main -> func_a -> func_b -> spin, its debug file in
# DBG/.build-id/), two hosts on loopback (each a tracegated, a
# tracegate-relay over TLS and a tracegate-perf) sampling it in the
# collector's rings (HOST_a, HOST_b, hosts.txt, flight.pbtxt), and the
# helpers below. Skips (exit 77) like the tests. SYM_WORKLOAD names the
# workload's program (its cmdline, which the rings sample): one of each
# test's own, so that tests run at once do not sample each other's.

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
/* About a third of a core: a million additions (a millisecond or two),
 * then 3 ms asleep. The rings sample it at 100 Hz of its own CPU time,
 * so every snapshot still holds hundreds of its stacks, and the other
 * tests running beside this one (for two minutes) keep the rest. */
static __attribute__((noinline)) void spin(void) {
  while (access(stop, F_OK) != 0) {
    for (int i = 0; i < 1000000; i++) sink += (uint64_t)i;
    usleep(3000);
  }
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
"$CC" -g -O1 -fno-omit-frame-pointer -Wl,--build-id -o "$WORK/$SYM_WORKLOAD" \
  "$WORK/work.c" || die "cannot build the workload"
BID=$(readelf -n "$WORK/$SYM_WORKLOAD" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$BID" ] || die "the workload has no build id"
DBG=$WORK/dbg
mkdir -p "$DBG/.build-id/$(echo "$BID" | cut -c1-2)"
objcopy --only-keep-debug "$WORK/$SYM_WORKLOAD" \
  "$DBG/.build-id/$(echo "$BID" | cut -c1-2)/$(echo "$BID" | cut -c3-).debug" ||
  die "objcopy --only-keep-debug"
strip --strip-all "$WORK/$SYM_WORKLOAD" || die "strip"

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
"$WORK/$SYM_WORKLOAD" "$WORK/stop" &
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
# build trees) may run a workload of the same name.
cat >"$WORK/flight.pbtxt" <<CFG
buffers { size_kb: 1024 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 100 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/$SYM_WORKLOAD" }
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
    }
  }
}
CFG

# --- one collector, one snapshot ------------------------------------------------
# Starts collector $1 (its store store-$1, its key, its log $1.log,
# appended to) with the config lines $2, and waits until both hosts trace;
# sets API and COLL_PID (left running).
collector_start() {
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
  rm -f "$WORK/$name.ready"
  "$BUILD_DIR/collector/daemon/tracegate-collector" --config "$WORK/$name.conf" \
    --ready-fd 3 3>"$WORK/$name.ready" >>"$WORK/$name.log" 2>&1 &
  COLL_PID=$!
  PIDS="$COLL_PID $PIDS"
  API=http://127.0.0.1:$(ready_port "$WORK/$name.ready")/api/v1
  i=0
  until [ "$(curl -sf "$API/hosts" | grep -o '"state": *"tracing"' | wc -l)" -eq 2 ]; do
    i=$((i + 1)); [ $i -lt 600 ] || die "$name: the hosts do not trace: $(curl -s "$API/hosts")"
    sleep 0.05
  done
}

# Collector $1 started by collector_start with the config lines $2: takes
# one snapshot once the ring holds samples, writes its answer to
# $WORK/$1.snap.json, sets SNAP_ID (the collector left running).
snapshot() {
  name=$1
  collector_start "$1" "$2"
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

# A debuginfod server that accepts connections and never answers, for a
# symbolization held until the collector dies: exports DEBUGINFOD_URLS
# (and a cache and timeout of the test's own).
silent_debuginfod() {
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True); time.sleep(3600)' >"$WORK/silent.port" &
  PIDS="$PIDS $!"
  i=0
  until [ -s "$WORK/silent.port" ]; do
    i=$((i + 1)); [ $i -lt 200 ] || die "the silent server did not start"; sleep 0.05
  done
  export DEBUGINFOD_URLS="http://127.0.0.1:$(cat "$WORK/silent.port")"
  export DEBUGINFOD_CACHE_PATH="$WORK/debuginfod-cache" DEBUGINFOD_TIMEOUT=600
}

# The API's symbols state of SNAP_ID.
symbols_state() {
  curl -sf "$API/snapshots/$SNAP_ID" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["symbols"]["state"])'
}

# Waits until SNAP_ID's symbolization runs, then kills collector COLL_PID
# with SIGKILL.
kill_while_running() {
  i=0
  until [ "$(symbols_state)" = running ]; do
    i=$((i + 1)); [ $i -lt 600 ] || die "the symbolization is $(symbols_state), not running"
    sleep 0.05
  done
  kill -KILL "$COLL_PID"
  wait "$COLL_PID" 2>/dev/null || true
  forget_pid "$COLL_PID"
}

# The stored file of snapshot SNAP_ID of collector $1.
stored() { echo "$WORK/store-$1/snapshots/$SNAP_ID.pftrace"; }


# The workload's frames in trace $1, and how many of them have a symbol
# with a source file and a line, or are one of its PLT stubs
# (`access@plt`, `usleep@plt`, which have no line: a sample there is
# luck). trace_processor applies a
# ModuleSymbols only to the mappings of its packet's machine (one of a
# machine the trace does not hold is a stackprofile_* stat, which
# bad_stats refuses).
named() {
  q "select count(distinct f.id) || ' ' || count(distinct case when (s.source_file
       like '%work.c' and s.line_number > 0) or s.name like '%@plt'
       then f.id end) as n
     from stack_profile_frame f
     join stack_profile_mapping mp on mp.id = f.mapping
     left join stack_profile_symbol s on s.symbol_set_id = f.symbol_set_id
     where mp.name like '%/$SYM_WORKLOAD'" "$1"
}
# Samples of trace $1 on machine raw_id $2, and on any other.
machines() {
  q "select sum(m.raw_id = $2) || ' ' || sum(coalesce(m.raw_id, 0) != $2) as n
     from perf_sample p join thread t using(utid)
     left join machine m on m.id = t.machine_id" "$1"
}
