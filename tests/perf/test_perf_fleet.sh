#!/bin/sh
# test_perf_fleet: linux.perf across a fleet of two hosts on loopback (each
# a tracegated, a tracegate-relay over TLS and a tracegate-perf), recorded
# with `tracegate record -H A -H B --merge` and kept in a collector's rings
# (linux.perf at 19 Hz, incremental state cleared every second) taken as a
# snapshot. trace_processor (PERFETTO_BIN) must find each host's samples on
# its own machine, no perf or stack profile error stat, and each host's
# flame graph in the merged trace must be the one a single-host recording
# of that host gives: the same functions of its workload, the same top
# functions in the same order.
#
# The two hosts share this machine's CPUs and processes, so each host's
# tracegate-perf and its workload run in a PID namespace of their own
# (unshare --pid --mount-proc): the one config `record -H` sends to both
# hosts (target_cmdline "$WORK/perfwork-*") then scopes each host to its own
# workload, as on two machines, and the samples of every other process
# reach that tracegate-perf as pid 0, out of scope.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# where PID namespaces cannot be made, without a C compiler, and where
# PERFETTO_BIN is unset (after the recordings, which must still succeed).
#
# Environment (set by tests/perf/CMakeLists.txt): BUILD_DIR SRC_DIR WORK CC
set -eu

PERF_TEST=test_perf_fleet
. "$(dirname "$0")/perf_lib.sh"
# Every log's tail with the failure: the hosts' logs are many.
die() {
  say "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  say "files kept in $WORK"; cleanup; exit 1
}

need_cc
fresh_work
TG=$TGCLI

# --- may this process sample every CPU, in a PID namespace? ------------------
build_can_perf
if ! why=$(unshare --pid --fork --mount-proc "$WORK/can_perf" 2>&1); then
  say "SKIPPED: perf_event_open(cpu-clock, all processes) in a PID namespace refused: $why (uid $(id -u))"
  exit 77
fi

# --- the workloads: one source, a binary of its own per host ---------------
write_workload "$WORK/work.c"
"$CC" -O1 -fno-omit-frame-pointer -pthread -o "$WORK/perfwork-a" "$WORK/work.c" ||
  die "cannot build the workload"
cp "$WORK/perfwork-a" "$WORK/perfwork-b"

# --- certificates -------------------------------------------------------------
(cd "$WORK" && sh "$SRC_DIR/deploy/certs/tg-certs" ca pki >/dev/null &&
  sh "$SRC_DIR/deploy/certs/tg-certs" host pki relay.test --ip 127.0.0.1 >/dev/null &&
  sh "$SRC_DIR/deploy/certs/tg-certs" client pki alice --role record >/dev/null) ||
  die "tg-certs failed"
TLS="--tls-server-name relay.test --cert $WORK/pki/alice.pem --key $WORK/pki/alice.key --ca $WORK/pki/ca.pem"

# Waits until file $1 holds a line "ready N ..." and prints N.
ready_port() {
  i=0
  until grep -q '^ready ' "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 600 ] || die "no ready line in $1"; sleep 0.05
  done
  sed -n 's/^ready \([0-9]*\).*/\1/p' "$1" | head -n 1
}

