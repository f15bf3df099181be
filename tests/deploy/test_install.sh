#!/bin/sh
# deploy_install_outside_app: `cmake --install` the build tree into a
# scratch DESTDIR, then build tests/deploy/outside_app.c the way an outside
# user would (only the installed headers and library, found through
# pkg-config, then through find_package(tracegate-agent)) and run both
# builds: they start the agent against a socket where nothing listens,
# write events no session enables, shut down, and exit 0.
#
# Environment (set by tests/deploy/CMakeLists.txt):
#   BUILD_DIR SRC_DIR WORK CMAKE CC GENERATOR PREFIX LIBDIR UNITDIR EXTRA_CFLAGS
set -eu

say() { echo "deploy_install_outside_app: $*"; }
die() { say "FAILED: $*"; say "scratch files kept in $WORK"; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK"
ROOT=$WORK/root
case $LIBDIR in
  /*) LIBDIR_FULL=$LIBDIR ;;
  *) LIBDIR_FULL=$PREFIX/$LIBDIR ;;
esac
# The units' directory may be absolute (the Debian build: /lib/systemd/system).
case $UNITDIR in
  /*) UNITDIR_FULL=$UNITDIR ;;
  *) UNITDIR_FULL=$PREFIX/$UNITDIR ;;
esac

# 1. Install. DESTDIR keeps everything under $ROOT.
DESTDIR=$ROOT "$CMAKE" --install "$BUILD_DIR" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; die "cmake --install"; }

for f in bin/tracegated bin/tracegate-relay bin/tracegate-probes \
  bin/tracegate-otlp share/man/man1/tracegate-otlp.1 \
  bin/tracegate-emit bin/tracegate bin/tg-certs \
  include/tracegate/agent.h include/tracegate/track_event.h \
  include/tracegate/export.h include/tracegate/error.h \
  include/tracegate/log_level.h \
  include/tracegate/pb_writer.h include/tracegate/pb_wire.h \
  lib/sysusers.d/tracegate.conf lib/sysusers.d/tracegate-relay.conf \
  lib/sysusers.d/tracegate-collector.conf \
  lib/tmpfiles.d/tracegate-relay.conf lib/tmpfiles.d/tracegate-collector.conf \
  share/man/man1/tracegate.1 share/man/man1/tracegated.1 \
  share/man/man1/tracegate-relay.1 share/man/man1/tracegate-probes.1 \
  share/man/man1/tracegate-collector.1 share/man/man1/tracegate-emit.1 \
  share/man/man1/tg-certs.1; do
  [ -e "$ROOT$PREFIX/$f" ] || die "not installed: $PREFIX/$f"
done
for f in libtracegate-agent.so libtracegate-agent.so.1 \
  pkgconfig/tracegate-agent.pc \
  cmake/tracegate-agent/tracegate-agentConfig.cmake \
  cmake/tracegate-agent/tracegate-agentConfigVersion.cmake; do
  [ -e "$ROOT$LIBDIR_FULL/$f" ] || die "not installed: $LIBDIR_FULL/$f"
done
for u in tracegated tracegate-relay tracegate-probes tracegate-otlp \
  tracegate-collector; do
  [ -e "$ROOT$UNITDIR_FULL/$u.service" ] || die "not installed: $UNITDIR_FULL/$u.service"
done
# The units start what was installed, from where it was installed.
grep -q "^ExecStart=$PREFIX/bin/tracegated " \
  "$ROOT$UNITDIR_FULL/tracegated.service" ||
  die "tracegated.service does not start $PREFIX/bin/tracegated"
say "installed into DESTDIR=$ROOT (prefix $PREFIX)"

# The library exports exactly the functions its installed headers mark
# TG_EXPORT: internal helpers (logging, buffers) stay out of the ABI.
# gold (the development trees' linker, TG_LINKER) adds the section edges
# it defines itself (__bss_start, _edata, _end) to every shared object's
# symbols; they are the linker's, in no header, and not counted.
command -v nm >/dev/null 2>&1 || die "nm (binutils) is needed to check exports"
nm -D --defined-only "$ROOT$LIBDIR_FULL/libtracegate-agent.so" |
  awk '$2 ~ /^[TDBR]$/ && $3 !~ /^(__bss_start|_edata|_end)$/ {print $3}' |
  sort >"$WORK/exports.got"
cat "$ROOT$PREFIX"/include/tracegate/*.h | tr '\n' ' ' |
  grep -oE 'TG_EXPORT [a-zA-Z_0-9 *]+\(' | grep -oE 'tg[a-z_0-9]*\($' | tr -d '(' |
  sort -u >"$WORK/exports.want"
diff -u "$WORK/exports.want" "$WORK/exports.got" >"$WORK/exports.diff" ||
  { cat "$WORK/exports.diff"; die "libtracegate-agent.so exports differ from its headers"; }
say "exports: $(wc -l <"$WORK/exports.got") symbols, all declared TG_EXPORT"

run_app() { # NAME BINARY
  # The library must come from the DESTDIR, not from anywhere else.
  LD_LIBRARY_PATH=$ROOT$LIBDIR_FULL ldd "$2" >"$WORK/$1.ldd" 2>&1 || true
  grep "libtracegate-agent.so.1 => $ROOT$LIBDIR_FULL/" "$WORK/$1.ldd" \
    >/dev/null || { cat "$WORK/$1.ldd"; die "$1 does not load the installed library"; }
  # A socket path under a directory that does not exist: nothing listens.
  # Under /tmp, not $WORK: a deep build directory (a package build's)
  # would make it longer than a UNIX socket path may be.
  if ! LD_LIBRARY_PATH=$ROOT$LIBDIR_FULL timeout 30 "$2" \
      "$(mktemp -u /tmp/tg-no-such-dir.XXXXXX)/producer.sock" >"$WORK/$1.out" 2>&1; then
    cat "$WORK/$1.out"
    die "$1 did not exit 0"
  fi
  cat "$WORK/$1.out"
}

# 2. pkg-config, with the search path limited to the DESTDIR's .pc files and
# the sysroot prefixed to the -I and -L paths.
PC_LIBDIR=$ROOT$LIBDIR_FULL/pkgconfig
pc() {
  PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$PC_LIBDIR PKG_CONFIG_SYSROOT_DIR=$ROOT \
    pkg-config "$@"
}
pc --exists tracegate-agent || die "pkg-config does not find tracegate-agent"
PC_FLAGS=$(pc --cflags --libs tracegate-agent)
say "pkg-config --cflags --libs tracegate-agent: $PC_FLAGS"
case " $PC_FLAGS " in
  *" -I$ROOT$PREFIX/include "*) ;;
  *) die "pkg-config Cflags lack -I$ROOT$PREFIX/include" ;;
esac
case " $PC_FLAGS " in
  *"/include/tracegate "*) die "pkg-config puts include/tracegate on the path" ;;
esac
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$CC" -std=c11 -Wall -Wextra -Werror $EXTRA_CFLAGS \
  "$SRC_DIR/tests/deploy/outside_app.c" $PC_FLAGS -o "$WORK/outside_app_pc" \
  >"$WORK/cc.log" 2>&1 || { cat "$WORK/cc.log"; die "build with pkg-config"; }
run_app outside_app_pc "$WORK/outside_app_pc"

# 3. CMake: find_package(tracegate-agent) from the DESTDIR prefix only.
if ! "$CMAKE" -S "$SRC_DIR/tests/deploy/outside_cmake" -B "$WORK/cmake" \
    -G "$GENERATOR" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $EXTRA_CFLAGS" \
    -DCMAKE_PREFIX_PATH="$ROOT$PREFIX" \
    -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DOUTSIDE_APP_SOURCE="$SRC_DIR/tests/deploy/outside_app.c" \
    >"$WORK/cmake.log" 2>&1 ||
  ! "$CMAKE" --build "$WORK/cmake" >>"$WORK/cmake.log" 2>&1; then
  cat "$WORK/cmake.log"
  die "build with find_package(tracegate-agent)"
fi
grep "^tracegate-agent_DIR:PATH=$ROOT" "$WORK/cmake/CMakeCache.txt" >/dev/null ||
  die "find_package found a tracegate-agent outside the DESTDIR"
run_app outside_app_cmake "$WORK/cmake/outside_app_cmake"

rm -rf "$WORK"
say "ok"
