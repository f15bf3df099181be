#!/usr/bin/env python3
"""The conformance job's own decisions, without Perfetto, root or a
build: how a row's status follows from its result and the known-failures
list, how a config's duration is set, which stats and row counts count
against ours. Run by ctest (test_conformance_logic) and by hand."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import configs  # noqa: E402
import itests  # noqa: E402
import run  # noqa: E402
import tracecheck  # noqa: E402

KNOWN = [("itest/*/Suite.Known", "issue 1 point 2", "why"),
         ("snapshot/clone", "issue 3 point 4", "loss",
          r"^clone\.pftrace: writer_loss\[")]


def status(name, result, problems=()):
    r = run.Results(KNOWN)
    with redirect_stdout(io.StringIO()):
        r.add(name, result, "ours", "theirs", problems=problems)
    return r.rows[0]["status"], r.failed() != []


def no_rerun():
    raise AssertionError("run again although it passed or could not run")


class ItestRetry(unittest.TestCase):
    def test_a_pass_is_a_pass(self):
        self.assertEqual(itests.settle("pass", no_rerun), ("pass", "pass"))

    def test_a_failure_the_retry_does_not_repeat_passes_and_says_so(self):
        self.assertEqual(itests.settle("fail", lambda: "pass"),
                         ("pass", "pass on retry (first: fail)"))

    def test_a_repeated_failure_fails(self):
        self.assertEqual(itests.settle("crash", lambda: "fail"),
                         ("fail", "crash; retry: fail"))

    def test_a_setup_error_is_an_error_and_not_retried(self):
        self.assertEqual(itests.settle("setup: no links", no_rerun),
                         ("error", "setup: no links"))


class RowStatus(unittest.TestCase):
    def test_listed_failure_is_known_and_passes_the_job(self):
        self.assertEqual(status("itest/x/Suite.Known", "fail"),
                         ("KNOWN", False))

    def test_listed_row_that_passes_fails_the_job(self):
        self.assertEqual(status("itest/x/Suite.Known", "pass"),
                         ("UNLISTED-PASS", True))

    def test_unlisted_failure_fails_the_job(self):
        self.assertEqual(status("itest/x/Suite.Other", "fail"),
                         ("FAIL", True))

    def test_setup_error_is_never_known(self):
        self.assertEqual(status("itest/x/Suite.Known", "error"),
                         ("ERROR", True))

    def test_skip_does_not_fail_the_job(self):
        self.assertEqual(status("itest/x/Suite.Skipped", "skip"),
                         ("SKIP", False))

    def test_known_loss_covers_only_the_stat_it_names(self):
        self.assertEqual(status("snapshot/clone", "fail",
                                ["clone.pftrace: writer_loss[0]=2"]),
                         ("KNOWN", False))
        self.assertEqual(status("snapshot/clone", "fail",
                                ["clone.pftrace: writer_loss[0]=2",
                                 "clone.pftrace: ftrace_loss[1]=1"]),
                         ("FAIL", True))


class KnownFile(unittest.TestCase):
    def test_the_tree_s_list_parses(self):
        here = os.path.dirname(os.path.abspath(__file__))
        for k in run.load_known(os.path.join(here, "known_failures.tsv")):
            self.assertIn(len(k), (3, 4))
            self.assertRegex(k[1], r"^issue \d+ point \d+$")

    def test_a_line_without_an_owner_is_refused(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv") as f:
            f.write("itest/*/A.B\n")
            f.flush()
            with self.assertRaises(SystemExit):
                run.load_known(f.name)


class Configs(unittest.TestCase):
    def test_duration_is_replaced(self):
        self.assertEqual(configs.with_duration("a: 1\nduration_ms: 10000\n",
                                               4000),
                         "a: 1\nduration_ms: 4000\n")

    def test_duration_is_added_when_absent(self):
        self.assertIn("duration_ms: 4000",
                      configs.with_duration("buffers {}\n", 4000))

    def test_a_table_short_of_90_percent_counts(self):
        self.assertEqual(tracecheck.shortfalls({"sched": 89}, {"sched": 100}),
                         ["sched 89 < 90% of 100"])
        self.assertEqual(tracecheck.shortfalls({"sched": 90}, {"sched": 100}),
                         [])

    def test_the_time_both_traces_cover(self):
        self.assertEqual(tracecheck.common_window((10, 50), (20, 60)),
                         (20, 50))
        self.assertIsNone(tracecheck.common_window((10, 20), (30, 40)))
        self.assertIsNone(tracecheck.common_window(None, (30, 40)))
        q = tracecheck._query((20, 50))
        self.assertIn("(select count(*) from sched)", q)
        self.assertIn("(select count(*) from sched where ts between 20 and "
                      "50)", q)
        self.assertIn("(select count(*) from process)", q)
        self.assertIn("from slice where (category is null or category != "
                      "'metatrace') and ts between 20 and 50", q)
        self.assertNotIn("between", tracecheck._query())

    def test_a_table_counts_as_short_when_short_both_ways(self):
        # The first stack's start burst: short whole, even within.
        self.assertEqual(tracecheck.shortfalls(
            {"counters": 1016}, {"counters": 1154},
            {"counters": 998}, {"counters": 997}), [])
        # A poll falling out of the window: even whole, short within.
        self.assertEqual(tracecheck.shortfalls(
            {"counters": 5649}, {"counters": 5401},
            {"counters": 5593}, {"counters": 6342}), [])
        # Short both ways: a shortfall, both counts said.
        self.assertEqual(tracecheck.shortfalls(
            {"sched": 80}, {"sched": 100}, {"sched": 70}, {"sched": 90}),
            ["sched 80 < 90% of 100 (70 of 90 within the time both "
             "cover)"])

    def test_a_table_perfetto_leaves_empty_is_not_compared(self):
        self.assertEqual(tracecheck.shortfalls({}, {"slices": 0}), [])

    def test_a_stat_perfetto_reports_as_high_is_shared(self):
        own, shared = tracecheck.split_stats(
            {"no_flush": 1, "patches_failed[0]": 9, "cpu_loss[0]": 1},
            {"no_flush": 1, "patches_failed[0]": 3})
        self.assertEqual(own, {"patches_failed[0]": 9, "cpu_loss[0]": 1})
        self.assertEqual(shared, {"no_flush": 1})


if __name__ == "__main__":
    unittest.main()
