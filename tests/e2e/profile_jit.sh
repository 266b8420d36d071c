#!/bin/bash
# e2e: JIT code named through perf maps. node --perf-basic-prof writes
# /tmp/perf-PID.map ("START SIZE JS:*fib /path/fib.js:1:13"); a CPU-bound
# recursive fib() spends nearly all its time in JIT code in anonymous
# executable memory. Its samples must show fib by name, suffixed _[j], with
# almost nothing [unknown] (the frame-pointer fallback carries --call-graph
# dwarf through the JIT frames); live in both call-graph modes, and recorded,
# the map deleted, then symbolized (names from the capture). Without a map
# the summary says so.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v node >/dev/null || skip "no node (Debian package nodejs)"

cat >"$WORK/fib.js" <<'EOF'
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const end = Date.now() + Number(process.argv[2] || 3) * 1000;
let total = 0;
while (Date.now() < end) total += fib(25);
if (total <= 0) process.exit(1);
EOF
# Each node run writes its pid here first (exec keeps it), so the map it
# leaves in /tmp is known and removed; it runs in $WORK, where
# --perf-basic-prof also writes V8's isolate-*-v8.log.
RUNS=$WORK/node-pids
trap 'for p in $(cat "$RUNS" 2>/dev/null); do rm -f "/tmp/perf-$p.map"; done; cleanup' EXIT
printf '#!/bin/sh\necho $$ >>"%s"\ncd "%s" || exit 1\nexec node "$@" "%s" 3\n' "$RUNS" "$WORK" "$WORK/fib.js" >"$WORK/run-node"
chmod +x "$WORK/run-node"

# share FOLDED REGEX: percent of node's samples (run-node's before exec left
# out) whose line matches REGEX.
share() {
  awk -v re="$2" '/^run-node;/ { next } { n = $NF; s = substr($0, 1, length($0) - length(n) - 1); total += n; if (s ~ re) hit += n }
    END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }' "$1"
}

# check FOLDED WHAT: fib named in most samples, as JIT frames, little unknown.
check() {
  local folded=$1 what=$2 fib unknown untagged
  fib=$(share "$folded" ';JS:[*~^]?fib [^;]*fib\.js:[0-9:]*_\[j\]')
  unknown=$(share "$folded" '\[unknown\]')
  echo "  $what: $fib% of samples in fib (named from the perf map), $unknown% with an [unknown] frame"
  (( fib >= 60 )) || { sort -t' ' -k2 -nr "$folded" | head -3 | cut -c1-600 >&2; fail "$what: fib in only $fib%"; }
  (( unknown < 5 )) || { grep '\[unknown\]' "$folded" | sort -t' ' -k2 -nr | head -3 | cut -c1-600 >&2; fail "$what: $unknown% [unknown]"; }
  # Every map-named frame carries the suffix; none leaks out without it.
  untagged=$(sed -E 's/ [0-9]+$//' "$folded" | grep -oE ';JS:[^;]*' | grep -v '_\[j\]$' | head -1)
  [[ -z $untagged ]] || fail "$what: a JIT frame without _[j]: $untagged"
}

for mode in dwarf fp; do
  echo "live profile (--call-graph $mode)"
  profile_run "$WORK/live-$mode.folded" "$WORK/live-$mode.err" -F 499 --call-graph $mode -- "$WORK/run-node" --perf-basic-prof
  check "$WORK/live-$mode.folded" "profile --call-graph $mode"
  grep -q 'JIT code: [0-9]* samples named from perf maps' "$WORK/live-$mode.err" ||
    { cat "$WORK/live-$mode.err" >&2; fail "the summary does not report the named JIT samples"; }
  if [[ $mode == dwarf ]]; then
    grep -q 'frame-pointer fallback: [0-9]* frames' "$WORK/live-$mode.err" ||
      fail "the summary does not count the frame-pointer fallback"
    # Through the JIT frames to node's own C++ below them: the stacks are whole.
    grep -q '^node;_start;.*;JS:[^;]*_\[j\];.*fib' "$WORK/live-$mode.folded" ||
      fail "dwarf: no stack from _start through JIT frames to fib"
  fi
done

echo "record, delete the perf map, symbolize"
"$GSYMPROF" record -F 499 -o "$WORK/cap.json" -- "$WORK/run-node" --perf-basic-prof 2>"$WORK/rec.err" ||
  { cat "$WORK/rec.err" >&2; fail "record failed"; }
pid=$(tail -1 "$RUNS")
[[ -f /tmp/perf-$pid.map ]] || fail "node left no /tmp/perf-$pid.map"
rm -f "/tmp/perf-$pid.map"
"$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/sym.folded" 2>"$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check "$WORK/sym.folded" "symbolize"
# The capture carries only the entries its frames use, not the whole map.
python3 - "$WORK/cap.json" <<'EOF' || fail "the capture's jit_symbols are wrong"
import json, sys
cap = json.load(open(sys.argv[1]))
symbols = cap["jit_symbols"]
used = {f["jit"] for s in cap["stacks"] for f in s["frames"] if "jit" in f}
assert symbols and used == set(range(len(symbols))), (len(symbols), sorted(used))
assert any("fib" in s["name"] for s in symbols)
print(f"  capture: {len(symbols)} perf-map entries carried")
EOF
"$GSYMPROF" symbolize --format json "$WORK/cap.json" 2>/dev/null | grep -q '"name":"JS:[^"]*fib[^"]*","kind":"jit"' ||
  fail "JSON output has no fib frame of kind jit"

echo "no perf map: the summary says so"
profile_run "$WORK/nomap.folded" "$WORK/nomap.err" -F 499 -- "$WORK/run-node"
pid=$(tail -1 "$RUNS")
grep -q "samples in anonymous executable memory (JIT code?) that no perf map names" "$WORK/nomap.err" &&
  grep -q "no /tmp/perf-PID.map for pid (samples): $pid (" "$WORK/nomap.err" ||
  { cat "$WORK/nomap.err" >&2; fail "the summary does not report JIT samples without a perf map"; }
grep -q '_\[j\]' "$WORK/nomap.folded" && fail "JIT frames named without a perf map"
echo "ok"
