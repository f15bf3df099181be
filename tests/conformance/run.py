#!/usr/bin/env python3
"""make conformance: Perfetto's own tools against tracegate.

usage: run.py --build DIR [--perfetto-bin DIR] [--out DIR] [--only REGEX]
              [--seconds N]
       run.py --preflight [--perfetto-bin DIR]   (0: can run, 1: skipped
              with why, 2: the tools are there but do not run)

Three parts (docs/conformance.md): Perfetto's integration tests against
tracegated (itests.py), Perfetto's Linux example configs recorded by both
stacks (configs.py), a clone and a collector snapshot (snapshots.py). Every
row is PASS, FAIL, ERROR (the check could not be set up), SKIP (with
why), KNOWN (a failure listed in
known_failures.tsv with the issue point that owns it) or UNLISTED-PASS
(listed there but passing: the list must be trimmed). The job fails (exit
1) on FAIL, ERROR, UNLISTED-PASS, or a job time over the budget; the table is
printed and written as summary.tsv and summary.json in --out.

Without Perfetto's binaries (PERFETTO_BIN, default ../shared/perfetto/bin)
or without root (ftrace, mount namespaces), it says why and exits 0.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)

import configs  # noqa: E402
import itests  # noqa: E402
import snapshots  # noqa: E402
from harness import Harness, MachineState  # noqa: E402

TOP = os.path.dirname(os.path.dirname(HERE))
NS_ENV = "TG_CONFORMANCE_NS"
BUDGET_S = 20 * 60
PERFETTO_TOOLS = ("traced", "traced_probes", "perfetto", "trigger_perfetto",
                  "trace_processor_shell", "perfetto_service_integrationtests")


class Tools:
    def __init__(self, build, perfetto_bin):
        b = os.path.abspath(build)
        self.top = TOP
        self.tracegated = os.path.join(b, "service", "tracegated")
        self.probes = os.path.join(b, "agent", "probes", "tracegate-probes")
        self.emit = os.path.join(b, "agent", "emit", "tracegate-emit")
        self.cli = os.path.join(b, "cli", "tracegate")
        self.relay = os.path.join(b, "relay", "tracegate-relay")
        self.collector = os.path.join(b, "collector", "daemon",
                                      "tracegate-collector")
        self.pbin = os.path.abspath(perfetto_bin)

    def perfetto_bin(self, name):
        return os.path.join(self.pbin, name)

    def missing(self):
        return [p for p in (self.tracegated, self.probes, self.emit, self.cli,
                            self.relay, self.collector)
                if not os.access(p, os.X_OK)]


def default_perfetto_bin():
    env = os.environ.get("PERFETTO_BIN")
    if env:
        return env
    d = os.path.join(TOP, "..", "shared", "perfetto", "bin")
    return d if os.path.isdir(d) else ""


def preflight(pbin):
    """(None, _) when the job can run here, else (why not, broken): broken
    when the tools are there but cannot run, which fails the job; without
    them, or without root, the job is skipped."""
    if not pbin:
        return ("no Perfetto binaries: set PERFETTO_BIN=DIR (traced, "
                "traced_probes, perfetto, ...), or place them in "
                "../shared/perfetto/bin", False)
    if os.geteuid() != 0:
        return ("not root: ftrace and a private mount namespace need root",
                False)
    for t in PERFETTO_TOOLS:
        if not os.access(os.path.join(pbin, t), os.X_OK):
            return "PERFETTO_BIN=%s has no %s" % (pbin, t), True
    r = subprocess.run([os.path.join(pbin, "perfetto"), "--version"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return ("Perfetto's perfetto does not run here (%s): its runtime "
                "needs libprotobuf32 and zlib1g (deploy/deps.sh conformance)"
                % r.stderr.strip()[-200:], True)
    if not shutil.which("unshare"):
        return "no unshare(1) (util-linux)", True
    return None, False


class Results:
    def __init__(self, known):
        self.rows = []
        self.known = known  # [(pattern, owner, why)]

    def add(self, name, result, ours, perfetto, note="", detail=None,
            problems=()):
        """One row. problems: what failed, one item each (a snapshot's
        stats); a known failure that names ONLY covers the row only when
        each item matches it, so that a new loss beside a known one fails.
        """
        listed = next((k for k in self.known
                       if fnmatch.fnmatchcase(name, k[0])), None)
        if listed and result == "fail" and len(listed) > 3:
            beyond = [p for p in problems if not re.search(listed[3], p)]
            if beyond:
                note = "beyond %s: %s" % (listed[1], "; ".join(beyond))
                listed = None
        # error: the job could not set the check up (a daemon that did not
        # start): never a known failure, whatever the list says.
        status = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP",
                  "error": "ERROR"}[result]
        if listed and result == "fail":
            status = "KNOWN"
            note = "%s (%s)%s" % (listed[1], listed[2],
                                  "; " + note if note else "")
        elif listed and result == "pass":
            status = "UNLISTED-PASS"
            note = ("passes: remove it from known_failures.tsv (%s)"
                    % listed[1])
        row = {"test": name, "status": status, "ours": ours,
               "perfetto": perfetto, "note": note}
        if detail:
            row["detail"] = detail
        self.rows.append(row)
        print("%-14s %s  [ours: %s | Perfetto's: %s]" %
              (status, name, ours, perfetto), flush=True)

    def failed(self):
        return [r for r in self.rows
                if r["status"] in ("FAIL", "ERROR", "UNLISTED-PASS")]


def load_known(path):
    known = []
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) not in (3, 4):
                raise SystemExit("%s: expected PATTERN<TAB>OWNER<TAB>WHY"
                                 "[<TAB>ONLY]: %r" % (path, line))
            known.append(tuple(parts))
    return known


def print_table(rows):
    cols = (("test", "test"), ("status", "result"), ("ours", "ours"),
            ("perfetto", "Perfetto's"))
    clip = 60
    cell = [[str(r[k]) if k == "test" else str(r[k])[:clip]
             for k, _ in cols] for r in rows]
    w = [max([len(h)] + [len(c[i]) for c in cell])
         for i, (_, h) in enumerate(cols)]
    fmt = "  ".join("%%-%ds" % n for n in w)
    print(fmt % tuple(h for _, h in cols))
    print(fmt % tuple("-" * n for n in w))
    for c in cell:
        print(fmt % tuple(c))
    tabled = [r for r in rows if "tables" in r.get("detail", {})]
    if tabled:
        print("\nrows per table, ours/Perfetto's (ours must hold >= 90%):")
        names = list(tabled[0]["detail"]["tables"])
        print("%-24s " % "config" + " ".join("%15s" % n for n in names))
        for r in tabled:
            t = r["detail"]["tables"]
            print("%-24s " % r["test"][len("config/"):] + " ".join(
                "%15s" % ("%s/%s" % tuple("-" if v is None else v
                                          for v in t[n])) for n in names))
    notes = [r for r in rows if r["note"] and r["status"] != "SKIP"]
    if notes:
        print("\nnotes:")
        for r in notes:
            print("  %s: %s" % (r["test"], r["note"]))


def write_summary(out, rows, elapsed_s):
    with open(os.path.join(out, "summary.tsv"), "w") as f:
        f.write("test\tstatus\tours\tperfetto\tnote\n")
        for r in rows:
            f.write("\t".join(str(r[k]).replace("\t", " ") for k in
                              ("test", "status", "ours", "perfetto", "note"))
                    + "\n")
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"schema": 1, "elapsed_s": round(elapsed_s, 1),
                   "budget_s": BUDGET_S, "rows": rows}, f, indent=1)


def namespace_setup(tools, state):
    """In the job's private mount namespace: the guarded /dev/null and the
    /system/bin links the command-line tests exec."""
    subprocess.run(["mount", "--bind", "/dev/null", "/dev/null"], check=True)
    if not state.ensure_system_links(tools.pbin):
        raise SystemExit("conformance: cannot mount a tmpfs on /system")


def namespace_teardown():
    # Every tmpfs the job stacked on /system (ensure_system_links may have
    # mounted it again), so that the directory can be removed.
    while subprocess.run(["umount", "/system"], stderr=subprocess.DEVNULL
                         ).returncode == 0:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="tracegate's build directory")
    ap.add_argument("--perfetto-bin", default=default_perfetto_bin())
    ap.add_argument("--out", default=os.path.join(TOP, "build",
                                                  "conformance"))
    ap.add_argument("--only", default="",
                    help="run only the rows whose name this regex finds")
    ap.add_argument("--seconds", type=int, default=4,
                    help="the duration of each config's recording")
    ap.add_argument("--preflight", action="store_true",
                    help="exit 0 if the job can run here; else say why and "
                    "exit 1 (skipped) or 2 (broken tools)")
    a = ap.parse_args()

    why, broken = preflight(a.perfetto_bin)
    if why:
        print("conformance: %s: %s" % ("cannot run" if broken else "skipped",
                                       why))
        if a.preflight:
            return 2 if broken else 1
        return 1 if broken else 0
    if a.preflight:
        return 0
    if not a.build:
        ap.error("--build DIR is needed")
    tools = Tools(a.build, a.perfetto_bin)
    if tools.missing():
        print("conformance: not built: " + ", ".join(tools.missing()))
        return 1

    if os.environ.get(NS_ENV) != "1":
        # Everything runs in a private mount namespace (harness.py's
        # docstring says why); its mounts end with the job.
        os.environ[NS_ENV] = "1"
        os.execvp("unshare", ["unshare", "--mount", "--propagation",
                              "private", sys.executable,
                              os.path.abspath(__file__)] + sys.argv[1:])

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)

    start = time.monotonic()
    shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out)
    rx = re.compile(a.only)
    only = rx.search
    results = Results(load_known(os.path.join(HERE, "known_failures.tsv")))
    h = Harness()
    state = MachineState()
    try:
        namespace_setup(tools, state)
        itests.run(h, tools, os.path.join(a.out, "itests"),
                   lambda t: only("itest/" + t), results,
                   lambda: state.ensure_system_links(tools.pbin))
        configs.run(h, tools, HERE, os.path.join(a.out, "configs"), only,
                    a.seconds, results)
        if only("snapshot/clone"):
            snapshots.run_clone(h, tools, HERE,
                                os.path.join(a.out, "clone"), 6, results)
        if only("snapshot/collector"):
            snapshots.run_collector(h, tools, HERE,
                                    os.path.join(a.out, "collector"), results)
    finally:
        h.close()
        namespace_teardown()
        for what in state.restore(h.probe_pids):
            print("conformance: cleanup: " + what)
    elapsed = time.monotonic() - start
    results.add("job/time", "pass" if elapsed <= BUDGET_S else "fail",
                "%.0f s" % elapsed, "-", "budget %d s" % BUDGET_S)
    print()
    print_table(results.rows)
    write_summary(a.out, results.rows, elapsed)
    bad = results.failed()
    print("\nconformance: %d rows, %d failed; %.0f s; summary in %s" %
          (len(results.rows), len(bad), elapsed,
           os.path.join(a.out, "summary.tsv")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
