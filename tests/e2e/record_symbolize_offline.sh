#!/bin/bash
# e2e (root): record on one "machine", symbolize after the binaries are gone.
#  1. record two live fixture processes (inline frames in the executable and
#     in a linked shared library); meanwhile a live `profile` of the same
#     processes for comparison;
#  2. symbolize with the binaries still present (auto-conversion, fresh cache);
#  3. kill the processes, convert COPIES of the binaries (made before) into a
#     GSYM dir under arbitrary names, delete the binaries, symbolize with an
#     empty cache and only that dir: byte-identical folded output, and the
#     report says the GSYMs came from the dir; the dominant stacks are the
#     fixture's exact ones and also the live profile's hottest stacks;
#  4. --format json carries names, files, lines, inline marks, modules and
#     build IDs; without the GSYM dir the frames fall back to module+0xOFFSET
#     and the report says "file missing";
#  5. Ctrl-C during record still writes a complete capture;
#  6. profile --svg writes the same SVG as `flamegraph` of profile's output.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
EXEC_STACK="$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"
LIB_STACK="$ROOT;phase_lib;lib_entry;lib_inline_[i];lib_leaf"
cp -a "$D" "$WORK/copies"

"$FIX" exec 20 & exec_pid=$!
"$FIX" lib 20 & lib_pid=$!
sleep 0.3
"$GSYMPROF" record -p "$exec_pid,$lib_pid" -d 2 -F 999 -o "$WORK/capture.json" 2> "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record failed"; }
grep -q "^gsymprof: [0-9]* samples taken, [0-9]* recorded, [0-9]* lost, 2 processes, " "$WORK/record.err" &&
  grep -qx "gsymprof: wrote $WORK/capture.json (capture, for 'gsymprof symbolize')" "$WORK/record.err" ||
  { cat "$WORK/record.err"; fail "record summary"; }
expect_no_loss "$WORK/record.err"
profile_run "$WORK/live.folded" "$WORK/live.err" -p "$exec_pid,$lib_pid" -d 2 -F 999 --pid-in-comm \
  --svg "$WORK/live.svg"
# profile --svg draws exactly what `flamegraph` draws from profile's output.
"$GSYMPROF" flamegraph "$WORK/live.folded" --title "gsymprof profile" -o "$WORK/live-again.svg" ||
  fail "flamegraph of the live profile failed"
cmp -s "$WORK/live.svg" "$WORK/live-again.svg" || fail "profile --svg differs from flamegraph of its folded output"
grep -q '<title>exec_leaf (' "$WORK/live.svg" || fail "profile --svg lacks exec_leaf"
head -c 300 "$WORK/capture.json" | grep -q '^{$' || fail "capture does not start with {"
grep -q '^"format": "gsymprof-capture",$' "$WORK/capture.json" || fail "capture has no format line"
grep -q '^"version": 5,$' "$WORK/capture.json" || fail "capture is not format version 5"
grep -q "/pie/libhot.so\",\"build_id\":\"[0-9a-f]\{40\}\"" "$WORK/capture.json" || fail "capture lacks libhot.so with its build ID"

echo "symbolize with the binaries present (auto-conversion)"
GSYMPROF_CACHE=$WORK/cache-a "$GSYMPROF" symbolize "$WORK/capture.json" --pid-in-comm \
  > "$WORK/present.folded" 2> "$WORK/present.err" || { cat "$WORK/present.err"; fail "symbolize (present) failed"; }
grep -q "^  $D/profile_fixture (build ID [0-9a-f]*): converted " "$WORK/present.err" ||
  { cat "$WORK/present.err"; fail "report: the fixture was not converted"; }

kill "$exec_pid" "$lib_pid"
wait "$exec_pid" "$lib_pid" 2> /dev/null
mkdir "$WORK/gsyms"
"$GSYMPROF" gsym convert "$WORK/copies/profile_fixture" -o "$WORK/gsyms/aaa-first.gsym" > /dev/null 2>&1 &&
  "$GSYMPROF" gsym convert "$WORK/copies/libhot.so" -o "$WORK/gsyms/0042.gsym" > /dev/null 2>&1 ||
  fail "gsym convert of the copies failed"
rm -rf "$D"
[[ -e $FIX ]] && fail "binaries still present"

echo "symbolize after the binaries are gone: GSYM dir only"
GSYMPROF_CACHE=$WORK/cache-b "$GSYMPROF" symbolize "$WORK/capture.json" --pid-in-comm --gsym-dir "$WORK/gsyms" \
  > "$WORK/offline.folded" 2> "$WORK/offline.err" || { cat "$WORK/offline.err"; fail "symbolize (offline) failed"; }
diff -u "$WORK/present.folded" "$WORK/offline.folded" > "$WORK/diff" ||
  { head -30 "$WORK/diff"; fail "offline output differs from the output with binaries present"; }
