# Shared by demo.sh and collector-demo.sh (sourced, not run): the work
# directory, the children started (PIDS) and stopped at the end, on error
# and on Ctrl-C, and the waits. The sourcing script sets DEMO (its name,
# for messages) and WORK_PREFIX before sourcing.

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
