#!/bin/bash
# e2e (issue 34.4): CPython 3.12+ with -X perf. Each Python function runs
# through a trampoline in anonymous memory that /tmp/perf-PID.map names
# ("py::leaf:/path/work.py"); the trampoline has no CFI and keeps no frame
# pointer (sub $8,%rsp; call *%rcx; add $8,%rsp; ret), so neither CFI nor
# the frame-pointer fallback can step over it. gsymprof reads how it
# returns from the process's code (userspace/unwind/epilogue.h): the stacks
# must go on through every py:: frame to _start, outer, middle and leaf in
# that order, live and after record + symbolize, on every CPython 3.12+ the
# machine has (pyenv's builds and /usr/bin's; skip with a message if none).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

pythons=()
for py in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
  [[ -x $py ]] && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && pythons+=("$py")
done
(( ${#pythons[@]} )) || skip "no CPython 3.12 or later (pyenv install 3.12 builds one)"

cat >"$WORK/work.py" <<'PY'
import sys, time
def leaf(n):
    total = 0
    for i in range(n):
        total += i * i
    return total
def middle(n):
    return leaf(n)
def outer(seconds):
    end = time.time() + seconds
    while time.time() < end:
        middle(20000)
outer(float(sys.argv[1]))
PY
RUNS=$WORK/python-pids
trap 'for p in $(cat "$RUNS" 2>/dev/null); do rm -f "/tmp/perf-$p.map"; done; cleanup' EXIT

# check FOLDED WHAT: of the samples in py::leaf, the share whose stack is
# whole (rooted at _start) with py::outer, py::middle, py::leaf in order.
check() {
  local folded=$1 what=$2 result
  result=$(awk '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
      if (s !~ /;py::leaf:[^;]*work\.py_\[j\]/) next
      t += n
      if (s ~ /^[^;]*;_start;.*;py::<module>:[^;]*work\.py_\[j\];.*;py::outer:[^;]*work\.py_\[j\];.*;py::middle:[^;]*work\.py_\[j\];.*;py::leaf:[^;]*work\.py_\[j\]/ && s !~ /\[truncated\]/) h += n }
      END { printf "%d %d\n", t, t ? 100 * h / t : 0 }' "$folded")
  read -r total share <<<"$result"
  echo "  $what: $share% of $total samples in py::leaf whole, from _start through <module>, outer, middle"
  (( total >= 50 )) || { cat "$folded" | head -5 | cut -c1-400 >&2; fail "$what: only $total samples in py::leaf"; }
  (( share >= 90 )) || { sort -t' ' -k2 -nr "$folded" | head -3 | cut -c1-900 >&2; fail "$what: $share% whole (want >= 90%)"; }
}

for py in "${pythons[@]}"; do
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  printf '#!/bin/sh\necho $$ >>"%s"\nexec "%s" -X perf "%s" 3\n' "$RUNS" "$py" "$WORK/work.py" >"$WORK/run-py"
  chmod +x "$WORK/run-py"
  echo "CPython $version ($py) -X perf"
  profile_run "$WORK/live.folded" "$WORK/live.err" -F 499 -- "$WORK/run-py"
  check "$WORK/live.folded" "profile"
  grep -q 'code without CFI: [0-9]* frames stepped over' "$WORK/live.err" ||
    { cat "$WORK/live.err" >&2; fail "the summary does not count the frames stepped over by their code"; }
  "$GSYMPROF" record -F 499 -o "$WORK/py.gsymcap" -- "$WORK/run-py" 2>"$WORK/record.err" ||
    { cat "$WORK/record.err" >&2; fail "record failed"; }
  "$GSYMPROF" symbolize "$WORK/py.gsymcap" -o "$WORK/offline.folded" 2>"$WORK/symbolize.err" ||
    { cat "$WORK/symbolize.err" >&2; fail "symbolize failed"; }
  check "$WORK/offline.folded" "record + symbolize"
done
echo ok