grep -qxF "  $D/profile_fixture (build ID $(readelf -n "$WORK/copies/profile_fixture" | awk '/Build ID/ {print $3}')): gsym-dir $WORK/gsyms/aaa-first.gsym" \
  "$WORK/offline.err" || { cat "$WORK/offline.err"; fail "report: fixture GSYM not from the dir"; }
grep -qF "  $D/libhot.so (build ID $(readelf -n "$WORK/copies/libhot.so" | awk '/Build ID/ {print $3}')): gsym-dir $WORK/gsyms/0042.gsym" \
  "$WORK/offline.err" || { cat "$WORK/offline.err"; fail "report: libhot GSYM not from the dir"; }
expect_dominant "$WORK/offline.folded" "profile_fixture-$exec_pid" "$EXEC_STACK" 60
expect_dominant "$WORK/offline.folded" "profile_fixture-$lib_pid" "$LIB_STACK" 60
expect_resolved "$WORK/offline.folded" profile_fixture libhot.so

# The live profile's hottest stack per process is the offline one's.
hottest() {  # FOLDED COMM -> the stack (without count) with most samples
  awk -v comm="$2" '{ c = $NF; s = substr($0, 1, length($0) - length(c) - 1)
    split(s, p, ";"); if (p[1] == comm && c + 0 > best) { best = c + 0; top = s } } END { print top }' "$1"
}
for pid in "$exec_pid" "$lib_pid"; do
  live=$(hottest "$WORK/live.folded" "profile_fixture-$pid")
  offline=$(hottest "$WORK/offline.folded" "profile_fixture-$pid")
  [[ -n $live && $live == "$offline" ]] || fail "hottest stack of $pid: live '$live', offline '$offline'"
done

echo "--format json"
GSYMPROF_CACHE=$WORK/cache-b "$GSYMPROF" symbolize "$WORK/capture.json" --gsym-dir "$WORK/gsyms" --format json \
  -o "$WORK/offline.json" 2> /dev/null || fail "symbolize --format json failed"
exe_id=$(readelf -n "$WORK/copies/profile_fixture" | awk '/Build ID/ {print $3}')
# exec_inner_inline calls exec_leaf on the line that defines it.
line=$(grep -n '^INLINE unsigned exec_inner_inline' "$FIXTURES/profile_fixture.c" | cut -d: -f1)
grep -qF "{\"name\":\"exec_inner_inline\",\"kind\":\"function\",\"file\":\"$FIXTURES/profile_fixture.c\",\"line\":$line,\"inlined\":true,\"module\":\"$D/profile_fixture\",\"build_id\":\"$exe_id\"}" \
  "$WORK/offline.json" || { grep -o '{"name":"exec_inner_inline[^}]*}' "$WORK/offline.json" | head -3; fail "json: exec_inner_inline frame (called at line $line) missing"; }
grep -qF "{\"name\":\"phase_exec\",\"kind\":\"function\",\"file\":\"$FIXTURES/profile_fixture.c\"," "$WORK/offline.json" ||
  fail "json: phase_exec frame missing"

echo "no GSYM dir, empty cache, binaries gone: module+0xOFFSET and 'file missing'"
GSYMPROF_CACHE=$WORK/cache-c "$GSYMPROF" symbolize "$WORK/capture.json" > "$WORK/gone.folded" 2> "$WORK/gone.err" ||
  fail "symbolize (gone) failed"
grep -q ';profile_fixture+0x[0-9a-f]*;' "$WORK/gone.folded" || { head "$WORK/gone.folded"; fail "no profile_fixture+0x frames"; }
grep -q 'exec_leaf\|lib_leaf' "$WORK/gone.folded" && fail "names without symbols"
grep -qF "no GSYM for build ID $exe_id; file missing" "$WORK/gone.err" || { cat "$WORK/gone.err"; fail "report lacks 'file missing'"; }

echo "Ctrl-C during record"
mkdir -p "$D" && cp -a "$WORK/copies/." "$D/"
"$FIX" exec 20 & pid=$!
sleep 0.3
"$GSYMPROF" record -p "$pid" -F 999 -o "$WORK/ctrlc.json" 2> "$WORK/ctrlc.err" & rec=$!
sleep 2
kill -INT "$rec"
wait "$rec" || { cat "$WORK/ctrlc.err"; fail "record exited with $? after SIGINT"; }
grep -q 'stopped: interrupted' "$WORK/ctrlc.err" || { cat "$WORK/ctrlc.err"; fail "record was not interrupted"; }
kill "$pid"; wait "$pid" 2> /dev/null
ls "$WORK" | grep -q 'ctrlc.json.tmp' && fail "temporary file left behind"
GSYMPROF_CACHE=$WORK/cache-b "$GSYMPROF" symbolize "$WORK/ctrlc.json" --gsym-dir "$WORK/gsyms" > "$WORK/ctrlc.folded" 2> /dev/null ||
  fail "the interrupted capture does not symbolize"
expect_dominant "$WORK/ctrlc.folded" profile_fixture "$EXEC_STACK" 60
echo "ok: record, delete binaries, symbolize from a GSYM dir = symbolize with binaries; Ctrl-C capture complete"
