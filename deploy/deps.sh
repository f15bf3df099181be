#!/bin/sh
# Installs the Debian packages a `make` target needs, and only those that
# are missing. Safe to run repeatedly.
#   deps.sh build        what building and running the programs need, no
#                        test's package: `make demo` and `make
#                        collector-demo`
#   deps.sh              what building and `make test` need: the build's
#                        libraries and tools, what the programs run with,
#                        and the tests' own (cmocka, PostgreSQL, clang for
#                        the fuzzers, Chromium for the web page's tests,
#                        Alertmanager, Ceph's monitor, OSD and S3 gateway
#                        for the bucket store's tests, dwz for the
#                        symbolizer's alt-file tests), OpenTelemetry's Go
#                        SDK (golang-opentelemetry-otel-dev, for
#                        test_otlp_go and test_collector_otlp) and its
#                        JavaScript SDK from the npm registry for
#                        test_otlp_js (into $OTLP_JS_DIR)
#   deps.sh bench        the same, and the peer tools the benchmarks measure
#                        against (stunnel4, ssh): without them their rows are
#                        skipped
#   deps.sh conformance  the same, and the runtime of Perfetto's prebuilt
#                        tools (tests/conformance)
#   deps.sh deb          Debian's packaging tools (build-essential, which
#                        Build-Depends leaves implicit, included) and
#                        debian/control's Build-Depends (apt-get build-dep,
#                        with the nocheck profile when DEB_BUILD_OPTIONS has
#                        nocheck): what `make deb` needs, none of the tests'
#                        packages
set -eu

# The build's compilers, tools and libraries.
BUILD="cmake ninja-build pkg-config gcc make python3
libuv1-dev libprotobuf-c-dev protobuf-c-compiler libmbedtls-dev
libpcre2-dev libjansson-dev zlib1g-dev libzstd-dev libssl-dev libsqlite3-dev
libpq-dev libwebsockets-dev libdw-dev libcurl4-openssl-dev libexpat1-dev
libmicrohttpd-dev"
# What the programs run with: tg-certs runs openssl; the collector and
# `tracegate bridge` load libwebsockets' libuv event loop.
RUNTIME="openssl libwebsockets-evlib-uv"
# make test's alone.
TEST="libcmocka-dev groff-base postgresql clang libclang-rt-14-dev
chromium chromium-driver libnss3-tools prometheus-alertmanager curl jq
ceph-mon ceph-osd radosgw linux-perf dwz golang-go nodejs
golang-opentelemetry-otel-dev"

mode="${1:-}"
case "$mode" in
  "") PKGS="$BUILD $RUNTIME $TEST" ;;
  build) PKGS="$BUILD $RUNTIME" ;;
  bench) PKGS="$BUILD $RUNTIME $TEST stunnel4 openssh-client openssh-server" ;;
  conformance) PKGS="$BUILD $RUNTIME $TEST libprotobuf32 zlib1g util-linux" ;;
  deb) PKGS="build-essential debhelper lintian dpkg-dev fakeroot" ;;
  *) echo "deps: unknown set: $mode (none, build, bench, conformance or deb)" >&2
     exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
updated=""
apt_update() {
  [ -n "$updated" ] && return 0
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "deps: need root (or sudo) to install: $1" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  updated=1
}
export DEBIAN_FRONTEND=noninteractive

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  echo "deps: installing:$missing"
  apt_update "$missing"
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# `make deb`: debian/control is the one list of what the package build
# needs; dpkg-buildpackage checks it again.
if [ "$mode" = deb ]; then
  profile=""
  case " ${DEB_BUILD_OPTIONS:-} " in *" nocheck "*) profile="-P nocheck" ;; esac
  # shellcheck disable=SC2086
  if ! dpkg-checkbuilddeps $profile debian/control >/dev/null 2>&1; then
    echo "deps: installing debian/control's Build-Depends${profile:+ ($profile)}"
    apt_update "debian/control's Build-Depends"
    # shellcheck disable=SC2086
    $SUDO apt-get build-dep -y -qq --no-install-recommends $profile ./
  fi
fi

# test_otlp_js: OpenTelemetry's JavaScript SDK and both OTLP/HTTP
# exporters, from the npm registry, into OTLP_JS_DIR (the test's default
# too). One release line whose packages agree on @opentelemetry/api.
# Debian's nodejs may come without npm (NodeSource's carries its own).
if [ "$mode" != deb ]; then
  OTLP_JS_DIR="${OTLP_JS_DIR:-/var/cache/tracegate/otlp-js}"
  if [ ! -f "$OTLP_JS_DIR/node_modules/@opentelemetry/exporter-trace-otlp-http/package.json" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      apt_update npm
      $SUDO apt-get install -y -qq --no-install-recommends npm
    fi
    echo "deps: installing OpenTelemetry's JavaScript SDK into $OTLP_JS_DIR"
    $SUDO mkdir -p "$OTLP_JS_DIR"
    $SUDO npm install --prefix "$OTLP_JS_DIR" --no-audit --no-fund \
      --loglevel=error @opentelemetry/api@1.9 \
      @opentelemetry/sdk-trace-node@2.2.0 @opentelemetry/sdk-trace-base@2.2.0 \
      @opentelemetry/resources@2.2.0 \
      @opentelemetry/exporter-trace-otlp-proto@0.208.0 \
      @opentelemetry/exporter-trace-otlp-http@0.208.0
  fi
fi