# --- the hosts ------------------------------------------------------------------
# Host $1: tracegated, a relay, and in a PID namespace of their own its
# tracegate-perf and workload perfwork-$1. Sets PORT_$1.
host_start() {
  h=$1
  start_tracegated "$WORK/$h.p.sock" "$WORK/$h.c.sock" "$WORK/$h.tracegated.log" \
    "tracegated $h"
  "$BUILD_DIR/relay/tracegate-relay" --listen 127.0.0.1:0 \
    --consumer-socket "$WORK/$h.c.sock" --cert "$WORK/pki/relay.test.pem" \
    --key "$WORK/pki/relay.test.key" --ca "$WORK/pki/ca.pem" \
    --authz "$WORK/pki/authz" --ready-fd 3 3>"$WORK/$h.relay.ready" \
    2>"$WORK/$h.relay.log" &
  PIDS="$PIDS $!"
  eval "PORT_$h=$(ready_port "$WORK/$h.relay.ready")"
  # The namespace's init is a shell (not tracegate-perf: LeakSanitizer's
  # tracer hangs in a process that is a PID namespace's init) that stops
  # tracegate-perf on SIGTERM; the workload ends with the stop file.
  unshare --pid --fork --mount-proc --kill-child sh -c \
    "\"$WORK/perfwork-$h\" \"$WORK/stop\" &
     \"$BUILD_DIR/agent/perf/tracegate-perf\" --socket \"$WORK/$h.p.sock\" --name perf-$h &
     p=\$!; trap 'kill \$p; wait \$p; exit \$?' TERM; wait \$p" \
    >"$WORK/$h.perf.log" 2>&1 &
  eval "NS_$h=$!"
  wait_registered "$WORK/$h.c.sock" linux.perf "linux.perf was not registered on $h"
}
host_start a
host_start b
A=127.0.0.1:$PORT_a
B=127.0.0.1:$PORT_b

cat >"$WORK/perf.pbtxt" <<CFG
buffers { size_kb: 16384 }
duration_ms: 3000
incremental_state_config { clear_period_ms: 300 }
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 200 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/perfwork-*" }
        kernel_frames: true
        user_frames: UNWIND_FRAME_POINTER
      }
      ring_buffer_read_period_ms: 50
    }
  }
}
CFG

# --- single-host recordings, then the fleet's -----------------------------------
for h in a b; do
  "$TG" record --socket "$WORK/$h.c.sock" -c "$WORK/perf.pbtxt" --txt \
    -o "$WORK/single-$h.pftrace" 2>"$WORK/single-$h.record.log" ||
    die "tracegate record on $h"
done
# shellcheck disable=SC2086 # $TLS is the words of the TLS options
"$TG" record -H "$A" -H "$B" $TLS --merge -c "$WORK/perf.pbtxt" --txt \
  -o "$WORK/fleet.pftrace" --summary-json "$WORK/fleet.json" \
  2>"$WORK/fleet.record.log" || die "tracegate record -H a -H b --merge"

[ -z "${PERFETTO_BIN:-}" ] || TP=$PERFETTO_BIN/trace_processor_shell
# Whether the rings in trace $1 wrapped (tracegated wrote more than the
# buffer holds) and each host's samples span more than one
# incremental-state clear (1 s), so that the samples after a clear decode,
# not only the first ones. Prints the spans.
wrapped() {
  wrap=$(q "select count(*) from stats w join stats z on z.idx = w.idx
            where w.name = 'traced_buf_bytes_written'
              and z.name = 'traced_buf_buffer_size' and w.value > z.value" "$1")
  spans=$(q "select m.raw_id || ':' || ((max(s.ts) - min(s.ts)) / 1000000) from perf_sample s
             join thread t using(utid) join machine m on m.id = t.machine_id
             group by m.raw_id order by m.raw_id" "$1" | tr '\n' ' ')
  echo "wrapped $wrap, spans (machine:ms) $spans"
  [ "${wrap:-0}" -gt 0 ] && [ "$(echo "$spans" | grep -oE '[12]:[0-9]{4,}' | wc -l)" -eq 2 ]
}

# --- the collector: linux.perf at 19 Hz in its rings ------------------------------
printf '%s name=relay.test label=a\n%s name=relay.test label=b\n' "$A" "$B" >"$WORK/hosts.txt"
# A small ring (16 KiB) that wraps within the wait below at 19 Hz on two
# threads; the collector adds incremental_state_config (ring_clear_period,
# 1 s) so that what is left after a wrap still decodes.
cat >"$WORK/flight.pbtxt" <<CFG
buffers { size_kb: 16 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 19 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/perfwork-*" }
        kernel_frames: true
        user_frames: UNWIND_FRAME_POINTER
      }
    }
  }
}
CFG
cat >"$WORK/collector.conf" <<CONF
hosts = hosts.txt
ca = pki/ca.pem
cert = pki/alice.pem
key = pki/alice.key
tls_server_name = relay.test
trace_config = flight.pbtxt
store = store
listen = 127.0.0.1:0
session_key = perf-fleet
coalesce_window = 0s
max_snapshots_per_minute = 100
operator_snapshots_per_minute = 100
CONF
"$BUILD_DIR/collector/daemon/tracegate-collector" --config "$WORK/collector.conf" \
  --ready-fd 3 3>"$WORK/collector.ready" >"$WORK/collector.log" 2>&1 &
