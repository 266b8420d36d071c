#!/bin/bash
# gsym convert vs llvm-gsymutil --convert (LLVM 22) on programs this test
# compiles: gcc and clang, DWARF 4 and 5, -O2 -g, PIE and non-PIE, a shared
# library, C and C++ (templates, lambdas, namespaces, deep inlining), a
# function without line rows (its row from the declaration, through its
# abstract origin).
# For each binary:
#   - --threads 1 and --threads 4 give identical bytes;
#   - llvm-gsymutil dumps our file and looks addresses up in it;
#   - for every function start, every line-row address, random addresses
#     inside functions and addresses outside them, lookups in our file equal
#     lookups in LLVM's file (llvm-gsymutil and `gsymprof gsym lookup`).
# Intended difference, filtered by name: "alias-choice" - several symbols at
# one address: LLVM keeps the last in .symtab order, we keep the greatest name
# (deterministic whatever the input order); the test checks both names are
# symbols at that very address and the rest of the answer (offset, file,
# line) is the same.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
[[ -x $LLVM_GSYMUTIL ]] || { echo "skip: $LLVM_GSYMUTIL not installed"; exit 77; }
command -v gcc >/dev/null && command -v clang >/dev/null || { echo "skip: need gcc and clang"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

. "$HERE/compat_programs.bash"
. "$HERE/convert_common.bash"

write_compat_sources
for_each_compat_program compare

[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all conversions agree with llvm-gsymutil"
