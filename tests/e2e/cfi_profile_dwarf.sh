#!/bin/bash
# e2e (issue 6): live profiles, with the DEFAULT call graph, of fixtures built
# WITHOUT frame pointers (-O2 -g, gcc and clang): a qsort comparator called
# back from inside Debian's FP-less libc, inline frames in the hot leaf, and a
# 41-deep recursion. The expected root-to-leaf stacks (from _start, inline
# frames marked) must carry most samples, none may be cut short, and
# --call-graph dwarf,SIZE with a too-small SIZE must count what it truncated.
set -u
[[ $(id -u) == 0 ]] || { echo "SKIP: live profiling needs root"; exit 77; }
[[ -r /sys/kernel/btf/vmlinux ]] || { echo "SKIP: kernel has no BTF"; exit 77; }
: "${GSYMPROF:?GSYMPROF must name the gsymprof binary}"
[[ -x $GSYMPROF ]] || { echo "FAIL: $GSYMPROF is not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GSYMPROF_CACHE=$tmp/cache
FIXTURES=$(cd "$(dirname "$0")/fixtures" && pwd)
fail() { echo "cfi_profile_dwarf: FAIL: $*"; exit 1; }

# share COMM FOLDED EREGEX: percent of COMM's samples whose frames (after the
# comm) match EREGEX. Kernel frames (_[k], leafward: page faults, the timer)
# are left out: these are checks of the user stack's unwinding.
share() {  # (perl: mawk has no {n} intervals)
  perl -e 'my ($comm, $re) = @ARGV[0, 1]; my ($total, $hit) = (0, 0);
    open(my $in, "<", $ARGV[2]) or die;
    while (<$in>) { chomp; my ($line, $count) = /^(.*) (\d+)$/ or next;
      my ($c, $rest) = split(/;/, $line, 2); next unless $c eq $comm;
      $rest =~ s/(;[^;]*_\[k\])+$// if defined $rest;
      $total += $count; $hit += $count if ($rest // "") =~ /$re/ }
    print $total ? int(100 * $hit / $total) : 0, "\n"' "$1" "$3" "$2"
}

# expect COMM FOLDED EREGEX MIN WHAT
expect() {
  local pct
  pct=$(share "$1" "$2" "$3")
  echo "  $1: $pct% $5"
  (( pct >= $4 )) || { sort -t' ' -k2nr "$2" | head -5 >&2; fail "$1: only $pct% $5 (want >= $4%)"; }
}

profile() {  # OUT ERR ARGS...
  local out=$1 err=$2
  shift 2
  "$GSYMPROF" profile "$@" > "$out" 2> "$err" || { cat "$err"; fail "gsymprof profile $* failed"; }
}

START='^_start;__libc_start_main[^;]*;__libc_start_call_main;main'
QSORT_INTERNALS='(;[^;]*qsort[^;]*|;msort_with_tmp[^;]*)+'
for cc in gcc clang; do
  command -v $cc > /dev/null || { echo "  no $cc, skipped"; continue; }
  $cc -O2 -g -fomit-frame-pointer -o "$tmp/qsort-$cc" "$FIXTURES/qsort_callback.c" || fail "$cc: qsort fixture"
  $cc -O2 -g -fomit-frame-pointer -DDEPTH=40 -DPAD=16 -o "$tmp/recurse-$cc" "$FIXTURES/deep_recursion.c" ||
    fail "$cc: recursion fixture"
  $cc -O2 -g -fomit-frame-pointer -DDEPTH=60 -DPAD=512 -o "$tmp/bigframe-$cc" "$FIXTURES/deep_recursion.c" ||
    fail "$cc: big-frame fixture"

  echo "$cc: qsort calling back through libc, default call graph"
  profile "$tmp/q.folded" "$tmp/q.err" -F 999 -d 2 -- "$tmp/qsort-$cc" 1000000
  expect "qsort-$cc" "$tmp/q.folded" "$START;sort_round($QSORT_INTERNALS(;compare_slow(;mix(;scramble_\\[i\\])?)?|;__mem[a-z_0-9]*)?)?\$" \
    97 "complete main;sort_round[;libc qsort[;compare_slow[;mix[;scramble_[i]]]]] stacks"
  expect "qsort-$cc" "$tmp/q.folded" "$START;sort_round$QSORT_INTERNALS;compare_slow;mix(;scramble_\\[i\\])?\$" \
    80 "in the callback's leaf below libc's qsort"
  expect "qsort-$cc" "$tmp/q.folded" "$START;sort_round$QSORT_INTERNALS;compare_slow;mix;scramble_\\[i\\]\$" \
    20 "in its inlined leaf (marked _[i])"
  (( $(share "qsort-$cc" "$tmp/q.folded" '\[truncated\]') < 1 )) || fail "qsort-$cc: 1% or more of the stacks are truncated"

  echo "$cc: 41-deep recursion, default call graph"
  profile "$tmp/r.folded" "$tmp/r.err" -F 999 -- "$tmp/recurse-$cc" 4000
  expect "recurse-$cc" "$tmp/r.folded" "$START(;recurse){41};spin\$" 90 "exactly 41 recurse frames, then spin"

  echo "$cc: 61 frames of 512+ bytes: 8 KiB of stack copy is too small, 64 KiB is enough"
  profile "$tmp/b.folded" "$tmp/b.err" -F 999 --call-graph dwarf,8192 -- "$tmp/bigframe-$cc" 4000
  expect "bigframe-$cc" "$tmp/b.folded" '^\[truncated\](;recurse)+;spin$' 90 "marked [truncated], leaf side intact"
  grep -Eq 'unwind_stack_copy_too_small [1-9]' "$tmp/b.err" || { cat "$tmp/b.err"; fail "truncations not counted"; }
  profile "$tmp/b.folded" "$tmp/b.err" -F 999 --call-graph dwarf,65528 -- "$tmp/bigframe-$cc" 4000
  expect "bigframe-$cc" "$tmp/b.folded" "$START(;recurse){61};spin\$" 90 "exactly 61 recurse frames, then spin"
done

echo "record: the capture says how stacks were unwound"
"$GSYMPROF" record -d 1 -o "$tmp/c.json" --call-graph dwarf -- "$tmp/qsort-gcc" 1000000 > /dev/null 2> "$tmp/c.err" ||
  { cat "$tmp/c.err"; fail "record failed"; }
grep -q '"call_graph": *"dwarf"' "$tmp/c.json" || fail "capture does not say call_graph dwarf"
echo "cfi_profile_dwarf: ok"
