#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `tracegate profile` on profile_trace.h's two-host trace: the summary's
# JSON, --host errors (exit 2, TG-1070 / TG-1071), and --pprof read by Go's
# own `go tool pprof`, whose totals and leaf functions per host equal trace
# processor's perf_sample of the same machine. Skipped (77) without go or
# PERFETTO_BIN.
set -u
die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
: "${BUILD_DIR:?}" "${WORK:?}"
TG="$BUILD_DIR/cli/tracegate"
GEN="$BUILD_DIR/tests/profile/profile_trace_gen"
rm -rf "$WORK" && mkdir -p "$WORK" || die "no $WORK"
T="$WORK/t.pftrace"
"$GEN" "$T" || die "profile_trace_gen failed"

# --- the CLI's answers -------------------------------------------------------
"$TG" profile "$T" >/dev/null 2>"$WORK/err"
[ $? -eq 2 ] || die "several hosts without --host: want exit 2"
grep -qF '[TG-1070]' "$WORK/err" || die "no TG-1070: $(cat "$WORK/err")"
"$TG" profile "$T" --host web9 --pprof -o "$WORK/x" 2>"$WORK/err"
[ $? -eq 2 ] || die "an unknown host: want exit 2"
grep -qF '[TG-1071]' "$WORK/err" || die "no TG-1071: $(cat "$WORK/err")"
"$TG" profile --help >/dev/null || die "profile --help"
"$TG" profile "$T" --host all --json >"$WORK/all.json" 2>/dev/null ||
  die "--host all --json"
python3 - "$WORK/all.json" <<'PY' || die "the summary's JSON"
import json, sys
d = json.load(open(sys.argv[1]))
h = {x["name"]: x for x in d["hosts"]}
assert d["bad_packets"] == 0
assert h["web1"]["counts"]["samples"] == 7, h["web1"]
assert h["web1"]["counts"]["no_callstack"] == 1
assert h["web1"]["counts"]["with_unnamed_frame"] == 1
assert h["web1"]["cpu_ns"] == 70000000
assert h["web2"]["frequency_hz_max"] == 400
assert h["web2"]["counts"]["skipped"]["unwind"] == 1
assert h["web1"]["top_functions"][0]["name"] == "main"
PY

command -v go >/dev/null 2>&1 || skip "no go (Debian's golang-go): pprof not checked"
[ -n "${PERFETTO_BIN:-}" ] && [ -x "$PERFETTO_BIN/trace_processor_shell" ] ||
  skip "PERFETTO_BIN unset: pprof not checked against trace processor"
export HOME="$WORK" PPROF_TMPDIR="$WORK" GOCACHE="$WORK/gocache"

tp() {
  printf '%s\n' "$1" >"$WORK/q.sql"
  "$PERFETTO_BIN/trace_processor_shell" -q "$WORK/q.sql" "$T" 2>/dev/null |
    sed -n '/^"/,$p' | tail -n +2 | tr -d '"'
}

for m in 1 2; do
  name=web$m
  "$TG" profile "$T" --pprof --host $name -o "$WORK/$name.pb.gz" 2>/dev/null ||
    die "--pprof --host $name"
  go tool pprof -symbolize=none -sample_index=samples -top -nodecount=1000 \
    "$WORK/$name.pb.gz" >"$WORK/$name.top" 2>"$WORK/$name.err" ||
    die "go tool pprof refused $name: $(cat "$WORK/$name.err")"
  # "Showing nodes accounting for N, 100% of N total"
  total=$(sed -n 's/.*% of \([0-9]*\) total.*/\1/p' "$WORK/$name.top" | head -n1)
  want=$(tp "select count(*) from perf_sample s join thread t using(utid)
             join machine m on m.id = t.machine_id where m.raw_id = $m")
  [ "$total" = "$want" ] ||
    die "$name: pprof's total $total, trace processor's $want"
  # Leaf functions: trace processor's frame of each sample's callsite
  # (unnamed: [unknown]; no callsite: a pseudo-stack of ours) against
  # pprof's flat counts.
  tp "select coalesce(f.name, '[unknown]'), count(*) from perf_sample s
        join thread t using(utid) join machine m on m.id = t.machine_id
        join stack_profile_callsite c on c.id = s.callsite_id
        join stack_profile_frame f on f.id = c.frame_id
      where m.raw_id = $m group by 1 order by 1" >"$WORK/$name.tp"
  awk 'f && NF >= 6 { n = $1; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, "");
         sub(/ \/.*$/, ""); c[$0] += n } /flat%/ { f = 1 }
       END { for (k in c) print k "," c[k] }' "$WORK/$name.top" |
    grep -v '^\[no callstack\]\|^\[skipped\|,0$' | sort >"$WORK/$name.pp"
  sort "$WORK/$name.tp" >"$WORK/$name.tps"
  cmp -s "$WORK/$name.pp" "$WORK/$name.tps" ||
    die "$name: leaf functions differ: pprof $(cat "$WORK/$name.pp") / trace processor $(cat "$WORK/$name.tps")"
  nocs=$(tp "select count(*) from perf_sample s join thread t using(utid)
             join machine m on m.id = t.machine_id
             where m.raw_id = $m and s.callsite_id is null")
  pseudo=$(awk 'f && /\[no callstack\]|\[skipped/ { n += $1 } /flat%/ { f = 1 }
                END { print n + 0 }' "$WORK/$name.top")
  [ "$nocs" = "$pseudo" ] ||
    die "$name: samples without a callsite: trace processor $nocs, pprof $pseudo"
done
echo "test_profile_pprof: 1 passed, 0 failed"
