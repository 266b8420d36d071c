#!/bin/bash
# e2e (issue 27): `gsymprof agent --cgroup PATH` keeps the samples of the
# processes in that cgroup (v2, as /proc/PID/cgroup's "0::" line names it)
# or below, and no others: two copies of the fixture run, one moved into a
# fresh cgroup; the agent's pprof files hold the inside one's samples, with
# the cgroup label, and none of the outside one's.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
require_go_pprof

CGROUP2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[[ -n $CGROUP2 && -w $CGROUP2 ]] || skip "no writable cgroup v2 hierarchy"
NAME=gsymprof-test-$$
mkdir "$CGROUP2/$NAME" || skip "cannot make a cgroup under $CGROUP2"
trap 'kill $inside $outside 2>/dev/null; wait 2>/dev/null; rmdir "$CGROUP2/$NAME" 2>/dev/null; cleanup' EXIT

build_fixture pie
FIX=$WORK/pie/profile_fixture
"$FIX" exec 30 >/dev/null 2>&1 &
inside=$!
"$FIX" lib 30 >/dev/null 2>&1 &
outside=$!
echo "$inside" > "$CGROUP2/$NAME/cgroup.procs" || fail "cannot move the fixture into $NAME"
grep -q "^0::/$NAME\$" "/proc/$inside/cgroup" || fail "the fixture is not in 0::/$NAME: $(cat /proc/$inside/cgroup)"

"$GSYMPROF" agent -F 199 --window 2 --cgroup "/$NAME" --output-dir "$WORK/out" 2>"$WORK/agent.err" &
agent=$!
sleep 6
kill -TERM $agent; wait $agent || { cat "$WORK/agent.err" >&2; fail "agent --cgroup failed"; }
for f in "$WORK"/out/*.pb.gz; do "$GO" tool pprof -raw "$f" 2>/dev/null; done >"$WORK/raw.txt"
pids=$(grep -oE '(^|[[:space:]])pid:\[[0-9]+\]' "$WORK/raw.txt" | sed 's/^[[:space:]]*//' | sort -u | tr '\n' ' ')
echo "  pids sampled: $pids (inside $inside, outside $outside)"
[[ $pids == *"pid:[$inside]"* ]] || fail "no sample of the fixture in the cgroup"
[[ $pids == "pid:[$inside] " ]] || fail "--cgroup /$NAME kept other processes: $pids"
grep -q "cgroup:\[/$NAME\]" "$WORK/raw.txt" || fail "the samples lack the cgroup label /$NAME"
echo ok
