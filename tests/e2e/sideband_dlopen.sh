#!/bin/bash
# e2e: dlopen/dlclose of two libraries that land at one address in turn
# (libalpha.so, then libbravo.so where libalpha.so was, three rounds). The
# thread's name says which library ran when a sample was taken
# (phase_alpha / phase_bravo): each sample must be named from the library
# mapped at that moment, never from the other one (before the side-band,
# every sample was named from the first library).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling

gcc -O2 -g -fPIC -shared -DSPIN_NAME=hot_alpha "$FIXTURES/named_spin.c" -o "$WORK/libalpha.so" &&
  gcc -O2 -g -fPIC -shared -DSPIN_NAME=hot_bravo "$FIXTURES/named_spin.c" -o "$WORK/libbravo.so" &&
  gcc -O2 -g "$FIXTURES/sideband_dlopen.c" -ldl -o "$WORK/sideband_dlopen" ||
  fail "cannot build the dlopen fixture"

for mode in dwarf fp; do
  # The fixture's stdout (one "BASE SYMBOL" line per dlopen) is profile_run's
  # stdout; the profile goes to -o.
  profile_run "$WORK/$mode.stdout" "$WORK/$mode.err" -F 999 --call-graph "$mode" \
    -o "$WORK/$mode.folded" -- "$WORK/sideband_dlopen" "$WORK/libalpha.so" hot_alpha phase_alpha \
    "$WORK/libbravo.so" hot_bravo phase_bravo 3 0.25
  [[ $(wc -l <"$WORK/$mode.stdout") == 6 && $(awk '{print $1}' "$WORK/$mode.stdout" | sort -u | wc -l) == 1 ]] ||
    { cat "$WORK/$mode.stdout" >&2; fail "the two libraries were not mapped at one address"; }
  awk -v mode="$mode" '
    { n = $NF; line = $0; sub(/ [0-9]+$/, "", line); split(line, f, ";"); comm = f[1]
      if (comm == "phase_alpha") { own = "hot_alpha"; other = "hot_bravo" }
      else if (comm == "phase_bravo") { own = "hot_bravo"; other = "hot_alpha" }
      else next
      total[comm] += n
      if (index(line, ";" other)) { wrong += n; print "  named from the other library: " $0 }
      else if (index(line, ";" own)) right[comm] += n }
    END { for (c in total) printf "  %s (%s): %d samples, %d in its own library\n", c, mode, total[c], right[c]
          exit !(wrong == 0 && total["phase_alpha"] >= 50 && total["phase_bravo"] >= 50 &&
                 right["phase_alpha"] * 10 >= total["phase_alpha"] * 9 &&
                 right["phase_bravo"] * 10 >= total["phase_bravo"] * 9) }' "$WORK/$mode.folded" ||
    fail "--call-graph $mode: samples not named from the library mapped when they were taken"
done
echo "ok"
