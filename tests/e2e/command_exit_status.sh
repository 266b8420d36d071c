#!/bin/bash
# e2e (issue 34.1): profile and record with -- CMD write their output, then
# exit with the command's status, as perf record does (128 + N for a death by
# signal N), and the summary's last line says how the command ended. A
# command gsymprof itself stops when -d elapses ends "stopped (SIGTERM)",
# and gsymprof exits 0.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

# expect WHAT STATUS LAST_LINE gsymprof-args...
expect() {
  local what=$1 want=$2 line=$3; shift 3
  "$GSYMPROF" "$@" 2>"$WORK/err" >/dev/null
  local got=$?
  [[ $got == "$want" ]] || { cat "$WORK/err" >&2; fail "$what: exit $got, not $want"; }
  [[ $(tail -n 1 "$WORK/err") == "gsymprof: $line" ]] ||
    { cat "$WORK/err" >&2; fail "$what: last line is not 'gsymprof: $line'"; }
  echo "  $what: exit $got, '$line'"
}
for cmd in profile record; do
  out=$WORK/$cmd.out
  expect "$cmd, exit 3" 3 "sh exited 3" "$cmd" -F 99 -o "$out" -- sh -c 'exit 3'
  [[ -f $out ]] || fail "$cmd: no output written before exiting with the command's status"
  rm -f "$out"
  expect "$cmd, SIGSEGV" 139 "sh was killed by SIGSEGV" "$cmd" -F 99 -o "$out" -- sh -c 'kill -SEGV $$'
  [[ -f $out ]] || fail "$cmd: no output written for a command killed by a signal"
  expect "$cmd, success" 0 "true exited 0" "$cmd" -F 99 -o "$out" -- true
  expect "$cmd, -d ends it" 0 "sleep was stopped (SIGTERM) when sampling ended" "$cmd" -F 99 -d 1 -o "$out" -- sleep 30
done

# -d stops what the command started too: a grandchild (here one its parent
# leaves behind as it exits) is not orphaned.
"$GSYMPROF" profile -F 99 -d 1 -o "$WORK/tree.folded" -- \
  sh -c 'sleep 60 & echo $! >"$0"; sleep 60' "$WORK/grandchild.pid" 2>"$WORK/tree.err" >/dev/null ||
  { cat "$WORK/tree.err" >&2; fail "profile -d of a process tree failed"; }
grandchild=$(cat "$WORK/grandchild.pid")
sleep 0.2
if kill -0 "$grandchild" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$grandchild/status" 2>/dev/null; then
  kill "$grandchild"
  fail "-d left the command's child $grandchild running"
fi
echo "  -d: the command's child was stopped with it"
echo "ok"
