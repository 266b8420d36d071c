#!/bin/bash
# e2e (issue 34.3): a stripped program's entry point is the named root of
# its main thread's stacks. Debian's zstd has no .symtab: its stacks end in
# its own entry code (e_entry + 0x20, the return address of the call to
# __libc_start_main), which the converter names _start (crt1's name; the
# extent runs through its hlt). At least 95% of the main thread's samples
# must be rooted there, and _start must name nothing but the root.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v zstd >/dev/null || skip "no zstd (Debian zstd)"
readelf -S "$(command -v zstd)" | grep -q '\.symtab' && skip "this zstd is not stripped"

head -c 30000000 /dev/urandom >"$WORK/random.bin"
"$GSYMPROF" profile -F 499 -o "$WORK/zstd.folded" -- \
  zstd --single-thread -19 -f -q "$WORK/random.bin" -o "$WORK/random.zst" 2>"$WORK/zstd.err" ||
  { cat "$WORK/zstd.err" >&2; fail "profile of zstd failed"; }
awk '{ n = $NF; if ($0 !~ /^zstd;/) next; total += n
       if ($0 ~ /^zstd;_start;__libc_start_main_impl;/) rooted += n
       line = $0; sub(/^zstd;_start;/, "", line); if (line ~ /(^|;)_start(;| )/) inner += n }
     END { printf "  zstd: %d samples, %d (%.1f%%) rooted at _start, %d with _start elsewhere\n",
                  total, rooted, total ? 100 * rooted / total : 0, inner
           exit !(total >= 100 && rooted * 100 >= 95 * total && inner == 0) }' "$WORK/zstd.folded" ||
  { sort -t' ' -k2 -nr "$WORK/zstd.folded" | head -5 | cut -c1-300 >&2; fail "zstd's stacks are not rooted at its entry"; }
echo "ok"
