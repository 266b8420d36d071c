#!/bin/bash
# e2e (issue 29.2): CPython 3.13 with -X perf_jit writes /tmp/jit-PID.dump
# with an .eh_frame for each trampoline (sub $8,%rsp; call *%rcx; add
# $8,%rsp; ret: no frame pointer), and this CPython is built without frame
# pointers. A recursion 31 deep runs through 31 trampolines per sample:
# gsymprof must step over them with the dump's CFI (--stats
# unwind.jit_cfi_steps > 0, none refused), and every sample in it must be
# whole, rooted at _start through Py_BytesMain with no [truncated]; perf
# (record --call-graph dwarf, inject -j, script), where it runs, is measured
# on the same program for comparison.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

py=""
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3.1[3-9] /usr/bin/python3.1[3-9]; do
  # -X perf_jit (3.13+) would write a dump: the version alone is asked.
  [[ -x $candidate ]] && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 13))' 2>/dev/null &&
    { py=$candidate; break; }
done
[[ -n $py ]] || skip "no CPython 3.13 or later (pyenv install 3.13 builds one)"

cat >"$WORK/deep.py" <<'PY'
import sys, time
def f(n):
    if n == 0:
        total = 0
        for i in range(3000):
            total += i
        return total
    return f(n - 1)
f(1)
# CPython writes its dump through a 4 KiB stdio buffer: the code run by these
# imports pushes f's record (and its .eh_frame) into the file while the
# program runs, as a real program's later imports do.
import argparse, decimal, email.parser, json, logging, textwrap, unittest  # noqa: F401,E401
end = time.time() + float(sys.argv[1])
while time.time() < end:
    f(30)
PY
RUNS=$WORK/python-pids
# The dump and perf inject's ELF files (jitted-PID-N.so) are written to /tmp.
trap 'for p in $(cat "$RUNS" 2>/dev/null); do rm -f "/tmp/jit-$p.dump" /tmp/jitted-"$p"-*.so; done; cleanup' EXIT
printf '#!/bin/sh\necho $$ >>"%s"\nexec "%s" -X perf_jit "%s" 3\n' "$RUNS" "$py" "$WORK/deep.py" >"$WORK/run-py"
chmod +x "$WORK/run-py"

# whole FOLDED: "SAMPLES_IN_F PERCENT_WHOLE" for the samples with f's
# trampoline on the stack.
whole() {
  awk '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
      if (s !~ /;py::f:[^;]*deep\.py_\[j\]/) next
      t += n
      if (s ~ /^[^;]*;_start;[^\[]*;Py_BytesMain;/ && s !~ /\[truncated\]/) h += n }
    END { printf "%d %.1f\n", t, t ? 100 * h / t : 0 }' "$1"
}

version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
echo "CPython $version ($py) -X perf_jit"
profile_run "$WORK/live.folded" "$WORK/live.err" -F 499 --stats "$WORK/stats.json" -- "$WORK/run-py"
read -r steps refused epilogue fp < <(python3 -c '
import json, sys
u = json.load(open(sys.argv[1]))["unwind"]
print(u["jit_cfi_steps"], u["jit_cfi_rejected"], u["epilogue_steps"], u["frame_pointer_steps"])' "$WORK/stats.json")
read -r total share < <(whole "$WORK/live.folded")
echo "  gsymprof: $share% of $total samples in f whole (_start .. Py_BytesMain); frames stepped by the dump's CFI $steps, by epilogue $epilogue, by frame pointer $fp"
(( steps > 0 )) || { cat "$WORK/live.err" >&2; fail "no frame stepped over by the jitdump's CFI"; }
(( refused == 0 )) || { cat "$WORK/live.err" >&2; fail "$refused trampolines' .eh_frame refused"; }
(( steps > epilogue )) || fail "the epilogue decoder stepped more frames ($epilogue) than the dump's CFI ($steps)"
grep -q "JIT code's own CFI: $steps frames" "$WORK/live.err" || { cat "$WORK/live.err" >&2; fail "the summary does not report the JIT CFI steps"; }
(( total >= 100 )) || { head -3 "$WORK/live.folded" | cut -c1-600 >&2; fail "only $total samples in f"; }
awk -v s="$share" 'BEGIN { exit !(s >= 99) }' ||
  { sort -t' ' -k2 -nr "$WORK/live.folded" | grep -v '_start;[^\[]*;Py_BytesMain;' | head -3 | cut -c1-900 >&2
    fail "only $share% of the samples in f whole (want >= 99%)"; }
# 31 trampolines deep: f's frames all there.
deepest=$(grep -oE '(;py::f:[^;]*deep\.py_\[j\])' "$WORK/live.folded" | wc -l)
(( deepest > 0 )) || fail "no py::f frame"
max_depth=$(awk '{ print gsub(/;py::f:[^;]*deep\.py_\[j\]/, "") }' "$WORK/live.folded" | sort -n | tail -1)
(( max_depth >= 31 )) || fail "at most $max_depth of f's 31 trampolines in one stack"

# perf, where it runs: the same program recorded with a full dwarf copy
# (65528 bytes, perf's most), its dump injected (perf inject -j), its stacks
# read without perf's 127-frame default cut.
if command -v perf >/dev/null &&
  perf --buildid-dir "$WORK/buildid" record -q -k 1 --call-graph dwarf,65528 -F 499 -o "$WORK/perf.data" \
    -- "$WORK/run-py" 2>"$WORK/perf.err" &&
  perf --buildid-dir "$WORK/buildid" inject -j -i "$WORK/perf.data" -o "$WORK/perf.jit.data" 2>>"$WORK/perf.err"; then
  perf_result=$(perf --buildid-dir "$WORK/buildid" script --max-stack 4096 -i "$WORK/perf.jit.data" -F comm,ip,sym 2>/dev/null |
    awk 'BEGIN { RS = "" } /py::f:/ { t++; if ($0 ~ /Py_BytesMain/ && $0 ~ /_start/) h++ }
      END { printf "%d %.1f\n", t, t ? 100 * h / t : 0 }')
  read -r perf_total perf_share <<<"$perf_result"
  echo "  perf record --call-graph dwarf,65528 + inject -j: $perf_share% of $perf_total samples in f whole; gsymprof $share%"
  (( perf_total > 0 )) || echo "  perf named no f frame (perf inject -j of this CPython's dump?)"
else
  echo "  perf record/inject not usable here: comparison skipped"
fi
echo "ok"
