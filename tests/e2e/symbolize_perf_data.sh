#!/bin/bash
# e2e (root, perf): `perf record` of the profile fixture, then `gsymprof
# symbolize perf.data`: the exact root-to-leaf stacks the live-profile tests
# assert (inline frames in the executable, in a linked library and in a
# dlopen()ed one), for
#   - perf record -g of the frame-pointer build (perf's kernel FP walk, which
#     stops in FP-less libc, as `profile --call-graph fp` does);
#   - perf record --call-graph dwarf of an FP-less build (registers + stack
#     copy unwound by gsymprof's CFI unwinder, up to _start);
#   - the pipe form (perf record -o -);
#   - perf record -z (zstd-compressed records): the same folded output as the
#     same file with its records stored plain (decompressed by the zstd tool,
#     fixtures/perf_data_unzstd.py), in the file and the pipe form;
#   - two events at different rates (-e cpu-clock -e task-clock/freq=199/):
#     --event chooses each, with perf script's sample count for it; an unknown name lists the events
#     (exit 1); --event with a capture is a usage error (exit 2);
#   - the summary's loss lines, the same code and format as record's;
# the same options as for captures (--pid-in-comm, --format json); binaries
# rebuilt after recording give module+0xOFFSET frames, never the new build's
# names; a truncated perf.data is a one-line error and exit 1.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
PERF=${PERF:-/usr/bin/perf}
[[ $(id -u) == 0 ]] || skip "perf recording needs root"
[[ -x $PERF ]] || skip "no $PERF (Debian linux-perf)"
command -v gcc > /dev/null || skip "no gcc"
[[ -x $GSYMPROF ]] || fail "$GSYMPROF is not built"
build_fixture pie
D=$WORK/pie FIX=$D/profile_fixture
FP_ROOT="__libc_start_call_main;main"
DWARF_ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
EXEC="phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf"
LIB="phase_lib;lib_entry;lib_inline_[i];lib_leaf"
PLUGIN="phase_dlopen;plugin_entry;plugin_inline_[i];plugin_leaf"

# The same fixture built without frame pointers, for --call-graph dwarf.
N=$WORK/nofp
mkdir -p "$N"
nofp_flags=(-O2 -g -fomit-frame-pointer)
gcc "${nofp_flags[@]}" -fPIC -shared "$FIXTURES/libhot.c" -o "$N/libhot.so" &&
  gcc "${nofp_flags[@]}" -fPIC -shared "$FIXTURES/plugin.c" -o "$N/libplugin.so" &&
  gcc "${nofp_flags[@]}" -fPIE -pie -I"$FIXTURES" "$FIXTURES/profile_fixture.c" -L"$N" -lhot \
    -Wl,-rpath,'$ORIGIN' -ldl -o "$N/profile_fixture" || fail "cannot build the FP-less fixture"

# record OUT PERF-ARGS... -- COMMAND...: perf record, failing loudly.
record() {
  local out=$1
  shift
  "$PERF" record -q -o "$out" "$@" > "$out.log" 2>&1 || { cat "$out.log"; fail "perf record $* failed"; }
}

# symbolize FOLDED ERR ARGS...: gsymprof symbolize, failing on a non-zero exit.
symbolize() {
  local out=$1 err=$2
  shift 2
  "$GSYMPROF" symbolize "$@" > "$out" 2> "$err" || { cat "$err"; fail "symbolize $* exited with $?"; }
}

echo "perf record -g (frame pointers): exec, lib, dlopen"
record "$WORK/exec.data" -F 999 -g -- "$FIX" exec 2
symbolize "$WORK/exec.folded" "$WORK/exec.err" "$WORK/exec.data"
expect_dominant "$WORK/exec.folded" profile_fixture "$FP_ROOT;$EXEC" 60
expect_resolved "$WORK/exec.folded" profile_fixture libhot.so
grep -q "^  $D/profile_fixture (build ID [0-9a-f]\{40\}): converted " "$WORK/exec.err" ||
  { cat "$WORK/exec.err"; fail "report: the fixture was not converted"; }

record "$WORK/lib.data" -F 999 -g -- "$FIX" lib 2
symbolize "$WORK/lib.folded" "$WORK/lib.err" "$WORK/lib.data"
expect_dominant "$WORK/lib.folded" profile_fixture "$FP_ROOT;$LIB" 60
expect_resolved "$WORK/lib.folded" profile_fixture libhot.so

