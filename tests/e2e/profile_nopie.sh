#!/bin/bash
# e2e: the same hot paths as profile_pie.sh in a non-PIE (ET_EXEC) build, so a
# missing or doubled load-bias subtraction cannot hide (2 s at 999 Hz each).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
build_fixture nopie
D=$WORK/nopie FIX=$D/profile_fixture
# The default call graph (dwarf) unwinds through FP-less libc up to _start.
ROOT="_start;__libc_start_main_impl;__libc_start_call_main;main"

for mode in exec lib dlopen endcall; do
  echo "$mode"
  profile_run "$WORK/$mode.folded" "$WORK/$mode.err" -F 999 -- "$FIX" "$mode" 2 "$D/libplugin.so"
  case $mode in
    exec) stack="$ROOT;phase_exec;exec_outer_inline_[i];exec_inner_inline_[i];exec_leaf" ;;
    lib) stack="$ROOT;phase_lib;lib_entry;lib_inline_[i];lib_leaf" ;;
    dlopen) stack="$ROOT;phase_dlopen;plugin_entry;plugin_inline_[i];plugin_leaf" ;;
    endcall) stack="$ROOT;ends_in_call;spin_forever_leaf" ;;
  esac
  # dlopen mode warms up in phase_exec before it loads the plugin.
  expect_dominant "$WORK/$mode.folded" profile_fixture "$stack" 60 \
    "$([[ $mode == dlopen ]] && echo ';phase_exec;')"
  expect_resolved "$WORK/$mode.folded" profile_fixture libhot.so libplugin.so
  expect_no_loss "$WORK/$mode.err"
done
echo "ok"
