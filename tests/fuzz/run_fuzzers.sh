#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target of a fuzz build for SECONDS each, JOBS at a
# time: run_fuzzers.sh FUZZ_DIR SECONDS JOBS
#
# The targets are the build's list (FUZZ_DIR/fuzz_targets.txt, written by
# tests/fuzz/CMakeLists.txt). Each runs on a scratch copy of its corpus
# (FUZZ_DIR/work/T), so that inputs found while fuzzing never end up in the
# tree by accident; its log is FUZZ_DIR/T.log. Each target is one process
# on one core, so JOBS of them at once take a JOBS-th of the time. Exits 1
# when a target is missing or any target fails (its log's tail printed).
set -eu

# One target (the script calls itself so for each, through xargs):
# run_fuzzers.sh --one FUZZ_DIR SECONDS SRC TARGET
one() {
  t=$1
  [ -x "$dir/tests/fuzz/$t" ] || { echo "fuzz: $t not built"; return 1; }
  work=$dir/work/$t
  rm -rf "$work"; mkdir -p "$work"
  cp "$src/corpus/$t/"* "$work/"
  if ! "$dir/tests/fuzz/$t" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$dir/" "$work" > "$dir/$t.log" 2>&1; then
    tail -n 60 "$dir/$t.log"
    echo "fuzz: $t FAILED"
    return 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$t.log")
  echo "fuzz: $t: ${runs:-?} runs in ${seconds}s"
}

if [ "${1:-}" = --one ]; then
  dir=$2 seconds=$3 src=$4
  one "$5"
  exit
fi
dir=$1 seconds=$2 jobs=$3
src=$(cd "$(dirname "$0")" && pwd)
list=$dir/fuzz_targets.txt
[ -s "$list" ] || { echo "fuzz: $list is missing: build $dir first"; exit 1; }
echo "fuzz: $(wc -l < "$list") targets, ${seconds}s each, $jobs at a time"
# xargs stops at the first child exiting 255 only; any other failure is
# counted and reported by its exit status (123) once all have run.
rc=0
xargs -P "$jobs" -I{} sh "$0" --one "$dir" "$seconds" "$src" {} < "$list" || rc=$?
[ "$rc" = 0 ] || { echo "fuzz: a target failed (above)"; exit 1; }
