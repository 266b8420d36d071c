#!/bin/bash
# e2e: kernel frames of perf.data files. perf record -g and --call-graph
# dwarf of a syscall-heavy phase: symbolize names the kernel part of each
# callchain (_[k], leafward of the user frames) from this machine's
# /proc/kallsyms because the recording kernel's build ID (HEADER_BUILD_ID,
# [kernel.kallsyms]) is the running kernel's; a recording whose kernel build
# ID differs keeps them unnamed ([kernel]_[k]) and says why.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v perf >/dev/null || skip "no perf (Debian linux-perf)"
perf record -q -o /dev/null -- true 2>/dev/null || skip "perf record does not work here"
build_fixture pie
FIX=$WORK/pie/profile_fixture

# share FOLDED REGEX: percent of the samples whose line matches REGEX.
share() {
  awk -v re="$2" '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1); total += n; if (s ~ re) hit += n }
    END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }' "$1"
}

running_id=$(python3 - <<'EOF'
import struct
data = open("/sys/kernel/notes", "rb").read()
off = 0
while off + 12 <= len(data):
    namesz, descsz, ntype = struct.unpack_from("<III", data, off)
    off += 12
    name = data[off:off + namesz]
    off += (namesz + 3) & ~3
    desc = data[off:off + descsz]
    off += (descsz + 3) & ~3
    if ntype == 3 and name.rstrip(b"\0") == b"GNU":
        print(desc.hex())
        break
EOF
)
[[ -n $running_id ]] || skip "the running kernel has no build ID"

for mode in fp dwarf; do
  echo "perf record --call-graph $mode"
  perf record -q -F 999 --call-graph $mode -o "$WORK/$mode.data" -- "$FIX" syscall 2 >/dev/null 2>&1 ||
    fail "perf record --call-graph $mode failed"
  "$GSYMPROF" symbolize "$WORK/$mode.data" >"$WORK/$mode.folded" 2>"$WORK/$mode.err" ||
    { cat "$WORK/$mode.err" >&2; fail "symbolize of the $mode recording failed"; }
  kernel=$(share "$WORK/$mode.folded" ';__GI___libc_read;entry_SYSCALL_64[a-z_]*_\[k\];do_syscall_64_\[k\];')
  unnamed=$(share "$WORK/$mode.folded" '\[kernel\]_\[k\]')
  echo "  $mode: $kernel% of samples under read() through entry_SYSCALL_64;do_syscall_64, $unnamed% unnamed kernel frames"
  (( kernel >= 35 )) || { sort -t' ' -k2 -nr "$WORK/$mode.folded" | head -5 >&2; fail "$mode: kernel frames in only $kernel%"; }
  (( unnamed <= 5 )) || fail "$mode: $unnamed% unnamed kernel frames"
  grep -Eq ';(ksys_read|vfs_read|read_zero)_\[k\]' "$WORK/$mode.folded" || fail "$mode: no read-path kernel function"
  grep -q 'kernel frames are not named' "$WORK/$mode.err" && fail "$mode: kernel frames reported unnamed"
done

echo "a recording from another kernel: frames kept, not named, reason said"
python3 - "$WORK/fp.data" "$WORK/other.data" "$running_id" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
kernel_id = bytes.fromhex(sys.argv[3])
assert data.count(kernel_id) >= 1, "the recording does not hold the kernel's build ID"
other = bytes(b ^ 0xff for b in kernel_id)
open(sys.argv[2], "wb").write(data.replace(kernel_id, other))
EOF
"$GSYMPROF" symbolize "$WORK/other.data" >"$WORK/other.folded" 2>"$WORK/other.err" ||
  { cat "$WORK/other.err" >&2; fail "symbolize of the other kernel's recording failed"; }
grep -q 'do_syscall_64_\[k\]' "$WORK/other.folded" && fail "another kernel's frames were named from this machine"
unnamed=$(share "$WORK/other.folded" ';__GI___libc_read;\[kernel\]_\[k\]')
echo "  other kernel: $unnamed% of samples under read() end in [kernel]_[k]"
(( unnamed >= 35 )) || fail "other kernel: kernel frames in only $unnamed%"
grep -q "kernel frames are not named: recorded on kernel [0-9a-f]*, this machine runs $running_id" "$WORK/other.err" ||
  { cat "$WORK/other.err" >&2; fail "no reason given for the unnamed kernel frames"; }
echo "ok"
