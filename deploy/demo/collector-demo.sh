#!/bin/sh
# make collector-demo: centralized trace collection in one command, on
# loopback.
#
# Two "hosts", each a tracegated with a tracegate-emit app and a
# tracegate-relay on a port of its own, and one tracegate-collector keeping
# a flight-recorder ring on both. host2 also calls host1 (tracegate-emit
# --rpc-client and --rpc-server): the snapshot holds those requests as
# rpc.call and rpc.serve slices. An app on host1 fires the trigger
# "demo-incident" (`tracegate trigger`, as tg_agent_activate_triggers
# would); the collector snapshots both hosts at that moment into one merged
# trace, stores it and lists it. The web page's URL is printed while the
# collector is up, and the demo keeps everything up until Enter when its
# input is a terminal (DEMO_HOLD=1 asks for that anywhere, DEMO_HOLD=0
# never); otherwise it says how to keep it up before stopping. Everything
# it starts, it stops: at the end, on error and on Ctrl-C.
#
# usage: deploy/demo/collector-demo.sh BUILD_DIR
set -eu

BUILD=${1:?usage: collector-demo.sh BUILD_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)

TRACEGATED=$BUILD/service/tracegated
EMIT=$BUILD/agent/emit/tracegate-emit
RELAY=$BUILD/relay/tracegate-relay
CLI=$BUILD/cli/tracegate
COLLECTOR=$BUILD/collector/daemon/tracegate-collector
for b in "$TRACEGATED" "$EMIT" "$RELAY" "$CLI" "$COLLECTOR"; do
  [ -x "$b" ] || { echo "collector-demo: $b is missing (build first)" >&2; exit 1; }
done

DEMO=collector-demo
WORK_PREFIX=tracegate-collector-demo
# shellcheck source=deploy/demo/lib.sh
. "$HERE/lib.sh"

# GET (or POST) on the collector's API into a file; python3's urllib, as
# the tests use, so the demo needs no curl.
api() {
  python3 - "$@" <<'PY'
import sys, urllib.request
method, url, out = sys.argv[1], sys.argv[2], sys.argv[3]
with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=60) as r:
    open(out, "wb").write(r.read())
PY
}

# The value at a dotted path of a JSON file ("snapshots.0.id").
json_get() {
  python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)
PY
}

step "throw-away certificates in $WORK/certs"
make_certs demo-collector

: >"$WORK/hosts"
for h in 1 2; do
  H=$WORK/host$h
  mkdir -p "$H"
  step "host$h: tracegated, an app (tracegate-emit), tracegate-relay"
  start_service "$H" "host$h"
  "$EMIT" --socket "$H/producer" --name "host$h-app" --track-events \
    --threads 2 --rate 500 --log-level warn 2>"$H/emit.log" &
  PIDS="$PIDS $!"
  start_rpc "$H" "host$h" "$h"
  start_relay "$H" "host$h"
  echo "localhost:$RELAY_PORT" >>"$WORK/hosts"
done

step "tracegate-collector: a ring on each host, trigger 'demo-incident'"
cat >"$WORK/flight.pbtxt" <<'PBTXT'
buffers { size_kb: 4096 fill_policy: RING_BUFFER }
data_sources { config { name: "track_event" } }
PBTXT
cat >"$WORK/collector.conf" <<CONF
hosts = hosts
ca = certs/ca.pem
cert = certs/demo-collector.pem
key = certs/demo-collector.key
trace_config = flight.pbtxt
store = store
listen = 127.0.0.1:0
trigger = demo-incident
CONF
"$COLLECTOR" --config "$WORK/collector.conf" --log-level warn --ready-fd 3 \
  3>"$WORK/collector.ready" 2>"$WORK/collector.log" &
PIDS="$PIDS $!"
wait_ready "$WORK/collector.ready" "tracegate-collector" "$WORK/collector.log"
cport=$(sed -n 's/^ready \([0-9]*\).*/\1/p' "$WORK/collector.ready")
URL="http://127.0.0.1:$cport"
i=0
while :; do
  api GET "$URL/api/v1/hosts" "$WORK/hosts.json"
  tracing=$(python3 -c 'import json,sys; print(sum(h["state"] == "tracing" for h in json.load(open(sys.argv[1]))["hosts"]))' "$WORK/hosts.json")
  [ "$tracing" = 2 ] && break
  i=$((i + 1))
  if [ "$i" -gt 100 ]; then
    echo "collector-demo: the rings did not start; the collector's log:" >&2
    cat "$WORK/collector.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "    both rings are tracing; the apps fill them for 2 s"
sleep 2

step "an app on host1 fires 'demo-incident'"
"$CLI" trigger --socket "$WORK/host1/producer" demo-incident
i=0
while :; do
  api GET "$URL/api/v1/snapshots?trigger=demo-incident" "$WORK/list.json"
  state=$(json_get "$WORK/list.json" snapshots.0.state 2>/dev/null || echo none)
  case $state in complete|partial|failed) break ;; esac
  i=$((i + 1))
  if [ "$i" -gt 300 ]; then
    echo "collector-demo: no snapshot came; the collector's log:" >&2
    cat "$WORK/collector.log" >&2
    exit 1
  fi
  sleep 0.1
done
id=$(json_get "$WORK/list.json" snapshots.0.id)
hosts=$(json_get "$WORK/list.json" snapshots.0.hosts)
failed=$(json_get "$WORK/list.json" snapshots.0.hosts_failed)
bytes=$(json_get "$WORK/list.json" snapshots.0.bytes)
api GET "$URL/api/v1/snapshots/$id/trace" "demo-fleet-snapshot.pftrace"

step "done"
cat <<EOF
snapshot $id: $state, $((hosts - failed)) of $hosts hosts, $bytes bytes,
trigger demo-incident from host1; saved as demo-fleet-snapshot.pftrace.
The collector's web page: $URL/
(the snapshots, the hosts, a download link and "Open in Perfetto UI").
EOF
# From a terminal the page must stay up for the link above to work.
hold=${DEMO_HOLD:-}
if [ -z "$hold" ]; then
  if [ -t 0 ]; then hold=1; else hold=0; fi
fi
if [ "$hold" = 1 ]; then
  printf 'The collector is up. Press Enter to stop everything. '
  # End of input (no terminal: a pipe, setsid, CI) stops it too, not as
  # a failure of the demo.
  read -r _ || echo
else
  echo "Stopping now (input is not a terminal): run it from a terminal, or"
  echo "with DEMO_HOLD=1, to keep the page up until Enter."
fi
[ "$state" = complete ]
