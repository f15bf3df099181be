#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_collector_boost: a collector whose rings keep linux.perf at 19 Hz
# and whose perf boost (perf_boost_window = 2s) samples faster on a
# trigger, over two hosts on loopback (each a tracegated and a
# tracegate-relay over TLS):
#   a: tracegate-perf as root, and a busy two-thread workload;
#   b: tracegate-perf as nobody without CAP_PERFMON, which refuses every
#      linux.perf session (as test_perf_not_started);
#   c: no tracegate-perf at all.
# An operator's snapshot must be stored with both hosts' clones; host a's
# row says its boost is sharp, with more samples in its window than the
# ring's rate could give in the same time on every CPU; host b's says its
# boost failed, not started (TG-5090), host c's that it failed, not
# offered, and their clones are there all the same. A second snapshot taken during the first one's window starts no
# second boost: its host a row says which snapshot holds it. With
# PERFETTO_BIN, trace_processor imports the snapshot with no stack profile,
# perf or tokenizer error, finds every sample on host a's machine, and the
# samples a second in the boost's window are several times those of the
# ring before the trigger.
#
# Skipped (exit 77), with the reason, where perf_event_open is refused,
# when it cannot run a program as another user (host b's capabilities
# cannot be dropped; tests/support/other_user.sh), when perf_event_paranoid is -1 (host b would sample), without a
# C compiler, and where PERFETTO_BIN is unset (after the collector's
# checks, which must pass).
#
# Environment (set by tests/collector/CMakeLists.txt): BUILD_DIR SRC_DIR
# WORK CC
set -eu

PERF_TEST=test_collector_boost
. "$SRC_DIR/tests/perf/perf_lib.sh"
die() {
  say "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  say "files kept in $WORK"; cleanup; exit 1
}

need_cc
fresh_work
other_user_or_skip "$PERF_TEST"
[ "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)" != -1 ] || {
  say "SKIPPED: perf_event_paranoid is -1: host b's tracegate-perf would sample"; exit 77; }
skip_unless_can_perf

write_workload "$WORK/work.c"
"$CC" -O1 -fno-omit-frame-pointer -pthread -o "$WORK/perfwork" "$WORK/work.c" ||
  die "cannot build the workload"

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

# The other user must reach host b's producer socket and its
# tracegate-perf: both in OTHER_DIR (cleanup removes it).
other_user_dir boost || die "no directory for the other user"
SOCKS=$OTHER_DIR

# Host $1's tracegated on $2 (the directory of its sockets) and its relay.
# Sets PORT_$1.
host_start() {
  start_tracegated "$2/$1.p.sock" "$2/$1.c.sock" "$WORK/$1.tracegated.log" \
    "tracegated $1"
  "$BUILD_DIR/relay/tracegate-relay" --listen 127.0.0.1:0 \
    --consumer-socket "$2/$1.c.sock" --cert "$WORK/pki/relay.test.pem" \
    --key "$WORK/pki/relay.test.key" --ca "$WORK/pki/ca.pem" \
    --authz "$WORK/pki/authz" --ready-fd 3 3>"$WORK/$1.relay.ready" \
    2>"$WORK/$1.relay.log" &
  PIDS="$PIDS $!"
  eval "PORT_$1=$(ready_port "$WORK/$1.relay.ready")"
}
host_start a "$WORK"
"$WORK/perfwork" "$WORK/stop" &
PIDS="$PIDS $!"
"$BUILD_DIR/agent/perf/tracegate-perf" --socket "$WORK/a.p.sock" --name perf-a \
  >"$WORK/a.perf.log" 2>&1 &
PIDS="$PIDS $!"
wait_registered "$WORK/a.c.sock" linux.perf "linux.perf was not registered on a"
host_start b "$SOCKS"
# As deploy/systemd/tracegate-perf.service.in, less CAP_PERFMON.
start_perf_as_unit +sys_ptrace,+syslog "$WORK/b.perf.log" \
  --socket "$SOCKS/b.p.sock" --name perf-b
wait_registered "$SOCKS/b.c.sock" linux.perf "linux.perf was not registered on b" \
  "$WORK/b.perf.log"
host_start c "$WORK"
A=127.0.0.1:$PORT_a
B=127.0.0.1:$PORT_b
C=127.0.0.1:$PORT_c

