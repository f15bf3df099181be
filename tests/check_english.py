#!/usr/bin/env python3
"""Fails when a test recognises a program's output by its English words.

A test must read what a program says through its notice codes
(common/notice.h, tests/support/test_notice.h), its exit status, its JSON
or its metrics: the sentences may be reworded at any time. This scans
tests/**/*.c for a string literal holding a phrase (two words) that is
searched for in a program's stderr or log:

  strstr(c.err, "...")           strstr(err, "...")   strstr(tty, "...")
  strstr(x->v.reason, "...")     strstr(w.last, "...") (a verdict, a log line)
  fleet_cli_read_until(c, "...") fleet_wait_log(path, "...")
  tg_test_wait_file_text(log_or_err_or_audit, "...")  wait_tty(..., "...")
  file_count(rp.audit_or_log, "...")
  expect_audit(f, ...)  AUDIT(...)  expect_denied(x, ...)  log_lines(...)
                                                      (any argument)

A literal without a space between two words (a path, a flag, a field
name, a quoted name) is data, not English, and passes; so do the
sanitizers' own markers. Files not yet converted are listed with their
count in tests/check_english.allow: a count may only go down (the check
fails when a file has more than its allowance, and says when an
allowance can be lowered).

    tests/check_english.py [--list] [TESTS_DIR]
    tests/check_english.py --self-test
"""
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOW = os.path.join(HERE, "check_english.allow")

LIT = r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*'
# A program's output: a child's stderr, a terminal, a log file.
OUTPUT = (r'(?:[\w.>-]*\berr\b|[\w.>-]*\.err|tty|rest|[\w.>-]*log\w*|stderr'
          r'|[\w.>-]*audit\w*|[\w.>-]*reason|[\w.>-]*\.last)')
CALLS = [
    re.compile(r'strstr\(\s*' + OUTPUT + r'\s*,\s*(' + LIT + r')'),
    re.compile(r'fleet_cli_read_until\([^,]+,\s*(' + LIT + r')'),
    re.compile(r'fleet_wait_log\([^,]+,\s*(' + LIT + r')'),
    re.compile(r'tg_test_wait_file_text\(\s*' + OUTPUT + r'\s*,\s*(' + LIT + r')'),
    re.compile(r'wait_tty\([^;]*?,\s*(' + LIT + r')\s*\)'),
    re.compile(r'expect_log\([^,]+,\s*(' + LIT + r')'),
    re.compile(r'file_count\(\s*' + OUTPUT + r'\s*,\s*(' + LIT + r')'),
]
# Calls whose every argument describes a program's output: the relay's
# audit trail (its fields, its reason), a verdict's reason, the collector's
# log.
ARG_CALLS = re.compile(r'\b(?:expect_audit|audit_expect|AUDIT|expect_denied'
                       r'|log_lines)'
                       r'\(((?:[^;"]|' + LIT + r')*)\)\s*[;,)]')
PHRASE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")
# What sanitizers and assert() print: not ours to code.
FOREIGN = ("runtime error", "Sanitizer", "Assertion")


def literal_text(lit):
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', lit))


def scan(tests_dir):
    found = {}
    for root, _, files in os.walk(tests_dir):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, os.path.dirname(tests_dir))
            text = open(path, errors="replace").read()
            hits = [(m.start(), m.group(1)) for rx in CALLS
                    for m in rx.finditer(text)]
            hits += [(m.start(), lit.group(0))
                     for m in ARG_CALLS.finditer(text)
                     for lit in re.finditer(LIT, m.group(1))]
            for at, lit in sorted(hits):
                s = literal_text(lit)
                if any(f in s for f in FOREIGN) or not PHRASE.search(s):
                    continue
                line = text.count("\n", 0, at) + 1
                found.setdefault(rel, []).append((line, s))
    return found


def read_allow():
    allow = {}
    if not os.path.exists(ALLOW):
        return allow
    for ln in open(ALLOW):
        ln = ln.split("#", 1)[0].split()
        if len(ln) == 2:
            allow[ln[0]] = int(ln[1])
    return allow


