#!/bin/bash
# e2e: time spent in the kernel's vDSO (clock_gettime in a loop), which no
# file backs: the default (dwarf) unwind goes through it with the vDSO's own
# CFI and names its function; live, and recorded then symbolized.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
grep -q '\[vdso\]' /proc/self/maps || skip "this kernel maps no vDSO"
build_fixture pie
FIX=$WORK/pie/profile_fixture
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"
# libc's clock_gettime calls the vDSO's (exported as clock_gettime and
# __vdso_clock_gettime at one address; either name is right).
# Where the clock source is read by a static helper (pvclock, hvclock: no
# symbol in the vDSO's .dynsym covers it), that helper stays [vdso]+0xOFFSET
# under the named vDSO clock_gettime, as perf leaves it unnamed too.
VDSO_STACK="^profile_fixture;$ROOT;phase_vdso;now_\\[i\\];__GI___clock_gettime;(__vdso_)?clock_gettime(;\\[vdso\\]\\+0x[0-9a-f]+)?\$"

# share FOLDED REGEX: percent of the samples whose stack matches REGEX.
share() {
  awk -v re="$2" '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1); total += n; if (s ~ re) hit += n }
    END { if (total == 0) print 0; else printf "%.0f\n", 100 * hit / total }' "$1"
}

check() {
  local folded=$1 what=$2 pct unknown
  pct=$(share "$folded" "$VDSO_STACK")
  # Unnamed: [unknown], [truncated], or a [vdso]+0x frame other than a
  # helper under the named vDSO clock_gettime.
  unknown=$(( $(share "$folded" '\[unknown\]|\[truncated\]|\[vdso\]\+0x') -
              $(share "$folded" 'clock_gettime;\[vdso\]\+0x[0-9a-f]+$') ))
  echo "  $what: $pct% of samples are main;phase_vdso;now_[i];clock_gettime;<vDSO clock_gettime>, $unknown% unnamed or truncated"
  (( pct >= 60 )) || { sort -t' ' -k2 -nr "$folded" | head -5 >&2; fail "$what: vDSO stack carries only $pct%"; }
  (( unknown <= 10 )) || { grep -E '\[unknown\]|\[truncated\]|\[vdso\]\+0x' "$folded" | head -5 >&2; fail "$what: $unknown% unnamed"; }
}

# The vDSO's copy is a memfd: nothing may appear in TMPDIR (nor anywhere).
export TMPDIR="$WORK/tmpdir"
mkdir -p "$TMPDIR"

echo "live profile"
profile_run "$WORK/live.folded" "$WORK/live.err" -v -F 999 -- "$FIX" vdso 2
check "$WORK/live.folded" "profile"
expect_no_loss "$WORK/live.err"
# No walk may stop in a module-less frame (the vDSO is a module), but for
# the rare sample taken inside execve, after the new program's name and
# before its mappings (its registers are still the old program's): at most
# one in 500 samples.
no_module=$(sed -n 's/.*unwind_no_module \([0-9]*\).*/\1/p' "$WORK/live.err" | head -1)
taken=$(sed -n 's/^gsymprof: \([0-9]*\) samples taken.*/\1/p' "$WORK/live.err" | head -1)
[[ -n $no_module && -n $taken ]] || fail "the summary lacks the unwind counters: $(cat "$WORK/live.err")"
(( no_module * 500 <= taken )) || fail "unwinds stopped in a module-less frame ($no_module of $taken): $(cat "$WORK/live.err")"

echo "record, then symbolize"
"$GSYMPROF" record -F 999 -o "$WORK/cap.json" -- "$FIX" vdso 2 2>"$WORK/rec.err" ||
  { cat "$WORK/rec.err" >&2; fail "record failed"; }
grep -q '"path": *"\[vdso\]"' "$WORK/cap.json" || fail "the capture has no [vdso] module"
"$GSYMPROF" symbolize "$WORK/cap.json" >"$WORK/sym.folded" 2>"$WORK/sym.err" ||
  { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check "$WORK/sym.folded" "symbolize"
[[ -z $(ls -A "$TMPDIR") ]] || fail "files left in TMPDIR: $(ls -A "$TMPDIR")"
echo "ok"
