#!/bin/bash
# gsym convert on the real libc: /lib/x86_64-linux-gnu/libc.so.6 is stripped
# (.dynsym only); its DWARF comes from Debian's libc6-dbg, found by build ID
# under /usr/lib/debug/.build-id/. Lookups must agree with llvm-gsymutil
# converting that debug file (function starts, every line row, random
# addresses inside functions), except for the named "alias-choice" rule
# (libc has many symbols per address: __GI_*, versioned names).
# Also: --debug-file gives the same bytes, and --threads 1 / 4 agree.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
LIBC=/lib/x86_64-linux-gnu/libc.so.6
[[ -x $LLVM_GSYMUTIL ]] || { echo "skip: $LLVM_GSYMUTIL not installed"; exit 77; }
[[ -f $LIBC ]] || { echo "skip: no $LIBC"; exit 77; }
id=$(readelf -n "$LIBC" | awk '/Build ID/ { print $3 }')
debug=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
[[ -f $debug ]] || { echo "skip: libc6-dbg not installed ($debug missing)"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"
. "$HERE/convert_common.bash"

cp "$LIBC" libc.so.6   # a copy: the search must work from any directory
"$GSYMPROF" gsym convert libc.so.6 -o found.gsym --threads 1 2>summary || { cat summary; fail "convert libc"; }
grep -q "DWARF from $debug" summary || { cat summary; fail "debug file not found by build ID"; }
"$GSYMPROF" gsym convert libc.so.6 -o explicit.gsym --threads 1 --debug-file "$debug" 2>/dev/null ||
  fail "convert with --debug-file"
cmp -s found.gsym explicit.gsym || fail "--debug-file and the build-ID search give different files"
# The header carries libc's build ID.
"$LLVM_GSYMUTIL" found.gsym | grep -q "UUID *= $id" || fail "build ID not in the header"

LLVM_INPUT=$debug
compare libc.so.6 "libc.so.6 + libc6-dbg" "$debug"
[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