COLL_PID=$!
PIDS="$COLL_PID $PIDS"
CPORT=$(ready_port "$WORK/collector.ready")
API=http://127.0.0.1:$CPORT/api/v1
i=0
until [ "$(curl -sf "$API/hosts" | grep -o '"state": *"tracing"' | wc -l)" -eq 2 ]; do
  i=$((i + 1)); [ $i -lt 600 ] || die "the collector's hosts do not trace: $(curl -s "$API/hosts")"
  sleep 0.05
done
# Snapshots until the rings wrapped (every 3 s, at most 20): how long
# that takes depends on how much CPU the workloads get. Without
# trace_processor, one snapshot after 8 s.
n=0
while :; do
  n=$((n + 1))
  if [ -n "${PERFETTO_BIN:-}" ]; then sleep 3; else sleep 8; fi
  curl -sf -X POST "$API/snapshots?reason=perf&wait=1" -o "$WORK/snap.json" ||
    die "the snapshot request failed"
  SNAP_ID=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$WORK/snap.json" | head -n 1)
  [ -n "$SNAP_ID" ] || die "no snapshot id in $(cat "$WORK/snap.json")"
  grep -q '"state": *"complete"' "$WORK/snap.json" ||
    die "the snapshot is not complete: $(cat "$WORK/snap.json")"
  curl -sf "$API/snapshots/$SNAP_ID/trace" -o "$WORK/snap.pftrace" ||
    die "cannot fetch the snapshot's trace"
  [ -n "${PERFETTO_BIN:-}" ] || break
  if got=$(wrapped "$WORK/snap.pftrace"); then say "snapshot $n: $got"; break; fi
  say "snapshot $n: $got"
  [ $n -lt 20 ] || die "the rings did not wrap, or the samples span less than 1 s"
done
stop_clean "$COLL_PID" "the collector"
# Each host's tracegate-perf, through its namespace's init, must stop
# cleanly (status 0).
touch "$WORK/stop"
for h in a b; do
  eval "ns=\$NS_$h"
  init=$(pgrep -P "$ns") || die "no init in $h's namespace"
  kill "$init"
  wait "$ns" || die "tracegate-perf of $h exited with $?: $(cat "$WORK/$h.perf.log")"
done
cleanup

