#!/usr/bin/env python3
"""Regenerates the --help blocks of docs/commands.md from the binaries.

    docs/gen-commands.py BUILD_DIR          rewrite docs/commands.md
    docs/gen-commands.py --check BUILD_DIR  exit 1 (with a diff) if stale

Either way, every flag of tracegate's commands must have a row in the
page's Perfetto table (between <!-- perfetto-flags --> comments) and be
named in docs/tracegate.1; a flag missing from either fails the run.

A block is an HTML comment naming the command, a ```text fence with its
output, and an end comment:

    <!-- help: tracegate record --help -->
    ```text
    ...
    ```
    <!-- end help -->

Only the text between the comments is rewritten; the prose around it is
the page's own. Socket defaults printed by --help depend on the machine
($PERFETTO_*_SOCK_NAME, then /run/perfetto/ when usable, then /tmp/), so
the page is generated with the paths the systemd units use.
"""
import difflib
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PAGE = os.path.join(HERE, "commands.md")
MAN = os.path.join(HERE, "tracegate.1")
# tracegate's commands whose flags the Perfetto table and the man page list.
CLI_COMMANDS = ("record", "query", "stats")
FLAG_LINE = re.compile(r"^  --([a-z][a-z0-9_-]*)")
TABLE = re.compile(r"<!-- perfetto-flags -->\n(?P<rows>.*?)<!-- end perfetto-flags -->", re.S)

# Program name -> path under the build directory (or the source tree).
PROGRAMS = {
    "tracegated": ("build", "service/tracegated"),
    "tracegate": ("build", "cli/tracegate"),
    "tracegate-relay": ("build", "relay/tracegate-relay"),
    "tracegate-collector": ("build", "collector/daemon/tracegate-collector"),
    "tracegate-probes": ("build", "agent/probes/tracegate-probes"),
    "tracegate-emit": ("build", "agent/emit/tracegate-emit"),
    "tracegate-otlp": ("build", "agent/otlp/tracegate-otlp"),
    "tracegate-perf": ("build", "agent/perf/tracegate-perf"),
    "tg-certs": ("src", "deploy/certs/tg-certs"),
}

BLOCK = re.compile(
    r"(<!-- help: (?P<cmd>[^>]*?) -->\n```text\n)(?P<body>.*?)(```\n<!-- end help -->)",
    re.S)


def run(build, cmdline):
    argv = shlex.split(cmdline)
    where, rel = PROGRAMS[argv[0]]
    path = os.path.join(build if where == "build" else SRC, rel)
    if where == "src":
        argv = ["sh", path] + argv[1:]
    else:
        argv = [path] + argv[1:]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PERFETTO_", "TRACEGATE_"))}
    env.update(LC_ALL="C",
               PERFETTO_PRODUCER_SOCK_NAME="/run/perfetto/traced-producer.sock",
               PERFETTO_CONSUMER_SOCK_NAME="/run/perfetto/traced-consumer.sock")
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30, text=True)
    if p.returncode != 0:
        sys.exit("gen-commands: '%s' exited %d:\n%s" %
                 (cmdline, p.returncode, p.stdout))
    out = p.stdout.rstrip("\n")
    return "\n".join(l.rstrip() for l in out.split("\n")) + "\n"


def missing_flags(build, page):
    """The tracegate flags absent from the Perfetto table or the man page."""
    m = TABLE.search(page)
    if not m:
        return ["the page has no <!-- perfetto-flags --> table"]
    rows = [r.split("|")[1] for r in m.group("rows").splitlines()
            if r.startswith("| ")]
    with open(MAN) as f:
        man = f.read().replace("\\-", "-")
    missing = []
    for cmd in CLI_COMMANDS:
        for line in run(build, "tracegate %s --help" % cmd).splitlines():
            fm = FLAG_LINE.match(line)
            if not fm or fm.group(1) == "help":
                continue
            flag = "--" + fm.group(1)
            want = "`%s %s" % (cmd, flag)
            if not any(want + "`" in r or want + "," in r for r in rows):
                missing.append("%s %s: no row in the Perfetto table of %s"
                               % (cmd, flag, PAGE))
            if not re.search(re.escape(flag) + r"(?![a-z_-])", man):
                missing.append("%s %s: not in %s" % (cmd, flag, MAN))
    return missing


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 1:
        sys.exit(__doc__)
    build = os.path.abspath(args[0])
    with open(PAGE) as f:
        old = f.read()
    n = 0

    def repl(m):
        nonlocal n
        n += 1
        return m.group(1) + run(build, m.group("cmd")) + m.group(4)

    new = BLOCK.sub(repl, old)
    if n == 0:
        sys.exit("gen-commands: no help blocks in " + PAGE)
    missing = missing_flags(build, new)
    if missing:
        sys.exit("gen-commands: flags not documented:\n  " + "\n  ".join(missing))
    if not check:
        if new != old:
            with open(PAGE, "w") as f:
                f.write(new)
        print("gen-commands: %d help blocks in %s" % (n, PAGE))
        return
    if new != old:
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(True), new.splitlines(True),
            "docs/commands.md", "--help of the binaries in " + build))
        sys.exit("gen-commands: docs/commands.md is stale: run "
                 "docs/gen-commands.py " + args[0])
    print("gen-commands: %d help blocks current" % n)


if __name__ == "__main__":
    main()
