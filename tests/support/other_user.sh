# SPDX-License-Identifier: Apache-2.0
# other_user.sh: the one way a shell test runs a program as another user,
# sourced (POSIX sh). Its C twin is tg_test_other_user_* in test_proc.h;
# both keep one rule:
#
#   The checkout and its build tree may lie below a directory only root can
#   enter (a clone in /root or in a `mktemp -d`). So nothing the other
#   user must reach (its program, sockets, work files) is ever there: it
#   goes into OTHER_DIR, a directory made under /tmp for the test (root's,
#   mode 0755), and programs are copied into it. other_user_start refuses a
#   program outside OTHER_DIR, so a test cannot slip back into the tree.
#   A test that cannot become another user here exits 77 (skipped) with the
#   reason; it never passes without trying.
#
# The other user is uid and gid 65534 (nobody), as in the C tests.
# Call other_user_cleanup from the test's cleanup: it removes OTHER_DIR.

OTHER_UID=65534
OTHER_DIR=""

# Prints why this process cannot run a program as the other user and
# returns 0; returns 1 (printing nothing) when it can.
other_user_unavailable() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root (uid $(id -u))"
    return 0
  fi
  if ! command -v setpriv >/dev/null 2>&1; then
    echo "no setpriv (util-linux)"
    return 0
  fi
  if ! setpriv --reuid=$OTHER_UID --regid=$OTHER_UID --clear-groups true \
      2>/dev/null; then
    echo "setpriv could not become uid $OTHER_UID"
    return 0
  fi
  return 1
}

# Exits 77 with "$1: SKIPPED: cannot run as another user: <why>" unless
# the other user is available.
other_user_or_skip() {
  if why=$(other_user_unavailable); then
    echo "$1: SKIPPED: cannot run as another user: $why"
    exit 77
  fi
}

# Makes OTHER_DIR (a fresh /tmp/tg-<$1>.XXXXXX, mode 0755, root's): what
# the other user may reach. Returns non-zero when it cannot be made.
other_user_dir() {
  OTHER_DIR=$(mktemp -d "/tmp/tg-$1.XXXXXX") || return 1
  chmod 0755 "$OTHER_DIR"
}

# Copies program $1 into OTHER_DIR (mode 0755) and prints the copy's path.
other_user_copy() {
  [ -n "$OTHER_DIR" ] || { echo "other_user_copy: no OTHER_DIR" >&2; return 1; }
  cp "$1" "$OTHER_DIR/" || return 1
  chmod 0755 "$OTHER_DIR/${1##*/}" || return 1
  echo "$OTHER_DIR/${1##*/}"
}

# Starts program $3 (a copy in OTHER_DIR) as the other user, with only the
# capabilities $1 (setpriv's syntax, e.g. +perfmon,+sys_ptrace), as a
# systemd unit with AmbientCapabilities= runs it; its output into $2, the
# arguments after $3. Sets OTHER_PID. Returns 2 for a program outside
# OTHER_DIR.
other_user_start() {
  ou_caps=$1
  ou_log=$2
  shift 2
  case "$1" in
    "$OTHER_DIR"/*) ;;
    *) echo "other_user_start: $1 is not in OTHER_DIR ($OTHER_DIR)" >&2
       return 2 ;;
  esac
  setpriv --reuid=$OTHER_UID --regid=$OTHER_UID --clear-groups --no-new-privs \
    --inh-caps="-all,$ou_caps" --ambient-caps="-all,$ou_caps" \
    --bounding-set="-all,$ou_caps" "$@" >"$ou_log" 2>&1 &
  OTHER_PID=$!
}

# Runs command $@ as the other user, without capabilities, and returns its
# status (for checks such as "may the other user read this file?").
other_user_run() {
  setpriv --reuid=$OTHER_UID --regid=$OTHER_UID --clear-groups "$@"
}

other_user_cleanup() {
  [ -z "$OTHER_DIR" ] || rm -rf "$OTHER_DIR"
  OTHER_DIR=""
}
