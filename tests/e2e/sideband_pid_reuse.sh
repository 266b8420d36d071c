#!/bin/bash
# e2e: pid reuse. 60 times, reuse_one runs 8 ms and exits, then reuse_two
# is started with the very pid reuse_one had (clone3 set_tid) and runs 8 ms.
# Both are non-PIE, their code at the same addresses, so a sample
# normalized against the other process's image gets the other's names. No
# sample may be named from the other process's binary, and most must be in
# the process's own spin function (the rest: ld.so's startup, exit; reading
# /proc/PID/maps after a wake-up, reuse_one's samples were named from
# reuse_two's file, or not at all).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

gcc -O2 -g -fno-pie -no-pie -DSPIN_NAME=one_spin -DSPIN_MAIN "$FIXTURES/named_spin.c" -o "$WORK/reuse_one" &&
  gcc -O2 -g -fno-pie -no-pie -DSPIN_NAME=two_spin -DSPIN_MAIN "$FIXTURES/named_spin.c" -o "$WORK/reuse_two" &&
  gcc -O2 -g "$FIXTURES/sideband_reuse.c" -o "$WORK/sideband_reuse" ||
  fail "cannot build the pid reuse fixture"
[[ $(nm "$WORK/reuse_one" | awk '$3 == "one_spin" {print $1}') == $(nm "$WORK/reuse_two" | awk '$3 == "two_spin" {print $1}') ]] ||
  fail "one_spin and two_spin are not at one address"

for mode in dwarf fp; do
  "$GSYMPROF" profile -F 999 --call-graph "$mode" --pid-in-comm -o "$WORK/$mode.folded" -- \
    "$WORK/sideband_reuse" "$WORK/reuse_one" "$WORK/reuse_two" 0.008 60 >"$WORK/$mode.stdout" 2>"$WORK/$mode.err"
  status=$?
  # set_tid needs CAP_SYS_ADMIN in the initial pid namespace.
  grep -q 'clone3 with set_tid' "$WORK/$mode.err" && skip "$(grep 'clone3' "$WORK/$mode.err")"
  [[ $status == 0 ]] || { cat "$WORK/$mode.err" >&2; fail "gsymprof profile exited with $status"; }
  rounds=$(awk '$1 == $2' "$WORK/$mode.stdout" | wc -l)
  (( rounds >= 40 )) || { cat "$WORK/$mode.stdout" >&2; fail "the pid was reused in only $rounds rounds"; }
  # Only pids that were reused count.
  awk -v mode="$mode" '
    FNR == NR { if ($1 == $2) reused[$1] = 1; next }
    { n = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";")
      comm = f[1]; pid = comm; sub(/^.*-/, "", pid); sub(/-[0-9]+$/, "", comm)
      if (!(pid in reused)) next
      if (comm == "reuse_one") { own = "one_spin"; other = "two_spin"; other_file = "reuse_two+" }
      else if (comm == "reuse_two") { own = "two_spin"; other = "one_spin"; other_file = "reuse_one+" }
      else next
      total[comm] += n
      if (index(line, ";" other) || index(line, other_file)) { wrong += n; print "  named from the other process: " $0 }
      else if (index(line, ";" own)) right[comm] += n }
    END { for (c in total) printf "  %s (%s): %d samples, %d in its own binary\n", c, mode, total[c], right[c]
          exit !(wrong == 0 && total["reuse_one"] >= 50 && total["reuse_two"] >= 50 &&
                 right["reuse_one"] * 2 >= total["reuse_one"] &&
                 right["reuse_two"] * 2 >= total["reuse_two"]) }' "$WORK/$mode.stdout" "$WORK/$mode.folded" ||
    { grep -v "_spin" "$WORK/$mode.folded" | sed "s/-[0-9]*;/;/" | sort | uniq -c | sort -nr | head -8 >&2; fail "--call-graph $mode: samples not named from their own process's binary"; }
done
echo "ok"
