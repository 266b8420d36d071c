#!/bin/bash
# e2e: kernel stacks, on by default. A syscall-heavy phase (read(2) of
# /dev/zero, 64 KiB at a time) spends most of its time in the kernel: its
# samples carry kernel frames (_[k]) named from /proc/kallsyms, leafward of
# the user frames, with the syscall entry among them; live (both call-graph
# modes), recorded then symbolized elsewhere (names from the capture, not
# from this machine's kallsyms), as pprof (a kernel mapping), and none with
# --user-callchains.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
[[ -r /proc/kallsyms ]] || skip "no /proc/kallsyms"
build_fixture pie
FIX=$WORK/pie/profile_fixture
USER_STACK="_start;__libc_start_main_impl;__libc_start_call_main;main;phase_syscall;__GI___libc_read"
# Frame pointers lose read()'s caller (libc's read keeps no frame pointer)
# and libc's own callers: only the frames a frame-pointer walk can see.
FP_USER_STACK="__libc_start_call_main;main;__GI___libc_read"

# share FOLDED REGEX: percent of the samples whose line matches REGEX.
share() {
  awk -v re="$2" '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1); total += n; if (s ~ re) hit += n }
    END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }' "$1"
}

# check FOLDED WHAT: the fixture's kernel time is visible and named.
check() {
  local folded=$1 what=$2 user=${3:-$USER_STACK} kernel entry unnamed misplaced
  kernel=$(share "$folded" "^profile_fixture;$user;.*_\\[k\\]\$")
  entry=$(share "$folded" "^profile_fixture;$user;entry_SYSCALL_64[a-z_]*_\\[k\\];do_syscall_64_\\[k\\];")
  unnamed=$(share "$folded" '\[kernel\]_\[k\]')
  echo "  $what: $kernel% of samples end in kernel frames under read(), $entry% through entry_SYSCALL_64;do_syscall_64, $unnamed% with an unnamed kernel frame"
  (( kernel >= 40 )) || { sort -t' ' -k2 -nr "$folded" | head -5 >&2; fail "$what: only $kernel% of samples show kernel frames"; }
  (( entry >= 35 )) || { sort -t' ' -k2 -nr "$folded" | head -5 >&2; fail "$what: the syscall entry is in only $entry%"; }
  (( unnamed <= 5 )) || { grep '\[kernel\]_\[k\]' "$folded" | head -5 >&2; fail "$what: $unnamed% unnamed kernel frames"; }
  # Kernel frames are leafward: once a frame is _[k], every frame after it is.
  misplaced=$(awk '{ line = substr($0, 1, length($0) - length($NF) - 1); n = split(line, f, ";"); k = 0
      for (i = 2; i <= n; i++) { if (f[i] ~ /_\[k\]$/) k = 1; else if (k) { print; break } } }' "$folded")
  [[ -z $misplaced ]] || fail "$what: a user frame leafward of a kernel frame: $misplaced"
  # The kernel's part of the read: a read-path function under the entry.
  grep -Eq ';(ksys_read|vfs_read|read_zero|__x64_sys_read)_\[k\]' "$folded" ||
    fail "$what: no read-path kernel function named"
}

for mode in dwarf fp; do
  echo "live profile (--call-graph $mode)"
  profile_run "$WORK/live-$mode.folded" "$WORK/live-$mode.err" -F 499 --call-graph $mode -- "$FIX" syscall 2
  user=$USER_STACK
  [[ $mode == fp ]] && user=$FP_USER_STACK
  check "$WORK/live-$mode.folded" "profile --call-graph $mode" "$user"
  expect_no_loss "$WORK/live-$mode.err"
done

echo "--user-callchains"
profile_run "$WORK/user.folded" "$WORK/user.err" -F 499 --user-callchains -- "$FIX" syscall 1
grep -q '_\[k\]' "$WORK/user.folded" && fail "--user-callchains kept kernel frames"
read_share=$(share "$WORK/user.folded" "^profile_fixture;$USER_STACK\$")
echo "  --user-callchains: $read_share% of samples end in read(), no kernel frame"
(( read_share >= 40 )) || fail "--user-callchains: read() carries only $read_share%"

echo "record, then symbolize with the capture's kernel names"
"$GSYMPROF" record -F 499 -o "$WORK/cap.json" -- "$FIX" syscall 2 2>"$WORK/rec.err" ||
  { cat "$WORK/rec.err" >&2; fail "record failed"; }
