#!/usr/bin/env python3
"""deploy_man_pages: the man pages the build generates (docs/man/gen-man.py).

For every program: its page exists, names every flag its --help lists (as
the OPTIONS list's terms), has NAME and SYNOPSIS, and groff formats it
without a warning (lintian rejects pages that warn).

    test_man_pages.py BUILD_DIR SRC_DIR

Exit 0: all good; 1: a failure, said on standard error.
"""
import os
import re
import subprocess
import sys

# Program -> how to run it, relative to the build (or source) tree.
PROGRAMS = {
    "tracegated": ("build", "service/tracegated"),
    "tracegate-probes": ("build", "agent/probes/tracegate-probes"),
    "tracegate-relay": ("build", "relay/tracegate-relay"),
    "tracegate-collector": ("build", "collector/daemon/tracegate-collector"),
    "tracegate-emit": ("build", "agent/emit/tracegate-emit"),
    "tg-certs": ("src", "deploy/certs/tg-certs"),
}
FLAG = re.compile(r"^  (--[a-z][a-z0-9-]*)", re.M)


def main(build, src):
    bad = []
    for prog, (where, rel) in PROGRAMS.items():
        argv = ([os.path.join(build, rel)] if where == "build"
                else ["sh", os.path.join(src, rel)]) + ["--help"]
        helptext = subprocess.run(argv, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  timeout=30, env=dict(os.environ, LC_ALL="C")).stdout
        path = os.path.join(build, "deploy", "man", prog + ".1")
        if not os.path.exists(path):
            bad.append("%s: no page at %s" % (prog, path))
            continue
        page = open(path).read()
        terms = {m.group(1).replace("\\-", "-") for m in
                 re.finditer(r'^\.BI? "([^"]*)', page, re.M)}
        terms = {t.split(",")[-1].strip().rstrip() for t in terms}
        for flag in FLAG.findall(helptext):
            if flag not in terms:
                bad.append("%s: %s is in --help but not an item of the page" % (prog, flag))
        for section in (".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS"):
            if section not in page:
                bad.append("%s: no %s" % (prog, section))
        g = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
        if g.returncode != 0 or g.stdout.strip():
            bad.append("%s: groff warns:\n%s" % (prog, g.stdout))
    if bad:
        print("deploy_man_pages: FAILED:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    print("deploy_man_pages: %d pages, every --help flag listed, groff clean"
          % len(PROGRAMS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
