#!/bin/bash
# Split DWARF (-gsplit-dwarf): programs built here with gcc and clang, C (two
# units; DWARF 5 and GNU's DWARF 4 extension) and C++ (templates, lambdas,
# namespaces, deep inlining; DWARF 5), convert to GSYM files whose lookups equal
# llvm-gsymutil's on the plain build of the same program: names, inline
# chains, files and lines, at every function start and end, every line row
# and random addresses inside functions (agree() in convert_common.bash).
# The split units come from:
#   - .dwo files in the compilation directory (DW_AT_comp_dir/DW_AT_dwo_name);
#   - .dwo files beside the binary, moved away from the build directory;
#   - a .dwp package (llvm-dwp) beside the binary as BINARY.dwp, and given
#     with --dwp PATH.
# A missing .dwo is a warning naming it (exit 0, symbols kept), a FIFO in its
# place is refused without blocking, so is a
# broken BINARY.dwp (the .dwo files are read instead); --dwp naming something
# that is no package is a one-line error (exit 1).
# Exit 0 pass, 77 skip (no gcc/clang/llvm-dwp/llvm-gsymutil), 1 fail.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
LLVM_DWP=${LLVM_DWP:-/usr/lib/llvm-22/bin/llvm-dwp}
[[ -x $LLVM_GSYMUTIL && -x $LLVM_DWP ]] || { echo "skip: $LLVM_GSYMUTIL or $LLVM_DWP not installed"; exit 77; }
for tool in gcc g++ clang clang++; do command -v $tool >/dev/null || { echo "skip: $tool not installed"; exit 77; }; done
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/compat_setup.bash"

. "$HERE/compat_programs.bash"
. "$HERE/convert_common.bash"
mkdir build && cd build && write_compat_sources

# split NAME compiler args...: NAME with -gsplit-dwarf, NAME.plain without.
split() {
  local name=$1; shift
  build "$@" -gsplit-dwarf -o $name && build "$@" -o $name.plain || return 1
  ls $name*.dwo prog.dwo lib.dwo 2>/dev/null | grep -q dwo || { fail "$name: no .dwo written"; return 1; }
}
expect_split() {  # label count: the summary counts COUNT split units
  grep -q " $2 split units from" conv.err || { cat conv.err; fail "$1: not $2 split units read"; }
}

