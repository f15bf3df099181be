#!/bin/sh
# Installs the Debian packages tracegate needs to build and test, and only
# those that are missing. Used by `make` targets; safe to run repeatedly.
# `deps.sh bench` adds the peer tools the benchmarks measure against
# (stunnel4, ssh): without them their rows are skipped. `deps.sh
# conformance` adds the runtime of Perfetto's prebuilt tools
# (tests/conformance). `deps.sh deb` adds Debian's packaging tools
# (`make deb`).
set -eu

PKGS="cmake ninja-build pkg-config gcc make python3
libuv1-dev libprotobuf-c-dev protobuf-c-compiler libmbedtls-dev libcmocka-dev
libpcre2-dev libjansson-dev groff-base
zlib1g-dev libzstd-dev libssl-dev libsqlite3-dev libpq-dev postgresql libdw-dev
libwebsockets-dev libwebsockets-evlib-uv
clang libclang-rt-14-dev openssl
chromium chromium-driver libnss3-tools prometheus-alertmanager"
[ "${1:-}" = bench ] && PKGS="$PKGS stunnel4 openssh-client openssh-server"
[ "${1:-}" = deb ] && PKGS="$PKGS debhelper lintian dpkg-dev fakeroot"
[ "${1:-}" = conformance ] && PKGS="$PKGS libprotobuf32 zlib1g util-linux"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "deps: need root (or sudo) to install:$missing" >&2
    exit 1
  }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