printf '%s name=relay.test label=%s\n' "$A" a "$B" b "$C" c >"$WORK/hosts.txt"
# A ring that holds the whole run at 19 Hz (it does not wrap).
cat >"$WORK/flight.pbtxt" <<CFG
buffers { size_kb: 4096 fill_policy: RING_BUFFER }
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 19 counter: SW_CPU_CLOCK }
      callstack_sampling {
        scope { target_cmdline: "$WORK/perfwork" }
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
session_key = boost
coalesce_window = 0s
max_snapshots_per_minute = 100
operator_snapshots_per_minute = 100
perf_boost_window = 2s
perf_boost_frequency = 499
CONF
"$BUILD_DIR/collector/daemon/tracegate-collector" --config "$WORK/collector.conf" \
  --ready-fd 3 3>"$WORK/collector.ready" >"$WORK/collector.log" 2>&1 &
COLL_PID=$!
PIDS="$COLL_PID $PIDS"
CPORT=$(ready_port "$WORK/collector.ready")
API=http://127.0.0.1:$CPORT/api/v1
i=0
until [ "$(curl -sf "$API/hosts" | grep -o '"state": *"tracing"' | wc -l)" -eq 3 ]; do
  i=$((i + 1)); [ $i -lt 600 ] || die "the collector's hosts do not trace: $(curl -s "$API/hosts")"
  sleep 0.05
done
# The rings' samples before the trigger: a few seconds of them.
sleep 4
# The first snapshot, then at once a second one, during the first's
# window; the second waits until stored, then the first is read.
curl -sf -X POST "$API/snapshots?reason=boost" -o "$WORK/first.json" ||
  die "the first snapshot request failed"
curl -sf -X POST "$API/snapshots?reason=again&wait=1" -o "$WORK/second.json" ||
  die "the second snapshot request failed"
FIRST=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$WORK/first.json" | head -n 1)
SECOND=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$WORK/second.json" | head -n 1)
[ -n "$FIRST" ] && [ -n "$SECOND" ] && [ "$FIRST" != "$SECOND" ] ||
  die "two snapshot ids expected: $(cat "$WORK/first.json" "$WORK/second.json")"
i=0
until curl -sf "$API/snapshots/$FIRST" -o "$WORK/first.row.json" &&
    ! grep -q '"state": *"pending"' "$WORK/first.row.json"; do
  i=$((i + 1)); [ $i -lt 600 ] || die "snapshot $FIRST not stored: $(cat "$WORK/first.row.json")"
  sleep 0.05
done
curl -sf "$API/snapshots/$SECOND" -o "$WORK/second.row.json" ||
  die "cannot read snapshot $SECOND"
curl -sf "$API/snapshots/$FIRST/trace" -o "$WORK/snap.pftrace" ||
  die "cannot fetch the snapshot's trace"
curl -sf "http://127.0.0.1:$CPORT/metrics" -o "$WORK/metrics.txt" ||
  die "cannot read the metrics"
# Six hosts' boosts over the two snapshots: a's sharp, the rest failed
# (b and c in the first) or held (the second's, c's perhaps failed again
# when its first boost had already ended).
boosts() {
  sed -n "s/^tracegate_collector_perf_boosts_total{state=\"$1\"} \([0-9]*\)$/\1/p" \
    "$WORK/metrics.txt"
}
[ "$(boosts sharp)" = 1 ] && [ $(($(boosts failed) + $(boosts held))) = 5 ] ||
  die "perf boosts in the metrics: $(grep perf_boosts "$WORK/metrics.txt")"
# The budget's defaults: none refused; the three hosts may use 5% of an
# hour each together (540 s), and host a's 2 s window is in what they used.
metric() {
  sed -n "s/^tracegate_collector_$1 \([0-9.]*\)$/\1/p" "$WORK/metrics.txt"
}
[ "$(boosts budget)" = 0 ] &&
  [ "$(metric perf_boost_budget_limit_seconds)" = 540.000 ] &&
  [ "$(metric perf_boost_hosts_over_budget)" = 0 ] &&
  awk -v u="$(metric perf_boost_budget_used_seconds)" 'BEGIN { exit !(u >= 2) }' ||
  die "the perf boost budget in the metrics: $(grep perf_boost "$WORK/metrics.txt")"
stop_clean "$COLL_PID" "the collector" "$WORK/collector.log"

NCPU=$(nproc)
# Host a's boost: the samples a second its window held against what 19 Hz
# on every CPU could give in the same time (printed: "samples span_ms").
python3 - "$WORK/first.row.json" "$WORK/second.row.json" "$FIRST" "$NCPU" \
  >"$WORK/boost.txt" <<'PY' || die "snapshot rows: $(cat "$WORK/first.row.json" "$WORK/second.row.json")"
import json, sys
first = json.load(open(sys.argv[1]))
second = json.load(open(sys.argv[2]))
first_id, ncpu = sys.argv[3], int(sys.argv[4])
assert first["snapshot"]["state"] in ("complete", "partial"), first["snapshot"]
rows = {h["name"]: h for h in first["hosts"]}
a, b = rows["a"], rows["b"]
# Host a: its clone and a sharp window after the trigger.
assert a["outcome"] == "ok" and a["packets"] > 0, a
ba = a["boost"]
assert ba["state"] == "sharp", ba
assert ba["frequency_hz"] == 499 and ba["window_ms"] == 2000, ba
assert ba["samples"] > 0 and ba["first_ms"] > 0, ba
assert ba["first_ms"] >= a["window_last_ms"] - 1000, (ba, a["window_last_ms"])
span = ba["last_ms"] - ba["first_ms"]
assert 0 < span <= 2000 + 1000, ba
# More samples than 19 Hz on every CPU could give over the time they
# span (the window, less the producer's start).
assert ba["samples"] > 19 * ncpu * span / 1000, (ba["samples"], ncpu, span)
# Host b: the clone stored, the boost failed and why.
assert b["packets"] > 0 and b["outcome"] in ("ok", "partial"), b
bb = b["boost"]
assert bb["state"] == "failed", bb
assert bb["reason"] == "not_started" and bb["code"] == "TG-5090", bb
assert "linux.perf" in bb["error"], bb
assert bb["samples"] == 0, bb
# Host c: no producer offers linux.perf; its clone stored all the same.
c = rows["c"]
assert c["packets"] > 0 and c["outcome"] in ("ok", "partial"), c
bc = c["boost"]
assert bc["state"] == "failed", bc
assert bc["reason"] == "not_offered" and bc["code"] == "TG-5090", bc
assert "linux.perf" in bc["error"], bc
# The second snapshot, taken during the first's window: no second boost.
rows2 = {h["name"]: h for h in second["hosts"]}
a2 = rows2["a"]
assert a2["outcome"] == "ok" and a2["packets"] > 0, a2
assert a2["boost"]["state"] == "held", a2["boost"]
assert a2["boost"]["held_by"] == first_id, (a2["boost"], first_id)
print(ba["samples"], span)
PY
say "host a's boost: $(cat "$WORK/boost.txt") (samples, window ms) on $NCPU CPUs"
grep -q 'TG-8002.*CAP_PERFMON' "$WORK/b.perf.log" ||
  die "no TG-8002 naming CAP_PERFMON in host b's producer log"
cleanup

need_tp "the snapshot was taken and its rows checked, but not imported by trace_processor"
TRACE=$WORK/snap.pftrace
bad=$(bad_stats)
[ -z "$bad" ] || die "trace_processor stats of the snapshot: $bad"
# Every sample on host a's machine (raw_id 1).
rows=$(q "select coalesce(m.raw_id, -1) || ' ' || count(*) from perf_sample s
          join thread t using(utid) left join machine m on m.id = t.machine_id
          group by m.raw_id order by m.raw_id")
say "samples per machine (raw_id count): $(echo "$rows" | tr '\n' ',')"
[ "$(echo "$rows" | wc -l)" -eq 1 ] && echo "$rows" | grep -q '^1 [1-9]' ||
  die "samples not on host a's machine alone: $rows"
set -- $(cat "$WORK/boost.txt")
BOOST_SAMPLES=$1
BOOST_MS=$2
# The ring's samples (all before the boost's first: the first ones by
# time) and their span, against the boost's: samples a second, the ring's
# at 19 Hz and the boost's at 499 Hz on the same busy workload (26 times;
# asked: more than 4 times).
TOTAL=$(q "select count(*) as n from perf_sample")
RING=$((TOTAL - BOOST_SAMPLES))
[ "$RING" -gt 1 ] || die "the ring holds $RING samples of $TOTAL"
RING_NS=$(q "select max(ts) - min(ts) as d from
             (select ts from perf_sample order by ts limit $RING)")
python3 - "$BOOST_SAMPLES" "$BOOST_MS" "$RING" "$RING_NS" <<'PY' ||
import sys
boost, boost_ms, ring, ring_ns = (int(x) for x in sys.argv[1:5])
assert ring_ns > 0, ring_ns
ring_rate = (ring - 1) / (ring_ns / 1e9)
boost_rate = boost / (boost_ms / 1e3)
print(f"ring {ring} samples over {ring_ns / 1e9:.2f} s: {ring_rate:.1f}/s; "
      f"boost {boost} over {boost_ms / 1e3:.2f} s: {boost_rate:.1f}/s")
assert boost_rate > 4 * ring_rate, (boost_rate, ring_rate)
PY
  die "the boost's rate is not several times the ring's"
# The boost's samples unwound as the ring's: the workload's chain.
[ "$(chain_count)" -gt 0 ] || die "no spin <- func_b <- func_a <- main in the flame graph"
say "ok"
