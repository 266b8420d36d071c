#!/bin/bash
# e2e (issue 28): off-CPU and wall-clock profiling of a fixture that measures
# its own waits (tests/e2e/fixtures/offcpu_waits.c: a 200 ms nanosleep loop,
# a pipe read woken every 100 ms, a contended mutex held 150 ms at a time,
# and a CPU burner). `profile --off-cpu`: each wait function's off-CPU
# nanoseconds (the lines whose stack holds it) are within 10% of what the
# fixture measured around its blocking calls; without frame pointers the
# default (dwarf) stacks are complete (comm;clone3;start_thread;<thread>;
# <wait function>); the kernel frames name the wait (do_nanosleep/hrtimer_nanosleep,
# pipe_read, a futex wait) leafward of the user frames; the reason frame is
# [off-cpu S]; with frame pointers (--call-graph fp, which loses the caller
# of libc's syscall wrappers) the thread's start routine carries the same
# time. `profile --wall -F 999`: burn()'s on-CPU samples (1e9/999 ns each)
# are within 10% of its thread CPU time, the waits still within 10%, and the
# burning thread's on-CPU + runqueue time is its lifetime. Skipped (77) while
# `gsymprof profile --help` has no --off-cpu, and on a kernel that gsymprof
# says lacks what --off-cpu needs.
set -u
source "$(dirname "$0")/fixtures/profile_common.bash"
require_live_profiling
"$GSYMPROF" profile --help 2>&1 | grep -q -- '--off-cpu' || skip "gsymprof profile has no --off-cpu yet"
if ! "$GSYMPROF" profile --off-cpu -o "$WORK/probe.folded" -- true 2>"$WORK/probe.err"; then
  grep -q 'kernel lacks' "$WORK/probe.err" && skip "$(grep -m1 'kernel lacks' "$WORK/probe.err")"
  cat "$WORK/probe.err" >&2
  fail "gsymprof profile --off-cpu -- true failed"
fi

SECONDS_RUN=3
for kind in fp nofp; do
  mkdir -p "$WORK/$kind"
  fp_flag=-fno-omit-frame-pointer
  [[ $kind == nofp ]] && fp_flag=-fomit-frame-pointer
  gcc -O2 -g "$fp_flag" -pthread "$FIXTURES/offcpu_waits.c" -o "$WORK/$kind/offcpu_waits" ||
    fail "cannot build the $kind off-CPU fixture"
done
# The FP-less build really has no frame pointer in the wait functions.
objdump -d --no-show-raw-insn "$WORK/nofp/offcpu_waits" |
  awk '/<wait_sleep>:/ {f = 1; next} f && /^$/ {exit} f' | grep -q 'mov *%rsp,%rbp' &&
  fail "the -fomit-frame-pointer build still sets up a frame pointer in wait_sleep"

WAITS=(wait_sleep wait_pipe wait_lock)
declare -A THREAD=([wait_sleep]=sleeper [wait_pipe]=pipe_reader [wait_lock]=lock_waiter [burn]=burner)
declare -A KERNEL=(
  [wait_sleep]='(hrtimer_nanosleep|do_nanosleep)'
  [wait_pipe]='(anon_pipe_read|pipe_read)'
  [wait_lock]='(futex_wait|__futex_wait|futex_wait_queue|futex_do_wait)'
)

# measured FILE NAME: the fixture's own nanoseconds for NAME.
measured() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }

# ns FOLDED STACK_REGEX KIND: nanoseconds of the lines whose frames match
# STACK_REGEX; KIND off: lines ending in a reason frame ([off-cpu X] or
# [runqueue]), on: lines without one, any: all.
ns() {
  awk -v re="$2" -v kind="$3" '
    { n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
      if (s !~ re) next
      k = split(s, f, ";"); reason = f[k] ~ /^[[](off-cpu [A-Z]+|runqueue)[]]$/
      if (kind == "any" || (kind == "off" && reason) || (kind == "on" && !reason)) t += n }
    END { printf "%.0f\n", t }' "$1"
}

