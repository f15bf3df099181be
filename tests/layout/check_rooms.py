#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every top-level directory has its row in the room tables, and no row
names a directory that is gone (docs/architecture.md's module table and
README.md's layout table), so that the picture matches the tree.

The room tables are those whose header's first cell is "dir" or
"directory" (other tables list files: "| file | owns |"). A row of one is
a line whose first cell is a directory in backquotes ("| `abi/` |",
"| `include/tracegate/` |"); its first path component is the room. The tree's rooms are the top-level directories of the files git tracks
(without git, as in CI's copy of the tree: the source directory's
subdirectories but hidden ones, those the top-level .gitignore names as
directories ("/build*/") and build trees, a directory holding
CMakeCache.txt), hidden ones left out.

Usage: check_rooms.py SOURCE_DIR
       check_rooms.py --self-test
Prints one JSON object, {"file": {"missing": [...], "stale": [...]}, ...};
exit 0 when every list is empty, 1 when not, 2 on a usage or I/O error.
"""
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile

DOCS = ("docs/architecture.md", "README.md")
ROW = re.compile(r"^\|\s*`([A-Za-z0-9_.-]+)/[^`]*`\s*\|")


def tracked_rooms(src):
    """The first components of the paths git tracks, or None without git
    (a source tarball): then the directories on disk are the tree."""
    try:
        out = subprocess.run(["git", "-C", src, "ls-files", "-z"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = out.decode("utf-8", "replace").split("\0")
    return {p.split("/", 1)[0] for p in paths if "/" in p}


def ignored_dirs(gitignore_text):
    """The top-level directory patterns of a .gitignore ("/build*/")."""
    pats = []
    for line in gitignore_text.splitlines():
        line = line.strip()
        if line.startswith("/") and line.endswith("/") and line.count("/") == 2:
            pats.append(line[1:-1])
    return pats


def disk_rooms(src, names, ignore):
    rooms = set()
    for name in names:
        path = os.path.join(src, name)
        if name.startswith(".") or not os.path.isdir(path):
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in ignore):
            continue
        if os.path.exists(os.path.join(path, "CMakeCache.txt")):
            continue
        rooms.add(name)
    return rooms


def tree_rooms(src):
    tracked = tracked_rooms(src)
    if tracked is not None:
        return {r for r in tracked if not r.startswith(".")}
    try:
        with open(os.path.join(src, ".gitignore"), encoding="utf-8") as f:
            ignore = ignored_dirs(f.read())
    except FileNotFoundError:
        ignore = []
    return disk_rooms(src, os.listdir(src), ignore)


HEADER = re.compile(r"^\|\s*(dir|directory)\s*\|")


def table_rooms(text):
    rooms, inside = set(), False
    for line in text.splitlines():
        if not line.startswith("|"):
            inside = False  # a table ends at its first line that is not a row
        elif HEADER.match(line):
            inside = True
        elif inside:
            m = ROW.match(line)
            if m:
                rooms.add(m.group(1))
    return rooms


def compare(tree, rows):
    return {"missing": sorted(tree - rows), "stale": sorted(rows - tree)}


def self_test():
    text = ("| dir | owns |\n|---|---|\n| `abi/` | x |\n"
            "| `include/tracegate/` | y |\n| `gone/` | z |\n"
            "not a row `cli/` |\n\n| file | owns |\n|---|---|\n"
            "| `fleet/link.h` | a file, not a room |\n")
    rows = table_rooms(text)
    assert rows == {"abi", "include", "gone"}, rows
    got = compare({"abi", "include", "cli"}, rows)
    assert got == {"missing": ["cli"], "stale": ["gone"]}, got
    assert compare({"abi"}, {"abi"}) == {"missing": [], "stale": []}
    pats = ignored_dirs("/build*/\n*.pb-c.c\n/demo.pftrace\n/Testing/\n")
    assert pats == ["build*", "Testing"], pats
    # Without git (CI's copy): build/ and build-rel/ are not rooms.

    with tempfile.TemporaryDirectory() as d:
        for n in ("abi", "build", "build-rel", ".git", "Testing"):
            os.mkdir(os.path.join(d, n))
        got = disk_rooms(d, os.listdir(d), pats)
        assert got == {"abi"}, got
    print(json.dumps({"self_test": "ok"}))
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    src = argv[1]
    try:
        tree = tree_rooms(src)
        report = {}
        for doc in DOCS:
            with open(os.path.join(src, doc), encoding="utf-8") as f:
                report[doc] = compare(tree, table_rooms(f.read()))
    except OSError as e:
        sys.stderr.write("check_rooms.py: %s\n" % e)
        return 2
    print(json.dumps(report, sort_keys=True))
    bad = any(r["missing"] or r["stale"] for r in report.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
