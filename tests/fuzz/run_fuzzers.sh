#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target of a fuzz build for SECONDS each, JOBS at a
# time: run_fuzzers.sh FUZZ_DIR SECONDS JOBS [RUNS]
#
# With RUNS, a target stops after its corpus and RUNS inputs in all, or at
# SECONDS, whichever comes first: the smoke's work is then a count, the
# same on any machine, for every target fast enough to reach it (most do
# in a second or less); SECONDS bounds the slow ones.
#
# The targets are the build's list (FUZZ_DIR/fuzz_targets.txt, written by
# tests/fuzz/CMakeLists.txt). Each runs on a scratch copy of its corpus
# (FUZZ_DIR/work/T), so that inputs found while fuzzing never end up in the
# tree by accident; its log is FUZZ_DIR/T.log. Each target is one process
# on one core, so JOBS of them at once take a JOBS-th of the time. Exits 1
# when a target is missing or any target fails (its log's tail printed).
set -eu

# One target (the script calls itself so for each, through xargs):
# run_fuzzers.sh --one FUZZ_DIR SECONDS RUNS SRC TARGET (RUNS -1: no
# bound but SECONDS)
one() {
  t=$1
  [ -x "$dir/tests/fuzz/$t" ] || { echo "fuzz: $t not built"; return 1; }
  work=$dir/work/$t
  rm -rf "$work"; mkdir -p "$work"
  cp "$src/corpus/$t/"* "$work/"
  if ! "$dir/tests/fuzz/$t" -max_total_time="$seconds" -runs="$runs" \
      -print_final_stats=1 \
      -artifact_prefix="$dir/" "$work" > "$dir/$t.log" 2>&1; then
    tail -n 60 "$dir/$t.log"
    echo "fuzz: $t FAILED"
    return 1
  fi
  ran=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/$t.log")
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$dir/$t.log")
  echo "fuzz: $t: ${ran:-?} runs in ${took:-?}s"
}

if [ "${1:-}" = --one ]; then
  dir=$2 seconds=$3 runs=$4 src=$5
  one "$6"
  exit
fi
dir=$1 seconds=$2 jobs=$3 runs=${4:--1}
src=$(cd "$(dirname "$0")" && pwd)
list=$dir/fuzz_targets.txt
[ -s "$list" ] || { echo "fuzz: $list is missing: build $dir first"; exit 1; }
if [ "$runs" = -1 ]; then
  echo "fuzz: $(wc -l < "$list") targets, ${seconds}s each, $jobs at a time"
else
  echo "fuzz: $(wc -l < "$list") targets, $runs runs each (at most ${seconds}s), $jobs at a time"
fi
# xargs stops at the first child exiting 255 only; any other failure is
# counted and reported by its exit status (123) once all have run.
rc=0
xargs -P "$jobs" -I{} sh "$0" --one "$dir" "$seconds" "$runs" "$src" {} < "$list" || rc=$?
[ "$rc" = 0 ] || { echo "fuzz: a target failed (above)"; exit 1; }
