#!/bin/bash
# e2e: JIT code named from a jitdump, with lines. node --perf-prof writes
# jit-PID.dump in its working directory and maps it (PROT_EXEC, as perf
# finds it); no --perf-basic-prof, so no perf map: every JS name comes from
# the dump. A CPU-bound fib() over several source lines must show in most
# samples as "JS:*fib ... (line N)_[j]" (node 20 writes garbage for a user
# script's file name in its line rows, so only the line is shown), the line
# of the calls in fib's callers' frames; the names are those the dump holds;
# the leaf share agrees with perf's (perf inject -j) where perf is usable;
# record, the dump deleted, symbolize gives the same names; so does
# symbolize of perf's perf.data (the dump found through its mapping). V8's
# .eh_frame (--perf-prof-unwinding-info) steps over its optimized frames:
# --stats unwind.jit_cfi_steps, and fib's stacks whole to _start.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v node >/dev/null || skip "no node (Debian package nodejs)"

cat >"$WORK/fib.js" <<'EOF'
function fib(n) {
  if (n < 2) return n;
  return fib(n - 1) +
    fib(n - 2);
}
const end = Date.now() + Number(process.argv[2] || 3) * 1000;
let total = 0;
// V8 writes its jitdump through a 4 KiB stdio buffer: code compiled once fib
// is optimized pushes fib's record (and its .eh_frame) into the file.
const warm = Date.now() + 300;
while (Date.now() < warm) total += fib(25);
for (let i = 0; i < 64; i++) total += new Function('x', `return x + ${i};`)(i);
while (Date.now() < end) total += fib(25);
if (total <= 0) process.exit(1);
EOF
# node runs in $WORK/run (its dump, V8's log and perf inject's ELF files
# land there), its pid written first (exec keeps it).
mkdir -p "$WORK/run"
RUNS=$WORK/node-pids
printf '#!/bin/sh\necho $$ >>"%s"\ncd "%s" || exit 1\nexec node --perf-prof --perf-prof-unwinding-info --interpreted-frames-native-stack "%s" "$@"\n' \
  "$RUNS" "$WORK/run" "$WORK/fib.js" >"$WORK/run-node"
chmod +x "$WORK/run-node"

# share FOLDED REGEX: percent of node's samples whose line matches REGEX.
share() {
  awk -v re="$2" '/^run-node;/ { next } { n = $NF; s = substr($0, 1, length($0) - length(n) - 1); total += n; if (s ~ re) hit += n }
    END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }' "$1"
}
FIB='JS:[*~^]?fib [^;]*fib\.js:1:13 \(line [1-4]\)_\[j\]'

check() {
  local folded=$1 what=$2 fib leaf calls untagged
  fib=$(share "$folded" ";$FIB")
  leaf=$(share "$folded" ";$FIB\$")
  # Below the leaf, fib's frames are at its calls: lines 3 and 4.
  calls=$(sed -E 's/ [0-9]+$//' "$folded" | grep -oE "$FIB;JS:[^;]*fib" | grep -c '(line [34])')
  echo "  $what: $fib% of samples in fib named from the jitdump with a line, $leaf% with fib the leaf"
  (( fib >= 60 )) || { sort -t' ' -k2 -nr "$folded" | head -3 | cut -c1-600 >&2; fail "$what: fib in only $fib%"; }
  (( calls > 0 )) || fail "$what: no caller frame of fib at the line of a call (3 or 4)"
  untagged=$(sed -E 's/ [0-9]+$//' "$folded" | grep -oE ';JS:[^;]*' | grep -v '_\[j\]$' | head -1)
  [[ -z $untagged ]] || fail "$what: a JIT frame without _[j]: $untagged"
}