# within NAME GOT WANT PCT: GOT is within PCT% of WANT (printed either way).
within() {
  local name=$1 got=$2 want=$3 pct=$4
  awk -v n="$name" -v g="$got" -v w="$want" -v p="$pct" 'BEGIN {
    d = w ? 100 * (g - w) / w : 0
    printf "  %-28s profile %13.0f ns, measured %13.0f ns (%+.1f%%)\n", n, g, w, d
    exit !(w > 0 && d <= p && d >= -p) }' || return 1
}

# share FOLDED STACK_REGEX WITHIN_REGEX: percent of the time of the lines
# matching STACK_REGEX that is in lines matching WITHIN_REGEX too.
share() {
  awk -v re="$2" -v re2="$3" '
    { n = $NF; s = substr($0, 1, length($0) - length(n) - 1)
      if (s !~ re) next; t += n; if (s ~ re2) h += n }
    END { printf "%.0f\n", t ? 100 * h / t : 0 }' "$1"
}

# Kernel frames are leafward of the user frames, and only the reason frame
# follows them.
check_order() {
  local bad
  bad=$(awk '{ s = substr($0, 1, length($0) - length($NF) - 1); n = split(s, f, ";"); k = 0
      for (i = 2; i <= n; i++) {
        if (f[i] ~ /_\[k\]$/) k = 1
        else if (f[i] ~ /^[[](off-cpu [A-Z]+|runqueue)[]]$/) { if (i != n) { print; break } }
        else if (k && f[i] != "[short waits]") { print; break } } }' "$1" | head -3)
  [[ -z $bad ]] || fail "$2: a user frame leafward of a kernel frame, or a reason frame not last: $bad"
}

echo "--off-cpu, no frame pointers, default call graph"
F=$WORK/nofp.folded
profile_run "$F" "$WORK/nofp.err" --off-cpu --svg "$WORK/nofp.svg" -o "$F" -- \
  "$WORK/nofp/offcpu_waits" "$SECONDS_RUN" "$WORK/nofp.measured"
cat "$WORK/nofp.measured"
grep -Eq ' [0-9]+$' "$F" || { cat "$F" >&2; fail "no folded stacks"; }
check_order "$F" "--off-cpu"
for w in "${WAITS[@]}"; do
  re=";$w;"
  within "$w" "$(ns "$F" "$re" any)" "$(measured "$WORK/nofp.measured" "$w")" 10 ||
    { grep -- "$re" "$F" | sort -t' ' -k2 -nr | head -5 >&2; fail "$w: off-CPU time off by more than 10%"; }
  # The root is the comm: the process's or the thread's name (the fixture
  # names its threads after their start routines).
  complete=$(share "$F" "$re" "^(offcpu_waits|${THREAD[$w]});clone3;start_thread;${THREAD[$w]};$w;")
  kernel=$(share "$F" "$re" ";${KERNEL[$w]}_\\[k\\];")
  sleeping=$(share "$F" "$re" ";[[]off-cpu S[]]\$")
  echo "  $w: $complete% complete (clone3;start_thread;${THREAD[$w]};$w), $kernel% through ${KERNEL[$w]}, $sleeping% [off-cpu S]"
  (( complete >= 95 )) || { grep -- "$re" "$F" | head -5 >&2; fail "$w: stacks without frame pointers are incomplete"; }
  (( kernel >= 90 )) || { grep -- "$re" "$F" | head -5 >&2; fail "$w: the kernel frames do not name the wait (${KERNEL[$w]})"; }
  (( sleeping >= 95 )) || { grep -- "$re" "$F" | head -5 >&2; fail "$w: the reason frame is not [off-cpu S]"; }
done
[[ -s $WORK/nofp.svg ]] && grep -q 'wait_sleep' "$WORK/nofp.svg" || fail "--svg drew no off-CPU flame graph"
grep -q 'Off-CPU Time Flame Graph' "$WORK/nofp.svg" || fail "the off-CPU flame graph is not titled as such"
grep -Eq '<title>wait_sleep \([0-9,]+ ns, ' "$WORK/nofp.svg" || fail "the off-CPU flame graph does not count nanoseconds"

