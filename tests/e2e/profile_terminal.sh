#!/bin/bash
# e2e (issue 33): what profile and record say while they run and at the end.
#  - Under a pseudo-terminal: a start line (target, rate, call graph, how it
#    stops), a live line redrawn with the samples so far, and an end line
#    naming every file written; folded output to the terminal is followed by
#    a line saying what it is.
#  - Without a terminal: none of that; stdout holds the folded stacks only
#    and stderr keeps the summary.
#  - The summary's hints: a kernel thread given to -p, and --call-graph fp of
#    a program built without frame pointers (shallow stacks: the remedy is
#    named), live and from perf record -g; --stats holds the same facts.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v script > /dev/null || skip "no script (util-linux)"
command -v python3 > /dev/null || skip "no python3"

# A busy process to sample.
sh -c 'while :; do :; done' &
BUSY=$!

# on_terminal TRANSCRIPT CMD...: runs CMD with stdin, stdout and stderr on a
# pseudo-terminal; TRANSCRIPT gets what it wrote there.
on_terminal() {
  local transcript=$1
  shift
  script -qfec "$(printf '%q ' "$@")" /dev/null > "$transcript" < /dev/null
}

echo "profile on a terminal: start line, live line, end line"
on_terminal "$WORK/tty.txt" "$GSYMPROF" profile -p "$BUSY" -d 2 -o "$WORK/t.folded" --svg "$WORK/t.svg" ||
  { cat -A "$WORK/tty.txt"; fail "profile on a terminal failed"; }
python3 - "$WORK/tty.txt" "$BUSY" "$WORK" <<'EOF' || { cat -A "$WORK/tty.txt" | head -20; fail "terminal lines"; }
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()
pid, work = sys.argv[2], sys.argv[3]
start = f"gsymprof: sampling pid {pid} at 99 Hz, call graph dwarf; stops on Ctrl-C, when it exits or after 2 s\r\n"
end = f"gsymprof: wrote {work}/t.folded (folded stacks), {work}/t.svg (flame graph)\r\n"
assert text.startswith(start), "no start line: " + repr(text[:200])
live = [(m.start(), int(m.group(1)), float(m.group(2)))
        for m in re.finditer(r"\r\x1b\[Kgsymprof: (\d+) samples?, (\d+\.\d) s of 2 s", text)]
assert len(live) >= 3, f"{len(live)} live lines, want one per half second: {text[:400]!r}"
assert [s for _, _, s in live] == sorted(s for _, _, s in live), "the live line's time goes back"
assert live[-1][1] > 0, "the live line never counted a sample"
assert "\r\x1b[K" + "gsymprof: " + f"{live[-1][1]} samples" in text
assert text.find(end) > live[-1][0], "no end line naming the files after the live line"
summary = text.find("gsymprof: ", live[-1][0] + 3)
assert text[summary - 4:summary] == "\r\x1b[K", "the live line is not erased before the summary"
print(f"  start line, {len(live)} live lines (last: {live[-1][1]} samples at {live[-1][2]} s), end line")
EOF
[[ -s $WORK/t.folded && -s $WORK/t.svg ]] || fail "the files the end line names are not there"

echo "profile on a terminal, folded stacks to it: a line says what they are"
on_terminal "$WORK/tty2.txt" "$GSYMPROF" profile -p "$BUSY" -d 1 || fail "profile to the terminal failed"
grep -q '^sh;.* [0-9]*'$'\r''$' "$WORK/tty2.txt" || { cat -A "$WORK/tty2.txt" | head; fail "no folded stacks on the terminal"; }
grep -q "^gsymprof: the lines above are folded stacks (.*), input for flame-graph tools .*--svg FILE draws a flame graph" \
  "$WORK/tty2.txt" || { cat -A "$WORK/tty2.txt" | tail -5; fail "no line saying what the folded output is"; }

echo "record on a terminal: start line and the capture named"
on_terminal "$WORK/tty3.txt" "$GSYMPROF" record -p "$BUSY" -d 1 -o "$WORK/cap.json" || fail "record on a terminal failed"
grep -q "^gsymprof: sampling pid $BUSY at 99 Hz, call graph dwarf; stops on Ctrl-C, when it exits or after 1 s" "$WORK/tty3.txt" &&
  grep -q "^gsymprof: wrote $WORK/cap.json (capture, for 'gsymprof symbolize')" "$WORK/tty3.txt" ||
  { cat -A "$WORK/tty3.txt" | head; fail "record: no start line or end line"; }

