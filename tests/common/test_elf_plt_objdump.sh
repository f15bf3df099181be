#!/bin/sh
# test_elf_plt_objdump: the PLT stub names of common/elf_plt.h against
# objdump's on real binaries: a program built here with the lazy PLT,
# with -z now, with -fno-plt, with IBT (-fcf-protection -z ibtplt:
# .plt.sec and 16-byte .plt.got entries), and /usr/bin/ls. Every
# "<NAME@plt>:" label objdump prints must be named alike at its address;
# the only names objdump does not print are the lazy stubs of an IBT .plt
# (objdump labels that section ".plt" whole), which must carry the name
# of the .plt.sec entry of the same relocation. The only-keep-debug copy
# of the program names nothing (its sections are SHT_NOBITS).
#
# Skipped (exit 77) without a C compiler, objdump or objcopy.
# Environment (set by tests/common/CMakeLists.txt): DUMP WORK CC
set -eu
say() { echo "test_elf_plt_objdump: $*"; }
die() { say "FAIL: $*"; exit 1; }
for t in "${CC:-cc}" objdump objcopy readelf python3; do
  command -v "$t" >/dev/null 2>&1 || { say "SKIPPED: no $t"; exit 77; }
done
rm -rf "$WORK"
mkdir -p "$WORK"
cat >"$WORK/p.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (access(argv[0], F_OK) == 0) puts(argv[0]);
  char *s = malloc(strlen(argv[0]) + 1);
  if (!s) return 1;
  strcpy(s, argv[0]);
  printf("%d %s\n", argc, s);
  free(s);
  return 0;
}
C
n=0
check() { # FILE: compare with objdump
  "$DUMP" "$1" >"$WORK/ours" || die "elf_plt_dump $1 failed"
  objdump -d "$1" >"$WORK/objdump" || die "objdump $1"
  readelf -SW "$1" >"$WORK/sections"
  python3 - "$1" "$WORK/ours" "$WORK/objdump" "$WORK/sections" <<'PY' || die "$1 differs from objdump"
import re, sys
ours = {}
for line in open(sys.argv[2]):
    a, size, name = line.split()
    ours[int(a, 16)] = (int(size, 16), name)
theirs = {}
for line in open(sys.argv[3]):
    m = re.match(r"^([0-9a-f]+) <([^>]+@plt)>:$", line)
    if m:
        theirs[int(m.group(1), 16)] = m.group(2)
secs = {}
for line in open(sys.argv[4]):
    m = re.search(r"\]\s+(\.plt\S*)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
    if m:
        secs[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
assert theirs, "objdump names no stub in " + sys.argv[1]
for a, name in theirs.items():
    assert a in ours and ours[a][1] == name, (hex(a), name, ours.get(a))
extra = {a: v for a, v in ours.items() if a not in theirs}
if extra:
    assert ".plt.sec" in secs, ("names objdump does not give", extra)
    base, size = secs[".plt"]
    sec_base = secs[".plt.sec"][0]
    for a, (sz, name) in extra.items():
        assert base + 16 <= a < base + size, (hex(a), name)
        assert ours.get(sec_base + (a - base - 16))[1] == name, (hex(a), name)
print("test_elf_plt_objdump: %s: %d stubs named as objdump, %d lazy stubs"
      % (sys.argv[1], len(theirs), len(extra)))
PY
  n=$((n + 1))
}
CC=${CC:-cc}
"$CC" -O1 -o "$WORK/lazy" "$WORK/p.c" || die "cannot build"
check "$WORK/lazy"
"$CC" -O1 -Wl,-z,now -o "$WORK/now" "$WORK/p.c" || die "cannot build -z now"
check "$WORK/now"
"$CC" -O1 -fno-plt -o "$WORK/noplt" "$WORK/p.c" || die "cannot build -fno-plt"
check "$WORK/noplt"
if "$CC" -O1 -fcf-protection -Wl,-z,ibtplt -o "$WORK/ibt" "$WORK/p.c" 2>/dev/null; then
  readelf -SW "$WORK/ibt" | grep -q '\.plt\.sec' || die "-z ibtplt gave no .plt.sec"
  check "$WORK/ibt"
  "$CC" -O1 -fcf-protection -Wl,-z,ibtplt -Wl,-z,now -o "$WORK/ibtnow" "$WORK/p.c"
  check "$WORK/ibtnow"
else
  say "IBT layout not checked: the linker takes no -z ibtplt"
fi
[ -r /usr/bin/ls ] && check /usr/bin/ls
objcopy --only-keep-debug "$WORK/lazy" "$WORK/lazy.debug" || die "objcopy"
"$DUMP" "$WORK/lazy.debug" >"$WORK/ours" || die "elf_plt_dump of the debug file failed"
[ ! -s "$WORK/ours" ] || die "the only-keep-debug file named stubs: $(cat "$WORK/ours")"
say "ok: $n binaries"