record "$WORK/dl.data" -F 999 -g -- "$FIX" dlopen 2 "$D/libplugin.so"
symbolize "$WORK/dl.folded" "$WORK/dl.err" "$WORK/dl.data"
expect_dominant "$WORK/dl.folded" profile_fixture "$FP_ROOT;$PLUGIN" 60 ';phase_exec;'
expect_resolved "$WORK/dl.folded" profile_fixture libhot.so libplugin.so

echo "--pid-in-comm and --format json"
record "$WORK/pid.data" -F 999 -g -- "$FIX" exec 1
symbolize "$WORK/pid.folded" "$WORK/pid.err" "$WORK/pid.data" --pid-in-comm
expect_dominant "$WORK/pid.folded" 'profile_fixture-[0-9]+' "$FP_ROOT;$EXEC" 60
symbolize "$WORK/pid.json" "$WORK/pid-json.err" "$WORK/pid.data" --format json
exe_id=$(readelf -n "$FIX" | awk '/Build ID/ {print $3}')
grep -qF "{\"name\":\"exec_leaf\",\"kind\":\"function\",\"file\":\"$FIXTURES/profile_fixture.c\"," "$WORK/pid.json" ||
  fail "json: exec_leaf frame missing"
grep -qF "\"module\":\"$FIX\",\"build_id\":\"$exe_id\"" "$WORK/pid.json" || fail "json: the fixture's build ID missing"

echo "perf record -o - (pipe form)"
"$PERF" record -q -F 999 -g -o - -- "$FIX" exec 1 > "$WORK/pipe.data" 2> "$WORK/pipe.log" ||
  { cat "$WORK/pipe.log"; fail "perf record -o - failed"; }
symbolize "$WORK/pipe.folded" "$WORK/pipe.err" "$WORK/pipe.data"
expect_dominant "$WORK/pipe.folded" profile_fixture "$FP_ROOT;$EXEC" 60

echo "perf record --call-graph dwarf (FP-less build): exec, lib, dlopen"
record "$WORK/dw-exec.data" -F 999 --call-graph dwarf -- "$N/profile_fixture" exec 2
symbolize "$WORK/dw-exec.folded" "$WORK/dw-exec.err" "$WORK/dw-exec.data"
expect_dominant "$WORK/dw-exec.folded" profile_fixture "$DWARF_ROOT;$EXEC" 60
expect_resolved "$WORK/dw-exec.folded" profile_fixture libhot.so

record "$WORK/dw-lib.data" -F 999 --call-graph dwarf -- "$N/profile_fixture" lib 2
symbolize "$WORK/dw-lib.folded" "$WORK/dw-lib.err" "$WORK/dw-lib.data"
expect_dominant "$WORK/dw-lib.folded" profile_fixture "$DWARF_ROOT;$LIB" 60

record "$WORK/dw-dl.data" -F 999 --call-graph dwarf -- "$N/profile_fixture" dlopen 2 "$N/libplugin.so"
symbolize "$WORK/dw-dl.folded" "$WORK/dw-dl.err" "$WORK/dw-dl.data"
expect_dominant "$WORK/dw-dl.folded" profile_fixture "$DWARF_ROOT;$PLUGIN" 60 ';phase_exec;'
expect_resolved "$WORK/dw-dl.folded" profile_fixture libhot.so libplugin.so

# samples_line ERR: "SAMPLES NO_USER_STACK" from symbolize's summary (-v:
# every loss reason is listed, zeros too).
samples_line() {
  local samples no_user
  samples=$(sed -n 's/^gsymprof: \([0-9]*\) samples, .*/\1/p' "$1")
  no_user=$(sed -n 's/^gsymprof: lost by reason: .*no_user_stack \([0-9]*\).*/\1/p' "$1")
  echo "$samples ${no_user:-missing}"
}

echo "perf record -z: the same folded stacks as the records stored plain"
record "$WORK/z.data" -F 999 -g -z -- "$FIX" exec 2
python3 "$FIXTURES/perf_data_unzstd.py" "$WORK/z.data" "$WORK/z-plain.data" || fail "cannot expand the -z file"
# perf itself reads the expanded file: it is a valid plain perf.data.
[[ $("$PERF" script -i "$WORK/z-plain.data" -F event -G 2>/dev/null | wc -l) -gt 100 ]] ||
  fail "perf script cannot read the expanded -z file"
symbolize "$WORK/z.folded" "$WORK/z.err" "$WORK/z.data"
symbolize "$WORK/z-plain.folded" "$WORK/z-plain.err" "$WORK/z-plain.data"
expect_dominant "$WORK/z.folded" profile_fixture "$FP_ROOT;$EXEC" 60
cmp "$WORK/z.folded" "$WORK/z-plain.folded" || { diff "$WORK/z.folded" "$WORK/z-plain.folded" | head; fail "-z and plain differ"; }
cmp "$WORK/z.err" "$WORK/z-plain.err" || { diff "$WORK/z.err" "$WORK/z-plain.err"; fail "-z and plain summaries differ"; }
"$PERF" record -q -F 999 -g -z -o - -- "$FIX" lib 1 > "$WORK/zpipe.data" 2> "$WORK/zpipe.log" ||
  { cat "$WORK/zpipe.log"; fail "perf record -z -o - failed"; }