echo "without a terminal: stdout holds the folded stacks only, stderr the summary"
"$GSYMPROF" profile -p "$BUSY" -d 1.2 > "$WORK/pipe.out" 2> "$WORK/pipe.err" < /dev/null || fail "profile failed"
[[ -s $WORK/pipe.out ]] || fail "no folded stacks on stdout"
grep -vE '^[^ ].* [0-9]+$' "$WORK/pipe.out" && fail "stdout holds more than folded stacks"
grep -q $'\r\|\e' "$WORK/pipe.out" "$WORK/pipe.err" && fail "terminal control characters without a terminal"
grep -q 'sampling pid\|the lines above' "$WORK/pipe.out" "$WORK/pipe.err" && fail "terminal lines without a terminal"
grep -qE '^gsymprof: [0-9]+ samples taken, [0-9]+ recorded, 0 lost, 1 process, ' "$WORK/pipe.err" ||
  { cat "$WORK/pipe.err"; fail "no summary on stderr"; }
kill "$BUSY"

echo "a kernel thread given to -p: the summary says why there are no samples"
kthread=$(awk '($9 / 2097152) % 2 >= 1 { print $1; exit }' /proc/[0-9]*/stat 2> /dev/null)  # PF_KTHREAD
if [[ -n $kthread ]]; then
  profile_run "$WORK/k.folded" "$WORK/k.err" -p "$kthread" -d 0.5 --user-callchains --stats "$WORK/k.json"
  grep -qx "gsymprof: pid $kthread is a kernel thread: it has no user stack; profile system-wide or drop --user-callchains" \
    "$WORK/k.err" || { cat "$WORK/k.err"; fail "no kernel-thread hint"; }
  grep -q '"key":"kernel_thread"' "$WORK/k.json" || fail "--stats: no kernel_thread hint"
else
  echo "  no kernel thread visible here (a PID namespace?): skipped"
fi

echo "--call-graph fp of a program without frame pointers: shallow stacks, and the remedy"
cat > "$WORK/nofp.c" <<'EOF'
#define NOIPA __attribute__((noinline, noipa))
volatile unsigned sink;
NOIPA unsigned leaf(unsigned v) {
  for (unsigned i = 0; i < 100000; ++i) v = v * 2654435761u + i;
  return v;
}
NOIPA unsigned middle(unsigned v) { unsigned r = leaf(v) + 1; __asm__ volatile("" ::: "memory"); return r; }
NOIPA unsigned outer(unsigned v) { unsigned r = middle(v) ^ 5; __asm__ volatile("" ::: "memory"); return r; }
int main(void) {
  for (unsigned i = 0; i < 12000; ++i) sink += outer(i);
  return 0;
}
EOF
gcc -O2 -g -fomit-frame-pointer -o "$WORK/nofp" "$WORK/nofp.c" || fail "cannot build the FP-less fixture"
profile_run "$WORK/fp.folded" "$WORK/fp.err" -F 499 --call-graph fp --stats "$WORK/fp.json" -- "$WORK/nofp"
grep -Eq '^gsymprof: shallow stacks: [0-9]+% of the samples have at most 3 user frames under --call-graph fp, ending in nofp \([0-9]+%\).*: the program \(or a library it runs in\) lacks frame pointers, .*; profile with --call-graph dwarf' \
  "$WORK/fp.err" || { cat "$WORK/fp.err"; fail "fp of an FP-less program: no shallow-stacks hint naming the remedy"; }
python3 - "$WORK/fp.json" <<'EOF' || fail "--stats: not the summary's facts"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["command"] == "profile" and s["call_graph"] == "fp" and s["samples"] > 0, s
assert s["user_stacks"]["shallow_samples"] * 2 > s["user_stacks"]["samples"], s["user_stacks"]
assert [h["key"] for h in s["hints"]] == ["shallow_stacks"], s["hints"]
assert s["command_exit"] == {"name": s["command_exit"]["name"], "ended": "exited", "exit_status": 0}, s["command_exit"]
assert s["samples_taken"] >= s["samples"] and s["stop_reason"] == "targets exited", s
EOF
profile_run "$WORK/dw.folded" "$WORK/dw.err" -F 499 -- "$WORK/nofp"
grep -q 'shallow stacks' "$WORK/dw.err" && { cat "$WORK/dw.err"; fail "a shallow-stacks hint with --call-graph dwarf"; }
grep -q ';main;outer;middle;leaf ' "$WORK/dw.folded" || fail "dwarf: the complete stack is missing"

PERF=${PERF:-/usr/bin/perf}
if [[ -x $PERF ]]; then
  echo "the same from perf record -g: symbolize names perf's remedy"
  "$PERF" record -q -F 499 -g -o "$WORK/perf.data" -- "$WORK/nofp" > "$WORK/perf.log" 2>&1 ||
    { cat "$WORK/perf.log"; fail "perf record -g failed"; }
  "$GSYMPROF" symbolize "$WORK/perf.data" -o "$WORK/perf.folded" 2> "$WORK/perf.err" || { cat "$WORK/perf.err"; fail "symbolize failed"; }
  grep -q "^gsymprof: shallow stacks: .*lacks frame pointers.*record with 'perf record --call-graph dwarf'" "$WORK/perf.err" ||
    { cat "$WORK/perf.err"; fail "symbolize of perf record -g: no shallow-stacks hint"; }
fi
echo "ok"
