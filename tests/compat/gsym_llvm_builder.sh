#!/bin/bash
# Our builder against LLVM's writer: programs compiled here (gcc and clang,
# -O2 -g, inlining, C++ templates/lambdas, call sites, ICF-merged functions,
# a static binary full of symbol aliases) are converted by
# `llvm-gsymutil --convert --num-threads=1`; tests/tools/gsym_reencode.cpp
# decodes each file with our Reader and re-encodes it with our Builder
# (tests/tools/gsym_from_symbols.cpp rebuilds symbol-only files, below).
#  - strings re-added in offset order, deduplicate=false: bytes identical (cmp);
#  - big-endian copy, and builder-chosen string order with functions added in
#    a scrambled order (finalize on): llvm-gsymutil --address answers equal
#    LLVM's on every function start/end, line-row address, inline range
#    boundary and a few addresses outside every function.
# Exit 0 pass, 77 skip (no llvm-gsymutil / compilers), 1 fail.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
GSYMUTIL=${GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
[[ -x $GSYMUTIL ]] || { echo "skip: $GSYMUTIL not installed"; exit 77; }
for tool in gcc g++ clang clang++; do
  command -v $tool >/dev/null || { echo "skip: $tool not installed"; exit 77; }
done
TOOLS=$BUILD/test-tools
for tool in gsym_reencode gsym_from_symbols; do
  [[ -x $TOOLS/$tool ]] || { echo "FAIL: $TOOLS/$tool not built (make BUILD=$BUILD test-tools)"; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- fixture programs -------------------------------------------------------
mkdir -p "$tmp/src"
cat > "$tmp/src/chain.h" <<'EOF'
static inline int leaf(int x) { return x * x + 1; }
static inline int mid3(int x) { return leaf(x) + leaf(x + 1); }
static inline int mid2(int x) { return mid3(x) * 3 + mid3(x - 1); }
static inline int top1(int x) { return mid2(x) + mid2(x * 2); }
EOF
cat > "$tmp/src/main.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "chain.h"
int other(int n);
int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += top1(i); return s; }
static int rare(int x) {
  if (__builtin_expect(x == 12345, 0)) { fprintf(stderr, "rare %d\n", x); abort(); }
  return x + 1;
}
int main(int argc, char **argv) {
  (void)argv;
  printf("%d %d %d\n", work(argc * 100), other(argc), rare(argc));
  return 0;
}
EOF
cat > "$tmp/src/other.c" <<'EOF'
#include "chain.h"
static inline int twist(int x) { return (x << 3) ^ top1(x); }
int other(int n) { int s = 0; for (int i = 0; i < n * 7; i++) s ^= twist(i) + mid2(s); return s; }
EOF
cat > "$tmp/src/prog.cpp" <<'EOF'
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
namespace ns { namespace inner {
template <typename T> struct Widget {
  T value;
  T compute(T x) const { auto f = [this](T y) { return y * value + 1; }; return f(x) + f(x + 1); }
};
} }
template <typename T> static T accumulate_all(const std::vector<T>& v) {
  T s{}; for (const T& x : v) s += ns::inner::Widget<T>{x}.compute(x); return s;
}
int main(int argc, char**) {
  std::vector<int> v; for (int i = 0; i < argc * 50; ++i) v.push_back((i * 7919) % 101);
  std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
  std::map<std::string, int> m; m["a"] = accumulate_all(v);
  std::vector<double> d(v.begin(), v.end());
  std::printf("%d %f\n", m["a"], accumulate_all(d));
  return 0;
}
EOF
cat > "$tmp/src/calls.c" <<'EOF'
#include <stdio.h>
__attribute__((noinline)) int helper(int x) { return x * 3; }
__attribute__((noinline)) int twice(int x) { int a = helper(x); printf("%d\n", a); return helper(a) + 1; }
int main(int c, char **v) { (void)v; return twice(c); }
EOF
cat > "$tmp/src/icf.c" <<'EOF'
int foo_a(int x) { return x * 7 + 3; }
int foo_b(int x) { return x * 7 + 3; }
int main(int c, char **v) { (void)v; return foo_a(c) + foo_b(c + 1); }
EOF

failures=0
checked=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

lookups() {  # gsym-file addresses-file [extra gsymutil flags] -> stdout
  local gsym=$1 addrs=$2; shift 2
  sed "s|\$| $gsym|" "$addrs" | "$GSYMUTIL" --addresses-from-stdin "$@"
}

# case name, convert flags, lookup flags, expected dump pattern, compile command...
check() {
  local name=$1; shift
  local dir="$tmp/$name"
  mkdir -p "$dir"
  if ! (cd "$tmp/src" && "${@:4}" -o "$dir/prog") > "$dir/cc.log" 2>&1; then
    fail "$name: compile failed: $(head -3 "$dir/cc.log")"; return
  fi
  check_binary "$name" "$dir/prog" "$1" "$2" "$3"
}

# case name, ELF file, convert flags, lookup flags, expected dump pattern
check_binary() {
  local name=$1 input=$2 convert_flags=$3 lookup_flags=$4 must_have=$5
  local dir="$tmp/$name"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  if ! "$GSYMUTIL" --convert "$input" -o "$dir/llvm.gsym" --num-threads=1 --quiet \
       $convert_flags > "$dir/convert.log" 2>&1; then
    fail "$name: llvm-gsymutil --convert failed: $(tail -1 "$dir/convert.log")"; return
  fi
  if [[ -n $must_have ]] && ! "$GSYMUTIL" "$dir/llvm.gsym" | grep -q "$must_have"; then
    fail "$name: fixture has no '$must_have' records (fixture no longer tests them)"; return
  fi
  if ! "$TOOLS/gsym_reencode" --addresses="$dir/addrs" "$dir/llvm.gsym" "$dir/ours.gsym"; then
    fail "$name: re-encode failed"; return
  fi
  if ! cmp "$dir/llvm.gsym" "$dir/ours.gsym"; then
    fail "$name: re-encoded bytes differ from LLVM's ($(stat -c %s "$dir/llvm.gsym") vs $(stat -c %s "$dir/ours.gsym") bytes)"
  fi
  "$TOOLS/gsym_reencode" --big-endian "$dir/llvm.gsym" "$dir/big.gsym" || { fail "$name: big-endian re-encode failed"; return; }
  "$TOOLS/gsym_reencode" --own-strings --shuffle "$dir/llvm.gsym" "$dir/own.gsym" || { fail "$name: own-order re-encode failed"; return; }
  if [[ $(head -c4 "$dir/big.gsym") != GSYM ]]; then fail "$name: big-endian copy lacks the GSYM magic"; fi

  # shellcheck disable=SC2086
  lookups "$dir/llvm.gsym" "$dir/addrs" $lookup_flags > "$dir/llvm.out"
  local n_addrs n_found
  n_addrs=$(wc -l < "$dir/addrs")
  n_found=$(grep -E '^ *0x[0-9a-f]+: ' "$dir/llvm.out" | grep -vc ': error: ')
  if (( n_addrs < 10 || n_found < 5 )); then
    fail "$name: too few probes ($n_addrs addresses, $n_found found)"; return
  fi
  for variant in ours big own; do
    # shellcheck disable=SC2086
    lookups "$dir/$variant.gsym" "$dir/addrs" $lookup_flags > "$dir/$variant.out"
    if ! diff -q "$dir/llvm.out" "$dir/$variant.out" > /dev/null; then
      fail "$name: llvm-gsymutil answers differ on our $variant file:"
      diff "$dir/llvm.out" "$dir/$variant.out" | head -10
    fi
  done
  checked=$((checked + 1))
  echo "   $name: identical bytes ($(stat -c %s "$dir/llvm.gsym") B), $n_addrs addresses agree ($n_found found)"
}

C_SRCS="main.c other.c"
check gcc-dwarf5 "" "" InlineInfo gcc -O2 -g $C_SRCS
check gcc-dwarf4 "" "" InlineInfo gcc -O2 -g -gdwarf-4 $C_SRCS
check clang-dwarf5 "" "" InlineInfo clang -O2 -g -gdwarf-5 $C_SRCS
check gcc-nopie "" "" InlineInfo gcc -O2 -g -fno-pie -no-pie $C_SRCS
check g++-templates "" "" InlineInfo g++ -O2 -g prog.cpp
check clang++-templates "" "" InlineInfo clang++ -O2 -g prog.cpp
check clang-callsites --dwarf-callsites "" CallSites clang -O2 -gdwarf-5 calls.c
check gold-icf-merged --merged-functions --merged-functions "Merged FunctionInfos" \
  gcc -O2 -g -fno-ipa-icf -fno-inline -ffunction-sections -fuse-ld=gold -Wl,--icf=all icf.c
check gcc-static-aliases "" "" "" gcc -O2 -g -static $C_SRCS
expected=9

# libc's separate debug file (libc6-dbg): thousands of functions, aliases and
# "Duplicate address ranges with different debug info".
libc_id=$(readelf -n /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null | awk '/Build ID/ {print $3}')
libc_debug=/usr/lib/debug/.build-id/${libc_id:0:2}/${libc_id:2}.debug
if [[ -n $libc_id && -f $libc_debug ]]; then
  check_binary libc-debug "$libc_debug" "" "" InlineInfo
  expected=10
else
  echo "   note: no libc debug file ($libc_debug), libc case not run"
fi

# --- symbol tables only: our finalize against LLVM's ----------------------
# llvm-gsymutil converts a binary without DWARF from .symtab alone (names
# interned and functions added in symbol order); gsym_from_symbols replays
# that list with LLVM's insertion-order ties: bytes must match (aliases,
# overlaps, zero-size symbols swallowed or kept, trailing one extended). With
# the default content tiebreak, forward and reversed insertion must agree.
symbol_list() {  # ELF -> list for gsym_from_symbols
  readelf -lW "$1" | awk '$1 == "LOAD" {print "base", $3; exit}'
  readelf -nW "$1" | sed -n 's/.*Build ID: *\([0-9a-fA-F]*\).*/build_id \1/p'
  readelf -SW "$1" | sed -E 's/^ *\[ *[0-9]+\] *//' |
    awk 'NF >= 7 && $7 ~ /X/ && $5 !~ /^0+$/ {print "text 0x" $3, "0x" $5}'
  readelf -sW "$1" | awk '$4 == "FUNC" && NF >= 8 {print "func 0x" $2, $3, $8}'
}
check_symbols() {  # name ELF
  local name=$1 elf=$2 dir="$tmp/$1"
  mkdir -p "$dir"
  if ! "$GSYMUTIL" --convert "$elf" -o "$dir/llvm.gsym" --num-threads=1 --quiet > "$dir/convert.log" 2>&1; then
    fail "$name: llvm-gsymutil --convert failed: $(tail -1 "$dir/convert.log")"; return
  fi
  symbol_list "$elf" > "$dir/symbols"
  local pruned
  pruned=$(sed -n 's/^Pruned \([0-9]*\) functions.*/\1/p' "$dir/convert.log")
  if ! "$TOOLS/gsym_from_symbols" "$dir/symbols" "$dir/ours.gsym"; then
    fail "$name: gsym_from_symbols failed"; return
  fi
  if ! cmp "$dir/llvm.gsym" "$dir/ours.gsym"; then fail "$name: symbol-table GSYM differs from LLVM's"; return; fi
  if ! "$TOOLS/gsym_from_symbols" --content-ties "$dir/symbols" "$dir/forward.gsym" ||
     ! "$TOOLS/gsym_from_symbols" --content-ties --reverse "$dir/symbols" "$dir/reverse.gsym"; then
    fail "$name: gsym_from_symbols --content-ties failed"; return
  fi
  if ! cmp "$dir/forward.gsym" "$dir/reverse.gsym"; then
    fail "$name: content-tie output depends on insertion order"; return
  fi
  checked=$((checked + 1))
  echo "   $name: identical bytes ($(stat -c %s "$dir/llvm.gsym") B, $(grep -c ^func "$dir/symbols") symbols, LLVM pruned ${pruned:-?}); order-independent with content ties"
}

cat > "$tmp/src/syms.s" <<'EOF'
    .text
    .globl _start, alias_b, alias_a, outer, inner, zero_inside, zero_then_sized, sized_same_start, lonely_zero, trailing
    .type _start,@function; .type alias_b,@function; .type alias_a,@function; .type outer,@function
    .type inner,@function; .type zero_inside,@function; .type zero_then_sized,@function
    .type sized_same_start,@function; .type lonely_zero,@function; .type trailing,@function
_start: nop; nop; nop; nop; nop; nop; nop; ret
    .size _start, .-_start
    .p2align 4
alias_b:
alias_a: nop; nop; nop; ret
    .size alias_b, 4
    .size alias_a, 4
    .p2align 4
outer: nop; nop; nop; nop; nop; nop; nop; nop
inner: nop; nop; nop; nop
    .size inner, 4
zero_inside: nop; nop; nop; ret
    .size outer, .-outer
    .p2align 4
zero_then_sized:
sized_same_start: nop; nop; ret
    .size sized_same_start, 3
    .p2align 4
lonely_zero: nop; nop; nop; nop
    .p2align 4
trailing: nop; nop; nop; nop; nop; ret
EOF
mkdir -p "$tmp/bin"
if gcc -nostdlib -static -no-pie -Wl,--build-id=sha1 "$tmp/src/syms.s" -o "$tmp/bin/syms" 2> "$tmp/bin/syms.log"; then
  check_symbols symbols-handmade "$tmp/bin/syms"
else
  fail "symbols-handmade: assembly failed: $(head -2 "$tmp/bin/syms.log")"
fi
if (cd "$tmp/src" && gcc -O2 -g -static $C_SRCS -o "$tmp/bin/static") 2> "$tmp/bin/static.log" &&
   objcopy --strip-debug "$tmp/bin/static" "$tmp/bin/static-nodebug"; then
  check_symbols symbols-static-libc "$tmp/bin/static-nodebug"
else
  fail "symbols-static-libc: build failed: $(head -2 "$tmp/bin/static.log")"
fi
expected=$((expected + 2))

echo "checked $checked of $expected programs, $failures failure(s)"
[[ $failures == 0 && $checked == "$expected" ]]
