#!/bin/bash
# e2e (issue 33.4): gsymprof never profiles itself. System-wide, its own
# process and threads (the reader, the GSYM prefetcher converting as it
# samples) are left out in the kernel (self_tgid); with -- CMD, the command
# is gsymprof's copy until it execs, and those samples are dropped. Neither
# profile may hold a stack whose comm is gsymprof's.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

# A busy command that execs often, so the launch and the execs are sampled.
"$GSYMPROF" profile -F 999 -o "$WORK/cmd.folded" -- \
  sh -c 'for i in $(seq 200); do /bin/true; done; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' \
  2>"$WORK/cmd.err" || { cat "$WORK/cmd.err" >&2; fail "profile -- CMD failed"; }
cmd_total=$(awk '{t += $NF} END {print t + 0}' "$WORK/cmd.folded")
own=$(grep -c '^gsymprof[;-]' "$WORK/cmd.folded")
echo "  -- CMD: $cmd_total samples, $own stacks of gsymprof"
(( cmd_total >= 100 )) || fail "-- CMD: too few samples ($cmd_total)"
(( own == 0 )) || { grep '^gsymprof' "$WORK/cmd.folded" | head -3 >&2; fail "-- CMD profiles gsymprof"; }

# System-wide while gsymprof converts the symbols of what it samples (a
# fresh cache: the prefetcher works during sampling).
( i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done ) &
# Another gsymprof running meanwhile is another process, fairly profiled:
# only this one's pid counts.
"$GSYMPROF" profile -F 999 -d 2 --pid-in-comm -o "$WORK/sys.folded" 2>"$WORK/sys.err" &
self=$!
wait "$self" || { cat "$WORK/sys.err" >&2; fail "system-wide profile failed"; }
sys_total=$(awk '{t += $NF} END {print t + 0}' "$WORK/sys.folded")
own=$(grep -c "^gsymprof-$self;" "$WORK/sys.folded")
echo "  system-wide: $sys_total samples, $own stacks of gsymprof"
(( sys_total >= 100 )) || fail "system-wide: too few samples ($sys_total)"
(( own == 0 )) || { grep "^gsymprof-$self;" "$WORK/sys.folded" | head -3 >&2; fail "system-wide profiles gsymprof"; }
echo "ok"
