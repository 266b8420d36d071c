#!/bin/bash
# e2e: CPython 3.11 frames in CPU profiles. For every sample of a CPython
# 3.11 process, each native _PyEval_EvalFrameDefault frame is replaced by the
# Python frames it ran, outermost first, `STEM.QUALNAME (FILE:LINE)_[p]`
# (python_work.Worker.run (python_work.py:LINE)_[p]); native frames around
# them stay; at most 64 Python frames per sample, the outermost dropped and
# the stack rooted at [truncated]. The fixture (fixtures/python_work.py,
# its lines found by their "# @" markers, never hard-coded) is CPU-bound,
# its two threads taking turns, one running at a time: the second thread
# runs Worker.run -> busy_loop (pure Python), then Worker.run -> hash_work
# (hashlib.sha256 over 4 MiB, the GIL released), then the main thread one
# of a generator (consume_gen -> gen_values), a coroutine under asyncio
# (async_work), a recursion 200 deep or one 20 deep, spinning at the leaf.
# On Debian's /usr/bin/python3.11 (installed with apt-get when absent) and
# every pyenv 3.11 (`profile -p PID -d 5`, and once `-- CMD`),
# fixtures/python_frames.py checks:
#  - samples with Python frames: at least 100; _PyEval_EvalFrameDefault
#    left in at most 2% of them; every _[p] frame of the form above;
#  - ...;python_work.Worker.run (python_work.py:RUN)_[p];python_work.busy_loop
#    (python_work.py:SPIN)_[p] as the leaf Python frames, exact lines;
#  - Worker.run -> hash_work at its lines with native frames of the hash
#    (sha256, _hashlib or EVP) leafward; every sample in the hash's native
#    code (the GIL released) has hash_work as its leaf Python frame: the
#    thread's own frames, not another thread's;
#  - consume_gen (the for line) rootward of gen_values (its loop line);
#    async_work (its loop line) under BaseEventLoop.run_until_complete;
#  - recursion 20 deep: shallow_recursion and 21 recurse frames, not
#    truncated; 200 deep: rooted at [truncated] with exactly 64 recurse
#    frames; no sample over 64 Python frames;
#  - the worker thread under start_thread with Thread._bootstrap,
#    _bootstrap_inner, run, Worker.run outermost first; the main thread
#    from python_work.<module> (the main() call line), main.
# The -p runs are also sampled by py-spy (pinned, installed once into
# ${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/py-spy-VERSION; that
# part is skipped with a message when it cannot be installed) at the same
# time: both profiles normalized to (name's last component, file, line)
# (py-spy 0.4.3 prints `Worker.run (python_work.py:54)`, the qualname
# without the module, and paths under sys.path: `asyncio/base_events.py`),
# py-spy's stacks cut to their 64 leafmost frames as gsymprof's are, samples
# whose leaf is a blocking wait (threading's Condition.wait, selectors'
# select: off CPU, but counted as running by py-spy) left out on both
# sides; every function with >= 5% of the samples (inclusive) in either
# within 10 points, and the same leaf frames (function, file, line) over 5%.
# The same checks, and py-spy, on a pyenv CPython 3.12 (its eval calls
# marked by C-stack frames, not is_entry) and a pyenv CPython 3.13 (its
# layout read from _PyRuntime's debug offsets, no table). On a CPython
# gsymprof has no layout of (3.14 or later, when one is installed): the
# summary says its frames were left native, the stacks keep
# _PyEval_EvalFrameDefault, no _[p] frame.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
PYSPY_VERSION=0.4.3
PYSPY_DIR=${GSYMPROF_TEST_CACHE:-/var/cache/gsymprof-tests}/py-spy-$PYSPY_VERSION
FIX=$FIXTURES/python_work.py
CHECK=(python3 "$FIXTURES/python_frames.py")
PYENV=${PYENV_ROOT:-$HOME/.pyenv}

if [[ ! -x /usr/bin/python3.11 ]] && command -v apt-get > /dev/null; then
  echo "installing Debian's python3.11"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3.11 > /dev/null 2>&1 ||
    { apt-get update -qq > /dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3.11 > /dev/null 2>&1; }
fi
py311=()
for py in /usr/bin/python3.11 "$PYENV"/versions/3.11*/bin/python3.11; do
  [[ -x $py ]] && "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2> /dev/null && py311+=("$py")
