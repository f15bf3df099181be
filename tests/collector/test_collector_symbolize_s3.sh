#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# test_collector_symbolize_s3: the collector's `symbolize` with its
# snapshots in a bucket of a real Ceph gateway (tests/support/ceph_rgw.sh),
# and a symbolization a restart cut short, done after it.
#
# The workload and the two hosts of test_collector_symbolize.sh
# (symbolize_lib.sh). Two collectors, each under its own prefix of one
# bucket:
#  - "on": symbolize = local, s3_presign on. The snapshot's symbols come
#    after it as two objects beside its trace (.symbols, .symidx); /trace
#    is then streamed by the collector (200, not the presigned redirect)
#    and is the trace object followed by the symbols object; each host's
#    part (?host=) holds its host's symbols. After a restart (the start-up
#    sweep) the objects are still there and the API says "done" from the
#    bucket; retention's delete takes every object of the snapshot.
#  - "rs": symbolize = debuginfod against a server that never answers, so
#    the symbolization stays running; meanwhile /trace (no symbols yet) is
#    the presigned redirect. SIGKILL, then a start with symbolize = local:
#    the snapshot is queued again at start and its symbols are stored.
# trace_processor (PERFETTO_BIN) then names the workload's frames with
# file and line in the whole traces and the parts, each part's samples on
# its host's machine alone.
#
# Skipped (exit 77), with the reason, without Ceph's programs, where
# perf_event_open is refused, without a C compiler, objcopy, strip or
# readelf, and where PERFETTO_BIN is unset (after the API's and the
# bucket's checks, which must pass).
#
# Environment (set by tests/collector/CMakeLists.txt): BUILD_DIR SRC_DIR
# WORK CC
set -eu

PERF_TEST=test_collector_symbolize_s3
SYM_WORKLOAD=symwks3
. "$SRC_DIR/tests/perf/perf_lib.sh"
RGW=$WORK.rgw
RGW_SH=$SRC_DIR/tests/support/ceph_rgw.sh
die() {
  say "FAILED: $*"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -n 20 "$f"; done
  say "files kept in $WORK"; cleanup; exit 1
}
trap 'cleanup; sh "$RGW_SH" stop "$RGW" >/dev/null 2>&1 || true' EXIT

. "$SRC_DIR/tests/collector/symbolize_lib.sh"

