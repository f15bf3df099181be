#!/usr/bin/env python3
"""deploy_man_pages: the man pages the build generates (docs/man/gen-man.py).

For every program: its page exists, names every flag its --help lists (as
the OPTIONS list's terms), has NAME and SYNOPSIS, and groff formats it
without a warning (lintian rejects pages that warn).

    test_man_pages.py BUILD_DIR SRC_DIR

Exit 0: all good; 1: a failure, said on standard error.
"""
import importlib.util
import os
import re
import subprocess
import sys


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FLAG = re.compile(r"^  (--[a-z][a-z0-9-]*)", re.M)


def main(build, src):
    # Where each program is: docs/gen-commands.py's table; which have a
    # generated page: docs/man/gen-man.py's.
    where_is = load(os.path.join(src, "docs", "gen-commands.py"), "gen_commands").PROGRAMS
    pages = load(os.path.join(src, "docs", "man", "gen-man.py"), "gen_man").PAGES
    bad = []
    for prog in pages:
        where, rel = where_is[prog]
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
          % len(pages))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
