"""Perfetto's integration tests against tracegated.

Each test runs in its own process (a PERFETTO_CHECK in the test client
aborts the whole binary) against a fresh service and probes producer (a
failing test can leave a session behind). Ours: tracegated with Perfetto's
traced_probes, and tracegated with tracegate-probes; Perfetto's: traced
with traced_probes, the baseline each row is shown beside.
"""

import json
import os
import stat
import subprocess

from harness import Stack, Timeout

# Tests that start an in-process traced of their own: they say nothing
# about the service the job points them at.
OWN_TRACED = {
    "PerfettoTracedIntegrationTest.TestMultipleProducerSockets":
        "starts its own traced",
    "PerfettoTracedIntegrationTest.TestShmemEmulation":
        "starts its own traced",
}

# (row prefix, service, probes) for ours, and Perfetto's baseline.
OURS = (("itest/traced_probes", "tracegated", "traced_probes"),
        ("itest/tracegate-probes", "tracegated", "tracegate-probes"))
BASELINE = ("traced", "traced_probes")

TEST_TIMEOUT_S = 120


def list_tests(tools):
    """The enabled tests of the binary, as Suite.Name."""
    out = subprocess.run([tools.perfetto_bin("perfetto_service_integrationtests"),
                          "--gtest_list_tests"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    tests, suite = [], None
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            # "Suite." heads its tests; any other line (a banner) does not.
            suite = line.strip() if line.strip().endswith(".") else None
            continue
        name = line.split("#")[0].strip()
        if suite and not name.startswith("DISABLED_"):
            tests.append(suite + name)
    return tests


def _gtest_outcome(json_path):
    """'pass' or 'fail' from gtest's JSON report; None if there is none."""
    try:
        with open(json_path) as f:
            r = json.load(f)
    except (OSError, ValueError):
        return None
    if r.get("tests") != 1:
        return None  # the filter ran no test: not a pass
    return "pass" if r.get("failures", 1) == 0 and r.get("errors", 0) == 0 \
        else "fail"


def run_one(h, tools, workdir, test, service, probes, links):
    """Runs one test against a fresh stack: 'pass', 'fail', 'timeout',
    'crash' (no report: the client aborted) or 'setup: ...'. links():
    the /system/bin links are there (made again if they went)."""
    os.makedirs(workdir, exist_ok=True)
    if not links():
        return "setup: no /system/bin links"
    stack = Stack(h, tools, workdir, service, probes)
    report = os.path.join(workdir, "gtest.json")
    try:
        stack.start()
        rc = h.run([tools.perfetto_bin("perfetto_service_integrationtests"),
                    "--gtest_filter=" + test, "--gtest_output=json:" + report],
                   os.path.join(workdir, "test.log"), TEST_TIMEOUT_S,
                   env=stack.env())
    except Timeout as e:
        return "setup: %s" % e
    finally:
        stack.stop()
    check_dev_null()
    if not os.path.exists("/system/bin/perfetto"):
        # Another user of the machine removed /system during the test.
        return "setup: /system/bin went away during the test"
    if rc is None:
        return "timeout"
    outcome = _gtest_outcome(report)
    if outcome is None:
        return "crash"
    if outcome == "pass" and rc != 0:
        return "fail"
    return outcome


def settle(first, rerun):
    """(row result, ours text) of a test whose first run gave |first|;
    rerun() runs it once more, called only after a failure. Some of
    Perfetto's tests race their own steps against the machine's load:
    TriggerCloneSnapshot sends SIGTERM once the snapshot's file exists,
    and perfetto_cmd creates that file before it asks for the clone, so
    on a loaded machine the session can stop, and be read, first. A
    failure the second run does not repeat passes the row, and the row
    says so; one it repeats fails it."""
    if first == "pass":
        return "pass", "pass"
    if first.startswith("setup:"):
        return "error", first
    again = rerun()
    if again == "pass":
        return "pass", "pass on retry (first: %s)" % first
    return "fail", "%s; retry: %s" % (first, again)


def check_dev_null():
    """The namespace's /dev/null is a bind mount Perfetto's CLI cannot
    unlink; a test that replaced it anyway would make every later result
    meaningless, so that stops the job."""
    st = os.stat("/dev/null")
    if not stat.S_ISCHR(st.st_mode):
        raise RuntimeError("/dev/null is no longer a character device")


def run(h, tools, work, only, results, links):
    """Adds a row per (our configuration, test) to results."""
    tests = [t for t in list_tests(tools) if only(t)]
    for test in tests:
        if test in OWN_TRACED:
            for prefix, _, _ in OURS:
                results.add("%s/%s" % (prefix, test), "skip", "-", "-",
                            OWN_TRACED[test])
            continue
        base = run_one(h, tools, os.path.join(work, "perfetto", test),
                       test, *BASELINE, links)
        for prefix, service, probes in OURS:
            wd = os.path.join(work, prefix, test)
            first = run_one(h, tools, wd, test, service, probes, links)
            result, ours = settle(first, lambda: run_one(
                h, tools, os.path.join(wd, "retry"), test, service, probes,
                links))
            note = "" if first == "pass" else \
                "log: " + os.path.join(wd, "test.log")
            results.add("%s/%s" % (prefix, test), result, ours, base, note)
