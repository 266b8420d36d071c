#!/bin/bash
# e2e (issue 13): with the DEFAULT call graph, a stack of 200 frames of 1 KiB
# locals each (over 200 KiB below main) inside a shared library, all built
# WITHOUT frame pointers, unwinds to main: the kernel copies the live part of
# the stack, however deep, up to the default cap. Checked live (profile --
# CMD) and through record + symbolize; an explicit small cap
# (--call-graph dwarf,SIZE) truncates, and the summary says which flag fixes it;
# an unreadable page inside the stack ends the copy exactly there.
set -u
[[ $(id -u) == 0 ]] || { echo "SKIP: live profiling needs root"; exit 77; }
[[ -r /sys/kernel/btf/vmlinux ]] || { echo "SKIP: kernel has no BTF"; exit 77; }
: "${GSYMPROF:?GSYMPROF must name the gsymprof binary}"
[[ -x $GSYMPROF ]] || { echo "FAIL: $GSYMPROF is not built"; exit 1; }
command -v gcc > /dev/null || { echo "SKIP: no gcc"; exit 77; }
FIXTURE=$(cd "$(dirname "$0")/fixtures/deep_stack" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GSYMPROF_CACHE=$tmp/cache
fail() { echo "deep_stack_dwarf: FAIL: $*"; exit 1; }

cflags=(-O2 -g -fomit-frame-pointer)
gcc "${cflags[@]}" -fPIC -shared "$FIXTURE/libdeep.c" -o "$tmp/libdeep.so" &&
  gcc "${cflags[@]}" -I"$FIXTURE" "$FIXTURE/deep_main.c" -L"$tmp" -ldeep -Wl,-rpath,'$ORIGIN' \
    -o "$tmp/deep_fixture" || fail "cannot build the fixture"
# No frame pointers: the recursion's frames save no rbp.
objdump -d --no-show-raw-insn "$tmp/libdeep.so" |
  awk '/<deep_recurse>:/ {f=1; next} f && /^$/ {exit} f' | grep -q 'push *%rbp' &&
  fail "deep_recurse was built with a frame pointer"

DEPTH=200
ROUNDS=1500  # about 1.5 s
COMPLETE="^_start;__libc_start_main[^;]*;__libc_start_call_main;main(;deep_recurse){$DEPTH};deep_spin\$"

# complete FOLDED: percent of deep_fixture's samples whose user stack is the
# whole recursion from _start (kernel frames, leafward, left out).
complete() {
  perl -e 'my ($re) = $ARGV[0]; my ($total, $hit) = (0, 0);
    open(my $in, "<", $ARGV[1]) or die;
    while (<$in>) { chomp; my ($line, $count) = /^(.*) (\d+)$/ or next;
      my ($c, $rest) = split(/;/, $line, 2); next unless $c eq "deep_fixture";
      $rest =~ s/(;[^;]*_\[k\])+$// if defined $rest;
      $total += $count; $hit += $count if ($rest // "") =~ /$re/ }
    print $total >= 200 ? int(100 * $hit / $total) : "too-few:$total", "\n"' "$COMPLETE" "$1"
}
expect_complete() {  # FOLDED WHAT
  local pct
  pct=$(complete "$1")
  echo "  $2: $pct% of the samples reach main through $DEPTH frames"
  [[ $pct =~ ^[0-9]+$ ]] && (( pct >= 95 )) ||
    { sort -t' ' -k2nr "$1" | head -3 | cut -c1-400 >&2; fail "$2: $pct% complete (want >= 95%)"; }
}

echo "live, default options (-v: every counter and the ring buffer in the summary)"
"$GSYMPROF" profile -v -F 999 -- "$tmp/deep_fixture" $DEPTH $ROUNDS > "$tmp/live.folded" 2> "$tmp/live.err" ||
  { cat "$tmp/live.err"; fail "profile failed"; }
expect_complete "$tmp/live.folded" "profile"
grep -q 'unwind_stack_copy_too_small 0' "$tmp/live.err" || { cat "$tmp/live.err"; fail "copies too small"; }
grep -Eq 'ringbuf_full 0\b' "$tmp/live.err" || { cat "$tmp/live.err"; fail "samples dropped"; }
# The records carry the live stack, not the cap: ~205 KiB here.
bytes=$(sed -n 's/.*ring buffer: [0-9]* KiB, \([0-9]*\) bytes per sample record.*/\1/p' "$tmp/live.err")
[[ -n $bytes ]] && (( bytes > 200 * 1024 && bytes < 256 * 1024 )) ||
  { cat "$tmp/live.err"; fail "bytes per record '$bytes' not the live stack's"; }

echo "record + symbolize"
"$GSYMPROF" record -F 999 -o "$tmp/deep.json" -- "$tmp/deep_fixture" $DEPTH $ROUNDS > /dev/null 2> "$tmp/rec.err" ||
  { cat "$tmp/rec.err"; fail "record failed"; }
"$GSYMPROF" symbolize "$tmp/deep.json" > "$tmp/sym.folded" 2> "$tmp/sym.err" ||
  { cat "$tmp/sym.err"; fail "symbolize failed"; }
expect_complete "$tmp/sym.folded" "record + symbolize"

echo "an explicit 64 KiB cap truncates, and the summary names the flag"
"$GSYMPROF" profile -F 999 --call-graph dwarf,65536 -- "$tmp/deep_fixture" $DEPTH 300 \
  > "$tmp/small.folded" 2> "$tmp/small.err" || { cat "$tmp/small.err"; fail "profile (64 KiB) failed"; }
grep -Eq 'unwind_stack_copy_too_small [1-9]' "$tmp/small.err" || { cat "$tmp/small.err"; fail "truncation not counted"; }
grep -q 'to unwind them further: [0-9]* stacks are deeper than the copied user stack: copy more with --call-graph dwarf,SIZE' \
  "$tmp/small.err" || { cat "$tmp/small.err"; fail "no hint naming --call-graph dwarf,SIZE"; }
grep -q '^deep_fixture;\[truncated\];' "$tmp/small.folded" || fail "64 KiB copies not marked [truncated]"
echo "an unreadable page inside the live stack ends the copy there, not a piece earlier"
# main makes a page of its own frame PROT_NONE above a 40-level recursion,
# about 50 KiB from the stack pointer: inside the copy's first 64 KiB piece.
# The copy must keep every byte below that page (to the byte: main's return
# address may lie just below it), so the 40 levels and main unwind, and the
# summary says why the stack ends there.
"$GSYMPROF" profile -F 999 -- "$tmp/deep_fixture" 40 1000 hole > "$tmp/hole.folded" 2> "$tmp/hole.err" ||
  { cat "$tmp/hole.err"; fail "profile (hole) failed"; }
pct=$(perl -e 'my ($total, $hit) = (0, 0); open(my $in, "<", $ARGV[0]) or die;
  while (<$in>) { chomp; my ($line, $count) = /^(.*) (\d+)$/ or next;
    my ($c, $rest) = split(/;/, $line, 2); next unless $c eq "deep_fixture" && ($rest // "") =~ /deep_spin/;
    $total += $count; $hit += $count if $rest =~ /^\[truncated\];main;(deep_recurse;){40}deep_spin$/ }
  print $total >= 100 ? int(100 * $hit / $total) : "too-few:$total", "\n"' "$tmp/hole.folded")
echo "  $pct% of the samples keep main and all 40 levels below the unreadable page"
[[ $pct =~ ^[0-9]+$ ]] && (( pct >= 95 )) ||
  { sort -t' ' -k2nr "$tmp/hole.folded" | head -3 | cut -c1-300 >&2; fail "hole: $pct% (want >= 95%)"; }
grep -Eq 'unwind_unreadable_memory [1-9]' "$tmp/hole.err" || { cat "$tmp/hole.err"; fail "unreadable stack not counted"; }
echo "deep_stack_dwarf: ok"
