#!/bin/sh
# test_cli_private: no source outside consumer/cli/ includes one of its
# headers, so the CLI's private code never becomes another program's
# library (client/ is where the CLI, its bridge and the collector meet).
# Tests are exempt: tests/consumer and tests/fuzz test the CLI's own
# files. One exception is left, named below: cli/json_out.h in the
# collector's API (api.c and its pure parts, api_parts.c), until the JSON
# writer has a library of its own.
#
# Usage: test_cli_private.sh SOURCE_DIR. Exit 0: none; 1: each offending
# "file:line:include" printed.
set -eu

SRC=${1:?usage: test_cli_private.sh SOURCE_DIR}
ALLOWED='^collector/daemon/api(_parts)?\.c:[0-9]*:#include "consumer/cli/json_out\.h"$'

cd "$SRC"
# Build trees may sit inside the source tree (build/asan): skipped, as is
# git's own directory.
found=$(find . \( -name .git -o \( -type d -name 'build*' \) -o -path ./tests \
                  -o -path ./consumer/cli \) -prune -o \
             -type f \( -name '*.c' -o -name '*.h' \) -print |
        sed 's|^\./||' | sort |
        xargs grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"consumer/cli/' |
        sed 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*/:#include /' |
        grep -Ev "$ALLOWED" || true)
if [ -n "$found" ]; then
  echo "test_cli_private: FAILED: consumer/cli/ headers included outside the CLI:"
  echo "$found"
  exit 1
fi
echo "test_cli_private: ok"
