#!/bin/bash
# Separate debug files found through .gnu_debuglink (next to the file and in
# its .debug/ directory), trusted only when the build ID matches, or - for
# files without build IDs - when the debuglink CRC-32 matches; and an explicit
# --debug-file that must belong to the ELF. A stripped ELF converted with its
# debug file must give the same GSYM as the unstripped ELF.
set -u
command -v gcc >/dev/null && command -v objcopy >/dev/null || { echo "skip: need gcc and objcopy"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

cat > prog.c <<'SRC'
#include <stdio.h>
static inline int sq(int x) { return x * x; }
__attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += sq(i); return s; }
int main(int argc, char** argv) { (void)argv; printf("%d\n", work(argc * 10)); return 0; }
SRC
split() {  # unstripped-binary dir -> dir/prog (stripped, debuglink) + dir/prog.debug
  local bin=$1 dir=$2
  mkdir -p "$dir"
  objcopy --only-keep-debug "$bin" "$dir/prog.debug"
  objcopy --strip-all --add-gnu-debuglink="$dir/prog.debug" "$bin" "$dir/prog"
}
convert() {  # input output -> exit code; stderr in conv.err
  "$GSYMPROF" gsym convert "$1" -o "$2" 2>conv.err
}

# With a build ID.
gcc -O2 -g -Wl,--build-id -o full prog.c || { fail compile; exit 1; }
convert full full.gsym || fail "unstripped conversion"
split full next
convert next/prog next.gsym || { cat conv.err; fail "debuglink next to the file"; }
grep -q "DWARF from next/prog.debug" conv.err || { cat conv.err; fail "next/prog.debug not used"; }
cmp -s full.gsym next.gsym || fail "stripped + debug file differs from the unstripped conversion"

split full sub && mkdir -p sub/.debug && mv sub/prog.debug sub/.debug/prog.debug
convert sub/prog sub.gsym || { cat conv.err; fail "debuglink in .debug/"; }
grep -q "DWARF from sub/.debug/prog.debug" conv.err || { cat conv.err; fail "sub/.debug/prog.debug not used"; }
cmp -s full.gsym sub.gsym || fail ".debug/ conversion differs"

# A debug file of another build at the debuglink name: rejected by build ID.
sed 's/i < n/i <= n/' prog.c >other.c
gcc -O2 -g -Wl,--build-id -o other other.c
split full wrong && objcopy --only-keep-debug other wrong/prog.debug
convert wrong/prog wrong.gsym
grep -q "candidate rejected: wrong/prog.debug: build ID" conv.err || { cat conv.err; fail "mismatched build ID not rejected"; }
grep -q "DWARF from" conv.err && fail "a mismatched debug file was used"

# Explicit --debug-file of another build: error.
"$GSYMPROF" gsym convert next/prog -o x.gsym --debug-file wrong/prog.debug 2>err; rc=$?
[[ $rc == 1 && $(wc -l <err) == 1 ]] && grep -q "does not match" err || { cat err; fail "--debug-file mismatch not an error"; }
[[ ! -e x.gsym ]] || fail "--debug-file mismatch wrote output"
"$GSYMPROF" gsym convert next/prog -o x.gsym --debug-file next/prog.debug 2>/dev/null && cmp -s x.gsym full.gsym ||
  fail "--debug-file with the right file"

# Without build IDs the CRC decides.
gcc -O2 -g -Wl,--build-id=none -o noid prog.c
convert noid noid.gsym || fail "noid conversion"
split noid crc
convert crc/prog crc.gsym || { cat conv.err; fail "CRC-checked debuglink"; }
grep -q "DWARF from crc/prog.debug" conv.err || { cat conv.err; fail "CRC match not used"; }
cmp -s noid.gsym crc.gsym || fail "CRC-checked conversion differs"
split noid badcrc && printf 'x' >>badcrc/prog.debug
convert badcrc/prog badcrc.gsym
grep -q "candidate rejected: badcrc/prog.debug: CRC-32 differs" conv.err || { cat conv.err; fail "CRC mismatch not rejected"; }

[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "debug files found and checked"
