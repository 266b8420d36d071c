#!/bin/bash
# e2e (issue 34.2): signal frames. A program that burns CPU in a SIGALRM
# handler: its stacks run main -> pause -> the signal trampoline ->
# on_alarm -> burn. The trampoline's address is exact (the kernel made it
# the handler's return address; no call precedes it) and so is the
# interrupted code's: both are looked up as they are, not minus one, so the
# trampoline is named (__restore_rt from libc6-dbg, else [signal] from its
# 'S' CFI) and the frame below it is pause's own code. At least 90% of the
# samples in burn must show that, live and through record + symbolize.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
gcc -O2 -g "$FIXTURES/signal_burn.c" -o "$WORK/signal_burn" || fail "cannot build the fixture"

# check FOLDED WHAT
check() {
  awk -v what="$2" '
    { n = $NF; line = $0; sub(/ [0-9]+$/, "", line)
      if (line !~ /;on_alarm;burn($|;)/) next
      total += n
      # The trampoline, named, right above on_alarm, and below it a named
      # frame of the interrupted code (no libc.so.6+0x... left over).
      if (match(line, /;[^;]+;(__restore_rt|\[signal\]);on_alarm;burn/)) {
        below = substr(line, RSTART + 1); sub(/;.*/, "", below)
        if (below !~ /\+0x[0-9a-f]+$/) good += n
      } }
    END { printf "  %s: %d samples in burn, %d (%.1f%%) through a named trampoline over named interrupted code\n",
                 what, total, good, total ? 100 * good / total : 0
          exit !(total >= 50 && good * 100 >= 90 * total) }' "$1" ||
    { grep 'on_alarm;burn' "$1" | sort -t' ' -k2 -nr | head -3 | cut -c1-300 >&2; fail "$2: signal frames not right"; }
}

"$GSYMPROF" profile -F 499 -o "$WORK/live.folded" -- "$WORK/signal_burn" 2 2>"$WORK/live.err" ||
  { cat "$WORK/live.err" >&2; fail "profile failed"; }
check "$WORK/live.folded" "profile"
"$GSYMPROF" record -F 499 -o "$WORK/cap" -- "$WORK/signal_burn" 2 2>"$WORK/record.err" ||
  { cat "$WORK/record.err" >&2; fail "record failed"; }
"$GSYMPROF" symbolize -o "$WORK/offline.folded" "$WORK/cap" 2>"$WORK/symbolize.err" ||
  { cat "$WORK/symbolize.err" >&2; fail "symbolize failed"; }
check "$WORK/offline.folded" "record + symbolize"
echo "ok"