symbolize "$WORK/zpipe.folded" "$WORK/zpipe.err" "$WORK/zpipe.data"
expect_dominant "$WORK/zpipe.folded" profile_fixture "$FP_ROOT;$LIB" 60

echo "two events: --event chooses one, by perf's name"
# Different rates, so that each event's samples are told apart by their count.
TASK_CLOCK=task-clock/freq=199/
record "$WORK/two.data" -F 999 -g -e cpu-clock -e "$TASK_CLOCK" -- "$FIX" exec 2
"$PERF" script -i "$WORK/two.data" -F event -G 2>/dev/null | awk '{ n[$1]++ } END { for (e in n) print e, n[e] }' > "$WORK/two.counts"
for event in cpu-clock "$TASK_CLOCK"; do
  name=${event%%/*}
  symbolize "$WORK/two-$name.folded" "$WORK/two-$name.err" "$WORK/two.data" --event "$event" -v
  expect_dominant "$WORK/two-$name.folded" profile_fixture "$FP_ROOT;$EXEC" 60
  read -r samples no_user < <(samples_line "$WORK/two-$name.err")
  perf_count=$(awk -v e="$event:" '$1 == e { print $2 }' "$WORK/two.counts")
  echo "  $event: $samples samples + $no_user without user frames; perf script: $perf_count"
  [[ -n $perf_count && $((samples + no_user)) == "$perf_count" ]] ||
    { cat "$WORK/two.counts" "$WORK/two-$name.err"; fail "--event $event: not perf script's samples"; }
done
[[ $(samples_line "$WORK/two-cpu-clock.err") != $(samples_line "$WORK/two-task-clock.err") ]] ||
  fail "999 Hz and 199 Hz events gave as many samples"
symbolize "$WORK/two-default.folded" "$WORK/two-default.err" "$WORK/two.data"
cmp "$WORK/two-default.folded" "$WORK/two-cpu-clock.folded" || fail "the default is not the first event"
"$PERF" record -q -F 999 -g -e cpu-clock -e task-clock -o - -- "$FIX" exec 1 > "$WORK/two-pipe.data" 2> /dev/null ||
  fail "perf record -o - of two events failed"
symbolize "$WORK/two-pipe.folded" "$WORK/two-pipe.err" "$WORK/two-pipe.data" --event task-clock
expect_dominant "$WORK/two-pipe.folded" profile_fixture "$FP_ROOT;$EXEC" 60
"$GSYMPROF" symbolize "$WORK/two.data" --event cycles > /dev/null 2> "$WORK/bad-event.err"
rc=$?
[[ $rc == 1 ]] || fail "--event cycles: exit $rc, not 1"
[[ $(cat "$WORK/bad-event.err") == "gsymprof symbolize: $WORK/two.data: perf.data: no event named 'cycles' (events: cpu-clock, $TASK_CLOCK)" ]] ||
  { cat "$WORK/bad-event.err"; fail "unknown event message"; }
echo '{}' > "$WORK/not-perf.json"
"$GSYMPROF" symbolize "$WORK/not-perf.json" --event cpu-clock > /dev/null 2> "$WORK/capture-event.err"
rc=$?
[[ $rc == 2 ]] || fail "--event with a capture: exit $rc, not 2"
head -n 1 "$WORK/capture-event.err" | grep -qx "gsymprof symbolize: --event selects an event of a perf.data file; $WORK/not-perf.json is a gsymprof capture (one event, cpu-clock)" ||
  { cat "$WORK/capture-event.err"; fail "--event with a capture: message"; }

echo "losses: the lines record prints, from the same code (-v: every reason, zeros too)"
symbolize /dev/null "$WORK/exec-v.err" "$WORK/exec.data" -v
symbolize /dev/null "$WORK/dw-exec-v.err" "$WORK/dw-exec.data" -v
grep -Eqx 'gsymprof: lost by reason: lost_samples 0, no_user_stack [0-9]+, ringbuf_full 0' "$WORK/exec-v.err" ||
  { cat "$WORK/exec-v.err"; fail "fp: lost by reason line"; }
grep -qx 'gsymprof: truncated stacks: 0' "$WORK/exec-v.err" || { cat "$WORK/exec-v.err"; fail "fp: truncated stacks line"; }
grep -Eqx 'gsymprof: lost by reason: lost_samples 0, no_user_registers [0-9]+, no_user_stack [0-9]+, ringbuf_full 0' "$WORK/dw-exec-v.err" ||
  { cat "$WORK/dw-exec-v.err"; fail "dwarf: lost by reason line"; }
grep -Eqx 'gsymprof: truncated stacks: [0-9]+( \(unwind_[a-z_]+ [0-9]+(, unwind_[a-z_]+ [0-9]+)*\))?' "$WORK/dw-exec-v.err" ||
  { cat "$WORK/dw-exec-v.err"; fail "dwarf: truncated stacks line"; }
# Without -v: the -v line's non-zero reasons, and no line when all are zero.
for run in exec dw-exec; do
  nonzero=$(sed -n 's/^gsymprof: lost by reason: //p' "$WORK/$run-v.err" | sed 's/, /\n/g' | grep -v ' 0$' |
    paste -sd, - | sed 's/,/, /g')
  got=$(sed -n 's/^gsymprof: lost by reason: //p' "$WORK/$run.err")
  [[ $got == "$nonzero" ]] || { cat "$WORK/$run.err"; fail "$run: lost by reason without -v is '$got', not '$nonzero'"; }
done
grep -q '^gsymprof: truncated stacks: 0$' "$WORK/exec.err" && fail "fp: a truncated stacks line with nothing truncated"
# A capture: symbolize prints the very lines record printed for it.
if [[ -r /sys/kernel/btf/vmlinux ]]; then
  "$GSYMPROF" record -v -F 999 --call-graph dwarf -o "$WORK/cap.json" -- "$N/profile_fixture" exec 1 > /dev/null 2> "$WORK/cap-record.err" ||
    { cat "$WORK/cap-record.err"; fail "gsymprof record failed"; }
  symbolize "$WORK/cap.folded" "$WORK/cap-symbolize.err" "$WORK/cap.json" -v
  grep -E '^gsymprof: (lost by reason|truncated stacks): ' "$WORK/cap-record.err" > "$WORK/cap-record.losses"
  grep -E '^gsymprof: (lost by reason|truncated stacks): ' "$WORK/cap-symbolize.err" > "$WORK/cap-symbolize.losses"
  [[ $(wc -l < "$WORK/cap-record.losses") == 2 ]] || { cat "$WORK/cap-record.err"; fail "record: no loss lines"; }
  cmp "$WORK/cap-record.losses" "$WORK/cap-symbolize.losses" ||
    { diff "$WORK/cap-record.losses" "$WORK/cap-symbolize.losses"; fail "symbolize's loss lines differ from record's"; }
fi

echo "binaries rebuilt after recording: module+0xOFFSET, never the new build's names"
gcc -O1 -g -fno-omit-frame-pointer -fPIE -pie -I"$FIXTURES" "$FIXTURES/profile_fixture.c" -L"$D" -lhot \
  -Wl,-rpath,'$ORIGIN' -ldl -o "$FIX" || fail "cannot rebuild the fixture"
[[ $(readelf -n "$FIX" | awk '/Build ID/ {print $3}') != "$exe_id" ]] || fail "the rebuild has the same build ID"
GSYMPROF_CACHE=$WORK/cache-rebuilt symbolize "$WORK/rebuilt.folded" "$WORK/rebuilt.err" "$WORK/exec.data"
grep -q ';profile_fixture+0x[0-9a-f]*' "$WORK/rebuilt.folded" || { head "$WORK/rebuilt.folded"; fail "no profile_fixture+0x frames"; }
grep -q 'exec_leaf\|phase_exec' "$WORK/rebuilt.folded" && { head "$WORK/rebuilt.folded"; fail "names from the rebuilt binary"; }

echo "truncated perf.data: a one-line error, exit 1"
head -c 3000 "$WORK/exec.data" > "$WORK/truncated.data"
if "$GSYMPROF" symbolize "$WORK/truncated.data" > "$WORK/trunc.out" 2> "$WORK/trunc.err"; then
  fail "a truncated perf.data symbolized"
fi
grep -q "$WORK/truncated.data: perf.data: .* at offset 0x[0-9a-f]*$" "$WORK/trunc.err" ||
  { cat "$WORK/trunc.err"; fail "error message"; }
[[ $(wc -l < "$WORK/trunc.err") == 1 ]] || { cat "$WORK/trunc.err"; fail "error is not one line"; }
echo "ok: perf.data (fp, dwarf, pipe, -z, --event) symbolizes to the live profiles' exact stacks"
