#!/bin/bash
# e2e (issue 34.5): a recursion deeper than the unwinder's default limit
# (2048 frames). By default its stacks are cut there, counted as
# unwind_depth_limit, and the summary names the flag that fixes it;
# --max-depth 4096 gives the whole stack: _start, main and exactly DEPTH
# recurse frames above the spinning leaf.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

DEPTH=3000
cat >"$WORK/deep.c" <<'C'
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void spin(double seconds) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    for (int i = 0; i < 100000; ++i) sink += i;
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}
__attribute__((noinline)) static void recurse(int depth, double seconds) {
  if (depth > 1) recurse(depth - 1, seconds); else spin(seconds);
  sink += depth;  /* work after the call: no tail call */
}
int main(int argc, char** argv) {
  recurse(atoi(argv[1]), atof(argv[2]));
  return 0;
}
C
gcc -O2 -g -fno-optimize-sibling-calls -fno-inline "$WORK/deep.c" -o "$WORK/deep" || fail "cannot build the fixture"

# recurse_counts FOLDED: "SAMPLES_IN_SPIN WHOLE" where WHOLE counts the samples
# rooted at _start;__libc_start_main...;main with exactly DEPTH recurse frames.
recurse_counts() {
  awk -v depth="$DEPTH" '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
      if (s !~ /;spin(;|$)/) next; t += n
      c = split(s, f, ";"); r = 0; for (i = 1; i <= c; i++) if (f[i] == "recurse") r++
      if (r == depth && s ~ /^deep;_start;__libc_start_main[^;]*;__libc_start_call_main;main;recurse;/) h += n }
      END { printf "%d %d\n", t, h }' "$1"
}

echo "default depth limit: stacks cut at 2048 frames, the summary says how to raise it"
profile_run "$WORK/cut.folded" "$WORK/cut.err" -F 199 --stats "$WORK/cut.json" -- "$WORK/deep" "$DEPTH" 2
read -r total whole < <(recurse_counts "$WORK/cut.folded")
echo "  $total samples in spin, $whole whole"
(( total >= 100 && whole == 0 )) || fail "want >= 100 samples, none whole: $total, $whole"
grep -q 'stacks are deeper than the unwinder walks: raise --max-depth (default 2048' "$WORK/cut.err" ||
  { cat "$WORK/cut.err" >&2; fail "no hint naming --max-depth"; }
# Every sample in spin is cut at the limit; a sample taken on the way down
# may stop for another reason (counted under it): every truncation has one.
python3 - "$WORK/cut.json" "$total" <<'PY' || fail "--stats: the cut stacks are not all counted under a reason, unwind_depth_limit covering spin's"
import json, sys
s = json.load(open(sys.argv[1]))
reasons = s["truncated_by_reason"]
assert reasons["unwind_depth_limit"] >= int(sys.argv[2]), reasons
assert sum(reasons.values()) == s["truncated_stacks"], (reasons, s["truncated_stacks"])
PY

echo "--max-depth 4096: the whole stack, $DEPTH recurse frames from main"
profile_run "$WORK/whole.folded" "$WORK/whole.err" -F 199 --max-depth 4096 -- "$WORK/deep" "$DEPTH" 2
read -r total whole < <(recurse_counts "$WORK/whole.folded")
echo "  $total samples in spin, $whole whole"
(( total >= 100 && whole * 100 >= total * 95 )) ||
  { cut -c1-300 "$WORK/whole.folded" | head -3 >&2; fail "want >= 95% of the samples whole: $whole of $total"; }
grep -q 'raise --max-depth' "$WORK/whole.err" && { cat "$WORK/whole.err" >&2; fail "the hint with --max-depth 4096"; }

"$GSYMPROF" profile --max-depth 0 -- true 2>"$WORK/bad.err" && fail "--max-depth 0 accepted"
grep -q -- '--max-depth: a number of frames from 1 to 65536' "$WORK/bad.err" || { cat "$WORK/bad.err" >&2; fail "--max-depth 0: no clear error"; }
echo ok
