#!/bin/bash
# e2e (root): --format pprof read back by go tool pprof (Debian golang-go).
#  1. record two fixture processes (inline frames in the executable and in a
#     linked shared library), symbolize the capture as folded stacks and as
#     pprof: `go tool pprof -traces` of the pprof, folded again, is exactly
#     the folded output (names, inline frames as extra lines, counts);
#  2. every module's build ID is on its mapping, labels comm and pid on the
#     samples, functions' start lines, `-top` exits 0, the same capture gives the same bytes;
#  3. profile --format pprof -o FILE writes a profile pprof reads.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
require_go_pprof
build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture

"$FIX" exec 20 & exec_pid=$!
"$FIX" lib 20 & lib_pid=$!
sleep 0.3
"$GSYMPROF" record -p "$exec_pid,$lib_pid" -d 2 -F 999 -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
kill "$exec_pid" "$lib_pid"
wait "$exec_pid" "$lib_pid" 2> /dev/null

echo "symbolize: folded and pprof of the same capture"
"$GSYMPROF" symbolize "$WORK/capture.json" 2> "$WORK/folded.err" | LC_ALL=C sort > "$WORK/capture.folded" ||
  fail "symbolize failed"
"$GSYMPROF" symbolize "$WORK/capture.json" --format pprof -o "$WORK/a.pb.gz" 2> "$WORK/pprof-a.err" ||
  { cat "$WORK/pprof-a.err"; fail "symbolize --format pprof failed"; }
grep -q "^gsymprof: .* samples, .* unique stacks; modules resolved: " "$WORK/pprof-a.err" ||
  { cat "$WORK/pprof-a.err"; fail "no summary for --format pprof"; }
[[ $(head -c 2 "$WORK/a.pb.gz" | od -An -tx1 | tr -d ' ') == 1f8b ]] || fail "pprof output is not gzip"
pprof_folded "$WORK/a.pb.gz" > "$WORK/pprof.folded"
[[ -s $WORK/pprof.folded ]] || { cat "$WORK/pprof.err"; fail "go tool pprof -traces gave nothing"; }
# pprof marks kernel frames by their mapping ([kernel.kallsyms], checked in
# profile_kernel.sh), not by name: compare without the _[k] suffix.
sed 's/_\[k\]//g' "$WORK/capture.folded" | LC_ALL=C sort > "$WORK/capture-nok.folded"
diff "$WORK/capture-nok.folded" "$WORK/pprof.folded" > "$WORK/diff" ||
  { cat "$WORK/diff"; fail "pprof's stacks differ from the folded output"; }
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
grep -q "^profile_fixture;$ROOT;phase_exec;exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf [0-9]*$" \
  "$WORK/pprof.folded" || fail "pprof lacks the exec stack with its inline frames"
grep -q "^profile_fixture;$ROOT;phase_lib;lib_entry;lib_inline_\[i\];lib_leaf [0-9]*$" "$WORK/pprof.folded" ||
  fail "pprof lacks the libhot.so stack with its inline frame"

echo "pprof -raw: build IDs on mappings, labels on samples"
"$GO" tool pprof -raw -symbolize=none "$WORK/a.pb.gz" > "$WORK/raw" 2> "$WORK/pprof.err" || fail "pprof -raw failed"
for module in "$D/profile_fixture" "$D/libhot.so"; do
  id=$(sed -n "s|^  $module (build ID \([0-9a-f]*\)).*|\1|p" "$WORK/pprof-a.err")
  [[ -n $id ]] || { cat "$WORK/pprof-a.err"; fail "no build ID reported for $module"; }
  grep -q "^[0-9]*: 0x[0-9a-f]*/0x[0-9a-f]*/0x[0-9a-f]* $module $id \[FN\]" "$WORK/raw" ||
    { sed -n '/^Mappings/,$p' "$WORK/raw"; fail "no mapping of $module with build ID $id and functions"; }
done
grep -q "pid:\[$exec_pid\]" "$WORK/raw" && grep -q "pid:\[$lib_pid\]" "$WORK/raw" && grep -q 'comm:\[profile_fixture\]' "$WORK/raw" ||
  fail "samples lack comm/pid labels"
# Single-threaded fixtures: each sample's thread is its process.
grep -q "thread_id:\[$exec_pid\]" "$WORK/raw" && grep -q "thread_id:\[$lib_pid\]" "$WORK/raw" ||
  { grep -m3 'pid:' "$WORK/raw"; fail "samples lack thread_id labels"; }
# Function.start_line (pprof's s=N; Go 1.26 prints file:line:column before it): the line of the function's first
# instruction, its opening line in the fixture's source.
for fn in exec_leaf main; do
  want=$(grep -n "^[A-Za-z].* $fn(.*{$" "$FIXTURES/profile_fixture.c" | cut -d: -f1)
  grep -q " M=[0-9]* $fn [^ ]*profile_fixture.c:[0-9:]* s=$want$" "$WORK/raw" ||
    { grep -m3 " $fn " "$WORK/raw"; fail "$fn has no start line $want"; }
done
"$GO" tool pprof -top -symbolize=none "$WORK/a.pb.gz" > "$WORK/top" 2>&1 || { cat "$WORK/top"; fail "pprof -top failed"; }
grep -q "exec_leaf" "$WORK/top" || fail "pprof -top lacks exec_leaf"

"$GSYMPROF" symbolize "$WORK/capture.json" --format pprof -o "$WORK/b.pb.gz" 2> /dev/null || fail "second pprof failed"
cmp -s "$WORK/a.pb.gz" "$WORK/b.pb.gz" || fail "the same capture gave different pprof bytes"

echo "profile --format pprof"
"$GSYMPROF" profile -F 999 --format pprof -o "$WORK/live.pb.gz" -- "$FIX" exec 1 2> "$WORK/live.err" ||
  { cat "$WORK/live.err"; fail "profile --format pprof failed"; }
pprof_folded "$WORK/live.pb.gz" > "$WORK/live.folded"
grep -q "^profile_fixture;$ROOT;phase_exec;exec_outer_inline_\[i\];exec_inner_inline_\[i\];exec_leaf [0-9]*$" \
  "$WORK/live.folded" || { cat "$WORK/live.folded"; fail "profile --format pprof lacks the exec stack"; }
echo "ok"
