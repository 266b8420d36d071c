#!/bin/bash
# e2e (root): captures of a non-PIE and a PIE build of the same program
# symbolize to the same function names (a missing load-bias subtraction or
# a PIE-only assumption would show as module+0x frames or other names).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture pie
build_fixture nopie
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"

# STACKS KIND: the stacks (no counts) carrying >= 5% of the samples.
main_stacks() {
  awk '{ c = $NF; total += c; s[NR] = substr($0, 1, length($0) - length(c) - 1); n[NR] = c }
       END { for (i = 1; i <= NR; i++) if (n[i] * 20 >= total) print s[i] }' "$1" | LC_ALL=C sort
}

for kind in nopie pie; do
  for mode in exec lib; do
    "$GSYMPROF" record -F 999 -o "$WORK/$kind-$mode.json" -- "$WORK/$kind/profile_fixture" "$mode" 1.5 \
      2> "$WORK/$kind-$mode.err" || { cat "$WORK/$kind-$mode.err"; fail "record ($kind $mode) failed"; }
    "$GSYMPROF" symbolize "$WORK/$kind-$mode.json" > "$WORK/$kind-$mode.folded" 2> "$WORK/$kind-$mode.serr" ||
      { cat "$WORK/$kind-$mode.serr"; fail "symbolize ($kind $mode) failed"; }
    expect_resolved "$WORK/$kind-$mode.folded" profile_fixture libhot.so
    main_stacks "$WORK/$kind-$mode.folded" > "$WORK/$kind-$mode.main"
  done
  # Load bias: zero for the non-PIE executable, non-zero for the PIE one.
  bias=$(grep -o "\"path\":\"$WORK/$kind/profile_fixture\",\"build_id\":\"[0-9a-f]*\",\"build_id_kind\":\"[a-z0-9]*\",\"load_bias\":\"0x[0-9a-f]*\"" \
    "$WORK/$kind-exec.json" | head -1 | sed 's/.*"load_bias":"//; s/"$//')
  case $kind in
    nopie) [[ $bias == 0x0 ]] || fail "non-PIE executable has load bias '$bias'" ;;
    pie) [[ -n $bias && $bias != 0x0 ]] || fail "PIE executable has load bias '$bias'" ;;
  esac
done
expect_dominant "$WORK/nopie-exec.folded" profile_fixture \
  "$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" 60
expect_dominant "$WORK/nopie-lib.folded" profile_fixture "$ROOT;phase_lib;lib_entry;lib_inline_[i];lib_leaf" 60
for mode in exec lib; do
  diff -u "$WORK/nopie-$mode.main" "$WORK/pie-$mode.main" ||
    fail "$mode: the main stacks of the non-PIE and PIE captures differ"
done
echo "ok: non-PIE and PIE captures symbolize to the same stacks"
