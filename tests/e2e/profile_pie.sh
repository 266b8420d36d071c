#!/bin/bash
# e2e: live profiles of a PIE fixture (2 s at 999 Hz each, as root): inline
# frames in the executable, in a linked shared library and in a dlopen()ed
# one, a function ending in a call (IP - 1), -p targeting, --no-inline and
# --pid-in-comm, whole-system mode.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
# The default call graph (dwarf) unwinds through FP-less libc up to _start.
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"

echo "exec: inlined frames in the executable"
profile_run "$WORK/exec.folded" "$WORK/exec.err" -F 999 -- "$FIX" exec 2
expect_dominant "$WORK/exec.folded" profile_fixture \
  "$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
expect_resolved "$WORK/exec.folded" profile_fixture libhot.so
expect_no_loss "$WORK/exec.err"
grep -q ' recorded, [0-9]* lost, 1 process, ' "$WORK/exec.err" || fail "summary: $(cat "$WORK/exec.err")"

echo "exec with --call-graph fp: bpf_get_stack's frame-pointer walk (stops in FP-less libc)"
profile_run "$WORK/fp.folded" "$WORK/fp.err" -F 999 --call-graph fp -- "$FIX" exec 2
expect_dominant "$WORK/fp.folded" profile_fixture \
  "__libc_start_call_main;main;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
expect_resolved "$WORK/fp.folded" profile_fixture libhot.so
expect_no_loss "$WORK/fp.err"

echo "lib: inlined frames in a linked shared library"
profile_run "$WORK/lib.folded" "$WORK/lib.err" -F 999 -- "$FIX" lib 2
expect_dominant "$WORK/lib.folded" profile_fixture "$ROOT;phase_lib;lib_entry;lib_inline_[i];lib_leaf" 60
expect_resolved "$WORK/lib.folded" profile_fixture libhot.so
expect_no_loss "$WORK/lib.err"

echo "dlopen: a library mapped after the process was first seen"
profile_run "$WORK/dl.folded" "$WORK/dl.err" -F 999 -- "$FIX" dlopen 2 "$D/libplugin.so"
expect_dominant "$WORK/dl.folded" profile_fixture \
  "$ROOT;phase_dlopen;plugin_entry;plugin_inline_[i];plugin_leaf" 60 ';phase_exec;'
expect_resolved "$WORK/dl.folded" profile_fixture libhot.so libplugin.so
expect_no_loss "$WORK/dl.err"

echo "endcall: the caller of a call that ends its function (IP - 1)"
profile_run "$WORK/end.folded" "$WORK/end.err" -F 999 -- "$FIX" endcall 2
expect_dominant "$WORK/end.folded" profile_fixture "$ROOT;ends_in_call;spin_forever_leaf" 60
grep -q 'after_ends_in_call' "$WORK/end.folded" && fail "a return address was named after the next function"
expect_resolved "$WORK/end.folded" profile_fixture

echo "-p with --no-inline --pid-in-comm, output to a file"
"$FIX" lib 3 &
pid=$!
sleep 0.3
profile_run "$WORK/p.stdout" "$WORK/p.err" -p "$pid" -d 2 -F 999 --no-inline --pid-in-comm \
  -o "$WORK/p.folded"
[[ -s $WORK/p.stdout ]] && fail "-o given, yet stdout has output"
expect_dominant "$WORK/p.folded" "profile_fixture-$pid" "$ROOT;phase_lib;lib_entry;lib_leaf" 60
grep -q '_\[i\]' "$WORK/p.folded" && fail "--no-inline output has inline frames"
expect_resolved "$WORK/p.folded" profile_fixture libhot.so
wait "$pid"

echo "children: a target's forked child is followed through its exec"
profile_run "$WORK/fork.folded" "$WORK/fork.err" -F 999 -- /bin/sh -c "'$FIX' exec 1.5; true"
expect_dominant "$WORK/fork.folded" profile_fixture \
  "$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
expect_resolved "$WORK/fork.folded" profile_fixture

echo "Ctrl-C: SIGINT stops sampling, the output is still written"
"$FIX" exec 6 &
pid=$!
"$GSYMPROF" profile -F 999 -p "$pid" -o "$WORK/int.folded" 2>"$WORK/int.err" &
profiler=$!
sleep 2
kill -INT "$profiler"
wait "$profiler" || { cat "$WORK/int.err" >&2; fail "profile exited $? after SIGINT"; }
grep -q 'stopped: interrupted' "$WORK/int.err" || fail "summary: $(cat "$WORK/int.err")"
expect_dominant "$WORK/int.folded" profile_fixture \
  "$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
kill "$pid"
wait "$pid" 2>/dev/null

echo "whole system: no -p and no command"
"$FIX" exec 3 &
pid=$!
sleep 0.3
profile_run "$WORK/all.folded" "$WORK/all.err" -d 1.5 -F 999
expect_dominant "$WORK/all.folded" profile_fixture \
  "$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
grep -q ' recorded, [0-9]* lost, [01] process' "$WORK/all.err" && fail "whole-system profile saw one process only"
wait "$pid"
echo "ok"
