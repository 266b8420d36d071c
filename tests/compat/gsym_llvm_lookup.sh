#!/bin/bash
# Our `gsym lookup` must print exactly what `llvm-gsymutil --address` prints on
# GSYM files written by llvm-gsymutil 22: every byte address of every function,
# addresses just past each function, and addresses outside all functions.
# Fixtures: small C and C++ programs (static inline helpers in a header,
# templates, lambdas, deep inlining) built with gcc and clang at -O2 -g, plus
# libc's debug file (sampled addresses) when libc6-dbg is installed.
set -u
LLVM_GSYMUTIL=${LLVM_GSYMUTIL:-/usr/lib/llvm-22/bin/llvm-gsymutil}
GSYMPROF=${GSYMPROF:-build/gsymprof}
for tool in "$LLVM_GSYMUTIL" gcc g++ clang clang++; do
  command -v "$tool" >/dev/null || { echo "skip: $tool not found"; exit 77; }
done
[[ -x $GSYMPROF ]] || { echo "FAIL: $GSYMPROF not built"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

cat > util.h <<'SRC'
static inline int leaf(int x) { return x * x + 3; }
static inline int middle(int x) { int s = 0; for (int i = 0; i < x; ++i) s += leaf(i ^ x); return s; }
static inline int outer(int x) { return middle(x) + middle(x + 1) * 2; }
SRC
cat > prog.c <<'SRC'
#include <stdio.h>
#include <stdlib.h>
#include "util.h"
struct node { int v; struct node* next; };
__attribute__((noinline)) int compute(int n) { return outer(n) + leaf(n); }
__attribute__((noinline)) static int walk(struct node* p) { int s = 0; while (p) { s += middle(p->v); p = p->next; } return s; }
int main(int argc, char** argv) {
  struct node b = {argc, 0}, a = {argc + 1, &b};
  int n = argc > 1 ? atoi(argv[1]) : 5;
  printf("%d %d\n", compute(n), walk(&a));
  return 0;
}
SRC
cat > prog.cpp <<'SRC'
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
#include "util.h"
namespace geo {
template <class T> struct Box {
  T lo, hi;
  T span() const { return hi - lo; }
  template <class F> T fold(F f) const { return f(lo) + f(hi); }
};
template <class T> static inline T clamp_span(const Box<T>& b) { return std::max<T>(b.span(), T(0)); }
}  // namespace geo
__attribute__((noinline)) int score(const std::vector<int>& v) {
  int total = 0;
  std::for_each(v.begin(), v.end(), [&](int x) { total += outer(x & 7); });
  geo::Box<int> b{int(v.size()), total};
  return total + geo::clamp_span(b) + b.fold([](int x) { return leaf(x); });
}
int main(int argc, char** argv) {
  std::vector<int> v;
  std::map<std::string, int> m;
  for (int i = 0; i < argc + 10; ++i) { v.push_back(i * 3); m[std::to_string(i)] = i; }
  std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
  std::printf("%d %zu %s\n", score(v), m.size(), argv[0]);
  return 0;
}
SRC

fail=0
check() {  # name gsym-file address-file
  local name=$1 gsym=$2 addrs=$3
  if ! "$GSYMPROF" gsym verify "$gsym" > verify.out 2> verify.err; then
    echo "FAIL: $name: gsym verify: $(cat verify.err)"; fail=1
  fi
  sed "s|\$| $gsym|" "$addrs" | "$LLVM_GSYMUTIL" --addresses-from-stdin 2>&1 \
    | grep -v '^Looking up addresses in' | grep -v '^$' > "$name.llvm"
  "$GSYMPROF" gsym lookup "$gsym" < "$addrs" > "$name.ours" 2> "$name.err"
  local rc=$?
  if [[ $rc != 0 ]]; then echo "FAIL: $name: gsym lookup exit $rc: $(head -1 "$name.err")"; fail=1; return; fi
  local n; n=$(wc -l < "$addrs")
  if (( n < 500 )); then echo "FAIL: $name: only $n addresses extracted from gsym dump"; fail=1; return; fi
  if ! cmp -s "$name.llvm" "$name.ours"; then
    echo "FAIL: $name: lookup output differs from llvm-gsymutil ($n addresses):"
    diff "$name.llvm" "$name.ours" | head -20
    fail=1
  else
    echo "ok: $name: $n addresses identical ($(grep -c inlined "$name.ours") inlined frames)"
  fi
}

# Every byte of every function (zero-size ones: 64 bytes from the start),
# 4 bytes past each end, and addresses outside everything.
addresses_from_dump() {  # gsym-file step
  "$GSYMPROF" gsym dump "$1" | perl -ne '
    BEGIN { $step = shift @ARGV }
    if (/^FunctionInfo\[\d+\]: \[0x([0-9a-f]+) - 0x([0-9a-f]+)\)/) {
      my ($s, $e) = (hex $1, hex $2);
      $e = $s + 64 if $e <= $s;
      for (my $a = $s; $a < $e + 4; $a += $step) { printf "0x%x\n", $a }
      printf "0x%x\n", $s - 1 if $s > 0;
    }
    END { print "0\n1\n0xffffffffffffffff\n0x7fffffffffffffff\n" }' "$2"
}

for cc in gcc clang; do
  cxx=g++; [[ $cc == clang ]] && cxx=clang++
  for lang in c cpp; do
    comp=$cc; src=prog.c
    [[ $lang == cpp ]] && { comp=$cxx; src=prog.cpp; }
    bin=prog-$cc-$lang
    if ! $comp -O2 -g -o "$bin" "$src" 2> build.err; then
      echo "FAIL: cannot build $bin: $(head -1 build.err)"; exit 1
    fi
    if ! "$LLVM_GSYMUTIL" --convert "$bin" -o "$bin.gsym" --num-threads=1 > convert.out 2>&1; then
      echo "FAIL: llvm-gsymutil --convert $bin: $(tail -1 convert.out)"; exit 1
    fi
    addresses_from_dump "$bin.gsym" 1 > "$bin.addrs"
    check "$bin" "$bin.gsym" "$bin.addrs"
  done
done

# A real library: libc's debug file, every 61st byte of every function.
libc_debug=$(find /usr/lib/debug/.build-id -name '*.debug' -size +3M 2>/dev/null | head -1)
if [[ -n $libc_debug ]] && "$LLVM_GSYMUTIL" --convert "$libc_debug" -o libc.gsym --num-threads=1 > convert.out 2>&1; then
  addresses_from_dump libc.gsym 61 > libc.addrs
  check libc libc.gsym libc.addrs
else
  echo "note: libc debug file not available, skipped that part"
fi

if [[ $fail != 0 ]]; then echo "FAIL: gsym_llvm_lookup"; exit 1; fi
echo "PASS: gsym_llvm_lookup"
exit 0
