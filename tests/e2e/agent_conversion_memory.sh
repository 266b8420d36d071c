#!/bin/bash
# e2e (issue 27, the agent's memory): `gsymprof agent` converts a module's
# GSYM in a child process (userspace/symbolize/child_conversion.h), so the
# converter's heap is never the agent's.
#  - a copy of gsymprof itself (a large -g binary: its in-process conversion,
#    `gsymprof gsym convert`, peaks at well over 100 MB) runs under the agent
#    (--comm: only it is sampled), and its GSYM appears in the agent's cache,
#    no failure remembered;
#  - what the conversion adds to the agent's peak (VmHWM then, less VmRSS
#    before the copy ran: the GSYM read back, its lookup index, the
#    windows) stays at least 64 MB below what the in-process conversion
#    needs alone (in process the agent peaked 170 MB above it, 2026-12-06).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

BIG=$WORK/bigconv  # 7 characters: the whole name is the comm --comm matches
cp "$GSYMPROF" "$BIG" || fail "cannot copy gsymprof"
readelf -S "$BIG" | grep -q '\.debug_info' || skip "$GSYMPROF has no DWARF (built without -g)"
build_id=$(LC_ALL=C readelf -n "$BIG" | awk '/Build ID:/ {print $3; exit}')
[[ -n $build_id ]] || fail "the copy has no GNU build ID"
build_fixture pie
FIX=$WORK/pie/profile_fixture

# What converting it in process takes: the peak RSS of `gsym convert` alone.
inprocess_kb=$(python3 - "$BIG" "$WORK/inprocess.gsym" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "gsym", "convert", sys.argv[1], "-o", sys.argv[2], "--profiler-names"],
               check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
) || fail "gsym convert of the copy failed"
echo "in-process conversion of a copy of gsymprof: peak RSS $((inprocess_kb / 1024)) MB"
((inprocess_kb > 100 * 1024)) || skip "the in-process conversion peaks at $((inprocess_kb / 1024)) MB only: too small a binary to tell"

agent_err=$WORK/agent.err
"$GSYMPROF" agent -F 199 --window 2 --comm bigconv --output-dir "$WORK/out" 2>"$agent_err" &
agent=$!
for _ in $(seq 300); do
  grep -q sampling "$agent_err" && break
  kill -0 $agent 2>/dev/null || { cat "$agent_err" >&2; fail "the agent exited at start"; }
  sleep 0.1
done
grep -q sampling "$agent_err" || fail "the agent did not start sampling"
sleep 2
rss_before_kb=$(awk '$1 == "VmRSS:" {print $2}' "/proc/$agent/status")

# The copy busy in its own code for 4 s (converting the fixture, again and
# again), so the agent has its frames to name and converts it.
end=$((SECONDS + 4))
while ((SECONDS < end)); do "$BIG" gsym convert "$FIX" -o "$WORK/fixture.gsym" >/dev/null 2>&1 || fail "the copy failed"; done
gsym=$GSYMPROF_CACHE/$build_id.c5.gsym
for _ in $(seq 600); do
  [[ -s $gsym ]] && break
  kill -0 $agent 2>/dev/null || { cat "$agent_err" >&2; fail "the agent died"; }
  sleep 0.1
done
hwm_kb=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$agent/status")
kill -TERM $agent
wait $agent || { cat "$agent_err" >&2; fail "the agent exited with $?"; }
[[ -s $gsym ]] || { ls -la "$GSYMPROF_CACHE" >&2; cat "$agent_err" >&2; fail "the copy's GSYM was not converted into the cache"; }
ls "$GSYMPROF_CACHE"/*.failed >/dev/null 2>&1 && { head "$GSYMPROF_CACHE"/*.failed >&2; fail "a conversion failed"; }
cmp -s "$gsym" "$WORK/inprocess.gsym" || fail "the child's GSYM differs from gsym convert --profiler-names's"
added_kb=$((hwm_kb - rss_before_kb))
echo "agent: $((rss_before_kb / 1024)) MB before, peak $((hwm_kb / 1024)) MB (+$((added_kb / 1024)) MB) with the conversion in a child"
((added_kb + 64 * 1024 < inprocess_kb)) ||
  fail "the conversion added $((added_kb / 1024)) MB to the agent's peak: not 64 MB below the in-process conversion's $((inprocess_kb / 1024)) MB"
echo "PASS"