echo "live profile"
profile_run "$WORK/live.folded" "$WORK/live.err" -F 499 --stats "$WORK/live.stats.json" -- "$WORK/run-node" 2
pid=$(tail -1 "$RUNS")
[[ -f $WORK/run/jit-$pid.dump ]] || fail "node wrote no jit-$pid.dump in its working directory"
[[ ! -e /tmp/perf-$pid.map ]] || fail "node wrote a perf map: the names would not be the jitdump's"
check "$WORK/live.folded" "profile"
# --perf-prof-unwinding-info: V8 writes an .eh_frame for its optimized
# (TurboFan) code, and an .eh_frame_hdr alone for the rest. The dump's CFI
# steps over fib's frames, and the stacks through them are whole: rooted at
# _start (node's main thread), no [truncated].
read -r steps refused fp < <(python3 -c '
import json, sys
u = json.load(open(sys.argv[1]))["unwind"]
print(u["jit_cfi_steps"], u["jit_cfi_rejected"], u["frame_pointer_steps"])' "$WORK/live.stats.json")
whole=$(awk -v re=";$FIB" '/^run-node;/ { next } { n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
    if (s !~ re) next
    t += n; if (s ~ /^node;_start;/ && s !~ /\[truncated\]/) h += n }
  END { printf "%.1f\n", t ? 100 * h / t : 0 }' "$WORK/live.folded")
echo "  profile: $whole% of the samples in fib whole from _start; frames stepped by the dump's CFI $steps, by frame pointer $fp"
(( steps > 0 )) || { cat "$WORK/live.err" >&2; fail "no frame stepped over by the jitdump's CFI"; }
(( refused == 0 )) || { cat "$WORK/live.err" >&2; fail "$refused pieces of V8 code had their .eh_frame refused"; }
awk -v s="$whole" 'BEGIN { exit !(s >= 95) }' ||
  { sort -t' ' -k2 -nr "$WORK/live.folded" | grep -v '^node;_start;' | head -3 | cut -c1-600 >&2
    fail "only $whole% of the samples in fib whole (want >= 95%)"; }
grep -q 'JIT code: [0-9]* samples named from perf maps and jitdumps' "$WORK/live.err" ||
  { cat "$WORK/live.err" >&2; fail "the summary does not report the named JIT samples"; }
# Every fib name in the profile is a name the dump holds, plus its line.
python3 - "$WORK/run/jit-$pid.dump" "$WORK/live.folded" <<'EOF' || fail "names not from the dump"
import re, struct, sys
data = open(sys.argv[1], 'rb').read()
assert struct.unpack_from('<I', data)[0] == 0x4A695444
names, off = set(), struct.unpack_from('<I', data, 8)[0]
while off + 16 <= len(data):
    rid, size = struct.unpack_from('<II', data, off)
    if rid == 0:
        body = data[off + 16 + 40:off + size]
        names.add(body[:body.index(b'\0')].decode())
    off += size
used = set()
for line in open(sys.argv[2]):
    for frame in line.rsplit(' ', 1)[0].split(';'):
        m = re.match(r'(JS:[*~^]?fib .*) \(line \d+\)_\[j\]$', frame)
        if m: used.add(m.group(1))
assert used and used <= names, (used - names)
print(f"  dump: {len(names)} code loads; the profile's fib names {sorted(used)} are among them")
EOF

echo "record, delete the dump, symbolize"
"$GSYMPROF" record -F 499 -o "$WORK/cap.json" -- "$WORK/run-node" 2 2>"$WORK/rec.err" ||
  { cat "$WORK/rec.err" >&2; fail "record failed"; }
rm -f "$WORK"/run/jit-*.dump
"$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/sym.folded" 2>"$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check "$WORK/sym.folded" "symbolize"

# perf, where it runs: its leaf share of fib (perf inject -j names the JIT
# code from the same dump) close to gsymprof's.
# perf's build-id cache goes to $WORK, not ~/.debug.
if command -v perf >/dev/null &&
  perf --buildid-dir "$WORK/buildid" record -q -g -k 1 -F 499 -o "$WORK/perf.data" -- "$WORK/run-node" 2 2>"$WORK/perf.err"; then
  # gsymprof on perf's recording: the dump found through its mapping (MMAP2).
  "$GSYMPROF" symbolize "$WORK/perf.data" >"$WORK/perf-sym.folded" 2>"$WORK/perf-sym.err" ||
    { cat "$WORK/perf-sym.err" >&2; fail "symbolize perf.data failed"; }
  check "$WORK/perf-sym.folded" "symbolize perf.data"
  echo "perf record + inject -j + script"
  pid=$(tail -1 "$RUNS")
  if perf --buildid-dir "$WORK/buildid" inject -j -i "$WORK/perf.data" -o "$WORK/perf.jit.data" 2>>"$WORK/perf.err"; then
    perf_leaf=$(perf --buildid-dir "$WORK/buildid" script -G -i "$WORK/perf.jit.data" -F comm,ip,sym 2>/dev/null |
      awk '$1 == "node" { total++; if ($0 ~ /JS:[*~^]?fib /) hit++ } END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }')
    ours=$(share "$WORK/live.folded" ";$FIB\$")
    echo "  leaf in fib: perf $perf_leaf%, gsymprof $ours%"
    (( perf_leaf > 0 )) || fail "perf named no fib leaf (is perf inject -j working?)"
    diff=$(( perf_leaf > ours ? perf_leaf - ours : ours - perf_leaf ))
    (( diff <= 15 )) || fail "leaf share in fib: perf $perf_leaf% vs gsymprof $ours%"
  else
    echo "  perf inject -j failed: comparison skipped"
  fi
else
  echo "  perf record not usable here: comparison skipped"
fi
echo "ok"