grep -q '"name":"do_syscall_64"' "$WORK/cap.json" || fail "the capture carries no kernel symbol do_syscall_64"
kernel_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kernel"]["build_id"])' "$WORK/cap.json")
[[ -n $kernel_id ]] || fail "the capture has no kernel build ID"
"$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/sym.folded" 2>"$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check "$WORK/sym.folded" "symbolize"
# Names come from the capture (the recording machine), never from the
# symbolizing machine's kallsyms: a renamed symbol in the capture shows.
sed 's/"name":"do_syscall_64"/"name":"recorded_do_syscall_64"/' "$WORK/cap.json" >"$WORK/renamed.json"
"$GSYMPROF" symbolize "$WORK/renamed.json" >"$WORK/renamed.folded" 2>/dev/null || fail "symbolize of the renamed capture failed"
grep -q ';recorded_do_syscall_64_\[k\];' "$WORK/renamed.folded" || fail "kernel names were not taken from the capture"
grep -q ';do_syscall_64_\[k\];' "$WORK/renamed.folded" && fail "kernel names were read from this machine"

echo "the kernel image's symbols kept per boot in the cache"
# The first run above read /proc/kallsyms and kept the image's text in the
# cache; a later run whose kernel frames all lie in the image names them
# from that copy, as /proc/kallsyms would.
ls "$GSYMPROF_CACHE"/*.kallsyms >/dev/null 2>&1 || fail "no copy of the kernel image's symbols in $GSYMPROF_CACHE"
if command -v strace >/dev/null; then
  strace -f -qq -e trace=openat -o "$WORK/strace.txt" \
    "$GSYMPROF" record -F 499 -o "$WORK/cap2.json" -- "$FIX" syscall 1 2>"$WORK/rec2.err" ||
    { cat "$WORK/rec2.err" >&2; fail "record under strace failed"; }
  read_kallsyms=no
  grep -q '/proc/kallsyms' "$WORK/strace.txt" && read_kallsyms=yes
else
  echo "  (no strace: whether the copy was used is not checked)"
  "$GSYMPROF" record -F 499 -o "$WORK/cap2.json" -- "$FIX" syscall 1 2>"$WORK/rec2.err" || fail "record failed"
  read_kallsyms=unknown
fi
# Every kernel symbol of both captures is /proc/kallsyms's: a function
# symbol starting there with that name, ending at the next one. A run that
# read /proc/kallsyms anyway must have had a frame outside the image.
python3 - "$read_kallsyms" "$WORK/cap.json" "$WORK/cap2.json" <<'PY' || fail "kernel symbols differ from /proc/kallsyms"
import json, sys
starts, names, module_of = [], {}, {}
stext = etext = None
for line in open("/proc/kallsyms"):
    f = line.split()
    if len(f) < 3 or f[1] not in "tTwW":
        continue
    a = int(f[0], 16)
    starts.append(a)
    names.setdefault(a, []).append(f[2])
    if f[2] == "_stext" and len(f) == 3: stext = a
    if f[2] == "_etext" and len(f) == 3: etext = a
starts = sorted(set(starts))
import bisect
def num(v):  # the capture writes addresses as hex strings
    return int(v, 0) if isinstance(v, str) else v
for path in sys.argv[2:]:
    cap = json.load(open(path))
    frames = [num(fr["address"]) for st in cap["stacks"] for fr in st["frames"] if fr.get("kernel")]
    outside = [a for a in frames if not (stext <= a < etext)]
    for sym in cap["kernel"]["symbols"]:
        sym["start"], sym["end"] = num(sym["start"]), num(sym["end"])
        i = bisect.bisect_left(starts, sym["start"])
        assert i < len(starts) and starts[i] == sym["start"], (path, sym)
        assert sym["name"] == names[sym["start"]][0], (path, sym, names[sym["start"]])
        assert i + 1 < len(starts) and starts[i + 1] == sym["end"], (path, sym)
    print(f"  {path.split('/')[-1]}: {len(cap['kernel']['symbols'])} kernel symbols as /proc/kallsyms has them, {len(outside)} frames outside the image")
    if path.endswith("cap2.json") and sys.argv[1] == "yes" and not outside:
        sys.exit("the warm run read /proc/kallsyms though every kernel frame lies in the image")
PY
[[ $read_kallsyms == no ]] && echo "  the warm run did not read /proc/kallsyms"

echo "pprof: kernel frames on a kernel mapping"
if use_go_pprof; then
  "$GSYMPROF" symbolize --format pprof -o "$WORK/cap.pb.gz" "$WORK/cap.json" 2>/dev/null || fail "pprof output failed"
  "$GO" tool pprof -raw -symbolize=none "$WORK/cap.pb.gz" >"$WORK/raw.txt" 2>"$WORK/raw.err" || { cat "$WORK/raw.err" >&2; fail "go tool pprof -raw failed"; }
  grep -Eq "\[kernel\.kallsyms\] .*$kernel_id|$kernel_id .*\[kernel\.kallsyms\]" "$WORK/raw.txt" ||
    grep -A30 '^Mappings' "$WORK/raw.txt" | grep -q "kernel.kallsyms" ||
    { sed -n '/^Mappings/,$p' "$WORK/raw.txt" >&2; fail "pprof has no [kernel.kallsyms] mapping"; }
  grep -q ' do_syscall_64 ' "$WORK/raw.txt" || fail "pprof names no do_syscall_64"
else
  echo "  (no go: pprof check skipped)"
fi
echo "ok"
