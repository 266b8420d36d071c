#!/bin/bash
# e2e (issue 34.4): a JVM's compiled code has no CFI and, by default, no
# frame pointers: stacks end at the first JIT frame. The summary must say
# which flags fix it (a perf-map agent, -XX:+PreserveFramePointer), and with
# -XX:+PreserveFramePointer the frame-pointer fallback must carry the stacks
# through the compiled and interpreted Java frames to the thread's root.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
command -v java >/dev/null && command -v javac >/dev/null || skip "no java/javac (a JDK)"

cat >"$WORK/Spin.java" <<'JAVA'
public class Spin {
  static long work(int n) {
    long s = 0;
    for (int i = 0; i < n; i++) s += (long) i * i % 7;
    return s;
  }
  public static void main(String[] args) {
    long end = System.currentTimeMillis() + Long.parseLong(args[0]) * 1000, total = 0;
    while (System.currentTimeMillis() < end) total += work(100000);
    if (total == 42) System.out.println(total);
  }
}
JAVA
javac -d "$WORK" "$WORK/Spin.java" || fail "javac failed"

# shares FOLDED: "TOTAL TRUNCATED% ROOTED%" of the JVM's samples (rooted: the
# stack reaches the thread's start, clone3/start_thread, untruncated).
shares() {
  awk '{ n = $NF; s = substr($0, 1, length($0) - length(n) - 1); t += n
         if (s ~ /\[truncated\]/) tr += n; else if (s ~ /;(clone3?|start_thread);/) r += n }
       END { printf "%d %d %d\n", t, t ? 100 * tr / t : 0, t ? 100 * r / t : 0 }' "$1"
}

echo "java without -XX:+PreserveFramePointer: stacks end in compiled code, the hint says why"
profile_run "$WORK/plain.folded" "$WORK/plain.err" -F 199 -- java -cp "$WORK" Spin 3
read -r total truncated rooted < <(shares "$WORK/plain.folded")
echo "  $total samples: $truncated% truncated, $rooted% rooted"
grep -E '^gsymprof: Java \(pid [0-9]+\):.*-XX:\+PreserveFramePointer' "$WORK/plain.err" ||
  { cat "$WORK/plain.err" >&2; fail "no hint naming -XX:+PreserveFramePointer"; }
(( total >= 100 )) || fail "only $total samples of the JVM"

echo "java -XX:+PreserveFramePointer: stacks go through the Java frames"
profile_run "$WORK/fp.folded" "$WORK/fp.err" -F 199 -- java -XX:+PreserveFramePointer -cp "$WORK" Spin 3
read -r total truncated rooted < <(shares "$WORK/fp.folded")
echo "  $total samples: $truncated% truncated, $rooted% rooted"
(( total >= 100 && rooted >= 90 )) ||
  { sort -t' ' -k2 -nr "$WORK/fp.folded" | head -3 | cut -c1-600 >&2; fail "$rooted% rooted with frame pointers (want >= 90%)"; }
grep -q 'frame-pointer fallback: [0-9]* frames' "$WORK/fp.err" || fail "the summary does not count the frame-pointer steps"
echo ok
