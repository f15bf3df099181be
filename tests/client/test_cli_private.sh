#!/bin/sh
# test_cli_private: no source outside cli/ includes one of its
# headers, so the CLI's private code never becomes another program's
# library (client/ is where the CLI, its bridge and the collector meet).
# Tests are exempt: tests/consumer and tests/fuzz test the CLI's own
# files. There is no exception (JSON is common/json.h's).
#
# Usage: test_cli_private.sh SOURCE_DIR. Exit 0: none; 1: each offending
# "file:line:include" printed.
set -eu

SRC=${1:?usage: test_cli_private.sh SOURCE_DIR}

cd "$SRC"
# Build trees may sit inside the source tree (build/asan): skipped, as is
# git's own directory.
found=$(find . \( -name .git -o \( -type d -name 'build*' \) -o -path ./tests \
                  -o -path ./cli \) -prune -o \
             -type f \( -name '*.c' -o -name '*.h' \) -print |
        sed 's|^\./||' | sort |
        xargs grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"cli/' |
        sed 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*/:#include /' ||
        true)
if [ -n "$found" ]; then
  echo "test_cli_private: FAILED: cli/ headers included outside the CLI:"
  echo "$found"
  exit 1
fi
echo "test_cli_private: ok"