need_tp "the traces were recorded but not checked by trace_processor"
# No import error, data loss, perf or stack profile stat, no tokenizer skip.
clean() {
  bad=$(bad_stats "$1")
  [ -z "$bad" ] || die "trace_processor stats of $1: $bad"
}
# The flame graph of the samples of machine $2 (raw_id; NULL: a single
# host's trace) in trace $1, in the frames of workload perfwork-$3: per
# function, the samples whose stack holds it, most first (ties by name), as
# "name count" lines. A machine holding the other host's samples has none.
flame() {
  if [ "$2" = NULL ]; then m="t.machine_id is null"; else
    m="t.machine_id = (select id from machine where raw_id = $2)"; fi
  q "with recursive anc(sid, cs) as (
       select s.id, s.callsite_id from perf_sample s join thread t using(utid)
       where $m and s.callsite_id is not null
       union all
       select anc.sid, c.parent_id from anc join stack_profile_callsite c
         on c.id = anc.cs where c.parent_id is not null)
     select f.name || ' ' || count(distinct anc.sid) from anc
       join stack_profile_callsite c on c.id = anc.cs
       join stack_profile_frame f on f.id = c.frame_id
       join stack_profile_mapping mp on mp.id = f.mapping
     where f.name is not null and mp.name like '%/perfwork-$3'
     group by f.name order by count(distinct anc.sid) desc, f.name" "$1"
}
# The workload's functions: the main thread's chain and the worker's.
TOP="func_a func_b main spin worker"
# $1: flame() output. Prints the names of its first five functions, sorted.
top() { echo "$1" | head -n 5 | cut -d' ' -f1 | sort | tr '\n' ' ' | sed 's/ $//'; }
# Prints the functions of flame() output $1 that hold at least 4% as many
# samples as its first and are missing from flame() output $2: a function
# one recording sampled often, the other never. (A lone sample in a PLT
# stub, named after the symbol before it, is noise on either side.)
missing() {
  echo "$1" | awk 'NR == 1 { max = $2 } $2 * 25 >= max { print $1 }' |
    while read -r f; do echo "$2" | grep -q "^$f " || printf '%s ' "$f"; done
}

for t in single-a single-b fleet snap; do clean "$WORK/$t.pftrace"; done
# Each host's samples on its own machine: machine 0 holds none.
for t in fleet snap; do
  rows=$(q "select coalesce(m.raw_id, -1) || ' ' || count(*) from perf_sample s
            join thread t using(utid) left join machine m on m.id = t.machine_id
            group by m.raw_id order by m.raw_id" "$WORK/$t.pftrace")
  say "$t: samples per machine (raw_id count): $(echo "$rows" | tr '\n' ',')"
  [ "$(echo "$rows" | grep -c '^[12] [1-9]')" -eq 2 ] ||
    die "$t: samples not on both hosts' machines: $rows"
  ! echo "$rows" | grep -q '^-1 ' || die "$t: samples on the trace's own machine: $rows"
done

# Each host's flame graph in the merged trace is its single-host one.
for h in a b; do
  case $h in a) raw=1 o=b ;; b) raw=2 o=a ;; esac
  for t in fleet snap; do
    [ -z "$(flame "$WORK/$t.pftrace" $raw $o)" ] ||
      die "$t: machine $raw (host $h) holds frames of host $o's workload"
  done
  one=$(flame "$WORK/single-$h.pftrace" NULL $h)
  merged=$(flame "$WORK/fleet.pftrace" $raw $h)
  ring=$(flame "$WORK/snap.pftrace" $raw $h)
  say "host $h alone: $(echo "$one" | tr '\n' ',')"
  say "host $h merged: $(echo "$merged" | tr '\n' ',')"
  say "host $h ring: $(echo "$ring" | tr '\n' ',')"
  # The same top functions, within sampling noise: the two threads are
  # both busy, so main (with its chain, as many samples each) and worker
  # may come in either order, but they are the first five in both; no
  # function sampled often in one is missing from the other. (worker_spin
  # is not required: the worker is mostly sampled inside its system
  # calls, where frame pointers skip it, so it holds about 3% of the
  # worker's samples, and a loaded machine's 50 samples miss it one time
  # in five.)
  [ "$(top "$one")" = "$TOP" ] || die "host $h alone: top functions $(top "$one")"
  [ "$(top "$merged")" = "$TOP" ] || die "host $h merged: top functions $(top "$merged")"
  m=$(missing "$one" "$merged")
  [ -z "$m" ] || die "host $h: $m sampled alone, not merged"
  m=$(missing "$merged" "$one")
  [ -z "$m" ] || die "host $h: $m sampled merged, not alone"
  # The ring: at 19 Hz fewer samples, the main thread's chain complete.
  for f in main func_a func_b spin; do
    echo "$ring" | grep -q "^$f " || die "host $h ring: no $f"
  done
done
say "ok"
