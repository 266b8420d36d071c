#!/bin/bash
# e2e: pid reuse. reuse_one runs and exits; reuse_two is then started with
# the very pid reuse_one had (clone3 set_tid). Both are non-PIE, their code
# at the same addresses, so a sample normalized against the other process's
# image would get a wrong name. Each sample must be named from its own
# process's binary (before the side-band, every reuse_one sample was named
# from reuse_two's file or not at all).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

gcc -O2 -g -fno-pie -no-pie -DSPIN_NAME=one_spin "$FIXTURES/sideband_spin.c" -o "$WORK/reuse_one" &&
  gcc -O2 -g -fno-pie -no-pie -DSPIN_NAME=two_spin "$FIXTURES/sideband_spin.c" -o "$WORK/reuse_two" &&
  gcc -O2 -g "$FIXTURES/sideband_reuse.c" -o "$WORK/sideband_reuse" ||
  fail "cannot build the pid reuse fixture"
[[ $(nm "$WORK/reuse_one" | awk '$3 == "one_spin" {print $1}') == $(nm "$WORK/reuse_two" | awk '$3 == "two_spin" {print $1}') ]] ||
  fail "one_spin and two_spin are not at one address"

for mode in dwarf fp; do
  "$GSYMPROF" profile -F 999 --call-graph "$mode" --pid-in-comm -o "$WORK/$mode.folded" -- \
    "$WORK/sideband_reuse" "$WORK/reuse_one" "$WORK/reuse_two" 0.4 >"$WORK/$mode.stdout" 2>"$WORK/$mode.err"
  status=$?
  # The launcher exits 3 when the pid could not be given again (set_tid
  # needs CAP_SYS_ADMIN; the pid may have been taken meanwhile).
  grep -q 'clone3 with set_tid' "$WORK/$mode.err" && skip "$(grep 'clone3' "$WORK/$mode.err")"
  [[ $status == 0 ]] || { cat "$WORK/$mode.err" >&2; fail "gsymprof profile exited with $status"; }
  read -r first second rest < <(tail -n 1 "$WORK/$mode.stdout")
  [[ -n $first && $first == "$second" ]] || { cat "$WORK/$mode.stdout" >&2; fail "the pid was not reused"; }
  awk -v mode="$mode" -v pid="$first" '
    { n = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";")
      if (f[1] == "reuse_one-" pid) { own = "one_spin"; other = "two_spin" }
      else if (f[1] == "reuse_two-" pid) { own = "two_spin"; other = "one_spin" }
      else next
      total[f[1]] += n
      if (index(line, ";" other) || index(line, "reuse_two+") && own == "one_spin" || index(line, "reuse_one+") && own == "two_spin") {
        wrong += n; print "  named from the other process: " $0 }
      else if (index(line, ";" own)) right[f[1]] += n }
    END { for (c in total) printf "  %s (%s): %d samples, %d in its own binary\n", c, mode, total[c], right[c]
          exit !(wrong == 0 && total["reuse_one-" pid] >= 150 && total["reuse_two-" pid] >= 150 &&
                 right["reuse_one-" pid] * 10 >= total["reuse_one-" pid] * 9 &&
                 right["reuse_two-" pid] * 10 >= total["reuse_two-" pid] * 9) }' "$WORK/$mode.folded" ||
    fail "--call-graph $mode: samples not named from their own process's binary"
done
echo "ok"