echo "record --off-cpu, then symbolize: the same waits, offline"
"$GSYMPROF" record --off-cpu -o "$WORK/waits.gsymcap" -- \
  "$WORK/nofp/offcpu_waits" "$SECONDS_RUN" "$WORK/rec.measured" 2>"$WORK/rec.err" ||
  { cat "$WORK/rec.err" >&2; fail "record --off-cpu failed"; }
grep -q '"clock": "off-cpu"' "$WORK/waits.gsymcap" || fail "the capture does not say it measures off-CPU time"
F=$WORK/rec.folded
"$GSYMPROF" symbolize "$WORK/waits.gsymcap" -o "$F" 2>"$WORK/sym.err" || { cat "$WORK/sym.err" >&2; fail "symbolize failed"; }
check_order "$F" "symbolize"
for w in "${WAITS[@]}"; do
  re=";$w;"
  within "$w (offline)" "$(ns "$F" "$re" off)" "$(measured "$WORK/rec.measured" "$w")" 10 ||
    { grep -- "$re" "$F" | sort -t' ' -k2 -nr | head -5 >&2; fail "$w: off-CPU time symbolized offline off by more than 10%"; }
done

echo "--off-cpu --call-graph fp, frame pointers (the start routine carries the wait)"
F=$WORK/fp.folded
profile_run "$F" "$WORK/fp.err" --off-cpu --call-graph fp -o "$F" -- \
  "$WORK/fp/offcpu_waits" "$SECONDS_RUN" "$WORK/fp.measured"
cat "$WORK/fp.measured"
check_order "$F" "--off-cpu --call-graph fp"
for w in "${WAITS[@]}"; do
  re=";${THREAD[$w]};"
  within "${THREAD[$w]} ($w)" "$(ns "$F" "$re" any)" "$(measured "$WORK/fp.measured" "$w")" 10 ||
    { grep -- "$re" "$F" | sort -t' ' -k2 -nr | head -5 >&2; fail "$w: off-CPU time (fp) off by more than 10%"; }
done

echo "--wall -F 999, no frame pointers"
F=$WORK/wall.folded
HZ=999
profile_run "$F" "$WORK/wall.err" --wall -F $HZ -o "$F" -- \
  "$WORK/nofp/offcpu_waits" "$SECONDS_RUN" "$WORK/wall.measured"
cat "$WORK/wall.measured"
check_order "$F" "--wall"
on=$(ns "$F" ';burn(;|$)' on)
samples=$(awk -v n="$on" -v hz=$HZ 'BEGIN { printf "%.0f", n * hz / 1e9 }')
echo "  burn: $samples on-CPU samples"
within "burn on-CPU" "$on" "$(measured "$WORK/wall.measured" burn)" 10 ||
  { grep ';burn' "$F" | sort -t' ' -k2 -nr | head -5 >&2; fail "burn: on-CPU time off by more than 10%"; }
# The burning thread never sleeps: on CPU, or preempted ([runqueue]), from
# its start to the stop (SECONDS_RUN). Preemptions shorter than
# --off-cpu-min-us are in the process's "[short waits];[runqueue]" line
# (with the other threads' short runqueue waits: a few ms; its root frame
# may be the process's name or a thread's: only the fixture is profiled).
burner=$(ns "$F" ';burner;' any)
short_rq=$(ns "$F" '^[^;]*;[[]short waits[]];[[]runqueue[]]$' any)
echo "  burner: $burner ns in its stacks, $short_rq ns in the process's short runqueue waits"
within "burner on CPU + runqueue" "$((burner + short_rq))" "${SECONDS_RUN}000000000" 10 ||
  { grep -E ';burner;|short waits' "$F" | sort -t' ' -k2 -nr | head -8 >&2; fail "burner: wall-clock time is not its lifetime"; }
grep -Eq ';burn;.*[[]off-cpu S[]] [0-9]+$' "$F" && fail "burn() shows interruptible sleeps"
for w in "${WAITS[@]}"; do
  re=";$w;"
  within "$w (wall)" "$(ns "$F" "$re" off)" "$(measured "$WORK/wall.measured" "$w")" 10 ||
    { grep -- "$re" "$F" | sort -t' ' -k2 -nr | head -5 >&2; fail "$w: off-CPU time (--wall) off by more than 10%"; }
done
echo "ok"
