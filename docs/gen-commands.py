#!/usr/bin/env python3
"""Regenerates the --help blocks of docs/commands.md from the binaries.

    docs/gen-commands.py BUILD_DIR          rewrite docs/commands.md
    docs/gen-commands.py --check BUILD_DIR  exit 1 (with a diff) if stale

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

# Program name -> path under the build directory (or the source tree).
PROGRAMS = {
    "tracegated": ("build", "service/tracegated"),
    "tracegate": ("build", "consumer/tracegate"),
    "tracegate-relay": ("build", "relay/tracegate-relay"),
    "tracegate-probes": ("build", "agent/probes/tracegate-probes"),
    "tracegate-emit": ("build", "agent/emit/tracegate-emit"),
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
