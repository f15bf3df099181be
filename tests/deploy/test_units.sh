#!/bin/sh
# deploy_systemd_verify: `systemd-analyze verify` and an offline
# `systemd-analyze security` check on the installed systemd units (the
# templates X@.service as instance lab1: verify wants an instance), and the
# sysusers.d/tmpfiles.d snippets applied to a scratch root.
#
# Skipped (exit 77) where systemd-analyze is missing. It needs no running
# systemd (so it works in a container), but verify checks that every
# ExecStart= binary exists and is executable: the units are installed into a
# scratch DESTDIR and copied with their ExecStart= paths pointed into it.
# verify reports most problems (unknown keys, bad values) as warnings with
# exit status 0, so any line it prints about our units fails the test.
#
# Environment (set by tests/deploy/CMakeLists.txt):
#   BUILD_DIR WORK CMAKE PREFIX UNITDIR MAX_EXPOSURE
set -eu

say() { echo "deploy_systemd_verify: $*"; }
die() { say "FAILED: $*"; say "scratch files kept in $WORK"; exit 1; }

if ! command -v systemd-analyze >/dev/null 2>&1; then
  say "SKIPPED: systemd-analyze not found (install systemd to run this check)"
  exit 77
fi

rm -rf "$WORK"
mkdir -p "$WORK/units"
ROOT=$WORK/root
DESTDIR=$ROOT "$CMAKE" --install "$BUILD_DIR" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; die "cmake --install"; }
case $UNITDIR in
  /*) SRC_UNITS=$ROOT$UNITDIR ;;
  *) SRC_UNITS=$ROOT$PREFIX/$UNITDIR ;;
esac

UNITS=""
for name in tracegated tracegate-relay tracegate-probes tracegate-otlp \
            tracegate-collector tracegate-perf; do
  # tracegate-perf has no template: one profiler per machine.
  srcs="$name.service"
  [ "$name" = tracegate-perf ] || srcs="$srcs $name@.service"
  for src in $srcs; do
    [ -f "$SRC_UNITS/$src" ] || die "$src not installed in $SRC_UNITS"
    u=$(echo "$src" | sed 's/@\.service$/@lab1.service/')
    UNITS="$UNITS $u"
    # Only the program paths of the install move into the DESTDIR.
    sed "s|^\(Exec[A-Za-z]*=[-@:+!]*\)$PREFIX/|\1$ROOT$PREFIX/|" \
      "$SRC_UNITS/$src" >"$WORK/units/$u"
  done
done

cd "$WORK/units"
status=0
systemd-analyze verify --man=no $UNITS >"$WORK/verify.log" 2>&1 || status=$?
if [ "$status" != 0 ] || grep -q 'tracegate' "$WORK/verify.log"; then
  cat "$WORK/verify.log"
  die "systemd-analyze verify (exit $status)"
fi
if [ -s "$WORK/verify.log" ]; then
  say "verify printed (not about our units):"
  cat "$WORK/verify.log"
fi
say "systemd-analyze verify: $UNITS: clean"

# The hardening must not regress: offline exposure score (0-100 here, 10x
# the "x.y" systemd prints) at most MAX_EXPOSURE.
for u in $UNITS; do
  if ! systemd-analyze security --offline=true --man=no \
      --threshold="$MAX_EXPOSURE" "$WORK/units/$u" >"$WORK/$u.security" 2>&1; then
    grep -E '^(✗|→)' "$WORK/$u.security" || cat "$WORK/$u.security"
    die "$u: exposure above $MAX_EXPOSURE (see the ✗ lines)"
  fi
  say "$(grep 'Overall exposure' "$WORK/$u.security" | sed 's/^→ *//')"
done

# The sysusers and tmpfiles snippets, applied to a scratch root: the users
# exist afterwards, /etc/tracegate-relay and the relay's key get their modes.
# Needs root (tmpfiles changes owners); skipped otherwise.
if [ "$(id -u)" != 0 ] || ! command -v systemd-sysusers >/dev/null 2>&1 ||
  ! command -v systemd-tmpfiles >/dev/null 2>&1; then
  say "sysusers/tmpfiles check skipped (needs root and both tools)"
else
  SYSROOT=$WORK/sysroot
  mkdir -p "$SYSROOT/etc"
  systemd-sysusers --root="$SYSROOT" "$ROOT$PREFIX/lib/sysusers.d/tracegate.conf" \
    "$ROOT$PREFIX/lib/sysusers.d/tracegate-relay.conf" \
    "$ROOT$PREFIX/lib/sysusers.d/tracegate-collector.conf" >"$WORK/sysusers.log" 2>&1 ||
    { cat "$WORK/sysusers.log"; die "systemd-sysusers"; }
  for u in tracegate tracegate-relay tracegate-collector; do
    grep -q "^$u:" "$SYSROOT/etc/passwd" || die "sysusers did not create user $u"
  done
  relay_gid=$(awk -F: '$1 == "tracegate-relay" { print $3 }' "$SYSROOT/etc/group")
  mkdir -p "$SYSROOT/etc/tracegate-relay"
  : >"$SYSROOT/etc/tracegate-relay/relay.key"
  chmod 0644 "$SYSROOT/etc/tracegate-relay/relay.key"
  systemd-tmpfiles --root="$SYSROOT" --create \
    "$ROOT$PREFIX/lib/tmpfiles.d/tracegate-relay.conf" \
    "$ROOT$PREFIX/lib/tmpfiles.d/tracegate-collector.conf" >"$WORK/tmpfiles.log" 2>&1 ||
    { cat "$WORK/tmpfiles.log"; die "systemd-tmpfiles"; }
  if [ -s "$WORK/tmpfiles.log" ]; then
    cat "$WORK/tmpfiles.log"
    die "systemd-tmpfiles complained"
  fi
  got=$(stat -c '%a %u %g' "$SYSROOT/etc/tracegate-relay" "$SYSROOT/etc/tracegate-relay/relay.key" | tr '\n' ' ')
  [ "$got" = "750 0 $relay_gid 640 0 $relay_gid " ] ||
    die "/etc/tracegate-relay and relay.key: got '$got', want 750/640 root:tracegate-relay ($relay_gid)"
  coll_gid=$(awk -F: '$1 == "tracegate-collector" { print $3 }' "$SYSROOT/etc/group")
  got=$(stat -c '%a %u %g' "$SYSROOT/etc/tracegate-collector" | tr '\n' ' ')
  [ "$got" = "750 0 $coll_gid " ] ||
    die "/etc/tracegate-collector: got '$got', want 750 root:tracegate-collector ($coll_gid)"
  say "sysusers.d and tmpfiles.d: users created, /etc/tracegate-relay 0750 and relay.key 0640 root:tracegate-relay, /etc/tracegate-collector 0750 root:tracegate-collector"
fi

cd /
rm -rf "$WORK"
say "ok"
