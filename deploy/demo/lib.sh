# Shared by demo.sh and collector-demo.sh (sourced, not run): the work
# directory, the children started (PIDS) and stopped at the end, on error
# and on Ctrl-C, the waits, the certificates and the hosts' service and
# relay, and the requests between the hosts. The sourcing script sets
# DEMO (its name, for messages), WORK_PREFIX, TOP, TRACEGATED, RELAY and
# EMIT before sourcing.

WORK=$(mktemp -d "/tmp/${WORK_PREFIX}.XXXXXX")
PIDS=""
cleanup() {
  status=$?
  trap - EXIT INT TERM
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'echo; echo "$DEMO: interrupted, stopping everything"; exit 130' INT TERM

step() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Waits (bounded) until FILE holds a line starting with "ready".
wait_ready() {
  i=0
  while ! grep -q '^ready' "$1" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then
      echo "$DEMO: $2 did not come up; its log:" >&2
      cat "$3" >&2 || true
      exit 1
    fi
    sleep 0.1
  done
}

# A CA, the relays' certificate (localhost, 127.0.0.1) and a client
# certificate CLIENT with the record role, in $WORK/certs ($CERTS).
make_certs() {
  CERTS=$WORK/certs
  "$TOP/deploy/certs/tg-certs" ca "$CERTS" >/dev/null
  "$TOP/deploy/certs/tg-certs" host "$CERTS" localhost --ip 127.0.0.1 >/dev/null
  "$TOP/deploy/certs/tg-certs" client "$CERTS" "$1" --role record >/dev/null
}

# Host DIR's tracegated (NAME for messages), back once it is ready.
start_service() {
  "$TRACEGATED" --producer-socket "$1/producer" --consumer-socket "$1/consumer" \
    --log-level warn --ready-fd 3 3>"$1/service.ready" 2>"$1/service.log" &
  PIDS="$PIDS $!"
  wait_ready "$1/service.ready" "$2 tracegated" "$1/service.log"
}

# Host DIR's tracegate-relay on a free loopback port, back once it is
# ready; its port in RELAY_PORT.
start_relay() {
  "$RELAY" --listen 127.0.0.1:0 --consumer-socket "$1/consumer" \
    --cert "$CERTS/localhost.pem" --key "$CERTS/localhost.key" \
    --ca "$CERTS/ca.pem" --authz "$CERTS/authz" --log-level warn \
    --audit-log "$1/audit.log" --ready-fd 3 3>"$1/relay.ready" \
    2>"$1/relay.log" &
  PIDS="$PIDS $!"
  wait_ready "$1/relay.ready" "$2 relay" "$1/relay.log"
  RELAY_PORT=$(sed -n 's/^ready \([0-9]*\).*/\1/p' "$1/relay.ready")
  echo "    relay of $2 listening on localhost:$RELAY_PORT (mutual TLS)"
}

# Requests between the hosts: on host 1 (N=1) a tracegate-emit answering
# on a free loopback port (RPC_PORT), on host 2 one calling it 200 times
# a second. Host DIR, NAME for messages.
start_rpc() {
  case $3 in
  1)
    "$EMIT" --socket "$1/producer" --name "$2-rpc-server" --rpc-server 0 \
      --log-level warn --ready-fd 3 3>"$1/rpc.ready" 2>"$1/rpc.log" &
    PIDS="$PIDS $!"
    wait_ready "$1/rpc.ready" "$2 rpc server" "$1/rpc.log"
    RPC_PORT=$(sed -n 's/^ready \([0-9]*\).*/\1/p' "$1/rpc.ready")
    echo "    $2 answers requests on 127.0.0.1:$RPC_PORT (tracegate-emit --rpc-server)"
    ;;
  2)
    "$EMIT" --socket "$1/producer" --name "$2-rpc-client" \
      --rpc-client "127.0.0.1:$RPC_PORT" --rate 200 --log-level warn \
      2>"$1/rpc.log" &
    PIDS="$PIDS $!"
    echo "    $2 calls host1 200 times a second (tracegate-emit --rpc-client)"
    ;;
  esac
}