done
(( ${#py311[@]} )) || skip "no CPython 3.11 (Debian: apt-get install python3.11)"
supported=("${py311[@]}")
for minor in 12 13; do
  for py in "$PYENV"/versions/3.$minor*/bin/python3.$minor /usr/bin/python3.$minor; do
    [[ -x $py ]] && "$py" -c "import sys; sys.exit(sys.version_info[:2] != (3, $minor))" 2> /dev/null &&
      { supported+=("$py"); break; }
  done
done
# A CPython newer than gsymprof knows (its _Py_DebugOffsets unverified).
unknown=
for py in "$PYENV"/versions/3.1[4-9]*/bin/python3.1[4-9] /usr/bin/python3.1[4-9]; do
  [[ -x $py ]] && { unknown=$py; break; }
done

echo "fixture lines (by marker): $("${CHECK[@]}" lines "$FIX" | tr "\n" " ")"

# py-spy, pinned, into the reused cache; PYSPY empty when it cannot be had.
PYSPY=$PYSPY_DIR/bin/py-spy
if [[ $("$PYSPY" --version 2> /dev/null) != "py-spy $PYSPY_VERSION" ]]; then
  PYSPY=
  rm -rf "$PYSPY_DIR"
  mkdir -p "$(dirname "$PYSPY_DIR")" || fail "cannot create $(dirname "$PYSPY_DIR")"
  echo "  installing py-spy==$PYSPY_VERSION into $PYSPY_DIR"
  for py in /usr/bin/python3 "${py311[@]}"; do
    "$py" -m venv "$PYSPY_DIR" > "$WORK/venv.log" 2>&1 && break
    rm -rf "$PYSPY_DIR"
  done
  if [[ ! -x $PYSPY_DIR/bin/python ]]; then
    tail -3 "$WORK/venv.log"
    echo "no Python here makes a venv (Debian: python3-venv): the comparison with py-spy is skipped"
  elif timeout 180 "$PYSPY_DIR/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 1 \
      "py-spy==$PYSPY_VERSION" > "$WORK/pip.log" 2>&1 &&
      [[ $("$PYSPY_DIR/bin/py-spy" --version 2> /dev/null) == "py-spy $PYSPY_VERSION" ]]; then
    PYSPY=$PYSPY_DIR/bin/py-spy
  else
    tail -3 "$WORK/pip.log"
    echo "py-spy $PYSPY_VERSION cannot be installed (no package index?): the comparison with py-spy is skipped"
  fi
  [[ -n $PYSPY ]] || rm -rf "$PYSPY_DIR"
fi
[[ -n $PYSPY ]] && echo "peer: $("$PYSPY" --version)"

# profile_pid PY DIR [nospy]: the fixture under PY, `profile -p PID -d 5`
# into DIR/out.folded (DIR/out.err), and py-spy on it at the same time into
# DIR/spy.folded when there is one (unless nospy).
profile_pid() {
  local py=$1 dir=$2 spy=${3:-} pid gp sp=
  mkdir -p "$dir"
  "$py" "$FIX" 12 &
  pid=$!
  sleep 0.7
  kill -0 "$pid" 2> /dev/null || fail "$py $FIX exited at once"
  "$GSYMPROF" profile -p "$pid" -d 5 -o "$dir/out.folded" > /dev/null 2> "$dir/out.err" &
  gp=$!
  if [[ -n $PYSPY && $spy != nospy ]]; then
    timeout 30 "$PYSPY" record --format raw -o "$dir/spy.folded" -d 5 -p "$pid" --rate 100 > "$dir/spy.log" 2>&1 &
    sp=$!
  fi
  wait "$gp" || { cat "$dir/out.err" >&2; fail "gsymprof profile -p $pid -d 5 ($py) exited $?"; }
  if [[ -n $sp ]]; then
    wait "$sp" || { cat "$dir/spy.log" >&2; fail "py-spy record -p $pid ($py) exited $?"; }
  fi
  kill "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  return 0
}

for py in "${supported[@]}"; do
  version=$("$py" -c 'import sys; print(sys.version.split()[0])')
  dir=$WORK/$(echo "$py" | tr / _)
  echo "CPython $version ($py): profile -p PID -d 5"
  profile_pid "$py" "$dir"
  failed=
  "${CHECK[@]}" check "$dir/out.folded" "$FIX" || failed="the checks"
  if [[ -n $PYSPY ]]; then
    echo "CPython $version ($py): gsymprof against py-spy $PYSPY_VERSION, same process, same 5 s"
    grep -q 'Samples: [0-9]' "$dir/spy.log" || { cat "$dir/spy.log" >&2; fail "py-spy wrote no samples"; }
    "${CHECK[@]}" compare "$dir/out.folded" "$dir/spy.folded" || failed="${failed:+$failed and }the comparison with py-spy"
  fi
  [[ -z $failed ]] || { cat "$dir/out.err" >&2; fail "CPython $version ($py), profile -p: $failed failed (see above)"; }
done

py=${py311[0]}
echo "CPython 3.11 ($py): profile -d 5 -- $py python_work.py 4"
profile_run "$WORK/cmd.folded" "$WORK/cmd.err" -d 5 -o "$WORK/cmd.folded" -- "$py" "$FIX" 4
"${CHECK[@]}" check "$WORK/cmd.folded" "$FIX" || { cat "$WORK/cmd.err" >&2; fail "$py: profile -- CMD: see the checks above"; }

echo "CPython 3.11 ($py): record -d 5 -- CMD, then symbolize: the capture keeps the Python frames"
"$GSYMPROF" record -d 5 -o "$WORK/cap.json" -- "$py" "$FIX" 4 > /dev/null 2> "$WORK/record.err" ||
  { cat "$WORK/record.err" >&2; fail "record -- $py exited $?"; }
python3 -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1])).get("python_frames"))' "$WORK/cap.json" ||
  fail "the capture has no python_frames"
"$GSYMPROF" symbolize "$WORK/cap.json" -o "$WORK/sym.folded" 2> "$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize exited $?"; }
"${CHECK[@]}" check "$WORK/sym.folded" "$FIX" || { cat "$WORK/sym.err" >&2; fail "record + symbolize: see the checks above"; }

if [[ -n $unknown ]]; then
  minor=$("$unknown" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  echo "CPython $minor ($unknown), no layout: frames left native"
  profile_pid "$unknown" "$WORK/unknown" nospy
  "${CHECK[@]}" native "$WORK/unknown/out.folded" || fail "CPython $minor: see the checks above"
  grep -Eiq "python ?${minor//./\\.}.*native" "$WORK/unknown/out.err" ||
    { cat "$WORK/unknown/out.err" >&2; fail "CPython $minor: the summary does not say its frames were left native ('python $minor ... native')"; }
else
  echo "no CPython newer than 3.13 installed (all installed ones are walked): the frames-left-native check is skipped"
fi
echo "ok"
