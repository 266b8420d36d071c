#!/bin/bash
# e2e: mappings learnt from the kernel as they happen. A fork/exec storm of
# processes that live a few milliseconds (sha1sum | cut) exits before any
# /proc/PID/maps could be read; the side-band (exec, mmap, fork, exit events
# in the samples' ring buffer) still names their frames. Live with `-- CMD`,
# live system-wide (filtered to those comms), and through record + symbolize:
# at least 95% of sha1sum/cut samples must have a named frame (perf record
# --call-graph dwarf: 100% here; before the side-band: 43-57%), and at least
# 90% a named user frame, of the samples that have a user stack: not those
# taken in the kernel inside execve (bprm_execve: the registers are the old
# program's, the memory the new one's) or exit (exit_mmap: no memory left).
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v sha1sum >/dev/null && command -v cut >/dev/null || skip "no sha1sum/cut"

STORM='for i in $(seq 150); do sha1sum /usr/bin/ls | cut -c1-4 >/dev/null; done'

# check_named FOLDED WHAT: the share of sha1sum/cut samples with a named frame.
check_named() {
  awk -v what="$2" '
    { n = $NF; line = $0; sub(/ [0-9]+$/, "", line); k = split(line, f, ";")
      comm = f[1]; if (comm != "sha1sum" && comm != "cut") next
      total += n; named = 0; user_named = 0
      if (line !~ /;(bprm_execve|exit_mmap)_\[k\]/) with_user += n
      for (i = 2; i <= k; ++i) {
        if (f[i] == "[unknown]" || f[i] == "[truncated]" || f[i] ~ /\+0x[0-9a-f]+$/ || f[i] ~ /^\[kernel\]/) continue
        named = 1; if (f[i] !~ /_\[k\]$/) user_named = 1
      }
      if (named) good += n; if (user_named) user_good += n }
    END { printf "  %s: %d sha1sum/cut samples, %d (%.1f%%) with a named frame, %d of %d with a user stack (%.1f%%) with a named user frame\n",
                 what, total, good, total ? 100 * good / total : 0, user_good, with_user, with_user ? 100 * user_good / with_user : 0
          exit !(total >= 100 && good * 100 >= 95 * total && user_good * 100 >= 90 * with_user) }' "$1" ||
    { grep -E '^(sha1sum|cut);' "$1" | grep -v -E ';(main|_start);' | head -20 >&2
      fail "$2: fewer than 95% of the storm's samples are named"; }
}

profile_run "$WORK/cmd.folded" "$WORK/cmd.err" -F 999 -- bash -c "$STORM"
check_named "$WORK/cmd.folded" "profile -- CMD"
grep -q 'side-band events lost' "$WORK/cmd.err" && { cat "$WORK/cmd.err" >&2; fail "side-band events lost"; }

# System-wide: the storm runs beside the profiler, which knows nothing of it
# (twice as long, so a slow machine still gives 100 samples of it).
bash -c "${STORM/seq 150/seq 300}" &
storm=$!
profile_run "$WORK/all.folded" "$WORK/all.err" -F 999 -d 3
wait "$storm"
check_named "$WORK/all.folded" "profile (system-wide)"

"$GSYMPROF" record -F 999 -o "$WORK/storm.capture" -- bash -c "$STORM" 2>"$WORK/record.err" ||
  { cat "$WORK/record.err" >&2; fail "record failed"; }
"$GSYMPROF" symbolize "$WORK/storm.capture" -o "$WORK/symbolized.folded" 2>"$WORK/symbolize.err" ||
  { cat "$WORK/symbolize.err" >&2; fail "symbolize failed"; }
check_named "$WORK/symbolized.folded" "record + symbolize"
echo "ok"
