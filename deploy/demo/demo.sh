#!/bin/sh
# make demo: a fleet trace in one command, on loopback.
#
# Two "hosts", each a tracegated with tracegate-probes, a tracegate-emit and
# a tracegate-relay on a port of its own, recorded for a few seconds through
# mutual TLS by one `tracegate record` into one merged trace. The hosts
# also talk: a tracegate-emit on host2 calls one on host1 (--rpc-client,
# --rpc-server), so the trace holds requests from one host to the other,
# each an rpc.call slice on host2 and an rpc.serve slice on host1 sharing a
# flow id derived from the request's traceparent (docs/agent.md). Each host's
# probes also record kernel scheduling (linux.ftrace, demo.pbtxt), which
# needs root: otherwise probes.log says why and the trace has no kernel
# events. Everything it starts, it stops: at the end, on error and on Ctrl-C.
#
# usage: deploy/demo/demo.sh BUILD_DIR [OUT]   (OUT default: demo.pftrace)
set -eu

BUILD=${1:?usage: demo.sh BUILD_DIR [OUT]}
OUT=${2:-demo.pftrace}
SECONDS_TO_RECORD=${DEMO_SECONDS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)

TRACEGATED=$BUILD/service/tracegated
PROBES=$BUILD/agent/probes/tracegate-probes
EMIT=$BUILD/agent/emit/tracegate-emit
RELAY=$BUILD/relay/tracegate-relay
CLI=$BUILD/cli/tracegate
for b in "$TRACEGATED" "$PROBES" "$EMIT" "$RELAY" "$CLI"; do
  [ -x "$b" ] || { echo "demo: $b is missing (build first)" >&2; exit 1; }
done

DEMO=demo
WORK_PREFIX=tracegate-demo
# shellcheck source=deploy/demo/lib.sh
. "$HERE/lib.sh"

step "throw-away certificates in $WORK/certs"
make_certs demo-operator

PORTS=""
for h in 1 2; do
  H=$WORK/host$h
  mkdir -p "$H"
  step "host$h: tracegated, tracegate-probes, tracegate-emit, tracegate-relay"
  start_service "$H" "host$h"
  "$PROBES" --socket "$H/producer" --name "host$h-probes" --log-level warn \
    2>"$H/probes.log" &
  PIDS="$PIDS $!"
  "$EMIT" --socket "$H/producer" --name "host$h-app" --track-events \
    --threads 2 --rate 2000 --log-level warn 2>"$H/emit.log" &
  PIDS="$PIDS $!"
  start_rpc "$H" "host$h" "$h"
  start_relay "$H" "host$h"
  PORTS="$PORTS $RELAY_PORT"
done

HOSTS=""
for p in $PORTS; do HOSTS="$HOSTS -H localhost:$p"; done

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: not root: the hosts record no kernel scheduling (linux.ftrace)" >&2
fi
step "recording ${SECONDS_TO_RECORD}s from both hosts through TLS into $OUT"
# shellcheck disable=SC2086
"$CLI" record $HOSTS --cert "$CERTS/demo-operator.pem" \
  --key "$CERTS/demo-operator.key" --ca "$CERTS/ca.pem" \
  --txt -c "$HERE/demo.pbtxt" -t "${SECONDS_TO_RECORD}s" --merge -o "$OUT"

step "done"
size=$(wc -c <"$OUT")
cat <<EOF
$OUT: $size bytes, one timeline with a track group per host.
Open it: go to https://ui.perfetto.dev, click "Open trace file" and pick
$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT"), or query it with
trace_processor_shell $OUT.
EOF