SELF_TEST_BAD = r'''
  assert_non_null(strstr(c.err, "cannot connect to"));
  fleet_cli_read_until(&c, "the link is "
                       "dead", WAIT_MS);
  tg_test_wait_file_text(f->rp.log, "session detached under key", 100);
  expect_log(f, "SIGHUP: reloaded the CRL");
  expect_audit(f, "alice 127.0.0.1:", "connect allow role record");
  expect_audit(f, "bob", "EnableTracing", "deny", TG_N_RELAY_ROLE_DENIES,
               "role observe");
  assert_true(tg_test_wait_file_text(f->rp.audit, "disconnect end", 1));
  assert_int_equal(file_count(f->rp.audit, "connect deny"), 7);
  expect_denied(x, 2, "not bound");
  assert_non_null(strstr(x->v.reason, "still in flight"));
  assert_non_null(strstr(w.last, "http: loopback has 1 connections open"));
  assert_int_equal(log_lines(" warn ", "starting again"), 1);
'''
SELF_TEST_GOOD = r'''
  assert_notice_with(c.err, TG_N_SERVICE_UNREACHABLE, sock);
  assert_non_null(strstr(c.err, "--time"));
  assert_non_null(strstr(c.err, "'cli.dsx'"));
  assert_null(strstr(c.err, "runtime error"));
  assert_non_null(strstr(json, "no data loss"));
  fleet_cli_read_until(&c, TG_NOTE(FLEET_LINK_DEAD), WAIT_MS);
  expect_audit(f, "alice", "Detach", "allow", TG_N_RELAY_KEY_SCOPED, "'alice/k'");
  assert_int_equal(audit_count(f->rp.audit, AUDIT(NULL, "connect", "deny")), 7);
  expect_denied(x, 31, TG_N_RELAY_REQUEST_MALFORMED, "'/'");
  assert_non_null(strstr(x->v.reason, "alice/k"));
  assert_int_equal(log_lines(TG_N_COLLECTOR_HOST_FAILING, spec), 1);
  assert_notice_with(w.last, TG_N_COLLECTOR_HTTP_SOURCE_LIMIT, " loopback ");
'''


def self_test():
    """The scan flags each English check of a program's output (also a
    literal split over lines), and passes codes, data and other text."""
    with tempfile.TemporaryDirectory() as d:
        tests = os.path.join(d, "tests")
        os.makedirs(os.path.join(tests, "x"))
        with open(os.path.join(tests, "x", "bad.c"), "w") as f:
            f.write(SELF_TEST_BAD)
        with open(os.path.join(tests, "x", "good.c"), "w") as f:
            f.write(SELF_TEST_GOOD)
        found = scan(tests)
    got = sorted(s for _, s in found.get("tests/x/bad.c", []))
    want = sorted(["cannot connect to", "the link is dead",
                   "session detached under key", "SIGHUP: reloaded the CRL",
                   "connect allow role record",
                   "role observe", "disconnect end", "connect deny",
                   "not bound", "still in flight",
                   "http: loopback has 1 connections open",
                   "starting again"])
    ok = got == want and "tests/x/good.c" not in found
    if not ok:
        print("check_english self-test: flagged %r, want %r; good.c: %r"
              % (got, want, found.get("tests/x/good.c")))
    return 0 if ok else 1


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv[1:] if not a.startswith("--")]
    tests_dir = os.path.abspath(args[0]) if args else HERE
    found = scan(tests_dir)
    if "--list" in argv:
        total = 0
        for rel in sorted(found):
            for line, s in found[rel]:
                print("%s:%d: %r" % (rel, line, s))
            total += len(found[rel])
        print("%d checks of English in %d files" % (total, len(found)))
        return 0
    allow = read_allow()
    bad = 0
    for rel in sorted(found):
        n, limit = len(found[rel]), allow.get(rel, 0)
        if n > limit:
            bad += 1
            print("%s: %d checks of a program's English (allowed %d): match "
                  "the notice code (tests/support/test_notice.h) instead:"
                  % (rel, n, limit))
            for line, s in found[rel]:
                print("  %s:%d: %r" % (rel, line, s))
    for rel, limit in sorted(allow.items()):
        n = len(found.get(rel, []))
        if n < limit:
            print("note: %s has %d, its allowance (%d) can go down"
                  % (rel, n, limit))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