# --- the gateway and its bucket ------------------------------------------------
sh "$RGW_SH" stop "$RGW" >/dev/null 2>&1 || true
rc=0
CEPH_RGW_OWNER=$$ sh "$RGW_SH" start "$RGW" >"$WORK/rgw.out" 2>&1 || rc=$?
[ "$rc" -ne 77 ] || { say "SKIPPED: $(tail -n 1 "$WORK/rgw.out")"; exit 77; }
[ "$rc" -eq 0 ] || die "the gateway did not start: $(cat "$WORK/rgw.out")"
EP=$(cat "$RGW/endpoint")
BUCKET=tgsym
# The bucket's answer to METHOD $1 of key $2 (below the bucket) into file
# $3: prints the HTTP status. The keys reach curl on its standard input,
# never on a command line.
s3() {
  (. "$RGW/credentials"
   printf 'user = "%s:%s"\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY") |
    curl -s -K - -o "$3" -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 \
      -H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
      $([ "$1" = HEAD ] && echo --head || echo "-X $1") "$EP/$BUCKET/$2"
}
[ "$(s3 PUT "" /dev/null)" = 200 ] || die "cannot create the bucket"
# The config lines of a collector whose snapshots go under prefix $1.
bucket_lines() {
  printf 'bucket = s3://%s/%s\ns3_endpoint = %s\ns3_credentials_file = %s\ns3_presign = 1m\n' \
    "$BUCKET" "$1" "$EP" "$RGW/credentials"
}

# --- symbolize = local, the snapshot in the bucket ------------------------------
snapshot on "$(bucket_lines on)
symbolize = local
symbolize_debug_dir = dbg"
symbols_settled >"$WORK/on.row.json"
python3 - "$WORK/on.row.json" <<'PY' || die "symbolize = local: $(cat "$WORK/on.row.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["symbols"]
assert s["state"] == "done", s
assert s["frames"] > 0 and s["frames_named"] > 0 and s["frames_with_line"] > 0, s
assert 0 <= s["frames_plt"] <= s["frames_named"] - s["frames_with_line"], s
assert d["snapshot"]["state"] == "complete", d
assert all(h["problems"] == [] for h in d["hosts"]), d["hosts"]
PY
OBJ=on/snapshots/$SNAP_ID
[ "$(s3 GET "$OBJ.pftrace" "$WORK/on.trace.obj")" = 200 ] || die "no trace object"
[ "$(s3 GET "$OBJ.symbols" "$WORK/on.symbols.obj")" = 200 ] || die "no symbols object"
[ "$(s3 GET "$OBJ.symidx" "$WORK/on.symidx.obj")" = 200 ] || die "no symbols index object"
[ -s "$WORK/on.symbols.obj" ] || die "the symbols object is empty"
code=$(curl -s -o "$WORK/on.pftrace" -w '%{http_code}' "$API/snapshots/$SNAP_ID/trace")
[ "$code" = 200 ] || die "GET the trace of a symbolized snapshot: $code, not streamed"
cat "$WORK/on.trace.obj" "$WORK/on.symbols.obj" | cmp - "$WORK/on.pftrace" ||
  die "the whole trace is not the trace object and its symbols"
curl -sf "$API/snapshots/$SNAP_ID/trace?host=$HOST_a" -o "$WORK/on-a.pftrace" ||
  die "GET host a's part"
curl -sf "$API/snapshots/$SNAP_ID/trace?host=$HOST_b" -o "$WORK/on-b.pftrace" ||
  die "GET host b's part"
curl -sf "${API%/api/v1}/metrics" | grep -q '^tracegate_collector_symbolized_total{outcome="stored"} 1$' ||
  die "the metrics do not count the symbols stored"
# A restart: the sweep keeps the objects, the API finds them in the bucket.
stop_clean "$COLL_PID" "the collector (on)" "$WORK/on.log"
collector_start on "$(bucket_lines on)
symbolize = local
symbolize_debug_dir = dbg"
[ "$(symbols_state)" = done ] || die "after a restart the symbols are $(symbols_state)"
[ "$(s3 HEAD "$OBJ.symbols" /dev/null)" = 200 ] || die "the restart removed the symbols"
[ "$(s3 HEAD "$OBJ.symidx" /dev/null)" = 200 ] || die "the restart removed the symbols' index"
[ "$(grep -c 'symbolized: ' "$WORK/on.log")" -eq 1 ] ||
  die "the restart symbolized the snapshot again"
stop_clean "$COLL_PID" "the collector (on, again)" "$WORK/on.log"
# Retention's delete (a start with retention_max_age under the
# snapshot's age) takes every object of the snapshot.
collector_start on "$(bucket_lines on)
symbolize = local
symbolize_debug_dir = dbg
retention_max_age = 1s"
i=0
until grep -q "retention: snapshot $SNAP_ID .* deleted" "$WORK/on.log"; do
  i=$((i + 1)); [ $i -lt 600 ] || die "retention did not delete the snapshot"
  sleep 0.05
done
for k in pftrace index meta symbols symidx; do
  [ "$(s3 HEAD "$OBJ.$k" /dev/null)" = 404 ] || die "$OBJ.$k outlived the delete"
done
stop_clean "$COLL_PID" "the collector (on, retention)" "$WORK/on.log"

# --- a symbolization cut short by SIGKILL, done after the restart ---------------
silent_debuginfod
snapshot rs "$(bucket_lines rs)
symbolize = debuginfod"
i=0
until [ "$(symbols_state)" = running ]; do
  i=$((i + 1)); [ $i -lt 600 ] || die "the symbolization is $(symbols_state), not running"
  sleep 0.05
done
# No symbols yet: the download is the presigned redirect to the trace.
code=$(curl -s -o "$WORK/rs.302.json" -w '%{http_code}' "$API/snapshots/$SNAP_ID/trace")
[ "$code" = 302 ] || die "GET the trace without symbols: $code, not the redirect"
kill_while_running
unset DEBUGINFOD_URLS
[ "$(s3 HEAD "rs/snapshots/$SNAP_ID.symbols" /dev/null)" = 404 ] ||
  die "symbols stored before the kill"
collector_start rs "$(bucket_lines rs)
symbolize = local
symbolize_debug_dir = dbg"
grep -q 'queued again' "$WORK/rs.log" || die "the snapshot was not queued again at start"
symbols_settled >"$WORK/rs.row.json"
python3 - "$WORK/rs.row.json" <<'PY' || die "after the restart: $(cat "$WORK/rs.row.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = d["symbols"]
assert s["state"] == "done" and s["frames_named"] > 0, s
PY
[ "$(s3 HEAD "rs/snapshots/$SNAP_ID.symbols" /dev/null)" = 200 ] ||
  die "no symbols object after the restart"
code=$(curl -s -o "$WORK/rs.pftrace" -w '%{http_code}' "$API/snapshots/$SNAP_ID/trace")
[ "$code" = 200 ] || die "GET the trace after the restart: $code"
stop_clean "$COLL_PID" "the collector (rs)" "$WORK/rs.log"
cleanup
sh "$RGW_SH" stop "$RGW" >/dev/null 2>&1 || die "cannot stop the gateway"

need_tp "the snapshots were taken and served but not checked by trace_processor"
for t in on on-a on-b rs; do
  bad=$(bad_stats "$WORK/$t.pftrace")
  [ -z "$bad" ] || die "trace_processor stats of $t: $bad"
done
for t in on-a:1 on-b:2; do
  set -- $(machines "$WORK/${t%:*}.pftrace" "${t#*:}")
  [ "$1" -gt 0 ] && [ "$2" -eq 0 ] ||
    die "${t%:*}: $1 samples on machine ${t#*:}, $2 on others"
done
for t in on on-a on-b rs; do
  set -- $(named "$WORK/$t.pftrace")
  say "$t: $2 of the workload's $1 frames named with file and line"
  [ "$1" -gt 0 ] && [ $(($2 * 10)) -ge $(($1 * 9)) ] ||
    die "$t: $2 of $1 frames named with file and line"
done
say "ok"
