#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""merge_tp.py's own behaviour, against a stand-in for trace processor
(ctest merge_tp_selftest; no Perfetto binaries needed):

- with an empty corpus, a finding is new: the job exits 1 and saves a
  reproducer that is the finding alone (--replay);
- with that reproducer in the corpus, the same finding is known: the job
  counts it and exits 0;
- --replay classifies files alone.

The stand-in refuses, as trace processor words a refusal, every merged
file over 700 bytes (the good host's packets alone are far less), so
most rounds are findings of one signature.

    test_merge_tp.py HARNESS   (the schema: $PERFETTO_BIN/../protos;
                               exit 77, skipped, without it)
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
STAND_IN = """#!/bin/sh
n=$(wc -c < "$3")
if [ "$n" -gt 700 ]; then
  printf 'Loading trace: 0.00 MBCould not read trace file (path: %s): %s bytes is too many\\n' "$3" "$n" >&2
  exit 1
fi
echo '"1:evidence@2000+1000/0|0:|"'
"""


# Rounds, not seconds: with the seed fixed, the same inputs on a loaded
# machine as on a quiet one (4 seconds once gave 5 rounds and no finding
# in CI's company). Seed 7's first file over 700 bytes comes in round 8.
ROUNDS = 12


def run(harness, tpdir, corpus, out, *extra):
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "merge_tp.py"), "--harness",
         harness, "--perfetto-bin", tpdir, "--proto", PROTO,
         "--corpus", corpus, "--out", out, "--seed", "7",
         "--seconds", "600", "--rounds", str(ROUNDS),
         "--minimize-budget", "60"] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600)


def main():
    harness = os.path.abspath(sys.argv[1])
    if not os.path.exists(PROTO):
        print("[ SKIPPED  ] merge_tp selftest: Perfetto's perfetto_trace.proto "
              "(PERFETTO_BIN/../protos) is not here")
        return 77
    tmp = tempfile.mkdtemp(prefix="tg-merge-tp-test-")
    try:
        tpdir = os.path.join(tmp, "bin")
        os.makedirs(tpdir)
        tp = os.path.join(tpdir, "trace_processor_shell")
        with open(tp, "w") as f:
            f.write(STAND_IN)
        os.chmod(tp, 0o755)
        corpus = os.path.join(tmp, "corpus")
        os.makedirs(corpus)
        out = os.path.join(tmp, "out")
        r = run(harness, tpdir, corpus, out)
        assert r.returncode == 1, r.stdout
        saved = sorted(os.listdir(out))
        assert len(saved) == 1 and saved[0].startswith("regress-tp-import-"), \
            (saved, r.stdout)
        assert "import: N bytes is too many" in r.stdout, r.stdout
        # The reproducer is the finding alone.
        path = os.path.join(out, saved[0])
        r2 = subprocess.run(
            [sys.executable, os.path.join(HERE, "merge_tp.py"), "--harness",
             harness, "--perfetto-bin", tpdir, "--proto", PROTO, "--replay",
             path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, timeout=120)
        assert r2.returncode == 1 and "too many" in r2.stdout, r2.stdout
        shutil.copy(path, corpus)
        r = run(harness, tpdir, corpus, os.path.join(tmp, "out2"))
        assert r.returncode == 0, r.stdout
        assert "1 signatures of corpus inputs known" in r.stdout, r.stdout
        assert ", 0 new" in r.stdout, r.stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("merge_tp selftest: ok")
    return 0


PROTO = os.path.join(os.environ.get("PERFETTO_BIN", "/nonexistent"), "..",
                     "protos", "perfetto_trace.proto")
if __name__ == "__main__":
    sys.exit(main())
