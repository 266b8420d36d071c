#!/bin/bash
# dwz (.gnu_debugaltlink, as Debian's -dbgsym packages ship): programs built
# here, their DWARF deduplicated by `dwz -m` into a shared alt file, convert
# to GSYM files whose lookups equal llvm-gsymutil's on the plain (non-dwz)
# build of the same program: names, inline chains, files and lines, at every
# function start and end, every line row and random addresses inside
# functions (agree() in convert_common.bash). The programs include extern "C"
# inline functions in nested namespaces: their names need the qualifiers of
# DIEs that dwz moved to the alt file (lost before: parents were looked up
# by offset in the main file). The alt file is found at the link's absolute
# path, relative to the debug file, and beside the debug file (also dwz -5's
# DWARF 5 .debug_sup and DW_FORM_ref_sup4/strp_sup); one with
# another build ID is rejected, and a missing one is a warning naming it.
# Exit 0 pass, 77 skip (no gcc, dwz or llvm-gsymutil), 1 fail.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
[[ -x $LLVM_GSYMUTIL ]] || { echo "skip: $LLVM_GSYMUTIL not installed"; exit 77; }
for tool in gcc g++ dwz; do command -v $tool >/dev/null || { echo "skip: $tool not installed"; exit 77; }; done
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

. "$HERE/compat_programs.bash"
. "$HERE/convert_common.bash"
write_compat_sources
cat > qual.h <<'SRC'
namespace outer { namespace inner {
extern "C" inline __attribute__((always_inline)) int qual_leaf(int x) { return x * 3 + 1; }
extern "C" inline __attribute__((always_inline)) int qual_mid(int x) { int s = 0; for (int i = 0; i < x; i++) s += qual_leaf(i) ^ i; return s; }
} }
SRC
for i in 1 2; do
  cat > q$i.cpp <<SRC
#include "qual.h"
#include <cstdio>
namespace app$i { extern "C" __attribute__((noinline)) int work$i(int n) { return outer::inner::qual_mid(n) + $i; } }
int main(int argc, char**) { std::printf("%d\n", app$i::work$i(argc * 10)); return 0; }
SRC
done

# pair NAME1 NAME2 LINK compiler-args-1 -- compiler-args-2: builds both
# (NAME.plain kept), then dwz -m into alt.NAME1 with link path LINK.
pair() {
  local a=$1 b=$2 link=$3; shift 3
  local args_a=() args_b=()
  while [[ $1 != -- ]]; do args_a+=("$1"); shift; done; shift
  args_b=("$@")
  build "${args_a[@]}" -o $a && build "${args_b[@]}" -o $b || return 1
  cp $a $a.plain && cp $b $b.plain
  dwz ${DWZ_ARGS:-} -m alt.$a -M "$link" $a $b 2>dwz.err || { cat dwz.err; fail "dwz -m $a $b"; return 1; }
  readelf -S $a | grep -q 'gnu_debugaltlink\|debug_sup' || { fail "$a: dwz wrote no .gnu_debugaltlink"; return 1; }
}

# Qualifiers from the alt file (absolute link path).
if pair q1 q2 "$T/alt.q1" g++ -O2 -g q1.cpp -- g++ -O2 -g q2.cpp; then
  agree q1 q1.plain "qualified inline names from the alt file (g++ DWARF 5)"
  agree q2 q2.plain "second file of the pair"
  "$LLVM_GSYMUTIL" agree.ours.gsym | grep -q '"outer::inner::qual_mid"' || fail "q2: outer::inner::qual_mid not named"
fi
# C++ (templates, lambdas, namespaces, deep inlining) at two optimization
# levels, the link relative to the debug file's directory.
if pair cpp_o2 cpp_o1 alt.cpp_o2 g++ -O2 -g prog.cpp -- g++ -O1 -g prog.cpp; then
  agree cpp_o2 cpp_o2.plain "g++ -O2 C++, relative link"
  agree cpp_o1 cpp_o1.plain "g++ -O1 C++, relative link"
fi
# dwz -5: DWARF 5's .debug_sup and DW_FORM_ref_sup4/strp_sup; the
# supplementary file has no build ID note, its own .debug_sup's checksum
# identifies it.
if DWZ_ARGS=-5 pair s1 s2 "$T/alt.s1" g++ -O2 -g q1.cpp -- g++ -O2 -g q2.cpp; then
  readelf -S s1 | grep -q debug_sup || fail "dwz -5 wrote no .debug_sup"
  agree s1 s1.plain "dwz -5 supplementary file (.debug_sup)"
fi
# C, two compile units, DWARF 4.
if pair c_multi c_one "$T/alt.c_multi" gcc -O2 -g -gdwarf-4 -DWITH_LIB prog.c lib.c -- gcc -O2 -g -gdwarf-4 prog.c; then
  agree c_multi c_multi.plain "gcc DWARF 4 C, two units"
  agree c_one c_one.plain "gcc DWARF 4 C"
fi

# The link names a directory that does not exist: the alt file beside the
# debug file (its file name) is used.
mkdir -p moved
if pair m1 m2 /nonexistent/dwz/alt.moved g++ -O2 -g q1.cpp -- g++ -O2 -g q2.cpp; then
  mv alt.m1 alt.moved
  agree m1 m1.plain "alt file beside the debug file"
  grep -q "dwz alt file $T/alt.moved" conv.err || { cat conv.err; fail "alt file beside: not reported as used"; }
  # Another build's file in its place: rejected by build ID, then missing.
  cp alt.cpp_o2 alt.moved
  "$GSYMPROF" gsym convert m1 -o wrong.gsym 2>conv.err || { cat conv.err; fail "wrong alt file: convert failed"; }
  grep -q "warning: m1: dwz alt file /nonexistent/dwz/alt.moved (build ID [0-9a-f]*) not found; $T/alt.moved: build ID [0-9a-f]* is not the linked one; names and qualifiers of DIEs in it are missing" conv.err ||
    { cat conv.err; fail "alt file of another build: no warning naming it"; }
  # Missing: a warning naming the wanted file; the functions are all there.
  rm alt.moved
  "$GSYMPROF" gsym convert m1 -o missing.gsym 2>conv.err || { cat conv.err; fail "missing alt file: convert failed"; }
  grep -q "warning: m1: dwz alt file /nonexistent/dwz/alt.moved (build ID [0-9a-f]*) not found; names and qualifiers of DIEs in it are missing" conv.err ||
    { cat conv.err; fail "missing alt file: no warning naming it"; }
  "$GSYMPROF" gsym convert m1.plain -o plain.gsym 2>/dev/null
  [[ $("$LLVM_GSYMUTIL" missing.gsym | grep -c '^FunctionInfo') == $("$LLVM_GSYMUTIL" plain.gsym | grep -c '^FunctionInfo') ]] ||
    fail "missing alt file: functions lost"
fi

echo "dwz: $AGREED of $CHECKED lookups agree"
[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "dwz alt files read; lookups equal llvm-gsymutil's on the plain builds"
