#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `tracegate profile FILE --diff H` on profile_fleet.h's 20-host fleet:
# the JSON's first row (compress_block, its shares and samples), the usage
# errors (exit 2), and the two pprof profiles read by Go's own `go tool
# pprof -diff_base`, whose top function is compress_block at +3.5 s (35%
# of the host's 10 s). The pprof part is skipped (77) without go.
set -u
die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
: "${BUILD_DIR:?}" "${WORK:?}"
TG="$BUILD_DIR/cli/tracegate"
GEN="$BUILD_DIR/tests/profile/profile_fleet_gen"
rm -rf "$WORK" && mkdir -p "$WORK" || die "no $WORK"
T="$WORK/fleet.pftrace"
"$GEN" "$T" || die "profile_fleet_gen failed"

# --- the CLI's answers -------------------------------------------------------
"$TG" profile --help >"$WORK/help" || die "profile --help"
grep -q -- '--diff' "$WORK/help" || die "--help does not tell of --diff"
"$TG" profile "$T" --diff h99 >/dev/null 2>"$WORK/err"
[ $? -eq 2 ] || die "--diff of an unknown host: want exit 2"
grep -qF '[TG-1071]' "$WORK/err" || die "no TG-1071: $(cat "$WORK/err")"
"$TG" profile "$T" --diff all >/dev/null 2>&1
[ $? -eq 2 ] || die "--diff all: want exit 2"
"$TG" profile "$T" --base-pprof "$WORK/x" >/dev/null 2>&1
[ $? -eq 2 ] || die "--base-pprof without --diff: want exit 2"
"$TG" profile "$T" --diff h7 --json >"$WORK/d.json" 2>/dev/null ||
  die "--diff h7 --json"
python3 - "$WORK/d.json" <<'PY' || die "the diff's JSON"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["functions"][0]
assert f["name"] == "compress_block", f
assert abs(f["host_share"] - 0.40) < 1e-12, f
assert abs(f["peers_median_share"] - 0.05) < 1e-12, f
assert abs(f["diff"] - 0.35) < 1e-12, f
assert f["host_samples"] == 400 and f["peers_samples"] == 950, f
assert f["significant"] is True, f
assert d["host"]["name"] == "h7" and d["host"]["too_few_samples"] is False
assert d["peers"]["count"] == 19 and d["peers"]["samples"] == 19000
u = [x for x in d["functions"] if x["name"] == "[unknown]"][0]
assert u["file"] == "/usr/lib/libc.so.6" and u["host_samples"] == 30, u
n = [x for x in d["functions"] if x["name"] == "[no callstack]"][0]
assert n["pseudo"] is True and n["host_samples"] == 20, n
tree = d["tree"]
assert tree[0]["parent"] is None and abs(tree[0]["host_share"] - 1) < 1e-12
for i, x in enumerate(tree[1:], 1):
    assert 0 <= x["parent"] < i, x
PY
"$TG" profile "$T" --diff h7 >"$WORK/d.txt" 2>/dev/null || die "--diff h7"

command -v go >/dev/null 2>&1 || skip "no go (Debian's golang-go): pprof not checked"
export HOME="$WORK" PPROF_TMPDIR="$WORK" GOCACHE="$WORK/gocache"
"$TG" profile "$T" --diff h7 --pprof -o "$WORK/h7.pb.gz" \
  --base-pprof "$WORK/peers.pb.gz" 2>/dev/null || die "--diff --pprof"
go tool pprof -symbolize=none -top -nodecount=100 \
  -diff_base="$WORK/peers.pb.gz" "$WORK/h7.pb.gz" >"$WORK/top" 2>"$WORK/err" ||
  die "go tool pprof refused the pair: $(cat "$WORK/err")"
# "Showing nodes accounting for ..., of 10s total", then rows: the first
# is compress_block, +3.50s flat.
first=$(awk '/flat%/ { f = 1; next } f { print $1, $NF; exit }' "$WORK/top")
[ "$first" = "3.50s compress_block" ] ||
  die "pprof's top difference: '$first' (want '3.50s compress_block'): $(cat "$WORK/top")"
grep -q '10s total' "$WORK/top" || die "the host's total is not 10s: $(cat "$WORK/top")"
go tool pprof -symbolize=none -top "$WORK/peers.pb.gz" >"$WORK/base" 2>&1 ||
  die "go tool pprof refused the base alone: $(cat "$WORK/base")"
echo "test_profile_diff.sh: 1 passed, 0 failed"