# .dwo in the compilation directory.
for cc in gcc clang; do
  cxx=$([[ $cc == gcc ]] && echo g++ || echo clang++)
  for dw in 5 4; do
    rm -f ./*.dwo
    if split ${cc}_c_dw$dw $cc -O2 -g -gdwarf-$dw -DWITH_LIB prog.c lib.c; then
      agree ${cc}_c_dw$dw ${cc}_c_dw$dw.plain "$cc DWARF $dw C, two units, .dwo in comp_dir"
      expect_split "$cc DWARF $dw C" 2
    fi
    [[ $dw == 5 ]] || continue  # C++ at DWARF 5 only: compiling it is most of the time
    rm -f ./*.dwo
    if split ${cc}_cpp_dw$dw $cxx -O2 -g -gdwarf-$dw prog.cpp; then
      agree ${cc}_cpp_dw$dw ${cc}_cpp_dw$dw.plain "$cxx DWARF $dw C++, .dwo in comp_dir"
      expect_split "$cxx DWARF $dw C++" 1
      if [[ $cc == clang ]]; then
        timeout 20 "$LLVM_DWP" -e ${cc}_cpp_dw$dw -o ${cc}_cpp_dw$dw.dwp && rm -f ./*.dwo &&
          agree ${cc}_cpp_dw$dw ${cc}_cpp_dw$dw.plain "$cxx DWARF $dw C++, .dwp beside the binary"
        rm -f ${cc}_cpp_dw$dw.dwp
      fi
    fi
  done
done

# .dwo beside the binary, none left in the build directory.
rm -f ./*.dwo
if split moved gcc -O2 -g -DWITH_LIB prog.c lib.c; then
  mkdir ../elsewhere && mv moved moved.plain ./*.dwo ../elsewhere/
  agree ../elsewhere/moved ../elsewhere/moved.plain "gcc C, .dwo beside the binary"
  expect_split "beside" 2
  # A broken BINARY.dwp beside it: a warning, and the .dwo files still read.
  echo "not a package" >../elsewhere/moved.dwp
  "$GSYMPROF" gsym convert ../elsewhere/moved -o broken.gsym 2>conv.err || { cat conv.err; fail "broken .dwp beside: convert failed"; }
  grep -q "warning: ../elsewhere/moved.dwp: not an ELF file; looking for .dwo files instead" conv.err &&
    grep -q "2 split units from 2 .dwo files" conv.err || { cat conv.err; fail "broken .dwp beside: not warned, or .dwo not read"; }
  rm ../elsewhere/moved.dwp
  # Missing: a warning naming the file; the unit's functions from symbols.
  rm ../elsewhere/moved-lib.dwo
  "$GSYMPROF" gsym convert ../elsewhere/moved -o missing.gsym 2>conv.err || { cat conv.err; fail "missing .dwo: convert failed"; }
  grep -q "warning: ../elsewhere/moved: split DWARF file moved-lib.dwo (DWO ID 0x[0-9a-f]*) not found in $T/build or beside the binary; that unit's functions come from the symbol table only" conv.err ||
    { cat conv.err; fail "missing .dwo: no warning naming it"; }
  grep -q "1 split units from 1 .dwo files (1 missing)" conv.err || { cat conv.err; fail "missing .dwo: not counted"; }
  "$LLVM_GSYMUTIL" missing.gsym | grep -q '"lib_entry"' || fail "missing .dwo: lib_entry (symbol) lost"
  # A FIFO in its place is no .dwo: refused at once, never opened blocking.
  mkfifo ../elsewhere/moved-lib.dwo
  timeout 20 "$GSYMPROF" gsym convert ../elsewhere/moved -o fifo.gsym 2>conv.err || { cat conv.err; fail "FIFO .dwo: convert failed or hung"; }
  grep -q "moved-lib.dwo: not a regular file" conv.err || { cat conv.err; fail "FIFO .dwo: not refused"; }
  rm ../elsewhere/moved-lib.dwo
fi

# .dwp packages (llvm-dwp), beside the binary and given with --dwp.
for cc in clang gcc; do
  rm -f ./*.dwo
  if split ${cc}_pkg $cc -O2 -g -DWITH_LIB prog.c lib.c; then
    timeout 20 "$LLVM_DWP" -e ${cc}_pkg -o ${cc}_pkg.dwp || { fail "llvm-dwp ${cc}_pkg"; continue; }
    rm -f ./*.dwo
    agree ${cc}_pkg ${cc}_pkg.plain "$cc C, ${cc}_pkg.dwp beside the binary"
    grep -q "2 split units from ${cc}_pkg.dwp," conv.err || { cat conv.err; fail "$cc: the .dwp beside not used"; }
    mv ${cc}_pkg.dwp ../${cc}.package
    agree ${cc}_pkg ${cc}_pkg.plain "$cc C, --dwp ../${cc}.package" --dwp ../${cc}.package
    grep -q "2 split units from ../${cc}.package," conv.err || { cat conv.err; fail "$cc: --dwp not used"; }
  fi
done

# --dwp naming no package: one line, exit 1, no output.
"$GSYMPROF" gsym convert clang_pkg -o bad.gsym --dwp prog.c 2>err; rc=$?
[[ $rc == 1 && $(wc -l <err) == 1 && ! -e bad.gsym ]] && grep -q "prog.c: not an ELF file" err ||
  { cat err; fail "--dwp prog.c: not a one-line error"; }
"$GSYMPROF" gsym convert clang_pkg -o bad.gsym --dwp gcc_pkg.plain 2>err; rc=$?
[[ $rc == 1 && $(wc -l <err) == 1 ]] && grep -q "gcc_pkg.plain: no .debug_cu_index (not a .dwp package)" err ||
  { cat err; fail "--dwp of a binary: not a one-line error"; }

echo "split DWARF: $AGREED of $CHECKED lookups agree"
[[ $failures == 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "split DWARF read from .dwo and .dwp; lookups equal llvm-gsymutil's on the plain builds"
