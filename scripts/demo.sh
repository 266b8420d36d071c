#!/bin/bash
# `sudo make demo`: builds the bundled demo workload (scripts/demo/: C++,
# PIE + a shared library, frame pointers, inlining), profiles it for 5 s at
# 999 Hz, writes out/demo.folded and the flame graph out/demo.svg and prints
# the 10 hottest stacks.
# Env: BUILD (gsymprof's build dir, default build), DEMO_SECONDS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GSYMPROF=$BUILD/gsymprof
SECONDS_TO_PROFILE=${DEMO_SECONDS:-5}

if [[ $(id -u) != 0 ]]; then
  echo "demo.sh: live profiling needs root: run 'sudo make demo'" >&2
  exit 1
fi
[[ -x $GSYMPROF ]] || make BUILD="$BUILD" all

mkdir -p out/demo
flags=(-O2 -g -fno-omit-frame-pointer)
g++ "${flags[@]}" -fPIC -shared scripts/demo/stats.cpp -o out/demo/libdemostats.so
g++ "${flags[@]}" -fPIE -pie -Iscripts/demo scripts/demo/workload.cpp \
  -Lout/demo -ldemostats -Wl,-rpath,'$ORIGIN' -o out/demo/demo_workload

echo "== profiling out/demo/demo_workload for ${SECONDS_TO_PROFILE}s at 999 Hz"
# The workload would run longer; the profiler stops it after -d seconds
# (SIGTERM, then SIGKILL 2 s later; gsymprof then exits 0).
"$GSYMPROF" profile -F 999 -d "$SECONDS_TO_PROFILE" -o out/demo.folded --svg out/demo.svg \
  --title "gsymprof demo: demo_workload, ${SECONDS_TO_PROFILE} s at 999 Hz" -- out/demo/demo_workload 600
echo "== flame graph: out/demo.svg (open it in a browser: click to zoom, search box top right)"

total=$(awk '{ s += $NF } END { print s + 0 }' out/demo.folded)
echo
echo "== the 10 hottest stacks of $total samples (out/demo.folded; count, share, stack)"
awk -v total="$total" '{ printf "%d\t%5.1f%%\t%s\n", $NF, 100 * $NF / total, substr($0, 1, length($0) - length($NF) - 1) }' \
  out/demo.folded | sort -t$'\t' -k1,1nr -k3,3 | head -n 10
